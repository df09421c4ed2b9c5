"""A real ``fastmcp`` 4.x server or client, run as a subprocess by the peer tests.

Not a test module and not imported by pytest (fastmcp stays out of the test process)::

    python tests/support/fastmcp_peer.py server PORT [--json]
    python tests/support/fastmcp_peer.py client URL --mode 2026-07-28|auto|legacy

The server is ``FastMCP(...).run_http_async`` (uvicorn, Streamable HTTP at ``/mcp``, both
eras from one endpoint) with tools ``echo`` (JSON answer), ``count`` (progress, so the
answer streams) and ``fail`` (an ``isError`` result); it prints ``listening PORT`` once
bound. The client (``fastmcp.Client``) connects in the given mode, lists tools, calls
``echo``, ``count`` (with a progress handler), ``fail`` and an unknown tool, and prints one
JSON line with what it got.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from typing import Any

from fastmcp import Client, Context, FastMCP


def _server(port: int, json_response: bool) -> None:
    mcp = FastMCP("fastmcp-peer")

    @mcp.tool
    def echo(text: str) -> str:
        """Echo the text back."""
        return f"echo: {text}"

    @mcp.tool
    async def count(n: int, ctx: Context) -> str:
        """Count to n, reporting progress."""
        for i in range(1, n + 1):
            await ctx.report_progress(i, n)
        return f"counted to {n}"

    @mcp.tool
    def fail() -> str:
        """Always fails (an isError result)."""
        raise ValueError("it failed")

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    print(f"listening {port}", flush=True)
    asyncio.run(
        mcp.run_http_async(
            show_banner=False,
            host="127.0.0.1",
            port=port,
            log_level="warning",
            json_response=json_response,
            sockets=[sock],
        )
    )


async def _client(url: str, mode: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    progress: list[float] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(done)

    async with Client(url, mode=mode, progress_handler=on_progress) as client:  # type: ignore[arg-type]
        out["protocolVersion"] = getattr(client, "protocol_version", None)
        out["tools"] = sorted(t.name for t in await client.list_tools())
        echoed = await client.call_tool("echo", {"text": "hi"})
        out["echo"] = echoed.content[0].text  # type: ignore[union-attr]
        counted = await client.call_tool("count", {"n": 3})
        out["count"] = counted.content[0].text  # type: ignore[union-attr]
        out["progress"] = progress
        failed = await client.call_tool("fail", {}, raise_on_error=False)
        out["fail"] = failed.is_error
        try:
            await client.call_tool("no-such-tool", {})
            out["unknown"] = "no error"
        except Exception as exc:  # noqa: BLE001 -- a peer script reports whatever the client raised
            out["unknown"] = type(exc).__name__
    return out


def main(argv: list[str]) -> int:
    """``server PORT [--json]`` or ``client URL --mode MODE``."""
    if len(argv) >= 2 and argv[0] == "server":
        _server(int(argv[1]), "--json" in argv)
        return 0
    if len(argv) >= 4 and argv[0] == "client" and argv[2] == "--mode":
        print(json.dumps(asyncio.run(_client(argv[1], argv[3]))), flush=True)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
