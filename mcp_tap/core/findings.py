"""Findings: what the core reports when an exchange breaks a rule."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Strength(StrEnum):
    """How strongly the specification states a rule: a MUST is a violation, a SHOULD a warning.

    A MAY is never a finding, so it has no strength.
    """

    MUST = "must"
    SHOULD = "should"


class Boundary(StrEnum):
    """Which boundary a rule concerns."""

    REQUEST = "request"
    RESPONSE = "response"
    HOP = "hop"
    CLIENT = "client"
    SDK = "sdk"
    GATE = "gate"
    TAP = "tap"


@dataclass(frozen=True, slots=True)
class Finding:
    """One broken rule: the stable rule id, its JSON-RPC code, and where it was seen.

    ``where`` names the view or place (``ingress``, ``origin``, ``egress``, ``sse[2]``,
    ``hop edge->origin``); ``message`` is a one-line human explanation; ``strength`` is the
    rule's (see :class:`Strength`).
    """

    rule: str
    code: int | None
    boundary: Boundary
    message: str
    where: str = ""
    strength: Strength = Strength.MUST
    paths: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """Return the finding as a plain JSON object (the evidence and report shape);
        ``paths`` only when the finding has some (a hop comparison's)."""
        data: dict[str, Any] = {
            "rule": self.rule,
            "code": self.code,
            "boundary": str(self.boundary),
            "message": self.message,
            "where": self.where,
            "strength": str(self.strength),
        }
        if self.paths:
            data["paths"] = list(self.paths)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Finding:
        """Rebuild a finding from :meth:`to_json` output.

        Evidence written before findings carried a strength has none: it reads as ``must``
        here, and readers that can look the rule up (the gate) use the catalog's instead.
        """
        return cls(
            rule=str(data["rule"]),
            code=data.get("code"),
            boundary=Boundary(data.get("boundary", "response")),
            message=str(data.get("message", "")),
            where=str(data.get("where", "")),
            strength=Strength.SHOULD if data.get("strength") == "should" else Strength.MUST,
            paths=tuple(str(p) for p in paths) if isinstance(paths := data.get("paths"), list)
            else (),
        )
