"""Prometheus text-format metrics: counters and histograms, no dependency.

Labels are small and bounded (hop names, rule ids, eras); values never carry request data.
"""

from __future__ import annotations

import bisect
import threading
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

LabelKey = tuple[tuple[str, str], ...]

LATENCY_BUCKETS_S = (
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


def _labels(key: LabelKey) -> str:
    if not key:
        return ""
    inner = ",".join(
        f'{k}="{v.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
        for k, v in key
    )
    return "{" + inner + "}"


class Counter:
    """A monotonically increasing counter with labels."""

    def __init__(self, name: str, help_text: str) -> None:
        self.name, self.help = name, help_text
        self._values: dict[LabelKey, float] = defaultdict(float)
        self._lock = threading.Lock()

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        """Add ``amount`` to the series with ``labels``."""
        key = tuple(sorted(labels.items()))
        with self._lock:
            self._values[key] += amount

    def value(self, **labels: str) -> float:
        """The current value of one series (0 when never incremented)."""
        return self._values.get(tuple(sorted(labels.items())), 0.0)

    def state(self) -> dict[LabelKey, float]:
        """A copy of every series (to ship to another process)."""
        with self._lock:
            return dict(self._values)

    def load(self, state: dict[LabelKey, float]) -> None:
        """Replace every series with ``state`` (from :meth:`state` of a counter elsewhere)."""
        with self._lock:
            self._values = defaultdict(float, state)

    def render(self) -> list[str]:
        """Prometheus exposition lines."""
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} counter"]
        lines += [f"{self.name}{_labels(k)} {v:g}" for k, v in sorted(self._values.items())]
        return lines


class Histogram:
    """A cumulative histogram with fixed buckets, per label set."""

    def __init__(self, name: str, help_text: str, buckets: Sequence[float] = LATENCY_BUCKETS_S):
        self.name, self.help, self.buckets = name, help_text, tuple(buckets)
        self._counts: dict[LabelKey, list[int]] = {}
        self._sums: dict[LabelKey, float] = defaultdict(float)
        self._lock = threading.Lock()

    def observe(self, value: float, **labels: str) -> None:
        """Record one observation."""
        key = tuple(sorted(labels.items()))
        with self._lock:
            counts = self._counts.setdefault(key, [0] * (len(self.buckets) + 1))
            counts[bisect.bisect_left(self.buckets, value)] += 1
            self._sums[key] += value

    def count(self, **labels: str) -> int:
        """How many observations one series has."""
        return sum(self._counts.get(tuple(sorted(labels.items())), []))

    def state(self) -> tuple[dict[LabelKey, list[int]], dict[LabelKey, float]]:
        """A copy of every series' buckets and sums (to ship to another process)."""
        with self._lock:
            return {k: list(v) for k, v in self._counts.items()}, dict(self._sums)

    def load(self, state: tuple[dict[LabelKey, list[int]], dict[LabelKey, float]]) -> None:
        """Replace every series with ``state`` (from :meth:`state` of a histogram elsewhere)."""
        counts, sums = state
        with self._lock:
            self._counts, self._sums = dict(counts), defaultdict(float, sums)

    def render(self) -> list[str]:
        """Prometheus exposition lines."""
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        for key, counts in sorted(self._counts.items()):
            running = 0
            for bound, c in zip((*self.buckets, float("inf")), counts, strict=True):
                running += c
                le = "+Inf" if bound == float("inf") else f"{bound:g}"
                lines.append(f"{self.name}_bucket{_labels((*key, ('le', le)))} {running}")
            lines.append(f"{self.name}_sum{_labels(key)} {self._sums[key]:g}")
            lines.append(f"{self.name}_count{_labels(key)} {running}")
        return lines


class Metrics:
    """Every metric the proxy exposes at ``/metrics``."""

    def __init__(self) -> None:
        self.exchanges = Counter("mcptap_exchanges_total", "Exchanges forwarded, by hop and era.")
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
            "mcptap_added_latency_seconds", "Time the tap itself spent before forwarding, by hop."
        )
        self._gauges: list[tuple[str, str, Callable[[], dict[str, float]]]] = []

    def _series(self) -> tuple[tuple[Counter, ...], tuple[Histogram, ...]]:
        counters = (self.exchanges, self.findings, self.tap_errors, self.check_errors)
        return counters, (self.latency, self.first_byte, self.sse_first_event, self.added)

    def snapshot(self) -> tuple[list[Any], list[Any]]:
        """Every counter's and histogram's state, picklable (gauges are read where they live)."""
        counters, histograms = self._series()
        return [c.state() for c in counters], [h.state() for h in histograms]

    def restore(self, snapshot: tuple[list[Any], list[Any]]) -> None:
        """Take over the counters and histograms of a :meth:`snapshot` made elsewhere."""
        counters, histograms = self._series()
        for counter, state in zip(counters, snapshot[0], strict=True):
            counter.load(state)
        for histogram, hstate in zip(histograms, snapshot[1], strict=True):
            histogram.load(hstate)

    def gauge(self, name: str, help_text: str, read: Callable[[], dict[str, float]]) -> None:
        """Register a value read at scrape time (e.g. the evidence writer's counters)."""
        self._gauges.append((name, help_text, read))

    def render(self) -> str:
        """The whole exposition text."""
        lines: list[str] = []
        counters, histograms = self._series()
        for metric in counters:
            lines += metric.render()
        for hist in histograms:
            lines += hist.render()
        for name, help_text, read in self._gauges:
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} counter"]
            for label, value in sorted(read().items()):
                key: LabelKey = (("kind", label),) if label else ()
                lines.append(f"{name}{_labels(key)} {value:g}")
        return "\n".join(lines) + "\n"
