"""What the tap learns from earlier answers, through a real tap.

A tool's outputSchema learnt from tools/list: a small aiohttp origin lists a tool with an
``outputSchema`` and answers its calls with ``structuredContent`` that conforms once and
breaks it once (server/tools "Output Schema"); the tap forwards every answer untouched and
records the break as response.payload.structured-content. A legacy session's client
capabilities, learnt from its initialize, judge the server's requests on its streams."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
from aiohttp import web
from peers import raw_modern_request
from taps import exchanges, hop_url, running_tap, tap_options

StartApp = Callable[[web.Application], Awaitable[str]]  # the `serve_app` fixture

OUTPUT = {"type": "object", "properties": {"temperature": {"type": "number"}},
          "required": ["temperature"]}
TOOLS = {"resultType": "complete", "ttlMs": 0, "cacheScope": "public", "tools": [
    {"name": "weather", "description": "the weather", "inputSchema": {"type": "object"},
     "outputSchema": OUTPUT}]}


async def origin(request: web.Request) -> web.Response:
    """tools/list lists the tool; tools/call answers with the temperature the call names
    (a number conforms, a string breaks the schema)."""
    body = await request.json()
    if body["method"] == "tools/list":
        result: dict[str, Any] = TOOLS
    else:
        value = body["params"]["arguments"]["value"]
        result = {"resultType": "complete", "content": [{"type": "text", "text": str(value)}],
                  "structuredContent": {"temperature": value}}
    return web.json_response({"jsonrpc": "2.0", "id": body["id"], "result": result})


async def test_structured_content_is_judged_against_the_learnt_output_schema(
    tmp_path: Path, serve_app: StartApp
) -> None:
    app = web.Application()
    app.router.add_post("/mcp", origin)
    base = await serve_app(app)
    sent: list[bytes] = []
    got: list[bytes] = []
    async with running_tap(tap_options(tmp_path, upstream=base)) as tap:
        url = hop_url(tap)
        async with httpx.AsyncClient(timeout=30.0) as client:
            for rid, (method, params) in enumerate(
                [("tools/call", {"name": "weather", "arguments": {"value": "warm"}}),
                 ("tools/list", {}),
                 ("tools/call", {"name": "weather", "arguments": {"value": 21.5}}),
                 ("tools/call", {"name": "weather", "arguments": {"value": "warm"}})],
                start=1,
            ):
                headers, body = raw_modern_request(method, params, request_id=rid)
                answer = await client.post(url, headers=headers, content=json.dumps(body))
                sent.append(answer.content)
                direct = await client.post(f"{base}/mcp", headers=headers,
                                           content=json.dumps(body))
                got.append(direct.content)
    records = exchanges(tap)
    assert sent == got  # the tap forwarded every answer untouched
    found = [[(f["rule"], f.get("code"), f["strength"]) for f in r["findings"]]
             for r in records]
    # Before the listing the tap knows no outputSchema: it claims nothing.
    assert found == [[], [], [],
                     [("response.payload.structured-content", -32600, "must")]]


async def legacy_origin(request: web.Request) -> web.StreamResponse:
    """A legacy server: initialize opens session s1; a tool call is answered with a stream
    that asks the client for a URL-mode elicitation before the result."""
    body = await request.json()
    if body["method"] == "initialize":
        result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "s", "version": "1"}}
        return web.json_response({"jsonrpc": "2.0", "id": body["id"], "result": result},
                                 headers={"Mcp-Session-Id": "s1"})
    elicit = {"jsonrpc": "2.0", "id": "e1", "method": "elicitation/create", "params": {
        "mode": "url", "message": "Sign in", "url": "https://example.com/a",
        "elicitationId": "x"}}
    done = {"jsonrpc": "2.0", "id": body["id"], "result": {"content": []}}
    text = "".join(f"data: {json.dumps(m)}\n\n" for m in (elicit, done))
    return web.Response(text=text, content_type="text/event-stream")


async def test_legacy_session_capabilities_judge_the_servers_requests(
    tmp_path: Path, serve_app: StartApp
) -> None:
    """The client declared elicitation {} (form only) at initialize: the URL-mode request
    on the session's stream is sse.server-request -32600 (must)."""
    app = web.Application()
    app.router.add_post("/mcp", legacy_origin)
    base = await serve_app(app)
    common = {"Accept": "application/json, text/event-stream",
              "Content-Type": "application/json"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "c", "version": "1"}}}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "t", "arguments": {}}}
    async with running_tap(tap_options(tmp_path, upstream=base)) as tap:
        url = hop_url(tap)
        async with httpx.AsyncClient(timeout=30.0) as client:
            opened = await client.post(url, headers=common, content=json.dumps(init))
            session = {**common, "Mcp-Session-Id": opened.headers["Mcp-Session-Id"],
                       "MCP-Protocol-Version": "2025-11-25"}
            streamed = await client.post(url, headers=session, content=json.dumps(call))
    assert "elicitation/create" in streamed.text  # forwarded untouched
    found = [[(f["rule"], f.get("code"), f["strength"]) for f in r["findings"]]
             for r in exchanges(tap)]
    # (The initialize is the operator's era policy's business: no allowlisted legacy endpoint.)
    assert found == [[("client.fallback-unproven", None, "should")],
                     [("sse.server-request", -32600, "must")]]
