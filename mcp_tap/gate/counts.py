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
from operator import mul, sub, truediv
from typing import Final

DIGITS = 3
"""Decimal digits kept: 0.001 (of a millisecond, for the gate's latencies)."""


_BATCH: Final = 4096  # values kept unrounded before they are counted, in one C-level pass
_SCALE: Final = 10**DIGITS
# The shortcut in rounded() holds while v * 10**DIGITS is below this: its rounding error
# (at most 2**-53 of it, 1.2e-5) stays under the distance from a half that is required.
_EXACT: Final = 1e11
_FAR: Final = 0.4999  # |v * 10**DIGITS - n| below this: n is the integer nearest the exact product
_FLOAT: Final = {float}


def rounded(values: list[float]) -> Iterable[float]:
    """``round(v, DIGITS)`` of each of ``values``, the same floats, in order.

    ``round(v, 3)`` formats and re-parses a decimal string (about 0.7 µs a value). For a
    finite float of ordinary size whose scaled value ``x = v * 1000`` is not near a half,
    the integer ``n`` nearest ``x`` is the one nearest the exact product (the error of
    ``x`` is far below the margin), so the decimal ``round`` picks is ``n / 1000``, and the
    true division of two integers is correctly rounded, as ``round``'s parse of that
    decimal is: the same float. The rare value near a half, or rounding to zero (whose sign
    ``round`` keeps), is rounded by ``round`` itself; so is a batch holding anything but
    floats, an infinity, a NaN or a huge value. The passes run in C (``map``); Python
    loops over a batch only when it holds such a rare value.
    """
    if not values or set(map(type, values)) != _FLOAT:
        return map(round, values, repeat(DIGITS))
    scaled = list(map(mul, values, repeat(float(_SCALE))))
    try:
        whole = list(map(round, scaled))  # ints
    except (OverflowError, ValueError):  # an infinity or NaN
        return map(round, values, repeat(DIGITS))
    if max(map(abs, scaled)) >= _EXACT:
        return map(round, values, repeat(DIGITS))
    out = list(map(truediv, whole, repeat(_SCALE)))
    gaps = list(map(abs, map(sub, scaled, whole)))
    if 0 in whole or max(gaps) >= _FAR:  # about one value in 5,000 is near a half
        for at, (n, gap) in enumerate(zip(whole, gaps, strict=True)):
            if n == 0 or gap >= _FAR:
                out[at] = round(values[at], DIGITS)
    return out


class ValueCounts:
    """How many times each value (rounded to :data:`DIGITS` decimals) was seen; mergeable.

    :meth:`add` only appends to :attr:`pending` (a hot loop may append to it directly);
    every :data:`_BATCH` values, and before anything reads the counts, the pending values
    are rounded and counted in one pass in C (:func:`rounded` into ``Counter.update``)
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
            self._counts.update(rounded(pending))
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


__all__ = ["DIGITS", "ValueCounts", "rounded"]
