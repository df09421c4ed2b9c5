"""Findings grouped by rule: one row per rule with its strength, the spec text it cites,
how often it fired, and its first and last example linked to the exchange view."""

from __future__ import annotations

from mcp_tap.core.citations import citations
from mcp_tap.report.markup import e, exchange_link, party_of, strength_badge
from mcp_tap.report.model import ReportData, RuleGroup
from mcp_tap.report.records import rule_anchor


def _cite(group: RuleGroup) -> str:
    """The rule's sources, each with its public address (the specification, an RFC) as
    text to copy (the page links only within itself); the tool's own rules name their page
    of ``docs/`` in this repository."""
    if not group.cite:
        return '<span class="muted">not in this build\'s catalog</span>'
    parts = []
    for found in citations(group.cite):
        address = (f'<br><span class="mono small url">{e(found.url)}</span>'
                   if found.url is not None and not found.local else "")
        parts.append(f'<span class="cite">{e(found.text)}</span>{address}')
    return "<br>".join(parts)


def _examples(group: RuleGroup, shown: frozenset[str]) -> tuple[str, str]:
    if group.first is None:
        # Hop-comparison findings belong to a pair of exchanges, listed in the hops section.
        return '<a href="#hops">in the hops section</a>', ""
    last = (exchange_link(group.last, shown)
            if group.last is not None and group.last.anchor != group.first.anchor
            else '<span class="muted">(the same)</span>')
    return exchange_link(group.first, shown), last


def findings_section(data: ReportData) -> str:
    """The findings, one row per rule (violations first, then by count)."""
    if not data.rules:
        body = '<p class="muted">No rule fired: every exchange passed every check.</p>'
        return f'<section id="rules"><h2>Findings by rule</h2>{body}</section>'
    shown = data.detail_anchors()
    rows = []
    for group in data.rules:
        first, last = _examples(group, shown)
        code = "" if group.code is None else f" <code>{e(group.code)}</code>"
        where = ", ".join(f"{e(h or 'between hops')} {n}" for h, n in group.by_hop.items())
        rows.append(
            f'<tr id="{e(rule_anchor(group.rule))}"><td><code class="rule">{e(group.rule)}'
            f"</code></td><td>{strength_badge(group.strength)}</td><td>{_cite(group)}</td>"
            f'<td class="num">{group.count}</td><td>{e(party_of(group.boundary))} '
            f'<span class="muted small">({e(group.boundary)})</span>{code}'
            f'<br><span class="muted small">{where}</span></td>'
            f"<td>{first}</td><td>{last}</td><td>{e(group.message)}</td></tr>")
    violations = sum(g.count for g in data.rules if g.strength == "must")
    warnings = sum(g.count for g in data.rules if g.strength != "must")
    head = ("<tr><th>rule</th><th>strength</th><th>spec</th><th class=\"num\">count</th>"
            "<th>caused by (boundary), per hop</th><th>first example</th><th>last example</th>"
            "<th>first message</th></tr>")
    return (f'<section id="rules"><h2>Findings by rule</h2><p class="muted">{violations} '
            f"violation(s) of a MUST, {warnings} warning(s) of a SHOULD, in "
            f"{len(data.rules)} rule(s).</p>"
            f'<table class="rules"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'
            "</section>")
