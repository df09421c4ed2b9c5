"""``mcp-tap verify DIR [--json]``: check an evidence bundle's integrity.

Exit 0 when the bundle verifies (warnings such as an unclosed last segment allowed), 1 when
any problem of severity error was found, 2 when the directory is not a readable bundle or its
format is unknown (raised as InputError/BundleFormatError; the CLI prints one line).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mcp_tap.cli import EXIT_NO, EXIT_OK
from mcp_tap.evidence.reader import find_bundles
from mcp_tap.evidence.verify import VerifyReport, verify_bundle
from mcp_tap.outputs import Check, Location, Outcome, add_format_option, emit

NAME = "verify"
HELP = "check an evidence bundle: record digests, hash chain, sequence, manifests, gaps"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``verify`` arguments: the bundle directory and ``--json``."""
    parser.add_argument("evidence", metavar="DIR", help="the evidence bundle directory")
    add_format_option(parser)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def summary(report: VerifyReport) -> list[str]:
    """Return the human report: one line per problem, then an ok or FAILED line."""
    lines = [f"{problem.severity}: {problem.message}" for problem in report.problems]
    if report.ok:
        lines.append(
            f"ok: {_plural(report.records, 'record')} in {_plural(report.segments, 'segment')}"
        )
    else:
        lines.append(f"FAILED: {_plural(len(report.errors), 'problem')}")
    return lines


def _check(report: VerifyReport) -> list[Check]:
    name = str(report.path)
    out = [Check(name=f"{name}: verified", group="mcp-tap.verify", passed=report.ok,
                 message=summary(report)[-1], locations=(Location(path=name),))]
    for problem in report.problems:
        where = Location(path=str(Path(name) / problem.segment) if problem.segment else name,
                         seq=problem.seq)
        out.append(Check(
            name=f"{name}: {problem.kind}" + (f" seq {problem.seq}" if problem.seq else ""),
            group="mcp-tap.verify", passed=problem.severity != "error",
            message=f"{problem.severity}: {problem.message}", rule=f"evidence.{problem.kind}",
            strength="must" if problem.severity == "error" else "should",
            locations=(where,)))
    return out


def outcome(reports: list[VerifyReport]) -> Outcome:
    """The command's result in every output format: a check per bundle and per problem."""
    # One bundle: its report; a directory of bundles: a list of reports.
    data = reports[0].to_json() if len(reports) == 1 else [r.to_json() for r in reports]
    text = []
    for report in reports:
        if len(reports) > 1:
            text.append(f"{report.path}:\n")
        text.append("".join(line + "\n" for line in summary(report)))
    ok = all(r.ok for r in reports)
    return Outcome(command="verify", headline="verified" if ok else "FAILED", ok=ok, data=data,
                   text="".join(text), checks=tuple(c for r in reports for c in _check(r)))


def run(args: argparse.Namespace) -> int:
    """Verify the bundle named by ``args.evidence``; print the report; return the exit code."""
    reports = [verify_bundle(path) for path in find_bundles(args.evidence)]
    emit(outcome(reports), args)
    return EXIT_OK if all(r.ok for r in reports) else EXIT_NO
