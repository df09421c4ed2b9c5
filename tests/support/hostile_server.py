"""A hostile MCP server: every name and message it sends carries terminal escapes, CR/LF,
a bidi override and HTML, to show that no output of mcp-tap obeys them.

A real aiohttp server on loopback, run in a thread (so a synchronous CLI run can probe it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import orjson
from aiohttp import web
from threaded_server import serve_in_thread

# OSC 8 hyperlink, clear screen, cursor home, a forged line, a right-to-left override, HTML,
# Markdown link and code span: what a terminal, a CI page or a step summary could obey.
HOSTILE = ("evil\x1b]8;;https://x.invalid/\x07link\x1b]8;;\x07\x1b[2J\x1b[H\x9b31m"
           "\r\nFAKE LINE: every source passed\u202egnp.exe"
           "<img src=x onerror=alert(1)>|`tick`[click](https://x.invalid/)")
FORGED = "FAKE LINE: every source passed"


def _answer(message: Any) -> web.Response:
    if not isinstance(message, dict) or "id" not in message:
        return web.Response(status=202)
    if message.get("method") == "tools/list":
        tool = {"name": HOSTILE, "description": HOSTILE,
                "inputSchema": {"type": "object"}}
        result = {"tools": [tool], "ttlMs": 0, "cacheScope": "private",
                  "resultType": "complete"}
        body = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        return web.Response(body=orjson.dumps(body), content_type="application/json")
    error = {"code": -32603, "message": HOSTILE, "data": {"hint": HOSTILE}}
    body = {"jsonrpc": "2.0", "id": message["id"], "error": error}
    return web.Response(body=orjson.dumps(body), status=400, content_type="application/json")


async def _handler(request: web.Request) -> web.Response:
    try:
        message = orjson.loads(await request.read())
    except orjson.JSONDecodeError:
        message = {"id": None}
    return _answer(message)


@contextlib.contextmanager
def run_hostile() -> Iterator[str]:
    """Serve the hostile server on a free loopback port in a thread; yield its /mcp URL."""
    app = web.Application()
    app.router.add_post("/mcp", _handler)
    with serve_in_thread(app, "hostile-mcp") as base:
        yield f"{base}/mcp"
