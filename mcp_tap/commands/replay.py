"""``mcp-tap replay EVIDENCE... --target URL``: re-send captured requests to a candidate.

Every captured POST is sent again with a fresh JSON-RPC id and compared with the recorded
origin answer (see :mod:`mcp_tap.replay`). Credentials were redacted from the evidence, so
inject your own: ``--header 'Authorization: Bearer ...'`` (repeatable) or, to keep the
secret out of the process list, ``--header-env Authorization=MY_TOKEN_VAR``. Exit 0 when no
replayed exchange changed semantically, 1 when one did, 2 for bad input or an unreachable
target (one line on stderr).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator

from mcp_tap.cli import EXIT_NO, EXIT_OK
from mcp_tap.commands.integrity import add_allow_unverified, check_integrity, marked
from mcp_tap.commands.probe import timeout_seconds
from mcp_tap.errors import InputError
from mcp_tap.evidence import find_bundles
from mcp_tap.header_options import add_header_options, headers_from_args
from mcp_tap.outputs import Check, Location, Outcome, add_format_option, emit
from mcp_tap.outputs.printable import printable_lines
from mcp_tap.probe.client import check_timeout
from mcp_tap.replay import (
    CaseResult,
    ReplayOptions,
    ReplayReport,
    Skipped,
    bundle_records,
    collect,
    iter_lines,
    iter_replay,
    parse_ignore,
)
from mcp_tap.replay.report import result_lines, skipped_line, summary_line
from mcp_tap.urls import check_http_url, shown_url

NAME = "replay"
HELP = "re-send captured requests to a candidate server and compare its answers"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``replay`` arguments to ``parser``."""
    parser.add_argument("evidence", nargs="+", metavar="EVIDENCE",
                        help="evidence bundle directories (or directories of bundles)")
    parser.add_argument("--target", required=True, metavar="URL",
                        help="the candidate server's MCP endpoint, e.g. http://host:9000/mcp")
    add_header_options(parser, "replayed request")
    parser.add_argument("--ignore", action="append", default=[], metavar="PATH",
                        help="a volatile field to leave out of the payload comparison, as a "
                        "dotted path in the JSON-RPC response (result.structuredContent.time; "
                        "* or [] for any key or element); repeatable")
    parser.add_argument("--hop", metavar="NAME",
                        help="replay only the exchanges recorded at this hop")
    parser.add_argument("--timeout", type=timeout_seconds, default=30.0, metavar="SECONDS",
                        help="per-request timeout: the whole answer, streamed or not, must "
                        "arrive within it (default 30, at most 3600)")
    add_format_option(parser)
    add_allow_unverified(parser)


def options(args: argparse.Namespace) -> ReplayOptions:
    """Build the replay options from the parsed arguments (raises InputError)."""
    check_timeout(args.timeout)
    check_http_url(args.target, "--target")
    headers = headers_from_args(args, os.environ)
    return ReplayOptions(
        target=args.target,
        headers=tuple(headers),
        ignore=tuple(parse_ignore(p) for p in args.ignore),
        timeout=args.timeout,
        hop=args.hop,
    )


def outcome(report: ReplayReport) -> Outcome:
    """The command's result in every output format: one check per replayed exchange."""
    checks = [
        Check(name=f"{r.exchange_id} {r.method or '-'}", group="mcp-tap.replay",
              passed=not r.changes,
              message="; ".join(c.message for c in r.changes) or "same answer",
              rule=f"replay.{r.changes[0].what}" if r.changes else None,
              locations=(Location(path=report.target, exchange=r.exchange_id),))
        for r in report.results]
    checks += [Check(name=f"{s.exchange_id} {s.method or '-'}", group="mcp-tap.replay",
                     passed=True, skipped=True, message=s.reason) for s in report.skipped]
    return Outcome(command="replay", headline="same" if report.ok else "changed", ok=report.ok,
                   data=report.to_json(), text=printable_lines(iter_lines(report)),
                   checks=tuple(checks))


def _stream_text(items: Iterator[CaseResult | Skipped], target: str, flag: str = "") -> bool:
    """Print the human lines as the exchanges are replayed; return whether none changed.

    Nothing is printed before the target first answers (skips until then wait), so an
    unreachable target is one line on stderr and no stdout, as with the other formats.
    """
    counts = {"replayed": 0, "changed": 0, "skipped": 0}
    waiting: list[str] | None = []
    for item in items:
        if isinstance(item, Skipped):
            counts["skipped"] += 1
            lines = [skipped_line(item)]
        else:
            counts["replayed"] += 1
            counts["changed"] += bool(item.changes)
            lines = list(result_lines(item))
            if waiting is not None:
                lines, waiting = waiting + lines, None
        if waiting is not None:
            waiting += lines
        else:
            sys.stdout.write(printable_lines(lines))
    if not counts["replayed"] and not counts["skipped"]:
        raise InputError("the evidence holds no exchange to replay")
    sys.stdout.write(printable_lines(waiting or ()))
    sys.stdout.write(flag + printable_lines([summary_line(
        counts["replayed"], counts["changed"], counts["skipped"], shown_url(target))]))
    return not counts["changed"]


def run(args: argparse.Namespace) -> int:
    """Replay the evidence against the target; print the report; return the exit code.

    The bundles are read one record at a time; the text report is printed as the replay
    goes, the structured formats (which list every exchange) at the end.
    """
    opts = options(args)
    bundles = [bundle for path in args.evidence for bundle in find_bundles(path)]
    integrity = check_integrity(bundles, allow=args.allow_unverified)
    items = iter_replay(bundle_records(bundles, lenient=integrity.lenient), opts)
    if args.format == "text":
        flag = "" if integrity.ok else "UNVERIFIED: "  # (the banner went to stderr first)
        return EXIT_OK if _stream_text(items, opts.target, flag) else EXIT_NO
    report = collect(items, opts.target)
    if not report.results and not report.skipped:
        raise InputError("the evidence holds no exchange to replay")
    emit(marked(outcome(report), integrity), args)
    return EXIT_OK if report.ok else EXIT_NO
