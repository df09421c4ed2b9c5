"""The gate's parse of a record line: only the members its tallies read.

The gate reads a few members of each exchange record (kind, hop, ids, findings, the
answer's status, times, body and events, the request's revision and headers); a full parse
builds every header list, digest and note too. :func:`gate_record` decodes a line with
msgspec straight into the view the tallies read (:class:`~mcp_tap.evidence.view.RecordView`,
as :class:`~mcp_tap.evidence.view.RawRecordView`): ``msgspec`` checks the whole line's JSON
syntax, skips the rest and builds Structs, not dicts, for what it keeps (less than half the
cost of orjson's full parse of the proxy's records). Every member whose value a tally
formats, compares or tests for a type is decoded as a scalar, an integer only within
int64 (orjson reads a larger one as a float), so what the view holds is what the full
parse holds.

An answer's JSON-RPC ``result`` is the one big member the gate reads, and only the SDK
differential reads its value: it is taken as raw bytes and decoded (by orjson) once per
distinct text (:class:`~mcp_tap.evidence.known.KnownValues`), so the view holds a shared
:class:`~mcp_tap.evidence.known.KnownJson` there instead of a fresh tree, and the
differential finds its memo entry by those bytes. A record's findings are taken the same
way (``[]``, the common case, is read as none; the tallies remember the summaries of each
distinct text). The request's headers are needed only for a legacy request's revision:
they stay raw (``msgspec.Raw``) until the SDK differential decodes them.

verify hands its lines to :func:`decode_checked`: the same view, decoded as a
:class:`~mcp_tap.evidence.view.CheckedRecordView`, whose decode is also the evidence
schema's check of the line (one decode of every byte instead of two); the recording
process's tallies, which read the lines their own writer wrote, use :func:`decode_view`.

Like verify's head (:mod:`mcp_tap.evidence.head`) it cannot see a number too large for a
double in a skipped member: verify calls it only for a line of a bundle whose
``bundle.json`` verifies under a trusted key (every byte covered by the signed manifests)
or that its number screen (:mod:`mcp_tap.evidence.screen`) clears. A line it cannot vouch
for -- not an object, a chain field missing or of another type, a read member of another
shape, invalid UTF-8, nesting past msgspec's limit, a result or findings orjson rejects --
gives ``None`` and is parsed fully (then read through :func:`~mcp_tap.evidence.view.view_of`),
as is every gap record.
"""

from __future__ import annotations

from typing import Final

import msgspec
from msgspec import Raw

from mcp_tap.evidence.head import DECODE_ERRORS, valid_utf8
from mcp_tap.evidence.known import KnownValues
from mcp_tap.evidence.view import (
    CheckedEvent,
    CheckedOrigin,
    CheckedRecordView,
    RawAnswer,
    RawEvent,
    RawOrigin,
    RawRecordView,
    check_findings,
)

_decode: Final = msgspec.json.Decoder(RawRecordView).decode
_decode_checked: Final = msgspec.json.Decoder(CheckedRecordView).decode
_results: Final = KnownValues()
_findings: Final = KnownValues()
_NONE: Final = Raw(b"[]")
_ORIGINS: Final = (RawOrigin, CheckedOrigin)
_EVENTS: Final = (RawEvent, CheckedEvent)


def gate_record(line: bytes | memoryview) -> RawRecordView | None:
    """The gate's view of a record line, or None when only a full parse can judge it."""
    return decode_view(line) if valid_utf8(line) else None


def decode_view(line: bytes | memoryview) -> RawRecordView | None:
    """:func:`gate_record` of a line whose UTF-8 the caller has checked (the recording
    process's tallies: lines its own writer wrote)."""
    try:
        record: RawRecordView = _decode(line)
    except DECODE_ERRORS:  # the chain fields are required: missing ones fail here too
        return None
    return _known(record, False)


def decode_checked(line: bytes | memoryview) -> RawRecordView | None:
    """:func:`decode_view` of a line that also passes the evidence schema's check, in one
    decode (:class:`~mcp_tap.evidence.view.CheckedRecordView`): verify calls it
    for each block of lines whose UTF-8 it checked, and checks no schema again for a line
    it decodes; None (the full parse judges the line, schema and all) for any other."""
    try:
        record: CheckedRecordView = _decode_checked(line)
    except DECODE_ERRORS:
        return None
    # The heads only the schema reads are checked and let go at once: held until the read's
    # batch is tallied (thousands of records' lists), they cost more CPU than their check.
    origin, egress, ingress = record.origin, record.egress, record.ingress
    if origin is not None:
        origin.headers = None
    if egress is not None:
        egress.headers = None
    if ingress is not None:
        ingress.forwardedHeaders = None
    return _known(record, True)


def _known(record: RawRecordView, checked: bool) -> RawRecordView | None:
    """``record`` with its raw findings and results made shared decoded values (None where
    orjson, or with ``checked`` the schema, rejects them)."""
    findings = record.findings
    if type(findings) is Raw:
        if len(findings) == 2 and findings == _NONE:  # the common case: no finding
            record.findings = None  # type: ignore[assignment]  # as empty as []
        else:
            if checked:
                try:
                    check_findings(findings)
                except DECODE_ERRORS:
                    return None
            known = _findings.get(findings)
            if known is None:
                return None
            record.findings = known  # type: ignore[assignment]  # the decoded value, shared
    origin = record.origin
    if type(origin) not in _ORIGINS:
        return record
    body = origin.body  # type: ignore[union-attr]
    if type(body) is RawAnswer and type(body.result) is Raw:
        known = _results.get(body.result)
        if known is None:
            return None
        body.result = known  # type: ignore[assignment]  # the decoded value, shared
    events = origin.sse  # type: ignore[union-attr]
    if type(events) is list:
        for event in events:
            data = event.data if type(event) in _EVENTS else None  # type: ignore[union-attr]
            if type(data) is RawAnswer and type(data.result) is Raw:
                known = _results.get(data.result)
                if known is None:
                    return None
                data.result = known  # type: ignore[assignment]
    return record


__all__ = ["decode_checked", "decode_view", "gate_record"]
