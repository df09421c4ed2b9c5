"""The evidence format's value schema: what every record and manifest field a command reads
may hold, checked in one place at the reader's boundary.

Integrity (:mod:`mcp_tap.evidence.verify`) says whether the bytes are the ones the writer
wrote; this says whether the values are ones a writer can write at all. A bundle from a
shared store may hold anything, signed or not, and a consumer deep inside the gate or the
HAR export should never be the first to meet a finding boundary ``"bogus"`` or a
``receivedAt`` of ``1e20`` (``ValueError``, ``OverflowError``). Every record passes
:func:`record_problem` (or, as bytes, :func:`line_problem`) and every manifest
:func:`manifest_problem` before any command uses it; what fails is a ``format`` problem of
``verify`` with its place, and a :class:`~mcp_tap.errors.BundleFormatError` naming the
file and line for a reader.

The schema is versioned with the format (:data:`SCHEMA_VERSION` is
:data:`~mcp_tap.evidence.format.FORMAT_VERSION`; older formats are checked after their
migration, which keeps these fields). It constrains only what readers rely on and leaves
every other member open, so a newer writer's added members (a hop's ``box``, a manifest's
tallies) pass: a value schema, not a member list. It is written once, as msgspec Structs,
so the same definition checks a parsed record (``msgspec.convert``) and a line's bytes
(``msgspec.json.decode``), in C either way, and it applies to records from any byte
source (a local file or an object).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal

import msgspec

from mcp_tap.core.findings import Boundary, Strength
from mcp_tap.evidence.format import FORMAT_VERSION

__all__ = [
    "MAX_TIME",
    "SCHEMA_VERSION",
    "CheckedRecord",
    "line_problem",
    "manifest_problem",
    "meta_problem",
    "record_problem",
]

SCHEMA_VERSION: Final = FORMAT_VERSION
"""The evidence format version this schema describes."""

MAX_TIME: Final = 253402300799.0
"""The latest time a record may state (9999-12-31T23:59:59Z, Unix seconds): every later
one is out of range for the dates the report and the HAR export print."""

# Unix seconds; an integer is a time too (the JSON of 1.0 may be written 1).
_Time = Annotated[float, msgspec.Meta(ge=0.0, le=MAX_TIME)]
_Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
_Count = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]
_Status = Annotated[int, msgspec.Meta(ge=0, le=999)]
# The enums' values, spelled from the enums so a new boundary cannot drift from the schema.
_BoundaryName = Literal["request", "response", "hop", "client", "sdk", "gate", "tap"]
_StrengthName = Literal["must", "should"]
assert set(_BoundaryName.__args__) == {str(b) for b in Boundary}  # type: ignore[attr-defined]
assert set(_StrengthName.__args__) == {str(s) for s in Strength}  # type: ignore[attr-defined]


class _Finding(msgspec.Struct, kw_only=True, gc=False):
    rule: str
    code: _Int64 | None = None
    boundary: _BoundaryName = "response"
    message: str = ""
    where: str = ""
    strength: _StrengthName = "must"


# A head as recorded: [name, value] pairs of strings.
_Headers = list[tuple[str, str]]


class _Event(msgspec.Struct, kw_only=True, gc=False):
    at: _Time | None = None


class _Ingress(msgspec.Struct, kw_only=True, gc=False):
    receivedAt: _Time | None = None
    forwardedAt: _Time | None = None
    headers: _Headers | None = None
    forwardedHeaders: _Headers | None = None


class _Origin(msgspec.Struct, kw_only=True, gc=False):
    status: _Status | None = None
    firstByteAt: _Time | None = None
    endAt: _Time | None = None
    sse: list[_Event] | None = None
    headers: _Headers | None = None


class _Egress(msgspec.Struct, kw_only=True, gc=False):
    status: _Status | None = None
    sentAt: _Time | None = None
    endAt: _Time | None = None
    headers: _Headers | None = None


class CheckedRecord(msgspec.Struct, kw_only=True, gc=False):
    """The members of a record whose values the schema constrains (any other member is
    open). :class:`~mcp_tap.evidence.head.RecordHead` extends it with the chain fields, so
    verify's narrow parse checks the schema in the same decode."""

    findings: list[_Finding] | None = None
    ingress: _Ingress | None = None
    origin: _Origin | None = None
    egress: _Egress | None = None


class _Manifest(msgspec.Struct, kw_only=True, gc=False):
    format: int
    segment: Annotated[int, msgspec.Meta(ge=1, le=2**63 - 1)]
    firstSeq: _Count
    lastSeq: Annotated[int, msgspec.Meta(ge=-1, le=2**63 - 1)]
    count: _Count
    bytes: _Count
    fileSha256: str
    chainHead: str
    prevSegmentChainHead: str
    bundleId: str | None = None
    createdAt: _Time | None = None
    closedAt: _Time | None = None
    signature: str | None = None


class _Meta(msgspec.Struct, kw_only=True, gc=False):
    format: int
    bundleId: str | None = None
    createdAt: _Time | None = None
    signature: str | None = None


_convert_errors: Final = (msgspec.ValidationError,)
_decode_record: Final = msgspec.json.Decoder(CheckedRecord).decode


def _say(exc: Exception) -> str:
    # msgspec: "Expected `float` <= 253402300799.0, got 1e+20 - at `$.ingress.receivedAt`".
    shown = str(exc).replace("`", "")[:300]
    return f"evidence schema {SCHEMA_VERSION}: {shown}"


def _check(value: Mapping[str, Any], shape: type[msgspec.Struct]) -> str | None:
    try:
        msgspec.convert(value, shape)
    except _convert_errors as exc:
        return _say(exc)
    return None


def record_problem(record: Mapping[str, Any]) -> str | None:
    """Why the parsed ``record`` holds a value no writer writes, or None when it holds none."""
    return _check(record, CheckedRecord)


def line_problem(line: bytes | memoryview) -> str | None:
    """:func:`record_problem` of a record line's bytes, checked without building it (for a
    caller that has not parsed it; its JSON syntax is the caller's to check)."""
    try:
        _decode_record(line)
    except msgspec.ValidationError as exc:
        return _say(exc)
    except (msgspec.DecodeError, RecursionError):
        return None  # not JSON, or nested too deeply: the full parse reports that
    return None


def manifest_problem(manifest: Mapping[str, Any]) -> str | None:
    """Why a segment manifest (upgraded to the current format) is not of the format's
    shape, or None."""
    return _check(manifest, _Manifest)


def meta_problem(meta: Mapping[str, Any]) -> str | None:
    """Why ``bundle.json`` holds a value no writer writes, or None (``closed`` is checked
    member by member by :mod:`mcp_tap.evidence.closing`)."""
    return _check(meta, _Meta)
