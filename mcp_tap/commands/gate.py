"""``mcp-tap gate EVIDENCE... --policy FILE --rollback FILE``: promote, rollback or hold.

The command parses its arguments and prints; the evaluation is the library's
(:func:`mcp_tap.gate.evaluation.evaluate`): it verifies every bundle first, streams the
records, runs the SDK differential, computes the health window (and the baseline's), diffs
the candidate against the ``--baseline`` capture (the drift source), loads transcript or
probe reports and checks the attested rollback evidence. ``--format``
text, json, junit, sarif or markdown (:mod:`mcp_tap.outputs`). Exit 0 promote, 1 rollback,
3 hold, 2 bad input (unreadable file, unknown bundle version, malformed policy).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from mcp_tap.cli import EXIT_HOLD, EXIT_NO, EXIT_OK
from mcp_tap.files import evidence_argument, file_argument
from mcp_tap.gate.decision import Action, Decision, SourceResult
from mcp_tap.gate.evaluation import evaluate as evaluate_request
from mcp_tap.gate.evaluation import load_request
from mcp_tap.gate.hopchanges import box_lines
from mcp_tap.outputs import Check, Outcome, add_format_option, emit, rule_strength
from mcp_tap.outputs.locations import locate
from mcp_tap.outputs.printable import printable_lines

NAME = "gate"
HELP = "decide promote / rollback / hold from evidence, a health window and rollback evidence"

def add_decision_arguments(parser: argparse.ArgumentParser) -> None:
    """Add what a decision is made against (``--policy``, ``--rollback``, ``--baseline``):
    the same for ``gate`` and ``gate-server``."""
    parser.add_argument("--policy", required=True, type=file_argument, metavar="FILE",
                        help="the gate policy (TOML; see config/policy.toml)")
    parser.add_argument("--rollback", type=file_argument, metavar="FILE",
                        help="attested rollback evidence (JSON); without it the gate holds")
    parser.add_argument("--baseline", nargs="+", action="extend", default=[],
                        type=evidence_argument,
                        metavar="EVIDENCE",
                        help="evidence bundles of the admitted baseline: the health "
                        "comparison and the drift source ([drift] in the policy)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``gate`` arguments to ``parser``."""
    parser.add_argument("evidence", nargs="+", metavar="EVIDENCE",
                        help="candidate evidence bundle directories")
    add_decision_arguments(parser)
    parser.add_argument("--report", action="append", default=[], type=file_argument, metavar="FILE",
                        help="a `transcripts --json` or `probe --json` report; repeatable")
    parser.add_argument("--full", action="store_true",
                        help="read every record, even of segments whose signed manifests "
                        "carry tallies (without it the gate merges those tallies: its cost "
                        "grows with segments, not exchanges; same decision)")
    parser.add_argument("--rerun-sdk", action="store_true",
                        help="run the SDK differential on every exchange read, even where a "
                        "signed manifest's tallies hold the outcome the recording process "
                        "found with the same SDK (the default takes that outcome)")
    add_format_option(parser)


def _source_line(source: SourceResult) -> str:
    s = source.summary
    verdict = "pass" if source.passed else "FAIL"
    if source.name == "conformance":
        detail = f"{s.get('exchanges', 0)} exchanges, {s.get('findings', 0)} findings"
    elif source.name == "sdk":
        detail = f"{s.get('compared', 0)} compared, {s.get('differences', 0)} differences"
    elif source.name == "hop":
        detail = f"{s.get('comparisons', 0)} hop comparisons, {s.get('findings', 0)} findings"
    elif source.name == "drift":
        detail = (f"{s.get('changes', 0)} change(s) from the baseline, "
                  f"{s.get('blocking', 0)} blocking" if "changes" in s else "not compared")
    elif source.name == "integrity":
        bundles = s.get("bundles", [])
        detail = f"{sum(1 for b in bundles if b['ok'])}/{len(bundles)} bundles verified"
    else:
        w = s.get("window", {})
        rate = w.get("errorRate")
        name = s.get("thresholds", {}).get("latencyPercentile", "p95")
        lat = w.get("latencyMs") or {}
        detail = (f"{w.get('samples', 0)} samples, error rate "
                  f"{'-' if rate is None else f'{rate:.4f}'}, {name} "
                  f"{lat.get(name, '-')} ms, observed {w.get('observationSeconds', 0)} s")
    return f"{source.name}: {verdict} ({detail})"


def _box_checks(source: SourceResult) -> list[Check]:
    """One check per box with changes: its most important rows (a failure of the box is
    already a reason's check)."""
    boxes = source.summary.get("changes")
    if not isinstance(boxes, dict):
        return []
    out = []
    for box, summary in boxes.items():
        rows = summary.get("changes", ())
        shown = "; ".join(f"{c['meaning']} {c['class']} {c['path']} x{c['count']}"
                          for c in rows[:8])
        more = len(rows) - 8 + summary.get("moreRows", 0)
        out.append(Check(
            name=f"hop: box {box}", group="mcp-tap.gate.hop", passed=True,
            message=f"{summary.get('kind') or 'http'}, {summary.get('pairs', 0)} pair(s): "
                    + (shown or "no change") + (f"; {more} more" if more > 0 else ""),
            detail=orjson.dumps(summary).decode()))
    return out


def render_text(decision: Decision) -> str:
    """Render the decision for a person: action, reasons, per-source lines, digest."""
    lines = [f"gate: {decision.action}"]
    for reason in decision.reasons:
        underlying = f" [{', '.join(reason.findings)}]" if reason.findings else ""
        lines.append(f"  {reason.rule}{underlying}: {reason.message}")
    for source in decision.sources:
        lines.append(_source_line(source))
        if source.name == "hop":
            lines.extend(box_lines(source.summary.get("changes")))
    rb = decision.rollback
    if rb.ready:
        lines.append(f"rollback: ready ({rb.summary.get('previousVersion')} attested by "
                     f"{rb.summary.get('signer')}, {rb.summary.get('algorithm')})")
    else:
        lines.append("rollback: NOT READY")
    if decision.reading is not None:
        lines.append(decision.reading.text())
    lines.append(f"evidence digest: {decision.evidence_digest}")
    return printable_lines(lines)


def checks(decision: Decision, bundles: Sequence[Path] = ()) -> tuple[Check, ...]:
    """One check per passing source, one failed check per reason (located in ``bundles``)."""
    examples = [e for r in decision.reasons for e in r.details.get("examples", ())
                if isinstance(e, str)]
    where = locate(bundles, examples) if examples and bundles else {}
    out: list[Check] = []
    groups = [(s.name, s.passed, s.reasons, _source_line(s)) for s in decision.sources]
    groups.append(("rollback", decision.rollback.ready, decision.rollback.reasons,
                   "rollback target verified" if decision.rollback.ready else ""))
    for source in decision.sources:
        if source.name == "hop":
            out.extend(_box_checks(source))
    for name, passed, reasons, line in groups:
        if passed:
            out.append(Check(name=name, group="mcp-tap.gate", passed=True, message=line))
        for reason in reasons:
            # The finding rule when the reason is about exactly one, else the gate rule.
            rule = reason.findings[0] if len(reason.findings) == 1 else reason.rule
            found = tuple(where[e] for e in reason.details.get("examples", ()) if e in where)
            out.append(Check(
                name=f"{name}: {rule}", group=f"mcp-tap.gate.{name}", passed=False,
                message=reason.message, rule=rule, strength=rule_strength(rule),
                detail=orjson.dumps(dict(reason.details)).decode(), locations=found))
    return tuple(out)


def outcome(decision: Decision, bundles: Sequence[Path] = ()) -> Outcome:
    """The command's result in every output format."""
    return Outcome(
        command="gate", headline=str(decision.action),
        ok=decision.action is Action.PROMOTE, data=_data(decision),
        text=render_text(decision), checks=checks(decision, bundles),
        facts={"action": str(decision.action), "evidenceDigest": decision.evidence_digest,
               "policyDigest": decision.policy_digest},
        compact=True)


def _data(decision: Decision) -> dict[str, Any]:
    """The decision's JSON, with how the evidence was read (outside its digest)."""
    data = decision.to_json()
    if decision.reading is not None:
        data["reading"] = decision.reading.to_json()
    return data


EXIT_CODES = {Action.PROMOTE: EXIT_OK, Action.ROLLBACK: EXIT_NO, Action.HOLD: EXIT_HOLD}


def run(args: argparse.Namespace) -> int:
    """Run ``gate``; return 0 (promote), 1 (rollback), 3 (hold) or 2 via InputError."""
    request = load_request(args.evidence, args.policy, args.rollback,
                           baseline=args.baseline, reports=args.report)
    decision = evaluate_request(request, full=args.full, rerun_sdk=args.rerun_sdk)
    emit(outcome(decision, request.evidence), args)
    return EXIT_CODES[decision.action]
