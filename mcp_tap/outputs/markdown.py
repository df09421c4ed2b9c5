"""Markdown for ``$GITHUB_STEP_SUMMARY``: the headline, what failed and where, the cases.

Every piece of text is written literally (:func:`_cell`): no HTML, link, image or emphasis
a server's tool name or message could smuggle into the summary page.
"""

from __future__ import annotations

import re
from typing import Final

from mcp_tap.outputs.model import Check, Outcome
from mcp_tap.outputs.printable import printable

# A step summary is capped at 1 MiB; a long run lists this many checks and counts the rest.
MAX_ROWS = 200
# Characters with a meaning inside a Markdown line (emphasis, code, links, images, table
# cells, escapes; block syntax never starts inside a cell or after "- name: "): each is
# written as a backslash escape, so text is only text.
_INLINE: Final = re.compile(r"([\\`*_~\[\]!|])")
_HTML: Final = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def _cell(text: str) -> str:
    """``text`` as literal Markdown inline text: control characters escaped (a newline
    would end the table row), HTML as entities (a step summary renders HTML), every
    Markdown punctuation mark backslash-escaped."""
    text = printable(text).strip()
    text = "".join(_HTML.get(ch, ch) for ch in text) if any(
        ch in text for ch in "&<>") else text
    return _INLINE.sub(r"\\\1", text)


def _code(text: str) -> str:
    """``text`` as a code span (a rule id, a digest): HTML is not read inside one, so only
    a backtick, a pipe (a table cell's end) or a control character needs :func:`_cell`."""
    if text and text.isprintable() and "`" not in text and "|" not in text:
        return f"`{text}`"
    return _cell(text)


def _mark(check: Check) -> str:
    if check.skipped:
        return "skipped"
    return "pass" if check.passed else ("**FAIL**" if check.strength == "must" else "warn")


def _where(check: Check) -> str:
    out = []
    for loc in check.locations[:3]:
        text = _code(loc.path) + (f":{loc.line}" if loc.line is not None else "")
        if loc.exchange:
            text += f" ({_cell(loc.exchange)})"
        out.append(text)
    return ", ".join(out)


def render_markdown(outcome: Outcome) -> str:
    """Render ``outcome`` as a Markdown summary."""
    checks = outcome.checks
    failed = [c for c in checks if not c.passed and not c.skipped]
    icon = "white_check_mark" if outcome.ok else "x"
    lines = [f"### :{icon}: mcp-tap {outcome.command}: {_cell(outcome.headline)}", ""]
    passed = sum(1 for c in checks if c.passed and not c.skipped)
    skipped = sum(1 for c in checks if c.skipped)
    lines.append(f"{passed} passed, {len(failed)} failed, {skipped} skipped.")
    for name, value in outcome.facts.items():
        lines.append(f"- {_cell(name)}: {_code(value)}")
    lines.append("")
    if checks:
        lines += ["| result | check | rule | message | evidence |", "|---|---|---|---|---|"]
        # Failures first, so a capped table still shows every problem it can.
        ordered = failed + [c for c in checks if c not in failed]
        for check in ordered[:MAX_ROWS]:
            lines.append(f"| {_mark(check)} | {_cell(check.name)} | "
                         f"{_code(check.rule) if check.rule else ''} | "
                         f"{_cell(check.message)} | {_where(check)} |")
        if len(ordered) > MAX_ROWS:
            lines.append(f"\n{len(ordered) - MAX_ROWS} more check(s) not shown.")
    return "\n".join(lines) + "\n"
