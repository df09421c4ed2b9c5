"""The health section: the window the gate judged, its thresholds, and the exchanges that
counted as errors, each linked to its view."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from mcp_tap.report.markup import badge, e, exchange_link, table
from mcp_tap.report.model import ReportData
from mcp_tap.report.records import number, obj

_KIND_LABELS = {"tap": "tap answered (upstream failed)", "unanswered": "no origin status",
                "http_5xx": "HTTP 5xx", "http_4xx": "HTTP 4xx",
                "jsonrpc": "JSON-RPC error"}


def _time(value: float | None) -> str:
    if value is None:
        return "-"
    return datetime.fromtimestamp(value, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _threshold_rows(window: Mapping[str, Any], limits: Mapping[str, Any]) -> list[tuple[str,
                                                                                          ...]]:
    rows: list[tuple[str, ...]] = []

    def row(what: str, measured: float | None, limit: float | None, at_least: bool,
            fmt: str) -> None:
        if limit is None:
            return
        if measured is None:
            rows.append((e(what), "not measured", e(("\u2265 " if at_least else "\u2264 ")
                                                     + format(limit, fmt)), badge(False)))
            return
        ok = measured >= limit - 1e-9 if at_least else measured <= limit + 1e-9
        rows.append((e(what), e(format(measured, fmt)),
                     e(("\u2265 " if at_least else "\u2264 ") + format(limit, fmt)),
                     badge(ok, "pass", "fail")))

    name = str(limits.get("latencyPercentile") or "p95")
    row("samples", number(window.get("samples")), number(limits.get("minSamples")), True, "g")
    row("error rate", number(window.get("errorRate")), number(limits.get("maxErrorRate")),
        False, ".4f")
    row(f"{name} latency (ms)", number(obj(window.get("latencyMs")).get(name)),
        number(limits.get("maxLatencyMs")), False, ".1f")
    row(f"{name} SSE first event (ms)", number(obj(window.get("sseFirstEventMs")).get(name)),
        number(limits.get("maxSseFirstEventMs")), False, ".1f")
    row("observed (s)", number(window.get("observationSeconds")),
        number(limits.get("minObservationSeconds")), True, ".1f")
    return rows


def health_section(data: ReportData) -> str:
    """The health window, thresholds (with a gate decision) and the error exchanges."""
    view = data.health
    shown = data.detail_anchors()
    source = obj(obj(data.decision.get("sources") if data.decision else None).get("health"))
    verdict = ""
    if source:
        verdict = " " + badge(bool(source.get("passed")), "pass", "FAIL")
    counted = [k for k, on in (("jsonrpc", view.counting.get("jsonrpc")),
                               ("http_5xx", view.counting.get("http_5xx")),
                               ("http_4xx", view.counting.get("http_4xx"))) if on]
    counted_text = ", ".join(_KIND_LABELS[k] for k in ("tap", "unanswered", *counted))
    rate = f"{view.errors / view.samples:.4f}" if view.samples else "-"
    seconds = (max(0.0, view.end - view.start) if view.start is not None
               and view.end is not None else 0.0)
    facts = (
        '<dl class="facts">'
        f"<dt>Hop</dt><dd>{e(view.hop) if view.hop else 'every hop'}</dd>"
        f'<dt>Window</dt><dd id="health-window">{e(_time(view.start))} \u2192 '
        f"{e(_time(view.end))} ({seconds:.1f} s)</dd>"
        f'<dt>Samples</dt><dd id="health-samples">{view.samples} requests, {view.errors} '
        f"server-side errors (rate {e(rate)})</dd>"
        f"<dt>Counted as errors</dt><dd>{e(counted_text)}</dd>"
        f'<dt>Not counted</dt><dd id="health-rejected">{view.rejected} request(s) the client '
        "got wrong (a request rule broken), refused by the server as they should be</dd></dl>"
    )
    thresholds = ""
    if source:
        rows = _threshold_rows(obj(source.get("window")), obj(source.get("thresholds")))
        thresholds = "<h3>Thresholds</h3>" + table(
            ("measure", "measured", "threshold", "verdict"), rows, numeric=(1,), css="thresholds")
    by_kind = ", ".join(f"{e(_KIND_LABELS.get(k, k))} {n}" for k, n in view.kinds.items() if n)
    if view.error_refs:
        details = {d.ref.anchor: d for d in data.details}
        rows = []
        for ref, kinds in view.error_refs:
            detail = details.get(ref.anchor)
            rows.append((exchange_link(ref, shown),
                         f"<code>{e(detail.method)}</code> {e(detail.name)}" if detail else "",
                         e(detail.status) if detail else "",
                         e(", ".join(_KIND_LABELS.get(k, k) for k in kinds))))
        more = ""
        if view.errors > len(view.error_refs):
            more = (f'<p class="note">The first {len(view.error_refs)} of {view.errors} '
                    "errors.</p>")
        errors = (f'<h3 id="health-errors">Exchanges counted as errors ({view.errors}: '
                  f"{by_kind})</h3>"
                  + table(("exchange", "request", "status", "counted as"), rows,
                          css="health-errors") + more)
    else:
        errors = ('<h3 id="health-errors">Exchanges counted as errors</h3>'
                  '<p class="muted">None.</p>')
    return (f'<section id="health"><h2>Health{verdict}</h2>{facts}{thresholds}{errors}'
            "</section>")
