"""Two hops in one tap process around a real, deliberately faulty gateway.

Topology (all real HTTP on loopback, no mocks)::

    httpx / SDK client -> tap hop "edge" -> Gateway (aiohttp, tests/support/gateways.py)
                       -> tap hop "origin" -> demo origin (the real MCP Python SDK server)

Both hops run in ONE :class:`TapServer`. The edge hop adds a W3C ``traceparent`` when the
client sent none, the gateway propagates it like any gateway, and the tap pairs the two
hops' exchanges by trace id + JSON-RPC id into a ``kind: "hop-comparison"`` record that
names the box between them. Each gateway fault must come out as exactly its ``hop.*``
rule, naming the gateway; a clean gateway must produce none.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from gateways import GENERIC_500, Fault, Gateway
from peers import (
    MODERN_VERSION,
    modern_meta,
    parse_sse,
    raw_modern_request,
    run_origin,
    sdk_call_tool,
)
from taps import hop_url, records, running_tap, tap_options

from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.hops import HopThresholds, HopView
from mcp_tap.proxy.correlate import Correlator, Pending
from mcp_tap.proxy.options import HopComparisonOptions, RecordingOptions, TracingOptions
from mcp_tap.proxy.server import TapServer

SLOW_STEPS = 25
"""``slow_count`` steps: the demo origin sleeps 20 ms per step, so its SSE stream spreads
over at least ~500 ms; a buffering gateway releases it in one write (~0 ms)."""


@pytest.fixture(scope="module")
def origin() -> Iterator[str]:
    """One real SDK origin subprocess for the module; yields its base URL (no ``/mcp``)."""
    with run_origin() as url:
        yield url.removesuffix("/mcp")


@contextlib.asynccontextmanager
async def chain(
    evidence: Path, origin: str, fault: Fault = "none", **sections: Any
) -> AsyncIterator[tuple[TapServer, Gateway]]:
    """client -> edge -> gateway(fault) -> origin hop -> SDK origin, in one tap.

    The gateway starts first (its URL is hop edge's upstream); once the tap listens, the
    gateway is pointed at hop origin's port.
    """
    async with Gateway(fault=fault) as gateway:
        options = tap_options(
            evidence, hops=[("edge", gateway.url), ("origin", origin)], **sections
        )
        async with running_tap(options) as server:
            gateway.upstream = hop_url(server, "origin", path="")
            yield server, gateway


async def post(server: TapServer, headers: dict[str, str], body: Any) -> httpx.Response:
    """POST through the edge hop (the client's view)."""
    async with httpx.AsyncClient(timeout=30) as client:
        return await client.post(hop_url(server, "edge"), headers=headers, json=body)


def exchange(recs: list[dict[str, Any]], hop: str, rpc_id: Any) -> dict[str, Any]:
    """The one exchange record of ``hop`` for JSON-RPC id ``rpc_id``."""
    found = [
        r for r in recs if r["kind"] == "exchange" and r["hop"] == hop and r["rpcId"] == rpc_id
    ]
    assert len(found) == 1, f"{len(found)} {hop} exchanges with id {rpc_id!r}"
    return found[0]


def comparisons(recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in recs if r["kind"] == "hop-comparison"]


def comparison_of(recs: list[dict[str, Any]], rpc_id: Any) -> dict[str, Any]:
    """The hop-comparison of the request with ``rpc_id``, checked against both exchanges."""
    edge, inner = exchange(recs, "edge", rpc_id), exchange(recs, "origin", rpc_id)
    assert edge["traceId"] == inner["traceId"], "the gateway did not propagate traceparent"
    found = [c for c in comparisons(recs) if c["traceId"] == edge["traceId"]]
    assert len(found) == 1
    comp = found[0]
    assert comp["between"] == ["edge", "origin"]
    assert comp["exchangeIds"] == [edge["exchangeId"], inner["exchangeId"]]
    return comp


def assert_names_gateway(comp: dict[str, Any], gateway: Gateway) -> None:
    assert comp["box"] == f"{gateway.url} (hop edge upstream)"
    for f in comp["findings"]:
        assert gateway.url in f["where"]
        assert f["boundary"] == "hop"


def rules(items: list[dict[str, Any]]) -> list[str]:
    return [f["rule"] for f in items]


def header(rec: dict[str, Any], name: str) -> list[str]:
    """Every value of request header ``name`` a hop received (its ingress view)."""
    return HeaderMap.of(rec["ingress"]["headers"]).get_all(name)


def error_code(body: Any) -> Any:
    return body["error"]["code"] if isinstance(body, dict) and "error" in body else None


def echo(rpc_id: int, text: str = "hi") -> tuple[dict[str, str], dict[str, Any]]:
    return raw_modern_request(
        "tools/call", {"name": "echo", "arguments": {"text": text}}, request_id=rpc_id
    )


def slow_count(rpc_id: int) -> tuple[dict[str, str], dict[str, Any]]:
    """A call answered as an SSE stream: one progress notification per step, then the result."""
    return raw_modern_request(
        "tools/call",
        {"name": "slow_count", "arguments": {"n": SLOW_STEPS}},
        request_id=rpc_id,
        meta=modern_meta(progress_token=f"progress-{rpc_id}"),
    )


def header_mismatch(rpc_id: int) -> tuple[dict[str, str], dict[str, Any]]:
    """``Mcp-Name: add`` for a body calling ``echo``: the SDK answers 400 / -32020."""
    headers, body = echo(rpc_id)
    return {**headers, "Mcp-Name": "add"}, body


# --- (a) error collapse ---------------------------------------------------------------------


@pytest.mark.parametrize("recording", ["inline", "process"])
async def test_gateway_collapsing_400_into_500_is_error_collapse(
    tmp_path: Path, origin: str, recording: str
) -> None:
    mode = RecordingOptions(mode=recording)  # the recording process pairs hops the same way
    async with chain(tmp_path, origin, "collapse-errors", recording=mode) as (server, gateway):
        headers, body = header_mismatch(11)
        answer = await post(server, headers, body)
    # Transparency: the client got exactly what the gateway sent.
    assert answer.status_code == 500
    assert answer.content == GENERIC_500

    recs = records(server)
    inner = exchange(recs, "origin", 11)
    assert inner["origin"]["status"] == 400
    assert error_code(inner["origin"]["body"]) == -32020
    edge = exchange(recs, "edge", 11)
    assert edge["origin"]["status"] == 500
    assert edge["egress"]["status"] == 500

    comp = comparison_of(recs, 11)
    assert rules(comp["findings"]) == ["hop.error-collapse"]
    assert_names_gateway(comp, gateway)
    assert "HTTP 400 with JSON-RPC error -32020 became HTTP 500" in comp["findings"][0]["message"]


async def test_collapsing_gateway_passing_a_success_changes_nothing(
    tmp_path: Path, origin: str
) -> None:
    """The fault only fires on a 4xx: a successful call through the same box is clean."""
    async with chain(tmp_path, origin, "collapse-errors") as (server, _):
        headers, body = echo(12)
        assert (await post(server, headers, body)).status_code == 200
    assert comparison_of(records(server), 12)["findings"] == []


# --- (b) Mcp-Name rewritten / dropped ----------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "forwarded", "origin_rule"),
    [
        ("rewrite-name", ["add"], "request.header.mismatch"),
        ("drop-name", [], "request.header.missing"),
    ],
)
async def test_gateway_changing_mcp_name_is_header_changed(
    tmp_path: Path, origin: str, fault: Fault, forwarded: list[str], origin_rule: str
) -> None:
    """The gateway authorised ``Mcp-Name: echo``; the origin got another (or none).

    The body still says ``echo``, so the real SDK rejects the forwarded request with its
    own 400 / -32020, which the origin hop judges as a header fault; the edge saw a
    correct request. The box forwarded the SDK's answer untouched, so the header change
    is the one hop finding.
    """
    async with chain(tmp_path, origin, fault) as (server, gateway):
        headers, body = echo(21)
        answer = await post(server, headers, body)
    assert answer.status_code == 400
    assert error_code(answer.json()) == -32020

    recs = records(server)
    edge, inner = exchange(recs, "edge", 21), exchange(recs, "origin", 21)
    assert header(edge, "Mcp-Name") == ["echo"]
    assert header(inner, "Mcp-Name") == forwarded
    assert rules(edge["findings"]) == []
    inner_findings = {f["rule"]: f["code"] for f in inner["findings"]}
    assert inner_findings == {origin_rule: -32020}
    assert inner["origin"]["status"] == 400
    assert error_code(inner["origin"]["body"]) == -32020

    comp = comparison_of(recs, 21)
    assert rules(comp["findings"]) == ["hop.header-changed"]
    assert_names_gateway(comp, gateway)
    assert "mcp-name: ['echo'] at hop edge" in comp["findings"][0]["message"]


# --- (c) SSE buffered ----------------------------------------------------------------------


@pytest.mark.parametrize("recording", ["inline", "process"])
async def test_gateway_buffering_sse_is_sse_buffered(
    tmp_path: Path, origin: str, recording: str
) -> None:
    """The origin streams progress over time; the gateway holds the stream to its end.

    Explicit (default) thresholds: events spread over >= 100 ms at hop origin that reach hop
    edge within 20 % of that spread. The scenario has ~500 ms against ~0 ms.
    """
    thresholds = HopComparisonOptions(
        min_inner_spread_ms=100.0, max_outer_spread_ratio=0.2, first_event_delay_ms=250.0
    )
    mode = RecordingOptions(mode=recording)
    async with chain(
        tmp_path, origin, "buffer-sse", hop_comparison=thresholds, recording=mode
    ) as pair:
        server, gateway = pair
        headers, body = slow_count(31)
        answer = await post(server, headers, body)
    assert answer.status_code == 200
    events = parse_sse(answer.text)
    assert len(events) == SLOW_STEPS + 1
    assert events[-1]["data"]["result"]["content"][0]["text"] == f"counted to {SLOW_STEPS}"

    recs = records(server)
    edge, inner = exchange(recs, "edge", 31), exchange(recs, "origin", 31)
    # The same events at both hops: the box changed only when they were delivered.
    assert [e["data"] for e in edge["origin"]["sse"]] == [e["data"] for e in inner["origin"]["sse"]]
    assert len(inner["origin"]["sse"]) == SLOW_STEPS + 1

    comp = comparison_of(recs, 31)
    assert rules(comp["findings"]) == ["hop.sse-buffered"]
    assert_names_gateway(comp, gateway)
    assert "held back and flushed together" in comp["findings"][0]["message"]


# --- a clean gateway: no false positives --------------------------------------------------------


async def test_clean_gateway_gives_no_hop_findings(tmp_path: Path, origin: str) -> None:
    """JSON, SSE, an error answer and a notification through an honest gateway."""
    async with chain(tmp_path, origin, "none") as (server, gateway):
        json_answer = await post(server, *echo(41))
        sse_answer = await post(server, *slow_count(42))
        error_answer = await post(server, *header_mismatch(43))
        note_headers, note = raw_modern_request("notifications/roots/list_changed", request_id=None)
        note_answer = await post(server, note_headers, note)
    assert json_answer.status_code == 200
    assert json_answer.headers["content-type"].startswith("application/json")
    assert sse_answer.headers["content-type"].startswith("text/event-stream")
    assert len(parse_sse(sse_answer.text)) == SLOW_STEPS + 1
    assert error_answer.status_code == 400
    assert note_answer.status_code == 202

    recs = records(server)
    for rpc_id in (41, 42, 43, None):
        comp = comparison_of(recs, rpc_id)
        assert comp["findings"] == [], (rpc_id, comp["findings"])
        assert comp["box"] == f"{gateway.url} (hop edge upstream)"
    assert len(comparisons(recs)) == 4
    # The gateway really was in the path and propagated the edge's traceparent.
    assert len(gateway.forwarded) == 4
    for rpc_id in (41, 42, 43, None):
        edge, inner = exchange(recs, "edge", rpc_id), exchange(recs, "origin", rpc_id)
        assert header(edge, "traceparent") == []  # the client sent none: the edge added it
        assert header(inner, "Via") == ["1.1 test-gateway"]
        assert edge["traceId"] in header(inner, "traceparent")[0]


async def test_real_sdk_client_through_clean_gateway(tmp_path: Path, origin: str) -> None:
    """The real SDK client (2026-07-28) through both hops: every POST paired, nothing found."""
    async with chain(tmp_path, origin, "none") as (server, _):
        result = await sdk_call_tool(hop_url(server, "edge"), "modern", "echo", {"text": "hey"})
    assert result["content"][0]["text"] == "hey"

    recs = records(server)
    posts = [r for r in recs if r["kind"] == "exchange" and r["ingress"]["httpMethod"] == "POST"]
    methods = sorted(r["method"] for r in posts if r["hop"] == "edge")
    assert methods == ["tools/call", "tools/list"]
    comps = comparisons(recs)
    assert len(comps) == len(methods)
    assert all(c["findings"] == [] for c in comps)
    for r in posts:
        assert header(r, "MCP-Protocol-Version") == [MODERN_VERSION]


# --- trace context ---------------------------------------------------------------------------


async def test_client_traceparent_is_kept_and_pairs_the_hops(tmp_path: Path, origin: str) -> None:
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    traceparent = f"00-{trace_id}-00f067aa0ba902b7-01"
    async with chain(tmp_path, origin, "none") as (server, gateway):
        headers, body = echo(51)
        await post(server, {**headers, "traceparent": traceparent}, body)
    recs = records(server)
    comp = comparison_of(recs, 51)
    assert comp["traceId"] == trace_id
    assert comp["findings"] == []
    assert ("traceparent", traceparent) in gateway.forwarded[0]


@pytest.mark.parametrize("client_sends_traceparent", [False, True])
async def test_gateway_dropping_traceparent_is_paired_by_params(
    tmp_path: Path, origin: str, client_sends_traceparent: bool
) -> None:
    """Without a propagated trace the origin hop adds a trace of its own; the pair is then
    made by method, name and the params' keyed digest, and the record says so."""
    async with chain(tmp_path, origin, "drop-traceparent") as (server, gateway):
        headers, body = header_mismatch(61)
        if client_sends_traceparent:
            headers["traceparent"] = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        assert (await post(server, headers, body)).status_code == 400
    recs = records(server)
    edge, inner = exchange(recs, "edge", 61), exchange(recs, "origin", 61)
    assert edge["traceId"] and inner["traceId"]
    assert edge["traceId"] != inner["traceId"]
    assert not [k for k, _ in gateway.forwarded[0] if k.lower() == "traceparent"]
    (comp,) = comparisons(recs)
    assert comp["pairedBy"] == "params"
    assert comp["exchangeIds"] == [edge["exchangeId"], inner["exchangeId"]]
    assert comp["findings"] == []
    dropped = [c for c in comp["changes"] if c["path"] == "header:traceparent"]
    assert [(c["kind"], c["class"], c["meaning"]) for c in dropped] == [
        ("removed", "trace", "expected")]
    assert server.recorder.correlator.counts()["paired"] == {"params": 1}


async def test_without_added_traceparent_an_untraced_request_is_not_compared(
    tmp_path: Path, origin: str
) -> None:
    """``[tracing] add_traceparent = false``: only requests the client traced are paired."""
    untraced_tap = {"tracing": TracingOptions(add_traceparent=False)}
    async with chain(tmp_path, origin, "none", **untraced_tap) as (server, _):
        await post(server, *echo(71))
        headers, body = echo(72)
        traced = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        await post(server, {**headers, "traceparent": traced}, body)
    recs = records(server)
    for hop in ("edge", "origin"):
        untraced = exchange(recs, hop, 71)
        assert untraced["traceId"] == ""
        assert header(untraced, "traceparent") == []
    assert [c["traceId"] for c in comparisons(recs)] == ["0af7651916cd43dd8448eb211c80319c"]
    assert comparison_of(recs, 72)["findings"] == []


# --- the correlator itself (no I/O; explicit clock values) ----------------------------------

TRACE = "0af7651916cd43dd8448eb211c80319c"


def _pending(
    hop: str,
    received_at: float,
    upstream: str = "http://gw:1",
    *,
    trace: str = TRACE,
    rpc_id: int = 1,
    arguments: dict[str, Any] | None = None,
    traced_here: bool = False,
    ended_at: float | None = None,
) -> Pending:
    message = {"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call",
               "params": {"name": "echo", "arguments": arguments or {"text": "hi"}}}
    view = HopView(hop=hop, request_headers=HeaderMap(), request_message=message, status=200)
    return Pending(f"{hop}-{received_at}", view, received_at, upstream, "http", trace,
                   traced_here, ended_at)


class TestCorrelator:
    def test_pairs_two_hops_outer_is_who_received_first(self) -> None:
        c = Correlator(HopThresholds())
        # The inner hop usually finishes (and is offered) first.
        assert c.offer(_pending("origin", 100.01, "http://origin:2"), 100.5) is None
        pair = c.offer(_pending("edge", 100.0), 100.6)
        assert pair is not None
        assert (pair.outer_hop, pair.inner_hop) == ("edge", "origin")
        assert (pair.outer_id, pair.inner_id) == ("edge-100.0", "origin-100.01")
        assert pair.comparison.box == "http://gw:1 (hop edge upstream)"
        assert pair.comparison.findings == ()
        assert pair.paired_by == "traceparent"
        assert c.counts() == {"paired": {"traceparent": 1}, "unpaired": {}, "ambiguous": 0}

    def test_a_gateway_s_own_id_still_pairs_by_trace_method_and_name(self) -> None:
        c = Correlator(HopThresholds())
        assert c.offer(_pending("origin", 1.01, rpc_id=7), 1.5) is None
        pair = c.offer(_pending("edge", 1.0, rpc_id=3), 1.6)
        assert pair is not None and pair.paired_by == "traceparent"

    def test_same_hop_twice_does_not_pair(self) -> None:
        c = Correlator(HopThresholds())
        assert c.offer(_pending("edge", 1.0, trace="1" * 32), 1.1) is None
        assert c.offer(_pending("edge", 2.0), 2.1) is None
        pair = c.offer(_pending("origin", 2.01), 2.2)
        assert pair is not None and pair.outer_id == "edge-2.0"

    def test_several_candidates_in_one_trace_are_told_apart_by_params_then_id(self) -> None:
        c = Correlator(HopThresholds())
        c.offer(_pending("origin", 1.01, rpc_id=1, arguments={"text": "a"}), 1.1)
        c.offer(_pending("origin", 1.02, rpc_id=2, arguments={"text": "b"}), 1.2)
        pair = c.offer(_pending("edge", 1.0, rpc_id=9, arguments={"text": "b"}), 1.3)
        assert pair is not None and pair.inner_id == "origin-1.02"

    def test_identical_candidates_are_ambiguous_never_guessed(self) -> None:
        c = Correlator(HopThresholds())
        c.offer(_pending("origin", 1.01), 1.1)
        c.offer(_pending("origin", 1.02), 1.2)
        assert c.offer(_pending("edge", 1.0), 1.3) is None
        assert c.ambiguous == 1
        assert c.counts()["unpaired"] == {"origin": 2}

    def test_without_a_shared_trace_pairs_by_params_when_the_inner_hop_traced_it(self) -> None:
        c = Correlator(HopThresholds(), params_window_s=5.0)
        inner = _pending("origin", 1.01, trace="2" * 32, traced_here=True, ended_at=1.4)
        assert c.offer(inner, 1.4) is None
        pair = c.offer(_pending("edge", 1.0, ended_at=1.5), 1.5)
        assert pair is not None
        assert pair.paired_by == "params"
        assert (pair.outer_hop, pair.inner_hop) == ("edge", "origin")

    @pytest.mark.parametrize(
        ("inner", "why"),
        [
            ({"traced_here": False}, "the box propagated another trace"),
            ({"traced_here": True, "arguments": {"text": "other"}}, "other params"),
            ({"traced_here": True, "received_at": 7.0}, "outside the params window"),
            ({"traced_here": True, "ended_at": 9.0}, "ended after the outer one"),
        ],
    )
    def test_params_pairing_needs_every_condition(self, inner: dict[str, Any], why: str) -> None:
        c = Correlator(HopThresholds(), params_window_s=5.0)
        fields = {"received_at": 1.01, "ended_at": 1.4, **inner}
        at = fields.pop("received_at")
        assert c.offer(_pending("origin", at, trace="2" * 32, **fields), 1.4) is None
        assert c.offer(_pending("edge", 1.0, ended_at=1.5), 1.5) is None, why

    def test_two_params_candidates_are_ambiguous(self) -> None:
        c = Correlator(HopThresholds())
        for i in (1, 2):
            c.offer(_pending("origin", 1.0 + i / 100, trace=str(i) * 32, traced_here=True), 1.2)
        assert c.offer(_pending("edge", 1.0), 1.3) is None
        assert c.ambiguous == 1

    def test_a_stream_longer_than_the_window_still_pairs(self) -> None:
        """Regression: the window counts from the offer, not from the request's receipt.

        A 90 s SSE stream is offered by both hops at its end; measuring from ``received_at``
        expired the first view before its partner arrived.
        """
        c = Correlator(HopThresholds(), window_s=60.0)
        assert c.offer(_pending("origin", 0.01), 90.0) is None
        pair = c.offer(_pending("edge", 0.0), 90.01)
        assert pair is not None
        assert c.expired == 0

    def test_unpaired_views_expire_after_the_window(self) -> None:
        c = Correlator(HopThresholds(), window_s=60.0)
        assert c.offer(_pending("origin", 0.0), 1.0) is None
        assert c.offer(_pending("edge", 62.0, trace="4" * 32), 62.0) is None
        assert c.expired == 1
        assert c.unpaired == {"origin": 1}
        assert c.offer(_pending("edge", 0.0), 62.0) is None  # its partner is gone

    def test_pending_is_bounded(self) -> None:
        c = Correlator(HopThresholds(), max_pending=2)
        for i in range(3):
            c.offer(_pending("edge", float(i), trace=f"{i:032x}"), float(i))
        assert c.expired == 1
        assert c.offer(_pending("origin", 0.5, trace=f"{0:032x}"), 3.0) is None
        assert c.offer(_pending("origin", 2.5, trace=f"{2:032x}"), 3.0) is not None


def test_hop_comparison_options_feed_the_core_thresholds() -> None:
    options = replace(HopComparisonOptions(), min_inner_spread_ms=300.0)
    assert options.thresholds() == HopThresholds(300.0, 0.2, 250.0)
