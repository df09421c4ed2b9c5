"""A "next release" of the demo origin: the real SDK server with a changed inventory.

Run as ``python -m candidate_origin --listen 127.0.0.1:PORT`` with ``tests`` on the path
(``run_origin(module="candidate_origin")`` in ``peers.py``). Against the demo origin
it drops ``echo``, gives ``add`` a new required argument ``c``, adds ``multiply`` and no
longer mirrors ``lookup``'s ``region`` as a header: real drift for ``mcp-tap diff``.
"""

from __future__ import annotations

from typing import Annotated, Any

from origin_variant import serve_variant
from pydantic import Field

from mcp_tap.demo import origin


def add(a: int, b: int, c: int) -> int:
    """Return the sum of three integers."""
    return a + b + c


def multiply(a: int, b: int) -> int:
    """Return the product of two integers."""
    return a * b


def lookup(region: Annotated[str, Field(description="Region to search.")], query: str) -> str:
    """Look ``query`` up in ``region``; the region is no longer a header."""
    return origin.lookup(region, query)


def build_server() -> Any:
    """The demo server with the candidate's changes applied."""
    server = origin.build_server()
    for name in ("echo", "add", "lookup"):
        server.remove_tool(name)
    server.add_tool(add, description="Add three integers.")
    server.add_tool(multiply, description="Multiply two integers.")
    server.add_tool(lookup, description="Look a query up in a region.")
    return server


def main() -> int:
    """Serve the candidate on ``--listen HOST:PORT`` until terminated."""
    return serve_variant(build_server)


if __name__ == "__main__":
    raise SystemExit(main())
