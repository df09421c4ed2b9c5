"""``mcp-tap gate EVIDENCE... --policy FILE --rollback FILE``: promote, rollback or hold.

The command parses its arguments and prints; the evaluation is the library's
(:func:`mcp_tap.gate.evaluation.evaluate`): it verifies every bundle first, streams the
records, runs the SDK differential, computes the health window (and the baseline's), loads
transcript or probe reports and checks the attested rollback evidence. Exit 0 promote,
1 rollback or hold, 2 bad input (unreadable file, unknown bundle version, malformed policy).
"""

from __future__ import annotations

import argparse
import sys

import orjson

from mcp_tap.files import file_argument
from mcp_tap.gate.decision import Action, Decision, SourceResult
from mcp_tap.gate.evaluation import evaluate as evaluate_request
from mcp_tap.gate.evaluation import load_request


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``gate`` arguments to ``parser``."""
    parser.add_argument("evidence", nargs="+", metavar="EVIDENCE",
                        help="candidate evidence bundle directories")
    parser.add_argument("--policy", required=True, type=file_argument, metavar="FILE",
                        help="the gate policy (TOML; see config/policy.toml)")
    parser.add_argument("--rollback", type=file_argument, metavar="FILE",
                        help="attested rollback evidence (JSON); without it the gate holds")
    parser.add_argument("--baseline", nargs="+", action="extend", default=[], type=file_argument,
                        metavar="EVIDENCE", help="evidence bundles of the admitted baseline")
    parser.add_argument("--report", action="append", default=[], type=file_argument, metavar="FILE",
                        help="a `transcripts --json` or `probe --json` report; repeatable")
    parser.add_argument("--json", action="store_true", help="print the decision as one JSON object")


def evaluate(args: argparse.Namespace) -> Decision:
    """Read the files ``args`` names and return the library's decision (raises InputError)."""
    request = load_request(args.evidence, args.policy, args.rollback,
                           baseline=args.baseline, reports=args.report)
    return evaluate_request(request)


def _source_line(source: SourceResult) -> str:
    s = source.summary
    verdict = "pass" if source.passed else "FAIL"
    if source.name == "conformance":
        detail = f"{s.get('exchanges', 0)} exchanges, {s.get('findings', 0)} findings"
    elif source.name == "sdk":
        detail = f"{s.get('compared', 0)} compared, {s.get('differences', 0)} differences"
    elif source.name == "hop":
        detail = f"{s.get('comparisons', 0)} hop comparisons, {s.get('findings', 0)} findings"
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


def render_text(decision: Decision) -> str:
    """Render the decision for a person: action, reasons, per-source lines, digest."""
    lines = [f"gate: {decision.action}"]
    for reason in decision.reasons:
        underlying = f" [{', '.join(reason.findings)}]" if reason.findings else ""
        lines.append(f"  {reason.rule}{underlying}: {reason.message}")
    lines.extend(_source_line(s) for s in decision.sources)
    rb = decision.rollback
    if rb.ready:
        lines.append(f"rollback: ready ({rb.summary.get('previousVersion')} attested by "
                     f"{rb.summary.get('signer')}, {rb.summary.get('algorithm')})")
    else:
        lines.append("rollback: NOT READY")
    lines.append(f"evidence digest: {decision.evidence_digest}")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    """Run ``gate``; return 0 (promote), 1 (rollback or hold) or 2 via InputError."""
    decision = evaluate(args)
    if args.json:
        sys.stdout.write(orjson.dumps(decision.to_json()).decode() + "\n")
    else:
        sys.stdout.write(render_text(decision))
    return 0 if decision.action is Action.PROMOTE else 1
