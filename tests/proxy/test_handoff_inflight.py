"""Begun exchanges travel as one key range per frame (plus a ``begin`` for one that names a
session): the recording process still knows every exchange in flight, and takes a legacy
session's version where the exchange began, not where a later record left it."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from mcp_tap.proxy.capture import RawBody, RawExchange
from mcp_tap.proxy.handoff import FrameDecoder
from mcp_tap.proxy.metrics import Metrics
from mcp_tap.proxy.options import load_options
from mcp_tap.proxy.recording_process import _MAX_PENDING_BEGINS, _Handover
from mcp_tap.proxy.worker import ProcessRecorder


class _Pipe:
    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.frames.append(data)

    def is_closing(self) -> bool:
        return False


class _Recorder:
    """The recording process's recorder, reduced to what the hand-over asks of it: a legacy
    session's version moves on with every record of that session."""

    def __init__(self) -> None:
        self.options = load_options(None, env={}, listen="127.0.0.1:0",
                                    upstream="http://127.0.0.1:9")
        self.versions: dict[str, int] = {}
        self.recorded: list[tuple[int | None, str | None]] = []

    def session_version(self, hop: str, session: str) -> str | None:
        version = self.versions.get(session)
        return None if version is None else f"v{version}"

    def record(self, cap: Any) -> None:
        self.recorded.append((cap.handover_key, cap.session_version))
        if cap.http_method == "POST":  # (what an initialize answer would do)
            self.versions["s"] = self.versions.get("s", 0) + 1


def _exchange(session: str | None = None) -> RawExchange:
    body = RawBody(64)
    body.ended = True
    raw = RawExchange("tap", "http://127.0.0.1:9", "127.0.0.1", "POST", "/mcp",
                      b"POST /mcp HTTP/1.1\r\nHost: a\r\n\r\n", body, time.time())
    raw.session = session
    return raw


def _process_recorder(tmp_path: Path) -> tuple[ProcessRecorder, _Pipe]:
    opts = load_options(None, env={}, listen="127.0.0.1:0", upstream="http://127.0.0.1:9")
    recorder = ProcessRecorder(opts, tmp_path / "ev", Metrics())  # its process never starts
    pipe = _Pipe()
    recorder._transport = pipe  # type: ignore[assignment]
    recorder._loop = asyncio.get_running_loop()
    return recorder, pipe


def _handed(pipe: _Pipe, handover: _Handover) -> list[list[tuple[Any, ...]]]:
    decoder, batches = FrameDecoder(), []
    for frame in pipe.frames:
        for batch in decoder.feed(frame):
            batches.append(batch)
            handover.handle(batch)
    pipe.frames.clear()
    return batches


async def test_exchanges_without_a_session_are_in_flight_until_recorded(tmp_path: Path) -> None:
    recorder, pipe = _process_recorder(tmp_path)
    target = _Recorder()
    handover = _Handover(target, None)  # type: ignore[arg-type]
    first = [_exchange() for _ in range(5)]
    for raw in first:
        recorder.begin(raw)
    recorder.record(first[1])
    recorder._flush()
    [batch] = _handed(pipe, handover)
    assert batch[0] == ("begun", 0, 5) and [m[0] for m in batch] == ["begun", "record"]
    assert len(handover.sessions) == 4  # begun, not recorded: what an abrupt end states
    # A frame with nothing begun carries no range; one with only begins still goes.
    recorder.record(first[0])
    recorder._flush()
    assert _handed(pipe, handover) == [[("record", 0, first[0].state())]]
    more = [_exchange() for _ in range(3)]
    for raw in more:
        recorder.begin(raw)
    recorder._flush()
    assert _handed(pipe, handover) == [[("begun", 5, 8)]]
    assert len(handover.sessions) == 6
    recorder._flush()
    assert pipe.frames == []  # nothing new: no frame
    for raw in first[2:] + more:
        recorder.record(raw)
    recorder._flush()
    _handed(pipe, handover)
    assert handover.sessions == {}
    assert [key for key, _ in target.recorded] == [1, 0, 2, 3, 4, 5, 6, 7]


async def test_a_session_version_is_the_one_known_where_the_exchange_began(
    tmp_path: Path,
) -> None:
    recorder, pipe = _process_recorder(tmp_path)
    target = _Recorder()
    handover = _Handover(target, None)  # type: ignore[arg-type]
    target.versions["s"] = 1
    a, b, c = _exchange("s"), _exchange(), _exchange("s")
    recorder.begin(a)
    recorder.record(a)  # moves the session to v2 ...
    recorder.begin(b)
    recorder.begin(c)  # ... before c began, in the same frame
    recorder._flush()
    [batch] = _handed(pipe, handover)
    assert [m[0] for m in batch] == ["begun", "begin", "record", "begin"]
    assert batch[0] == ("begun", 0, 3)
    assert len(handover.sessions) == 2
    recorder.record(c)
    recorder.record(b)
    recorder._flush()
    _handed(pipe, handover)
    assert target.recorded == [(0, "v1"), (2, "v2"), (1, None)]
    assert handover.sessions == {}


async def test_begins_dropped_with_a_dead_recording_process_are_not_announced_later(
    tmp_path: Path,
) -> None:
    recorder, pipe = _process_recorder(tmp_path)
    handover = _Handover(_Recorder(), None)  # type: ignore[arg-type]
    recorder.begin(_exchange())
    transport, recorder._transport = recorder._transport, None
    recorder._flush()  # no recording process: the batch (and its begins) go nowhere
    recorder._transport = transport
    recorder.begin(_exchange())
    recorder._flush()
    assert _handed(pipe, handover) == [[("begun", 1, 2)]]
    assert list(handover.sessions) == [1]


def test_the_in_flight_count_stays_bounded() -> None:
    handover = _Handover(_Recorder(), None)  # type: ignore[arg-type]
    handover.handle([("begun", 0, _MAX_PENDING_BEGINS + 5)])
    assert len(handover.sessions) == _MAX_PENDING_BEGINS
    assert next(iter(handover.sessions)) == 5  # the oldest went first
