"""Incremental Server-Sent Events decoder (WHATWG EventSource parsing) and a wire encoder.

The decoder is sans-IO: feed it the bytes of a ``text/event-stream`` body in whatever chunks
the network delivered, and it returns the events completed so far. It follows the
WHATWG "interpreting an event stream" rules, with two deliberate deviations that evidence
needs, both documented on :class:`SSEDecoder`:

* an event's ``id`` is the ``id`` field of *that* event block (``None`` when it has none),
  not the spec's sticky "last event ID" (that one is :attr:`SSEDecoder.last_event_id`);
* a block carrying an ``id`` but no ``data`` field is dispatched (spec: dropped), because the
  legacy MCP priming event must be visible in evidence however a server spells it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final

import orjson

from mcp_tap.core.fastinit import fast_init, new_twin

_MIB: Final = 1024 * 1024
_BOM: Final = b"\xef\xbb\xbf"
_LF: Final = 0x0A
# One line terminator: CRLF, a lone CR or a lone LF (the three the WHATWG grammar allows).
# Line terminators are ASCII, and ASCII bytes never occur inside a multi-byte UTF-8
# sequence, so splitting the raw bytes before decoding cannot cut a character in half.
_EOL: Final = re.compile(rb"\r\n|\r|\n")
_TEXT_EOL: Final = re.compile(r"\r\n|\r|\n")
_DIGITS: Final = frozenset("0123456789")


class SSEError(ValueError):
    """An event stream the decoder refuses to buffer: a line or an event over its limit."""


class _SSEEventTwin:
    """SSEEvent's layout (fast_init checks it): make_sse_event builds one, then retypes it."""

    __slots__ = ("data", "event", "id", "retry")


def make_sse_event(
    data: str, event: str | None = None, id: str | None = None, retry: int | None = None,
) -> SSEEvent:
    """``SSEEvent(...)`` without ``type.__call__``."""
    made = new_twin(_SSEEventTwin)
    made.data = data
    made.event = event
    made.id = id
    made.retry = retry
    made.__class__ = SSEEvent
    built: SSEEvent = made
    return built


@fast_init(make_sse_event)  # made per exchange: see core/fastinit.py
@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event.

    ``data`` is the ``data`` lines joined with ``"\\n"``; ``event`` ``None`` means the default
    type ``message`` (an empty ``event:`` field is normalised to ``None`` too); ``id`` is the
    ``id`` field of this event block, ``None`` when the block had none (``""`` when it had an
    empty one); ``retry`` is the last valid ``retry`` field of this block, if any.
    """

    data: str
    event: str | None = None
    id: str | None = None
    retry: int | None = None


class SSEDecoder:
    """Incremental WHATWG event-stream decoder with bounded memory.

    Counters and flags for evidence:

    * ``comments``: comment lines seen (``:`` keep-alives included);
    * ``invalid_utf8``: some line was not valid UTF-8 and was decoded with U+FFFD;
    * ``pending_incomplete``: set by :meth:`close` when trailing data without the final blank
      line was discarded (the spec discards it; the evidence should say so);
    * ``last_event_id``: the spec's sticky last event ID, updated when an event block ends;
    * ``retry``: the last valid ``retry`` value seen anywhere in the stream.

    Deviation from the spec, on purpose: a block with an ``id`` field but no ``data`` field
    is dispatched as ``SSEEvent(data="", id=...)``. The spec drops blocks whose data buffer is
    empty; MCP's legacy priming event (an id and empty data) must stay visible in evidence
    even from a server that omits the ``data:`` line. (``id: X`` + ``data:`` is dispatched by
    the spec itself.) Blocks with neither ``data`` nor ``id`` are still dropped.

    A line longer than ``max_line`` bytes, or an event whose data exceeds ``max_event``
    characters, raises :class:`SSEError`; the decoder is then unusable and the stream should
    be abandoned.
    """

    def __init__(self, *, max_line: int = 16 * _MIB, max_event: int = 64 * _MIB) -> None:
        """Create a decoder for one stream, with limits on one line and one event's data."""
        if max_line < 1 or max_event < 1:
            raise ValueError("max_line and max_event must be positive")
        self.max_line = max_line
        self.max_event = max_event
        self.comments = 0
        self.invalid_utf8 = False
        self.pending_incomplete = False
        self.last_event_id = ""
        self.retry: int | None = None
        # Bytes of the line being received; bounded by max_line.
        self._partial = bytearray()
        # The previous chunk ended in CR: an LF starting the next chunk ends no new line.
        self._after_cr = False
        # No line processed yet: only the very first line may lose a leading BOM.
        self._at_start = True
        self._closed = False
        self._reset_block()

    def _reset_block(self) -> None:
        """Forget the fields of the current event block."""
        self._data: list[str] = []
        self._data_size = 0
        self._event: str | None = None
        self._id: str | None = None
        self._block_retry: int | None = None
        self._block_open = False

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Consume the next bytes of the stream and return the events they completed."""
        if self._closed:
            raise RuntimeError("feed() after close()")
        out: list[SSEEvent] = []
        if not chunk:
            return out
        start = 0
        if self._after_cr:
            self._after_cr = False
            if chunk[0] == _LF:
                start = 1
        # 13 (CR) as an int: ``b"\r" in chunk`` first tries its operand as an int and
        # builds and drops a TypeError per test.
        if not self._partial and 13 not in chunk and len(chunk) <= self.max_line:
            # The common chunk: LF line ends only, no line carried over, no line over the
            # limit possible. One split in C instead of a regex match per line.
            lines = (chunk[start:] if start else chunk).split(b"\n")
            rest = lines.pop()
            for line in lines:
                self._line(line, out)
            self._partial += rest
            return out
        for match in _EOL.finditer(chunk, start):
            piece = chunk[start : match.start()]
            if len(self._partial) + len(piece) > self.max_line:
                raise SSEError(f"line longer than {self.max_line} bytes")
            if self._partial:
                self._partial += piece
                line = bytes(self._partial)
                self._partial.clear()
            else:
                line = piece
            self._line(line, out)
            start = match.end()
        rest = chunk[start:]
        if len(self._partial) + len(rest) > self.max_line:
            raise SSEError(f"line longer than {self.max_line} bytes")
        self._partial += rest
        # A chunk ending in CR ended its line already; remember it so that a following LF
        # (the second half of a CRLF split across chunks) does not end an empty line too.
        self._after_cr = chunk.endswith(b"\r")
        return out

    def close(self) -> list[SSEEvent]:
        """End the stream: discard an incomplete event (per spec) and return ``[]``.

        Sets :attr:`pending_incomplete` when something was discarded: bytes after the last
        line terminator, or field lines not yet followed by the blank line that ends an event.
        """
        if self._closed:
            return []
        self._closed = True
        rest = bytes(self._partial)
        if self._at_start and rest.startswith(_BOM):
            rest = rest[len(_BOM) :]
        self.pending_incomplete = bool(rest) or self._block_open
        self._partial.clear()
        self._reset_block()
        return []

    def _line(self, raw: bytes, out: list[SSEEvent]) -> None:
        """Interpret one complete line (terminator removed)."""
        if self._at_start:
            self._at_start = False
            if raw.startswith(_BOM):
                raw = raw[len(_BOM) :]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            self.invalid_utf8 = True
            text = raw.decode("utf-8", errors="replace")
        if not text:
            self._dispatch(out)
            return
        if text[0] == ":":
            self.comments += 1
            return
        self._block_open = True
        name, colon, value = text.partition(":")
        if colon and value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data_size += len(value) + 1
            if self._data_size > self.max_event:
                raise SSEError(f"event data longer than {self.max_event} characters")
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            # Spec: an id containing NUL is ignored entirely (it could not be echoed back).
            if "\0" not in value:
                self._id = value
        elif name == "retry":
            self._set_retry(value)
        # Any other field name is ignored, per spec.

    def _set_retry(self, value: str) -> None:
        """Apply a ``retry`` field: only a non-empty run of ASCII digits counts."""
        if not value or not _DIGITS.issuperset(value):
            return
        try:
            millis = int(value)
        except ValueError:
            # More digits than int() converts (sys.get_int_max_str_digits): no sane delay,
            # so it is ignored like any other unusable retry value.
            return
        self.retry = millis
        self._block_retry = millis

    def _dispatch(self, out: list[SSEEvent]) -> None:
        """End the current block at a blank line, emitting an event if it has data or an id."""
        if self._id is not None:
            self.last_event_id = self._id
        if self._data or self._id is not None:
            out.append(make_sse_event(
                "\n".join(self._data), self._event or None, self._id, self._block_retry))
        self._reset_block()


def encode_event(
    data: str,
    *,
    event: str | None = None,
    id: str | None = None,  # shadows the builtin on purpose: the SSE field is "id"
    retry: int | None = None,
) -> bytes:
    """Return one wire event (LF line endings, ending with the blank line) for ``data``.

    Each line of ``data`` becomes one ``data:`` line; CRLF and CR inside ``data`` become line
    breaks too, so they decode as ``"\\n"``. A space always follows the colon so that a value
    starting with a space survives the decoder's removal of one. ``event`` and ``id`` must
    not contain CR or LF, ``id`` not NUL (a decoder would ignore it), ``retry`` must be >= 0;
    otherwise :class:`ValueError`. An empty ``event`` decodes as ``None`` (the default type).
    """
    lines: list[str] = []
    if event is not None:
        if _TEXT_EOL.search(event):
            raise ValueError("event type must not contain CR or LF")
        lines.append(f"event: {event}")
    if id is not None:
        if _TEXT_EOL.search(id) or "\0" in id:
            raise ValueError("event id must not contain CR, LF or NUL")
        lines.append(f"id: {id}")
    if retry is not None:
        if retry < 0:
            raise ValueError("retry must be >= 0")
        lines.append(f"retry: {retry}")
    lines.extend(f"data: {line}" for line in _TEXT_EOL.split(data))
    return ("\n".join(lines) + "\n\n").encode("utf-8")


def unbatched(events: Iterable[SSEEvent]) -> Iterator[SSEEvent]:
    """The events of a 2025-03-26 stream with each batched event (its data a JSON array)
    split into one event per message: there a server's responses, requests and
    notifications on an SSE stream MAY be batched (2025-03-26 transports "Sending Messages
    to the Server" 6, "Listening for Messages from the Server" 4)."""
    for event in events:
        data = event.data
        if data[:1] == "[" or data.lstrip()[:1] == "[":
            try:
                items = orjson.loads(data)
            except ValueError:
                items = None
            if isinstance(items, list) and items:
                for item in items:
                    yield SSEEvent(orjson.dumps(item).decode(), event.event, event.id, event.retry)
                continue
        yield event
