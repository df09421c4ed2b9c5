"""Markdown for ``$GITHUB_STEP_SUMMARY``: the headline, what failed and where, the cases."""

from __future__ import annotations

from mcp_tap.outputs import Check, Outcome

# A step summary is capped at 1 MiB; a long run lists this many checks and counts the rest.
MAX_ROWS = 200


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ").strip()


def _mark(check: Check) -> str:
    if check.skipped:
        return "skipped"
    return "pass" if check.passed else ("**FAIL**" if check.strength == "must" else "warn")


def _where(check: Check) -> str:
    out = []
    for loc in check.locations[:3]:
        text = f"`{loc.path}`" + (f":{loc.line}" if loc.line is not None else "")
        if loc.exchange:
            text += f" ({loc.exchange})"
        out.append(text)
    return ", ".join(out)


def render_markdown(outcome: Outcome) -> str:
    """Render ``outcome`` as a Markdown summary."""
    checks = outcome.checks
    failed = [c for c in checks if not c.passed and not c.skipped]
    icon = "white_check_mark" if outcome.ok else "x"
    lines = [f"### :{icon}: mcp-tap {outcome.command}: {outcome.headline}", ""]
    passed = sum(1 for c in checks if c.passed and not c.skipped)
    skipped = sum(1 for c in checks if c.skipped)
    lines.append(f"{passed} passed, {len(failed)} failed, {skipped} skipped.")
    for name, value in outcome.facts.items():
        lines.append(f"- {name}: `{_cell(value)}`")
    lines.append("")
    if checks:
        lines += ["| result | check | rule | message | evidence |", "|---|---|---|---|---|"]
        # Failures first, so a capped table still shows every problem it can.
        ordered = failed + [c for c in checks if c not in failed]
        for check in ordered[:MAX_ROWS]:
            lines.append(f"| {_mark(check)} | {_cell(check.name)} | "
                         f"{'`' + check.rule + '`' if check.rule else ''} | "
                         f"{_cell(check.message)} | {_where(check)} |")
        if len(ordered) > MAX_ROWS:
            lines.append(f"\n{len(ordered) - MAX_ROWS} more check(s) not shown.")
    return "\n".join(lines) + "\n"
