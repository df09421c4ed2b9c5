"""``mcp-tap transcripts``: judge transcript fixtures offline with the core."""

from __future__ import annotations

import argparse
import sys

from mcp_tap.outputs import Check, Location, Outcome, add_format_option, emit, rule_strength
from mcp_tap.outputs.printable import printable_lines
from mcp_tap.transcripts import CaseResult, load_corpus, load_file, report, run_cases

NAME = "transcripts"
HELP = "judge transcript fixtures offline (default: the shipped corpus)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the command's options."""
    parser.add_argument("files", nargs="*", metavar="FILE", help="fixture files (JSON)")
    add_format_option(parser)


def _text(results: list[CaseResult]) -> str:
    lines = []
    for r in results:
        mark = "ok  " if r.passed else "FAIL"
        verdict = "accepted" if r.rule is None else f"{r.rule} ({r.code}, {r.strength})"
        lines.append(f"{mark} {r.name}: {verdict}")
        if not r.passed:
            lines.append(f"     {r.detail}")
        if r.assumed:  # headers the fixture omitted, judged as a conforming client sends them
            lines.append("     assumed " + ", ".join(f"{n}: {v}" for n, v in r.assumed))
    passed = sum(r.passed for r in results)
    lines.append(f"{passed}/{len(results)} cases met their expectation")
    return printable_lines(lines)


def outcome(results: list[CaseResult]) -> Outcome:
    """The command's result in every output format: one check per case."""
    checks = tuple(
        Check(name=r.name, group="mcp-tap.transcripts", passed=r.passed,
              message=("accepted" if r.rule is None else f"{r.rule} ({r.code})")
              + ("" if r.passed else f": {r.detail}"),
              detail=r.detail, rule=r.rule,
              strength=rule_strength(r.rule) if r.rule else "must",
              locations=(Location(path="transcripts", exchange=r.evidence_digest),)
              if r.evidence_digest else ())
        for r in results)
    passed = sum(r.passed for r in results)
    return Outcome(command="transcripts", headline=f"{passed}/{len(results)} cases met their "
                   "expectation", ok=passed == len(results), data=report(results),
                   text=_text(results), checks=checks)


def run(args: argparse.Namespace) -> int:
    """Judge the fixtures; exit 0 when every case met its expectation, 1 otherwise."""
    cases = load_corpus() if not args.files else [c for f in args.files for c in load_file(f)]
    results = run_cases(cases)
    emit(outcome(results), args)
    failed = [r.name for r in results if not r.passed]
    if failed:
        sys.stderr.write(printable_lines([
            f"mcp-tap: {len(failed)} case(s) did not meet their expectation: {', '.join(failed)}"
        ]))
        return 1
    return 0
