"""One hop's client connection and a pooled upstream connection in-process, on transports
that keep what is written (no socket): the forwarding core driven with bytes, sans-IO.

Used by the splice tests in ``tests/proxy/`` (writes, accepted heads, the state machine)
and by ``bench/micro.py --splice``.
"""

from __future__ import annotations

import time
from typing import Any

from mcp_tap.proxy.capture import RawExchange
from mcp_tap.proxy.options import load_options
from mcp_tap.proxy.splice.client import ClientConnection
from mcp_tap.proxy.splice.framing import HeadMemo
from mcp_tap.proxy.splice.hop import HopCore
from mcp_tap.proxy.splice.upstream import UpstreamConnection

BODY = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
REQUEST = (b"POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
           b"Content-Length: %d\r\n\r\n%s" % (len(BODY), BODY))
ANSWER_BODY = b'{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}'
ANSWER = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
          % (len(ANSWER_BODY), ANSWER_BODY))


class Transport:
    """Keeps every write (the objects themselves)."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        pass

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass


class Recorder:
    """Keeps every finished exchange's capture (``records``); begins are not kept."""

    def __init__(self) -> None:
        self.records: list[RawExchange] = []

    def begin(self, cap: RawExchange) -> None:
        pass

    def record(self, cap: RawExchange) -> None:
        self.records.append(cap)


class Splice:
    """One hop, one client connection, one pooled upstream connection."""

    def __init__(self, heads: HeadMemo | None = None) -> None:
        opts = load_options(None, env={}, listen="127.0.0.1:0", upstream="http://127.0.0.1:1")
        self.recorder = Recorder()
        self.hop = HopCore("tap", "http://127.0.0.1:1", opts, self.recorder, False, time.time)
        if heads is not None:  # what another hop object learnt (as one hop's connections)
            self.hop.heads = heads
        self.client = ClientConnection(self.hop)
        self.down = Transport()
        self.client.connection_made(self.down)  # type: ignore[arg-type]
        self.conn = UpstreamConnection(self.hop.pool)
        self.up = Transport()
        self.conn.connection_made(self.up)  # type: ignore[arg-type]
        self.hop.pool.bound += 1
        self.hop.pool.release(self.conn, reusable=True)

    def close(self) -> None:
        self.client.connection_lost(None)
