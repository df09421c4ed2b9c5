"""``mcp-tap diff BASELINE CANDIDATE``: what changed between two captures of one service.

Each side is an evidence bundle or a directory of bundles. Exit 0 when nothing breaking
changed, 1 when a change is breaking for a client, 2 for bad input (one line on stderr).
``--format`` (``--json`` is ``--format json``): in JUnit, SARIF and Markdown every change is a
case, a breaking one a failure (a SARIF ``error`` of rule ``drift.<area>``) located at the
exchange it was seen in.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import orjson

from mcp_tap.cli import EXIT_NO, EXIT_OK
from mcp_tap.commands.integrity import add_allow_unverified, check_integrity, marked
from mcp_tap.drift import (
    CaptureDiff,
    CaptureSide,
    Severity,
    diff_captures,
    iter_lines,
)
from mcp_tap.evidence import find_bundles, iter_records
from mcp_tap.evidence.reader import bundle_path, read_bundle_meta
from mcp_tap.outputs import Check, Location, Outcome, add_format_option, emit
from mcp_tap.outputs.locations import locate_exchanges
from mcp_tap.outputs.printable import printable_lines

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
    add_format_option(parser)
    add_allow_unverified(parser)


# One SARIF rule per comparison: a breaking change is a result of its area's rule.
RULES: tuple[tuple[str, str], ...] = (
    ("drift.inventory", "a tool, prompt, resource or schema changed in a way a client of the "
     "baseline can fail on"),
    ("drift.behaviour", "the same request is answered in a way a client of the baseline can "
     "fail on"),
    ("drift.conformance", "a rule the baseline kept is broken by the candidate"),
)  # Health drift is never breaking on its own (the gate's baseline policy decides).
_SHOWN_EXAMPLES = 10


class Side:
    """One side of the diff: the bundles ``path`` names, read as a stream of records.

    Nothing is held: :meth:`records` yields every record of every bundle in order, noting
    each bundle's chain head on the way (the closing summary's, else its last record's
    digest) for :meth:`describe`.
    """

    def __init__(self, path: str) -> None:
        """Find the bundles (InputError when ``path`` names none)."""
        self.bundles = find_bundles(path)
        self.heads: list[str] = []
        self.lenient = False  # read leniently: set when unverified bundles are allowed

    def records(self) -> Iterator[dict[str, Any]]:
        """Every record of every bundle, in order (BundleFormatError for a malformed one)."""
        self.heads = []
        for found in self.bundles:
            _format, meta = read_bundle_meta(found)
            last: object = None
            for record in iter_records(found, lenient=self.lenient):
                last = record.get("digest")
                yield record
            closed = meta.get("closed")
            head = closed.get("chainHead") if isinstance(closed, dict) else None
            if not isinstance(head, str):
                head = last
            self.heads.append(head if isinstance(head, str) else "")

    def describe(self, counted: CaptureSide) -> CaptureSide:
        """The side's description: its bundles and chain heads, with the diff's counts."""
        return CaptureSide(tuple(str(b) for b in self.bundles), tuple(self.heads),
                           counted.exchanges, counted.requests)


def _value(value: Any) -> str:
    return "-" if value is None else orjson.dumps(value).decode()


def outcome(diff: CaptureDiff) -> Outcome:
    """The diff in every output format: one check per change, breaking ones failed.

    A change is located at its example exchanges (searched in the candidate's bundles,
    then the baseline's: a removal is seen in the baseline); one without examples (an
    inventory or health change) at the bundles of the side it concerns.
    """
    candidate = [bundle_path(b) for b in diff.candidate.bundles]
    baseline = [bundle_path(b) for b in diff.baseline.bundles]
    wanted = {x for change in diff.changes for x in change.examples[:_SHOWN_EXAMPLES]}
    where = locate_exchanges(candidate + baseline, wanted) if wanted else {}
    checks: list[Check] = []
    for change in diff.changes:
        side = baseline if change.aspect == "removed" else candidate
        locations = tuple(where.get(x) or Location(path=str(side[0]) if side else "",
                                                   exchange=x)
                          for x in change.examples[:_SHOWN_EXAMPLES])
        if not locations and side:
            locations = tuple(Location(path=str(b)) for b in side)
        breaking = change.severity is Severity.BREAKING
        checks.append(Check(
            name=f"{change.area}: {change.message}", group=f"mcp-tap.diff.{change.area}",
            passed=not breaking, message=f"{change.severity}: {change.message}",
            detail=f"{change.subject} {change.aspect}: baseline {_value(change.baseline)}, "
                   f"candidate {_value(change.candidate)}",
            rule=f"drift.{change.area}" if breaking else None, strength="must",
            locations=locations))
    for box, summary in diff.hops.get("candidate", {}).items():
        rows = summary.get("changes", ())
        shown = "; ".join(f"{c['meaning']} {c['class']} {c['path']} x{c['count']}"
                          for c in rows[:8])
        checks.append(Check(
            name=f"hop: box {box}", group="mcp-tap.diff.hop", passed=True,
            message=f"{summary.get('kind') or 'http'}, {summary.get('pairs', 0)} pair(s): "
                    + (shown or "no change"),
            locations=tuple(Location(path=b) for b in diff.candidate.bundles)))
    if not checks:
        checks.append(Check(name="diff", group="mcp-tap.diff", passed=True,
                            message=f"{diff.compared} request(s) compared, no change"))
    counts = {str(s): sum(1 for c in diff.changes if c.severity is s) for s in Severity}
    facts = {**{f"{k} changes": str(v) for k, v in counts.items()},
             "compared": str(diff.compared),
             "baseline": ", ".join(diff.baseline.bundles),
             "candidate": ", ".join(diff.candidate.bundles)}
    return Outcome(command="diff", headline="ok" if diff.ok else "breaking", ok=diff.ok,
                   data=diff.to_json(), text=printable_lines(iter_lines(diff)),
                   checks=tuple(checks), facts=facts, rules=RULES)


def run(args: argparse.Namespace) -> int:
    """Diff the two captures; print the report; return the exit code."""
    # Both sides streamed, baseline first, in bounded memory (mcp_tap.drift.stream).
    old, new = Side(args.baseline), Side(args.candidate)
    integrity = check_integrity([*old.bundles, *new.bundles], allow=args.allow_unverified)
    old.lenient = new.lenient = integrity.lenient
    diff = diff_captures(old.records(), new.records(), hop=args.hop)
    diff = replace(diff, baseline=old.describe(diff.baseline),
                   candidate=new.describe(diff.candidate))
    emit(marked(outcome(diff), integrity), args)
    return EXIT_OK if diff.ok else EXIT_NO
