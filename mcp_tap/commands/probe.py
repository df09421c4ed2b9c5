"""``mcp-tap probe --target URL``: send the corpus's requests to a live server, judge its answers.

Exit 0 when every probed case passed, 1 when one did not (or nothing could be probed), 2 for
bad input or a target that cannot be reached (one line on stderr, from :mod:`mcp_tap.cli`).
"""

from __future__ import annotations

import argparse
import os
import sys

from mcp_tap.core.eras import Era
from mcp_tap.errors import InputError
from mcp_tap.header_options import add_header_options, headers_from_args
from mcp_tap.outputs import Check, Location, Outcome, add_format_option, emit, rule_strength
from mcp_tap.outputs.printable import printable_lines
from mcp_tap.probe import (
    DEFAULT_TIMEOUT,
    MAX_TIMEOUT,
    ProbeReport,
    ProbeResult,
    check_timeout,
    run_probe,
)

NAME = "probe"
HELP = "send the corpus's requests to a live server and judge its real answers"

_ERAS = {
    "modern": (Era.MODERN,),
    "legacy": (Era.LEGACY,),
    "both": (Era.MODERN, Era.LEGACY),
}


def timeout_seconds(text: str) -> float:
    """An argparse type for ``--timeout`` (probe and replay): finite seconds, 0 < s <= 3600.

    The rule is :func:`mcp_tap.probe.check_timeout`; a violation is argparse's one-line
    usage error (exit 2).
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    try:
        return check_timeout(value)
    except InputError:
        raise argparse.ArgumentTypeError(
            f"expected a number of seconds above 0 and at most {MAX_TIMEOUT:g}, got {text!r}"
        ) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the command's options."""
    parser.add_argument("--target", required=True, metavar="URL",
                        help="the server's Streamable HTTP endpoint, e.g. http://127.0.0.1:9000/mcp")
    parser.add_argument("--era", choices=sorted(_ERAS), default="both",
                        help="which era to probe (default: both, modern first)")
    add_header_options(parser, "request")
    parser.add_argument("--timeout", type=timeout_seconds, default=DEFAULT_TIMEOUT,
                        metavar="SECONDS", help="seconds to wait for each answer "
                        f"(default {DEFAULT_TIMEOUT:g}, at most {MAX_TIMEOUT:g})")
    add_format_option(parser)


def _case_lines(r: ProbeResult) -> list[str]:
    if r.skipped:
        return [f"skip {r.era:<6} {r.name}: {r.detail}"]
    mark = "ok  " if r.passed else "FAIL"
    status = "no answer" if r.http_status is None else f"HTTP {r.http_status}"
    if r.rule is not None:
        verdict = f" {r.rule} ({r.code if r.code is not None else '-'})"
    elif r.code is not None:
        verdict = f" JSON-RPC error {r.code}"
    else:
        verdict = ""
    lines = [f"{mark} {r.era:<6} {r.name}: {status}{verdict}", f"     {r.detail}"]
    if not r.passed and r.body is not None:
        lines.append(f"     body: {r.body if r.body else '(empty)'}")
    return lines


def _text(report: ProbeReport) -> str:
    lines = [f"probe {report.target} ({', '.join(str(e) for e in report.eras)})"]
    lines += [f"note: {n}" for n in report.notes]
    for r in report.results:
        lines += _case_lines(r)
    probed = report.probed
    passed = sum(r.passed for r in probed)
    lines.append(
        f"{passed}/{len(probed)} probed cases passed, {len(report.failed)} failed, "
        f"{len(report.results) - len(probed)} skipped; {len(report.not_probeable)} "
        "response-side corpus case(s) are not probeable")
    return printable_lines(lines)


def outcome(report: ProbeReport) -> Outcome:
    """The command's result in every output format: one check per probed case."""
    checks = tuple(
        Check(name=f"{r.era} {r.name}", group=f"mcp-tap.probe.{r.era}", passed=r.passed,
              skipped=r.skipped, message=" ".join(_case_lines(r)[0].split()[1:]),
              detail=r.detail, rule=r.rule,
              strength=rule_strength(r.rule) if r.rule else "must",
              locations=(Location(path=report.target),))
        for r in report.results)
    probed = report.probed
    passed = sum(r.passed for r in probed)
    return Outcome(command="probe", headline=f"{passed}/{len(probed)} probed cases passed",
                   ok=report.ok, data=report.to_json(), text=_text(report), checks=checks)


def run(args: argparse.Namespace) -> int:
    """Probe the target; exit 0 when every probed case passed, 1 otherwise."""
    headers = headers_from_args(args, os.environ)
    report = run_probe(args.target, eras=_ERAS[args.era], headers=headers,
                       timeout=args.timeout)
    emit(outcome(report), args)
    if report.ok:
        return 0
    failed = [r.name for r in report.failed]
    why = (f"{len(failed)} probed case(s) failed: {', '.join(failed)}" if failed
           else "no case could be probed")
    sys.stderr.write(printable_lines([f"mcp-tap: {why}"]))
    return 1
