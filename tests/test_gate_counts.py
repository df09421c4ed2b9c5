"""Tests of ValueCounts: percentiles from counts of rounded values equal the exact answers."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_tap.gate.counts import DIGITS, ValueCounts, rounded
from mcp_tap.gate.health import compute_window, percentile
from mcp_tap.gate.policy import ErrorCounting

PS = (50, 95, 99)


def exact(values: list[float]) -> list[float]:
    """What the window reported before: every value kept, nearest rank, then rounded."""
    return [round(percentile(values, p), 3) for p in PS]


class TestValueCounts:
    @given(st.lists(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), min_size=1,
                    max_size=300))
    def test_percentiles_equal_the_exact_ones_at_0_001(self, values: list[float]) -> None:
        assert ValueCounts(values).percentiles(PS) == exact(values)

    @given(st.lists(st.floats(min_value=0, max_value=5, allow_nan=False), min_size=1,
                    max_size=300), st.floats(min_value=0.1, max_value=100))
    def test_any_percentile_equals_the_exact_one(self, values: list[float], p: float) -> None:
        assert ValueCounts(values).percentile(p) == round(percentile(values, p), 3)

    def test_many_samples_few_keys(self) -> None:
        rng = random.Random(7)
        values = [rng.lognormvariate(1.0, 0.6) for _ in range(50_000)]
        counts = ValueCounts(values)
        assert counts.percentiles(PS) == exact(values)
        assert len(counts) == 50_000
        assert len(counts.counts) < 20_000  # memory bounded by distinct values, not samples

    def test_merge_equals_counting_everything_once(self) -> None:
        rng = random.Random(3)
        a = [rng.uniform(0, 10) for _ in range(1000)]
        b = [rng.uniform(5, 50) for _ in range(777)]
        merged = ValueCounts(a)
        merged.merge(ValueCounts(b))
        assert merged.percentiles(PS) == exact(a + b)
        assert len(merged) == 1777

    def test_values_closer_than_the_resolution_share_a_key(self) -> None:
        counts = ValueCounts([1.0001, 1.0002, 1.0004, 2.0])
        assert counts.counts == {1.0: 3, 2.0: 1}
        assert counts.percentile(50) == 1.0
        assert counts.percentile(99) == 2.0

    def test_clear_and_empty(self) -> None:
        counts = ValueCounts([1.0])
        counts.clear()
        assert not counts
        with pytest.raises(ValueError):
            counts.percentile(50)

    def test_window_percentiles_unchanged(self) -> None:
        t0 = 1_733_150_000.0
        rng = random.Random(11)
        latencies = [rng.uniform(0.001, 0.9) for _ in range(2000)]
        records = [{"kind": "exchange", "hop": "edge", "rpcId": n, "tapError": None,
                    "ingress": {"receivedAt": t0 + n},
                    "origin": {"status": 200, "endAt": t0 + n + latency}}
                   for n, latency in enumerate(latencies)]
        window = compute_window(records, ErrorCounting())
        assert window.latency_ms is not None
        expected = exact([(t0 + n + latency - (t0 + n)) * 1000.0
                          for n, latency in enumerate(latencies)])
        assert [window.latency_ms.p50, window.latency_ms.p95, window.latency_ms.p99] == expected


def _near_half() -> st.SearchStrategy[float]:
    """Values whose scaled value sits at or a few ulps beside a half (a tie for round)."""
    return st.builds(lambda n, ulps: math.nextafter((n + 0.5) / 1000, math.inf) if ulps > 0
                     else math.nextafter((n + 0.5) / 1000, -math.inf) if ulps < 0
                     else (n + 0.5) / 1000,
                     st.integers(-10**11, 10**11), st.integers(-1, 1))


_ANY_FLOAT = (st.floats() | _near_half() | st.floats(-1e9, 1e9)
              | st.sampled_from([0.0, -0.0, 0.0004, -0.0004, 0.0005, 1e8, 1e8 + 0.0005,
                                 76645307064987.67, 6.718438842067516e+50]))


class TestRounded:
    @settings(max_examples=1500)
    @given(st.lists(_ANY_FLOAT, max_size=40))
    def test_the_same_floats_as_round(self, values: list[float]) -> None:
        """rounded() gives exactly round(v, 3) (compared by repr: -0.0, NaN and type too)."""
        assert [repr(v) for v in rounded(values)] == [repr(round(v, DIGITS)) for v in values]

    @given(st.lists(st.floats(0.001, 1e6), min_size=1, max_size=40))
    def test_ordinary_batches_take_the_division(self, values: list[float]) -> None:
        """A batch of ordinary latencies is rounded by the integer division, not by round
        (the shortcut the gate's health window counts with)."""
        values = [v for v in values if abs(v * 1000 - round(v * 1000)) < 0.4999]
        if values:
            taken = rounded(values)
            assert type(taken) is list
            assert taken == [round(v, DIGITS) for v in values]

    def test_a_value_near_a_half_leaves_the_others_on_the_shortcut(self) -> None:
        batch = [1.25, 0.0125, 3.5, -0.0001, 7.0625]  # 12.5 is a tie; -0.0001 rounds to -0.0
        taken = rounded(batch)
        assert type(taken) is list
        assert [repr(v) for v in taken] == [repr(round(v, DIGITS)) for v in batch]

    def test_other_batches_are_rounded_by_round(self) -> None:
        for batch in ([1, 2.5], [1.5, math.inf], [1.5, math.nan], [0.0001, 2.5],
                      [1e12, 2.5]):
            assert [repr(v) for v in rounded(batch)] == [
                repr(round(v, DIGITS)) for v in batch]
