"""The semantic diff between two hops (mcp_tap.core.hopdiff) and what each change means for
an HTTP box and for an MCP gateway (mcp_tap.core.hops.compare_hops with a box kind).

The messages are the shapes real traffic through fastmcp 4.2.3's proxy had (the demo origin
behind it, the mcp 2.3.0 client in front): exact rule ids, strengths and paths.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcp_tap.core.findings import Strength
from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.hopdiff import (
    ABSENT,
    CLASSES,
    DISPOSITIONS,
    GATEWAY_WHY,
    MAX_CHANGES,
    diff_pair,
    escape,
    request_class,
    resolve,
    response_class,
    tokens,
)
from mcp_tap.core.hops import HopComparison, HopView, compare_hops

BOX = "http://127.0.0.1:9000 (hop edge upstream)"
CAPS = "/params/_meta/io.modelcontextprotocol~1clientCapabilities"
LOG_LEVEL = "/params/_meta/io.modelcontextprotocol~1logLevel"


def client_request(rpc_id: int = 2, **meta: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0", "id": rpc_id, "method": "tools/list",
        "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "mcp", "version": "0.1.0"},
            **meta,
        }},
    }


def gateway_request() -> dict[str, Any]:
    """What fastmcp's proxy sent the origin for the client's request."""
    request = client_request(
        1, **{"io.modelcontextprotocol/logLevel": "debug"})
    request["params"]["_meta"].update({
        "io.modelcontextprotocol/clientCapabilities": {
            "elicitation": {"form": {}, "url": {}}, "roots": {"listChanged": True},
            "sampling": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "fastmcp", "version": "4.2.3"},
    })
    return request


def tools_result(rpc_id: int, server: str, *, titles: bool) -> dict[str, Any]:
    tools = [{"name": "echo", "inputSchema": {"type": "object"}},
             {"name": "add", "inputSchema": {"type": "object"}}]
    if titles:
        tools = [{**t, "title": t["name"].title(), "_meta": {"fastmcp": {"tags": []}}}
                 for t in tools]
    return {"jsonrpc": "2.0", "id": rpc_id, "result": {
        "tools": tools, "resultType": "complete",
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": server, "version": "1"}}}}


HEADERS = HeaderMap((("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tools/list"),
                     ("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")))


def compare(outer: dict[str, Any], inner: dict[str, Any], kind: str) -> HopComparison:
    base = {"request_headers": HEADERS, "status": 200}
    return compare_hops(HopView("edge", **{**base, **outer}),
                        HopView("origin", **{**base, **inner}), BOX, box_kind=kind)


def fastmcp_pair(kind: str) -> HopComparison:
    return compare(
        {"request_message": client_request(), "response_messages": (
            tools_result(2, "FastMCPProxy", titles=True),)},
        {"request_message": gateway_request(), "response_messages": (
            tools_result(1, "origin", titles=False),)},
        kind)


def summary(comparison: HopComparison) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(f.rule, str(f.strength), f.paths) for f in comparison.findings]


# --- JSON pointers ----------------------------------------------------------------------------


def test_pointer_tokens_escape_and_resolve() -> None:
    key = "io.modelcontextprotocol/clientInfo"
    assert escape(key) == "io.modelcontextprotocol~1clientInfo"
    assert escape("a~/b") == "a~0~1b"
    assert tokens("/params/_meta/" + escape(key) + "/name") == ["params", "_meta", key, "name"]
    assert resolve({"a": [{"b~": 1}]}, "/a/0/b~0") == 1
    assert resolve({"a": []}, "/a/0") is ABSENT
    assert resolve({"a": 1}, "") == {"a": 1}


# --- the diff ---------------------------------------------------------------------------------


def test_identical_exchanges_have_no_changes() -> None:
    diff = diff_pair(client_request(), client_request(), HEADERS, HEADERS,
                     (tools_result(2, "o", titles=False),), (tools_result(2, "o", titles=False),))
    assert diff.changes == () and diff.dropped == 0


def test_a_widened_capability_object_is_listed_member_by_member() -> None:
    diff = diff_pair(client_request(), gateway_request(), HEADERS, HEADERS, (), ())
    widened = [(c.path, c.kind, c.after) for c in diff.changes if c.cls == "capability-widened"]
    assert widened == [
        (f"{CAPS}/elicitation", "added", {"form": {}, "url": {}}),
        (f"{CAPS}/roots", "added", {"listChanged": True}),
        (f"{CAPS}/sampling", "added", {}),
    ]


def test_named_lists_are_compared_entry_by_entry() -> None:
    before = {"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "a"}, {"name": "b"}]}}
    after = {"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "b"}, {"name": "c"}]}}
    diff = diff_pair(None, None, HeaderMap(), HeaderMap(), (before,), (after,))
    assert [(c.path, c.kind, c.cls) for c in diff.changes] == [
        ("/result/tools/0", "removed", "tools"), ("/result/tools/1", "added", "tools")]


def test_true_is_not_one() -> None:
    diff = diff_pair({"id": 1, "params": {"x": True}}, {"id": 1, "params": {"x": 1}},
                     HeaderMap(), HeaderMap(), (), ())
    assert [(c.path, c.kind) for c in diff.changes] == [("/params/x", "changed")]


def test_changes_are_bounded_and_the_rest_counted() -> None:
    big = {"id": 1, "params": {f"k{i}": i for i in range(MAX_CHANGES + 7)}}
    diff = diff_pair({"id": 1, "params": {}}, big, HeaderMap(), HeaderMap(), (), ())
    assert len(diff.changes) == MAX_CHANGES
    assert diff.dropped == 7


def test_headers_framing_is_not_compared_and_others_are_classified() -> None:
    before = HeaderMap((("Content-Length", "10"), ("Mcp-Session-Id", "a"), ("User-Agent", "x")))
    after = HeaderMap((("content-length", "12"), ("mcp-session-id", "b"), ("Via", "1.1 gw")))
    diff = diff_pair(None, None, before, after, (), ())
    assert [(c.path, c.kind, c.cls) for c in diff.changes] == [
        ("header:mcp-session-id", "changed", "session"),
        ("header:user-agent", "removed", "transport"),
        ("header:via", "added", "transport"),
    ]


@pytest.mark.parametrize(
    ("path", "kind", "cls"),
    [
        ("/id", "changed", "jsonrpc-id"),
        ("/method", "changed", "envelope"),
        ("/params/_meta/io.modelcontextprotocol~1clientInfo/name", "changed", "identity"),
        (f"{CAPS}/sampling", "added", "capability-widened"),
        (f"{CAPS}/sampling", "removed", "capability-narrowed"),
        (LOG_LEVEL, "added", "param-added"),
        (LOG_LEVEL, "removed", "param-changed"),
        ("/params/_meta/progressToken", "added", "own-meta"),
        ("/params/_meta/progressToken", "removed", "param-changed"),
        ("/params/_meta/com.example~1route", "added", "own-meta"),
        ("/params/_meta/dev.mcp~1thing", "added", "param-added"),
        ("/params/_meta/traceparent", "changed", "trace"),
        ("/params/_meta/io.modelcontextprotocol~1protocolVersion", "changed",
         "protocol-version"),
        ("/params/capabilities/roots", "added", "capability-widened"),
        ("/params/clientInfo/name", "changed", "identity"),
        ("/params/arguments/text", "changed", "param-changed"),
        ("/params/arguments/extra", "added", "param-added"),
    ],
)
def test_request_classes(path: str, kind: str, cls: str) -> None:
    assert request_class(path, kind, None, None) == cls


@pytest.mark.parametrize(
    ("path", "kind", "cls"),
    [
        ("/id", "changed", "jsonrpc-id"),
        ("/result/_meta/io.modelcontextprotocol~1serverInfo/name", "changed", "identity"),
        ("/result/serverInfo/version", "changed", "identity"),
        ("/result/capabilities/completions", "removed", "server-capabilities"),
        ("/result/tools/0/title", "added", "tool-metadata"),
        ("/result/tools/0/inputSchema/required", "added", "tools"),
        ("/result/content/0/text", "changed", "result"),
        ("/error/code", "changed", "error-recoded"),
        ("/error/message", "changed", "error-detail"),
        ("/result", "added", "error-recoded"),
        ("/error", "added", "result"),
        ("/result/protocolVersion", "changed", "protocol-version"),
    ],
)
def test_response_classes(path: str, kind: str, cls: str) -> None:
    assert response_class(path, kind) == cls


def test_every_class_has_a_meaning_for_both_boxes_and_a_reason() -> None:
    for kind in ("http", "mcp-gateway"):
        assert set(DISPOSITIONS[kind]) == set(CLASSES)
    assert set(GATEWAY_WHY) == set(CLASSES)


# --- an MCP gateway ---------------------------------------------------------------------------


def test_fastmcp_gateway_widening_and_log_level_are_should_findings_with_paths() -> None:
    comparison = fastmcp_pair("mcp-gateway")
    assert summary(comparison) == [
        ("hop.gateway.capability-widened", "should",
         (f"{CAPS}/elicitation", f"{CAPS}/roots", f"{CAPS}/sampling")),
        ("hop.gateway.param-added", "should", (LOG_LEVEL,)),
    ]
    assert all(f.strength is not Strength.MUST for f in comparison.findings)
    meanings = {(j.change.path, j.disposition) for j in comparison.changes}
    assert ("/id", "expected") in meanings
    assert ("/params/_meta/io.modelcontextprotocol~1clientInfo/name", "expected") in meanings
    assert ("/result/tools/0/title", "recorded") in meanings
    # Most important first: the findings' changes, then recorded, then expected ones.
    order = [j.disposition for j in comparison.changes]
    assert order.index("recorded") > order.index("hop.gateway.param-added")
    assert order.index("expected") > max(i for i, d in enumerate(order) if d == "recorded")


def test_the_same_traffic_through_an_http_box_is_body_changed_must() -> None:
    comparison = fastmcp_pair("http")
    assert [(f.rule, str(f.strength)) for f in comparison.findings] == [
        ("hop.body-changed", "must"), ("hop.body-changed", "must")]
    request_paths = comparison.findings[0].paths
    assert "/id" in request_paths and f"{CAPS}/sampling" in request_paths


def test_error_recoded_by_a_gateway_is_a_should_finding() -> None:
    inner_error = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32021, "message": "need x",
                                                        "data": {"requiredCapabilities": {}}}}
    outer_error = {"jsonrpc": "2.0", "id": 2, "error": {"code": -32603, "message": "failed"}}
    comparison = compare(
        {"request_message": client_request(), "response_messages": (outer_error,),
         "status": 200},
        {"request_message": client_request(), "response_messages": (inner_error,),
         "status": 200},
        "mcp-gateway")
    assert summary(comparison) == [("hop.gateway.error-recoded", "should", ("/error/code",))]
    assert comparison.findings[0].message == (
        "the origin's JSON-RPC error -32021 reached the client as -32603")


def test_error_collapse_is_must_around_a_gateway_too() -> None:
    inner_error = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "bad"}}
    comparison = compare(
        {"request_message": client_request(), "response_messages": (), "status": 500},
        {"request_message": client_request(), "response_messages": (inner_error,),
         "status": 400},
        "mcp-gateway")
    assert summary(comparison) == [("hop.error-collapse", "must", ("http:status", ""))]


@pytest.mark.parametrize(
    ("inner_headers", "rule"),
    [
        # The gateway's own request still mirrors its body: recorded, no finding.
        (HeaderMap((("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tools/list"))),
         None),
        # Dropped while the body is modern: the origin gets an unmirrored request.
        (HeaderMap((("MCP-Protocol-Version", "2026-07-28"),)), "hop.header-changed"),
        # Rewritten alone: no longer what the body says.
        (HeaderMap((("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tools/call"))),
         "hop.header-changed"),
    ],
)
def test_gateway_mirrored_headers_must_still_mirror(inner_headers: HeaderMap,
                                                     rule: str | None) -> None:
    comparison = compare(
        {"request_message": client_request()},
        {"request_message": client_request(), "request_headers": inner_headers}, "mcp-gateway")
    assert [(f.rule, str(f.strength), f.paths) for f in comparison.findings] == (
        [] if rule is None else [(rule, "must", ("header:mcp-method",))])


def test_mirrored_headers_dropped_for_a_legacy_origin_are_the_era_boundary() -> None:
    legacy = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    comparison = compare({"request_message": client_request()},
                         {"request_message": legacy, "request_headers": HeaderMap()},
                         "mcp-gateway")
    assert comparison.findings == ()
    classes = {j.change.cls: j.disposition for j in comparison.changes}
    assert classes["protocol-version"] == "recorded"
    assert classes["mirrored-header"] == "recorded"
