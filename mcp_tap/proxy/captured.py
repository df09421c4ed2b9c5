"""One finished exchange as the recording process sees it, decoded from the forwarder's
raw hand-off: header maps, body captures and digests, SSE events with their arrival time.

:func:`materialize` is the one place a :class:`~mcp_tap.proxy.capture.RawExchange` (raw
chunks and time stamps, all the forwarding process keeps) becomes a :class:`Captured`,
so the forwarder never splits a head, hashes a body or decodes a stream.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.sse import SSEDecoder, SSEError, SSEEvent
from mcp_tap.proxy.capture import (
    BodyCapture,
    Head,
    Pairs,
    RawExchange,
    new_body_hash,
)
from mcp_tap.proxy.splice.head import HEAD_END


@dataclass
class TimedEvent:
    """One SSE event and when it arrived at the tap (wall-clock seconds)."""

    at: float
    event: SSEEvent


@dataclass(slots=True)
class Captured:
    """Everything the forwarder saw of one exchange (raw; nothing redacted yet).

    Slotted: one is made per exchange, and storing 37 slots costs a third of building the
    37-key instance dict it had (see :func:`materialize_state`).
    """

    hop: str
    upstream: str
    client: str
    user_agent: str
    http_method: str
    path: str
    request_headers: HeaderMap
    forwarded_headers: HeaderMap
    request: BodyCapture
    received_at: float
    trace_id: str
    forwarded_at: float | None = None
    status: int | None = None
    response_headers: HeaderMap = field(default_factory=HeaderMap)
    response: BodyCapture | None = None
    first_byte_at: float | None = None
    end_at: float | None = None
    sse: list[TimedEvent] = field(default_factory=list)
    sse_dropped: int = 0
    sse_incomplete: bool = False
    egress_status: int | None = None
    egress_headers: HeaderMap = field(default_factory=HeaderMap)
    egress_bytes: int = 0
    egress_digest: str = ""
    sent_at: float | None = None
    egress_end_at: float | None = None
    client_gone: bool = False
    tap_error: dict[str, Any] | None = None
    session_version: str | None = None  # the legacy session's version, as known at ingress
    handover_key: int | None = None  # pairs begin and record in the recording process
    head_changes: list[dict[str, str]] = field(default_factory=list)  # request head, upstream
    egress_changes: list[dict[str, str]] = field(default_factory=list)  # response head
    request_framing: str = ""
    response_framing: str = ""
    upgraded: bool = False
    interim: list[int] = field(default_factory=list)
    tunnel: tuple[BodyCapture, BodyCapture] | None = None  # client to origin, and back

    def __reduce__(self) -> tuple[object, ...]:
        # A capture pickled (by a tool or a test; the hand-off sends RawExchange.state()).
        # Flat tuples pickle in C; a frozen slots dataclass (HeaderMap, SSEEvent) would call
        # Python code per object on both sides. Same fields, same values after the trip.
        state = {name: getattr(self, name) for name in _FIELD_NAMES}
        for name in _HEADER_FIELDS:
            state[name] = state[name].pairs
        state["sse"] = [
            (t.at, t.event.data, t.event.event, t.event.id, t.event.retry) for t in self.sse
        ]
        return (_restored_captured, (state,))


_HEADER_FIELDS = ("request_headers", "forwarded_headers", "response_headers", "egress_headers")
_FIELD_NAMES = tuple(f.name for f in fields(Captured))


def _restored_captured(state: dict[str, Any]) -> Captured:
    """A capture rebuilt from :meth:`Captured.__reduce__`'s state."""
    for name in _HEADER_FIELDS:
        state[name] = HeaderMap(state[name])
    state["sse"] = [
        TimedEvent(at, SSEEvent(data, event, event_id, retry))
        for at, data, event, event_id, retry in state["sse"]
    ]
    cap = Captured.__new__(Captured)
    for name, value in state.items():
        setattr(cap, name, value)
    return cap


# Header maps of the heads seen last, by their raw bytes: one client's requests and one
# origin's answers repeat their heads (a Date changes once a second), and splitting and
# indexing a head costs a hundred times its lookup. A map is immutable and a function of its
# bytes alone, so captures share it; attacker-chosen heads only start the cache over.
_HEADS: dict[Head, HeaderMap] = {}
_MAX_HEADS = 256
# A head line's pair and lower-cased name, by the line (bounded the same way).
_LINES: dict[str, tuple[tuple[str, str], str]] = {}
_MAX_LINES = 4096
_MAX_LINE_CHARS = 256  # so the cache holds at most about a megabyte of lines


def _headers(head: Head | None, same: HeaderMap | None = None) -> HeaderMap:
    """The header map of raw pairs or a raw head, its lookup index built with it; ``same``
    when there are none (the head passed as is)."""
    if head is None:
        assert same is not None
        return same
    try:
        made = _HEADS.get(head)
    except TypeError:  # pairs in lists, not tuples (a caller's own state): not kept
        return _pairs_map(head)  # type: ignore[arg-type]
    if made is not None:
        return made
    made = _head_map(head) if isinstance(head, bytes) else _pairs_map(head)
    if len(_HEADS) >= _MAX_HEADS:
        _HEADS.clear()
    _HEADS[head] = made
    return made


def _pairs_map(pairs: Pairs) -> HeaderMap:
    """The header map of raw byte pairs (a rewritten head, or a caller's own state)."""
    # latin-1 maps every byte, so any header byte survives to evidence and back.
    return _header_map(tuple((name.decode("latin-1"), value.decode("latin-1"))
                             for name, value in pairs))


def _head_map(raw: bytes) -> HeaderMap:
    """``_header_map(head_pairs(raw))``, split in place when no line is folded (the usual head)."""
    text = raw.decode("latin-1")
    if "\r\n " in text or "\r\n\t" in text:
        return _header_map(head_pairs(raw))
    lines = text.split("\r\n")
    del lines[0]  # the request or status line
    del lines[-2:]  # the two empty strings after the last CRLF CRLF
    pairs = []
    index: dict[str, list[str]] = {}
    known_lines = _LINES
    for line in lines:
        # Heads that differ (a Content-Length, a traceparent) still share most lines: a
        # line seen before is one lookup, not a split, a strip and a lower-casing.
        known = known_lines.get(line)
        if known is None:
            name, _, value = line.partition(":")
            known = ((name, value.strip(" \t")), name.lower())
            if len(line) <= _MAX_LINE_CHARS:  # a long line (a token, a cookie) is not kept
                if len(known_lines) >= _MAX_LINES:
                    known_lines.clear()
                known_lines[line] = known
        pair, key = known
        pairs.append(pair)
        values = index.get(key)
        if values is None:
            index[key] = [pair[1]]
        else:
            values.append(pair[1])
    headers = _new_header_map(HeaderMap)
    _set_slot(headers, "pairs", tuple(pairs))
    _set_slot(headers, "_index", index)
    return headers


def _header_map(pairs: tuple[tuple[str, str], ...]) -> HeaderMap:
    """``HeaderMap(pairs)`` with the index its first lookup would build, made here in one
    loop (the judge looks names up in every map; no dataclass ``__init__`` call)."""
    index: dict[str, list[str]] = {}
    for name, value in pairs:
        key = name.lower()
        values = index.get(key)
        if values is None:
            index[key] = [value]
        else:
            values.append(value)
    headers = _new_header_map(HeaderMap)
    _set_slot(headers, "pairs", pairs)
    _set_slot(headers, "_index", index)
    return headers


_new_header_map = _new_timed = object.__new__
_set_slot = object.__setattr__  # HeaderMap is frozen: its own __init__ sets slots this way


def head_pairs(raw: bytes) -> tuple[tuple[str, str], ...]:
    """The header pairs of a raw head, decoded: ``parse_head(raw).pairs()`` with each byte
    string decoded as latin-1, but decoded once, as a whole (latin-1 maps byte to character
    one to one, so cutting the text cuts exactly where cutting the bytes would)."""
    parts = raw.decode("latin-1")[: -len(HEAD_END)].split("\r\n")
    lines: list[str] = []
    for part in parts[1:]:
        if part[:1] in (" ", "\t") and lines:
            lines[-1] += "\r\n" + part  # obs-fold: kept with its field, as parse_head does
        else:
            lines.append(part)
    out = []
    for line in lines:
        name, _, value = line.partition(":")
        out.append((name, value.strip(" \t")))
    return tuple(out)


_new_captured = object.__new__


def _captured_of(flat: tuple[Any, ...]) -> tuple[
    Captured, Head, Head | None, Head, Head | None, bytes | None,
]:
    """A new :class:`Captured` (no ``__init__``) holding the flat fields of a handed-over
    flat tuple that pass on unchanged, and the raw ones (:data:`RAW_ONLY` but ``session``)
    that :func:`materialize_state` decodes into the others.

    :func:`~mcp_tap.proxy.capture.unpack_flat` written out into locals, as the recorder
    pays for it per exchange (a :class:`Flat` built and read by name cost 0.7 us more:
    docs/benchmark.md); tests/proxy/test_handoff_layout.py ties both to the layout, field
    by field."""
    (hop, upstream, client, http_method, path, received_at, forwarded_at, first_byte_at,
     sent_at, end_at, status, egress_bytes, request_framing, response_framing, request_pairs,
     response_pairs, rare) = flat
    if rare is None:  # every rare field has its usual value (RARE_USUAL; [] when LISTED)
        (client_gone, egress_body, egress_changes, egress_end_at, egress_pairs, egress_status,
         forwarded_pairs, head_changes, interim, session_version, tap_error, trace_id,
         upgraded) = (False, None, [], end_at, None, status, None, [], [], None, None, "",
                      False)
    else:
        (client_gone, egress_body, egress_changes, egress_end_at, egress_pairs, egress_status,
         forwarded_pairs, head_changes, interim, _, session_version, tap_error, trace_id,
         upgraded) = rare
        if egress_changes is None:
            egress_changes = []
        if head_changes is None:
            head_changes = []
        if interim is None:
            interim = []
    cap = _new_captured(Captured)
    cap.client = client
    cap.client_gone = client_gone
    cap.egress_bytes = egress_bytes
    cap.egress_changes = egress_changes
    cap.egress_end_at = egress_end_at
    cap.egress_status = egress_status
    cap.end_at = end_at
    cap.first_byte_at = first_byte_at
    cap.forwarded_at = forwarded_at
    cap.handover_key = None  # the message carries it (the recording process sets it)
    cap.head_changes = head_changes
    cap.hop = hop
    cap.http_method = http_method
    cap.interim = interim
    cap.path = path
    cap.received_at = received_at
    cap.request_framing = request_framing
    cap.response_framing = response_framing
    cap.sent_at = sent_at
    cap.session_version = session_version
    cap.status = status
    cap.tap_error = tap_error
    cap.trace_id = trace_id
    cap.upgraded = upgraded
    cap.upstream = upstream
    return cap, request_pairs, forwarded_pairs, response_pairs, egress_pairs, egress_body


RAW_ONLY = ("request_pairs", "forwarded_pairs", "response_pairs", "egress_pairs",
            "egress_body", "session")
"""Fields of :class:`~mcp_tap.proxy.capture.Flat` that are raw: :func:`materialize_state`
decodes them into other fields of :class:`Captured` (``session`` only names the session to
the recorder)."""


def materialize(raw: RawExchange, max_sse_events: int) -> Captured:
    """Turn the forwarder's raw capture into the :class:`Captured` the judge reads
    (:func:`materialize_state` of its hand-off state)."""
    return materialize_state(raw.state(), max_sse_events)


def materialize_state(state: tuple[Any, ...], max_sse_events: int) -> Captured:
    """The :class:`Captured` of a handed-over :meth:`RawExchange.state`, built straight from
    it (no :class:`RawExchange` or :class:`RawBody` in between).

    Header maps, digests, decoding and SSE events are made here, in the recording process,
    not on the forwarding path.
    """
    flat, request, response, tunnel = state
    # Every field of Captured, each set once (its generated __init__ takes 40 arguments one
    # by one; tests check the fields are all here): the flat fields as they came, the raw
    # ones replaced by what they decode to.
    cap, request_pairs, forwarded, response_pairs, egress, egress_body = _captured_of(flat)
    request_headers = _headers(request_pairs)
    response_headers = _headers(response_pairs)
    index = request_headers._index
    user_agent = index.get("user-agent")  # type: ignore[union-attr]
    cap.user_agent = user_agent[0] if user_agent else ""
    cap.request_headers = request_headers
    cap.forwarded_headers = request_headers if forwarded is None else _headers(forwarded)
    cap.request = BodyCapture.from_state(request, _encoding(request_headers))
    cap.response_headers = response_headers
    cap.egress_headers = response_headers if egress is None else _headers(egress)
    cap.sse = []
    cap.sse_dropped = 0
    cap.sse_incomplete = False
    cap.tunnel = None
    if response is None:
        cap.response = None
        cap.egress_digest = ""
    else:
        encoding = _encoding(response_headers)
        body = cap.response = BodyCapture.from_state(response, encoding)
        cap.egress_digest = body.digest  # spliced: the client got the origin's bytes
        if response_headers.content_type() == "text/event-stream" and encoding in (
            "", "identity"
        ):
            _decode_sse(cap, response, max_sse_events)
    if tunnel is not None and cap.upgraded:
        cap.tunnel = (BodyCapture.from_state(tunnel[0], ""),
                      BodyCapture.from_state(tunnel[1], ""))
    if egress_body is not None:  # the tap's own answer (502/503/504/400)
        digest = new_body_hash()
        digest.update(egress_body)
        cap.egress_digest = digest.hexdigest()
    return cap


def _encoding(headers: HeaderMap) -> str:
    """The first Content-Encoding value ("" when there is none)."""
    values = headers._index.get("content-encoding")  # type: ignore[union-attr]
    return (values[0] or "") if values else ""


def _decode_sse(cap: Captured, body: tuple[Any, ...], max_events: int) -> None:
    """The SSE events of the kept response chunks (a body's hand-off state), stamped with
    their chunk's arrival."""
    _, chunks, times, size, ended, _ = body
    decoder = SSEDecoder()
    kept = cap.sse
    try:
        for chunk, at in zip(chunks, times, strict=True):
            for event in decoder.feed(chunk):
                if len(kept) < max_events:
                    # TimedEvent(at, event) without its __init__ call (a frame per event)
                    timed = _new_timed(TimedEvent)
                    timed.__dict__ = {"at": at, "event": event}
                    kept.append(timed)
                else:
                    cap.sse_dropped += 1
        if ended and size <= sum(map(len, chunks)):  # its end seen, nothing cut off
            end = cap.end_at or 0.0
            for event in decoder.close():
                cap.sse.append(TimedEvent(end, event))
            cap.sse_incomplete = decoder.pending_incomplete and not cap.sse
    except SSEError:
        cap.sse_incomplete = True
