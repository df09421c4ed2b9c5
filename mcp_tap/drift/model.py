"""The value objects of a capture diff: one :class:`Change` per drift, and the whole diff."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Severity(StrEnum):
    """What a change means for a client of the service.

    ``breaking``: a client that worked against the baseline can fail against the candidate
    (a removed tool, a new required argument, a result that became an error, a rule newly
    broken). ``compatible``: the contract grew or got better (a new tool, a new optional
    argument, a rule fixed). ``changed``: the contract held but an answer differs (a value,
    the SSE event pattern, a count, a latency); worth reading, never a failure on its own.
    """

    BREAKING = "breaking"
    COMPATIBLE = "compatible"
    CHANGED = "changed"


class Area(StrEnum):
    """Which comparison found a change."""

    INVENTORY = "inventory"
    BEHAVIOUR = "behaviour"
    CONFORMANCE = "conformance"
    HEALTH = "health"


@dataclass(frozen=True, slots=True)
class Change:
    """One difference between the baseline and the candidate capture.

    ``subject`` names what changed (``tool lookup``, ``tools/call add``, ``rule sse.id``),
    ``aspect`` which part of it (``inputSchema.required``, ``error.code``), ``message`` says
    it in one line; ``baseline`` / ``candidate`` hold the two values when they are short;
    ``examples`` are exchange ids from the candidate (or the baseline for a removal).
    """

    area: Area
    severity: Severity
    subject: str
    aspect: str
    message: str
    baseline: Any = None
    candidate: Any = None
    examples: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """Return the change as a JSON object."""
        return {
            "area": str(self.area),
            "severity": str(self.severity),
            "subject": self.subject,
            "aspect": self.aspect,
            "message": self.message,
            "baseline": self.baseline,
            "candidate": self.candidate,
            "examples": list(self.examples),
        }


@dataclass(frozen=True, slots=True)
class CaptureSide:
    """What one side of the diff was made of: its bundles, their chain heads, its records."""

    bundles: tuple[str, ...]
    chain_heads: tuple[str, ...]
    exchanges: int
    requests: int

    def to_json(self) -> dict[str, Any]:
        """Return the side as a JSON object."""
        return {"bundles": list(self.bundles), "chainHeads": list(self.chain_heads),
                "exchanges": self.exchanges, "requests": self.requests}


@dataclass(frozen=True, slots=True)
class CaptureDiff:
    """Everything that changed between two captures of one service, at the MCP level.

    ``compared`` counts the requests found on both sides (by method, name and normalised
    params); ``only_baseline`` / ``only_candidate`` the requests seen on one side only, which
    are listed but never called drift (the two runs simply asked different things).
    """

    baseline: CaptureSide
    candidate: CaptureSide
    changes: tuple[Change, ...]
    compared: int
    only_baseline: tuple[str, ...] = ()
    only_candidate: tuple[str, ...] = ()
    health: dict[str, Any] = field(default_factory=dict)
    over_bound: bool = False
    # Per side, what the boxes between two hops changed (the gate's rows; only for a capture
    # with hop-comparison records).
    hops: dict[str, Any] = field(default_factory=dict)

    @property
    def breaking(self) -> tuple[Change, ...]:
        """The changes a client can fail on."""
        return tuple(c for c in self.changes if c.severity is Severity.BREAKING)

    @property
    def ok(self) -> bool:
        """True when no change is breaking."""
        return not self.breaking

    def by_area(self, area: Area) -> tuple[Change, ...]:
        """The changes one comparison found."""
        return tuple(c for c in self.changes if c.area is area)

    def to_json(self) -> dict[str, Any]:
        """Return the diff as a JSON object (the ``mcp-tap diff --json`` shape)."""
        counts = {str(s): sum(1 for c in self.changes if c.severity is s) for s in Severity}
        return {
            "ok": self.ok,
            "baseline": self.baseline.to_json(),
            "candidate": self.candidate.to_json(),
            "compared": self.compared,
            "onlyBaseline": list(self.only_baseline),
            "onlyCandidate": list(self.only_candidate),
            "counts": counts,
            "changes": [c.to_json() for c in self.changes],
            "health": self.health,
            "overBound": self.over_bound,
            **({"hopChanges": self.hops} if self.hops else {}),
        }
