"""Drive a server with the real MCP Python SDK client, both eras: what the README's
captures v1 and v2 were recorded from (through a tap in front of each server).

    python examples/sdk_tour.py http://127.0.0.1:8080/mcp

Lists the tools and calls add, echo, lookup and slow_count, once with a 2026-07-28 client
and once with a legacy (initialize) client, printing one line per call. Needs the SDK
(``pip install -e '.[demo]'``). Waits up to 15 s for the URL to accept connections.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import time
from typing import Any
from urllib.parse import urlsplit

CALLS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("", {}),  # tools/list
    ("add", {"a": 1, "b": 2}),
    ("echo", {"text": "hello"}),
    ("lookup", {"region": "eu-west", "query": "pods"}),
    ("slow_count", {"n": 3}),
)
MODES = {"modern": "2026-07-28", "legacy": "legacy"}


def wait_listening(url: str, seconds: float = 15.0) -> None:
    """Return once ``url``'s host and port accept a connection; exit if they never do."""
    parts = urlsplit(url)
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection((parts.hostname, parts.port or 80), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit(f"sdk_tour: nothing listens at {url}") from None
            time.sleep(0.1)


async def tour(url: str) -> None:
    """Every call of :data:`CALLS` in both eras, each in a session of its own."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import MCPError

    for era, mode in MODES.items():
        for name, arguments in CALLS:
            async with Client(streamable_http_client(url), mode=mode) as client:
                try:
                    if name:
                        await client.list_tools()  # the listing tells the client which
                        result = await client.call_tool(name, arguments)  # args to mirror
                        shown = "tool error" if result.is_error else "result"
                    else:
                        listed = await client.list_tools()
                        shown = f"{len(listed.tools)} tools"
                except MCPError as exc:
                    shown = f"error {exc.error.code}"
            print(f"{era:<6} {name or 'tools/list'}: {shown}")


def main() -> None:
    """``sdk_tour.py URL``."""
    if len(sys.argv) != 2:
        raise SystemExit("usage: sdk_tour.py URL")
    wait_listening(sys.argv[1])
    asyncio.run(tour(sys.argv[1]))


if __name__ == "__main__":
    main()
