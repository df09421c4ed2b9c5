"""Exact counts of quantised measurements: nearest-rank percentiles in memory bounded by the
number of distinct values, not by the number of samples.

The gate reports percentiles rounded to 0.001 ms. Rounding is monotonic, so the nearest-rank
percentile of the rounded values *is* the rounded nearest-rank percentile of the exact
values: counting each rounded value (``round(v, 3)``, the very rounding the report used)
gives the same answers as keeping and sorting every value, in memory that grows with the
spread of the latencies at 1 µs resolution (a few thousand keys for a real service) instead
of with the bundle.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

DIGITS = 3
"""Decimal digits kept: 0.001 (of a millisecond, for the gate's latencies)."""


class ValueCounts:
    """How many times each value (rounded to :data:`DIGITS` decimals) was seen; mergeable."""

    __slots__ = ("counts", "total")

    def __init__(self, values: Iterable[float] = ()) -> None:
        """Start empty, or with ``values`` counted."""
        self.counts: dict[float, int] = {}
        self.total = 0
        for value in values:
            self.add(value)

    def add(self, value: float) -> None:
        """Count one value."""
        key = round(value, DIGITS)
        counts = self.counts
        counts[key] = counts.get(key, 0) + 1
        self.total += 1

    def merge(self, other: ValueCounts) -> None:
        """Fold in the counts of ``other``."""
        counts = self.counts
        for key, count in other.counts.items():
            counts[key] = counts.get(key, 0) + count
        self.total += other.total

    def clear(self) -> None:
        """Forget every value."""
        self.counts.clear()
        self.total = 0

    def __len__(self) -> int:
        """The number of values counted (not of distinct ones)."""
        return self.total

    def percentiles(self, ps: Sequence[float]) -> list[float]:
        """The nearest-rank ``p``-th percentile (0 < p <= 100) of the values, for each of
        ``ps``, rounded to :data:`DIGITS` decimals; ValueError when there are none."""
        if not self.total:
            raise ValueError("percentile of no values")
        ranks = [max(1, math.ceil(p / 100.0 * self.total)) for p in ps]
        wanted = sorted(set(ranks))
        found: dict[int, float] = {}
        seen = 0
        position = 0
        for key in sorted(self.counts):
            seen += self.counts[key]
            while position < len(wanted) and wanted[position] <= seen:
                found[wanted[position]] = key
                position += 1
            if position == len(wanted):
                break
        return [found[rank] for rank in ranks]

    def percentile(self, p: float) -> float:
        """The nearest-rank ``p``-th percentile (see :meth:`percentiles`)."""
        return self.percentiles((p,))[0]


__all__ = ["DIGITS", "ValueCounts"]
