"""The gate's parse of a record line: only the members its tallies read, for trusted bundles.

The gate reads a few members of each exchange record (kind, hop, ids, findings, the
answer's status, times, body and events, the request's body and headers); a full parse
builds every header list, digest and note too. :func:`gate_record` decodes a line with
msgspec into plain dicts holding only those members (``msgspec`` checks the whole line's
JSON syntax and skips the rest), about a third cheaper than orjson on the proxy's records.

Like verify's head (:mod:`mcp_tap.evidence.head`) it cannot see a number too large for a
double in a skipped member, so the gate uses it only where verify takes its own fast path:
for a bundle whose ``bundle.json`` verifies under a trusted key (every byte covered by the
signed manifests). A line it cannot vouch for -- not an object of the writer's shape, a
chain field missing or of another type, invalid UTF-8, nesting past msgspec's limit --
gives ``None`` and is parsed fully, as is every gap record.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, TypedDict

import msgspec

from mcp_tap.evidence.head import DECODE_ERRORS, valid_utf8


class _Params(TypedDict, total=False):
    _meta: Any


class _Request(TypedDict, total=False):
    params: _Params  # only the protocol revision in _meta is read (the SDK differential)


class _Ingress(TypedDict, total=False):
    receivedAt: Any
    body: _Request | None  # an array (a batch) or params by position: parsed fully
    headers: Any
    truncated: Any


class _Origin(TypedDict, total=False):
    status: Any
    body: Any
    sse: Any
    endAt: Any
    firstByteAt: Any
    truncated: Any
    ended: Any
    contentType: Any


class _Egress(TypedDict, total=False):
    endAt: Any
    sentAt: Any


_Seq = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]


class GateRecord(TypedDict, total=False):
    """The members of a record the gate's tallies read (see the module docstring)."""

    seq: _Seq
    prev: str
    digest: str
    kind: str
    hop: Any
    rpcId: Any
    tapError: Any
    findings: Any
    method: Any
    era: Any
    exchangeId: Any
    exchangeIds: Any
    box: Any
    between: Any
    boxes: Any
    ingress: _Ingress
    origin: _Origin
    egress: _Egress


_decode: Final = msgspec.json.Decoder(GateRecord).decode
_CHAIN: Final = ("seq", "prev", "digest", "kind")


def gate_record(line: bytes | memoryview) -> dict[str, Any] | None:
    """The gate's members of a record line, or None when only a full parse can judge it."""
    return decode_checked(line) if valid_utf8(line) else None


def decode_checked(line: bytes | memoryview) -> dict[str, Any] | None:
    """:func:`gate_record` of a line whose UTF-8 the caller has checked (verify checks each
    block of lines once: the hook it calls)."""
    try:
        record: dict[str, Any] = _decode(line)  # type: ignore[assignment]
    except DECODE_ERRORS:
        return None
    for key in _CHAIN:
        if key not in record:
            return None
    return record


__all__ = ["GateRecord", "decode_checked", "gate_record"]
