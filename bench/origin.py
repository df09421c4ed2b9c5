"""A minimal, fast MCP-shaped origin for the benchmark (aiohttp, one process).

It answers like a modern (2026-07-28) MCP server, so the tap's checks run for real and find
nothing to report:

* ``tools/list`` -> a JSON result listing the tools below (what the tap learns schemas from);
* ``tools/call`` ``count`` -> an SSE answer: ``n`` progress notifications, then the result;
  ``gap_ms`` waits between events (0 = as fast as possible);
* ``tools/call`` ``upload`` (any body over 1 MiB or without a length) -> the body is drained
  and counted, never held or parsed; the result says how many bytes arrived (id 1);
* ``tools/call`` ``download`` -> a JSON result whose text is ``size`` bytes, written in 1 MiB
  chunks, never held (for the large-response memory check);
* ``tools/call`` ``stream`` -> an SSE answer of progress notifications every ``interval_ms``
  for ``seconds``, then the result (for the long-stream memory check).

Run: ``python bench/origin.py --port 9001`` (``--uvloop`` to use uvloop when installed).
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import orjson
from aiohttp import web

VERSION = "2026-07-28"

TOOLS = [
    {
        "name": "count",
        "description": "Count to n, with a progress notification per step.",
        "inputSchema": {
            "type": "object",
            "properties": {"n": {"type": "integer"}, "gap_ms": {"type": "number"}},
            "required": ["n"],
        },
    },
    {
        "name": "upload",
        "description": "Accept a large argument and report its size.",
        "inputSchema": {"type": "object", "properties": {"blob": {"type": "string"}}},
    },
    {
        "name": "download",
        "description": "Return a large text result.",
        "inputSchema": {"type": "object", "properties": {"size": {"type": "integer"}}},
    },
    {
        "name": "stream",
        "description": "Stream progress notifications for a while.",
        "inputSchema": {
            "type": "object",
            "properties": {"seconds": {"type": "number"}, "interval_ms": {"type": "number"}},
        },
    },
    {
        "name": "echo",
        "description": "Echo the given text back.",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
    },
]

SSE_HEADERS = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",
}
# Bodies past this size (or of unknown size) are the ``upload`` call: drained, never parsed.
_MAX_SMALL_BODY = 1024 * 1024
_MiB = 1024 * 1024


def _dumps(value: Any) -> bytes:
    return orjson.dumps(value)


def _result(rpc_id: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, "result": {"resultType": "complete", **result}}


def _event(message: dict[str, Any]) -> bytes:
    return b"event: message\ndata: " + _dumps(message) + b"\n\n"


def _progress(token: Any, progress: int, total: int | None) -> bytes:
    params: dict[str, Any] = {"progressToken": token, "progress": progress}
    if total is not None:
        params["total"] = total
    return _event({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})


async def _drain_upload(request: web.Request) -> web.Response:
    size = 0
    async for chunk in request.content.iter_any():
        size += len(chunk)
    text = f"received {size} bytes"
    body = _result(1, {"content": [{"type": "text", "text": text}]})
    return web.Response(body=_dumps(body), content_type="application/json")


async def _download(request: web.Request, rpc_id: Any, size: int) -> web.StreamResponse:
    head = (
        b'{"jsonrpc":"2.0","id":'
        + _dumps(rpc_id)
        + (b',"result":{"resultType":"complete","content":[{"type":"text","text":"')
    )
    tail = b'"}]}}'
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    response.content_length = len(head) + size + len(tail)
    await response.prepare(request)
    await response.write(head)
    block = b"x" * _MiB
    left = size
    while left > 0:
        piece = block if left >= _MiB else block[:left]
        await response.write(piece)
        left -= len(piece)
    await response.write(tail)
    await response.write_eof()
    return response


async def _count(
    request: web.Request, rpc_id: Any, token: Any, n: int, gap_s: float
) -> web.StreamResponse:
    response = web.StreamResponse(headers=SSE_HEADERS)
    await response.prepare(request)
    for i in range(1, n + 1):
        await response.write(_progress(token, i, n))
        if gap_s:
            await asyncio.sleep(gap_s)
    done = _result(rpc_id, {"content": [{"type": "text", "text": f"counted {n}"}]})
    await response.write(_event(done))
    await response.write_eof()
    return response


async def _stream(
    request: web.Request, rpc_id: Any, token: Any, seconds: float, interval_s: float
) -> web.StreamResponse:
    response = web.StreamResponse(headers=SSE_HEADERS)
    await response.prepare(request)
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    i = 0
    while loop.time() < end:
        i += 1
        await response.write(_progress(token, i, None))
        await asyncio.sleep(interval_s)
    done = _result(rpc_id, {"content": [{"type": "text", "text": f"streamed {i} events"}]})
    await response.write(_event(done))
    await response.write_eof()
    return response


async def handle(request: web.Request) -> web.StreamResponse:
    """The one MCP endpoint (any path)."""
    if request.method != "POST":
        return web.Response(status=405, headers={"Allow": "POST"})
    length = request.content_length
    if length is None or length > _MAX_SMALL_BODY:
        return await _drain_upload(request)
    try:
        message = orjson.loads(await request.read())
    except ValueError:
        error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
        return web.Response(status=400, body=_dumps(error), content_type="application/json")
    rpc_id = message.get("id")
    method = message.get("method")
    params = message.get("params") or {}
    if rpc_id is None:
        return web.Response(status=202)
    if method == "tools/list":
        body = _result(rpc_id, {"tools": TOOLS, "ttlMs": 60000, "cacheScope": "public"})
        return web.Response(body=_dumps(body), content_type="application/json")
    if method == "tools/call":
        name = params.get("name")
        args = params.get("arguments") or {}
        token = (params.get("_meta") or {}).get("progressToken", "p-1")
        if name == "count":
            gap = float(args.get("gap_ms", 0)) / 1000
            return await _count(request, rpc_id, token, int(args.get("n", 2)), gap)
        if name == "download":
            return await _download(request, rpc_id, int(args.get("size", _MiB)))
        if name == "stream":
            seconds = float(args.get("seconds", 10))
            interval = float(args.get("interval_ms", 100)) / 1000
            return await _stream(request, rpc_id, token, seconds, interval)
        if name == "echo":
            text = str(args.get("text", ""))
            body = _result(rpc_id, {"content": [{"type": "text", "text": text}]})
            return web.Response(body=_dumps(body), content_type="application/json")
    error = {"jsonrpc": "2.0", "id": rpc_id, "error": {"code": -32601, "message": "not found"}}
    return web.Response(status=404, body=_dumps(error), content_type="application/json")


def app() -> web.Application:
    """The origin application."""
    application = web.Application(client_max_size=0)
    application.router.add_route("*", "/{tail:.*}", handle)
    return application


def main() -> None:
    """Serve until killed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9001)
    parser.add_argument("--uvloop", action="store_true", help="use uvloop when installed")
    args = parser.parse_args()
    if args.uvloop:
        try:
            import uvloop  # type: ignore[import-not-found]

            uvloop.install()
        except ImportError:
            pass
    web.run_app(app(), host=args.host, port=args.port, access_log=None, print=None)


if __name__ == "__main__":
    main()
