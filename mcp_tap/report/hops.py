"""The hops section: what each hop's client got against what its origin sent, and (only
when the capture had two hops) what the box between them changed."""

from __future__ import annotations

from mcp_tap.report.markup import e, exchange_link, rules_cell, table
from mcp_tap.report.model import ReportData
from mcp_tap.report.tally import HOP_COLUMNS


def _between(data: ReportData) -> str:
    shown = data.detail_anchors()
    rows = []
    for box in data.hop_boxes:
        cells = [f'<span class="changed">{box.changed[label]} changed</span>'
                 if box.changed.get(label) else '<span class="same">same</span>'
                 for label, _ in HOP_COLUMNS]
        other = (", ".join(f"<code>{e(r)}</code> \u00d7{n}" for r, n in box.other.items())
                 if box.other else '<span class="muted">-</span>')
        rows.append((f'<span class="mono box">{e(box.box)}</span>', e(box.between),
                     e(box.pairs), *cells, other))
    summary = table(("box", "between", "pairs", *(label for label, _ in HOP_COLUMNS),
                     "other"), rows, numeric=(2,), css="hops")
    if not data.hop_changes:
        return summary + '<p class="muted">No pair differed between the hops.</p>'
    detail = [
        (e(c.between), rules_cell(c.rules), "<br>".join(e(m) for m in c.messages),
         "<br>".join(exchange_link(r, shown) for r in c.exchanges))
        for c in data.hop_changes
    ]
    changed = sum(sum(b.changed.values()) + sum(b.other.values()) for b in data.hop_boxes)
    more = ""
    if changed > len(data.hop_changes):
        more = (f'<p class="note">The first {len(data.hop_changes)} changed pairs are '
                "listed.</p>")
    return (summary + "<h3>Pairs the box changed</h3>"
            + table(("between", "rules", "what changed", "exchanges (outer, inner)"),
                    detail, css="hop-changes") + more)


def _meaning(meaning: str) -> str:
    if meaning in ("expected", "recorded"):
        return f'<span class="muted">{e(meaning)}</span>' if meaning == "expected" else e(meaning)
    return f'<span class="changed"><code>{e(meaning)}</code></span>'


def _box_changes(data: ReportData) -> str:
    """Per box, every kind of change it made, most important first."""
    out = []
    for box, summary in data.box_changes.items():
        rows = [(_meaning(c["meaning"]), f"<code>{e(c['class'])}</code>", e(c["direction"]),
                 e(c["kind"]), f'<code class="mono">{e(c["path"])}</code>', e(c["count"]))
                for c in summary.get("changes", ())]
        more = summary.get("moreRows", 0)
        out.append(f'<h4><span class="mono box">{e(box)}</span> ({e(summary.get("kind"))}, '
                   f'{e(summary.get("pairs"))} pairs)</h4>'
                   + table(("meaning", "class", "direction", "kind", "path", "count"), rows,
                           numeric=(5,), css="box-changes")
                   + (f'<p class="note">{e(more)} more kinds of change.</p>' if more else ""))
    if not out:
        return ""
    return "<h3>What each box changed (most important first)</h3>" + "".join(out)


def hops_section(data: ReportData) -> str:
    """Per hop, and between hops when there is more than one."""
    rows = [
        (f"<code>{e(h.hop)}</code>", e(h.exchanges),
         f'<span class="{"changed" if h.status_changed else "same"}">{h.status_changed}</span>',
         f'<span class="{"changed" if h.body_changed else "same"}">{h.body_changed}</span>',
         e(h.client_gone), e(h.tap_errors), e(h.hop_findings))
        for h in data.hop_summaries
    ]
    per_hop = table(("hop", "exchanges", "egress status \u2260 origin",
                     "egress body \u2260 origin", "client gone", "tap errors",
                     "hop.* findings"), rows, numeric=(1, 2, 3, 4, 5, 6))
    between = ""
    if data.hop_comparisons:
        between = ('<h3 id="between-hops">Between hops: what the box in between changed</h3>'
                   + _between(data) + _box_changes(data))
    elif len(data.hop_summaries) > 1:
        between = ('<p class="note" id="between-hops">Several hops recorded, but no '
                   "hop-comparison record: the hops were not chained.</p>")
    title = "Hop" if len(data.hop_summaries) == 1 else "Hops"
    return (f'<section id="hops"><h2>{title}</h2><h3>Per hop: what the client got vs what '
            f"the origin sent</h3>{per_hop}{between}</section>")
