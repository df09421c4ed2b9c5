"""The probe's case model: one planned request and what it needs from the server to pass."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from mcp_tap.core.eras import (
    Era,
)
from mcp_tap.core.headers import HeaderMap


class Expect(StrEnum):
    """What a probed case needs from the server, besides the judge finding nothing."""

    RESULT = "result"
    """A success result (golden request)."""
    ERROR = "error"
    """A JSON-RPC error with the case's code (golden request whose correct answer is an error)."""
    ACCEPTED = "accepted"
    """A notification: the judge's 202-and-empty-body rule decides."""
    ROUTED = "routed"
    """Past the header checks: a result or any error but a request rejection."""
    REJECTED = "rejected"
    """A negative request: the judge's owed-answer rules decide (400/-32020, the code, ...)."""
    RESULT_OR_MISMATCH = "result-or-mismatch"
    """A result, or a 400/-32020 header rejection: the request repeats a singleton header
    line, which RFC 9110 section 5.3 forbids a sender to generate, so a server may refuse it
    (the tap itself reads identical duplicates as one value)."""


@dataclass(frozen=True, slots=True)
class ProbeCase:
    """One planned request: what to send, in which era, and what passing means.

    ``headers`` are the case's own headers (the MCP routing headers under test); transport
    headers (``Accept``, ``Content-Type``, the legacy session, operator headers) are added
    when sending. ``skip`` is the reason the case cannot be probed against this server.
    """

    name: str
    era: Era
    headers: HeaderMap
    body: bytes
    expect: Expect
    expected_rule: str | None = None
    expected_code: int | None = None
    notes: tuple[str, ...] = ()
    skip: str | None = None
