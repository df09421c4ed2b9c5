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
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import repeat
from typing import Final

DIGITS = 3
"""Decimal digits kept: 0.001 (of a millisecond, for the gate's latencies)."""


_BATCH: Final = 4096  # values kept unrounded before they are counted, in one C-level pass


class ValueCounts:
    """How many times each value (rounded to :data:`DIGITS` decimals) was seen; mergeable.

    :meth:`add` only appends to :attr:`pending` (a hot loop may append to it directly);
    every :data:`_BATCH` values, and before anything reads the counts, the pending values
    are rounded and counted in one pass in C (``map(round)`` into ``Counter.update``)
    instead of a Python call per value.
    """

    __slots__ = ("_counts", "_total", "pending")

    def __init__(self, values: Iterable[float] = ()) -> None:
        """Start empty, or with ``values`` counted."""
        self._counts: Counter[float] = Counter()
        self._total = 0
        self.pending: list[float] = []
        for value in values:
            self.add(value)

    def add(self, value: float) -> None:
        """Count one value."""
        pending = self.pending
        pending.append(value)
        if len(pending) >= _BATCH:
            self.flush()

    def flush(self) -> None:
        """Count the pending values (a hot loop that appends to :attr:`pending` calls this
        when it holds :data:`_BATCH` or more, to keep memory bounded)."""
        pending = self.pending
        if pending:
            self._counts.update(map(round, pending, repeat(DIGITS)))
            self._total += len(pending)
            pending.clear()

    @property
    def counts(self) -> dict[float, int]:
        """Each rounded value and how many times it was seen."""
        self.flush()
        return self._counts

    @property
    def total(self) -> int:
        """The number of values counted."""
        return self._total + len(self.pending)

    def merge(self, other: ValueCounts) -> None:
        """Fold in the counts of ``other``."""
        self.flush()
        self._counts.update(other.counts)
        self._total += other.total

    def clear(self) -> None:
        """Forget every value."""
        self._counts.clear()
        self.pending.clear()
        self._total = 0

    def __len__(self) -> int:
        """The number of values counted (not of distinct ones)."""
        return self.total

    def percentiles(self, ps: Sequence[float]) -> list[float]:
        """The nearest-rank ``p``-th percentile (0 < p <= 100) of the values, for each of
        ``ps``, rounded to :data:`DIGITS` decimals; ValueError when there are none."""
        counts = self.counts
        if not self._total:
            raise ValueError("percentile of no values")
        ranks = [max(1, math.ceil(p / 100.0 * self._total)) for p in ps]
        wanted = sorted(set(ranks))
        found: dict[int, float] = {}
        seen = 0
        position = 0
        for key in sorted(counts):
            seen += counts[key]
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
