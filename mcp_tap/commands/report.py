"""``mcp-tap report EVIDENCE... --out FILE.html [--policy FILE --rollback FILE]``.

Writes one self-contained HTML page (see :mod:`mcp_tap.report`): the gate's decision card
(policy, rollback target, what would change the decision) when a policy and rollback
evidence are given (otherwise conformance verdicts only), the health window and its error
exchanges, findings grouped by rule, the hops, latency plots, SSE first-event latency, an
exchange index and the exchange view. Records are streamed, so memory does not grow with the
bundles. Exit 0 when the page was written; 1 when it was written but a bundle does not
verify (the page's first card and the summary line say so; ``--allow-unverified`` makes
that 0); 2 for bad input (an unreadable bundle, policy or rollback file, or an output file
that cannot be written).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import orjson

from mcp_tap.cli import EXIT_NO, EXIT_OK
from mcp_tap.commands.integrity import add_allow_unverified
from mcp_tap.errors import InputError
from mcp_tap.files import file_argument
from mcp_tap.outputs.printable import printable_lines
from mcp_tap.report import DEFAULT_BOUNDS, MAX_ROWS, load_report, render_report

NAME = "report"
HELP = "write a self-contained HTML report: decision card, health, findings, exchanges, plots"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``report`` arguments to ``parser``."""
    parser.add_argument("evidence", nargs="+", metavar="EVIDENCE",
                        help="evidence bundle directories (or directories of bundles)")
    parser.add_argument("--out", required=True, type=file_argument, metavar="FILE.html",
                        help="where to write the page")
    parser.add_argument("--policy", type=file_argument, metavar="FILE",
                        help="gate policy: with --rollback, the page shows the gate's decision")
    parser.add_argument("--rollback", type=file_argument, metavar="FILE",
                        help="attested rollback evidence for the gate decision")
    parser.add_argument("--max-rows", type=int, default=MAX_ROWS, metavar="N",
                        help=f"rows of the exchange index (default {MAX_ROWS})")
    parser.add_argument("--json", action="store_true",
                        help="print a one-line JSON summary of what was written")
    add_allow_unverified(parser)


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file, so a reader never sees half."""
    directory = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=directory)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from exc


def run(args: argparse.Namespace) -> int:
    """Build the report from ``args.evidence`` and write it to ``args.out``."""
    if args.max_rows < 1:
        raise InputError("--max-rows must be at least 1")
    if (args.policy is None) != (args.rollback is None):
        given, missing = ("--policy", "--rollback") if args.rollback is None else (
            "--rollback", "--policy")
        raise InputError(f"{given} without {missing}: --policy and --rollback go together "
                         "(both for the gate's decision, neither for conformance only)")
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    data = load_report(args.evidence, policy=args.policy, rollback=args.rollback,
                       generated=generated, bounds=replace(DEFAULT_BOUNDS, rows=args.max_rows))
    write_atomically(args.out, render_report(data))
    action = data.decision.get("action") if data.decision else None
    unverified = sum(1 for b in data.bundles if not b.intact)
    if args.json:
        summary = {"out": str(args.out), "bundles": len(data.bundles),
                   "unverified": unverified,
                   "exchanges": data.exchanges, "rules": {r.rule: r.count for r in data.rules},
                   "decision": action}
        sys.stdout.write(orjson.dumps(summary).decode() + "\n")
    else:
        decided = f", decision {action}" if action else ""
        first = next((p for b in data.bundles if not b.intact for p in b.problems
                      if p.startswith("error")), "")
        flag = (f"UNVERIFIED ({unverified} bundle(s) do not verify; first {first}): "
                if unverified else "")
        sys.stdout.write(printable_lines([
            f"{flag}report: {args.out} ({len(data.bundles)} bundle(s), {data.exchanges} "
            f"exchanges, {len(data.rules)} rule(s) with findings{decided})"]))
    # The page is written either way (it is where damaged evidence is looked at), but a
    # run on evidence that does not verify fails unless the user allowed it.
    return EXIT_OK if not unverified or args.allow_unverified else EXIT_NO
