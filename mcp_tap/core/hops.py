"""Cross-hop comparison: what the box between two tap hops changed.

Topology: ``client -> hop A (outer) -> box (gateway) -> hop B (inner) -> server``. Hop B's
*origin* view is what the server answered; hop A's *origin* view is what the box passed on.
Hop A's *ingress* is what the client sent; hop B's *ingress* is what the box forwarded.
Comparing them names the box that changed a status, a body, an MCP header or SSE timing.
Pure: views in, findings out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mcp_tap.core.catalog import finding
from mcp_tap.core.eras import (
    HEADER_METHOD,
    HEADER_NAME,
    HEADER_PARAM_PREFIX,
    HEADER_PROTOCOL_VERSION,
    HEADER_SESSION_ID,
)
from mcp_tap.core.findings import Finding
from mcp_tap.core.hashing import digest
from mcp_tap.core.headers import HeaderMap

MCP_REQUEST_HEADERS = (HEADER_PROTOCOL_VERSION, HEADER_METHOD, HEADER_NAME, HEADER_SESSION_ID)


@dataclass(frozen=True, slots=True)
class HopView:
    """What one hop saw of one exchange, reduced to what the comparison needs.

    ``response_messages`` are the decoded JSON-RPC messages of the answer (the JSON body, or
    each SSE event); ``sse_times`` the arrival time (seconds) of each SSE event at this hop;
    ``request_message`` the decoded request body.
    """

    hop: str
    request_headers: HeaderMap
    request_message: Any
    status: int | None
    response_messages: tuple[Any, ...] = ()
    sse_times: tuple[float, ...] = ()
    first_byte_at: float | None = None


@dataclass(frozen=True, slots=True)
class HopThresholds:
    """When SSE timing counts as buffering (milliseconds)."""

    min_inner_spread_ms: float = 100.0
    max_outer_spread_ratio: float = 0.2
    first_event_delay_ms: float = 250.0


@dataclass(frozen=True, slots=True)
class HopComparison:
    """The findings of one outer/inner pair and the box they name."""

    box: str
    findings: tuple[Finding, ...] = field(default_factory=tuple)


def _mcp_headers(headers: HeaderMap) -> dict[str, list[str]]:
    names = list(MCP_REQUEST_HEADERS) + headers.names_with_prefix(HEADER_PARAM_PREFIX)
    return {n.lower(): headers.get_all(n) for n in names if headers.get_all(n)}


def _errors(messages: Sequence[Any]) -> list[int]:
    codes = []
    for m in messages:
        if isinstance(m, dict) and isinstance(m.get("error"), dict):
            code = m["error"].get("code")
            if isinstance(code, int) and not isinstance(code, bool):
                codes.append(code)
    return codes


def compare_hops(
    outer: HopView,
    inner: HopView,
    box: str,
    thresholds: HopThresholds | None = None,
) -> HopComparison:
    """Compare the outer and inner hop's views of one exchange; findings name ``box``."""
    t = thresholds or HopThresholds()
    where = f"box {box} (between hop {outer.hop} and hop {inner.hop})"
    found: list[Finding] = []

    before, after = _mcp_headers(outer.request_headers), _mcp_headers(inner.request_headers)
    for name in sorted(set(before) | set(after)):
        if before.get(name) != after.get(name):
            was = before.get(name, ["<absent>"])
            now = after.get(name, ["<absent>"])
            found.append(
                finding(
                    "hop.header-changed",
                    f"request header {name}: {was} at hop {outer.hop} became {now} "
                    f"at hop {inner.hop}",
                    where,
                )
            )
    if digest(outer.request_message) != digest(inner.request_message):
        found.append(
            finding("hop.body-changed", "the JSON-RPC request body changed in the box", where)
        )

    if inner.status is not None and outer.status is not None:
        inner_codes, outer_codes = (
            _errors(inner.response_messages),
            _errors(outer.response_messages),
        )
        collapsed = (
            400 <= inner.status < 500
            and inner_codes
            and (outer.status >= 500 or not set(inner_codes) & set(outer_codes))
        )
        if collapsed:
            found.append(
                finding(
                    "hop.error-collapse",
                    f"origin HTTP {inner.status} with JSON-RPC error {inner_codes[0]} became HTTP "
                    f"{outer.status}"
                    + (f" with error {outer_codes[0]}" if outer_codes else " without that error"),
                    where,
                )
            )
        else:
            if inner.status != outer.status:
                found.append(
                    finding(
                        "hop.status-changed",
                        f"HTTP {inner.status} from hop {inner.hop} reached hop "
                        f"{outer.hop} as HTTP {outer.status}",
                        where,
                    )
                )
            if digest(list(inner.response_messages)) != digest(list(outer.response_messages)):
                found.append(
                    finding(
                        "hop.body-changed", "the JSON-RPC response body changed in the box", where
                    )
                )
    found += _sse_timing(outer, inner, t, where)
    return HopComparison(box, tuple(found))


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
