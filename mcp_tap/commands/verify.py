"""``mcp-tap verify DIR [--json]``: check an evidence bundle's integrity.

Exit 0 when the bundle verifies (warnings such as an unclosed last segment allowed), 1 when
any problem of severity error was found, 2 when the directory is not a readable bundle or its
format is unknown (raised as InputError/BundleFormatError; the CLI prints one line).
"""

from __future__ import annotations

import argparse
import sys

import orjson

from mcp_tap.cli import EXIT_NO, EXIT_OK
from mcp_tap.evidence.reader import find_bundles
from mcp_tap.evidence.verify import VerifyReport, verify_bundle


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``verify`` arguments: the bundle directory and ``--json``."""
    parser.add_argument("evidence", metavar="DIR", help="the evidence bundle directory")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


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


def run(args: argparse.Namespace) -> int:
    """Verify the bundle named by ``args.evidence``; print the report; return the exit code."""
    reports = [verify_bundle(path) for path in find_bundles(args.evidence)]
    if args.json:
        # One bundle: its report; a directory of bundles: a list of reports.
        data = reports[0].to_json() if len(reports) == 1 else [r.to_json() for r in reports]
        sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode())
        sys.stdout.write("\n")
    else:
        for report in reports:
            if len(reports) > 1:
                sys.stdout.write(f"{report.path}:\n")
            sys.stdout.write("".join(line + "\n" for line in summary(report)))
    return EXIT_OK if all(r.ok for r in reports) else EXIT_NO
