"""The report's I/O: find and verify the bundles, stream their records, ask the gate."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mcp_tap.errors import BundleFormatError
from mcp_tap.report.bounds import DEFAULT_BOUNDS, Bounds
from mcp_tap.report.model import BundleSummary, ReportData
from mcp_tap.report.tally import ReportTally


def gate_decision(
    bundles: Iterable[Path], policy: Path, rollback: Path
) -> tuple[dict[str, Any] | None, str]:
    """Ask the gate for its decision on ``bundles``: ``(decision JSON, "")`` or ``(None, why)``.

    Uses the gate library's evaluation, so the page shows exactly what
    ``mcp-tap gate`` decides. Bad policy or rollback input raises InputError like the gate.
    """
    try:
        from mcp_tap.gate.evaluation import evaluate_files
    except ImportError as exc:
        return None, f"the gate is not available ({exc})"
    decision = evaluate_files(bundles, policy, rollback)
    data: dict[str, Any] = decision.to_json()
    return data, ""


def load_report(
    evidence: Iterable[str | Path],
    *,
    policy: Path | None = None,
    rollback: Path | None = None,
    generated: str = "",
    bounds: Bounds = DEFAULT_BOUNDS,
) -> ReportData:
    """Find, verify and stream the bundles under ``evidence``; ask the gate; collect.

    Each bundle is read with :func:`~mcp_tap.evidence.iter_records`, one record at a time,
    into a :class:`~.tally.ReportTally` whose memory is set by ``bounds``, not by the
    bundle. With a policy, health errors are counted as its ``[health]`` section counts
    them. A bundle that fails verification is still shown (read leniently), with its
    problems: the page is where a person looks at damaged evidence, not a second verifier.
    """
    from mcp_tap.evidence import find_all_bundles, iter_records, verify_bundle
    from mcp_tap.gate.policy import load_policy

    paths = find_all_bundles(evidence)
    counting, health_hop = None, None
    if policy is not None:
        loaded = load_policy(policy)
        counting, health_hop = loaded.health.counting, loaded.health.hop
    tally = ReportTally(bounds, counting, health_hop)
    summaries: list[BundleSummary] = []
    for path in paths:
        verified = verify_bundle(path)
        problems = [f"{p.severity}: {p.message}" for p in verified.problems]
        tally.begin_bundle()
        before = tally.exchanges
        records = 0
        try:
            for record in iter_records(path, lenient=not verified.ok):
                records += 1
                tally.add(record)
            if tally.wanted():
                for record in iter_records(path, lenient=not verified.ok):
                    tally.fetch(record)
        except BundleFormatError as exc:
            problems.append(f"error: unreadable: {exc}")
        summaries.append(BundleSummary(
            path=str(path), ok=verified.ok, records=records,
            exchanges=tally.exchanges - before, errors=len(verified.errors),
            intact=verified.intact and not problems[len(verified.problems):],
            warnings=len(verified.warnings), problems=tuple(problems)))
    decision: dict[str, Any] | None = None
    note = ""
    if policy is not None and rollback is not None:
        decision, note = gate_decision(paths, policy, rollback)
    elif policy is not None or rollback is not None:
        note = "a gate decision needs both --policy and --rollback"
    return tally.finish(summaries, decision=decision, decision_note=note, generated=generated,
                        policy_path="" if policy is None else str(policy))
