"""What is re-sent of a recorded request: a fresh JSON-RPC id and the MCP headers (no
credentials: the evidence holds none; the caller injects its own).
"""

from __future__ import annotations

from typing import Any, Final

from mcp_tap.core.eras import (
    HEADER_METHOD,
    HEADER_NAME,
    HEADER_PARAM_PREFIX,
    HEADER_PROTOCOL_VERSION,
)
from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.jsonrpc import is_valid_id

REPLAYED_HEADERS: Final[tuple[str, ...]] = (
    HEADER_PROTOCOL_VERSION,
    HEADER_METHOD,
    HEADER_NAME,
    "Content-Type",
    "Accept",
)
"""Recorded request headers re-sent as they were (plus every ``Mcp-Param-*``)."""


_FRESH_INT_BASE: Final = 7_000_000


def fresh_id(original: Any, counter: int) -> Any:
    """A new JSON-RPC id of the same JSON type as ``original`` (other types are kept)."""
    if isinstance(original, bool) or not is_valid_id(original):
        return original
    if isinstance(original, int):
        return _FRESH_INT_BASE + counter
    return f"replay-{counter}"


def replay_headers(recorded: HeaderMap) -> list[tuple[str, str]]:
    """The recorded request headers that are re-sent: MCP headers, Content-Type, Accept."""
    keep = {n.lower() for n in REPLAYED_HEADERS}
    prefix = HEADER_PARAM_PREFIX.lower()
    return [(n, v) for n, v in recorded if n.lower() in keep or n.lower().startswith(prefix)]
