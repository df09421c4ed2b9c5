"""The gate's view of a record line and the evidence schema's check of it, in one decode.

verify hands each line of a trusted (or screened) bundle to the gate's parse
(:class:`~mcp_tap.evidence.view.RawRecordView`) and checks the same line against the
evidence schema (:class:`~mcp_tap.evidence.schema.CheckedRecord`): two msgspec decodes of
every byte. :class:`CheckedRecordView` is the view whose members the schema constrains are
typed as both declare them -- each member's type the intersection of the view's and the
schema's -- so a line decodes into it exactly when it decodes into the view and passes the
schema, and holds what the view holds (an integer time stays an integer). verify does not
check a line again that decoded into it (:func:`is_schema_checked`).

The view keeps a record's findings raw; the schema's check of them is the caller's
(:data:`check_findings`, on the raw bytes), as is the view's own handling of the raw members
(:mod:`mcp_tap.gate.fields`). A test ties each type here to the schema's and the view's.
"""

from __future__ import annotations

from typing import Annotated, Any, Final

import msgspec
from msgspec import UNSET, UnsetType

from mcp_tap.evidence.schema import MAX_TIME, CheckedRecord
from mcp_tap.evidence.view import RawEgress, RawEvent, RawIngress, RawOrigin, RawRecordView

__all__ = [
    "CheckedEgress",
    "CheckedEvent",
    "CheckedIngress",
    "CheckedOrigin",
    "CheckedRecordView",
    "check_findings",
    "is_schema_checked",
]

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


# The schema's own type of a record's findings (the view keeps them raw).
_FINDINGS: Final = {f.name: f.type for f in msgspec.structs.fields(CheckedRecord)}["findings"]
check_findings: Final = msgspec.json.Decoder(_FINDINGS).decode
"""Decode a record's raw findings as the schema types them: raises
:class:`msgspec.ValidationError` where the schema check of the line would fail there."""


def is_schema_checked(record: Any) -> bool:
    """Whether ``record`` (a consumer's parse of a line) was checked against the evidence
    schema in its decode: a :class:`CheckedRecordView`."""
    return type(record) is CheckedRecordView
