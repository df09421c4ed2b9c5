"""``mcp-tap sdk-diff EVIDENCE``: raw wire results against the real SDK's typed view.

For every recorded result of a method the SDK client types, show what the SDK dropped,
changed or synthesized (see :mod:`mcp_tap.sdkdiff`). Exit 0 when every difference is on an
allowlisted bookkeeping field, 1 when a semantic difference or an SDK rejection was found,
2 for bad input.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from mcp_tap.commands.integrity import add_allow_unverified, check_integrity, marked
from mcp_tap.outputs import Check, Location, Outcome, add_format_option, emit, rule_strength
from mcp_tap.outputs.printable import printable_lines

if TYPE_CHECKING:
    from mcp_tap.sdkdiff import SdkDiffReport

NAME = "sdk-diff"
HELP = "compare recorded wire results with the real SDK client's typed view"



def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``sdk-diff`` arguments to ``parser``."""
    parser.add_argument("evidence", metavar="EVIDENCE", help="an evidence bundle directory")
    parser.add_argument(
        "--allow",
        metavar="FIELD",
        action="append",
        default=[],
        help="also allow differences on FIELD (a last key such as `nextCursor`, or a full "
        "path such as `result.tools[].futureHint`); repeatable. Always allowed: "
        "resultType, _meta, ttlMs, cacheScope",
    )
    add_format_option(parser)
    add_allow_unverified(parser)


def _text(report: SdkDiffReport) -> str:
    lines: list[str] = []
    for entry in report.entries:
        label = f"{entry.exchangeId or '-'} {entry.method} ({entry.era} {entry.version})"
        if entry.error is not None:
            lines.append(f"{label}: rejected: {entry.error}")
        for found in entry.findings:
            lines.append(f"{label}: {found.rule} {found.where}: {found.message}")
    if report.entries_omitted:
        lines.append(f"({report.entries_omitted} more compared exchange(s) not listed: "
                     "the examples are the first of each rule; the counts are exact)")
    for rule, counted in sorted(report.by_rule.items()):
        more = ", ..." if counted.more_where else ""
        lines.append(f"{rule}: {counted.count} difference(s) in {counted.exchanges} "
                     f"exchange(s) at {', '.join(sorted(counted.where)) or 'result'}{more}")
    lines.append(
        f"sdk-diff: {report.compared} compared, {report.skipped} skipped, "
        f"{report.differences} difference(s), {report.rejected} rejected, "
        f"{report.allowed} allowed"
    )
    return printable_lines(lines)


def _allow_fields(names: list[str]) -> frozenset[str]:
    """The ``--allow`` values, checked by the rule the policy applies to ``sdk.allow_fields``."""
    from mcp_tap.gate.policy import check_allow_fields

    return check_allow_fields(names, "sdk-diff: --allow")


def outcome(report: SdkDiffReport, evidence: str) -> Outcome:
    """The command's result in every output format: one check per rule, one passing if none."""
    checks = [Check(name="sdk-diff", group="mcp-tap.sdk-diff", passed=True,
                    message=f"{report.compared} compared, no semantic difference")
              ] if not report.by_rule else []
    for rule, counted in sorted(report.by_rule.items()):
        more = ", ..." if counted.more_where else ""
        checks.append(Check(
            name=rule, group="mcp-tap.sdk-diff", passed=False, rule=rule,
            strength=rule_strength(rule),
            message=f"{counted.count} difference(s) at "
                    f"{', '.join(sorted(counted.where)) or 'result'}{more}",
            locations=tuple(Location(path=evidence, exchange=x)
                            for x in counted.examples[:10])))
    return Outcome(command="sdk-diff", headline="ok" if report.ok else "differences",
                   ok=report.ok, data=report.to_json(), text=_text(report), checks=tuple(checks))


def run(args: argparse.Namespace) -> int:
    """Run ``sdk-diff``; return 0 (no semantic difference), 1 (differences) or 2 (bad input)."""
    from mcp_tap.evidence import find_bundles
    from mcp_tap.sdkdiff import DEFAULT_ALLOWLIST, diff_bundles

    allowlist = DEFAULT_ALLOWLIST | _allow_fields(args.allow)
    # Streamed (one record at a time, whatever the bundles' size), one process per bundle.
    bundles = find_bundles(args.evidence)
    integrity = check_integrity(bundles, allow=args.allow_unverified)
    report = diff_bundles(bundles, allowlist, lenient=integrity.lenient)
    emit(marked(outcome(report, str(args.evidence)), integrity), args)
    return 0 if report.ok else 1
