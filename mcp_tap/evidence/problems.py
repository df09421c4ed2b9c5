"""What ``verify`` reports: :class:`Problem` and :class:`VerifyReport` (see
:mod:`mcp_tap.evidence.verify` for the checks)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

ProblemKind = Literal[
    "digest", "chain", "sequence", "manifest", "truncated", "gap", "format", "unclosed",
    "signature", "abrupt",
]
Severity = Literal["error", "warning"]
LOSS_KINDS: frozenset[str] = frozenset({"gap", "abrupt"})
"""Problem kinds that state lost evidence (a policy may allow a bounded share of it)."""


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a bundle: what kind, how bad, where, and a one-line message."""

    kind: ProblemKind
    severity: Severity
    message: str
    segment: str | None = None
    seq: int | None = None

    def to_json(self) -> dict[str, Any]:
        """Return the problem as a plain JSON object."""
        return {
            "kind": self.kind,
            "severity": self.severity,
            "segment": self.segment,
            "seq": self.seq,
            "message": self.message,
        }


@dataclass(slots=True)
class VerifyReport:
    """The outcome of :func:`verify_bundle`; ``ok`` means no problem of severity error.

    ``chain_head`` is the digest of the last record ("" for none); ``signer`` the hex public
    key whose signatures all verified (None: unsigned, or a signature failed); ``lost`` the
    records the bundle states lost (gap records, or the closing summary's count if larger);
    ``exchanges`` the exchange records it holds; ``end`` is ``"closed"``, ``"abrupt"``,
    ``"open"`` (no closing summary yet, and verified as still being written) or None (no
    closing summary); ``inflight`` the exchanges an abrupt end left in flight.
    """

    path: str
    format: int
    ok: bool
    records: int
    segments: int
    problems: list[Problem] = field(default_factory=list)
    chain_head: str = ""
    bundle_id: str | None = None
    signer: str | None = None
    signed: bool = False
    lost: int = 0
    exchanges: int = 0
    end: str | None = None
    inflight: int = 0

    @property
    def errors(self) -> list[Problem]:
        """The problems that make the bundle fail."""
        return [p for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        """The problems that do not make the bundle fail."""
        return [p for p in self.problems if p.severity == "warning"]

    @property
    def intact(self) -> bool:
        """Whether every error is stated loss (a gap, an abrupt end) and nothing else: the
        records there are the ones written, so a reader may use them (the loss is stated)."""
        return all(p.kind in LOSS_KINDS for p in self.errors)

    @property
    def loss_ratio(self) -> float:
        """The share of exchanges stated lost: ``lost / (exchanges + lost)`` (0 without loss)."""
        return self.lost / (self.exchanges + self.lost) if self.lost else 0.0

    def to_json(self) -> dict[str, Any]:
        """Return the report as a plain JSON object (the ``verify --json`` output)."""
        return {
            "path": self.path,
            "format": self.format,
            "ok": self.ok,
            "records": self.records,
            "segments": self.segments,
            "chainHead": self.chain_head,
            "bundleId": self.bundle_id,
            "signer": self.signer,
            "signed": self.signed,
            "exchanges": self.exchanges,
            "lost": self.lost,
            "end": self.end,
            "inflight": self.inflight,
            "errors": len(self.errors),
            "warnings": len(self.warnings),
            "problems": [p.to_json() for p in self.problems],
        }
