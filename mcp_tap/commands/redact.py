"""``mcp-tap redact EVIDENCE --policy FILE --out DIR``: re-redact a bundle more strictly.

``FILE`` is TOML with a ``[redaction]`` table, as in the proxy's config (``extra_keys``,
``[[redaction.argument]]``); the default denylist always applies too. The source bundle
must verify; the new bundle in ``DIR`` verifies on its own and its ``bundle.json`` says
``derivedFrom`` (the source bundle, its chain head, the policy). Exit 0, or 2 for bad input.
``--format text|json`` (``--json``) is the summary's: the command writes a bundle and
reports no test result, so the CI formats (JUnit, SARIF, Markdown) have nothing to carry;
``mcp-tap verify --format ...`` on the new bundle is the check a pipeline runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

from mcp_tap.cli import EXIT_OK
from mcp_tap.errors import InputError
from mcp_tap.evidence import find_bundles
from mcp_tap.export import derive, load_policy_file
from mcp_tap.outputs import add_summary_option
from mcp_tap.outputs.printable import printable_lines

NAME = "redact"
HELP = "apply a stricter redaction policy to a bundle, writing a new derived bundle"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``redact`` arguments to ``parser``."""
    parser.add_argument("evidence", metavar="EVIDENCE", help="the evidence bundle directory")
    parser.add_argument("--policy", required=True, metavar="FILE",
                        help="TOML file with a [redaction] table (extra_keys, arguments)")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="directory for the derived bundle (must not hold one)")
    add_summary_option(parser, what="the summary of the derived bundle")


def run(args: argparse.Namespace) -> int:
    """Derive the re-redacted bundle; print one summary line; return the exit code."""
    policy = load_policy_file(args.policy)
    found = find_bundles(args.evidence)
    if len(found) != 1:
        raise InputError(f"{args.evidence}: holds {len(found)} bundles; name one of them")
    if not args.out.strip():
        raise InputError("--out is empty: give the directory for the derived bundle")
    done = derive(found[0], policy, Path(args.out))
    if args.format == "json":
        summary = {"out": str(done.path), "records": done.records, "changed": done.changed,
                   "digestsDropped": done.digests_dropped, "derivedFrom": done.derived_from}
        sys.stdout.write(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode() + "\n")
        return EXIT_OK
    sys.stdout.write(printable_lines([
        f"derived {done.path} from {done.derived_from['bundle']} (chain head "
        f"{str(done.derived_from['chainHead'])[:16]}): {done.records} records, "
        f"{done.changed} changed, {done.digests_dropped} body digest(s) dropped"]))
    return EXIT_OK
