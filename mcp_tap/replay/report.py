"""Replay's output: one result per replayed exchange, the skipped ones, the human lines."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Skipped:
    """A recorded exchange that was not replayed, and why."""

    exchange_id: str
    method: str | None
    reason: str

    def to_json(self) -> dict[str, Any]:
        """Return the skip as a plain JSON object."""
        return {"exchangeId": self.exchange_id, "method": self.method, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class Change:
    """One semantic difference between the recorded and the replayed answer.

    ``recorded`` / ``replayed`` hold each side's value (for ``findings``: the rules only that
    side has); a ``payload`` change lists the differing ``paths`` instead.
    """

    what: str
    message: str
    recorded: Any = None
    replayed: Any = None
    paths: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """Return the change as a plain JSON object (``paths``: where a payload differs)."""
        data: dict[str, Any] = {"what": self.what, "message": self.message,
                                "recorded": self.recorded, "replayed": self.replayed}
        if self.paths:
            data["paths"] = list(self.paths)
        return data


@dataclass(frozen=True, slots=True)
class CaseResult:
    """The outcome of one replayed exchange: ``same`` exactly when there is no change."""

    exchange_id: str
    method: str | None
    era: str
    recorded_status: int
    replayed_status: int
    changes: tuple[Change, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def verdict(self) -> str:
        """``same`` or ``changed``."""
        return "changed" if self.changes else "same"

    def to_json(self) -> dict[str, Any]:
        """Return the result as a plain JSON object (one entry of ``replay --json``)."""
        return {
            "exchangeId": self.exchange_id,
            "method": self.method,
            "era": self.era,
            "status": {"recorded": self.recorded_status, "replayed": self.replayed_status},
            "verdict": self.verdict,
            "changes": [c.to_json() for c in self.changes],
            "notes": list(self.notes),
        }


@dataclass(slots=True)
class ReplayReport:
    """Every replayed exchange's result and every skipped one."""

    target: str
    results: list[CaseResult] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)

    @property
    def changed(self) -> list[CaseResult]:
        """The results with a semantic change."""
        return [r for r in self.results if r.changes]

    @property
    def ok(self) -> bool:
        """Whether no replayed exchange changed."""
        return not self.changed

    def to_json(self) -> dict[str, Any]:
        """Return the report as one JSON object (the ``replay --json`` output)."""
        return {
            "target": self.target,
            "replayed": len(self.results),
            "changed": len(self.changed),
            "skipped": len(self.skipped),
            "ok": self.ok,
            "exchanges": [r.to_json() for r in self.results],
            "skippedExchanges": [s.to_json() for s in self.skipped],
        }


def result_lines(result: CaseResult) -> Iterator[str]:
    """The human lines of one replayed exchange: its verdict, each change, each note."""
    status = (str(result.recorded_status) if result.recorded_status == result.replayed_status
              else f"{result.recorded_status}->{result.replayed_status}")
    yield (f"{result.verdict:7} {result.exchange_id} {result.method or '-'} "
           f"({result.era}) HTTP {status}")
    for change in result.changes:
        yield f"        {change.what}: {change.message}"
        if len(change.paths) > 1:
            yield from (f"          {path}" for path in change.paths)
    for note in result.notes:
        yield f"        note: {note}"


def skipped_line(item: Skipped) -> str:
    """The human line of one exchange not replayed."""
    return f"skipped {item.exchange_id} {item.method or '-'}: {item.reason}"


def summary_line(replayed: int, changed: int, skipped: int, target: str) -> str:
    """The last human line: how many exchanges were replayed, changed and skipped."""
    return (f"replay: {replayed} replayed, {changed} changed, {skipped} skipped "
            f"against {target}")


def iter_lines(report: ReplayReport) -> Iterator[str]:
    """The human report: one line per exchange, one per change, then a summary line."""
    for result in report.results:
        yield from result_lines(result)
    yield from (skipped_line(item) for item in report.skipped)
    yield summary_line(len(report.results), len(report.changed), len(report.skipped),
                       report.target)
