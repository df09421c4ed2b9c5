"""Conformance drift (rules newly broken or fixed) and health drift (the gate's window).

Conformance: the findings of every exchange and hop-comparison record, tallied by rule. A
rule the candidate breaks and the baseline did not is breaking (a regression the judge
saw); a rule the baseline broke and the candidate does not is compatible (fixed); a rule
both break with a different count is ``changed``.

Health: the gate's :class:`~mcp_tap.gate.health.WindowTally` on both sides, with the gate's default
error counting. The differences are reported as ``changed``; whether one blocks is the
gate's baseline policy to decide (``[health.baseline]``), not the diff's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from mcp_tap.drift.model import Area, Change, Severity
from mcp_tap.gate.health import HealthWindow, Percentiles

RuleTally = dict[str, tuple[int, list[str]]]
"""Rule id -> (finding count, up to three exchange ids)."""


def rule_tally(records: Iterable[Mapping[str, Any]], hop: str | None = None) -> RuleTally:
    """Rule id -> (finding count, up to three exchange ids) over ``records``."""
    tally: RuleTally = {}
    for record in records:
        add_rules(tally, record, hop)
    return tally


def add_rules(tally: RuleTally, record: Mapping[str, Any], hop: str | None = None) -> None:
    """Count the findings of one exchange or hop-comparison record into ``tally``."""
    kind = record.get("kind")
    if kind not in ("exchange", "hop-comparison"):
        return
    if kind == "exchange" and hop is not None and record.get("hop") != hop:
        return
    findings = record.get("findings")
    if not findings or not isinstance(findings, list):
        return
    ident = str(record.get("exchangeId") or "")
    ids = record.get("exchangeIds")
    if not ident and isinstance(ids, list) and ids:
        ident = str(ids[-1])
    for finding in findings:
        rule = finding.get("rule") if isinstance(finding, dict) else None
        if not isinstance(rule, str):
            continue
        count, examples = tally.get(rule, (0, []))
        if len(examples) < 3 and ident and ident not in examples:
            examples.append(ident)
        tally[rule] = (count + 1, examples)


def conformance_changes(baseline: Mapping[str, tuple[int, list[str]]],
                        candidate: Mapping[str, tuple[int, list[str]]]) -> list[Change]:
    """The rules newly broken, fixed or broken a different number of times."""
    changes: list[Change] = []
    for rule in sorted(baseline.keys() | candidate.keys()):
        was, old_examples = baseline.get(rule, (0, []))
        now, new_examples = candidate.get(rule, (0, []))
        subject = f"rule {rule}"
        if was == 0 and now > 0:
            changes.append(Change(Area.CONFORMANCE, Severity.BREAKING, subject, "new",
                                  f"{subject}: newly broken ({now} finding(s))", was, now,
                                  tuple(new_examples)))
        elif now == 0 and was > 0:
            changes.append(Change(Area.CONFORMANCE, Severity.COMPATIBLE, subject, "fixed",
                                  f"{subject}: fixed (was {was} finding(s))", was, now,
                                  tuple(old_examples)))
        elif was != now:
            changes.append(Change(Area.CONFORMANCE, Severity.CHANGED, subject, "count",
                                  f"{subject}: {was} -> {now} finding(s)", was, now,
                                  tuple(new_examples)))
    return changes


def _ms(p: Percentiles | None, name: str) -> float | None:
    return None if p is None else p.get(name)


def health_changes(old: HealthWindow, new: HealthWindow) -> list[Change]:
    """Error-rate and latency differences between the two windows (all ``changed``)."""
    changes: list[Change] = []
    if old.error_rate != new.error_rate:
        changes.append(Change(
            Area.HEALTH, Severity.CHANGED, "health", "errorRate",
            f"health: error rate {_rate(old.error_rate)} -> {_rate(new.error_rate)} "
            f"({old.errors}/{old.samples} -> {new.errors}/{new.samples})",
            old.error_rate, new.error_rate))
    for label, attr in (("latency", "latency_ms"), ("SSE first event", "sse_first_event_ms")):
        before, after = getattr(old, attr), getattr(new, attr)
        for name in ("p50", "p95", "p99"):
            a, b = _ms(before, name), _ms(after, name)
            if a is None or b is None or a == b:
                continue
            changes.append(Change(
                Area.HEALTH, Severity.CHANGED, "health", f"{attr}.{name}",
                f"health: {label} {name} {a:.1f} ms -> {b:.1f} ms ({_pct(a, b)})", a, b))
    return changes


def _rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.2f}%"


def _pct(a: float, b: float) -> str:
    if a == 0:
        return "from zero"
    return f"{(b - a) / a * 100:+.0f}%"
