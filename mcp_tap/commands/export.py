"""``mcp-tap export EVIDENCE... --format har|jsonl [--out FILE]``: evidence for other tools.

``har``: a HAR 1.2 file (one entry per exchange, redacted bodies, timings from the record,
SSE events in the content) that HAR viewers open; ``jsonl``: every record as stored, one
per line. Written to ``--out`` or stdout. With ``--out``, ``--summary-format text|json``
(``--json`` is ``--summary-format json``) prints a summary of the file written; ``--format``
already names the file's format. The CI formats do not apply: an export reports no test
result. Exit 0, or 2 for bad input (one line on stderr).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from mcp_tap.cli import EXIT_OK
from mcp_tap.commands.integrity import add_allow_unverified, check_integrity
from mcp_tap.errors import InputError
from mcp_tap.evidence import find_bundles, iter_records
from mcp_tap.evidence.disk import open_private
from mcp_tap.evidence.reader import read_bundle_meta
from mcp_tap.export import iter_jsonl, to_har
from mcp_tap.outputs import add_summary_option
from mcp_tap.outputs.printable import printable_lines

NAME = "export"
HELP = "export evidence as HAR 1.2 (--format har) or plain JSON lines (--format jsonl)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``export`` arguments to ``parser``."""
    parser.add_argument("evidence", nargs="+", metavar="EVIDENCE",
                        help="evidence bundle directories (or directories of bundles)")
    parser.add_argument("--format", required=True, choices=("har", "jsonl"),
                        help="har: HAR 1.2 JSON; jsonl: one stored record per line")
    parser.add_argument("--out", metavar="FILE", help="write here instead of stdout")
    add_summary_option(parser, "--summary-format", default=None,
                       what="(with --out) a summary of the file written")
    add_allow_unverified(parser)


class _Counted:
    """The records of the bundles, read one at a time, counted per kind on the way."""

    def __init__(self, bundles: list[Path], *, lenient: bool = False) -> None:
        self.bundles = bundles
        self.lenient = lenient
        self.records = 0
        self.exchanges = 0
        self.sources: list[dict[str, Any]] = []

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for found in self.bundles:
            _, meta = read_bundle_meta(found)
            closed = meta.get("closed")
            count = 0
            for record in iter_records(found, lenient=self.lenient):
                count += 1
                if record.get("kind") == "exchange":
                    self.exchanges += 1
                yield record
            self.records += count
            self.sources.append({"bundle": found.resolve().name, "records": count,
                                 "chainHead": closed.get("chainHead")
                                 if isinstance(closed, dict) else None})


@contextmanager
def _output(path: str | None) -> Iterator[BinaryIO]:
    """Stdout, or a file written in full under a temporary name and renamed into place."""
    if path is None:
        yield sys.stdout.buffer  # every stdout the CLI runs with is a text layer over bytes
        return
    if not path.strip():
        raise InputError("--out is empty: give a file to write")
    target = Path(path)
    partial = target.with_name(target.name + ".partial")
    try:
        with open_private(partial) as out:  # as private as the evidence it comes from
            yield out
        partial.replace(target)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from None
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def run(args: argparse.Namespace) -> int:
    """Export the bundles in the chosen format; return the exit code.

    Records are read one at a time: JSON lines go out as they are read (memory flat in
    the bundles' size); a HAR document holds its entries, sorted by start time.
    """
    if args.summary_format is not None and args.out is None:
        raise InputError("--summary-format / --json print a summary of the file written: "
                         "give --out FILE")
    bundles = [found for path in args.evidence for found in find_bundles(path)]
    integrity = check_integrity(bundles, allow=args.allow_unverified)
    records = _Counted(bundles, lenient=integrity.lenient)
    written = 0
    with _output(args.out) as out:
        if args.format == "har":
            # to_har reads the sources after the records, when the reading has filled them
            data = orjson.dumps(to_har(records, records.sources),
                                option=orjson.OPT_INDENT_2) + b"\n"
            out.write(data)
            written = len(data)
        else:
            for line in iter_jsonl(records):
                out.write(line)
                written += len(line)
    summary = {"out": args.out, "format": args.format, "bytes": written,
               "verified": integrity.ok,
               "records": records.records, "exchanges": records.exchanges,
               "sources": records.sources}
    if args.summary_format == "json":
        sys.stdout.write(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode() + "\n")
    elif args.summary_format == "text":
        unverified = "" if integrity.ok else "UNVERIFIED: "
        sys.stdout.write(printable_lines([
            f"{unverified}exported {summary['records']} records ({summary['exchanges']} "
            f"exchanges) from {len(records.sources)} bundle(s) to {args.out} as "
            f"{args.format}: {written} bytes"]))
    return EXIT_OK
