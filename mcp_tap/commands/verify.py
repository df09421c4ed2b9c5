"""``mcp-tap verify DIR [--trust KEYFILE ...] [--json]``: check an evidence bundle's integrity.

Exit 0 when the bundle verifies (warnings such as an unclosed last segment allowed), 1 when
any problem of severity error was found (stated loss and an abrupt end included, with how
much was lost), 2 when the directory is not a readable bundle, its format is unknown or a
key file is unreadable (raised as InputError/BundleFormatError; the CLI prints one line).
With ``--trust`` the bundle must be signed by one of the given Ed25519 public keys (64 hex
digits or a PEM public key per file) and closed: unsigned, re-signed and forged bundles fail.
Several bundles (an evidence directory) are verified in parallel processes.
"""

from __future__ import annotations

import argparse
import sys

import orjson

from mcp_tap.cli import EXIT_NO, EXIT_OK
from mcp_tap.evidence.reader import find_bundles
from mcp_tap.evidence.signing import load_trusted_key
from mcp_tap.evidence.verify import VerifyReport, verify_bundles
from mcp_tap.files import file_argument

NAME = "verify"
HELP = ("check an evidence bundle: record digests, hash chain, sequence, manifests, "
        "signatures, gaps")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``verify`` arguments: the bundle directory, ``--trust`` and ``--json``."""
    parser.add_argument("evidence", metavar="DIR", help="the evidence bundle directory")
    parser.add_argument("--trust", action="append", type=file_argument, default=[],
                        metavar="KEYFILE",
                        help="require a signature by this Ed25519 public key (repeatable)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def summary(report: VerifyReport) -> list[str]:
    """Return the human report: one line per problem, then an ok or FAILED line."""
    lines = [f"{problem.severity}: {problem.message}" for problem in report.problems]
    signed = f", signed by {report.signer}" if report.signer else ""
    if report.ok:
        lines.append(f"ok: {_plural(report.records, 'record')} in "
                     f"{_plural(report.segments, 'segment')}{signed}")
        return lines
    failed = f"FAILED: {_plural(len(report.errors), 'problem')}"
    if report.lost:
        failed += (f"; {_plural(report.lost, 'record')} stated lost "
                   f"({report.loss_ratio:.2%} of {report.exchanges + report.lost})")
    lines.append(failed)
    return lines


def run(args: argparse.Namespace) -> int:
    """Verify the bundle named by ``args.evidence``; print the report; return the exit code."""
    keys = [load_trusted_key(path) for path in args.trust]
    reports = verify_bundles(find_bundles(args.evidence), trusted_keys=keys)
    if args.json:
        # One bundle: its report; a directory of bundles: a list of reports.
        data = reports[0].to_json() if len(reports) == 1 else [r.to_json() for r in reports]
        sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode())
        sys.stdout.write("\n")
    else:
        for report in reports:
            if len(reports) > 1:
                sys.stdout.write(f"{report.path}:\n")
            sys.stdout.write("".join(line + "\n" for line in summary(report)))
    return EXIT_OK if all(r.ok for r in reports) else EXIT_NO
