"""Back-pressure from the recording hand-off to the clients (``[recording] max_wait_ms``).

A recording process stopped on purpose (SIGSTOP) stands for one that is slow: with a tiny
``queue_size`` the hand-off reaches its high-water mark after a few exchanges. Every test
runs real HTTP on loopback; none asserts a duration (the bounds are either far away or the
test waits for what the bound lets happen).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import signal
import sys
import termios
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from peers import raw_modern_request
from taps import hop_url, records, running_tap, tap_options

from mcp_tap.errors import InputError
from mcp_tap.evidence import read_bundle
from mcp_tap.proxy.holdback import HoldBack
from mcp_tap.proxy.options import RecordingOptions, load_options
from mcp_tap.proxy.server import TapServer
from mcp_tap.proxy.worker import ProcessRecorder

_TIMEOUT = 60.0  # hang guards only
_CLIENTS = 4  # connections at once, each sending its requests one after the other
_PER_CLIENT = 10
_QUEUE = 20  # high water 10, low water 7: the in-flight requests (4) always fit below 20


def _options(tmp_path: Path, upstream: str, max_wait_ms: int) -> Any:
    return tap_options(
        tmp_path, upstream=upstream, admin=True,
        recording=RecordingOptions(mode="process", queue_size=_QUEUE, max_wait_ms=max_wait_ms),
    )


async def _until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(_TIMEOUT):  # a hang guard, not a timing assertion
        while not condition():
            await asyncio.sleep(0.005)


class _Load:
    """``_CLIENTS`` connections, each sending ``_PER_CLIENT`` tools/list requests in turn."""

    def __init__(self, tap: TapServer, *, tolerate_close: bool = False) -> None:
        self.tap = tap
        self.tolerate_close = tolerate_close  # a drain may close a connection between requests
        self.statuses: list[int] = []
        self.ids: list[int] = []

    async def _client(self, n: int) -> None:
        limits = httpx.Limits(max_connections=1)
        async with httpx.AsyncClient(timeout=_TIMEOUT, limits=limits) as client:
            for i in range(_PER_CLIENT):
                rpc_id = n * 1000 + i
                headers, body = raw_modern_request("tools/list", request_id=rpc_id)
                try:
                    answer = await client.post(hop_url(self.tap), headers=headers, json=body)
                except httpx.TransportError:
                    if not self.tolerate_close:
                        raise
                    return
                self.statuses.append(answer.status_code)
                self.ids.append(rpc_id)

    def start(self) -> asyncio.Future[list[None]]:
        return asyncio.gather(*(self._client(n) for n in range(_CLIENTS)))


@contextlib.contextmanager
def _stopped(recorder: ProcessRecorder) -> Iterator[None]:
    """The recording process stopped (SIGSTOP: it takes nothing) until the block ends."""
    pid = recorder.pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def _recorder(tap: TapServer) -> ProcessRecorder:
    assert isinstance(tap.recorder, ProcessRecorder)
    return tap.recorder


async def _get(tap: TapServer, path: str) -> httpx.Response:
    assert tap.admin_address is not None
    host, port = tap.admin_address
    async with httpx.AsyncClient(timeout=_TIMEOUT) as client:
        return await client.get(f"http://{host}:{port}{path}")


async def _metrics(tap: TapServer) -> list[str]:
    return (await _get(tap, "/metrics")).text.splitlines()


def _waiting_unread(tap: TapServer) -> int:
    """Client connections with no exchange in flight and request bytes unread in the kernel."""
    waiting = 0
    for hop in tap.hops:
        for conn in hop.connections:
            sock = conn.transport.get_extra_info("socket") if conn.transport else None
            if conn.exchange is None and sock is not None:
                unread = fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0")
                waiting += int.from_bytes(unread, sys.byteorder) > 0
    return waiting


def _closed(tap: TapServer) -> dict[str, Any]:
    closed: dict[str, Any] = json.loads((tap.bundle_dir / "bundle.json").read_text())["closed"]
    return closed


async def test_a_stall_shorter_than_the_bound_loses_nothing(
    tmp_path: Path, origin_base: str
) -> None:
    """The clients wait while the recording process is stopped; every exchange is recorded."""
    total = _CLIENTS * _PER_CLIENT
    async with running_tap(_options(tmp_path, origin_base, max_wait_ms=60_000)) as tap:
        recorder = _recorder(tap)
        with _stopped(recorder):  # takes nothing from now on
            load = _Load(tap)
            running = load.start()
            await _until(lambda: recorder.holdback.held)
            # Held: no new request is read, only those in flight end (recorded, not lost).
            await _until(lambda: sum(c.exchange is not None for h in tap.hops
                                     for c in h.connections) == 0)
            answered_while_held = len(load.statuses)
            lost_while_held = recorder.lost
            ready = await _get(tap, "/readyz")
        async with asyncio.timeout(_TIMEOUT):
            await running
        metrics = await _metrics(tap)
    recs = records(tap)

    assert lost_while_held == 0 and answered_while_held < total
    assert ready.status_code == 200 and ready.json() == {"ready": True, "problems": []}
    assert load.statuses == [200] * total
    assert [r["kind"] for r in recs] == ["exchange"] * total  # no gap record
    assert sorted(r["rpcId"] for r in recs) == sorted(load.ids)
    assert recorder.lost == 0 and recorder.counters()["lost_total"] == 0
    assert recorder.holdback.pauses >= 1 and recorder.holdback.timeouts == 0
    assert "mcptap_clients_held_total 0.0" not in metrics
    assert any(line.startswith("mcptap_clients_held_total ") for line in metrics)
    assert any(line.startswith("mcptap_clients_held_seconds_total ") for line in metrics)
    held = _closed(tap)["heldBack"]
    assert held["pauses"] == recorder.holdback.pauses and held["seconds"] > 0


async def test_max_wait_zero_counts_losses_as_before(tmp_path: Path, origin_base: str) -> None:
    """``max_wait_ms = 0``: no back-pressure; past queue_size the captures are counted lost."""
    total = _CLIENTS * _PER_CLIENT
    async with running_tap(_options(tmp_path, origin_base, max_wait_ms=0)) as tap:
        recorder = _recorder(tap)
        with _stopped(recorder):
            load = _Load(tap)
            async with asyncio.timeout(_TIMEOUT):
                await load.start()  # every answer while the recording process is stopped
            lost_while_stopped = recorder.lost
        metrics = await _metrics(tap)
    recs = records(tap)

    assert load.statuses == [200] * total
    assert lost_while_stopped == total - _QUEUE
    assert sum(r["kind"] == "exchange" for r in recs) == _QUEUE
    assert [r["lost"] for r in recs if r["kind"] == "gap"] == [total - _QUEUE]
    assert recorder.holdback.pauses == 0
    assert "mcptap_clients_held_total 0.0" in metrics
    assert "heldBack" not in _closed(tap)


async def test_a_stall_past_the_bound_forwards_on_and_states_the_loss(
    tmp_path: Path, origin_base: str
) -> None:
    """Stopped longer than max_wait_ms: forwarding resumes after the bound (every answer
    comes while the recording process is still stopped), one pause only, losses stated."""
    total = _CLIENTS * _PER_CLIENT
    async with running_tap(_options(tmp_path, origin_base, max_wait_ms=200)) as tap:
        recorder = _recorder(tap)
        with _stopped(recorder):
            load = _Load(tap)
            async with asyncio.timeout(_TIMEOUT):
                await load.start()
            lost_while_stopped = recorder.lost
            pauses, timeouts = recorder.holdback.pauses, recorder.holdback.timeouts
            spent = recorder.holdback.spent
        # Caught up: the next report arms the back-pressure again.
        await _until(lambda: not recorder.holdback.spent)
    recs = records(tap)

    assert load.statuses == [200] * total
    assert (pauses, timeouts, spent) == (1, 1, True)  # ran out once, then no new pause
    assert lost_while_stopped == total - _QUEUE
    assert sum(r["kind"] == "exchange" for r in recs) == _QUEUE
    gaps = [r for r in recs if r["kind"] == "gap"]
    assert [(g["lost"], g["reason"]) for g in gaps] == [(total - _QUEUE, "recording queue full")]
    assert _closed(tap)["heldBack"]["pauses"] == 1


async def test_no_pause_while_no_recording_process_runs(
    tmp_path: Path, origin_base: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dead recording process is nobody to wait for: the clients are never held, however
    long the bound, while none runs."""
    async with running_tap(_options(tmp_path, origin_base, max_wait_ms=60_000)) as tap:
        recorder = _recorder(tap)
        start = recorder._start_process
        may_restart = asyncio.Event()

        async def held_off() -> None:  # no new recording process until the load is over
            if not may_restart.is_set():
                raise InputError("held off by the test")
            await start()

        monkeypatch.setattr(recorder, "_start_process", held_off)
        pid = recorder.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        await _until(lambda: recorder._restarting is not None)
        load = _Load(tap)
        async with asyncio.timeout(_TIMEOUT):
            await load.start()
        pauses_while_dead = recorder.holdback.pauses
        may_restart.set()
        await _until(lambda: len(recorder.bundle_dirs) == 2 and recorder._restarting is None)
    recs = [r for b in recorder.bundle_dirs for r in read_bundle(b, lenient=True).records]

    assert load.statuses == [200] * _CLIENTS * _PER_CLIENT
    assert pauses_while_dead == 0
    recorded = sum(r["kind"] == "exchange" for r in recs)
    assert recorded == 0  # none was recorded: every one is in the gap record
    assert sum(r["lost"] for r in recs if r["kind"] == "gap") == len(load.ids)


def test_max_wait_ms_from_toml_and_environment(tmp_path: Path) -> None:
    """``[recording] max_wait_ms``: default 500, TOML, environment, checked bounds."""
    config = tmp_path / "tap.toml"
    config.write_text('[[hop]]\nlisten = "127.0.0.1:0"\nupstream = "http://127.0.0.1:9"\n'
                      "[recording]\nmax_wait_ms = 250\n", encoding="utf-8")
    assert load_options(None, env={}, listen="127.0.0.1:0",
                        upstream="http://127.0.0.1:9").recording.max_wait_ms == 500
    assert load_options(str(config), env={}).recording.max_wait_ms == 250
    env = {"MCP_TAP_RECORDING_MAX_WAIT_MS": "0"}
    assert load_options(str(config), env=env).recording.max_wait_ms == 0
    for bad in ("-1", "60001", "0.5"):
        with pytest.raises(InputError, match=r"max_wait_ms must be an integer"):
            load_options(str(config), env={"MCP_TAP_RECORDING_MAX_WAIT_MS": bad})


async def test_drain_is_not_held_back(tmp_path: Path, origin_base: str) -> None:
    """SIGTERM's drain releases held clients at once (the recording process still stopped,
    the bound a minute away); every request read is answered and recorded."""
    tap = TapServer(_options(tmp_path, origin_base, max_wait_ms=60_000))
    await tap.start()
    stopping: asyncio.Future[None] | None = None
    try:
        recorder = _recorder(tap)
        with _stopped(recorder):
            load = _Load(tap, tolerate_close=True)
            running = load.start()
            await _until(lambda: recorder.holdback.held)
            # Each client's next request waits unread in the kernel (nothing in flight).
            await _until(lambda: _waiting_unread(tap) == _CLIENTS)
            answered_before_drain = len(load.statuses)
            stopping = asyncio.ensure_future(tap.stop())
            await _until(lambda: not recorder.holdback.held)
            released_while_stopped = not stopping.done()
        async with asyncio.timeout(_TIMEOUT):
            await stopping
            await running
    finally:
        if stopping is None:
            await tap.stop()
    recs = records(tap)

    assert released_while_stopped
    # The requests that waited are read and answered, not cut with their idle connection.
    assert len(load.statuses) - answered_before_drain == _CLIENTS
    assert set(load.statuses) <= {200, 503}
    assert sum(r["kind"] == "exchange" for r in recs) == len(load.statuses)
    assert recorder.lost == 0


class _Conn:
    """A stand-in client connection: counts how it is held and released."""

    def __init__(self) -> None:
        self.held = 0

    def hold_reading(self) -> None:
        self.held += 1

    def release_reading(self) -> None:
        self.held -= 1


async def test_a_pause_that_runs_out_spends_only_when_recording_stalled() -> None:
    """HoldBack alone: a pause that ran out with no progress is spent until ``progress``
    captures are taken; one that ran out with progress leaves the back-pressure armed."""
    taken = 0
    hold = HoldBack(0.001, lambda: taken, lambda: 0, progress=4)
    conns = [_Conn(), _Conn()]
    hop = SimpleNamespace(held=False, connections=set(conns))
    hold.hops.append(hop)  # type: ignore[arg-type]
    loop = asyncio.get_running_loop()

    assert hold.hold(loop) and hop.held and [c.held for c in conns] == [1, 1]
    await _until(lambda: not hold.held)  # ran out, nothing taken: stalled
    assert (hold.timeouts, hold.spent, hop.held, [c.held for c in conns]) == (
        1, True, False, [0, 0])
    taken = 3
    assert not hold.hold(loop)  # three taken since: still spent
    taken = 4
    assert hold.hold(loop) and not hold.spent and hold.pauses == 2
    taken = 8  # four more while held: slow, not stalled
    await _until(lambda: not hold.held)
    assert (hold.timeouts, hold.spent) == (2, False)
    assert hold.hold(loop) and hold.pauses == 3  # armed: holds again at once
    hold.stop()
    assert not hold.held and not hold.hold(loop) and [c.held for c in conns] == [0, 0]
    assert hold.seconds > 0


async def test_a_held_request_is_not_taken_for_a_slow_head(
    tmp_path: Path, origin_base: str
) -> None:
    """A request waiting unread while its connection is held outlives head_timeout_s: the
    tap is the one not reading, so the connection is not closed as idle or slow."""
    opts = _options(tmp_path, origin_base, max_wait_ms=60_000)
    # 0.25 s: short beside the hold, long beside a loaded machine's pause between a
    # client's requests (0.05 s cut idle keep-alive connections at load 12)
    opts = replace(opts, listener=replace(opts.listener, head_timeout_s=0.25))
    total = _CLIENTS * _PER_CLIENT
    async with running_tap(opts) as tap:
        recorder = _recorder(tap)
        with _stopped(recorder):
            load = _Load(tap)
            running = load.start()
            await _until(lambda: _waiting_unread(tap) == _CLIENTS)
            await asyncio.sleep(1.0)  # several head timeouts pass while held (not asserted)
            still_open = _waiting_unread(tap)
        async with asyncio.timeout(_TIMEOUT):
            await running
    assert still_open == _CLIENTS
    assert load.statuses == [200] * total
    assert tap.hops[0].counts["head_timeout"] == 0


async def _read_answer(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """One HTTP/1.1 answer with a Content-Length: its status and body."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = next(int(line.split(":", 1)[1]) for line in lines
                  if line.lower().startswith("content-length:"))
    return int(lines[0].split()[1]), await reader.readexactly(length)


async def test_a_request_half_read_when_the_hold_begins_is_read_to_its_end(
    tmp_path: Path, origin_base: str
) -> None:
    """The hold stops reading *new* requests: a request whose head was read and whose body
    is still coming is in flight, and its body is read to its end while the clients are
    held, so its exchange ends (answered and recorded) instead of waiting out the bound.
    The request after it, on the same connection, waits in the kernel's buffer."""
    headers, body = raw_modern_request("tools/list", request_id=7)
    payload = json.dumps(body).encode()
    async with running_tap(_options(tmp_path, origin_base, max_wait_ms=60_000)) as tap:
        recorder = _recorder(tap)
        host, port = tap.addresses[next(iter(tap.addresses))]
        reader, writer = await asyncio.open_connection(host, port)
        fields = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        head = (f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\n{fields}"
                f"Content-Length: {len(payload)}\r\n\r\n").encode()
        writer.write(head + payload[:5])  # the head and the body's first bytes
        await _until(lambda: any(c.exchange is not None for h in tap.hops
                                 for c in h.connections))
        with _stopped(recorder):  # no report that it caught up ends the hold
            assert recorder.holdback.hold(asyncio.get_running_loop())
            writer.write(payload[5:])  # the rest of the body, sent while held
            async with asyncio.timeout(_TIMEOUT):  # a hang guard, not a timing assertion
                status, answer = await _read_answer(reader)
            still_held = recorder.holdback.held  # answered within the hold, not at the bound
            # The next request on the connection is not read while held.
            writer.write(head + payload)
            await _until(lambda: _waiting_unread(tap) == 1)
            recorder.holdback.release()
        async with asyncio.timeout(_TIMEOUT):
            second, _ = await _read_answer(reader)
        writer.close()
    recs = records(tap)

    assert (status, still_held, second) == (200, True, 200)
    assert json.loads(answer)["id"] == 7
    assert [r["kind"] for r in recs] == ["exchange", "exchange"]
