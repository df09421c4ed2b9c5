"""``mcp-tap diff BASELINE CANDIDATE``: what changed between two captures of one service.

Each side is an evidence bundle or a directory of bundles. Exit 0 when nothing breaking
changed, 1 when a change is breaking for a client, 2 for bad input (one line on stderr).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import orjson

from mcp_tap.cli import EXIT_NO, EXIT_OK
from mcp_tap.drift import CaptureSide, describe_side, diff_captures, iter_lines
from mcp_tap.evidence import find_bundles, read_bundle

NAME = "diff"
HELP = "what changed between two captures of one service (inventory, behaviour, rules, health)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``diff`` arguments to ``parser``."""
    parser.add_argument("baseline", metavar="BASELINE",
                        help="the baseline evidence bundle (or a directory of bundles)")
    parser.add_argument("candidate", metavar="CANDIDATE",
                        help="the candidate evidence bundle (or a directory of bundles)")
    parser.add_argument("--hop", metavar="NAME",
                        help="compare the exchanges recorded at this hop (needed when a "
                        "capture holds several)")
    parser.add_argument("--json", action="store_true", help="print the diff as JSON")


def load_side(path: str) -> tuple[list[dict[str, Any]], CaptureSide]:
    """Read every bundle ``path`` names; return its records and its description."""
    records: list[dict[str, Any]] = []
    names: list[str] = []
    heads: list[str] = []
    for found in find_bundles(path):
        bundle = read_bundle(found)
        records.extend(bundle.records)
        names.append(str(Path(found)))
        closed = bundle.meta.get("closed")
        head = closed.get("chainHead") if isinstance(closed, dict) else None
        if not isinstance(head, str) and bundle.records:
            head = bundle.records[-1].get("digest")
        heads.append(head if isinstance(head, str) else "")
    return records, describe_side(records, names, heads)


def run(args: argparse.Namespace) -> int:
    """Diff the two captures; print the report; return the exit code."""
    old_records, old_side = load_side(args.baseline)
    new_records, new_side = load_side(args.candidate)
    diff = diff_captures(old_records, new_records, hop=args.hop,
                         baseline_side=old_side, candidate_side=new_side)
    if args.json:
        sys.stdout.write(orjson.dumps(diff.to_json(), option=orjson.OPT_INDENT_2).decode())
        sys.stdout.write("\n")
    else:
        sys.stdout.write("".join(line + "\n" for line in iter_lines(diff)))
    return EXIT_OK if diff.ok else EXIT_NO
