"""What the page shows, finished: plain frozen values computed by :mod:`.tally`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mcp_tap.report.bounds import DEFAULT_BOUNDS, Bounds, Samples
from mcp_tap.version import __version__


@dataclass(frozen=True, slots=True)
class BundleSummary:
    """One bundle: where it is, whether it verified, and what it holds."""

    path: str
    ok: bool
    records: int
    exchanges: int
    errors: int = 0
    warnings: int = 0
    problems: tuple[str, ...] = ()
    intact: bool = True  # no error but stated loss: see VerifyReport.intact


@dataclass(frozen=True, slots=True)
class ExchangeRef:
    """A pointer to one exchange: its id, the page anchor of its view, hop and digest."""

    exchange_id: str
    anchor: str
    hop: str = ""
    digest: str = ""


@dataclass(frozen=True, slots=True)
class RuleGroup:
    """Every finding of one rule: strength, citation, count, first and last example."""

    rule: str
    strength: str
    cite: str
    boundary: str
    code: int | None
    count: int
    exchanges: int
    first: ExchangeRef | None
    last: ExchangeRef | None
    message: str
    by_hop: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class HopSummary:
    """What one hop forwarded: exchanges, and egress that differs from the origin's answer."""

    hop: str
    exchanges: int
    status_changed: int
    body_changed: int
    client_gone: int
    tap_errors: int
    hop_findings: int


@dataclass(frozen=True, slots=True)
class HopBox:
    """The hop-comparison records of one box between two hops: pairs, and changes by kind."""

    box: str
    between: str
    pairs: int
    changed: Mapping[str, int]
    other: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class HopChange:
    """One pair the box between two hops changed: the rules, what changed, the exchanges."""

    box: str
    between: str
    rules: tuple[str, ...]
    messages: tuple[str, ...]
    exchanges: tuple[ExchangeRef, ...]


@dataclass(frozen=True, slots=True)
class ExchangeRow:
    """One exchange in the index table."""

    ref: ExchangeRef
    era: str
    method: str
    name: str
    rpc_id: str
    status: str
    latency_ms: float | None
    rules: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class StreamRow:
    """One SSE answer: when its first event arrived and how many followed."""

    ref: ExchangeRef
    method: str
    name: str
    events: int
    first_event_ms: float
    total_ms: float | None


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One recorded SSE event, as the evidence holds it (already redacted)."""

    offset_ms: float | None
    event: str
    event_id: str
    data: str


@dataclass(frozen=True, slots=True)
class ExchangeDetail:
    """One exchange for the exchange view: only what the evidence recorded (redacted there).

    Bodies are pretty JSON (or recorded text) cut at the bound's ``body_chars``; headers
    and SSE events are cut at theirs, and ``cut`` says what was cut.
    """

    ref: ExchangeRef
    era: str
    method: str
    name: str
    rpc_id: str
    status: str
    latency_ms: float | None
    findings: tuple[tuple[str, str, str], ...]
    request_line: str
    request_headers: tuple[tuple[str, str], ...]
    request_body: str
    response_headers: tuple[tuple[str, str], ...]
    response_body: str
    events: tuple[SseEvent, ...]
    event_count: int
    tap_error: str
    cut: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class HealthView:
    """The health window as the gate counts it, and the exchanges that counted as errors.

    ``hop`` is the policy's ``health.hop`` (None: every hop); ``kinds`` counts errors by
    kind (one sample may have several); ``error_refs`` is a bounded sample, first seen first;
    ``rejected`` the error answers to requests that broke a request rule (the client's doing,
    which the gate does not count as errors).
    """

    hop: str | None
    samples: int
    errors: int
    kinds: Mapping[str, int]
    error_refs: tuple[tuple[ExchangeRef, tuple[str, ...]], ...]
    start: float | None
    end: float | None
    counting: Mapping[str, bool]
    rejected: int = 0  # the client's own broken requests, refused: not errors


@dataclass(frozen=True, slots=True)
class ReportData:
    """Everything the page shows, computed from the evidence (see :func:`.tally.collect`)."""

    generated: str
    bundles: tuple[BundleSummary, ...]
    exchanges: int
    eras: Mapping[str, int]
    rules: tuple[RuleGroup, ...]
    hop_summaries: tuple[HopSummary, ...]
    hop_boxes: tuple[HopBox, ...]
    hop_changes: tuple[HopChange, ...]
    hop_comparisons: int
    rows: tuple[ExchangeRow, ...]
    latency: Samples
    latency_by_hop: Mapping[str, Samples]
    streams: tuple[StreamRow, ...]
    stream_count: int
    first_event: Samples
    first_event_by_hop: Mapping[str, Samples]
    details: tuple[ExchangeDetail, ...]
    health: HealthView
    decision: Mapping[str, Any] | None = None
    decision_note: str = ""
    policy_path: str = ""
    gaps: int = 0
    clean_exchanges: int = 0
    bounds: Bounds = DEFAULT_BOUNDS
    version: str = field(default=__version__)
    # What each box between two hops changed, most important first (the gate's rows).
    box_changes: Mapping[str, Any] = field(default_factory=dict)

    @property
    def hops(self) -> tuple[str, ...]:
        """The hops that recorded exchanges."""
        return tuple(h.hop for h in self.hop_summaries)

    def detail_anchors(self) -> frozenset[str]:
        """The anchors the exchange view holds (a link elsewhere has no target)."""
        return frozenset(d.ref.anchor for d in self.details)
