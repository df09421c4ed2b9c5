"""mcp-tap's pytest plugin on a server that gets one thing wrong (the README's example).

The server is a small aiohttp app that answers every request like an MCP server, except
that it sends a successful result with HTTP 201 (2026-07-28 says 200). The test taps it:
its own assertion passes, and the marker fails it on the tap's finding.

    pytest -q examples/pytest/test_tools.py      # fails, naming response.http-status
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator

import httpx
import pytest
from aiohttp import web

VERSION = "2026-07-28"
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
           "MCP-Protocol-Version": VERSION, "Mcp-Method": "tools/list"}
BODY = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientCapabilities": {}}}}


async def answer(request: web.Request) -> web.Response:
    """A tools/list result, with the wrong status: 201 Created instead of 200."""
    message = json.loads(await request.read())
    result = {"tools": [], "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}
    return web.json_response({"jsonrpc": "2.0", "id": message["id"], "result": result},
                             status=201)


@pytest.fixture
def server() -> Iterator[str]:
    """The server on a free loopback port, in a thread; its base URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    app = web.Application()
    app.router.add_post("/mcp", answer)
    runner = web.AppRunner(app)
    loop = asyncio.new_event_loop()
    ready = threading.Event()

    def serve() -> None:
        loop.run_until_complete(runner.setup())
        loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    ready.wait(10)
    yield f"http://127.0.0.1:{port}"
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


@pytest.mark.mcp_tap_conformant
def test_lists_tools(mcp_tap, server: str) -> None:
    """The call works; the tap sees what the assertion does not."""
    url = mcp_tap.tap(server)
    answer = httpx.post(url, json=BODY, headers=HEADERS, timeout=30)
    assert answer.json()["result"]["tools"] == []
