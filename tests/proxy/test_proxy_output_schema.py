"""A tool's outputSchema learnt from tools/list through a real tap: a small aiohttp origin
that lists a tool with an ``outputSchema`` and answers its calls with ``structuredContent``
that conforms once and breaks it once (server/tools "Output Schema"). The tap forwards
every answer untouched and records the break as response.payload.structured-content."""

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
