"""``mcp-tap transcripts``: judge transcript fixtures offline with the core."""

from __future__ import annotations

import argparse
import sys

import orjson

from mcp_tap.transcripts import CaseResult, load_corpus, load_file, report, run_cases


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the command's options."""
    parser.add_argument("files", nargs="*", metavar="FILE", help="fixture files (JSON)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def _text(results: list[CaseResult]) -> str:
    lines = []
    for r in results:
        mark = "ok  " if r.passed else "FAIL"
        verdict = "accepted" if r.rule is None else f"{r.rule} ({r.code})"
        lines.append(f"{mark} {r.name}: {verdict}")
        if not r.passed:
            lines.append(f"     {r.detail}")
    passed = sum(r.passed for r in results)
    lines.append(f"{passed}/{len(results)} cases met their expectation")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    """Judge the fixtures; exit 0 when every case met its expectation, 1 otherwise."""
    cases = load_corpus() if not args.files else [c for f in args.files for c in load_file(f)]
    results = run_cases(cases)
    if args.json:
        sys.stdout.write(orjson.dumps(report(results), option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write(_text(results))
    failed = [r.name for r in results if not r.passed]
    if failed:
        sys.stderr.write(
            f"mcp-tap: {len(failed)} case(s) did not meet their expectation: {', '.join(failed)}\n"
        )
        return 1
    return 0
