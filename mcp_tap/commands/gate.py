"""``mcp-tap gate EVIDENCE... --policy FILE --rollback FILE``: promote, rollback or hold.

The command does the I/O and hands already-computed source results to the pure decision
(:mod:`mcp_tap.gate.decision`): it verifies every bundle first, reads the records, runs the
SDK differential, computes the health window (and the baseline's), loads transcript or probe
reports and checks the attested rollback evidence. Exit 0 promote, 1 rollback or hold,
2 bad input (unreadable file, unknown bundle version, malformed policy).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from mcp_tap.core.hashing import sha256_hex
from mcp_tap.errors import BundleFormatError, InputError
from mcp_tap.files import file_argument, read_file
from mcp_tap.gate.decision import (
    Action,
    BundleCheck,
    Decision,
    GateInputs,
    Report,
    ReportCase,
    RollbackResult,
    SourceResult,
    conformance_source,
    decide,
    gaps_of,
    hop_source,
    integrity_source,
    sdk_source,
)
from mcp_tap.gate.health import compute_window, evaluate_health
from mcp_tap.gate.policy import Policy, load_policy
from mcp_tap.gate.rollback import check_rollback, missing_rollback, resolve_trust

NAME = "gate"
HELP = "decide promote / rollback / hold from evidence, a health window and rollback evidence"


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


def _load_json(path: Path, what: str) -> Any:
    raw = read_file(path, what)
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"{what} {path} is not valid JSON: {exc}") from exc


def parse_report(raw: bytes, source: str) -> Report:
    """Parse a ``transcripts --json`` / ``probe --json`` report into a :class:`Report`."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"report {source} is not valid JSON: {exc}") from exc
    cases = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(cases, list):
        raise InputError(f"report {source} must be an object with a `cases` array")
    parsed: list[ReportCase] = []
    for index, case in enumerate(cases):
        if (not isinstance(case, dict) or not isinstance(case.get("name"), str)
                or type(case.get("passed")) is not bool):
            raise InputError(f"report {source}: case {index} needs a string `name` and a "
                             "boolean `passed`")
        rule = case.get("rule")
        ev = case.get("evidenceDigest")
        parsed.append(ReportCase(
            name=case["name"],
            passed=case["passed"],
            rule=rule if isinstance(rule, str) else None,
            evidence_digest=ev if isinstance(ev, str) else "",
        ))
    return Report(digest=sha256_hex(raw), cases=tuple(parsed))


def _load_bundles(
    paths: Sequence[Path], role: str
) -> tuple[list[BundleCheck], list[dict[str, Any]]]:
    """Verify, then read, every bundle; evidence that fails verification is read leniently."""
    from mcp_tap.evidence import find_all_bundles, read_bundle, verify_bundle

    checks: list[BundleCheck] = []
    records: list[dict[str, Any]] = []
    # A proxy's evidence directory holds one bundle per run: accept it or a bundle.
    for path in find_all_bundles(paths):
        # An unknown format version raises BundleFormatError here: bad input, exit 2.
        report = verify_bundle(path)
        problems = tuple((str(p.kind), str(p.severity), str(p.message)) for p in report.problems)
        ok = bool(report.ok)
        try:
            bundle_records = list(read_bundle(path, lenient=not ok).records)
        except BundleFormatError as exc:
            if ok:
                raise
            # Damaged evidence is a reason not to promote, not a reason to print no decision.
            bundle_records = []
            # The decision evidence must not depend on where the bundle sits on this machine.
            problems += (("unreadable", "error", str(exc).replace(str(path), path.name)),)
        checks.append(BundleCheck(role=role, ok=ok, problems=problems,
                                  records=len(bundle_records), head=report.chain_head,
                                  gaps=gaps_of(bundle_records), signer=report.signer,
                                  lost=report.lost, exchanges=report.exchanges,
                                  end=report.end))
        records.extend(bundle_records)
    return checks, records


def _sdk(records: list[dict[str, Any]], policy: Policy) -> SourceResult:
    try:
        from mcp_tap.sdkdiff import DEFAULT_ALLOWLIST, diff_records
    except ImportError as exc:
        return sdk_source(None, policy.sdk.allow_fields, unavailable=str(exc))
    allowlist = DEFAULT_ALLOWLIST | policy.sdk.allow_fields
    exchanges = [r for r in records if r.get("kind") == "exchange"]
    return sdk_source(diff_records(exchanges, allowlist), allowlist)


def _rollback(path: Path | None, policy: Policy) -> RollbackResult:
    if path is None:
        return missing_rollback()
    trust = resolve_trust(policy.rollback, os.environ)
    return check_rollback(_load_json(path, "rollback evidence"), trust)


def evaluate(args: argparse.Namespace) -> Decision:
    """Gather every source named by ``args`` and return the decision (raises InputError)."""
    policy = load_policy(args.policy)
    reports = [parse_report(read_file(p, "report"), str(p)) for p in args.report]
    rollback = _rollback(args.rollback, policy)
    checks, records = _load_bundles(args.evidence, "candidate")
    base_checks, base_records = _load_bundles(args.baseline, "baseline")
    health = policy.health
    window = compute_window(records, health.counting, health.hop)
    baseline = (compute_window(base_records, health.counting, health.hop)
                if args.baseline else None)
    inputs = GateInputs(
        conformance=conformance_source(records, policy.conformance, reports),
        sdk=_sdk(records, policy),
        hop=hop_source(records, policy.hop, policy.conformance.examples),
        integrity=integrity_source(checks + base_checks, policy.evidence),
        health=evaluate_health(window, health, baseline),
        rollback=rollback,
        policy_digest=policy.digest,
    )
    return decide(inputs)


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
