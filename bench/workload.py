"""The requests the benchmark sends: conformant modern (2026-07-28) MCP calls.

``json``: ``tools/list`` answered with a JSON result (about 0.9 KB, five tools).
``sse``: ``tools/call count n=2`` answered with SSE: two progress notifications, then the
result (three events). Both carry the headers a modern client sends, so the tap's checks
run in full and find nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

VERSION = "2026-07-28"
_META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
}


@dataclass(frozen=True)
class Call:
    """One request of the workload."""

    name: str
    body: bytes
    headers: tuple[tuple[str, str], ...]
    sse: bool


def workload_headers(method: str, name: str | None = None) -> tuple[tuple[str, str], ...]:
    out = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", VERSION),
        ("Mcp-Method", method),
    ]
    if name is not None:
        out.append(("Mcp-Name", name))
    return tuple(out)


def tools_call(name: str, arguments: dict[str, object], rpc_id: int = 1) -> bytes:
    """The body of a ``tools/call`` with a progress token."""
    params = {"name": name, "arguments": arguments, "_meta": {**_META, "progressToken": "p-1"}}
    return orjson.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call", "params": params})


JSON_CALL = Call(
    "json",
    orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": _META}}),
    workload_headers("tools/list"),
    sse=False,
)
SSE_CALL = Call(
    "sse", tools_call("count", {"n": 2}), workload_headers("tools/call", "count"), sse=True
)


def sse_call(**arguments: object) -> Call:
    """A ``count`` call with other arguments (e.g. ``gap_ms`` for the first-event probe)."""
    return Call("sse", tools_call("count", {"n": 2, **arguments}), SSE_CALL.headers, sse=True)


def long_call(tool: str, **arguments: object) -> Call:
    """A ``download`` or ``stream`` call (large or long answers)."""
    headers = workload_headers("tools/call", tool)
    return Call(tool, tools_call(tool, arguments), headers, sse=tool == "stream")


UPLOAD_HEADERS = workload_headers("tools/call", "upload")
