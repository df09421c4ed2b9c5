"""Frames of the hand-off pipe between the forwarding process and the recording process.

One frame per batch (a list of message tuples): a 4-byte big-endian length, then the batch.
The batch is encoded with :mod:`marshal` when it can be: the messages are plain tuples of
bytes, str, ints, floats, None, lists and small dicts (``RawExchange.state``), which marshal
encodes several times faster than pickle, in C, with no memo. Anything marshal refuses goes
as a pickle instead, flagged by the top bit of the length (so a frame holds at most 2 GiB;
a batch is one event-loop iteration's captures, each body capped, and a bigger one goes as
several frames). Both ends are the same
Python (the recording process is spawned from the forwarder's interpreter), which marshal
requires.

:class:`FrameDecoder` is the recording side: fed what the pipe gives, in pieces of any size,
it returns every whole frame's batch. A frame that does not decode is counted in
:attr:`FrameDecoder.bad` and skipped (the frames after it still decode: the length prefix
says where the next one starts); :attr:`FrameDecoder.pending` is the size of a frame cut
short, when the pipe ends in the middle of one.
"""

from __future__ import annotations

import marshal
import pickle
from typing import Any, Final

HEADER = 4
"""Bytes of a frame's length prefix."""
PICKLED = 1 << 31
"""The length prefix's flag for a pickled batch (marshal could not encode it)."""
_LENGTH = PICKLED - 1  # the length prefix's length bits
MAX_FRAME = _LENGTH
"""The largest frame payload (a bigger batch is split into several frames)."""

Batch = list[tuple[Any, ...]]

# -- the messages of a batch -------------------------------------------------------------
# Plain tuples tagged by their first item (marshal encodes exact tuples only: a NamedTuple
# would send the whole frame as a pickle). Built by the constructors below (worker.py), read
# against the same tags (recording_process._Handover.handle); tests/proxy/
# test_handoff_layout.py checks each tag has a constructor and a branch there.

RECORD: Final = "record"
"""``(RECORD, key, state)``: a finished exchange (``RawExchange.state``) and its key."""
BEGUN: Final = "begun"
"""``(BEGUN, first, end)``: the exchanges of keys ``first`` to ``end - 1`` began."""
BEGIN: Final = "begin"
"""``(BEGIN, key, hop, session)``: the exchange ``key`` names a session."""
DROP: Final = "drop"
"""``(DROP, key)``: the exchange ``key`` is counted lost by the forwarder, not in flight."""
LOST: Final = "lost"
"""``(LOST, count, reason)``: captures the forwarder could not hand over."""
HOLD: Final = "hold"
"""``(HOLD,)``: the forwarder holds its clients back; answer with a report."""
HELD: Final = "held"
"""``(HELD, pauses, seconds)``: the forwarder's pauses, for the bundle's closing."""
STOP: Final = "stop"
"""``(STOP,)``: the last message."""
TAGS: Final = (RECORD, BEGUN, BEGIN, DROP, LOST, HOLD, HELD, STOP)


def record(key: int | None, state: tuple[Any, ...]) -> tuple[str, int | None, tuple[Any, ...]]:
    """A finished exchange's message (``state``: its ``RawExchange.state()``)."""
    return (RECORD, key, state)


def begun(first: int, end: int) -> tuple[str, int, int]:
    """The message announcing the exchanges of keys ``first`` to ``end - 1``."""
    return (BEGUN, first, end)


def begin(key: int, hop: str, session: str) -> tuple[str, int, str, str]:
    """The message of an exchange that names a session (before its record)."""
    return (BEGIN, key, hop, session)


def drop(key: int | None) -> tuple[str, int | None]:
    """The message of an announced exchange that will not be handed over."""
    return (DROP, key)


def lost(count: int, reason: str) -> tuple[str, int, str]:
    """The message of captures lost before the hand-over, and why."""
    return (LOST, count, reason)


def hold() -> tuple[str]:
    """The message marking a pause of the forwarder's clients."""
    return (HOLD,)


def held(pauses: int, seconds: float) -> tuple[str, int, float]:
    """The message of the forwarder's pauses since it started."""
    return (HELD, pauses, seconds)


def stop() -> tuple[str]:
    """The last message of the hand-off."""
    return (STOP,)


def encode(batch: Batch) -> bytes:
    """One frame: the length prefix and the batch (marshal, else pickle)."""
    return b"".join(frame_parts(batch))


def frame_parts(batch: Batch) -> list[bytes]:
    """:func:`encode`'s bytes in pieces (each frame's prefix, then its payload): written
    with one ``writev``, the payload is not copied behind its prefix first."""
    try:
        payload = marshal.dumps(batch)
        flag = 0
    except ValueError:  # an object marshal does not know
        payload = pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)
        flag = PICKLED
    if len(payload) > MAX_FRAME:
        if len(batch) < 2:
            raise ValueError(f"a hand-off message of {len(payload)} bytes exceeds {MAX_FRAME}")
        half = len(batch) // 2  # frames are taken in order: two frames, same messages
        return frame_parts(batch[:half]) + frame_parts(batch[half:])
    return [(len(payload) | flag).to_bytes(HEADER, "big"), payload]


class FrameDecoder:
    """Cuts whole frames off the bytes read from the pipe and decodes them."""

    __slots__ = ("_buffer", "bad", "frames")

    def __init__(self) -> None:
        self._buffer = bytearray()
        self.frames = 0  # frames decoded
        self.bad = 0  # frames that did not decode (skipped)

    def feed(self, data: bytes) -> list[Batch]:
        """The batches of every frame completed by ``data`` (in order)."""
        buffer = self._buffer
        buffer += data
        batches: list[Batch] = []
        at, size = 0, len(buffer)
        while size - at >= HEADER:
            prefix = int.from_bytes(buffer[at : at + HEADER], "big")
            end = at + HEADER + (prefix & _LENGTH)
            if end > size:
                break
            batch = _decode(buffer, at + HEADER, end, pickled=bool(prefix & PICKLED))
            at = end
            if batch is None:
                self.bad += 1
                continue
            self.frames += 1
            batches.append(batch)
        if at:
            del buffer[:at]
        return batches

    @property
    def pending(self) -> int:
        """Bytes of a frame not yet whole (at the pipe's end: a frame cut short)."""
        return len(self._buffer)


def _decode(buffer: bytearray, start: int, end: int, *, pickled: bool) -> Batch | None:
    """The batch in ``buffer[start:end]`` (read in place), None when it does not decode."""
    with memoryview(buffer) as whole, whole[start:end] as payload:
        try:
            batch = pickle.loads(payload) if pickled else marshal.loads(payload)
        except Exception:  # noqa: BLE001 - a bad frame must not stop the recording
            return None
    return batch if isinstance(batch, list) else None
