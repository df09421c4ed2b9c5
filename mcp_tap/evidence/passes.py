"""The state a verify run shares with its passes (closing summary, out-of-order chain,
sealed segments): a :class:`VerifyState` protocol that ``verify``'s verifier satisfies.

The passes live in their own modules and ``verify`` imports them; they name the verifier
only through this protocol, so no pass imports ``verify`` back.
"""

from __future__ import annotations

from typing import Any, Protocol

from mcp_tap.evidence.problems import ProblemKind, Severity


class VerifyState(Protocol):
    """What the passes read and update on a verify run (see ``verify._Verifier``)."""

    format: int
    strict: bool
    open: bool
    closed_raw: Any
    closed: dict[str, Any] | None
    records: int
    exchanges: int
    segment_files: int
    max_seq: int
    head: str
    gap_lost: int
    previous_chain_head: str | None
    bundle_id: str | None
    public_key: bytes | None
    signatures_ok: bool
    out_of_order: bool
    unread: bool

    def problem(self, kind: ProblemKind, message: str, *, segment: str | None = None,
                seq: int | None = None, severity: Severity = "error") -> None:
        """Report one problem."""

    def gap(self, name: str, seq: int, record: dict[str, Any]) -> None:
        """Count and report one gap record."""
