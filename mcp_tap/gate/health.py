"""The health window, computed from the recorded exchanges themselves.

Definitions (all from ``exchange`` records in the docs/architecture.md format):

* **sample**: an exchange carrying a JSON-RPC request, i.e. an ``rpcId`` that is a string or
  an integer. Notifications, client responses and unparseable bodies are not samples.
  With ``hop`` given, only that hop's records count; a capture holding several hops needs a
  hop named, or every request would count once per hop.
* **error**: a sample that the tap answered itself (``tapError``: its 502/504 means the
  upstream never answered), that has no origin status at all, or, as the policy counts
  them, whose origin status is 5xx / 4xx or whose origin body or an SSE event is a JSON-RPC
  error response. A sample is one error however many of these apply. A 4xx or JSON-RPC
  error answering a request that broke a request rule (a ``request`` finding of strength
  ``must``: the client's own fault, which the server was right to refuse) is no error:
  it is counted as **rejected**, the client's doing, not the server's.
* **latency**: ``origin.endAt - ingress.receivedAt`` in ms; **SSE first-event latency**:
  ``origin.sse[0].at - ingress.receivedAt``; **stream duration**: ``origin.endAt`` minus
  ``origin.firstByteAt`` (else the first event's time). Percentiles are nearest-rank.
* **observation duration**: the last end time minus the first receive time, in seconds.

Zero samples is never healthy.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Final, Protocol

from msgspec import UNSET

from mcp_tap.errors import InputError
from mcp_tap.evidence.view import (
    ANSWERS,
    EGRESSES,
    EVENTS,
    INGRESSES,
    ORIGINS,
    Origin,
    RecordView,
    view_of,
)
from mcp_tap.gate.counts import ValueCounts
from mcp_tap.gate.decision import Reason, SourceResult
from mcp_tap.gate.policy import ErrorCounting, HealthPolicy
from mcp_tap.gate.tally import summaries_of

# Float sums such as 0.01 + 0.005 carry rounding noise; a measurement exactly at a threshold
# must pass, so comparisons allow this much slack.
_EPSILON = 1e-9


@dataclass(frozen=True, slots=True)
class Percentiles:
    """Nearest-rank p50 / p95 / p99 of one measurement, in milliseconds."""

    p50: float
    p95: float
    p99: float

    def get(self, name: str) -> float:
        """Return the percentile called ``name`` (``p50``, ``p95`` or ``p99``)."""
        value: float = getattr(self, name)
        return value

    def to_json(self) -> dict[str, float]:
        """Return the percentiles as a JSON object."""
        return {"p50": self.p50, "p95": self.p95, "p99": self.p99}


@dataclass(frozen=True, slots=True)
class ErrorCounts:
    """Failures by kind, whatever the policy counts; one sample may appear in several."""

    jsonrpc: int = 0
    http_5xx: int = 0
    http_4xx: int = 0
    tap: int = 0
    unanswered: int = 0
    rejected: int = 0  # refusals of the client's own broken requests: not errors

    def to_json(self) -> dict[str, int]:
        """Return the counts as a JSON object."""
        return {"jsonrpc": self.jsonrpc, "http5xx": self.http_5xx, "http4xx": self.http_4xx,
                "tap": self.tap, "unanswered": self.unanswered,
                "clientRejected": self.rejected}


@dataclass(frozen=True, slots=True)
class HealthWindow:
    """What the recorded exchanges say about the candidate's health."""

    samples: int
    errors: int
    counts: ErrorCounts
    latency_ms: Percentiles | None
    sse_first_event_ms: Percentiles | None
    stream_duration_ms: Percentiles | None
    sse_streams: int
    sse_events: int
    max_events_per_stream: int
    observation_seconds: float
    hop: str | None = None

    @property
    def error_rate(self) -> float | None:
        """Errors over samples, or ``None`` when there are no samples."""
        return self.errors / self.samples if self.samples else None

    def to_json(self) -> dict[str, Any]:
        """Return the window as a JSON object."""

        def opt(p: Percentiles | None) -> dict[str, float] | None:
            return None if p is None else p.to_json()

        return {
            "hop": self.hop,
            "samples": self.samples,
            "errors": self.errors,
            "errorRate": self.error_rate,
            "errorCounts": self.counts.to_json(),
            "latencyMs": opt(self.latency_ms),
            "sseFirstEventMs": opt(self.sse_first_event_ms),
            "streamDurationMs": opt(self.stream_duration_ms),
            "sseStreams": self.sse_streams,
            "sseEvents": self.sse_events,
            "maxEventsPerStream": self.max_events_per_stream,
            "observationSeconds": self.observation_seconds,
        }


def percentile(values: Sequence[float], p: float) -> float:
    """Return the nearest-rank ``p``-th percentile (0 < p <= 100) of non-empty ``values``."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100.0 * len(ordered)))
    return ordered[rank - 1]


def _percentiles(values: Measured) -> Percentiles | None:
    if not values:
        return None
    return Percentiles(*values.percentiles((50, 95, 99)))


def _num(value: Any) -> float | None:
    # bool is an int subclass; a `true` timestamp is not a time.
    if type(value) in (int, float) and math.isfinite(value):
        return float(value)
    return None


def client_broke_request(findings: Any) -> bool:
    """Whether a record's ``findings`` hold a ``must`` finding of the request boundary: its
    request broke a rule, so an error answering it is the client's doing."""
    return any(boundary == "request" and strength == "must"
               for _rule, boundary, strength, _where in summaries_of(findings))


# What failed in a failing sample (bits of WindowTally.failures): no upstream answer (a tap
# error or no status), a 5xx or 4xx status, a JSON-RPC error response; and whether the
# client's own request broke a must rule (for a 4xx or a JSON-RPC error).
FAILED_UNANSWERED: Final = 1
FAILED_5XX: Final = 2
FAILED_4XX: Final = 4
FAILED_JSONRPC: Final = 8
CLIENT_BROKE: Final = 16
_REFUSALS: Final = FAILED_4XX | FAILED_JSONRPC


def errors_of(failures: Mapping[int, int], counting: ErrorCounting) -> tuple[int, int]:
    """``(errors, rejected)`` as ``counting`` counts them among failing samples tallied by
    what failed (see :meth:`WindowTally.add_views`)."""
    errors = rejected = 0
    for mask, count in failures.items():
        failed = bool(mask & FAILED_UNANSWERED) or bool(mask & FAILED_5XX and counting.http_5xx)
        refused = bool(mask & FAILED_4XX and counting.http_4xx) or bool(
            mask & FAILED_JSONRPC and counting.jsonrpc_errors)
        if refused and not failed and mask & CLIENT_BROKE:
            rejected += count
        elif failed or refused:
            errors += count
    return errors, rejected


_NO_ORIGIN = Origin()  # what a record without an origin object reads as
_hop: Final = attrgetter("hop")
_STR: Final = {str}
_FLUSH_EVERY = 4096  # pending measurements past which a batch's end counts them


class Measured(Protocol):
    """Counted measurements that give nearest-rank percentiles: exact
    (:class:`~mcp_tap.gate.counts.ValueCounts`) or sketched
    (:class:`mcp_tap.gate.sketch.Measure`)."""

    def __len__(self) -> int: ...

    def percentiles(self, ps: Sequence[float]) -> list[float]: ...


class WindowTally:
    """The health window's counts and measurements, one record at a time, mergeable.

    Latencies are counted per value at the resolution the window reports (0.001 ms,
    :class:`~mcp_tap.gate.counts.ValueCounts`), which gives the exact nearest-rank
    percentiles in memory flat in the number of samples; everything else is a counter or an
    extreme.
    """

    __slots__ = ("counting", "durations", "end", "errors", "failures", "first_events", "hop",
                 "hops", "http_4xx", "http_5xx", "jsonrpc", "latencies", "max_events",
                 "rejected", "samples", "sse_events", "sse_streams", "start", "tap",
                 "unanswered")

    def __init__(self, counting: ErrorCounting, hop: str | None = None) -> None:
        self.counting = counting
        self.hop = hop
        self.hops: set[str] = set()
        self.samples = self.errors = self.jsonrpc = self.http_5xx = self.http_4xx = 0
        self.tap = self.unanswered = self.rejected = 0
        # Failing samples by what failed (FAILED_* bits): the errors of any counting, so a
        # segment's tally (mcp_tap.gate.segments) serves every policy.
        self.failures: dict[int, int] = {}
        self.latencies = ValueCounts()
        self.first_events = ValueCounts()
        self.durations = ValueCounts()
        self.sse_streams = self.sse_events = self.max_events = 0
        self.start: float | None = None
        self.end: float | None = None

    def add(self, record: Mapping[str, Any]) -> None:
        """Count one record (only requests among ``exchange`` records are samples)."""
        if record.get("kind") == "exchange":
            self.add_views((view_of(record),))

    def add_views(self, records: Iterable[RecordView]) -> None:
        """Count ``exchange`` records' views, in order (the caller checked their kind).

        The gate calls this once per read of a segment, so it is written for speed: the
        counts live in locals for the batch, the common float timestamp is checked inline
        (``x - x == 0`` is false only for an infinity or NaN), everything else goes through
        :func:`_num`; measurements are appended to the counts' pending lists and counted in
        batches.
        """
        hops, wanted, counting = self.hops, self.hop, self.counting
        samples, errors, jsonrpc, http_5xx, http_4xx = (
            self.samples, self.errors, self.jsonrpc, self.http_5xx, self.http_4xx)
        tap, unanswered, start, latest = self.tap, self.unanswered, self.start, self.end
        rejected = self.rejected
        sse_streams, sse_events, max_events = self.sse_streams, self.sse_events, self.max_events
        failures = self.failures
        latency = self.latencies.pending.append
        first_event = self.first_events.pending.append
        duration = self.durations.pending.append
        named = list(map(_hop, records))
        if set(map(type, named)) == _STR:  # the common case: every hop a string, in C
            hops.update(named)
        else:
            hops.update(hop for hop in named if type(hop) is str)
        for record in records:
            rpc_id = record.rpcId
            if type(rpc_id) is not int and type(rpc_id) is not str:
                continue
            if wanted is not None and record.hop != wanted:
                continue
            samples += 1
            origin = record.origin
            if not isinstance(origin, ORIGINS):
                origin = _NO_ORIGIN
            status = origin.status
            events = origin.sse
            if type(events) is not list or not events:
                events = None
            body = origin.body
            is_rpc_error = _is_rpc_error(body, events)
            mask, failed, broke = _failure(record, status, is_rpc_error, counting)
            if record.tapError is not None:
                tap += 1
            elif type(status) is not int:
                unanswered += 1
            if mask & FAILED_5XX:
                http_5xx += 1
            elif mask & FAILED_4XX:
                http_4xx += 1
            if mask & FAILED_JSONRPC:
                jsonrpc += 1
            if broke:
                rejected += 1
            if failed:
                errors += 1
            if mask:
                failures[mask] = failures.get(mask, 0) + 1
            ingress = record.ingress
            received = ingress.receivedAt if isinstance(ingress, INGRESSES) else None
            if type(received) is not float or received - received != 0.0:
                received = _num(received)
            end = origin.endAt
            if type(end) is not float or end - end != 0.0:
                end = _num(end)
            if received is not None:
                if start is None or received < start:
                    start = received
                if end is not None:
                    latency((end - received) * 1000.0)
                if latest is None or received > latest:
                    latest = received
            if end is not None and (latest is None or end > latest):
                latest = end
            egress = record.egress
            if isinstance(egress, EGRESSES):
                latest = _egress_latest(egress, latest)
            if events is not None:
                sse_streams += 1
                count = len(events)
                sse_events += count
                if count > max_events:
                    max_events = count
                first = events[0]
                first_at = _num(first.at) if isinstance(first, EVENTS) else None
                if first_at is not None and received is not None:
                    first_event((first_at - received) * 1000.0)
                opened = _num(origin.firstByteAt)
                opened = first_at if opened is None else opened
                if opened is not None and end is not None:
                    duration((end - opened) * 1000.0)
        self.samples, self.errors, self.jsonrpc, self.http_5xx, self.http_4xx = (
            samples, errors, jsonrpc, http_5xx, http_4xx)
        self.tap, self.unanswered, self.start, self.end = tap, unanswered, start, latest
        self.rejected = rejected
        self.sse_streams, self.sse_events, self.max_events = sse_streams, sse_events, max_events
        for values in (self.latencies, self.first_events, self.durations):
            if len(values.pending) >= _FLUSH_EVERY:  # keep the pending measurements bounded
                values.flush()

    def merge(self, other: WindowTally) -> None:
        """Fold in the tally of another bundle (same counting and hop)."""
        self.hops |= other.hops
        for name in ("samples", "errors", "jsonrpc", "http_5xx", "http_4xx", "tap",
                     "unanswered", "rejected", "sse_streams", "sse_events"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.max_events = max(self.max_events, other.max_events)
        for mask, count in other.failures.items():
            self.failures[mask] = self.failures.get(mask, 0) + count
        self.latencies.merge(other.latencies)
        self.first_events.merge(other.first_events)
        self.durations.merge(other.durations)
        starts = [t for t in (self.start, other.start) if t is not None]
        ends = [t for t in (self.end, other.end) if t is not None]
        self.start = min(starts) if starts else None
        self.end = max(ends) if ends else None

    def window(self, measures: tuple[Measured, Measured, Measured] | None = None
               ) -> HealthWindow:
        """Return the finished window; InputError when several hops and none named.

        ``measures``: the latencies, first-event latencies and stream durations to take the
        percentiles of, instead of this tally's own (merged segment tallies' measures)."""
        latencies, first_events, durations = measures or (
            self.latencies, self.first_events, self.durations)
        hops = sorted(self.hops)
        if self.hop is None and len(hops) > 1:
            raise InputError(f"the evidence holds hops {', '.join(hops)}: set health.hop in "
                             "the policy so each request counts once")
        observation = (max(0.0, self.end - self.start)
                       if self.start is not None and self.end is not None else 0.0)
        return HealthWindow(
            samples=self.samples,
            errors=self.errors,
            counts=ErrorCounts(self.jsonrpc, self.http_5xx, self.http_4xx, self.tap,
                               self.unanswered, self.rejected),
            latency_ms=_percentiles(latencies),
            sse_first_event_ms=_percentiles(first_events),
            stream_duration_ms=_percentiles(durations),
            sse_streams=self.sse_streams,
            sse_events=self.sse_events,
            max_events_per_stream=self.max_events,
            observation_seconds=round(observation, 6),
            hop=self.hop,
        )


def compute_window(
    records: Iterable[Mapping[str, Any]], counting: ErrorCounting, hop: str | None = None
) -> HealthWindow:
    """Compute the health window of ``records`` (see the module docstring for definitions)."""
    tally = WindowTally(counting, hop)
    for record in records:
        tally.add(record)
    return tally.window()


def evaluate_health(
    window: HealthWindow, policy: HealthPolicy, baseline: HealthWindow | None = None
) -> SourceResult:
    """Judge the window against the policy thresholds and, when given, the baseline window."""
    summary = {
        "window": window.to_json(),
        "baseline": None if baseline is None else baseline.to_json(),
        "thresholds": _thresholds(policy),
    }
    if window.samples == 0:
        # Nothing else can be measured without samples; one precise reason says why.
        reason = Reason("gate.health.samples", "the health window has no samples",
                        details={"samples": 0, "minimum": policy.min_samples})
        return SourceResult("health", (reason,), summary)
    reasons: list[Reason] = []
    name = policy.latency_percentile
    if window.samples < policy.min_samples:
        reasons.append(Reason(
            "gate.health.samples",
            f"{window.samples} samples, the policy needs at least {policy.min_samples}",
            details={"samples": window.samples, "minimum": policy.min_samples}))
    rate = window.error_rate or 0.0
    if rate > policy.max_error_rate + _EPSILON:
        reasons.append(Reason(
            "gate.health.error-rate",
            f"error rate {rate:.4f} above the maximum {policy.max_error_rate:.4f}",
            details={"errorRate": rate, "maximum": policy.max_error_rate,
                     "errors": window.errors}))
    if window.latency_ms is None:
        reasons.append(Reason("gate.health.latency", "no latency could be measured",
                              details={"percentile": name}))
    elif window.latency_ms.get(name) > policy.max_latency_ms + _EPSILON:
        reasons.append(Reason(
            "gate.health.latency",
            f"{name} latency {window.latency_ms.get(name):.1f} ms above the maximum "
            f"{policy.max_latency_ms:.1f} ms",
            details={"percentile": name, "latencyMs": window.latency_ms.get(name),
                     "maximum": policy.max_latency_ms}))
    sse_max = policy.max_sse_first_event_ms
    if (sse_max is not None and window.sse_first_event_ms is not None
            and window.sse_first_event_ms.get(name) > sse_max + _EPSILON):
        reasons.append(Reason(
            "gate.health.sse-first-event",
            f"{name} SSE first-event latency {window.sse_first_event_ms.get(name):.1f} ms "
            f"above the maximum {sse_max:.1f} ms",
            details={"percentile": name, "latencyMs": window.sse_first_event_ms.get(name),
                     "maximum": sse_max}))
    if window.observation_seconds < policy.min_observation_seconds - _EPSILON:
        reasons.append(Reason(
            "gate.health.duration",
            f"observed {window.observation_seconds:.1f} s, the policy needs at least "
            f"{policy.min_observation_seconds:.1f} s",
            details={"seconds": window.observation_seconds,
                     "minimum": policy.min_observation_seconds}))
    reasons.extend(_baseline_reasons(window, policy, baseline))
    return SourceResult("health", tuple(reasons), summary)


def _baseline_reasons(
    window: HealthWindow, policy: HealthPolicy, baseline: HealthWindow | None
) -> list[Reason]:
    rule = "gate.health.baseline"
    if baseline is None:
        if policy.baseline.required:
            return [Reason(rule, "the policy requires a baseline window and none was given")]
        return []
    if baseline.samples == 0:
        return [Reason(rule, "the baseline window has no samples")]
    reasons: list[Reason] = []
    name = policy.latency_percentile
    allowed_latency = policy.baseline.max_latency_increase
    if baseline.latency_ms is None or window.latency_ms is None:
        reasons.append(Reason(rule, "latency cannot be compared with the baseline",
                              details={"percentile": name}))
    else:
        base, cand = baseline.latency_ms.get(name), window.latency_ms.get(name)
        limit = base * (1.0 + allowed_latency)
        if cand > limit + _EPSILON:
            reasons.append(Reason(
                rule,
                f"{name} latency {cand:.1f} ms is more than {allowed_latency:.0%} above the "
                f"baseline's {base:.1f} ms",
                details={"measure": "latency", "percentile": name, "candidate": cand,
                         "baseline": base, "maxIncrease": allowed_latency}))
    base_rate, cand_rate = baseline.error_rate or 0.0, window.error_rate or 0.0
    allowed_rate = policy.baseline.max_error_rate_increase
    if cand_rate > base_rate + allowed_rate + _EPSILON:
        reasons.append(Reason(
            rule,
            f"error rate {cand_rate:.4f} is more than {allowed_rate:.4f} above the baseline's "
            f"{base_rate:.4f}",
            details={"measure": "errorRate", "candidate": cand_rate, "baseline": base_rate,
                     "maxIncrease": allowed_rate}))
    return reasons


def _thresholds(policy: HealthPolicy) -> dict[str, Any]:
    return {
        "minSamples": policy.min_samples,
        "maxErrorRate": policy.max_error_rate,
        "latencyPercentile": policy.latency_percentile,
        "maxLatencyMs": policy.max_latency_ms,
        "maxSseFirstEventMs": policy.max_sse_first_event_ms,
        "minObservationSeconds": policy.min_observation_seconds,
        "countJsonrpcErrors": policy.counting.jsonrpc_errors,
        "countHttp5xx": policy.counting.http_5xx,
        "countHttp4xx": policy.counting.http_4xx,
        "baselineRequired": policy.baseline.required,
        "maxLatencyIncrease": policy.baseline.max_latency_increase,
        "maxErrorRateIncrease": policy.baseline.max_error_rate_increase,
    }


def _is_rpc_error(body: Any, events: list[Any] | None) -> bool:
    """Whether the origin answered with a JSON-RPC error: the body's, or an SSE event's."""
    if isinstance(body, ANSWERS) and body.error is not UNSET and body.method is UNSET:
        return True
    if events is not None:
        for event in events:
            data = event.data if isinstance(event, EVENTS) else None
            if isinstance(data, ANSWERS) and data.error is not UNSET and data.method is UNSET:
                return True
    return False


def _failure(
    record: RecordView, status: Any, is_rpc_error: bool, counting: ErrorCounting
) -> tuple[int, bool, bool]:
    """One sample's failure bits (``FAILED_*``, ``CLIENT_BROKE``), whether it is an error
    under ``counting``, and whether it counts as a request the client broke (rejected)."""
    # A request that never got an upstream answer is a failure whatever the policy
    # counts; the others count as the policy says.
    failed = False
    mask = 0
    if record.tapError is not None or type(status) is not int:
        failed = True
        mask = FAILED_UNANSWERED
    rejected = False
    refused = False  # an error the client's own broken request may explain
    if type(status) is int:
        if 500 <= status <= 599:
            failed = failed or counting.http_5xx
            mask |= FAILED_5XX
        elif 400 <= status <= 499:
            refused = counting.http_4xx
            mask |= FAILED_4XX
    if is_rpc_error:
        refused = refused or counting.jsonrpc_errors
        mask |= FAILED_JSONRPC
    if refused and not failed:
        if record.findings and client_broke_request(record.findings):
            mask |= CLIENT_BROKE
            rejected = True
        else:
            failed = True
    elif mask & _REFUSALS and not mask & FAILED_UNANSWERED and record.findings:
        # What another counting would ask (a segment's tallies serve every policy);
        # findings this one never reads must not stop it.
        with contextlib.suppress(ValueError, TypeError):
            if client_broke_request(record.findings):
                mask |= CLIENT_BROKE
    return mask, failed, rejected


def _egress_latest(egress: Any, latest: float | None) -> float | None:
    """``latest`` moved to the egress view's end or send time where either is later."""
    for value in (egress.endAt, egress.sentAt):
        if type(value) is not float or value - value != 0.0:
            value = _num(value)
        if value is not None and (latest is None or value > latest):
            latest = value
    return latest
