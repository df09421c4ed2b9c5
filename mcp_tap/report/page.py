"""The page: its style sheet, the summary card, and :func:`render_report`, which puts the
sections together into one self-contained HTML document.

No external asset of any kind: inline CSS, plots as inline SVG, no script, and a
Content-Security-Policy that forbids loading anything. Links are fragments within the page.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Final

from mcp_tap.report.decision import decision_section
from mcp_tap.report.exchanges import index_section, view_section
from mcp_tap.report.findings import findings_section
from mcp_tap.report.health import health_section
from mcp_tap.report.hops import hops_section
from mcp_tap.report.latency import latency_section, sse_section
from mcp_tap.report.markup import PARTIES, badge, e, party_of
from mcp_tap.report.model import ReportData

CSS: Final = """
:root { --ink:#1d2330; --muted:#5b6475; --line:#d9dee7; --bg:#f5f7fa; --card:#fff;
  --ok:#1a7f37; --bad:#c62828; --warn:#b26a00; --accent:#2f5bd3; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  color:var(--ink); background:var(--bg); }
header.masthead { background:#1d2330; color:#fff; padding:18px 32px; }
header.masthead h1 { margin:0; font-size:20px; font-weight:600; }
header.masthead p { margin:4px 0 0; color:#c4cbd8; font-size:12px; }
nav { margin-top:8px; font-size:12px; }
nav a { color:#c4cbd8; margin-right:14px; }
main { padding:20px 32px 40px; max-width:1400px; }
section { background:var(--card); border:1px solid var(--line); border-radius:8px;
  padding:16px 20px; margin:0 0 18px; }
h2 { font-size:16px; margin:0 0 10px; }
h3 { font-size:14px; margin:14px 0 6px; color:var(--muted); }
h4 { font-size:13px; margin:6px 0 4px; }
a { color:var(--accent); }
table { border-collapse:collapse; width:100%; font-size:13px; }
th, td { text-align:left; padding:5px 8px; border-bottom:1px solid var(--line);
  vertical-align:top; }
th { color:var(--muted); font-weight:600; background:#fafbfc; }
td.num, th.num { text-align:right; font-variant-numeric:tabular-nums; }
tr:target, article:target { background:#fff8d6; }
code, .mono { font-family:ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
  font-size:12px; }
.small { font-size:12px; }
.badge { display:inline-block; padding:2px 8px; border-radius:10px; font-size:12px;
  font-weight:600; color:#fff; }
.ok { background:var(--ok); } .bad { background:var(--bad); } .warn { background:var(--warn); }
.neutral { background:#7a8394; }
a.chip { text-decoration:none; }
.verdict { display:flex; gap:16px; align-items:center; }
.action { font-size:22px; padding:6px 16px; border-radius:6px; text-transform:uppercase;
  letter-spacing:.05em; }
.outcome { margin:0; }
dl.facts { display:grid; grid-template-columns:max-content 1fr; gap:4px 14px; margin:12px 0 0; }
dl.facts dt { color:var(--muted); font-weight:600; }
dl.facts dd { margin:0; word-break:break-all; }
table.changes td.src { color:var(--muted); }
.unverified { border:3px solid var(--bad); border-radius:6px; padding:8px 16px; }
.cards { display:flex; gap:12px; flex-wrap:wrap; }
.card { border:1px solid var(--line); border-radius:6px; padding:6px 12px; min-width:120px; }
.card .v { font-size:19px; font-weight:600; }
.card .l { color:var(--muted); font-size:12px; }
.label { color:var(--muted); font-weight:600; margin:10px 0 4px; }
ul.bundles { list-style:none; padding:0; margin:0; }
ul.bundles li.bundle { margin:0 0 4px; }
ul.problems { margin:2px 0 0; padding-left:20px; font-size:12px; color:var(--bad); }
.muted { color:var(--muted); }
.note { color:var(--muted); font-style:italic; margin:8px 0 0; }
.rule { font-weight:600; }
.cite { font-size:12px; color:var(--muted); }
.changed { color:var(--bad); font-weight:600; }
.same { color:var(--ok); }
.bar { height:10px; background:var(--accent); border-radius:2px; min-width:2px; }
article.xchg { border:1px solid var(--line); border-radius:6px; padding:8px 12px;
  margin:0 0 10px; }
article.xchg header { font-weight:600; }
.xbody { display:grid; grid-template-columns:minmax(0, 1fr) minmax(0, 1fr); gap:14px; }
.headers { font-size:11px; color:var(--muted); margin:4px 0; word-break:break-all; }
.headers .hn { color:var(--ink); }
pre.body { background:#f6f8fb; border:1px solid var(--line); border-radius:4px; padding:6px 8px;
  margin:4px 0; max-height:220px; overflow:auto; font-size:11px; white-space:pre-wrap;
  word-break:break-all; }
ol.events { margin:0; padding-left:22px; }
ul.xfindings { margin:4px 0; padding-left:18px; font-size:12px; }
svg { display:block; max-width:100%; height:auto; }
svg text { font:11px system-ui, sans-serif; fill:#1d2330; }
svg .plot-title { font-size:12px; }
svg .axis-label { fill:#5b6475; }
svg .axis { stroke:#8a93a5; stroke-width:1; }
svg .grid { stroke:#e6e9ef; stroke-width:1; }
svg .binbar { fill:#7d9be6; }
svg .curve { fill:none; stroke:var(--accent); stroke-width:2; }
svg .pct line { stroke-width:1.5; stroke-dasharray:4 3; }
svg .legend line { stroke-width:3; }
svg .legend-box { fill:#fff; stroke:#d9dee7; }
svg .p50 line, svg .p50 circle { stroke:#1a7f37; fill:#1a7f37; }
svg .p95 line, svg .p95 circle { stroke:#b26a00; fill:#b26a00; }
svg .p99 line, svg .p99 circle { stroke:#c62828; fill:#c62828; }
.plots { display:grid; grid-template-columns:1fr 1fr; gap:16px; }
.scroll { max-height:420px; overflow:auto; border-bottom:1px solid var(--line); }
.scroll th { position:sticky; top:0; }
@media (max-width: 1000px) { .plots, .xbody { grid-template-columns:1fr; } }
td .mono { word-break:break-all; }
"""

_NAV: Final = (("decision", "Decision"), ("health", "Health"), ("rules", "Findings"),
               ("hops", "Hops"), ("latency", "Latency"), ("sse", "SSE"),
               ("exchanges", "Exchanges"), ("exchange-view", "Exchange view"))


def integrity_section(data: ReportData) -> str:
    """The page's first card when a bundle does not verify: which, and its first problems
    ("" when every bundle verifies). It stands before the decision, so no reader takes
    what follows for an answer about the service without seeing it."""
    failed = [b for b in data.bundles if not b.intact]
    if not failed:
        return ""
    items = "".join(
        f'<li><span class="mono">{e(b.path)}</span>: {b.errors} error(s)'
        + (f": {e(b.problems[0])}" if b.problems else "") + "</li>"
        for b in failed)
    return ('<section id="integrity" class="unverified"><h2>'
            f'<span class="badge bad">UNVERIFIED EVIDENCE</span> {len(failed)} of '
            f"{len(data.bundles)} bundle(s) do not verify</h2><p>Everything below is read "
            "from them anyway (malformed records skipped): it may not be what was recorded. "
            f"Run <span class=\"mono\">mcp-tap verify</span> on each.</p><ul>{items}</ul>"
            "</section>")


def summary_section(data: ReportData) -> str:
    """Counts, eras and each bundle's verification status."""
    verified = sum(1 for b in data.bundles if b.ok)
    cards = [
        (str(len(data.bundles)), f"bundles ({verified} verified)"),
        (str(data.exchanges), "exchanges"),
        (str(data.exchanges - data.clean_exchanges), "exchanges with findings"),
        (str(sum(r.count for r in data.rules)), "findings"),
    ]
    # Who caused them: a request rule is the client's to keep, a response rule the
    # server's, a hop rule the box's between two hops.
    by_party: dict[str, int] = {}
    for rule in data.rules:
        party = party_of(rule.boundary)
        by_party[party] = by_party.get(party, 0) + rule.count
    cards += [(str(by_party[party]), f"findings by {party}")
              for party in dict.fromkeys(PARTIES.values()) if by_party.get(party)]
    cards.append((str(data.stream_count), "SSE answers"))
    if data.hop_comparisons:
        cards.append((str(data.hop_comparisons), "hop comparisons"))
    if data.gaps:
        cards.append((str(data.gaps), "records lost (gaps)"))
    eras = ", ".join(f"{e(era)} {n}" for era, n in data.eras.items()) or "none"
    card_html = "".join(
        f'<div class="card"><div class="v">{e(v)}</div><div class="l">{e(label)}</div></div>'
        for v, label in cards
    )
    items = []
    for bundle in data.bundles:
        problems = "".join(f"<li>{e(p)}</li>" for p in bundle.problems[:5])
        if len(bundle.problems) > 5:
            problems += f"<li>\u2026 {len(bundle.problems) - 5} more</li>"
        counts = (f"{bundle.records} records, {bundle.exchanges} exchanges, "
                  f"{bundle.errors} errors, {bundle.warnings} warnings")
        items.append(
            f'<li class="bundle">{badge(bundle.ok, "verified", "FAILED")} '
            f'<span class="mono" title="{e(bundle.path)}">{e(Path(bundle.path).name)}</span> '
            f'<span class="muted">{e(counts)}</span>'
            + (f'<ul class="problems">{problems}</ul>' if problems else "") + "</li>"
        )
    return (f'<section id="summary"><h2>Summary</h2><div class="cards">{card_html}</div>'
            f'<p><span class="label">Eras</span> {eras}</p>'
            f'<p class="label">Bundles (verify status)</p><ul class="bundles">{"".join(items)}</ul>'
            "</section>")


def render_report(data: ReportData, *, max_rows: int | None = None) -> str:
    """Render the report as one self-contained HTML page (pure; every text escaped).

    ``max_rows`` shortens the exchange index further than the bound it was collected with.
    """
    if max_rows is not None:
        data = replace(data, rows=data.rows[:max_rows])
    generated = f" \u00b7 generated {e(data.generated)}" if data.generated else ""
    nav = "".join(f'<a href="#{anchor}">{label}</a>' for anchor, label in _NAV)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:\">"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        "<title>mcp-tap report</title>"
        f"<style>{CSS}</style></head><body>"
        f'<header class="masthead"><h1>mcp-tap conformance report</h1><p>{len(data.bundles)} '
        f"bundle(s) \u00b7 {data.exchanges} exchanges \u00b7 mcp-tap {e(data.version)}"
        f"{generated}</p><nav>{nav}</nav></header>"
        "<main>"
        + integrity_section(data)
        + decision_section(data)
        + summary_section(data)
        + health_section(data)
        + findings_section(data)
        + hops_section(data)
        + latency_section(data)
        + sse_section(data)
        + index_section(data)
        + view_section(data)
        + "</main></body></html>\n"
    )
