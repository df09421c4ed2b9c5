"""Cross-hop comparison: what the box between two tap hops changed, and which of those
changes are findings.

Topology: ``client -> hop A (outer) -> box -> hop B (inner) -> server``. Hop A's forwarded
view is what entered the box, hop B's ingress what left it; hop B's *origin* view is what the
server answered, hop A's *origin* view what the box passed on. :mod:`mcp_tap.core.hopdiff`
lists the changes path by path; this module decides what each means for the kind of box:

* ``http`` (a load balancer, mesh or HTTP proxy): bodies and MCP headers must come through
  unchanged (``hop.body-changed``, ``hop.header-changed``, ``hop.status-changed``).
* ``mcp-gateway`` (an MCP server to the client and an MCP client to the origin): what a
  gateway changes by being one is an expected change; what the specification lets it change
  is a recorded change the gate policy may block; what puts the client or the origin at risk
  is a finding of its own rule (:data:`GATEWAY_FINDINGS`).

Both kinds: ``hop.error-collapse`` and ``hop.sse-buffered``. Pure: views in, findings out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mcp_tap.core.catalog import CATALOG, finding
from mcp_tap.core.eras import META_PROTOCOL_VERSION
from mcp_tap.core.findings import Finding
from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.hopdiff import (
    ABSENT,
    BOX_GATEWAY,
    BOX_HTTP,
    BOX_KINDS,
    DISPOSITIONS,
    EXPECTED,
    GATEWAY_FINDINGS,
    RECORDED,
    REMOVED,
    REQUEST,
    Change,
    diff_pair,
    resolve,
    tokens,
)

__all__ = [
    "BOX_GATEWAY", "BOX_HTTP", "BOX_KINDS", "DISPOSITIONS", "EXPECTED", "GATEWAY_FINDINGS",
    "RECORDED", "HopComparison", "HopThresholds", "HopView", "Judged", "compare_hops",
]

@dataclass(frozen=True, slots=True)
class HopView:
    """What one hop saw of one exchange, reduced to what the comparison needs.

    ``request_headers`` are the headers the hop received, ``forwarded_headers`` those it sent
    on (None: the same); ``response_messages`` the decoded JSON-RPC messages of the answer
    (the JSON body, or each SSE event); ``sse_times`` the arrival time (seconds) of each SSE
    event at this hop; ``request_message`` the decoded request body.
    """

    hop: str
    request_headers: HeaderMap
    request_message: Any
    status: int | None
    response_messages: tuple[Any, ...] = ()
    sse_times: tuple[float, ...] = ()
    first_byte_at: float | None = None
    forwarded_headers: HeaderMap | None = None
    response_headers: HeaderMap | None = None


@dataclass(frozen=True, slots=True)
class HopThresholds:
    """When SSE timing counts as buffering (milliseconds)."""

    min_inner_spread_ms: float = 100.0
    max_outer_spread_ratio: float = 0.2
    first_event_delay_ms: float = 250.0


@dataclass(frozen=True, slots=True)
class Judged:
    """One change and what it means for the box: a rule id, ``expected`` or ``recorded``."""

    change: Change
    disposition: str


@dataclass(frozen=True, slots=True)
class HopComparison:
    """The findings of one outer/inner pair, the box they name, and every change it made
    (most important first: findings' changes, recorded ones, expected ones)."""

    box: str
    findings: tuple[Finding, ...] = field(default_factory=tuple)
    changes: tuple[Judged, ...] = ()
    box_kind: str = BOX_HTTP
    dropped: int = 0


def _errors(messages: Sequence[Any]) -> list[int]:
    codes = []
    for m in messages:
        if isinstance(m, dict) and isinstance(m.get("error"), dict):
            code = m["error"].get("code")
            if isinstance(code, int) and not isinstance(code, bool):
                codes.append(code)
    return codes


def _collapsed(outer: HopView, inner: HopView) -> str | None:
    """The ``hop.error-collapse`` message when the box collapsed an origin 4xx error."""
    if inner.status is None or outer.status is None:
        return None
    inner_codes, outer_codes = _errors(inner.response_messages), _errors(outer.response_messages)
    if not (400 <= inner.status < 500 and inner_codes):
        return None
    if outer.status < 500 and set(inner_codes) & set(outer_codes):
        return None
    return (f"origin HTTP {inner.status} with JSON-RPC error {inner_codes[0]} became HTTP "
            f"{outer.status}"
            + (f" with error {outer_codes[0]}" if outer_codes else " without that error"))


def _mirrors(name: str, message: Any, value: Any) -> bool:
    """Whether the inner request's header ``name`` still mirrors its own body."""
    if not isinstance(message, dict) or not isinstance(value, str):
        return False
    params = message.get("params")
    if not isinstance(params, dict):
        params = {}
    if name == "mcp-method":
        return value == message.get("method")
    if name == "mcp-name":
        return value in (params.get("name"), params.get("uri"))
    if name == "mcp-protocol-version":
        meta = params.get("_meta")
        return isinstance(meta, dict) and value == meta.get(META_PROTOCOL_VERSION)
    return False  # Mcp-Param-*: see _disposition


def _legacy(message: Any) -> bool:
    """A request without the modern protocol version in ``_meta`` (the handshake era)."""
    return resolve(message, "/params/_meta/" + META_PROTOCOL_VERSION.replace("/", "~1")) is ABSENT


def _disposition(change: Change, kind: str, inner: HopView, arguments_changed: bool) -> str:
    """What ``change`` means for a box of ``kind``."""
    meaning = DISPOSITIONS[kind].get(change.cls, RECORDED)
    if kind != BOX_GATEWAY or change.cls != "mirrored-header" or change.direction != REQUEST:
        return meaning
    # A gateway's own request carries its own mirrored headers: a change that still mirrors
    # its body is recorded; one that no longer does (dropped, or rewritten alone) is a fault.
    name = change.path.removeprefix("header:")
    if change.kind == REMOVED:
        return RECORDED if _legacy(inner.request_message) else "hop.header-changed"
    if name.startswith("mcp-param-"):
        return RECORDED if arguments_changed else "hop.header-changed"
    return RECORDED if _mirrors(name, inner.request_message, change.after) else "hop.header-changed"


_ORDER = {"must": 0, "should": 1}


def _rank(judged: Judged) -> tuple[int, str]:
    rule = CATALOG.get(judged.disposition)
    rank = (_ORDER.get(str(rule.strength), 2) if rule is not None
            else 3 if judged.disposition == RECORDED else 4)
    return rank, judged.change.direction


def _names(changes: Sequence[Change]) -> str:
    """The last tokens of the changes' paths (a capability, a parameter), deduplicated."""
    seen: list[str] = []
    for c in changes:
        parts = tokens(c.path) if c.path.startswith("/") else [c.path]
        name = parts[-1] if parts else c.path
        if name not in seen:
            seen.append(name)
    return ", ".join(seen[:8]) + (", ..." if len(seen) > 8 else "")


def _message(rule: str, direction: str, changes: Sequence[Change], outer: str,
             inner: str) -> str:
    paths = ", ".join(c.path or "/" for c in changes[:4]) + (", ..." if len(changes) > 4 else "")
    if rule == "hop.body-changed":
        return (f"the JSON-RPC {direction} body changed in the box: {len(changes)} change(s) "
                f"at {paths}")
    if rule == "hop.header-changed":
        c = changes[0]
        was = c.before if isinstance(c.before, list) else (
            ["<absent>"] if c.before is ABSENT else [c.before])
        now = c.after if isinstance(c.after, list) else (
            ["<absent>"] if c.after is ABSENT else [c.after])
        return (f"{direction} header {c.path.removeprefix('header:')}: {was} at hop {outer} "
                f"became {now} at hop {inner}")
    if rule == "hop.status-changed":
        c = changes[0]
        return f"HTTP {c.before} from hop {inner} reached hop {outer} as HTTP {c.after}"
    if rule == "hop.gateway.capability-widened":
        return ("the gateway declared to the origin client capabilities the client did not "
                f"declare: {_names(changes)}")
    if rule == "hop.gateway.param-added":
        return f"the gateway added request parameters the client did not send: {_names(changes)}"
    if rule == "hop.gateway.error-recoded":
        c = changes[0]
        return f"the origin's JSON-RPC error {c.before} reached the client as {c.after}"
    return f"{len(changes)} change(s) at {paths}"


def _findings(judged: Sequence[Judged], outer: str, inner: str, where: str) -> list[Finding]:
    """One finding per (rule, direction), or per header for ``hop.header-changed``."""
    groups: dict[tuple[str, str, str], list[Change]] = {}
    for j in judged:
        if j.disposition in (EXPECTED, RECORDED):
            continue
        key = (j.disposition, j.change.direction,
               j.change.path if j.disposition == "hop.header-changed" else "")
        groups.setdefault(key, []).append(j.change)
    ordered = sorted(groups.items(), key=lambda item: (
        item[0][0] != "hop.status-changed", item[0][1] != REQUEST, item[0][2]))
    return [
        finding(rule, _message(rule, direction, changes, outer, inner), where,
                paths=tuple(c.path for c in changes))
        for (rule, direction, _), changes in ordered
    ]


def compare_hops(
    outer: HopView,
    inner: HopView,
    box: str,
    thresholds: HopThresholds | None = None,
    box_kind: str = BOX_HTTP,
) -> HopComparison:
    """Compare the outer and inner hop's views of one exchange; findings name ``box``."""
    t = thresholds or HopThresholds()
    where = f"box {box} (between hop {outer.hop} and hop {inner.hop})"
    diff = diff_pair(
        outer.request_message, inner.request_message,
        outer.forwarded_headers or outer.request_headers, inner.request_headers,
        inner.response_messages, outer.response_messages,
        inner.response_headers, outer.response_headers, inner.status, outer.status)
    arguments_changed = any(c.path.startswith("/params/arguments") for c in diff.changes)
    collapse = _collapsed(outer, inner)
    judged = [
        Judged(c, "hop.error-collapse" if collapse is not None and c.direction != REQUEST
               and c.cls in ("status", "error-recoded", "error-detail", "envelope", "result")
               else _disposition(c, box_kind, inner, arguments_changed))
        for c in diff.changes
    ]
    found = _findings([j for j in judged if j.disposition != "hop.error-collapse"],
                      outer.hop, inner.hop, where)
    if collapse is not None:
        paths = tuple(j.change.path for j in judged if j.disposition == "hop.error-collapse")
        found.append(finding("hop.error-collapse", collapse, where, paths=paths))
    found += _sse_timing(outer, inner, t, where)
    ranked = tuple(sorted(judged, key=_rank))
    return HopComparison(box, tuple(found), ranked, box_kind, diff.dropped)


def _sse_timing(outer: HopView, inner: HopView, t: HopThresholds, where: str) -> list[Finding]:
    if not inner.sse_times or not outer.sse_times:
        return []
    inner_spread = (inner.sse_times[-1] - inner.sse_times[0]) * 1000
    outer_spread = (outer.sse_times[-1] - outer.sse_times[0]) * 1000
    n = min(len(inner.sse_times), len(outer.sse_times))
    if (
        n >= 2
        and inner_spread >= t.min_inner_spread_ms
        and outer_spread <= inner_spread * t.max_outer_spread_ratio
    ):
        return [
            finding(
                "hop.sse-buffered",
                f"{n} events spread over {inner_spread:.0f} ms at hop {inner.hop} arrived "
                f"within {outer_spread:.0f} ms at hop {outer.hop}: held back and flushed "
                "together",
                where,
            )
        ]
    delay = (outer.sse_times[0] - inner.sse_times[0]) * 1000
    if delay > t.first_event_delay_ms:
        return [
            finding(
                "hop.sse-buffered",
                f"the first event reached hop {outer.hop} {delay:.0f} ms after hop {inner.hop}",
                where,
            )
        ]
    return []
