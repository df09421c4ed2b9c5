"""Tests of the health window computed from exchange records, and of its evaluation."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from mcp_tap.errors import InputError
from mcp_tap.gate.health import (
    HealthWindow,
    Percentiles,
    compute_window,
    evaluate_health,
    percentile,
)
from mcp_tap.gate.policy import BaselinePolicy, ErrorCounting, HealthPolicy

T0 = 1_733_150_000.0


def exchange(
    n: int = 0,
    *,
    latency: float = 0.1,
    status: int | None = 200,
    body: Any = None,
    sse: list[dict[str, Any]] | None = None,
    tap_error: dict[str, Any] | None = None,
    rpc_id: Any = "use-n",
    hop: str = "edge",
    start: float | None = None,
) -> dict[str, Any]:
    """Return an exchange record received at T0 + n seconds that took ``latency`` seconds."""
    received = T0 + n if start is None else start
    origin: dict[str, Any] | None = None
    if status is not None:
        origin = {
            "status": status,
            "body": {"jsonrpc": "2.0", "id": n, "result": {}} if body is None else body,
            "firstByteAt": received + latency / 2,
            "endAt": received + latency,
        }
        if sse is not None:
            origin["sse"] = sse
            origin["body"] = None
    return {
        "kind": "exchange",
        "hop": hop,
        "exchangeId": f"x{n}",
        "era": "modern",
        "method": "tools/call",
        "rpcId": n if rpc_id == "use-n" else rpc_id,
        "ingress": {"receivedAt": received},
        "origin": origin,
        "egress": {"status": status, "sentAt": received + latency},
        "tapError": tap_error,
        "findings": [],
    }


def window(**changes: Any) -> HealthWindow:
    """Return a healthy window (1000 samples, 10 minutes, 100 ms p95) with ``changes``."""
    values: dict[str, Any] = {
        "samples": 1000,
        "errors": 0,
        "counts": compute_window([], ErrorCounting()).counts,
        "latency_ms": Percentiles(50.0, 100.0, 150.0),
        "sse_first_event_ms": None,
        "stream_duration_ms": None,
        "sse_streams": 0,
        "sse_events": 0,
        "max_events_per_stream": 0,
        "observation_seconds": 600.0,
    }
    values.update(changes)
    return HealthWindow(**values)


POLICY = HealthPolicy(min_samples=100, max_error_rate=0.01, max_latency_ms=500.0,
                      min_observation_seconds=300.0)


def rules(result: Any) -> list[str]:
    """Return the rule ids of a source result's reasons, in order."""
    return [r.rule for r in result.reasons]


class TestPercentile:
    """Nearest-rank percentiles."""

    def test_nearest_rank(self) -> None:
        """p50/p95/p99 of 1..100 are 50, 95 and 99."""
        values = [float(v) for v in range(100, 0, -1)]
        assert [percentile(values, p) for p in (50, 95, 99)] == [50.0, 95.0, 99.0]

    def test_small_sample_rounds_up(self) -> None:
        """Nearest rank rounds the rank up: p50 of four values is the second."""
        assert percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.0
        assert percentile([4.0, 1.0, 3.0, 2.0], 95) == 4.0

    def test_single_value(self) -> None:
        """Every percentile of one value is that value."""
        assert percentile([7.0], 99) == 7.0

    def test_empty_raises(self) -> None:
        """There is no percentile of nothing."""
        with pytest.raises(ValueError):
            percentile([], 50)


class TestComputeWindow:
    """What counts as a sample, an error and a latency."""

    def test_samples_are_requests_only(self) -> None:
        """Notifications, non-exchange records and bool ids are not samples."""
        records = [
            exchange(0),
            exchange(1, rpc_id=None),
            exchange(2, rpc_id=True),
            {"kind": "gap", "lost": 3, "reason": "queue full"},
            exchange(3, rpc_id="abc"),
        ]
        assert compute_window(records, ErrorCounting()).samples == 2

    def test_latency_percentiles_in_ms(self) -> None:
        """Latency is origin end minus ingress receive, in milliseconds."""
        records = [exchange(i, latency=(i + 1) / 1000) for i in range(100)]
        result = compute_window(records, ErrorCounting()).latency_ms
        assert result == Percentiles(50.0, 95.0, 99.0)

    def test_observation_duration(self) -> None:
        """Observation runs from the first receive to the last end."""
        records = [exchange(0, latency=0.5), exchange(10, latency=2.0)]
        assert compute_window(records, ErrorCounting()).observation_seconds == 12.0

    def test_error_counting_follows_policy(self) -> None:
        """5xx, 4xx and JSON-RPC errors count only as the policy says."""
        error_body = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "x"}}
        records = [exchange(0, status=500), exchange(1, status=400, body=error_body),
                   exchange(2, status=404), exchange(3)]
        default = compute_window(records, ErrorCounting())
        assert (default.errors, default.counts.http_5xx, default.counts.http_4xx,
                default.counts.jsonrpc) == (2, 1, 2, 1)
        only_4xx = compute_window(records, ErrorCounting(False, False, True))
        assert only_4xx.errors == 2
        nothing = compute_window(records, ErrorCounting(False, False, False))
        assert nothing.errors == 0
        assert nothing.error_rate == 0.0

    def test_tap_errors_always_count(self) -> None:
        """A tap-own 502 counts as an error even when no HTTP failure is counted."""
        records = [exchange(0, status=None, tap_error={"status": 502, "reason": "refused"}),
                   exchange(1)]
        result = compute_window(records, ErrorCounting(False, False, False))
        assert (result.errors, result.counts.tap, result.error_rate) == (1, 1, 0.5)

    def test_unanswered_counts(self) -> None:
        """A request with no origin answer and no tap error is an error."""
        result = compute_window([exchange(0, status=None)], ErrorCounting(False, False, False))
        assert (result.errors, result.counts.unanswered) == (1, 1)

    def test_sse_measurements(self) -> None:
        """SSE first-event latency, stream duration and event counts come from origin.sse."""
        events = [{"at": T0 + 0.02, "data": {"jsonrpc": "2.0", "method": "notifications/x"}},
                  {"at": T0 + 0.05, "data": {"jsonrpc": "2.0", "id": 0, "result": {}}}]
        record = exchange(0, latency=0.1, sse=events)
        result = compute_window([record], ErrorCounting())
        assert result.sse_first_event_ms == Percentiles(20.0, 20.0, 20.0)
        assert result.stream_duration_ms == Percentiles(50.0, 50.0, 50.0)
        assert (result.sse_streams, result.sse_events, result.max_events_per_stream) == (1, 2, 2)

    def test_jsonrpc_error_in_sse_counts(self) -> None:
        """A JSON-RPC error response delivered as an SSE event is a JSON-RPC error."""
        events = [{"at": T0 + 0.01, "data": {"jsonrpc": "2.0", "id": 0,
                                             "error": {"code": -32603, "message": "boom"}}}]
        result = compute_window([exchange(0, sse=events)], ErrorCounting())
        assert (result.errors, result.counts.jsonrpc) == (1, 1)

    def test_several_hops_need_a_hop(self) -> None:
        """Records of two hops without a chosen hop are refused, not double counted."""
        records = [exchange(0, hop="edge"), exchange(0, hop="origin")]
        with pytest.raises(InputError, match=r"health\.hop"):
            compute_window(records, ErrorCounting())

    def test_hop_filter(self) -> None:
        """With a hop chosen, only that hop's exchanges are samples."""
        records = [exchange(0, hop="edge"), exchange(0, hop="origin"), exchange(1, hop="edge")]
        assert compute_window(records, ErrorCounting(), "edge").samples == 2

    def test_no_records(self) -> None:
        """An empty window has zero samples and no error rate."""
        result = compute_window([], ErrorCounting())
        assert (result.samples, result.error_rate, result.latency_ms) == (0, None, None)


class TestEvaluateHealth:
    """Each health reason, and the thresholds it compares."""

    def test_healthy_window_passes(self) -> None:
        """A window inside every threshold has no reasons."""
        assert rules(evaluate_health(window(), POLICY)) == []

    def test_zero_samples_never_healthy(self) -> None:
        """Zero samples fails with exactly gate.health.samples."""
        assert rules(evaluate_health(window(samples=0, latency_ms=None), POLICY)) == [
            "gate.health.samples"
        ]

    def test_too_few_samples(self) -> None:
        """Fewer samples than the minimum fail."""
        assert rules(evaluate_health(window(samples=99), POLICY)) == ["gate.health.samples"]

    def test_error_rate(self) -> None:
        """An error rate above the maximum fails."""
        assert rules(evaluate_health(window(errors=11), POLICY)) == ["gate.health.error-rate"]

    def test_error_rate_at_threshold_passes(self) -> None:
        """An error rate exactly at the maximum passes."""
        assert rules(evaluate_health(window(errors=10), POLICY)) == []

    def test_latency(self) -> None:
        """A configured percentile above the maximum fails."""
        slow = window(latency_ms=Percentiles(50.0, 600.0, 700.0))
        assert rules(evaluate_health(slow, POLICY)) == ["gate.health.latency"]
        assert rules(evaluate_health(slow, replace(POLICY, latency_percentile="p50"))) == []

    def test_unmeasurable_latency(self) -> None:
        """Samples without any latency fail the latency threshold."""
        assert rules(evaluate_health(window(latency_ms=None), POLICY)) == ["gate.health.latency"]

    def test_sse_first_event(self) -> None:
        """A slow first SSE event fails when the policy sets a maximum."""
        streaming = window(sse_first_event_ms=Percentiles(10.0, 300.0, 400.0))
        assert rules(evaluate_health(streaming, POLICY)) == []
        strict = replace(POLICY, max_sse_first_event_ms=250.0)
        assert rules(evaluate_health(streaming, strict)) == ["gate.health.sse-first-event"]

    def test_duration(self) -> None:
        """A window shorter than the minimum observation fails."""
        assert rules(evaluate_health(window(observation_seconds=299.0), POLICY)) == [
            "gate.health.duration"
        ]

    def test_baseline_latency(self) -> None:
        """A p95 more than 20% above the baseline's fails."""
        base = window(latency_ms=Percentiles(50.0, 80.0, 100.0))
        assert rules(evaluate_health(window(), POLICY, base)) == ["gate.health.baseline"]

    def test_baseline_latency_at_limit_passes(self) -> None:
        """A p95 exactly 20% above the baseline's passes."""
        base = window(latency_ms=Percentiles(50.0, 100.0 / 1.2, 100.0))
        assert rules(evaluate_health(window(), POLICY, base)) == []

    def test_baseline_error_rate(self) -> None:
        """An error rate more than half a point above the baseline's fails."""
        candidate = window(errors=10)
        assert rules(evaluate_health(candidate, POLICY, window(errors=4))) == [
            "gate.health.baseline"
        ]
        assert rules(evaluate_health(candidate, POLICY, window(errors=5))) == []

    def test_baseline_required_but_missing(self) -> None:
        """A required baseline that was not given fails."""
        policy = replace(POLICY, baseline=BaselinePolicy(required=True))
        assert rules(evaluate_health(window(), policy)) == ["gate.health.baseline"]

    def test_empty_baseline(self) -> None:
        """A baseline with no samples cannot vouch for anything."""
        empty = window(samples=0, latency_ms=None)
        assert rules(evaluate_health(window(), POLICY, empty)) == ["gate.health.baseline"]

    def test_several_reasons(self) -> None:
        """Every failing threshold is reported, in a fixed order."""
        bad = window(samples=50, errors=25, latency_ms=Percentiles(1.0, 900.0, 950.0),
                     observation_seconds=10.0)
        assert rules(evaluate_health(bad, POLICY)) == [
            "gate.health.samples", "gate.health.error-rate", "gate.health.latency",
            "gate.health.duration",
        ]

    def test_summary_carries_window_and_thresholds(self) -> None:
        """The summary shows the measured window and the thresholds it was held to."""
        summary = evaluate_health(window(), POLICY).summary
        assert summary["window"]["samples"] == 1000
        assert summary["thresholds"]["maxLatencyMs"] == 500.0
        assert summary["baseline"] is None
