"""``mcp-tap verify DIR [--trust KEYFILE ...] [--json]``: check an evidence bundle's integrity.

Exit 0 when the bundle verifies (warnings such as an unclosed last segment allowed), 1 when
any problem of severity error was found (stated loss and an abrupt end included, with how
much was lost), 2 when the directory is not a readable bundle, its format is unknown or a
key file is unreadable (raised as InputError/BundleFormatError; the CLI prints one line).
With ``--trust`` the bundle must be signed by one of the given Ed25519 public keys (64 hex
digits or a PEM public key per file) and closed: unsigned, re-signed and forged bundles fail.
Several bundles (an evidence directory) are verified in parallel processes.

Sharded (:mod:`mcp_tap.evidence.shards`), for when one machine is not enough: ``verify DIR
--shard I/N [--out FILE]`` checks the I-th of N deterministic shares of the segments and
prints its mergeable result (JSON; exit 0 when its share verified, 1 when it found an
error), and ``verify --merge FILE...`` combines every shard's result into the reports (and
the verdict, and the exit code) an unsharded ``verify DIR`` gives.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

from mcp_tap.cli import EXIT_NO, EXIT_OK
from mcp_tap.errors import InputError
from mcp_tap.evidence.reader import find_bundles
from mcp_tap.evidence.shards import merge_shards, parse_shard, read_results, verify_shard
from mcp_tap.evidence.signing import load_trusted_key
from mcp_tap.evidence.verify import VerifyReport, verify_bundles
from mcp_tap.files import file_argument
from mcp_tap.outputs import Check, Location, Outcome, add_format_option, emit
from mcp_tap.outputs.printable import printable_lines

NAME = "verify"
HELP = "check an evidence bundle: digests, chain, sequence, manifests, signatures, gaps"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``verify`` arguments: the bundle directory, ``--trust`` and ``--json``."""
    parser.add_argument("evidence", metavar="DIR", nargs="?",
                        help="the evidence bundle directory (or a directory of bundles)")
    parser.add_argument("--trust", action="append", type=file_argument, default=[],
                        metavar="KEYFILE",
                        help="require a signature by this Ed25519 public key (repeatable)")
    parser.add_argument("--shard", metavar="I/N",
                        help="check only the I-th of N shares of the segments (0 <= I < N) and "
                        "print a result for --merge")
    parser.add_argument("--out", metavar="FILE", help="with --shard: write the result here")
    parser.add_argument("--merge", nargs="+", type=file_argument, metavar="FILE",
                        help="combine the results of every --shard run into one verdict")
    add_format_option(parser)


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


def _check(report: VerifyReport) -> list[Check]:
    name = str(report.path)
    out = [Check(name=f"{name}: verified", group="mcp-tap.verify", passed=report.ok,
                 message=summary(report)[-1], locations=(Location(path=name),))]
    for problem in report.problems:
        where = Location(path=f"{name.rstrip('/')}/{problem.segment}" if problem.segment else name,
                         seq=problem.seq)
        out.append(Check(
            name=f"{name}: {problem.kind}" + (f" seq {problem.seq}" if problem.seq else ""),
            group="mcp-tap.verify", passed=problem.severity != "error",
            message=f"{problem.severity}: {problem.message}", rule=f"evidence.{problem.kind}",
            strength="must" if problem.severity == "error" else "should",
            locations=(where,)))
    return out


def outcome(reports: list[VerifyReport]) -> Outcome:
    """The command's result in every output format: a check per bundle and per problem."""
    # One bundle: its report; a directory of bundles: a list of reports.
    data = reports[0].to_json() if len(reports) == 1 else [r.to_json() for r in reports]
    text = []
    for report in reports:
        if len(reports) > 1:
            text.append(f"{report.path}:\n")
        text.append(printable_lines(summary(report)))
    ok = all(r.ok for r in reports)
    return Outcome(command="verify", headline="verified" if ok else "FAILED", ok=ok, data=data,
                   text="".join(text), checks=tuple(c for r in reports for c in _check(r)))


def _run_shard(args: argparse.Namespace, keys: list[bytes]) -> int:
    """Check one shard, write its result; 0 when its share verified, else 1."""
    index, count = parse_shard(args.shard)
    result = verify_shard(args.evidence, index, count, trusted_keys=keys)
    text = orjson.dumps(result).decode() + "\n"
    if args.out:
        try:
            Path(args.out).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise InputError(f"cannot write {args.out}: {exc.strerror or exc}") from exc
    else:
        sys.stdout.write(text)
    bundles = result["bundles"].values()
    problems = [p for b in bundles for s in b["segments"] for p in s["problems"]]
    problems += [p for b in bundles for p in b.get("bundle", {}).get("problems", [])]
    whole_ok = all(b["whole"]["ok"] for b in bundles if "whole" in b)
    return EXIT_OK if whole_ok and all(p["severity"] != "error" for p in problems) else EXIT_NO


def run(args: argparse.Namespace) -> int:
    """Verify the bundle named by ``args.evidence``; print the report; return the exit code."""
    keys = [load_trusted_key(path) for path in args.trust]
    if args.merge:
        if args.evidence or args.shard or args.trust:
            raise InputError("--merge takes only the shard results (their location and keys "
                             "are in them)")
        reports = merge_shards(read_results(args.merge))
    elif args.evidence is None:
        raise InputError("give the evidence directory (or --merge FILE...)")
    elif args.shard:
        return _run_shard(args, keys)
    else:
        reports = verify_bundles(find_bundles(args.evidence), trusted_keys=keys)
    emit(outcome(reports), args)
    return EXIT_OK if all(r.ok for r in reports) else EXIT_NO
