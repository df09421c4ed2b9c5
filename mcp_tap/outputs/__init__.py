"""Command outputs for people and CI: text, JSON, JUnit XML, SARIF 2.1.0, Markdown.

A command builds one :class:`Outcome` (its JSON object, its text, and its result as
:class:`Check` cases) and :func:`emit` prints it in the format ``--format`` names
(``--json`` is an alias of ``--format json``). JUnit, SARIF and Markdown are rendered from
the checks alone, so every command gets every format the same way:

* a :class:`Check` is one JUnit test case: one rule, one case, one source;
* a failed check carrying a catalog ``rule`` becomes a SARIF result of that rule, with its
  :class:`Location` in the evidence (bundle, segment file, line, record ``seq``);
* Markdown is a summary for ``$GITHUB_STEP_SUMMARY``: headline, failures, a table.

What servers sent reaches every format escaped (:mod:`mcp_tap.outputs.printable`): no
control character reaches a terminal, the XML is well-formed, the Markdown holds no HTML.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Final

from mcp_tap.outputs.model import Check, Location, Outcome

FORMATS: Final = ("text", "json", "junit", "sarif", "markdown")
SUMMARY_FORMATS: Final = ("text", "json")
"""The formats of a command whose output is a summary of what it wrote, not checks: JUnit,
SARIF and Markdown report test results, and writing a file or a bundle is none."""


def strength_of(finding: object) -> str:
    """A finding's strength (a Finding or its JSON): its ``strength`` when it has one, else
    its catalog rule's, else ``must`` (findings and rules gain strengths on another branch).
    """
    value = (finding.get("strength") if isinstance(finding, Mapping)
             else getattr(finding, "strength", None))
    if value in ("must", "should"):
        return str(value)
    rule = finding.get("rule") if isinstance(finding, Mapping) else getattr(finding, "rule", None)
    return rule_strength(rule) if isinstance(rule, str) else "must"


def rule_strength(rule_id: str) -> str:
    """A catalog rule's strength, ``must`` when the rule has none or is not in the catalog."""
    from mcp_tap.core.catalog import CATALOG

    rule = CATALOG.get(rule_id)
    value = getattr(rule, "strength", "must") if rule is not None else "must"
    return str(value) if value in ("must", "should") else "must"


def add_format_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--format`` and its alias ``--json`` to a command's parser."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--format", choices=FORMATS, default="text",
                       help="output format (default text): json, junit (JUnit XML), sarif "
                       "(SARIF 2.1.0), markdown (for $GITHUB_STEP_SUMMARY)")
    group.add_argument("--json", dest="format", action="store_const", const="json",
                       help="the same as --format json")


def add_summary_option(parser: argparse.ArgumentParser, flag: str = "--format", *,
                       default: str | None = "text", what: str = "the summary") -> str:
    """Add ``flag`` (``text`` or ``json``) and its alias ``--json``; return the dest name.

    For commands that write an artifact and print a summary of it (``redact``,
    ``export``); ``default`` ``None`` prints nothing unless asked.
    """
    dest = flag.lstrip("-").replace("-", "_")
    group = parser.add_mutually_exclusive_group()
    shown = f"default {default}" if default else "default: none"
    group.add_argument(flag, dest=dest, choices=SUMMARY_FORMATS, default=default,
                       help=f"print {what} as text or json ({shown})")
    group.add_argument("--json", dest=dest, action="store_const", const="json",
                       help=f"the same as {flag} json")
    return dest


def render(outcome: Outcome, fmt: str) -> str:
    """Return ``outcome`` rendered as ``fmt`` (one of :data:`FORMATS`)."""
    from mcp_tap.outputs.printable import json_safe, printable_text

    if fmt == "text":
        return printable_text(outcome.text)
    if fmt == "json":
        import orjson

        option = 0 if outcome.compact else orjson.OPT_INDENT_2
        return json_safe(orjson.dumps(outcome.data, option=option).decode()) + "\n"
    if fmt == "junit":
        from mcp_tap.outputs.junit import render_junit

        return render_junit(outcome)
    if fmt == "sarif":
        from mcp_tap.outputs.sarif import render_sarif

        return render_sarif(outcome)
    if fmt == "markdown":
        from mcp_tap.outputs.markdown import render_markdown

        return render_markdown(outcome)
    raise ValueError(f"unknown output format {fmt!r}")


def emit(outcome: Outcome, args: argparse.Namespace) -> None:
    """Print ``outcome`` on stdout in the format the parsed ``args`` asked for."""
    sys.stdout.write(render(outcome, getattr(args, "format", "text") or "text"))


__all__ = [
    "FORMATS",
    "SUMMARY_FORMATS",
    "Check",
    "Location",
    "Outcome",
    "add_format_option",
    "add_summary_option",
    "emit",
    "render",
    "rule_strength",
    "strength_of",
]
