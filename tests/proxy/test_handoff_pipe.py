"""The hand-off's frame written to a real pipe: prefix and payload by one ``writev`` when
nothing is queued, and through the transport (buffered, in order) when the pipe is full."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from mcp_tap.proxy.capture import RawBody, RawExchange
from mcp_tap.proxy.handoff import FrameDecoder
from mcp_tap.proxy.metrics import Metrics
from mcp_tap.proxy.options import load_options
from mcp_tap.proxy.worker import ProcessRecorder


def _exchange(size: int) -> RawExchange:
    body = RawBody(1 << 22)
    body.feed(b"x" * size, time.time())
    body.ended = True
    return RawExchange("tap", "http://127.0.0.1:9", "127.0.0.1", "POST", "/mcp",
                       b"POST /mcp HTTP/1.1\r\nHost: a\r\n\r\n", body, time.time())


async def _recorder(tmp_path: Path) -> tuple[ProcessRecorder, int]:
    opts = load_options(None, env={}, listen="127.0.0.1:0", upstream="http://127.0.0.1:9")
    recorder = ProcessRecorder(opts, tmp_path / "ev", Metrics())  # its process never starts
    loop = asyncio.get_running_loop()
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    recorder._transport, _ = await loop.connect_write_pipe(  # as _start_process connects it
        asyncio.Protocol, os.fdopen(write_fd, "wb", buffering=0))
    recorder._pipe_fd = write_fd
    recorder._loop = loop
    return recorder, read_fd


def _read_all(read_fd: int, decoder: FrameDecoder) -> list[tuple[object, ...]]:
    messages: list[tuple[object, ...]] = []
    os.set_blocking(read_fd, False)
    while True:
        try:
            data = os.read(read_fd, 1 << 20)
        except BlockingIOError:
            return messages
        for batch in decoder.feed(data):
            messages += batch


async def test_a_frame_goes_whole_by_writev(tmp_path: Path) -> None:
    recorder, read_fd = await _recorder(tmp_path)
    try:
        for size in (10, 300):
            recorder.begin(raw := _exchange(size))
            recorder.record(raw)
        recorder._flush()
        assert recorder._transport is not None
        assert recorder._transport.get_write_buffer_size() == 0  # all sent at once
        decoder = FrameDecoder()
        messages = _read_all(read_fd, decoder)
        assert decoder.frames == 1 and decoder.bad == 0 and decoder.pending == 0
        assert [m[0] for m in messages] == ["begun", "record", "record"]
        assert messages[0] == ("begun", 0, 2)
    finally:
        assert recorder._transport is not None
        recorder._transport.close()
        os.close(read_fd)


async def test_frames_a_full_pipe_cannot_take_follow_in_order(tmp_path: Path) -> None:
    recorder, read_fd = await _recorder(tmp_path)
    transport = recorder._transport
    assert transport is not None
    try:
        for i in range(3):  # each frame bigger than a pipe holds: partial writes, then queued
            recorder.begin(raw := _exchange(200_000 + i))
            recorder.record(raw)
            recorder._flush()
        assert transport.get_write_buffer_size() > 0
        decoder = FrameDecoder()
        messages: list[tuple[object, ...]] = []
        for _ in range(200):
            messages += _read_all(read_fd, decoder)
            if decoder.frames == 3 and not transport.get_write_buffer_size():
                break
            await asyncio.sleep(0.01)
        messages += _read_all(read_fd, decoder)
        assert decoder.frames == 3 and decoder.bad == 0 and decoder.pending == 0
        records = [m for m in messages if m[0] == "record"]
        assert [m[1] for m in records] == [0, 1, 2]
        restored = [RawExchange.restored(m[2]) for m in records]  # type: ignore[arg-type]
        assert [r.request.size for r in restored] == [200_000, 200_001, 200_002]
    finally:
        transport.close()
        os.close(read_fd)
