"""The gate's parse of a record line: only the members its tallies read, for trusted bundles.

The gate reads a few members of each exchange record (kind, hop, ids, findings, the
answer's status, times, body and events, the request's body and headers); a full parse
builds every header list, digest and note too. :func:`gate_record` decodes a line with
msgspec into plain dicts holding only those members (``msgspec`` checks the whole line's
JSON syntax and skips the rest), about a third cheaper than orjson on the proxy's records.

An answer's JSON-RPC ``result`` is the one big member the gate reads, and only the SDK
differential reads its value: it is taken as raw bytes and decoded once per distinct text
(:class:`~mcp_tap.evidence.known.KnownValues`), so the record holds a shared
:class:`~mcp_tap.evidence.known.KnownJson` there instead of a fresh tree, and the
differential finds its memo entry by those bytes. Of an answer object (``origin.body``, an
SSE event's ``data``) only the members the tallies test are kept (``jsonrpc``, ``id``,
``method``, ``error``, ``result``); any other JSON value there is decoded as is. The
request's headers are needed only for a legacy request's revision: they stay raw
(``msgspec.Raw``) until the SDK differential decodes them.

Like verify's head (:mod:`mcp_tap.evidence.head`) it cannot see a number too large for a
double in a skipped member, so the gate uses it only where verify takes its own fast path:
for a bundle whose ``bundle.json`` verifies under a trusted key (every byte covered by the
signed manifests). A line it cannot vouch for -- not an object of the writer's shape, a
chain field missing or of another type, invalid UTF-8, nesting past msgspec's limit --
gives ``None`` and is parsed fully, as is every gap record.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Required, TypedDict

import msgspec

from mcp_tap.evidence.head import DECODE_ERRORS, valid_utf8
from mcp_tap.evidence.known import KnownValues

# Of a request's _meta only the protocol revision is read (the SDK differential).
_Meta = TypedDict("_Meta", {"io.modelcontextprotocol/protocolVersion": Any}, total=False)


class _Params(TypedDict, total=False):
    _meta: _Meta


class _Request(TypedDict, total=False):
    params: _Params  # only the protocol revision in _meta is read (the SDK differential)


class _Ingress(TypedDict, total=False):
    receivedAt: Any
    body: _Request | None  # an array (a batch) or params by position: parsed fully
    # Read only for a legacy request's revision (the SDK differential): kept as raw bytes,
    # decoded there when needed, not built for every record.
    headers: msgspec.Raw
    truncated: Any


class _Answer(TypedDict, total=False):
    """A JSON-RPC message: what the health window and the SDK differential test of it."""

    jsonrpc: Any
    id: Any
    method: Any
    error: Any
    result: msgspec.Raw  # made a KnownJson by gate_record


# Any JSON value, an object read as an _Answer (msgspec allows one object type in a union).
_AnswerValue = _Answer | list[Any] | str | int | float | bool | None


class _Event(TypedDict, total=False):
    at: Any
    data: _AnswerValue


_EventValue = _Event | list[Any] | str | int | float | bool | None


class _Origin(TypedDict, total=False):
    status: Any
    body: _AnswerValue
    sse: list[_EventValue] | str | int | float | bool | None  # an object: parsed fully
    endAt: Any
    firstByteAt: Any
    truncated: Any
    ended: Any


class _Egress(TypedDict, total=False):
    endAt: Any
    sentAt: Any


_Seq = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]


class GateRecord(TypedDict, total=False):
    """The members of a record the gate's tallies read (see the module docstring)."""

    seq: Required[_Seq]
    prev: Required[str]
    digest: Required[str]
    kind: Required[str]
    hop: Any
    rpcId: Any
    tapError: Any
    findings: Any
    method: Any
    era: Any
    exchangeId: Any
    box: Any
    between: Any
    boxes: Any
    ingress: _Ingress | None
    origin: _Origin | None
    egress: _Egress | None


_decode: Final = msgspec.json.Decoder(GateRecord).decode
_results: Final = KnownValues()


def gate_record(line: bytes | memoryview) -> dict[str, Any] | None:
    """The gate's members of a record line, or None when only a full parse can judge it."""
    return decode_checked(line) if valid_utf8(line) else None


def decode_checked(line: bytes | memoryview) -> dict[str, Any] | None:
    """:func:`gate_record` of a line whose UTF-8 the caller has checked (verify checks each
    block of lines once: the hook it calls)."""
    try:
        record: dict[str, Any] = _decode(line)  # type: ignore[assignment]
    except DECODE_ERRORS:  # the chain fields are Required: missing ones fail here too
        return None
    origin = record.get("origin")
    if origin is None:
        return record
    body = origin.get("body")
    if type(body) is dict and "result" in body:
        known = _results.get(body["result"])
        if known is None:
            return None
        body["result"] = known
    events = origin.get("sse")
    if type(events) is list:
        for event in events:
            data = event.get("data") if type(event) is dict else None
            if type(data) is dict and "result" in data:
                known = _results.get(data["result"])
                if known is None:
                    return None
                data["result"] = known
    return record


__all__ = ["GateRecord", "decode_checked", "gate_record"]
