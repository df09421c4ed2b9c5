"""The latency and SSE first-event sections: plots, percentile tables, the stream list."""

from __future__ import annotations

from collections.abc import Mapping

from mcp_tap.report.bounds import Samples
from mcp_tap.report.markup import e, exchange_link, ms, table
from mcp_tap.report.model import ReportData
from mcp_tap.report.plots import PERCENTILES, histogram_svg, percentile, percentile_svg


def percentile_table(series: Mapping[str, Samples]) -> str:
    """Percentiles per series; a row computed from a sample says so."""
    rows = []
    for name, s in series.items():
        if not s.values:
            continue
        count = f"{s.count} (sample of {len(s.values)})" if s.sampled else str(s.count)
        rows.append((f"<code>{e(name)}</code>", e(count),
                     *(e(ms(percentile(s.values, p))) for _, p in PERCENTILES),
                     e(ms(s.high))))
    return table(("hop", "exchanges", *(n for n, _ in PERCENTILES), "max"), rows,
                 numeric=(1, 2, 3, 4, 5))


def latency_section(data: ReportData) -> str:
    """Histogram, percentile curve and per-hop percentiles of exchange latency."""
    series = data.latency
    if not series.values:
        return ('<section id="latency"><h2>Latency</h2><p class="muted">No exchange has both a '
                "receive and an end time.</p></section>")
    plots = (f'<div class="plots">{histogram_svg(series.values, series.count)}'
             f"{percentile_svg(series.values, series.count)}</div>")
    by_hop = data.latency_by_hop if len(data.latency_by_hop) > 1 else {}
    percentiles = percentile_table({"all hops": series, **by_hop})
    return (f'<section id="latency"><h2>Latency</h2><p class="muted">From the request arriving '
            "at the tap to the last byte sent to the client.</p>"
            f"{plots}<h3>Percentiles</h3>{percentiles}</section>")


def sse_section(data: ReportData) -> str:
    """SSE first-event latency: percentiles per hop and the first streams, with bars."""
    if not data.stream_count:
        return ('<section id="sse"><h2>SSE first-event latency</h2><p class="muted">No answer '
                "was an event stream.</p></section>")
    by_hop = data.first_event_by_hop if len(data.first_event_by_hop) > 1 else {}
    percentiles = percentile_table({"all hops": data.first_event, **by_hop})
    shown = data.detail_anchors()
    longest = max([s.first_event_ms for s in data.streams]
                  + [s.total_ms or 0.0 for s in data.streams]) or 1.0
    rows = [
        (exchange_link(s.ref, shown), f"<code>{e(s.method)}</code>", e(s.name), e(s.events),
         e(ms(s.first_event_ms)), e(ms(s.total_ms)),
         f'<div class="bar" style="width:{100.0 * s.first_event_ms / longest:.1f}%" '
         f'title="first event {e(ms(s.first_event_ms))}"></div>')
        for s in data.streams
    ]
    listing = table(("exchange", "method", "name", "events", "first event", "total",
                     "first event (relative)"), rows, numeric=(3, 4, 5), css="streams")
    note = ""
    if data.stream_count > len(data.streams):
        note = (f'<p class="note">Showing the first {len(data.streams)} of '
                f"{data.stream_count} streams.</p>")
    return (f'<section id="sse"><h2>SSE first-event latency</h2><p class="muted">From the '
            "request arriving at the tap to the first event of the origin's stream.</p>"
            f"{percentiles}<h3>Streams</h3>{listing}{note}</section>")
