"""A client connection released from a hold (see mcp_tap.proxy.holdback) gets a fresh head
clock: a head timer that came due while the tap was not reading does not close it before
the tap has read what waited in the kernel."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

from mcp_tap.proxy.options import load_options
from mcp_tap.proxy.splice.client import ClientConnection
from mcp_tap.proxy.splice.hop import HopCore


class _Transport:
    def __init__(self) -> None:
        self.closed = False
        self.reading = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def write(self, data: bytes) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True


class _Recorder:
    def begin(self, raw: Any) -> None:
        pass

    def record(self, raw: Any) -> None:
        pass


def _connection(head_timeout_s: float) -> tuple[ClientConnection, _Transport]:
    opts = load_options(None, env={}, listen="127.0.0.1:0", upstream="http://127.0.0.1:9")
    opts = replace(opts, listener=replace(opts.listener, head_timeout_s=head_timeout_s))
    hop = HopCore("tap", "http://127.0.0.1:9", opts, _Recorder(), False)  # type: ignore[arg-type]
    conn = ClientConnection(hop)
    transport = _Transport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    return conn, transport


async def test_a_head_timer_due_as_the_hold_ends_does_not_close_the_connection() -> None:
    conn, transport = _connection(60.0)
    conn.hold_reading()
    assert not transport.reading
    conn.head_timer.deadline = time.monotonic() - 1  # came due while held
    conn.release_reading()
    assert transport.reading
    conn.head_timer._check()  # the loop timer, already due, runs right after the release
    assert not transport.closed and conn.head_timer.running
    conn.connection_lost(None)


async def test_an_idle_connection_still_closes_after_the_head_timeout() -> None:
    conn, transport = _connection(0.02)
    conn.hold_reading()
    conn.release_reading()
    for _ in range(100):
        await asyncio.sleep(0.01)
        if transport.closed:
            break
    assert transport.closed
    conn.connection_lost(None)
