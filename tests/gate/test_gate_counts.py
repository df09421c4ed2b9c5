"""Tests of ValueCounts: percentiles from counts of rounded values equal the exact answers."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_tap.gate.counts import ValueCounts
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
