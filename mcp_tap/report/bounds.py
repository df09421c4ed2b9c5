"""How much of a bundle the report keeps: every bound in one place, and a uniform sample.

The report reads records one at a time and never holds a bundle. What it shows is either
an exact count (exchanges, findings per rule, errors, eras) or a bounded sample:

* latency and SSE first-event values: a uniform reservoir of at most ``samples`` values
  (per series), plus the exact count, minimum and maximum; percentiles drawn from a
  reservoir say so on the page when the series was larger;
* full exchanges for the exchange view: the first and last example of each rule group, at
  most ``errors`` health errors, the exchanges of at most ``hop_changes`` changed hop pairs
  and the first ``lead`` exchanges, so at most :meth:`Bounds.kept` records are referenced
  at any time (each as large as the proxy's capture limit allows);
* rows of the exchange index (``rows``) and SSE streams (``streams``);
* groups by a name the evidence chooses: at most ``rules`` rules and ``groups`` hops, hop
  boxes or eras, each plus one ``(other)`` group that counts the rest.
"""

from __future__ import annotations

import random
from array import array
from collections.abc import Collection
from dataclasses import dataclass
from typing import Final

OTHER: Final = "(other)"
"""The group that counts what is past a bound on distinct names (hops, boxes, rules)."""


@dataclass(frozen=True, slots=True)
class Bounds:
    """The limits of everything the report keeps while it streams a bundle."""

    samples: int = 10_000
    rules: int = 100
    errors: int = 20
    hop_changes: int = 20
    lead: int = 20
    rows: int = 500
    streams: int = 50
    groups: int = 32
    body_chars: int = 8_000
    events: int = 20
    event_chars: int = 2_000
    headers: int = 40

    def kept(self) -> int:
        """The most full records referenced at once for the exchange view."""
        return 2 * (self.rules + 1) + self.errors + 2 * self.hop_changes + self.lead


DEFAULT_BOUNDS: Final = Bounds()


class Reservoir:
    """A uniform sample of at most ``size`` floats from a stream (Algorithm R), with the
    exact count, minimum and maximum of the whole stream.

    Seeded, so the same evidence gives the same page.
    """

    __slots__ = ("_random", "count", "high", "low", "size", "values")

    def __init__(self, size: int, seed: int = 0) -> None:
        self.size = size
        self.values = array("d")
        self.count = 0
        self.low = float("inf")
        self.high = float("-inf")
        self._random = random.Random(seed)

    def add(self, value: float) -> None:
        """Offer one value: it is counted, and kept with probability size / count."""
        self.count += 1
        self.low = min(self.low, value)
        self.high = max(self.high, value)
        if len(self.values) < self.size:
            self.values.append(value)
            return
        slot = self._random.randrange(self.count)
        if slot < self.size:
            self.values[slot] = value

    @property
    def sampled(self) -> bool:
        """Whether the kept values are a sample rather than every value."""
        return self.count > len(self.values)

    def snapshot(self) -> Samples:
        """The finished series."""
        return Samples(tuple(self.values), self.count,
                       self.low if self.count else 0.0, self.high if self.count else 0.0)


@dataclass(frozen=True, slots=True)
class Samples:
    """A finished series: the kept values, and the exact count, minimum and maximum."""

    values: tuple[float, ...] = ()
    count: int = 0
    low: float = 0.0
    high: float = 0.0

    @property
    def sampled(self) -> bool:
        """Whether ``values`` is a uniform sample of a larger series."""
        return self.count > len(self.values)


def bounded_key(keys: Collection[str], key: str, limit: int) -> str:
    """``key`` if it is held or fewer than ``limit`` other names are, else OTHER (so at most
    ``limit`` names plus OTHER are ever held)."""
    if key in keys:
        return key
    named = len(keys) - (OTHER in keys)
    return key if named < limit else OTHER
