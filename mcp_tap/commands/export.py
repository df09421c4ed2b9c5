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
from pathlib import Path
from typing import Any

import orjson

from mcp_tap.cli import EXIT_OK
from mcp_tap.errors import InputError
from mcp_tap.evidence import find_bundles, read_bundle
from mcp_tap.export import iter_jsonl, to_har
from mcp_tap.outputs import add_summary_option

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


def _write(path: str | None, data: bytes) -> None:
    if path is None:
        sys.stdout.buffer.write(data) if hasattr(sys.stdout, "buffer") else sys.stdout.write(
            data.decode())
        return
    if not path.strip():
        raise InputError("--out is empty: give a file to write")
    try:
        Path(path).write_bytes(data)
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from None


def run(args: argparse.Namespace) -> int:
    """Export the bundles in the chosen format; return the exit code."""
    if args.summary_format is not None and args.out is None:
        raise InputError("--summary-format / --json print a summary of the file written: "
                         "give --out FILE")
    records: list[dict[str, Any]] = []
    sources: list[dict[str, Any]] = []
    for path in args.evidence:
        for found in find_bundles(path):
            bundle = read_bundle(found)
            records.extend(bundle.records)
            closed = bundle.meta.get("closed")
            sources.append({"bundle": found.resolve().name, "records": len(bundle.records),
                            "chainHead": closed.get("chainHead")
                            if isinstance(closed, dict) else None})
    if args.format == "har":
        data = orjson.dumps(to_har(records, sources), option=orjson.OPT_INDENT_2) + b"\n"
    else:
        data = b"".join(iter_jsonl(records))
    _write(args.out, data)
    summary = {"out": args.out, "format": args.format, "bytes": len(data),
               "records": len(records),
               "exchanges": sum(1 for r in records if r.get("kind") == "exchange"),
               "sources": sources}
    if args.summary_format == "json":
        sys.stdout.write(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode() + "\n")
    elif args.summary_format == "text":
        sys.stdout.write(f"exported {summary['records']} records ({summary['exchanges']} "
                         f"exchanges) from {len(sources)} bundle(s) to {args.out} as "
                         f"{args.format}: {len(data)} bytes\n")
    return EXIT_OK
