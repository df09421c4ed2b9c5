"""When the forwarder hands captures over: after the reads of the next loop iteration (a
request that arrived as an answer ended is forwarded before the hand-off's encoding and pipe
write), and each capture as the plain values it had when it was recorded."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

from mcp_tap.proxy.capture import RawBody, RawExchange
from mcp_tap.proxy.handoff import FrameDecoder
from mcp_tap.proxy.metrics import Metrics
from mcp_tap.proxy.options import load_options
from mcp_tap.proxy.worker import ProcessRecorder


class _Pipe:
    """The hand-off pipe's transport: frames kept, and when they came noted in ``order``."""

    def __init__(self, order: list[str]) -> None:
        self.order = order
        self.frames: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.order.append("flush")
        self.frames.append(data)

    def is_closing(self) -> bool:
        return False


def _recorder(tmp_path: Path, order: list[str]) -> tuple[ProcessRecorder, _Pipe]:
    opts = load_options(None, env={}, listen="127.0.0.1:0", upstream="http://127.0.0.1:9")
    recorder = ProcessRecorder(opts, tmp_path / "ev", Metrics())  # its process never starts
    pipe = _Pipe(order)
    recorder._transport = pipe  # type: ignore[assignment]
    recorder._loop = asyncio.get_running_loop()
    return recorder, pipe


def _exchange() -> RawExchange:
    body = RawBody(64)
    body.feed(b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}', time.time())
    body.ended = True
    return RawExchange("tap", "http://127.0.0.1:9", "127.0.0.1", "POST", "/mcp",
                       b"POST /mcp HTTP/1.1\r\nHost: a\r\n\r\n", body, time.time())


async def test_the_flush_comes_after_the_reads_the_next_iteration_found(tmp_path: Path) -> None:
    order: list[str] = []
    recorder, pipe = _recorder(tmp_path, order)
    loop = asyncio.get_running_loop()
    ours, theirs = socket.socketpair()
    ours.setblocking(False)

    def readable() -> None:
        ours.recv(16)
        order.append("read")

    loop.add_reader(ours.fileno(), readable)
    try:
        def answer_ended() -> None:
            # As the end of an answer does: a capture is handed over, and the client's next
            # request is on its way (readable in the next iteration).
            recorder.begin(raw := _exchange())
            recorder.record(raw)
            theirs.send(b"x")

        loop.call_soon(answer_ended)
        for _ in range(20):
            await asyncio.sleep(0.01)
            if "flush" in order:
                break
    finally:
        loop.remove_reader(ours.fileno())
        ours.close()
        theirs.close()
    assert order == ["read", "flush"]
    assert len(pipe.frames) == 1


async def test_a_capture_goes_as_its_plain_values(tmp_path: Path) -> None:
    order: list[str] = []
    recorder, pipe = _recorder(tmp_path, order)
    raw = _exchange()
    recorder.begin(raw)
    recorder.record(raw)
    assert recorder._sent == 1  # counted as handed over when recorded, not when flushed
    recorder._flush()
    [batch] = FrameDecoder().feed(pipe.frames[0])
    assert batch == [("begun", raw.handover_key, raw.handover_key + 1),
                     ("record", raw.handover_key, raw.state())]
    back = RawExchange.restored(batch[1][2])
    assert back.request.chunks == raw.request.chunks and back.request.ended
