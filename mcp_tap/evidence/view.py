"""The members of an exchange record that the offline tallies read, as msgspec Structs.

The gate's tallies (:mod:`mcp_tap.gate.tally`, :class:`~mcp_tap.gate.health.WindowTally`)
and the SDK differential (:mod:`mcp_tap.sdkdiff`) read a few members of each record: kind,
hop, ids, findings, the answer's status, times, body and events, the request's revision.
They read them from a :class:`RecordView`, whichever way the record was read:

* a line of the current format is decoded straight into a view (:class:`RawRecordView`,
  :func:`mcp_tap.gate.fields.decode_checked`): msgspec builds only these members and skips
  the rest of the line;
* a record parsed fully (an older format, a line the cheaper parse cannot vouch for or
  verify's number screen flags, a bundle read again after failing verification) becomes a
  view with :func:`view_of` (``msgspec.convert``, in C).

So there is one implementation of every tally, reading attributes, not one per shape.

A member reads as :meth:`dict.get` would read it (``None`` when absent) except where a
reader tells absence from ``null``: those default to :data:`~msgspec.UNSET` (falsy): the
members of a JSON-RPC answer (``"error" in body`` is what makes an error response), the
hop and exchange id (read as ``record.get("hop", "")``) and an origin's ``ended`` (read
with a default of true). Every member may hold any JSON value: an object where a view is
declared is that view, any other value is kept as is (a list where an object was expected
is a list, which no reader takes for an object), so any JSON record has a view.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Final

import msgspec
from msgspec import UNSET, Raw, Struct, UnsetType

from mcp_tap.core.hashing import digest as canonical_digest
from mcp_tap.evidence.schema import MAX_TIME, CheckedRecord

# Any JSON value but an object (an object is decoded as the view the member declares).
_Json = list[Any] | str | int | float | bool | None

PROTOCOL_VERSION_KEY: Final = "io.modelcontextprotocol/protocolVersion"


class Answer(Struct, kw_only=True, gc=False):
    """A JSON-RPC message of an answer (an origin body, an SSE event's data): the members
    the health window and the SDK differential test, each UNSET when absent."""

    jsonrpc: Any = UNSET
    id: Any = UNSET
    method: Any = UNSET
    error: Any = UNSET
    result: Any = UNSET


class Event(Struct, kw_only=True, gc=False):
    """One recorded SSE event: its time and its data."""

    at: Any = None
    data: Answer | _Json = None


# An origin's events: a list (of events), or any other JSON value kept as is.
_Events = list[Event | _Json] | dict[str, Any] | str | int | float | bool | None


class Meta(Struct, kw_only=True, gc=False, rename={"version": PROTOCOL_VERSION_KEY}):
    """A request's ``params._meta``: only the protocol revision is read."""

    version: Any = None


class Params(Struct, kw_only=True, gc=False):
    """A request's ``params``: only ``_meta`` is read."""

    _meta: Meta | _Json = None


class Request(Struct, kw_only=True, gc=False):
    """A recorded request body: only its ``params`` are read."""

    params: Params | _Json = None


class Ingress(Struct, kw_only=True, gc=False):
    """The request as received: its time, body and headers (a legacy request's revision)."""

    receivedAt: Any = None
    body: Request | _Json = None
    headers: Any = UNSET  # as the raw view: absent either way


class Origin(Struct, kw_only=True, gc=False):
    """The origin's answer: status, body or events, times, and whether it is whole."""

    status: Any = None
    body: Answer | _Json = None
    sse: _Events = None
    endAt: Any = None
    firstByteAt: Any = None
    truncated: Any = None
    ended: Any = UNSET


class Egress(Struct, kw_only=True, gc=False):
    """The answer as sent to the client: its times."""

    endAt: Any = None
    sentAt: Any = None


class RecordView(Struct, kw_only=True, gc=False):
    """The members of an evidence record the offline tallies read (see the module
    docstring). Read its evidence digest with :func:`evidence_digest`."""

    seq: Any = None
    prev: Any = None
    digest: Any = None
    kind: Any = None
    hop: Any = UNSET
    rpcId: Any = None
    tapError: Any = None
    findings: Any = None
    method: Any = None
    era: Any = None
    exchangeId: Any = UNSET
    box: Any = None
    between: Any = None
    boxes: Any = None
    boxKind: Any = None  # a hop-comparison record's kind of box, and the changes it made
    changes: Any = None
    lost: Any = None  # a gap record's count and reason
    reason: Any = None
    ingress: Ingress | _Json = None
    origin: Origin | _Json = None
    egress: Egress | _Json = None


# The shapes the gate's parse of a line decodes into (mcp_tap.gate.fields): the same views,
# with an answer's result, the findings and the request's headers kept as raw bytes (results
# and findings repeat: each distinct text is decoded once; the headers are decoded by the SDK
# differential when it needs them), the chain fields required, and every member whose value
# a reader formats, compares or tests for a type narrowed to a scalar (an integer as orjson
# reads it: a list, an object or an integer past 64 bits fails the decode, and the line is
# parsed fully, so these members hold what the full parse gives).

# An integer orjson also reads as an int (it reads one up to 2**64 - 1, but msgspec bounds
# must fit int64); a larger or smaller one fails the decode.
_Int = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
_Scalar = _Int | float | str | bool | None


class RawAnswer(Answer, kw_only=True, gc=False):
    """:class:`Answer` with its ``result`` as raw bytes (made a KnownJson by the parse)."""

    id: _Scalar | UnsetType = UNSET
    result: Raw | UnsetType = UNSET


class RawEvent(Event, kw_only=True, gc=False):
    """:class:`Event` whose data is a :class:`RawAnswer`."""

    at: _Scalar = None
    data: RawAnswer | _Json = None


_RawEvents = list[RawEvent | _Json] | dict[str, Any] | str | int | float | bool | None


class RawIngress(Ingress, kw_only=True, gc=False):
    """:class:`Ingress` with its headers as raw bytes."""

    receivedAt: _Scalar = None
    headers: Raw | UnsetType = UNSET


class RawOrigin(Origin, kw_only=True, gc=False):
    """:class:`Origin` whose answers are :class:`RawAnswer` s."""

    status: _Scalar = None
    body: RawAnswer | _Json = None
    sse: _RawEvents = None  # type: ignore[assignment]  # events of raw answers
    endAt: _Scalar = None
    firstByteAt: _Scalar = None


class RawEgress(Egress, kw_only=True, gc=False):
    """:class:`Egress` with scalar times."""

    endAt: _Scalar = None
    sentAt: _Scalar = None


# orjson reads an integer up to 2**64 - 1 as an int; msgspec's bound is int64's.
_Seq = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]


class RawRecordView(RecordView, kw_only=True, gc=False):
    """:class:`RecordView` as decoded from a line: chain fields required, findings as raw
    bytes (made a KnownJson, or None for none, by the parse), scalars where read as such."""

    seq: _Seq
    prev: str
    digest: str
    kind: str
    hop: _Scalar | UnsetType = UNSET
    rpcId: _Scalar = None
    findings: Raw | UnsetType = UNSET
    exchangeId: _Scalar | UnsetType = UNSET
    between: _Scalar | list[_Scalar] = None
    ingress: RawIngress | _Json = None
    origin: RawOrigin | _Json = None
    egress: RawEgress | _Json = None


# The gate's view with the evidence schema's check in the same decode.
#
# The gate's view of a record line and the evidence schema's check of it, in one decode.
#
# verify hands each line of a trusted (or screened) bundle to the gate's parse
# (:class:`~mcp_tap.evidence.view.RawRecordView`) and checks the same line against the
# evidence schema (:class:`~mcp_tap.evidence.schema.CheckedRecord`): two msgspec decodes of
# every byte. :class:`CheckedRecordView` is the view whose members the schema constrains are
# typed as both declare them -- each member's type the intersection of the view's and the
# schema's -- so a line decodes into it exactly when it decodes into the view and passes the
# schema, and holds what the view holds (an integer time stays an integer). verify does not
# check a line again that decoded into it (:func:`is_schema_checked`).
#
# The view keeps a record's findings raw; the schema's check of them is the caller's
# (:data:`check_findings`, on the raw bytes), as is the view's own handling of the raw members
# (:mod:`mcp_tap.gate.fields`). tests/gate/test_gate_checked_parse.py ties these types to the
# schema's and the view's (the same lines pass, the same values come out).

# The schema's time (a float in [0, MAX_TIME]; an integer is a time too), as the view keeps
# it: an integer as an integer. Only an integer within those bounds fits either branch, as
# only such a one passes the schema's float.
_Time = (Annotated[int, msgspec.Meta(ge=0, le=int(MAX_TIME))]
         | Annotated[float, msgspec.Meta(ge=0.0, le=MAX_TIME)] | None)
_Status = Annotated[int, msgspec.Meta(ge=0, le=999)] | None
_Headers = list[tuple[str, str]] | None


class CheckedEvent(RawEvent, kw_only=True, gc=False):
    """:class:`~mcp_tap.evidence.view.RawEvent` with the schema's event time."""

    at: _Time = None


class CheckedIngress(RawIngress, kw_only=True, gc=False):
    """:class:`~mcp_tap.evidence.view.RawIngress` with the schema's times and heads (the
    request's head decoded: the SDK differential reads a legacy request's revision in it)."""

    receivedAt: _Time = None
    forwardedAt: _Time = None
    headers: _Headers | UnsetType = UNSET  # type: ignore[assignment]
    forwardedHeaders: _Headers = None


class CheckedOrigin(RawOrigin, kw_only=True, gc=False):
    """:class:`~mcp_tap.evidence.view.RawOrigin` with the schema's status, times, events
    and head."""

    status: _Status = None
    firstByteAt: _Time = None
    endAt: _Time = None
    sse: list[CheckedEvent] | None = None  # type: ignore[assignment]
    headers: _Headers = None


class CheckedEgress(RawEgress, kw_only=True, gc=False):
    """:class:`~mcp_tap.evidence.view.RawEgress` with the schema's status, times and head."""

    status: _Status = None
    sentAt: _Time = None
    endAt: _Time = None
    headers: _Headers = None


class CheckedRecordView(RawRecordView, kw_only=True, gc=False):
    """:class:`~mcp_tap.evidence.view.RawRecordView` whose members the schema constrains
    are checked in its decode (its findings, raw, by :data:`check_findings`)."""

    ingress: CheckedIngress | None = None
    origin: CheckedOrigin | None = None
    egress: CheckedEgress | None = None


# For isinstance: the checked view first, then the raw view. A Struct's class has its own
# metaclass, so isinstance of a subclass's instance against the base looks up
# __instancecheck__, while a tuple starting with the exact class answers at its first entry.
ANSWERS: Final = (RawAnswer, Answer)
EVENTS: Final = (CheckedEvent, RawEvent, Event)
INGRESSES: Final = (CheckedIngress, RawIngress, Ingress)
ORIGINS: Final = (CheckedOrigin, RawOrigin, Origin)
EGRESSES: Final = (CheckedEgress, RawEgress, Egress)

_convert: Final = msgspec.convert


class _Unstored:
    """The digest of a record parsed fully without a stored one: computed when asked."""

    __slots__ = ("record",)

    def __init__(self, record: Mapping[str, Any]) -> None:
        self.record = record


def view_of(record: Mapping[str, Any]) -> RecordView:
    """The view of a record parsed fully (a JSON object as a dict)."""
    view: RecordView = _convert(record, RecordView)
    stored = view.digest
    if type(stored) is not str or not stored:
        view.digest = _Unstored(record)
    return view


def evidence_digest(view: RecordView) -> str:
    """A record's evidence digest: the writer's ``digest``, else (a record parsed fully
    without a non-empty string there) recomputed the way the writer computes it, as
    :func:`mcp_tap.gate.tally.record_digest` does for the record itself."""
    stored = view.digest
    if type(stored) is str:
        return stored
    if type(stored) is not _Unstored:
        raise TypeError("a view made by view_of or decoded from a line has a digest")
    return canonical_digest({k: v for k, v in stored.record.items() if k != "digest"})


def is_response(answer: object) -> bool:
    """Whether an answer is a JSON-RPC response, as
    ``mcp_tap.core.jsonrpc.classify(...).kind is Kind.RESPONSE`` says of the object it
    came from (only the members an :class:`Answer` keeps decide that)."""
    return (isinstance(answer, ANSWERS) and answer.jsonrpc == "2.0" and answer.method is UNSET
            and (answer.result is not UNSET or answer.error is not UNSET
                 or answer.id is not UNSET))


def answer_whole(origin: Origin) -> bool:
    """:func:`mcp_tap.evidence.format.answer_is_whole` of an origin view."""
    if not origin.truncated:
        return True
    if origin.ended is UNSET or origin.ended:
        return False
    events = origin.sse
    return type(events) is list and any(
        isinstance(e, EVENTS) and is_response(e.data) for e in events)


# The schema's own type of a record's findings (the view keeps them raw).
_FINDINGS: Final = {f.name: f.type for f in msgspec.structs.fields(CheckedRecord)}["findings"]
check_findings: Final = msgspec.json.Decoder(_FINDINGS).decode
"""Decode a record's raw findings as the schema types them: raises
:class:`msgspec.ValidationError` where the schema check of the line would fail there."""


def is_schema_checked(record: Any) -> bool:
    """Whether ``record`` (a consumer's parse of a line) was checked against the evidence
    schema in its decode: a :class:`CheckedRecordView`."""
    return type(record) is CheckedRecordView


__all__ = [
    "ANSWERS",
    "EGRESSES",
    "EVENTS",
    "INGRESSES",
    "ORIGINS",
    "PROTOCOL_VERSION_KEY",
    "Answer",
    "CheckedEgress",
    "CheckedEvent",
    "CheckedIngress",
    "CheckedOrigin",
    "CheckedRecordView",
    "Egress",
    "Event",
    "Ingress",
    "Meta",
    "Origin",
    "Params",
    "RawAnswer",
    "RawEgress",
    "RawEvent",
    "RawIngress",
    "RawOrigin",
    "RawRecordView",
    "RecordView",
    "Request",
    "answer_whole",
    "check_findings",
    "evidence_digest",
    "is_response",
    "is_schema_checked",
    "view_of",
]
