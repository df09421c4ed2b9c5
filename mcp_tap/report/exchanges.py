"""The exchange index (one row per exchange, bounded) and the exchange view: the redacted
request, response and SSE events of every exchange another section links to."""

from __future__ import annotations

from collections.abc import Sequence

from mcp_tap.report.markup import e, exchange_link, ms, rules_cell, strength_badge, table
from mcp_tap.report.model import ExchangeDetail, ReportData

_ERA_CSS = {"modern": "ok", "legacy": "warn"}


def index_section(data: ReportData) -> str:
    """The first rows of the exchange index, linked to the view where it holds them."""
    shown = data.detail_anchors()
    rows = [
        (e(i + 1), exchange_link(r.ref, shown),
         f'<span class="badge {_ERA_CSS.get(r.era, "neutral")}">{e(r.era)}</span>',
         f"<code>{e(r.method)}</code>", e(r.name), e(r.rpc_id), e(r.status),
         e(ms(r.latency_ms)), rules_cell(r.rules))
        for i, r in enumerate(data.rows)
    ]
    listing = table(("#", "exchange", "era", "method", "name", "id", "status", "latency",
                     "findings"), rows, numeric=(0, 7), css="exchanges")
    note = ""
    if data.exchanges > len(data.rows):
        note = (f'<p class="note">Showing the first {len(data.rows)} of {data.exchanges} '
                "exchanges; the counts above cover all of them.</p>")
    return (f'<section id="exchanges"><h2>Exchanges</h2><div class="scroll">{listing}</div>'
            f"{note}</section>")


def _headers(pairs: Sequence[tuple[str, str]]) -> str:
    if not pairs:
        return ""
    lines = "".join(f'<div><span class="hn">{e(k)}:</span> {e(v)}</div>' for k, v in pairs)
    return f'<div class="headers mono">{lines}</div>'


def _pre(body: str, empty: str) -> str:
    if not body:
        return f'<p class="muted small">{e(empty)}</p>'
    return f'<pre class="body">{e(body)}</pre>'


def _events(detail: ExchangeDetail) -> str:
    if not detail.event_count:
        return ""
    items = "".join(
        f'<li><span class="muted mono">+{e(ms(ev.offset_ms))}</span> '
        + (f"<code>event: {e(ev.event)}</code> " if ev.event else "")
        + (f"<code>id: {e(ev.event_id)}</code>" if ev.event_id else "")
        + f'<pre class="body">{e(ev.data)}</pre></li>'
        for ev in detail.events)
    return (f'<h4>SSE events ({detail.event_count})</h4><ol class="events">{items}</ol>')


def _article(detail: ExchangeDetail) -> str:
    found = "".join(f"<li>{strength_badge(s)} <code>{e(rule)}</code> {e(message)}</li>"
                    for rule, s, message in detail.findings)
    findings = f'<ul class="xfindings">{found}</ul>' if found else ""
    tap = (f'<p class="changed">tap error: <code>{e(detail.tap_error)}</code></p>'
           if detail.tap_error else "")
    cut = (f'<p class="note">{e("; ".join(detail.cut))}</p>' if detail.cut else "")
    name = f" {e(detail.name)}" if detail.name else ""
    rpc = f' <span class="muted">id {e(detail.rpc_id)}</span>' if detail.rpc_id else ""
    hop = detail.ref.hop
    return (
        f'<article class="xchg" id="{e(detail.ref.anchor)}">'
        f'<header><span class="mono">{e(detail.ref.exchange_id)}</span> '
        f'<span class="badge {_ERA_CSS.get(detail.era, "neutral")}">{e(detail.era)}</span> '
        f"<code>{e(detail.method)}</code>{name}{rpc} \u00b7 hop <code>{e(hop)}</code> \u00b7 "
        f"status {e(detail.status)} \u00b7 {e(ms(detail.latency_ms))}</header>"
        f"{findings}{tap}"
        '<div class="xbody"><div class="req"><h4>Request</h4>'
        f'<div class="mono small">{e(detail.request_line)}</div>'
        f"{_headers(detail.request_headers)}{_pre(detail.request_body, 'no body')}</div>"
        '<div class="resp"><h4>Response</h4>'
        f"{_headers(detail.response_headers)}"
        f"{_pre(detail.response_body, 'no JSON body' if detail.event_count else 'no body')}"
        f"{_events(detail)}</div></div>{cut}</article>"
    )


def view_section(data: ReportData) -> str:
    """Every kept exchange in full (as recorded, redacted by the proxy before disk)."""
    if not data.details:
        return ('<section id="exchange-view"><h2>Exchange view</h2><p class="muted">No '
                "exchange was recorded.</p></section>")
    bounds = data.bounds
    intro = (f'<p class="muted">{len(data.details)} of {data.exchanges} exchanges in full: '
             "the first and last example of each rule, the health errors, the pairs the box "
             f"between hops changed and the first {bounds.lead}. Headers and bodies are as "
             "the proxy recorded them, secrets already redacted.</p>")
    return (f'<section id="exchange-view"><h2>Exchange view</h2>{intro}'
            + "".join(_article(d) for d in data.details) + "</section>")
