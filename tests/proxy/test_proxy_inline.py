"""Inline recording (``[recording] mode = "inline"``): each loop iteration's exchanges are
recorded as one batch after that iteration's reads, and a legacy session is snapshotted in
its place among them."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from mcp_tap.evidence import EvidenceWriter
from mcp_tap.evidence.reader import read_bundle
from mcp_tap.proxy.capture import RawBody, RawExchange
from mcp_tap.proxy.inline import InlineRecording
from mcp_tap.proxy.metrics import Metrics
from mcp_tap.proxy.options import load_options
from mcp_tap.proxy.recorder import BatchSink, Recorder

LEGACY = "2025-11-25"


class _CountingWriter(EvidenceWriter):
    """A real evidence writer that notes the size of every batch it is handed."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.batches: list[int] = []

    def submit_many(self, records: Sequence[dict[str, Any]], *, owned: bool = False) -> bool:
        self.batches.append(len(records))
        return super().submit_many(records, owned=owned)


def _body(value: dict[str, Any]) -> RawBody:
    body = RawBody(1 << 16)
    body.feed(orjson.dumps(value), time.time())
    body.ended = True
    return body


def _exchange(request: dict[str, Any], session: str | None = None,
              answer: dict[str, Any] | None = None, answer_session: str = "") -> RawExchange:
    head = b"POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
    head += b"Accept: application/json, text/event-stream\r\n"
    if session is not None:
        head += f"Mcp-Session-Id: {session}\r\nMCP-Protocol-Version: {LEGACY}\r\n".encode()
    now = time.time()
    raw = RawExchange("tap", "http://127.0.0.1:9", "127.0.0.1", "POST", "/mcp",
                      head + b"\r\n", _body(request), now)
    raw.session = session
    raw.forwarded_at = raw.first_byte_at = raw.end_at = raw.sent_at = raw.egress_end_at = now
    if answer is not None:
        raw.status = raw.egress_status = 200
        response = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        if answer_session:
            response += f"Mcp-Session-Id: {answer_session}\r\n".encode()
        raw.response_pairs = response + b"\r\n"
        raw.response = _body(answer)
        raw.egress_bytes = raw.response.size
    return raw


def _initialize(session: str) -> RawExchange:
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}}
    result = {"protocolVersion": LEGACY, "capabilities": {},
              "serverInfo": {"name": "s", "version": "1"}}
    return _exchange(request, answer={"jsonrpc": "2.0", "id": 1, "result": result},
                     answer_session=session)


def _tools_list(session: str | None = None) -> RawExchange:
    return _exchange({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, session=session,
                     answer={"jsonrpc": "2.0", "id": 2, "result": {"tools": []}})


def _inline(tmp_path: Path) -> tuple[InlineRecording, _CountingWriter]:
    opts = load_options(None, env={}, listen="127.0.0.1:0", upstream="http://127.0.0.1:9")
    writer = _CountingWriter(tmp_path / "ev")
    writer.start(inline=True)  # written at submit: the test reads the bundle at once
    sink = BatchSink(writer)
    return InlineRecording(Recorder(opts, sink, Metrics(), time.time), sink), writer


async def _iterations(n: int = 4) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


class TestInlineRecording:
    async def test_one_iteration_is_one_batch(self, tmp_path: Path) -> None:
        """The exchanges that end in one loop iteration reach the writer as one batch."""
        inline, writer = _inline(tmp_path)
        for _ in range(5):
            inline.record(_tools_list())
        assert writer.batches == []  # not before the batch
        await _iterations()
        inline.record(_tools_list())
        await _iterations()
        writer.close()
        assert writer.batches == [5, 1]
        kinds = [r["kind"] for r in read_bundle(tmp_path / "ev", lenient=True).records]
        assert kinds.count("exchange") == 6

    async def test_the_batch_comes_after_the_reads_of_the_next_iteration(
            self, tmp_path: Path) -> None:
        """A request that arrived as an answer ended is read before the judging."""
        inline, writer = _inline(tmp_path)
        loop = asyncio.get_running_loop()
        order: list[str] = []
        ours, theirs = socket.socketpair()
        ours.setblocking(False)

        def readable() -> None:
            ours.recv(16)
            order.append("read")

        def answer_ended() -> None:
            inline.record(_tools_list())
            theirs.send(b"x")

        original = inline.flush

        def flush() -> None:
            order.append("batch")
            original()

        inline.flush = flush  # type: ignore[method-assign]  # notes when the batch runs
        loop.add_reader(ours.fileno(), readable)
        try:
            loop.call_soon(answer_ended)
            for _ in range(20):
                await asyncio.sleep(0.01)
                if "batch" in order:
                    break
        finally:
            loop.remove_reader(ours.fileno())
            ours.close()
            theirs.close()
        writer.close()
        assert order == ["read", "batch"]
        assert writer.batches == [1]

    async def test_a_begin_behind_a_waiting_batch_sees_what_it_teaches(
            self, tmp_path: Path) -> None:
        """A legacy request begun while its session's initialize waits for the batch gets
        the negotiated version, as if each had been recorded at once."""
        inline, writer = _inline(tmp_path)
        inline.record(_initialize("s-1"))
        follow = _tools_list(session="s-1")
        inline.begin(follow)
        assert follow.session_version is None  # snapshotted in its place, not yet
        await _iterations()
        assert follow.session_version == LEGACY
        # Nothing waiting: the snapshot is taken at once, from what is known.
        again = _tools_list(session="s-1")
        inline.begin(again)
        assert again.session_version == LEGACY
        writer.close()

    async def test_flush_records_what_waits(self, tmp_path: Path) -> None:
        """The shutdown's flush records a batch whose iteration has not come yet."""
        inline, writer = _inline(tmp_path)
        inline.record(_tools_list())
        inline.record(_tools_list())
        inline.flush()
        assert writer.batches == [2]
        inline.flush()  # nothing left: no empty batch
        assert writer.batches == [2]
        writer.close()
