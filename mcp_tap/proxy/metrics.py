"""The proxy's metrics, exposed at ``/metrics`` through ``prometheus_client``.

The tap keeps its own series (exact integer counters, fixed-bucket histograms) because, with
``[recording] mode = "process"``, the recording process counts exchanges, findings and
latencies and ships a picklable :meth:`Metrics.snapshot` to the proxy every so often; the
proxy :meth:`Metrics.restore` s it. A custom collector (:class:`_TapCollector`) turns those
series into metric families at scrape time, and ``prometheus_client`` renders them (label
escaping, float formatting that keeps every digit of an integer up to 2**53) next to its
process and platform collectors. The forwarder's own counts (in-flight exchanges, answers by
status class) are plain integers it keeps per hop, read at scrape time through
:meth:`Metrics.forwarder`: nothing here is touched per request, and they are never part of a
snapshot.

Labels are small and bounded (hop names, rule ids, eras, status classes); values never carry
request data.
"""

from __future__ import annotations

import bisect
import platform
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

from prometheus_client import CollectorRegistry, PlatformCollector, ProcessCollector
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector

from mcp_tap.version import __version__

LabelKey = tuple[tuple[str, str], ...]
Number = int | float
class ExchangeTally(NamedTuple):
    """One recorded exchange, as the recorder counts it (see Metrics.add_exchanges); times in
    seconds from its arrival (None: not seen)."""

    hop: str
    era: str
    rules: Sequence[str]  # the findings' rule ids
    phase: str | None  # the tap error's phase
    upstream: float | None  # the upstream's answer ended
    first_byte: float | None
    first_event: float | None  # the first SSE event
    added: float | None  # forwarded upstream (the tap's added latency)

# What ``/metrics`` answers with: the classic text format every Prometheus 2.x parses (the
# names are all legacy-valid, so generate_latest's output is that format).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

LATENCY_BUCKETS_S = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)

# The tap's own added latency targets well under a millisecond: its buckets start at 50 us.
ADDED_LATENCY_BUCKETS_S = (0.00005, *(b for b in LATENCY_BUCKETS_S if b <= 1.0))


def _key(labels: dict[str, str]) -> LabelKey:
    return tuple(sorted(labels.items()))


class _Labelled:
    """Numbers per label set, exact (a :class:`Counter`'s series)."""

    def __init__(self, name: str, help_text: str) -> None:
        self.name, self.help = name, help_text
        self._values: dict[LabelKey, Number] = defaultdict(int)
        self._lock = threading.Lock()

    def _add(self, amount: Number, labels: dict[str, str]) -> None:
        key = _key(labels)
        with self._lock:
            self._values[key] += amount

    def _add_keys(self, amounts: dict[LabelKey, Number]) -> None:
        with self._lock:
            values = self._values
            for key, amount in amounts.items():
                values[key] += amount

    def value(self, **labels: str) -> Number:
        """The current value of one series (0 when never touched)."""
        return self._values.get(_key(labels), 0)

    def state(self) -> dict[LabelKey, Number]:
        """A copy of every series (to ship to another process)."""
        with self._lock:
            return dict(self._values)

    def _family(
        self, kind: type[CounterMetricFamily] | type[GaugeMetricFamily], name: str
    ) -> Metric:
        values = self.state()
        names = sorted({k for key in values for k, _ in key})
        family = kind(name, self.help, labels=names)
        for key, value in sorted(values.items()):
            labels = dict(key)
            family.add_metric([labels.get(n, "") for n in names], value)
        return family


class Counter(_Labelled):
    """A monotonically increasing counter with labels (integers stay exact integers)."""

    def __init__(self, name: str, help_text: str) -> None:
        """``name`` ends in ``_total``; ``help_text`` is its ``# HELP`` line."""
        super().__init__(name, help_text)

    def inc(self, amount: Number = 1, **labels: str) -> None:
        """Add ``amount`` (at least 0) to the series with ``labels``."""
        if amount < 0:
            raise ValueError("a counter only goes up")
        self._add(amount, labels)

    def load(self, state: dict[LabelKey, Number]) -> None:
        """Replace every series with ``state`` (from :meth:`state` of a counter elsewhere)."""
        with self._lock:
            self._values = defaultdict(int, state)

    def family(self) -> Metric:
        """The series as one ``prometheus_client`` counter family."""
        # prometheus_client appends _total itself and wants the name without it.
        return self._family(CounterMetricFamily, self.name.removesuffix("_total"))


class Histogram:
    """A cumulative histogram with fixed buckets, per label set."""

    def __init__(self, name: str, help_text: str, buckets: Sequence[float] = LATENCY_BUCKETS_S):
        """``name`` is in base units (seconds); ``buckets`` are the upper bounds."""
        self.name, self.help, self.buckets = name, help_text, tuple(buckets)
        self._counts: dict[LabelKey, list[int]] = {}
        self._sums: dict[LabelKey, float] = defaultdict(float)
        self._lock = threading.Lock()

    def observe(self, value: float, **labels: str) -> None:
        """Record one observation."""
        key = _key(labels)
        with self._lock:
            counts = self._counts.setdefault(key, [0] * (len(self.buckets) + 1))
            counts[bisect.bisect_left(self.buckets, value)] += 1
            self._sums[key] += value

    def _observe_key(self, key: LabelKey, values: Sequence[float]) -> None:
        """Record ``values`` in the series ``key`` (one lock for all of them)."""
        buckets = self.buckets
        with self._lock:
            counts = self._counts.setdefault(key, [0] * (len(buckets) + 1))
            total = self._sums[key]
            for value in values:
                counts[bisect.bisect_left(buckets, value)] += 1
                total += value  # in order, as observe() adds: the same float
            self._sums[key] = total

    def count(self, **labels: str) -> int:
        """How many observations one series has."""
        return sum(self._counts.get(_key(labels), []))

    def state(self) -> tuple[dict[LabelKey, list[int]], dict[LabelKey, float]]:
        """A copy of every series' buckets and sums (to ship to another process)."""
        with self._lock:
            return {k: list(v) for k, v in self._counts.items()}, dict(self._sums)

    def load(self, state: tuple[dict[LabelKey, list[int]], dict[LabelKey, float]]) -> None:
        """Replace every series with ``state`` (from :meth:`state` of a histogram elsewhere)."""
        counts, sums = state
        with self._lock:
            self._counts, self._sums = dict(counts), defaultdict(float, sums)

    def family(self) -> Metric:
        """The series as one ``prometheus_client`` histogram family."""
        counts, sums = self.state()
        names = sorted({k for key in counts for k, _ in key})
        family = HistogramMetricFamily(self.name, self.help, labels=names)
        bounds = [repr(float(b)) for b in self.buckets] + ["+Inf"]  # as Python and Go print
        for key, series in sorted(counts.items()):
            labels = dict(key)
            running, buckets = 0, []
            for bound, c in zip(bounds, series, strict=True):
                running += c
                buckets.append((bound, float(running)))
            family.add_metric([labels.get(n, "") for n in names], buckets, sums[key])
        return family


# The evidence writer's counters (EvidenceWriter.counters()) -> (family, reason label).
_EVIDENCE_RECORDS_LOST = {"lost": "queue", "lost_disk": "disk", "lost_invalid": "invalid",
                          "lost_deleted": "deleted"}
_EVIDENCE_FAMILIES = {
    "written": ("mcptap_evidence_records_written", "Evidence records on disk (gap records too)."),
    "bytes_written": ("mcptap_evidence_written_bytes", "Bytes written to evidence segments."),
    "segments": ("mcptap_evidence_segments_opened", "Evidence segment files opened."),
    "disk_errors": ("mcptap_evidence_disk_errors", "Failed disk operations of the writer."),
}

# Shipping to the object store (mcp_tap.evidence.shipping), when [evidence] ship is set.
_SHIP_COUNTERS = {
    "ship_segments": ("mcptap_evidence_shipped_segments",
                      "Sealed segments shipped to the object store (each with its manifest)."),
    "ship_bytes": ("mcptap_evidence_shipped_bytes", "Bytes of segments and manifests shipped."),
    "ship_failures": ("mcptap_evidence_ship_failures",
                      "Uploads the object store did not take (each retried with backoff)."),
    "ship_dropped_segments": ("mcptap_evidence_ship_dropped_segments",
                              "Sealed segments given up because the spool was full (stated "
                              "as a gap record in the next shipped segment)."),
    "ship_dropped_bytes": ("mcptap_evidence_ship_dropped_bytes",
                           "Bytes of the sealed segments given up."),
    "ship_dropped_records": ("mcptap_evidence_ship_dropped_records",
                             "Records of the sealed segments given up."),
}
_SHIP_GAUGES = {
    "ship_spool_bytes": ("mcptap_evidence_spool_bytes",
                         "Bytes of sealed segments waiting for the object store."),
    "ship_spool_segments": ("mcptap_evidence_spool_segments",
                            "Sealed segments waiting for the object store."),
    "ship_failing": ("mcptap_evidence_ship_failing", "1 while the last upload failed."),
}

EvidenceReader = Callable[[], dict[str, int]]
ForwarderReader = Callable[[], dict[str, tuple[int, Sequence[int]]]]
HeldReader = Callable[[], tuple[int, float]]
"""The forwarder's hold-back totals (pauses, seconds), read at scrape time."""
"""Maps each hop to (exchanges in flight, answers by status class: index 0 for none, 1 for
1xx ... 5 for 5xx)."""
STATUS_CLASSES = ("none", "1xx", "2xx", "3xx", "4xx", "5xx")


class Metrics:
    """Every metric the proxy exposes at ``/metrics``."""

    def __init__(self) -> None:
        """Create every series and a private registry (no global state is touched)."""
        self.exchanges = Counter("mcptap_exchanges_total", "Exchanges recorded, by hop and era.")
        self.findings = Counter("mcptap_findings_total", "Findings, by hop and rule id.")
        self.tap_errors = Counter(
            "mcptap_tap_errors_total", "Answers the tap made itself (502/504), by hop and reason."
        )
        self.check_errors = Counter(
            "mcptap_check_errors_total", "Checks that raised (forwarding went on), by hop."
        )
        self.latency = Histogram(
            "mcptap_upstream_latency_seconds", "Ingress to end of the origin answer, by hop."
        )
        self.first_byte = Histogram(
            "mcptap_upstream_first_byte_seconds", "Ingress to the origin's first byte, by hop."
        )
        self.sse_first_event = Histogram(
            "mcptap_sse_first_event_seconds", "Ingress to the first SSE event, by hop."
        )
        self.added = Histogram(
            "mcptap_added_latency_seconds",
            "Time the tap itself spent before forwarding, by hop.",
            ADDED_LATENCY_BUCKETS_S,
        )
        self._gauges: list[tuple[str, str, Callable[[], dict[str, float]]]] = []
        self._evidence: list[EvidenceReader] = []
        self._forwarders: list[ForwarderReader] = []
        self._held: list[HeldReader] = []
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_TapCollector(self))
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry, platform=platform)

    # -- what the recorder calls ---------------------------------------------------------

    def add_exchanges(self, tallies: Sequence[ExchangeTally]) -> None:
        """Count recorded exchanges (the recording process: one call per batch).

        Per exchange the same as ``exchanges.inc(hop, era)``, ``findings.inc(hop, rule)`` per
        finding, ``tap_errors.inc(hop, reason=phase)`` and an observation per time seen; per
        batch one lock per series instead of one per update.
        """
        # Counted by plain (hop, label) pairs first, turned into label keys once per distinct
        # pair: a nested label-key tuple built and hashed per exchange cost more than the
        # rest of the tally.
        exchanges: dict[tuple[str, str], int] = {}
        findings: dict[tuple[str, str], int] = {}
        tap_errors: dict[tuple[str, str], int] = {}
        latency: dict[str, list[float]] = {}
        first_byte: dict[str, list[float]] = {}
        first_event: dict[str, list[float]] = {}
        added: dict[str, list[float]] = {}
        for tally in tallies:
            hop, era, rules, phase = tally.hop, tally.era, tally.rules, tally.phase
            upstream, byte, event, tap = (
                tally.upstream, tally.first_byte, tally.first_event, tally.added)
            pair = (hop, era)
            exchanges[pair] = exchanges.get(pair, 0) + 1
            for rule in rules:
                pair = (hop, rule)
                findings[pair] = findings.get(pair, 0) + 1
            if phase is not None:
                pair = (hop, phase)
                tap_errors[pair] = tap_errors.get(pair, 0) + 1
            # setdefault(hop, []).append(...), without a new list per call
            if upstream is not None:
                seen = latency.get(hop)
                if seen is None:
                    latency[hop] = [upstream]
                else:
                    seen.append(upstream)
            if byte is not None:
                seen = first_byte.get(hop)
                if seen is None:
                    first_byte[hop] = [byte]
                else:
                    seen.append(byte)
            if event is not None:
                seen = first_event.get(hop)
                if seen is None:
                    first_event[hop] = [event]
                else:
                    seen.append(event)
            if tap is not None:
                seen = added.get(hop)
                if seen is None:
                    added[hop] = [tap]
                else:
                    seen.append(tap)
        self.exchanges._add_keys(
            {(("era", era), ("hop", hop)): n for (hop, era), n in exchanges.items()})
        if findings:
            self.findings._add_keys(
                {(("hop", hop), ("rule", rule)): n for (hop, rule), n in findings.items()})
        if tap_errors:
            self.tap_errors._add_keys(
                {(("hop", hop), ("reason", phase)): n for (hop, phase), n in tap_errors.items()})
        for histogram, by_hop in ((self.latency, latency), (self.first_byte, first_byte),
                                  (self.sse_first_event, first_event), (self.added, added)):
            for hop, values in by_hop.items():
                histogram._observe_key((("hop", hop),), values)

    # -- cross-process hand-over ---------------------------------------------------------

    def _series(self) -> tuple[tuple[Counter, ...], tuple[Histogram, ...]]:
        counters = (self.exchanges, self.findings, self.tap_errors, self.check_errors)
        return counters, (self.latency, self.first_byte, self.sse_first_event, self.added)

    def snapshot(self) -> tuple[list[Any], list[Any]]:
        """Every recorded counter's and histogram's state, picklable (the forwarder's series
        and gauges are read where they live)."""
        counters, histograms = self._series()
        return [c.state() for c in counters], [h.state() for h in histograms]

    def restore(self, snapshot: tuple[list[Any], list[Any]]) -> None:
        """Take over the counters and histograms of a :meth:`snapshot` made elsewhere."""
        counters, histograms = self._series()
        for counter, state in zip(counters, snapshot[0], strict=True):
            counter.load(state)
        for histogram, hstate in zip(histograms, snapshot[1], strict=True):
            histogram.load(hstate)

    # -- values read at scrape time ------------------------------------------------------

    def gauge(self, name: str, help_text: str, read: Callable[[], dict[str, float]]) -> None:
        """Register a gauge read at scrape time: ``read`` maps a ``kind`` label to a value
        ("" for no label)."""
        self._gauges.append((name, help_text, read))

    def forwarder(self, read: ForwarderReader) -> None:
        """Expose the forwarder's counts, read at scrape time (see :data:`ForwarderReader`):
        ``mcptap_in_flight_exchanges`` and ``mcptap_answers_total`` (a status class shows
        once it has a count)."""
        self._forwarders.append(read)

    def held_back(self, read: HeldReader) -> None:
        """Expose how often and how long the forwarder held its clients back because the
        recording process was behind (``mcptap_clients_held_total``,
        ``mcptap_clients_held_seconds_total``), read at scrape time."""
        self._held.append(read)

    def evidence(self, read: EvidenceReader) -> None:
        """Expose the evidence writer's counters (``EvidenceWriter.counters()``), each in its
        own family: records written, records lost by reason, bytes, segments, disk errors."""
        self._evidence.append(read)

    def render(self) -> str:
        """The whole exposition text (Prometheus text format 0.0.4)."""
        return generate_latest(self.registry).decode()

    def families(self) -> Iterator[Metric]:
        """Every tap metric family, as the collector hands them to ``prometheus_client``."""
        counters, histograms = self._series()
        for counter in counters:
            yield counter.family()
        yield from self._forwarder_families()
        for hist in histograms:
            yield hist.family()
        build = GaugeMetricFamily(
            "mcptap_build_info",
            "Always 1: the version of mcp-tap and the Python running it.",
            labels=["version", "python"],
        )
        build.add_metric([__version__, platform.python_version()], 1)
        yield build
        yield from self._evidence_families()
        for name, help_text, read in self._gauges:
            values = read()
            family = GaugeMetricFamily(name, help_text, labels=["kind"] if any(values) else [])
            for label, value in sorted(values.items()):
                family.add_metric([label] if label else [], value)
            yield family

    def _forwarder_families(self) -> Iterator[Metric]:
        answers = CounterMetricFamily(
            "mcptap_answers",
            "Exchanges over, by hop and the status class the client got (none: no answer).",
            labels=["hop", "status_class"],
        )
        in_flight = GaugeMetricFamily(
            "mcptap_in_flight_exchanges", "Exchanges received and not yet over, by hop.",
            labels=["hop"],
        )
        hops: dict[str, tuple[int, list[int]]] = {}
        for read in self._forwarders:
            for hop, (now, by_class) in read().items():
                flying, total = hops.get(hop, (0, [0] * len(STATUS_CLASSES)))
                hops[hop] = (flying + now, [a + b for a, b in zip(total, by_class, strict=True)])
        for hop, (flying, by_class) in sorted(hops.items()):
            in_flight.add_metric([hop], flying)
            for label, count in zip(STATUS_CLASSES, by_class, strict=True):
                if count:
                    answers.add_metric([hop, label], count)
        yield answers
        yield in_flight
        if self._held:
            totals = [read() for read in self._held]
            yield CounterMetricFamily(
                "mcptap_clients_held",
                "Times the forwarder stopped reading its clients because the recording "
                "process was behind (back-pressure, [recording] max_wait_ms).",
                value=sum(t[0] for t in totals),
            )
            yield CounterMetricFamily(
                "mcptap_clients_held_seconds",
                "Seconds the forwarder held its clients back for the recording process.",
                value=sum(t[1] for t in totals),
            )

    def _evidence_families(self) -> Iterator[Metric]:
        if not self._evidence:
            return
        totals: dict[str, int] = defaultdict(int)
        for read in self._evidence:
            for key, value in read().items():
                totals[key] += value
        lost = CounterMetricFamily(
            "mcptap_evidence_records_lost",
            "Records that never reached the evidence, by reason (each one a counted gap).",
            labels=["reason"],
        )
        for key, reason in _EVIDENCE_RECORDS_LOST.items():
            lost.add_metric([reason], totals.get(key, 0))
        yield lost
        for key, (name, help_text) in _EVIDENCE_FAMILIES.items():
            yield CounterMetricFamily(name, help_text, value=totals.get(key, 0))
        if totals.get("ship_enabled"):
            for key, (name, help_text) in _SHIP_COUNTERS.items():
                yield CounterMetricFamily(name, help_text, value=totals.get(key, 0))
            for key, (name, help_text) in _SHIP_GAUGES.items():
                yield GaugeMetricFamily(name, help_text, value=totals.get(key, 0))


class _TapCollector(Collector):
    """Hands the tap's own series to ``prometheus_client`` at every scrape."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        """Every tap metric family, built from the current series."""
        return self._metrics.families()
