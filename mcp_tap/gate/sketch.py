"""A latency measure that segment manifests can carry and the gate can merge: exact counts
while they are few, a DDSketch beyond that.

The gate reports nearest-rank percentiles of values rounded to 0.001 ms
(:class:`~mcp_tap.gate.counts.ValueCounts`). A sealed segment keeps those exact counts when
it saw at most :data:`EXACT_LIMIT` distinct values; otherwise it keeps a DDSketch of them:
each value's bucket under ``ddsketch``'s :class:`~ddsketch.mapping.LogarithmicMapping` with
relative accuracy :data:`RELATIVE_ACCURACY`, and the count per bucket. A bucket's
representative value is within 1% of every value in it, so the sketched nearest-rank
percentile is within 1% of the exact one (the rank is found over the bucket counts, not
estimated). Merging adds counts: its cost grows with the buckets (a few hundred for
latencies spanning several decades), not with the samples. Values of 0 or below (clock
steps) have no logarithm: they are always counted exactly, below every bucket.

Why ``ddsketch`` (Datadog's reference implementation): its mapping is the published,
tested DDSketch index with a proven relative-error bound and is mergeable across processes
by adding counts; t-digest's error is rank-relative and its merges are order-dependent, so
two gates reading the same segments could disagree.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from ddsketch.mapping import LogarithmicMapping

from mcp_tap.gate.counts import DIGITS, ValueCounts

RELATIVE_ACCURACY: Final = 0.01
"""The stated relative error of a sketched percentile."""

EXACT_LIMIT: Final = 256
"""Distinct values a segment keeps exactly before it keeps a sketch instead."""

_MAPPING: Final = LogarithmicMapping(RELATIVE_ACCURACY)


class Measure:
    """One measurement's values: exact counts, or exact non-positive values plus sketch
    buckets. Mergeable; :meth:`percentiles` as :meth:`ValueCounts.percentiles` gives them
    (exactly when :attr:`exact`, else within :data:`RELATIVE_ACCURACY`)."""

    __slots__ = ("buckets", "exact", "total", "values")

    def __init__(self) -> None:
        """Start empty and exact."""
        self.values: Counter[float] = Counter()  # rounded value -> count (all, when exact)
        self.buckets: Counter[int] = Counter()  # sketch key -> count (positive values)
        self.exact = True
        self.total = 0

    @classmethod
    def of_counts(cls, counts: ValueCounts, limit: int | None = EXACT_LIMIT) -> Measure:
        """The measure of exact counts, sketched past ``limit`` distinct values (None:
        never; the gate's own counts of records it read)."""
        measure = cls()
        measure.values.update(counts.counts)
        measure.total = counts.total
        if limit is not None and len(measure.values) > limit:
            measure._sketch()
        return measure

    def _sketch(self) -> None:
        """Move every positive exact value into its bucket."""
        if not self.exact:
            return
        self.exact = False
        key = _MAPPING.key
        for value, count in list(self.values.items()):
            if value > 0:
                self.buckets[key(value)] += count
                del self.values[value]

    def merge(self, other: Measure) -> None:
        """Fold in another measure (sketched if either is)."""
        if not other.exact:
            self._sketch()
        if self.exact:
            self.values.update(other.values)
        else:
            key = _MAPPING.key
            for value, count in other.values.items():
                if value > 0:
                    self.buckets[key(value)] += count
                else:
                    self.values[value] += count
            self.buckets.update(other.buckets)
        self.total += other.total

    def __len__(self) -> int:
        """The number of values counted."""
        return self.total

    def percentiles(self, ps: Sequence[float]) -> list[float]:
        """The nearest-rank ``p``-th percentile (0 < p <= 100) for each of ``ps``, rounded
        to :data:`~mcp_tap.gate.counts.DIGITS` decimals; ValueError when empty."""
        if not self.total:
            raise ValueError("percentile of no values")
        ranks = [max(1, math.ceil(p / 100.0 * self.total)) for p in ps]
        ordered: list[tuple[float, int]] = sorted(self.values.items())
        value = _MAPPING.value
        ordered += [(round(value(k), DIGITS), n) for k, n in sorted(self.buckets.items())]
        found: dict[int, float] = {}
        seen = 0
        wanted = sorted(set(ranks))
        position = 0
        for point, count in ordered:
            seen += count
            while position < len(wanted) and wanted[position] <= seen:
                found[wanted[position]] = point
                position += 1
        return [found[rank] for rank in ranks]

    def to_json(self) -> dict[str, Any]:
        """The measure as a manifest holds it."""
        data: dict[str, Any] = {"n": self.total,
                                "values": [[v, n] for v, n in sorted(self.values.items())]}
        if not self.exact:
            data["sketch"] = {"relativeAccuracy": RELATIVE_ACCURACY,
                              "buckets": [[k, n] for k, n in sorted(self.buckets.items())]}
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Measure:
        """Read a measure a manifest holds; ValueError for one of another shape."""
        measure = cls()
        measure.total = _count(data.get("n"))
        measure.values.update({_number(v): _count(n) for v, n in _pairs(data.get("values"))})
        sketch = data.get("sketch")
        if sketch is not None:
            if (not isinstance(sketch, dict)
                    or sketch.get("relativeAccuracy") != RELATIVE_ACCURACY):
                raise ValueError("a sketch of another relative accuracy")
            measure.exact = False
            for key, count in _pairs(sketch.get("buckets")):
                if type(key) is not int:
                    raise ValueError("a sketch key that is not an integer")
                measure.buckets[key] += _count(count)
        if sum(measure.values.values()) + sum(measure.buckets.values()) != measure.total:
            raise ValueError("a measure whose counts do not add up")
        return measure


def _pairs(value: object) -> Iterable[tuple[Any, Any]]:
    if not isinstance(value, list) or not all(
            isinstance(p, list) and len(p) == 2 for p in value):
        raise ValueError("expected a list of pairs")
    return [(p[0], p[1]) for p in value]


def _count(value: object) -> int:
    if type(value) is not int or value < 0:
        raise ValueError("a count that is not an integer >= 0")
    return value


def _number(value: object) -> float:
    if type(value) not in (int, float) or not math.isfinite(value):  # type: ignore[arg-type]
        raise ValueError("a value that is not a finite number")
    return float(value)  # type: ignore[arg-type]


def certainly_above(sketched: float, threshold: float, slack: float = 0.0) -> bool | None:
    """Whether the exact value behind ``sketched`` (within :data:`RELATIVE_ACCURACY`) is above
    ``threshold + slack``: True, False, or None when the sketch cannot tell."""
    low, high = bounds(sketched)
    if low > threshold + slack:
        return True
    if high <= threshold + slack:
        return False
    return None


def bounds(sketched: float) -> tuple[float, float]:
    """The interval the exact value behind a sketched one lies in (rounding included)."""
    grain = 10.0 ** -DIGITS  # the exact side is rounded to 0.001 too
    if sketched <= 0:
        return sketched, sketched
    return (sketched / (1 + RELATIVE_ACCURACY) - grain,
            sketched / (1 - RELATIVE_ACCURACY) + grain)


__all__ = ["EXACT_LIMIT", "RELATIVE_ACCURACY", "Measure", "bounds", "certainly_above"]
