"""The report's streaming pass: records in one at a time, exact counts and bounded samples out.

:class:`ReportTally` holds counts, :class:`~.bounds.Reservoir` samples and references to at
most :meth:`~.bounds.Bounds.kept` records (the exchange view's); never a bundle. Health
errors are counted by the gate's own :class:`~mcp_tap.gate.health.WindowTally`, so the
exchanges the page links as errors are exactly those the gate counted.

Hop-comparison records name exchanges recorded before them; the ones a changed pair names
are kept on a second pass (:meth:`ReportTally.wanted` / :meth:`ReportTally.fetch`), which
:func:`collect` makes when the records can be iterated again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mcp_tap.core.redaction import strip_url_secrets
from mcp_tap.gate.health import WindowTally
from mcp_tap.gate.hopchanges import HopChanges
from mcp_tap.gate.hopchanges import box_name as box_label
from mcp_tap.gate.policy import ErrorCounting
from mcp_tap.report import records as rec
from mcp_tap.report.bounds import DEFAULT_BOUNDS, Bounds, Reservoir, bounded_key
from mcp_tap.report.detail import build_detail
from mcp_tap.report.model import (
    BundleSummary,
    ExchangeRef,
    ExchangeRow,
    HealthView,
    HopBox,
    HopChange,
    HopSummary,
    ReportData,
    RuleGroup,
    StreamRow,
)

HOP_COLUMNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("status", ("hop.status-changed", "hop.error-collapse")),
    ("body", ("hop.body-changed",)),
    ("headers", ("hop.header-changed",)),
    ("SSE timing", ("hop.sse-buffered",)),
)
"""The kinds of change a box between hops can make, and the rules of each."""

_KNOWN_HOP_RULES = frozenset(r for _, rules in HOP_COLUMNS for r in rules)


@dataclass(slots=True)
class _Rule:
    strength: str
    boundary: str
    code: int | None
    message: str
    count: int = 0
    exchanges: int = 0
    first: ExchangeRef | None = None
    last: ExchangeRef | None = None
    by_hop: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class _Hop:
    exchanges: int = 0
    status_changed: int = 0
    body_changed: int = 0
    client_gone: int = 0
    tap_errors: int = 0
    hop_findings: int = 0


@dataclass(slots=True)
class _Box:
    pairs: int = 0
    changed: dict[str, int] = field(default_factory=dict)
    other: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class _Kept:
    record: Mapping[str, Any]
    ref: ExchangeRef
    pins: set[str] = field(default_factory=set)


class _ErrorProbe:
    """Which exchange the gate's health window counts as an error, one record at a time.

    Feeds the gate's own tally and reads its counters before and after each record; the
    latency counts it fills are emptied after every record, so memory stays constant.
    """

    def __init__(self, counting: ErrorCounting, hop: str | None) -> None:
        self.window = WindowTally(counting, hop)
        # The kinds a sample is an error for: a kind the policy does not count is not named.
        self.kinds = tuple(k for k, on in (
            ("tap", True), ("unanswered", True), ("http_5xx", counting.http_5xx),
            ("http_4xx", counting.http_4xx), ("jsonrpc", counting.jsonrpc_errors)) if on)

    def add(self, record: Mapping[str, Any]) -> tuple[str, ...] | None:
        """Count ``record``; return the kinds of error it was counted as, or None."""
        window = self.window
        errors = window.errors
        before = [getattr(window, k) for k in self.kinds]
        window.add(record)
        for values in (window.latencies, window.first_events, window.durations):
            values.clear()
        if window.errors == errors:
            return None
        return tuple(k for k, n in zip(self.kinds, before, strict=True) if getattr(window, k) > n)


class ReportTally:
    """Everything the page shows, accumulated from a stream of records (see module doc)."""

    def __init__(self, bounds: Bounds = DEFAULT_BOUNDS,
                 counting: ErrorCounting | None = None, health_hop: str | None = None) -> None:
        self.bounds = bounds
        self.counting = counting or ErrorCounting()
        self.health_hop = health_hop
        self.bundle = -1
        self.exchanges = self.clean = self.gaps = self.comparisons = self.streams = 0
        self.eras: dict[str, int] = {}
        self.rules: dict[str, _Rule] = {}
        self.hops: dict[str, _Hop] = {}
        self.boxes: dict[tuple[str, str], _Box] = {}
        self.changes: list[HopChange] = []
        self.box_changes = HopChanges()
        self.rows: list[ExchangeRow] = []
        self.stream_rows: list[StreamRow] = []
        self.latency = Reservoir(bounds.samples)
        self.latency_by_hop: dict[str, Reservoir] = {}
        self.first_event = Reservoir(bounds.samples, seed=1)
        self.first_event_by_hop: dict[str, Reservoir] = {}
        self.errors = _ErrorProbe(self.counting, health_hop)
        self.error_kinds: dict[str, int] = dict.fromkeys(self.errors.kinds, 0)
        self.error_refs: list[tuple[ExchangeRef, tuple[str, ...]]] = []
        self.kept: dict[str, _Kept] = {}
        self._wanted: set[str] = set()

    # --- streaming -------------------------------------------------------------------------

    def begin_bundle(self) -> int:
        """Start the next bundle's records; return its index (anchors are per bundle)."""
        self.bundle += 1
        return self.bundle

    def add(self, record: Mapping[str, Any]) -> None:
        """Count one record of the current bundle."""
        kind = record.get("kind")
        if kind == "exchange":
            self._exchange(record)
        elif kind == "hop-comparison":
            self._comparison(record)
        elif kind == "gap":
            lost = record.get("lost")
            self.gaps += lost if isinstance(lost, int) and not isinstance(lost, bool) else 1

    def add_all(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Count every record of one bundle (call :meth:`begin_bundle` first)."""
        for record in records:
            self.add(record)

    def wanted(self) -> frozenset[str]:
        """Anchors of the current bundle that a changed hop pair names and nothing kept."""
        prefix = f"x{self.bundle}-"
        return frozenset(a for a in self._wanted if a.startswith(prefix) and a not in self.kept)

    def fetch(self, record: Mapping[str, Any]) -> None:
        """Second pass over the current bundle: keep ``record`` if a hop pair named it."""
        if record.get("kind") != "exchange":
            return
        ref = self._ref(record)
        if ref.anchor in self._wanted:
            self._pin("hop", record, ref)

    def _ref(self, record: Mapping[str, Any]) -> ExchangeRef:
        exchange_id = rec.text(record.get("exchangeId"))
        digest = record.get("digest")
        return ExchangeRef(exchange_id, rec.anchor(self.bundle, exchange_id), rec.hop(record),
                           digest if isinstance(digest, str) else "")

    def _pin(self, pin: str, record: Mapping[str, Any], ref: ExchangeRef) -> None:
        kept = self.kept.get(ref.anchor)
        if kept is None:
            kept = self.kept[ref.anchor] = _Kept(record, ref)
        kept.pins.add(pin)

    def _unpin(self, pin: str, anchor: str) -> None:
        kept = self.kept.get(anchor)
        if kept is not None:
            kept.pins.discard(pin)
            if not kept.pins:
                del self.kept[anchor]

    def _exchange(self, record: Mapping[str, Any]) -> None:
        bounds = self.bounds
        self.exchanges += 1
        ref = self._ref(record)
        hop = ref.hop
        era = rec.text(record.get("era")) or "unknown"
        era_key = bounded_key(self.eras, era, bounds.groups)
        self.eras[era_key] = self.eras.get(era_key, 0) + 1
        found = rec.findings(record)
        self.clean += not found
        if self.exchanges <= bounds.lead:
            self._pin("lead", record, ref)
        seen: set[str] = set()
        for finding in found:
            self._finding(finding, record, ref, first_in_record=finding["rule"] not in seen)
            seen.add(str(finding["rule"]))
        hop_key = bounded_key(self.hops, hop, bounds.groups)
        self._hop_count(self.hops.setdefault(hop_key, _Hop()), record, found)
        latency = rec.latency_ms(record)
        if latency is not None:
            self.latency.add(latency)
            self._series(self.latency_by_hop, hop, seed=2).add(latency)
        first = rec.first_event_ms(record)
        if first is not None:
            self.streams += 1
            self.first_event.add(first)
            self._series(self.first_event_by_hop, hop, seed=3).add(first)
            if len(self.stream_rows) < bounds.streams:
                self.stream_rows.append(StreamRow(ref, rec.method(record),
                                                  rec.target_name(record),
                                                  len(rec.events(record)), first, latency))
        kinds = self.errors.add(record)
        if kinds is not None:
            for kind in kinds:
                self.error_kinds[kind] += 1
            if len(self.error_refs) < bounds.errors:
                self.error_refs.append((ref, kinds))
                self._pin("error", record, ref)
        if len(self.rows) < bounds.rows:
            rpc_id = record.get("rpcId")
            self.rows.append(ExchangeRow(
                ref=ref, era=era, method=rec.method(record), name=rec.target_name(record),
                rpc_id="" if rpc_id is None else rec.text(rpc_id), status=rec.status(record),
                latency_ms=latency, rules=tuple(str(f["rule"]) for f in found)))
        if ref.anchor in self._wanted:
            self._pin("hop", record, ref)

    def _series(self, series: dict[str, Reservoir], hop: str, seed: int) -> Reservoir:
        key = bounded_key(series, hop, self.bounds.groups)
        found = series.get(key)
        if found is None:
            found = series[key] = Reservoir(self.bounds.samples, seed=seed + len(series))
        return found

    def _finding(self, finding: Mapping[str, Any], record: Mapping[str, Any] | None,
                 ref: ExchangeRef | None, *, first_in_record: bool) -> None:
        rule_id = bounded_key(self.rules, str(finding["rule"]), self.bounds.rules)
        code = finding.get("code")
        strength = rec.strength(finding)
        rule = self.rules.get(rule_id)
        if rule is None:
            rule = self.rules[rule_id] = _Rule(
                strength=strength, boundary=rec.text(finding.get("boundary")),
                code=code if isinstance(code, int) and not isinstance(code, bool) else None,
                message=rec.text(finding.get("message")))
        # A rule whose findings are all warnings is a should; one violation makes it a must.
        if strength == "must":
            rule.strength = "must"
        rule.count += 1
        hop = ref.hop if ref is not None else ""
        if hop in rule.by_hop or len(rule.by_hop) < self.bounds.groups:
            rule.by_hop[hop] = rule.by_hop.get(hop, 0) + 1
        if not first_in_record or ref is None or record is None:
            return
        rule.exchanges += 1
        if rule.first is None:
            rule.first = ref
            self._pin(f"first:{rule_id}", record, ref)
        else:
            if rule.last is not None:
                self._unpin(f"last:{rule_id}", rule.last.anchor)
            self._pin(f"last:{rule_id}", record, ref)
        rule.last = ref

    @staticmethod
    def _hop_count(count: _Hop, record: Mapping[str, Any], found: list[dict[str, Any]]) -> None:
        count.exchanges += 1
        origin, egress = rec.obj(record.get("origin")), rec.obj(record.get("egress"))
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
        count.hop_findings += sum(1 for f in found if str(f["rule"]).startswith("hop."))

    def _comparison(self, record: Mapping[str, Any]) -> None:
        bounds = self.bounds
        self.comparisons += 1
        between = record.get("between")
        pair = between if isinstance(between, list) else [between]
        shown = " \u2192 ".join(rec.text(b) for b in pair) or "-"
        # An older tap named the box by its upstream URL, userinfo and all.
        box_name = strip_url_secrets(rec.text(record.get("box"))) or "-"
        key = (box_name, shown)
        if key not in self.boxes and len(self.boxes) >= bounds.groups:
            key = ("(other)", "-")
        box = self.boxes.setdefault(key, _Box())
        box.pairs += 1
        self.box_changes.add(box_label(record.get("box"), record.get("between")),
                             record.get("boxKind"), record.get("changes"))
        found = rec.findings(record)
        rules = tuple(str(f["rule"]) for f in found)
        for column, column_rules in HOP_COLUMNS:
            if any(r in column_rules for r in rules):
                box.changed[column] = box.changed.get(column, 0) + 1
        for rule_id in rules:
            if rule_id not in _KNOWN_HOP_RULES:
                other = bounded_key(box.other, rule_id, bounds.groups)
                box.other[other] = box.other.get(other, 0) + 1
        ids = record.get("exchangeIds")
        ids = [rec.text(i) for i in ids] if isinstance(ids, list) else []
        refs = tuple(ExchangeRef(i, rec.anchor(self.bundle, i)) for i in ids[:2])
        for finding in found:
            self._finding(finding, None, None, first_in_record=False)
        if found and len(self.changes) < bounds.hop_changes:
            self.changes.append(HopChange(box_name, shown, rules,
                                          tuple(rec.text(f.get("message")) for f in found),
                                          refs))
            self._wanted.update(r.anchor for r in refs)
            for ref in refs:
                if ref.anchor in self.kept:
                    self.kept[ref.anchor].pins.add("hop")

    # --- finishing -------------------------------------------------------------------------

    def finish(
        self,
        bundles: Sequence[BundleSummary],
        *,
        decision: Mapping[str, Any] | None = None,
        decision_note: str = "",
        generated: str = "",
        policy_path: str = "",
    ) -> ReportData:
        """The finished page data."""
        bounds = self.bounds
        rules = tuple(
            RuleGroup(rule_id, r.strength, rec.citation(rule_id), r.boundary, r.code, r.count,
                      r.exchanges, r.first, r.last, r.message, dict(sorted(r.by_hop.items())))
            for rule_id, r in sorted(self.rules.items(),
                                     key=lambda item: (item[1].strength != "must",
                                                       -item[1].count, item[0]))
        )
        hops = tuple(HopSummary(h, c.exchanges, c.status_changed, c.body_changed,
                                c.client_gone, c.tap_errors, c.hop_findings)
                     for h, c in sorted(self.hops.items()))
        boxes = tuple(HopBox(box, between, b.pairs, dict(b.changed), dict(b.other))
                      for (box, between), b in self.boxes.items())
        # Exchange view order: the order the records were streamed in (bundle, then record).
        details = tuple(build_detail(k.record, k.ref, bounds) for k in self.kept.values())
        window = self.errors.window
        health = HealthView(
            hop=self.health_hop, samples=window.samples, errors=window.errors,
            kinds=dict(self.error_kinds), error_refs=tuple(self.error_refs),
            start=window.start, end=window.end,
            counting={"jsonrpc": self.counting.jsonrpc_errors,
                      "http_5xx": self.counting.http_5xx, "http_4xx": self.counting.http_4xx},
            rejected=window.rejected)
        return ReportData(
            generated=generated,
            bundles=tuple(bundles),
            exchanges=self.exchanges,
            eras=dict(sorted(self.eras.items())),
            rules=rules,
            hop_summaries=hops,
            hop_boxes=boxes,
            hop_changes=tuple(self.changes),
            box_changes=self.box_changes.to_json(),
            hop_comparisons=self.comparisons,
            rows=tuple(self.rows),
            latency=self.latency.snapshot(),
            latency_by_hop={h: r.snapshot() for h, r in sorted(self.latency_by_hop.items())},
            streams=tuple(self.stream_rows),
            stream_count=self.streams,
            first_event=self.first_event.snapshot(),
            first_event_by_hop={h: r.snapshot()
                                for h, r in sorted(self.first_event_by_hop.items())},
            details=details,
            health=health,
            decision=decision,
            decision_note=decision_note,
            policy_path=policy_path,
            gaps=self.gaps,
            clean_exchanges=self.clean,
            bounds=bounds,
        )


def collect(
    bundles: Sequence[tuple[BundleSummary, Iterable[Mapping[str, Any]]]],
    *,
    decision: Mapping[str, Any] | None = None,
    decision_note: str = "",
    generated: str = "",
    bounds: Bounds = DEFAULT_BOUNDS,
    counting: ErrorCounting | None = None,
    health_hop: str | None = None,
    policy_path: str = "",
) -> ReportData:
    """Compute the report from each bundle's summary and records (pure, streaming).

    ``records`` may be an iterator (read once) or a collection; only a collection gets the
    second pass that keeps the exchanges a changed hop pair names.
    """
    tally = ReportTally(bounds, counting, health_hop)
    for _summary, records in bundles:
        tally.begin_bundle()
        tally.add_all(records)
        again = iter(records)
        if tally.wanted() and again is not records:
            for record in again:
                tally.fetch(record)
    return tally.finish([summary for summary, _ in bundles], decision=decision,
                        decision_note=decision_note, generated=generated,
                        policy_path=policy_path)
