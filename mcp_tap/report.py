"""The HTML report: one self-contained page a person reads instead of evidence JSON.

Three steps, kept apart so the rendering can be tested without files or a browser:

* :func:`load_report` does the I/O: finds and verifies the bundles, reads their records and,
  when a policy and rollback evidence are given, asks the gate for its decision;
* :func:`collect` turns records into a :class:`ReportData` (pure: counts, tables, latency
  samples);
* :func:`render_report` turns that into HTML (pure).

The page has no external asset of any kind: inline CSS, charts drawn here as inline SVG, no
script, and a Content-Security-Policy that forbids loading anything. Evidence is attacker
controlled (a tool name, a header, an error message), so every piece of text goes through
:func:`html.escape`, in element content and in attributes alike.
"""

from __future__ import annotations

import html
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from mcp_tap import __version__
from mcp_tap.core.catalog import CATALOG
from mcp_tap.errors import BundleFormatError
from mcp_tap.gate.health import percentile  # the gate's nearest rank: same numbers

__all__ = [
    "MAX_ROWS",
    "PERCENTILES",
    "BundleSummary",
    "ExchangeRow",
    "HopComparisonRow",
    "HopSummary",
    "ReportData",
    "RuleCount",
    "StreamRow",
    "collect",
    "gate_decision",
    "load_report",
    "percentile",
    "render_report",
]

MAX_ROWS: Final = 500
"""Rows of the per-exchange table; the rest is counted, not listed."""

MAX_STREAM_ROWS: Final = 50
"""Rows of the SSE table."""

PERCENTILES: Final[tuple[tuple[str, float], ...]] = (("p50", 50.0), ("p95", 95.0), ("p99", 99.0))
"""The percentiles the latency plots mark."""

_EXAMPLES: Final = 3
_ERA_CSS: Final = {"modern": "ok", "legacy": "warn"}
_HOP_COLUMNS: Final[tuple[tuple[str, tuple[str, ...]], ...]] = (
    ("status", ("hop.status-changed", "hop.error-collapse")),
    ("body", ("hop.body-changed",)),
    ("headers", ("hop.header-changed",)),
    ("SSE timing", ("hop.sse-buffered",)),
)


# --- the data ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BundleSummary:
    """One bundle: where it is, whether it verified, and what it holds."""

    path: str
    ok: bool
    records: int
    exchanges: int
    errors: int = 0
    warnings: int = 0
    problems: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RuleCount:
    """One rule that fired: how often, where, and a few example exchange ids."""

    rule: str
    boundary: str
    code: int | None
    count: int
    examples: tuple[str, ...]
    message: str
    strength: str = "must"


@dataclass(frozen=True, slots=True)
class HopComparisonRow:
    """One hop-comparison record: the box it blames, the two hops and the rules found."""

    box: str
    between: str
    exchange_ids: tuple[str, ...]
    rules: tuple[str, ...]
    messages: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class HopSummary:
    """What one hop forwarded: exchanges, and egress that differs from the origin's answer."""

    hop: str
    exchanges: int
    status_changed: int
    body_changed: int
    client_gone: int
    tap_errors: int
    hop_findings: int


@dataclass(frozen=True, slots=True)
class ExchangeRow:
    """One exchange in the era table."""

    exchange_id: str
    hop: str
    era: str
    method: str
    name: str
    rpc_id: str
    status: str
    latency_ms: float | None
    rules: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class StreamRow:
    """One SSE answer: when its first event arrived and how many followed."""

    exchange_id: str
    hop: str
    method: str
    name: str
    events: int
    first_event_ms: float
    total_ms: float | None


@dataclass(frozen=True, slots=True)
class ReportData:
    """Everything the page shows, computed from the evidence (see :func:`collect`)."""

    generated: str
    bundles: tuple[BundleSummary, ...]
    exchanges: int
    eras: Mapping[str, int]
    rules: tuple[RuleCount, ...]
    hop_summaries: tuple[HopSummary, ...]
    hop_comparisons: tuple[HopComparisonRow, ...]
    rows: tuple[ExchangeRow, ...]
    latencies_ms: tuple[float, ...]
    latency_by_hop: Mapping[str, tuple[float, ...]]
    streams: tuple[StreamRow, ...]
    decision: Mapping[str, Any] | None = None
    decision_note: str = ""
    gaps: int = 0
    clean_exchanges: int = 0
    version: str = field(default=__version__)


# --- collecting -------------------------------------------------------------------------------


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def _findings(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    raw = record.get("findings")
    return [f for f in raw if isinstance(f, dict) and isinstance(f.get("rule"), str)] if isinstance(
        raw, list) else []


def _method(record: Mapping[str, Any]) -> str:
    """The JSON-RPC method, or the HTTP method of a request without one (a GET stream)."""
    method = _text(record.get("method"))
    if method:
        return method
    http_method = _text(_dict(record.get("ingress")).get("httpMethod"))
    return f"({http_method})" if http_method else "-"


def _target_name(record: Mapping[str, Any]) -> str:
    """The tool / prompt name or resource URI the request addressed, if any."""
    ingress = _dict(record.get("ingress"))
    params = _dict(_dict(ingress.get("body")).get("params"))
    for key in ("name", "uri"):
        if isinstance(params.get(key), str):
            return str(params[key])
    for pair in ingress.get("headers") or []:
        if isinstance(pair, list) and len(pair) == 2 and str(pair[0]).lower() == "mcp-name":
            return _text(pair[1])
    return ""


def _latency_ms(record: Mapping[str, Any]) -> float | None:
    """Received at the tap to the last byte sent to the client (or from the origin)."""
    start = _number(_dict(record.get("ingress")).get("receivedAt"))
    end = _number(_dict(record.get("egress")).get("endAt"))
    if end is None:
        end = _number(_dict(record.get("origin")).get("endAt"))
    if start is None or end is None or end < start:
        return None
    return (end - start) * 1000.0


def _status(record: Mapping[str, Any]) -> str:
    origin = _dict(record.get("origin")).get("status")
    egress = _dict(record.get("egress")).get("status")
    if origin is None and egress is None:
        return "-"
    if origin == egress or origin is None or egress is None:
        return _text(origin if origin is not None else egress)
    return f"{origin} \u2192 {egress}"


def _stream(record: Mapping[str, Any]) -> StreamRow | None:
    origin = _dict(record.get("origin"))
    events = origin.get("sse")
    if not isinstance(events, list) or not events:
        return None
    start = _number(_dict(record.get("ingress")).get("receivedAt"))
    first = _number(_dict(events[0]).get("at"))
    if start is None or first is None:
        return None
    return StreamRow(
        exchange_id=_text(record.get("exchangeId")),
        hop=_text(record.get("hop")),
        method=_method(record),
        name=_target_name(record),
        events=len(events),
        first_event_ms=max(0.0, (first - start) * 1000.0),
        total_ms=_latency_ms(record),
    )


@dataclass(slots=True)
class _Tally:
    boundary: str
    code: int | None
    message: str
    count: int = 0
    examples: list[str] = field(default_factory=list)
    strength: str = "must"


def _tally(tallies: dict[str, _Tally], finding: Mapping[str, Any], example: str) -> None:
    code = finding.get("code")
    tally = tallies.setdefault(str(finding["rule"]), _Tally(
        boundary=_text(finding.get("boundary")),
        code=code if isinstance(code, int) and not isinstance(code, bool) else None,
        message=_text(finding.get("message")),
        strength=_strength(finding),
    ))
    # A rule whose findings are all warnings is a should; one violation makes it a must.
    if _strength(finding) == "must":
        tally.strength = "must"
    tally.count += 1
    if example and example not in tally.examples and len(tally.examples) < _EXAMPLES:
        tally.examples.append(example)


def _strength(finding: Mapping[str, Any]) -> str:
    """A finding's strength; evidence from before strengths existed has the catalog's."""
    raw = finding.get("strength")
    if raw in ("must", "should"):
        return str(raw)
    entry = CATALOG.get(str(finding.get("rule")))
    return str(entry.strength) if entry is not None else "must"


def _comparison(record: Mapping[str, Any]) -> HopComparisonRow:
    between = record.get("between")
    pair = between if isinstance(between, list) else [between]
    shown = " \u2192 ".join(_text(b) for b in pair)
    ids = record.get("exchangeIds")
    found = _findings(record)
    return HopComparisonRow(
        box=_text(record.get("box")) or "-",
        between=shown or "-",
        exchange_ids=tuple(_text(i) for i in ids) if isinstance(ids, list) else (),
        rules=tuple(str(f["rule"]) for f in found),
        messages=tuple(_text(f.get("message")) for f in found),
    )


@dataclass(slots=True)
class _HopCount:
    exchanges: int = 0
    status_changed: int = 0
    body_changed: int = 0
    client_gone: int = 0
    tap_errors: int = 0
    hop_findings: int = 0


def _hop_count(counts: dict[str, _HopCount], record: Mapping[str, Any]) -> None:
    count = counts.setdefault(_text(record.get("hop")) or "-", _HopCount())
    count.exchanges += 1
    origin, egress = _dict(record.get("origin")), _dict(record.get("egress"))
    if record.get("tapError"):
        count.tap_errors += 1
    if egress.get("clientGone"):
        count.client_gone += 1
    elif origin and egress:
        if origin.get("status") != egress.get("status"):
            count.status_changed += 1
        if (origin.get("bodyDigest") and egress.get("bodyDigest")
                and origin.get("bodyDigest") != egress.get("bodyDigest")):
            count.body_changed += 1
    count.hop_findings += sum(1 for f in _findings(record) if str(f["rule"]).startswith("hop."))


def collect(
    bundles: Sequence[tuple[BundleSummary, Sequence[Mapping[str, Any]]]],
    *,
    decision: Mapping[str, Any] | None = None,
    decision_note: str = "",
    generated: str = "",
) -> ReportData:
    """Compute the report from each bundle's summary and records (pure)."""
    tallies: dict[str, _Tally] = {}
    hop_counts: dict[str, _HopCount] = {}
    comparisons: list[HopComparisonRow] = []
    rows: list[ExchangeRow] = []
    streams: list[StreamRow] = []
    latencies: list[float] = []
    by_hop: dict[str, list[float]] = {}
    eras: Counter[str] = Counter()
    gaps = clean = 0
    for _summary, records in bundles:
        for record in records:
            kind = record.get("kind")
            if kind == "gap":
                lost = record.get("lost")
                gaps += lost if isinstance(lost, int) and not isinstance(lost, bool) else 1
                continue
            if kind == "hop-comparison":
                comparisons.append(_comparison(record))
                ids = record.get("exchangeIds")
                example = _text(ids[0]) if isinstance(ids, list) and ids else ""
                for finding in _findings(record):
                    _tally(tallies, finding, example)
                continue
            if kind != "exchange":
                continue
            exchange_id = _text(record.get("exchangeId"))
            found = _findings(record)
            for finding in found:
                _tally(tallies, finding, exchange_id)
            clean += not found
            era = _text(record.get("era")) or "unknown"
            eras[era] += 1
            _hop_count(hop_counts, record)
            latency = _latency_ms(record)
            hop = _text(record.get("hop")) or "-"
            if latency is not None:
                latencies.append(latency)
                by_hop.setdefault(hop, []).append(latency)
            stream = _stream(record)
            if stream is not None:
                streams.append(stream)
            rpc_id = record.get("rpcId")
            rows.append(ExchangeRow(
                exchange_id=exchange_id,
                hop=hop,
                era=era,
                method=_method(record),
                name=_target_name(record),
                rpc_id="" if rpc_id is None else _text(rpc_id),
                status=_status(record),
                latency_ms=latency,
                rules=tuple(str(f["rule"]) for f in found),
            ))
    rules = tuple(
        RuleCount(rule, t.boundary, t.code, t.count, tuple(t.examples), t.message, t.strength)
        for rule, t in sorted(tallies.items(), key=lambda item: (-item[1].count, item[0]))
    )
    summaries = tuple(
        HopSummary(hop, c.exchanges, c.status_changed, c.body_changed, c.client_gone,
                   c.tap_errors, c.hop_findings)
        for hop, c in sorted(hop_counts.items())
    )
    return ReportData(
        generated=generated,
        bundles=tuple(summary for summary, _ in bundles),
        exchanges=len(rows),
        eras=dict(sorted(eras.items())),
        rules=rules,
        hop_summaries=summaries,
        hop_comparisons=tuple(comparisons),
        rows=tuple(rows),
        latencies_ms=tuple(latencies),
        latency_by_hop={hop: tuple(values) for hop, values in sorted(by_hop.items())},
        streams=tuple(streams),
        decision=decision,
        decision_note=decision_note,
        gaps=gaps,
        clean_exchanges=clean,
    )


# --- I/O --------------------------------------------------------------------------------------


def gate_decision(
    bundles: Sequence[Path], policy: Path, rollback: Path
) -> tuple[dict[str, Any] | None, str]:
    """Ask the gate for its decision on ``bundles``: ``(decision JSON, "")`` or ``(None, why)``.

    Uses the gate library's evaluation, so the page shows exactly what
    ``mcp-tap gate`` decides. Bad policy or rollback input raises InputError like the gate.
    """
    try:
        from mcp_tap.gate.evaluation import evaluate_files
    except ImportError as exc:
        return None, f"the gate is not available ({exc})"
    decision = evaluate_files(bundles, policy, rollback)
    data: dict[str, Any] = decision.to_json()
    return data, ""


def load_report(
    evidence: Iterable[str | Path],
    *,
    policy: Path | None = None,
    rollback: Path | None = None,
    generated: str = "",
) -> ReportData:
    """Find, verify and read the bundles under ``evidence``; ask the gate; collect.

    A bundle that fails verification is still shown (read leniently), with its problems:
    the page is where a person looks at damaged evidence, not a second verifier.
    """
    from mcp_tap.evidence import find_all_bundles, read_bundle, verify_bundle

    paths = find_all_bundles(evidence)
    loaded: list[tuple[BundleSummary, Sequence[Mapping[str, Any]]]] = []
    for path in paths:
        verified = verify_bundle(path)
        problems = [f"{p.severity}: {p.message}" for p in verified.problems]
        try:
            records = read_bundle(path, lenient=not verified.ok).records
        except BundleFormatError as exc:
            records = []
            problems.append(f"error: unreadable: {exc}")
        summary = BundleSummary(
            path=str(path),
            ok=verified.ok,
            records=len(records),
            exchanges=sum(1 for r in records if r.get("kind") == "exchange"),
            errors=len(verified.errors),
            warnings=len(verified.warnings),
            problems=tuple(problems),
        )
        loaded.append((summary, records))
    decision: dict[str, Any] | None = None
    if policy is not None and rollback is not None:
        decision, note = gate_decision(paths, policy, rollback)
    elif policy is not None or rollback is not None:
        note = "a gate decision needs both --policy and --rollback"
    else:
        note = ""
    return collect(loaded, decision=decision, decision_note=note, generated=generated)


# --- statistics -------------------------------------------------------------------------------


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:.0f} ms"
    if value >= 10:
        return f"{value:.1f} ms"
    return f"{value:.2f} ms"


# --- rendering --------------------------------------------------------------------------------


def _e(value: Any) -> str:
    """Escape any value for HTML element content and quoted attributes."""
    return html.escape(_text(value), quote=True)


_CSS: Final = """
:root { --ink:#1d2330; --muted:#5b6475; --line:#d9dee7; --bg:#f5f7fa; --card:#fff;
  --ok:#1a7f37; --bad:#c62828; --warn:#b26a00; --accent:#2f5bd3; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  color:var(--ink); background:var(--bg); }
header { background:#1d2330; color:#fff; padding:18px 32px; }
header h1 { margin:0; font-size:20px; font-weight:600; }
header p { margin:4px 0 0; color:#c4cbd8; font-size:12px; }
main { padding:20px 32px 40px; max-width:1400px; }
section { background:var(--card); border:1px solid var(--line); border-radius:8px;
  padding:16px 20px; margin:0 0 18px; }
h2 { font-size:16px; margin:0 0 10px; }
h3 { font-size:14px; margin:12px 0 6px; color:var(--muted); }
table { border-collapse:collapse; width:100%; font-size:13px; }
th, td { text-align:left; padding:5px 8px; border-bottom:1px solid var(--line);
  vertical-align:top; }
th { color:var(--muted); font-weight:600; background:#fafbfc; }
td.num, th.num { text-align:right; font-variant-numeric:tabular-nums; }
code, .mono { font-family:ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
  font-size:12px; }
.badge { display:inline-block; padding:2px 8px; border-radius:10px; font-size:12px;
  font-weight:600; color:#fff; }
.ok { background:var(--ok); } .bad { background:var(--bad); } .warn { background:var(--warn); }
.neutral { background:#7a8394; }
.action { font-size:22px; padding:6px 16px; border-radius:6px; text-transform:uppercase;
  letter-spacing:.05em; }
.cards { display:flex; gap:12px; flex-wrap:wrap; }
.card { border:1px solid var(--line); border-radius:6px; padding:6px 12px; min-width:120px; }
.card .v { font-size:19px; font-weight:600; }
.label { color:var(--muted); font-weight:600; margin:10px 0 4px; }
ul.bundles { list-style:none; padding:0; margin:0; }
ul.bundles li.bundle { margin:0 0 4px; }
ul.problems { margin:2px 0 0; padding-left:20px; font-size:12px; color:var(--bad); }
.card .l { color:var(--muted); font-size:12px; }
.muted { color:var(--muted); }
.note { color:var(--muted); font-style:italic; margin:8px 0 0; }
.rule { font-weight:600; }
.changed { color:var(--bad); font-weight:600; }
.same { color:var(--ok); }
.bar { height:10px; background:var(--accent); border-radius:2px; min-width:2px; }
ul.reasons { margin:8px 0 0; padding-left:20px; }
svg { display:block; max-width:100%; height:auto; }
svg text { font:11px system-ui, sans-serif; fill:#1d2330; }
svg .axis { stroke:#8a93a5; stroke-width:1; }
svg .grid { stroke:#e6e9ef; stroke-width:1; }
svg .binbar { fill:#7d9be6; }
svg .curve { fill:none; stroke:var(--accent); stroke-width:2; }
svg .pct line { stroke-width:1.5; stroke-dasharray:4 3; }
svg .pct line.swatch { stroke-width:3; stroke-dasharray:none; }
svg .legend { fill:#fff; fill-opacity:.9; stroke:#d9dee7; }
svg .p50 line, svg .p50 circle { stroke:#1a7f37; fill:#1a7f37; }
svg .p95 line, svg .p95 circle { stroke:#b26a00; fill:#b26a00; }
svg .p99 line, svg .p99 circle { stroke:#c62828; fill:#c62828; }
.plots { display:grid; grid-template-columns:1fr 1fr; gap:16px; }
.top { display:grid; grid-template-columns:minmax(0, 3fr) minmax(0, 2fr); gap:18px;
  align-items:start; }
@media (max-width: 1000px) { .top, .plots { grid-template-columns:1fr; } }
td .mono { word-break:break-all; }
"""


def _badge(ok: bool, yes: str = "ok", no: str = "FAILED") -> str:
    return f'<span class="badge {"ok" if ok else "bad"}">{_e(yes if ok else no)}</span>'


def _table(head: Sequence[str], rows: Iterable[Sequence[str]], numeric: Sequence[int] = (),
           css: str = "") -> str:
    """A table from pre-escaped cell HTML; ``numeric`` column indices align right."""
    cls = f' class="{css}"' if css else ""
    ths = "".join(
        f'<th class="num">{_e(h)}</th>' if i in numeric else f"<th>{_e(h)}</th>"
        for i, h in enumerate(head)
    )
    body = "".join(
        "<tr>" + "".join(
            f'<td class="num">{cell}</td>' if i in numeric else f"<td>{cell}</td>"
            for i, cell in enumerate(row)
        ) + "</tr>"
        for row in rows
    )
    return f"<table{cls}><thead><tr>{ths}</tr></thead><tbody>{body}</tbody></table>"


def _rules_cell(rules: Sequence[str]) -> str:
    if not rules:
        return '<span class="muted">none</span>'
    counts = Counter(rules)
    return ", ".join(
        f'<code>{_e(rule)}</code>' + (f" \u00d7{n}" if n > 1 else "")
        for rule, n in counts.items()
    )


def _decision_section(data: ReportData) -> str:
    decision = data.decision
    if decision is None:
        note = f'<p class="note">{_e(data.decision_note)}</p>' if data.decision_note else ""
        failing = data.exchanges - data.clean_exchanges
        verdict = (f"{data.clean_exchanges} of {data.exchanges} exchanges without findings, "
                   f"{failing} with findings")
        return (
            '<section id="decision"><h2>Decision</h2>'
            '<p><span class="badge neutral">no gate decision</span> '
            "no gate decision (run <code>mcp-tap gate</code>, or pass <code>--policy</code> "
            "and <code>--rollback</code> to this report). Conformance verdicts only: "
            f"{_e(verdict)}.</p>{note}</section>"
        )
    action = _text(decision.get("action")) or "unknown"
    css = {"promote": "ok", "rollback": "bad", "hold": "warn"}.get(action, "neutral")
    reasons = decision.get("reasons") if isinstance(decision.get("reasons"), list) else []
    items = []
    for reason in reasons or []:
        reason = _dict(reason)
        found = reason.get("findings") if isinstance(reason.get("findings"), list) else []
        underlying = (" [" + ", ".join(f"<code>{_e(f)}</code>" for f in found or []) + "]"
                      if found else "")
        items.append(f'<li><span class="rule">{_e(reason.get("rule"))}</span>{underlying}: '
                     f"{_e(reason.get('message'))}</li>")
    reason_html = (f'<ul class="reasons">{"".join(items)}</ul>' if items
                   else '<p class="muted">no reasons: every source passed</p>')
    sources = _dict(decision.get("sources"))
    chips = " ".join(
        f'<span class="badge {"ok" if _dict(s).get("passed") else "bad"}">{_e(name)}: '
        f'{"pass" if _dict(s).get("passed") else "fail"}</span>'
        for name, s in sources.items()
    )
    rollback = _dict(decision.get("rollback"))
    ready = bool(rollback.get("ready"))
    return (
        '<section id="decision"><h2>Decision</h2>'
        f'<p><span class="badge action {css}" id="action">{_e(action)}</span></p>'
        f"<h3>Reasons</h3>{reason_html}"
        f"<h3>Sources</h3><p>{chips}</p>"
        f"<p>rollback target: {_badge(ready, 'ready', 'NOT READY')}</p>"
        f'<p class="muted mono">evidence digest {_e(decision.get("evidenceDigest"))}</p>'
        "</section>"
    )


def _summary_section(data: ReportData) -> str:
    verified = sum(1 for b in data.bundles if b.ok)
    cards = [
        (str(len(data.bundles)), f"bundles ({verified} verified)"),
        (str(data.exchanges), "exchanges"),
        (str(data.exchanges - data.clean_exchanges), "exchanges with findings"),
        (str(sum(r.count for r in data.rules)), "findings"),
        (str(len(data.hop_comparisons)), "hop comparisons"),
        (str(len(data.streams)), "SSE answers"),
    ]
    if data.gaps:
        cards.append((str(data.gaps), "records lost (gaps)"))
    eras = ", ".join(f"{_e(era)} {n}" for era, n in data.eras.items()) or "none"
    card_html = "".join(
        f'<div class="card"><div class="v">{_e(v)}</div><div class="l">{_e(label)}</div></div>'
        for v, label in cards
    )
    items = []
    for bundle in data.bundles:
        problems = "".join(f"<li>{_e(p)}</li>" for p in bundle.problems[:5])
        if len(bundle.problems) > 5:
            problems += f"<li>\u2026 {len(bundle.problems) - 5} more</li>"
        counts = (f"{bundle.records} records, {bundle.exchanges} exchanges, "
                  f"{bundle.errors} errors, {bundle.warnings} warnings")
        items.append(
            f'<li class="bundle">{_badge(bundle.ok, "verified", "FAILED")} '
            f'<span class="mono" title="{_e(bundle.path)}">{_e(Path(bundle.path).name)}</span> '
            f'<span class="muted">{_e(counts)}</span>'
            + (f'<ul class="problems">{problems}</ul>' if problems else "") + "</li>"
        )
    return (f'<section id="summary"><h2>Summary</h2><div class="cards">{card_html}</div>'
            f'<p><span class="label">Eras</span> {eras}</p>'
            f'<p class="label">Bundles (verify status)</p><ul class="bundles">{"".join(items)}</ul>'
            "</section>")


def _rules_section(data: ReportData) -> str:
    if not data.rules:
        body = '<p class="muted">No rule fired: every exchange passed every check.</p>'
    else:
        rows = [
            (f'<code class="rule">{_e(r.rule)}</code>', _e(r.strength), _e(r.boundary),
             _e("" if r.code is None else r.code), _e(r.count),
             ", ".join(f'<span class="mono">{_e(x)}</span>' for x in r.examples),
             _e(r.message))
            for r in data.rules
        ]
        body = _table(("rule", "strength", "boundary", "code", "count", "example exchanges",
                       "example message"), rows, numeric=(3, 4), css="rules")
    return f'<section id="rules"><h2>Failing rules</h2>{body}</section>'


def _column_hits(rules: Sequence[str]) -> list[list[str]]:
    """The rules of one comparison that fall in each column (status, body, headers, SSE)."""
    return [[r for r in rules if r in column] for _, column in _HOP_COLUMNS]


def _comparisons_html(comparisons: Sequence[HopComparisonRow]) -> str:
    """Hop comparisons grouped by box, then the pairs in which the box changed something."""
    if not comparisons:
        return ('<p class="muted">No hop-comparison records: the capture had one hop '
                "(run two hops around a gateway to see what the box changes).</p>")
    known = {r for _, column in _HOP_COLUMNS for r in column}
    groups: dict[tuple[str, str], list[HopComparisonRow]] = {}
    for row in comparisons:
        groups.setdefault((row.box, row.between), []).append(row)
    rows = []
    for (box, between), pairs in groups.items():
        cells = []
        for index in range(len(_HOP_COLUMNS)):
            changed = sum(1 for pair in pairs if _column_hits(pair.rules)[index])
            cells.append(f'<span class="changed">{changed} changed</span>' if changed
                         else '<span class="same">same</span>')
        other = [r for pair in pairs for r in pair.rules if r not in known]
        rows.append((f'<span class="mono box">{_e(box)}</span>', _e(between), _e(len(pairs)),
                     *cells, _rules_cell(other) if other else '<span class="muted">-</span>'))
    table = _table(("box", "between", "pairs", *(label for label, _ in _HOP_COLUMNS),
                    "other"), rows, numeric=(2,), css="hops")
    changed_pairs = [c for c in comparisons if c.rules]
    if not changed_pairs:
        return table + '<p class="muted">No pair differed between the hops.</p>'
    detail = [
        (_e(c.between), _rules_cell(c.rules),
         "<br>".join(_e(m) for m in c.messages),
         "<br>".join(f'<span class="mono">{_e(i)}</span>' for i in c.exchange_ids))
        for c in changed_pairs[:MAX_STREAM_ROWS]
    ]
    more = ""
    if len(changed_pairs) > MAX_STREAM_ROWS:
        more = (f'<p class="note">Showing {MAX_STREAM_ROWS} of {len(changed_pairs)} '
                "changed pairs.</p>")
    return (table + "<h3>Pairs the box changed</h3>"
            + _table(("between", "rules", "what changed", "exchanges (outer, inner)"),
                     detail, css="hop-changes") + more)


def _hops_section(data: ReportData) -> str:
    rows = [
        (f"<code>{_e(h.hop)}</code>", _e(h.exchanges),
         f'<span class="{"changed" if h.status_changed else "same"}">{_e(h.status_changed)}</span>',
         f'<span class="{"changed" if h.body_changed else "same"}">{_e(h.body_changed)}</span>',
         _e(h.client_gone), _e(h.tap_errors), _e(h.hop_findings))
        for h in data.hop_summaries
    ]
    per_hop = _table(("hop", "exchanges", "egress status \u2260 origin",
                      "egress body \u2260 origin", "client gone", "tap errors",
                      "hop.* findings"), rows, numeric=(1, 2, 3, 4, 5, 6))
    comparisons = _comparisons_html(data.hop_comparisons)
    return (f'<section id="hops"><h2>Hops</h2><h3>Per hop: what the client got vs what the '
            f"origin sent</h3>{per_hop}<h3>Between hops: what the box in between changed</h3>"
            f"{comparisons}</section>")


def _exchanges_section(data: ReportData, max_rows: int) -> str:
    shown = data.rows[:max_rows]
    rows = [
        (_e(i + 1), f'<span class="mono">{_e(r.exchange_id)}</span>', _e(r.hop),
         f'<span class="badge {_ERA_CSS.get(r.era, "neutral")}">{_e(r.era)}</span>',
         f"<code>{_e(r.method)}</code>", _e(r.name), _e(r.rpc_id), _e(r.status),
         _e(_ms(r.latency_ms)), _rules_cell(r.rules))
        for i, r in enumerate(shown)
    ]
    table = _table(("#", "exchange", "hop", "era", "method", "name", "id", "status",
                    "latency", "findings"), rows, numeric=(0, 8), css="exchanges")
    note = ""
    if len(data.rows) > max_rows:
        note = (f'<p class="note">Showing the first {max_rows} of {len(data.rows)} exchanges; '
                "the counts above cover all of them.</p>")
    return f'<section id="exchanges"><h2>Era per exchange</h2>{table}{note}</section>'


# --- charts -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Scale:
    """Maps a value range onto pixels, logarithmically when the range is wide."""

    low: float
    high: float
    start: float
    end: float
    log: bool

    @classmethod
    def fit(cls, values: Sequence[float], start: float, end: float) -> _Scale:
        low, high = min(values), max(values)
        positive = low > 0
        log = positive and high / low > 20
        if high <= low:
            low, high = (low * 0.9, low * 1.1) if low > 0 else (0.0, 1.0)
        return cls(low, high, start, end, log)

    def _t(self, value: float) -> float:
        if self.log:
            value = max(value, self.low)
            return (math.log10(value) - math.log10(self.low)) / (
                math.log10(self.high) - math.log10(self.low))
        return (value - self.low) / (self.high - self.low)

    def __call__(self, value: float) -> float:
        return self.start + (self.end - self.start) * min(1.0, max(0.0, self._t(value)))

    def ticks(self, count: int = 5) -> list[float]:
        if self.log:
            values = []
            exponent = math.floor(math.log10(self.low))
            while 10 ** exponent <= self.high * 1.0001:
                for step in (1, 2, 5):
                    tick = step * 10 ** exponent
                    if self.low <= tick <= self.high:
                        values.append(float(tick))
                exponent += 1
            return values or [self.low, self.high]
        return [self.low + (self.high - self.low) * i / (count - 1) for i in range(count)]

    def edges(self, bins: int) -> list[float]:
        if self.log:
            lo, hi = math.log10(self.low), math.log10(self.high)
            return [10 ** (lo + (hi - lo) * i / bins) for i in range(bins + 1)]
        return [self.low + (self.high - self.low) * i / bins for i in range(bins + 1)]


def _tick_label(value: float) -> str:
    if value >= 100:
        return f"{value:.0f}"
    if value >= 1:
        return f"{value:.3g}"
    return f"{value:.2g}"


def _legend_box(x: float, y: float) -> str:
    """The background of the percentile legend (three entries)."""
    return (f'<rect class="legend" x="{x:.1f}" y="{y:.1f}" width="120" '
            f'height="{15 * len(PERCENTILES) + 8}" rx="3"/>')


def _legend_entry(x: float, y: float, name: str, value: float) -> str:
    """One legend line of a percentile marker: a colour swatch and ``p95 12.3 ms``."""
    return (f'<line class="swatch" x1="{x:.1f}" x2="{x + 14:.1f}" y1="{y + 4:.1f}" '
            f'y2="{y + 4:.1f}"/>'
            f'<text x="{x + 19:.1f}" y="{y + 8:.1f}">{_e(name)} {_e(_ms(value))}</text>')


def _histogram_svg(values: Sequence[float], title: str) -> str:
    width, height, left, right, top, bottom = 620, 260, 48, 16, 34, 40
    x = _Scale.fit(values, left, width - right)
    bins = max(5, min(30, math.ceil(math.sqrt(len(values))) * 2))
    edges = x.edges(bins)
    counts = [0] * bins
    for value in values:
        index = bins - 1
        for i in range(bins):
            if value < edges[i + 1]:
                index = i
                break
        counts[max(0, index)] += 1
    unit = max(1, math.ceil(max(counts) / 4))
    peak = unit * max(1, math.ceil(max(counts) / unit))
    plot_h = height - top - bottom

    def y(count: float) -> float:
        return top + plot_h - plot_h * count / peak

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="histogram" role="img" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}">',
        f"<title>{_e(title)}</title>",
        f'<text x="{left}" y="16" font-weight="600">{_e(title)}</text>',
    ]
    for level in range(0, peak + 1, unit):
        parts.append(f'<line class="grid" x1="{left}" x2="{width - right}" y1="{y(level):.1f}" '
                     f'y2="{y(level):.1f}"/>')
        parts.append(f'<text x="{left - 6}" y="{y(level) + 4:.1f}" text-anchor="end">'
                     f"{level}</text>")
    for i, count in enumerate(counts):
        if not count:
            continue
        x0, x1 = x(edges[i]), x(edges[i + 1])
        parts.append(
            f'<rect class="binbar" x="{x0 + 0.5:.1f}" y="{y(count):.1f}" '
            f'width="{max(1.0, x1 - x0 - 1):.1f}" height="{top + plot_h - y(count):.1f}">'
            f"<title>{_e(_ms(edges[i]))} \u2013 {_e(_ms(edges[i + 1]))}: {count}</title></rect>"
        )
    base = top + plot_h
    parts.append(f'<line class="axis" x1="{left}" x2="{width - right}" y1="{base}" y2="{base}"/>')
    for tick in x.ticks():
        parts.append(f'<line class="axis" x1="{x(tick):.1f}" x2="{x(tick):.1f}" y1="{base}" '
                     f'y2="{base + 4}"/>')
        parts.append(f'<text x="{x(tick):.1f}" y="{base + 16}" text-anchor="middle">'
                     f"{_e(_tick_label(tick))}</text>")
    parts.append(f'<text x="{(left + width - right) / 2}" y="{height - 4}" '
                 f'text-anchor="middle" class="muted">latency (ms{", log scale" if x.log else ""})'
                 "</text>")
    parts.append(_legend_box(width - right - 126, top - 4))
    for offset, (name, p) in enumerate(PERCENTILES):
        value = percentile(values, p)
        px = x(value)
        parts.append(
            f'<g class="pct {name}" data-percentile="{name}" data-ms="{value:.3f}">'
            f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{top - 4}" y2="{base}"/>'
            + _legend_entry(width - right - 120, top + 2 + 15 * offset, name, value)
            + "</g>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _percentile_svg(values: Sequence[float], title: str) -> str:
    width, height, left, right, top, bottom = 620, 260, 56, 16, 34, 40
    ordered = sorted(values)
    y = _Scale.fit(ordered, height - bottom, top)

    def x(p: float) -> float:
        return left + (width - right - left) * p / 100.0

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="percentiles" role="img" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}">',
        f"<title>{_e(title)}</title>",
        f'<text x="{left}" y="16" font-weight="600">{_e(title)}</text>',
    ]
    for tick in y.ticks():
        parts.append(f'<line class="grid" x1="{left}" x2="{width - right}" y1="{y(tick):.1f}" '
                     f'y2="{y(tick):.1f}"/>')
        parts.append(f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">'
                     f"{_e(_tick_label(tick))}</text>")
    base = height - bottom
    parts.append(f'<line class="axis" x1="{left}" x2="{width - right}" y1="{base}" y2="{base}"/>')
    parts.append(f'<line class="axis" x1="{left}" x2="{left}" y1="{top}" y2="{base}"/>')
    for mark in (0, 25, 50, 75, 100):
        parts.append(f'<text x="{x(mark):.1f}" y="{base + 16}" text-anchor="middle">'
                     f"p{mark}</text>")
    count = len(ordered)
    points = " ".join(
        f"{x(100.0 * i / (count - 1) if count > 1 else 50.0):.1f},{y(v):.1f}"
        for i, v in enumerate(ordered)
    )
    parts.append(f'<polyline class="curve" points="{points}"/>')
    parts.append(f'<text x="{(left + width - right) / 2}" y="{height - 4}" '
                 f'text-anchor="middle">percentile (latency in ms'
                 f'{", log scale" if y.log else ""})</text>')
    parts.append(_legend_box(left + 6, top - 4))
    for offset, (name, p) in enumerate(PERCENTILES):
        value = percentile(ordered, p)
        px, py = x(p), y(value)
        parts.append(
            f'<g class="pct {name}" data-percentile="{name}" data-ms="{value:.3f}">'
            f'<circle cx="{px:.1f}" cy="{py:.1f}" r="4"/>'
            + _legend_entry(left + 12, top + 2 + 15 * offset, name, value)
            + "</g>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _percentile_table(series: Mapping[str, Sequence[float]]) -> str:
    rows = []
    for name, values in series.items():
        if not values:
            continue
        rows.append((f"<code>{_e(name)}</code>", _e(len(values)),
                     *(_e(_ms(percentile(values, p))) for _, p in PERCENTILES),
                     _e(_ms(max(values)))))
    return _table(("hop", "samples", *(n for n, _ in PERCENTILES), "max"), rows,
                  numeric=(1, 2, 3, 4, 5))


def _latency_section(data: ReportData) -> str:
    values = data.latencies_ms
    if not values:
        return ('<section id="latency"><h2>Latency</h2><p class="muted">No exchange has both a '
                "receive and an end time.</p></section>")
    title = f"Latency distribution ({len(values)} exchanges)"
    plots = (f'<div class="plots">{_histogram_svg(values, title)}'
             f'{_percentile_svg(values, "Latency by percentile")}</div>')
    table = _percentile_table({"all hops": values, **data.latency_by_hop})
    return (f'<section id="latency"><h2>Latency</h2><p class="muted">From the request arriving '
            "at the tap to the last byte sent to the client.</p>"
            f"{plots}<h3>Percentiles</h3>{table}</section>")


def _sse_section(data: ReportData) -> str:
    streams = data.streams
    if not streams:
        return ('<section id="sse"><h2>SSE first-event latency</h2><p class="muted">No answer '
                "was an event stream.</p></section>")
    firsts = [s.first_event_ms for s in streams]
    by_hop: dict[str, list[float]] = {}
    for s in streams:
        by_hop.setdefault(s.hop or "-", []).append(s.first_event_ms)
    table = _percentile_table({"all hops": firsts, **dict(sorted(by_hop.items()))})
    longest = max(max(firsts), max((s.total_ms or 0.0) for s in streams)) or 1.0
    rows = [
        (f'<span class="mono">{_e(s.exchange_id)}</span>', _e(s.hop),
         f"<code>{_e(s.method)}</code>", _e(s.name), _e(s.events),
         _e(_ms(s.first_event_ms)), _e(_ms(s.total_ms)),
         f'<div class="bar" style="width:{100.0 * s.first_event_ms / longest:.1f}%" '
         f'title="first event {_e(_ms(s.first_event_ms))}"></div>')
        for s in streams[:MAX_STREAM_ROWS]
    ]
    listing = _table(("exchange", "hop", "method", "name", "events", "first event", "total",
                      "first event (relative)"), rows, numeric=(4, 5, 6), css="streams")
    note = ""
    if len(streams) > MAX_STREAM_ROWS:
        note = f'<p class="note">Showing {MAX_STREAM_ROWS} of {len(streams)} streams.</p>'
    return (f'<section id="sse"><h2>SSE first-event latency</h2><p class="muted">From the '
            "request arriving at the tap to the first event of the origin's stream.</p>"
            f"{table}<h3>Streams</h3>{listing}{note}</section>")


def render_report(data: ReportData, *, max_rows: int = MAX_ROWS) -> str:
    """Render the report as one self-contained HTML page (pure; every text escaped)."""
    generated = f" \u00b7 generated {_e(data.generated)}" if data.generated else ""
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:\">"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        "<title>mcp-tap report</title>"
        f"<style>{_CSS}</style></head><body>"
        f"<header><h1>mcp-tap conformance report</h1><p>{len(data.bundles)} bundle(s) \u00b7 "
        f"{data.exchanges} exchanges \u00b7 mcp-tap {_e(data.version)}{generated}</p></header>"
        "<main>"
        + '<div class="top">'
        + _decision_section(data)
        + _summary_section(data)
        + "</div>"
        + _rules_section(data)
        + _hops_section(data)
        + _latency_section(data)
        + _sse_section(data)
        + _exchanges_section(data, max_rows)
        + "</main></body></html>\n"
    )
