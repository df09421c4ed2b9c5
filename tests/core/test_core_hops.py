"""The sans-IO cross-hop comparison (mcp_tap.core.hops.compare_hops) on constructed views.

Topology: ``client -> hop edge (outer) -> box -> hop origin (inner) -> server``. The outer
view holds what the client sent and what the box answered; the inner view holds what the
box forwarded and what the server answered. Every rule, its thresholds, and no finding
when nothing changed.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from mcp_tap.core.catalog import CATALOG
from mcp_tap.core.findings import Boundary
from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.hops import HopComparison, HopThresholds, HopView, compare_hops

BOX = "http://127.0.0.1:8080 (hop edge upstream)"

REQUEST: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 7,
    "method": "tools/call",
    "params": {
        "name": "echo",
        "arguments": {"text": "hi"},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        },
    },
}
HEADERS = HeaderMap(
    (
        ("Accept", "application/json, text/event-stream"),
        ("Content-Type", "application/json"),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "echo"),
        ("Mcp-Param-Region", "eu-west"),
        ("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
    )
)
RESULT: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 7,
    "result": {"content": [{"type": "text", "text": "hi"}], "resultType": "complete"},
}
MISMATCH: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 7,
    "error": {"code": -32020, "message": "mcp-name header does not match the body"},
}
PROGRESS = [
    {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": "p", "progress": i, "total": 4},
    }
    for i in range(1, 5)
]
STREAM = (*PROGRESS, RESULT)
STREAM_TIMES = (10.0, 10.1, 10.2, 10.3, 10.4)  # 400 ms of spread at the inner hop


def view(hop: str, **overrides: Any) -> HopView:
    """A hop's view of a clean JSON exchange; ``overrides`` replace fields."""
    base = HopView(
        hop=hop,
        request_headers=HEADERS,
        request_message=REQUEST,
        status=200,
        response_messages=(RESULT,),
    )
    return replace(base, **overrides)


def pair(
    outer: dict[str, Any] | None = None,
    inner: dict[str, Any] | None = None,
    thresholds: HopThresholds | None = None,
) -> HopComparison:
    """Compare an outer ("edge") and an inner ("origin") view built from overrides."""
    return compare_hops(
        view("edge", **(outer or {})), view("origin", **(inner or {})), BOX, thresholds
    )


def rules(comparison: HopComparison) -> list[str]:
    return [f.rule for f in comparison.findings]


def with_header(headers: HeaderMap, name: str, value: str | None) -> HeaderMap:
    """``headers`` with ``name`` replaced by ``value`` (removed when ``None``), in place."""
    out: list[tuple[str, str]] = []
    for k, v in headers.pairs:
        if k.lower() == name.lower():
            if value is not None:
                out.append((k, value))
        else:
            out.append((k, v))
    return HeaderMap(tuple(out))


# --- nothing changed: no finding ----------------------------------------------------------


class TestNoFalseFindings:
    def test_identical_json_exchange(self) -> None:
        comparison = pair()
        assert comparison.findings == ()
        assert comparison.box == BOX

    def test_identical_error_answer(self) -> None:
        answer = {"status": 400, "response_messages": (MISMATCH,)}
        assert rules(pair(answer, answer)) == []

    def test_identical_sse_stream_forwarded_as_it_came(self) -> None:
        inner = {"response_messages": STREAM, "sse_times": STREAM_TIMES}
        outer = {
            "response_messages": STREAM,
            "sse_times": tuple(t + 0.003 for t in STREAM_TIMES),
        }
        assert rules(pair(outer, inner)) == []

    def test_notification_202_with_empty_body(self) -> None:
        note = {
            "request_message": {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
            "status": 202,
            "response_messages": (),
        }
        assert rules(pair(note, note)) == []

    def test_non_mcp_headers_may_change(self) -> None:
        # A gateway adds Via, rewrites traceparent's parent id, drops Accept-Encoding...
        new_parent = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"
        forwarded = with_header(HEADERS, "traceparent", new_parent)
        forwarded = HeaderMap(
            (*forwarded.pairs, ("Via", "1.1 gateway"), ("X-Forwarded-For", "10.0.0.1"))
        )
        assert rules(pair(inner={"request_headers": forwarded})) == []

    def test_header_name_case_and_order_do_not_matter(self) -> None:
        lowered = HeaderMap(tuple((k.lower(), v) for k, v in reversed(HEADERS.pairs)))
        assert rules(pair(inner={"request_headers": lowered})) == []

    def test_json_re_serialisation_is_no_body_change(self) -> None:
        # The views hold parsed JSON; key order is not a change.
        reordered = dict(reversed(list(REQUEST.items())))
        answer = dict(reversed(list(RESULT.items())))
        comparison = pair(inner={"request_message": reordered, "response_messages": (answer,)})
        assert rules(comparison) == []

    def test_no_answer_at_either_hop_compares_only_the_request(self) -> None:
        # A tap error (no upstream status) at the inner hop is not the box's doing.
        comparison = pair(
            outer={"status": 502, "response_messages": ()},
            inner={"status": None, "response_messages": ()},
        )
        assert rules(comparison) == []


# --- hop.header-changed ---------------------------------------------------------------------


class TestHeaderChanged:
    @pytest.mark.parametrize(
        ("name", "value"),
        [
            ("Mcp-Name", "add"),
            ("Mcp-Name", None),
            ("Mcp-Method", "tools/list"),
            ("MCP-Protocol-Version", "2025-11-25"),
            ("MCP-Protocol-Version", None),
            ("Mcp-Param-Region", "us-east"),
            ("Mcp-Param-Region", None),
        ],
    )
    def test_rewritten_or_dropped(self, name: str, value: str | None) -> None:
        comparison = pair(inner={"request_headers": with_header(HEADERS, name, value)})
        assert rules(comparison) == ["hop.header-changed"]
        (found,) = comparison.findings
        assert name.lower() in found.message
        assert ("<absent>" in found.message) == (value is None)

    def test_added_by_the_box(self) -> None:
        added = HeaderMap((*HEADERS.pairs, ("Mcp-Session-Id", "s-1"), ("Mcp-Param-Extra", "x")))
        comparison = pair(inner={"request_headers": added})
        assert rules(comparison) == ["hop.header-changed", "hop.header-changed"]
        assert all("['<absent>'] at hop edge" in f.message for f in comparison.findings)

    def test_message_names_both_values_and_hops(self) -> None:
        comparison = pair(inner={"request_headers": with_header(HEADERS, "Mcp-Name", "add")})
        (found,) = comparison.findings
        assert found.message == (
            "request header mcp-name: ['echo'] at hop edge became ['add'] at hop origin"
        )

    def test_duplicate_added_is_a_change(self) -> None:
        doubled = HeaderMap((*HEADERS.pairs, ("Mcp-Name", "add")))
        assert rules(pair(inner={"request_headers": doubled})) == ["hop.header-changed"]


# --- hop.body-changed -------------------------------------------------------------------------


class TestBodyChanged:
    def test_request_body_rewritten(self) -> None:
        changed = {**REQUEST, "params": {**REQUEST["params"], "name": "add"}}
        comparison = pair(inner={"request_message": changed})
        assert rules(comparison) == ["hop.body-changed"]
        assert "request body" in comparison.findings[0].message

    def test_response_body_rewritten(self) -> None:
        changed = {**RESULT, "result": {**RESULT["result"], "content": []}}
        comparison = pair(outer={"response_messages": (changed,)})
        assert rules(comparison) == ["hop.body-changed"]
        assert "response body" in comparison.findings[0].message

    def test_error_message_rewritten_keeps_code(self) -> None:
        # Same status, same code, other text: a body change, not a collapse.
        reworded = {**MISMATCH, "error": {"code": -32020, "message": "bad header"}}
        comparison = pair(
            outer={"status": 400, "response_messages": (reworded,)},
            inner={"status": 400, "response_messages": (MISMATCH,)},
        )
        assert rules(comparison) == ["hop.body-changed"]

    def test_sse_event_dropped(self) -> None:
        comparison = pair(
            outer={"response_messages": STREAM[1:], "sse_times": STREAM_TIMES[1:]},
            inner={"response_messages": STREAM, "sse_times": STREAM_TIMES},
        )
        assert rules(comparison) == ["hop.body-changed"]


# --- hop.status-changed -----------------------------------------------------------------------


class TestStatusChanged:
    def test_success_status_changed(self) -> None:
        comparison = pair(outer={"status": 201})
        assert rules(comparison) == ["hop.status-changed"]
        assert comparison.findings[0].message == (
            "HTTP 200 from hop origin reached hop edge as HTTP 201"
        )

    def test_5xx_to_other_5xx(self) -> None:
        comparison = pair(
            outer={"status": 502, "response_messages": ()},
            inner={"status": 500, "response_messages": ()},
        )
        assert rules(comparison) == ["hop.status-changed"]

    def test_4xx_without_jsonrpc_error_is_not_a_collapse(self) -> None:
        # Nothing JSON-RPC to collapse: a plain status change (and no body either side).
        comparison = pair(
            outer={"status": 500, "response_messages": ()},
            inner={"status": 404, "response_messages": ()},
        )
        assert rules(comparison) == ["hop.status-changed"]

    def test_status_and_body_changed_together(self) -> None:
        changed = {**RESULT, "result": {"content": [], "resultType": "complete"}}
        comparison = pair(outer={"status": 203, "response_messages": (changed,)})
        assert rules(comparison) == ["hop.status-changed", "hop.body-changed"]

    def test_error_kept_but_status_changed(self) -> None:
        # The box kept the JSON-RPC error but answered 200: not a collapse, a status change.
        comparison = pair(
            outer={"status": 200, "response_messages": (MISMATCH,)},
            inner={"status": 400, "response_messages": (MISMATCH,)},
        )
        assert rules(comparison) == ["hop.status-changed"]


# --- hop.error-collapse -------------------------------------------------------------------------


class TestErrorCollapse:
    def test_400_32020_becomes_500_with_generic_body(self) -> None:
        comparison = pair(
            outer={"status": 500, "response_messages": ()},
            inner={"status": 400, "response_messages": (MISMATCH,)},
        )
        # One finding for one fault: no extra status-changed or body-changed.
        assert rules(comparison) == ["hop.error-collapse"]
        assert comparison.findings[0].message == (
            "origin HTTP 400 with JSON-RPC error -32020 became HTTP 500 without that error"
        )

    def test_5xx_even_when_the_error_survives(self) -> None:
        comparison = pair(
            outer={"status": 503, "response_messages": (MISMATCH,)},
            inner={"status": 400, "response_messages": (MISMATCH,)},
        )
        assert rules(comparison) == ["hop.error-collapse"]
        assert comparison.findings[0].message.endswith("HTTP 503 with error -32020")

    def test_error_replaced_by_another_code(self) -> None:
        internal = {"jsonrpc": "2.0", "id": 7, "error": {"code": -32603, "message": "internal"}}
        comparison = pair(
            outer={"status": 400, "response_messages": (internal,)},
            inner={"status": 400, "response_messages": (MISMATCH,)},
        )
        assert rules(comparison) == ["hop.error-collapse"]

    def test_error_replaced_by_a_result(self) -> None:
        comparison = pair(
            outer={"status": 200, "response_messages": (RESULT,)},
            inner={"status": 400, "response_messages": (MISMATCH,)},
        )
        assert rules(comparison) == ["hop.error-collapse"]

    def test_404_method_not_found_to_502(self) -> None:
        missing = {"jsonrpc": "2.0", "id": 7, "error": {"code": -32601, "message": "no such"}}
        comparison = pair(
            outer={"status": 502, "response_messages": ()},
            inner={"status": 404, "response_messages": (missing,)},
        )
        assert rules(comparison) == ["hop.error-collapse"]

    def test_server_5xx_is_never_a_collapse(self) -> None:
        internal = {"jsonrpc": "2.0", "id": 7, "error": {"code": -32603, "message": "internal"}}
        comparison = pair(
            outer={"status": 500, "response_messages": (internal,)},
            inner={"status": 500, "response_messages": (internal,)},
        )
        assert rules(comparison) == []

    def test_bool_code_is_not_an_error_code(self) -> None:
        odd = {"jsonrpc": "2.0", "id": 7, "error": {"code": True, "message": "x"}}
        comparison = pair(
            outer={"status": 500, "response_messages": ()},
            inner={"status": 400, "response_messages": (odd,)},
        )
        assert rules(comparison) == ["hop.status-changed", "hop.body-changed"]


# --- hop.sse-buffered -------------------------------------------------------------------------


def sse(
    inner_times: tuple[float, ...],
    outer_times: tuple[float, ...],
    thresholds: HopThresholds | None = None,
) -> HopComparison:
    """The same stream (its last ``len(times)`` messages) seen at both hops at these times."""
    assert len(inner_times) == len(outer_times)
    messages = STREAM[-len(inner_times) :]
    return pair(
        outer={"response_messages": messages, "sse_times": outer_times},
        inner={"response_messages": messages, "sse_times": inner_times},
        thresholds=thresholds,
    )


class TestSSEBuffered:
    def test_held_back_and_flushed_together(self) -> None:
        comparison = sse(STREAM_TIMES, (10.45,) * 5)
        assert rules(comparison) == ["hop.sse-buffered"]
        assert comparison.findings[0].message == (
            "5 events spread over 400 ms at hop origin arrived within 0 ms at hop edge: "
            "held back and flushed together"
        )

    def test_one_finding_even_when_the_first_event_is_also_late(self) -> None:
        comparison = sse(STREAM_TIMES, (11.0,) * 5)
        assert rules(comparison) == ["hop.sse-buffered"]
        assert "flushed together" in comparison.findings[0].message

    def test_inner_spread_threshold_is_inclusive(self) -> None:
        at_min = (0.0, 0.05, 0.1)
        below = (0.0, 0.05, 0.099)
        flushed = (0.101,) * 3
        assert rules(sse(at_min, flushed)) == ["hop.sse-buffered"]
        assert rules(sse(below, flushed)) == []

    def test_outer_spread_ratio_is_inclusive(self) -> None:
        # Binary-exact times; the first-event delay rule is switched off to isolate the ratio.
        t = HopThresholds(max_outer_spread_ratio=0.25, first_event_delay_ms=10_000.0)
        inner = (0.0, 0.25, 0.5)  # 500 ms
        assert rules(sse(inner, (0.5, 0.5625, 0.625), t)) == ["hop.sse-buffered"]  # 125 ms
        assert rules(sse(inner, (0.5, 0.5625, 0.6251), t)) == []  # 125.1 ms > 0.25 x 500

    def test_custom_thresholds(self) -> None:
        strict = HopThresholds(min_inner_spread_ms=500.0, first_event_delay_ms=10_000.0)
        assert rules(sse(STREAM_TIMES, (10.45,) * 5, strict)) == []
        # With the delay rule left on, a flush 450 ms after the first event still counts.
        assert rules(sse(STREAM_TIMES, (10.45,) * 5, HopThresholds(min_inner_spread_ms=500.0))) == [
            "hop.sse-buffered"
        ]
        loose = HopThresholds(max_outer_spread_ratio=0.9)
        spread_out = (10.1, 10.2, 10.3, 10.35, 10.4)  # 300 ms of 400 ms: 0.75, 100 ms late
        assert rules(sse(STREAM_TIMES, spread_out)) == []
        assert rules(sse(STREAM_TIMES, spread_out, loose)) == ["hop.sse-buffered"]

    def test_first_event_delayed(self) -> None:
        late = tuple(t + 0.3 for t in STREAM_TIMES)  # spread kept, 300 ms late
        comparison = sse(STREAM_TIMES, late)
        assert rules(comparison) == ["hop.sse-buffered"]
        assert comparison.findings[0].message == (
            "the first event reached hop edge 300 ms after hop origin"
        )

    def test_first_event_delay_threshold_is_exclusive(self) -> None:
        assert rules(sse(STREAM_TIMES, tuple(t + 0.25 for t in STREAM_TIMES))) == []
        custom = HopThresholds(first_event_delay_ms=50.0)
        assert rules(sse(STREAM_TIMES, tuple(t + 0.1 for t in STREAM_TIMES), custom)) == [
            "hop.sse-buffered"
        ]

    def test_single_event_uses_only_the_delay_rule(self) -> None:
        assert rules(sse((1.0,), (1.0,))) == []
        assert rules(sse((1.0,), (1.5,))) == ["hop.sse-buffered"]

    def test_bursty_origin_is_not_buffering(self) -> None:
        # The server itself wrote everything at once: nothing for the box to hold back.
        assert rules(sse((5.0,) * 5, (5.001,) * 5)) == []

    def test_sse_at_one_hop_only_has_no_timing_finding(self) -> None:
        comparison = pair(
            outer={"response_messages": STREAM, "sse_times": ()},
            inner={"response_messages": STREAM, "sse_times": STREAM_TIMES},
        )
        assert rules(comparison) == []


# --- what every hop finding carries -----------------------------------------------------------


def test_findings_name_the_box_and_both_hops() -> None:
    comparison = pair(
        outer={"status": 500, "response_messages": (), "sse_times": ()},
        inner={
            "request_headers": with_header(HEADERS, "Mcp-Name", "add"),
            "status": 400,
            "response_messages": (MISMATCH,),
        },
    )
    assert rules(comparison) == ["hop.header-changed", "hop.error-collapse"]
    for found in comparison.findings:
        assert found.where == f"box {BOX} (between hop edge and hop origin)"
        assert found.boundary is Boundary.HOP
        assert found.code is None
        assert found.rule in CATALOG


def test_default_thresholds_match_the_documented_ones() -> None:
    assert HopThresholds() == HopThresholds(100.0, 0.2, 250.0)
