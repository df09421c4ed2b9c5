"""Latency measures in segment manifests (mcp_tap.gate.sketch): exact while few, a DDSketch
past that, nearest-rank percentiles within the stated relative error, mergeable; and the
gate reads every record when a sketched percentile is too near a threshold."""

from __future__ import annotations

import functools
import random
from pathlib import Path
from typing import Any

import orjson
import pytest
from gate_bundles import exchange

from mcp_tap.evidence import EvidenceWriter
from mcp_tap.gate import GateRequest, evaluate
from mcp_tap.gate.counts import ValueCounts
from mcp_tap.gate.policy import HealthPolicy, Policy
from mcp_tap.gate.segments import SegmentTally
from mcp_tap.gate.sketch import EXACT_LIMIT, RELATIVE_ACCURACY, Measure, certainly_above

PS = (50, 95, 99, 99.9, 100)


def _values(seed: int, n: int) -> list[float]:
    rng = random.Random(seed)
    return [round(rng.lognormvariate(3.0, 1.2), 3) for _ in range(n)]


def test_few_values_stay_exact() -> None:
    values = _values(1, 200)
    measure = Measure.of_counts(ValueCounts(values))
    assert measure.exact and len(set(values)) <= EXACT_LIMIT
    assert measure.percentiles(PS) == ValueCounts(values).percentiles(PS)


def test_sketched_percentiles_are_within_the_stated_error() -> None:
    parts = [_values(seed, 5000) for seed in range(6)]
    merged = Measure()
    for part in parts:  # each segment's measure through its manifest's JSON
        merged.merge(Measure.from_json(orjson.loads(orjson.dumps(
            Measure.of_counts(ValueCounts(part)).to_json()))))
    exact = ValueCounts([v for part in parts for v in part]).percentiles(PS)
    assert not merged.exact and len(merged) == 30_000
    for got, want in zip(merged.percentiles(PS), exact, strict=True):
        assert abs(got - want) <= RELATIVE_ACCURACY * want + 0.001


def test_zero_and_negative_values_are_counted_exactly() -> None:
    values = [-1.5, 0.0, 0.0, *_values(2, 1000)]
    measure = Measure.of_counts(ValueCounts(values))
    assert not measure.exact
    assert measure.percentiles((0.05, 0.25)) == [-1.5, 0.0]  # ranks 1 and 3 of 1003


def test_a_malformed_measure_is_refused() -> None:
    with pytest.raises(ValueError, match="add up"):
        Measure.from_json({"n": 3, "values": [[1.0, 1]]})
    with pytest.raises(ValueError, match="relative accuracy"):
        Measure.from_json({"n": 1, "values": [], "sketch": {"relativeAccuracy": 0.5,
                                                             "buckets": [[3, 1]]}})


@pytest.mark.parametrize(("sketched", "threshold", "expected"),
                         [(100.0, 50.0, True), (100.0, 200.0, False), (100.0, 100.5, None),
                          (100.0, 99.5, None)])
def test_certainly_above(sketched: float, threshold: float, expected: bool | None) -> None:
    assert certainly_above(sketched, threshold) is expected


def _spread(n: int) -> dict[str, Any]:
    record = exchange(n, latency=0.05 + (n % 997) * 0.00037)  # ~900 distinct latencies
    return record


def test_a_threshold_within_the_error_reads_every_record(tmp_path: Path) -> None:
    """p95 sketched near max_latency_ms: the gate reads the records and says why; far from
    it, the tallies decide (the same decision as the full read)."""
    bundle = tmp_path / "b"
    with EvidenceWriter(bundle, signing_key=bytes(range(32)), tallies=SegmentTally,
                        max_segment_bytes=2_000_000) as writer:
        for n in range(3000):
            assert writer.submit(_spread(n))
    full = evaluate(GateRequest(evidence=(bundle,), policy=Policy()), workers=1, full=True)
    assert full.reading.mode == "records"
    p95 = full.to_json()["sources"]["health"]["window"]["latencyMs"]["p95"]
    for threshold, mode in ((p95, "records"), (p95 * 1.005, "records"), (p95 * 2, "tallies"),
                            (p95 / 2, "tallies")):
        policy = Policy(health=HealthPolicy(max_latency_ms=threshold,
                                            min_observation_seconds=0))
        request = GateRequest(evidence=(bundle,), policy=policy)
        decision = evaluate(request, workers=1)
        assert decision.reading.mode == mode, threshold
        assert ("latency" in decision.reading.sketched) == (mode == "tallies")
        same = evaluate(request, workers=1, full=True)
        assert decision.action == same.action
        assert [r.rule for r in decision.reasons] == [r.rule for r in same.reasons]
        if mode == "records":
            assert decision.to_json() == same.to_json()
            assert "read every record" in decision.reading.fallback


def test_a_failing_tallier_leaves_tallies_out(tmp_path: Path) -> None:
    """A tallier that raises never costs a record: the manifest goes without tallies and
    the gate reads that segment's records."""

    class Broken(SegmentTally):
        def add_data(self, data: bytes) -> None:
            raise RuntimeError("broken tallier")

    bundle = tmp_path / "b"
    factory = functools.partial(Broken)
    with EvidenceWriter(bundle, signing_key=bytes(range(32)), tallies=factory) as writer:
        for n in range(120):
            assert writer.submit(exchange(n))
    manifest = orjson.loads((bundle / "segment-000001.manifest.json").read_bytes())
    assert "tallies" not in manifest and manifest["count"] == 120
    decision = evaluate(GateRequest(evidence=(bundle,), policy=Policy()), workers=1)
    assert decision.reading.mode == "records"
    assert decision.reading.read_because == {"the manifest holds no tallies": 1}
