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

import orjson

from mcp_tap.cli import EXIT_NO, EXIT_OK
from mcp_tap.commands.probe import timeout_seconds
from mcp_tap.errors import InputError
from mcp_tap.evidence import find_bundles, read_bundle
from mcp_tap.header_options import add_header_options, headers_from_args
from mcp_tap.probe import check_timeout
from mcp_tap.replay import (
    ReplayOptions,
    iter_lines,
    parse_ignore,
    replay,
)
from mcp_tap.urls import check_http_url


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
                        help="per-request timeout (default 30, at most 3600)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


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


def run(args: argparse.Namespace) -> int:
    """Replay the evidence against the target; print the report; return the exit code."""
    opts = options(args)
    records = [
        record
        for path in args.evidence
        for bundle in find_bundles(path)
        for record in read_bundle(bundle).records
    ]
    report = replay(records, opts)
    if not report.results and not report.skipped:
        raise InputError("the evidence holds no exchange to replay")
    if args.json:
        sys.stdout.write(orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2).decode())
        sys.stdout.write("\n")
    else:
        sys.stdout.write("".join(line + "\n" for line in iter_lines(report)))
    return EXIT_OK if report.ok else EXIT_NO
