"""A probe run's outcome: one result per case, the report ``mcp-tap probe --json`` prints."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp_tap.core.eras import (
    Era,
)
from mcp_tap.core.findings import Finding


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """One case's outcome: the JSON shape of a ``mcp-tap probe --json`` case entry.

    ``rule``/``code``: for a failed case the rule the server broke (``None`` when the failure
    is only "not the answer the case describes"); for a passed negative case the request rule
    the server honoured; ``None`` for a passed golden case. ``body`` is the exact response
    text seen, cut at :data:`BODY_LIMIT` characters.
    """

    name: str
    era: Era
    passed: bool
    skipped: bool
    rule: str | None
    code: int | None
    http_status: int | None
    body: str | None
    detail: str
    findings: tuple[Finding, ...] = ()
    request_headers: tuple[tuple[str, str], ...] = ()
    request_body: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The case entry of the JSON report."""
        return {
            "name": self.name,
            "era": str(self.era),
            "passed": self.passed,
            "skipped": self.skipped,
            "rule": self.rule,
            "code": self.code,
            "httpStatus": self.http_status,
            "body": self.body,
            "detail": self.detail,
            "findings": [f.to_json() for f in self.findings],
            "request": None if self.skipped else {
                "headers": [list(p) for p in self.request_headers],
                "body": self.request_body,
            },
        }


@dataclass(frozen=True, slots=True)
class ProbeReport:
    """Every case's outcome against one target, plus the corpus cases that are not probeable.

    ``notes`` say what the probe could not learn (an inventory list the server refused),
    which explains skipped or substituted cases; they are not findings.
    """

    target: str
    eras: tuple[Era, ...]
    results: tuple[ProbeResult, ...]
    not_probeable: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def probed(self) -> list[ProbeResult]:
        """The cases that were sent (not skipped)."""
        return [r for r in self.results if not r.skipped]

    @property
    def failed(self) -> list[ProbeResult]:
        """The sent cases that did not pass."""
        return [r for r in self.probed if not r.passed]

    @property
    def ok(self) -> bool:
        """Whether something was probed and every probed case passed."""
        return bool(self.probed) and not self.failed

    def to_json(self) -> dict[str, Any]:
        """The ``mcp-tap probe --json`` object."""
        probed = self.probed
        return {
            "target": self.target,
            "eras": [str(e) for e in self.eras],
            "ok": self.ok,
            "total": len(self.results),
            "passed": sum(r.passed for r in probed),
            "failed": len(self.failed),
            "skipped": len(self.results) - len(probed),
            "notProbeable": list(self.not_probeable),
            "notes": list(self.notes),
            "cases": [r.to_json() for r in self.results],
        }
