"""One finished exchange as the recording process sees it, decoded from the forwarder's
raw hand-off: header maps, body captures and digests, SSE events with their arrival time.

:func:`materialize` is the one place a :class:`~mcp_tap.proxy.capture.RawExchange` (raw
chunks and time stamps, all the forwarding process keeps) becomes a :class:`Captured`,
so the forwarder never splits a head, hashes a body or decodes a stream.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any

from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.sse import SSEDecoder, SSEError, SSEEvent
from mcp_tap.proxy.capture import BodyCapture, RawExchange, new_body_hash
from mcp_tap.proxy.splice.head import HEAD_END


@dataclass
class TimedEvent:
    """One SSE event and when it arrived at the tap (wall-clock seconds)."""

    at: float
    event: SSEEvent


@dataclass
class Captured:
    """Everything the forwarder saw of one exchange (raw; nothing redacted yet)."""

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
        state = self.__dict__.copy()
        for name in _HEADER_FIELDS:
            state[name] = state[name].pairs
        state["sse"] = [
            (t.at, t.event.data, t.event.event, t.event.id, t.event.retry) for t in self.sse
        ]
        return (_restored_captured, (state,))


_HEADER_FIELDS = ("request_headers", "forwarded_headers", "response_headers", "egress_headers")


def _restored_captured(state: dict[str, Any]) -> Captured:
    """A capture rebuilt from :meth:`Captured.__reduce__`'s state."""
    for name in _HEADER_FIELDS:
        state[name] = HeaderMap(state[name])
    state["sse"] = [
        TimedEvent(at, SSEEvent(data, event, event_id, retry))
        for at, data, event, event_id, retry in state["sse"]
    ]
    cap = Captured.__new__(Captured)
    cap.__dict__.update(state)
    return cap


def _headers(
    pairs: tuple[tuple[bytes, bytes], ...] | bytes | None, same: HeaderMap | None = None
) -> HeaderMap:
    """The header map of raw pairs or a raw head; ``same`` when there are none (the head
    passed as is)."""
    if pairs is None:
        assert same is not None
        return same
    if isinstance(pairs, bytes):
        return HeaderMap(head_pairs(pairs))
    # latin-1 maps every byte, so any header byte survives to evidence and back.
    return HeaderMap(tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in pairs))


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


# Fields a RawExchange hands on to the Captured unchanged.
_SAME_FIELDS = (
    "hop", "upstream", "client", "http_method", "path", "received_at", "trace_id",
    "forwarded_at", "status", "first_byte_at", "end_at", "egress_status", "egress_bytes",
    "sent_at", "egress_end_at", "client_gone", "tap_error", "session_version", "handover_key",
    "head_changes", "egress_changes", "request_framing", "response_framing", "upgraded",
    "interim",
)
_SAME = operator.attrgetter(*_SAME_FIELDS)  # all of them at once, in C


def materialize(raw: RawExchange, max_sse_events: int) -> Captured:
    """Turn the forwarder's raw capture into the :class:`Captured` the judge reads.

    Header maps, digests, decoding and SSE events are made here, in the recording process,
    not on the forwarding path.
    """
    request_headers = _headers(raw.request_pairs)
    response_headers = _headers(raw.response_pairs)
    # Every field of Captured, set at once (its generated __init__ takes 40 arguments one by
    # one; tests check the fields are all here).
    state = dict(zip(_SAME_FIELDS, _SAME(raw), strict=True))
    state.update(
        user_agent=request_headers.get("user-agent") or "",
        request_headers=request_headers,
        forwarded_headers=_headers(raw.forwarded_pairs, request_headers),
        request=BodyCapture.from_raw(raw.request, request_headers.get("content-encoding") or ""),
        response_headers=response_headers,
        egress_headers=_headers(raw.egress_pairs, response_headers),
        response=None,
        sse=[],
        sse_dropped=0,
        sse_incomplete=False,
        egress_digest="",
        tunnel=None,
    )
    cap = Captured.__new__(Captured)
    cap.__dict__.update(state)
    if raw.response is not None:
        encoding = response_headers.get("content-encoding") or ""
        cap.response = BodyCapture.from_raw(raw.response, encoding)
        if response_headers.content_type() == "text/event-stream" and encoding in (
            "", "identity"
        ):
            _decode_sse(cap, raw, max_sse_events)
    if raw.tunnel is not None and raw.upgraded:
        cap.tunnel = (BodyCapture.from_raw(raw.tunnel[0], ""),
                      BodyCapture.from_raw(raw.tunnel[1], ""))
    if raw.egress_body is not None:
        digest = new_body_hash()
        digest.update(raw.egress_body)
        cap.egress_digest = digest.hexdigest()
    elif cap.response is not None:
        cap.egress_digest = cap.response.digest  # spliced: the client got the origin's bytes
    return cap


def _decode_sse(cap: Captured, raw: RawExchange, max_events: int) -> None:
    """The SSE events of the kept response chunks, stamped with their chunk's arrival."""
    assert raw.response is not None
    decoder = SSEDecoder()
    body = raw.response
    try:
        for chunk, at in zip(body.chunks, body.times, strict=True):
            for event in decoder.feed(chunk):
                if len(cap.sse) < max_events:
                    cap.sse.append(TimedEvent(at, event))
                else:
                    cap.sse_dropped += 1
        if body.ended and not body.truncated:
            end = cap.end_at or 0.0
            for event in decoder.close():
                cap.sse.append(TimedEvent(end, event))
            cap.sse_incomplete = decoder.pending_incomplete and not cap.sse
    except SSEError:
        cap.sse_incomplete = True
