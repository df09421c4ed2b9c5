"""CPU per exchange of the two-hop comparison, in the recording process's code path.

Two hops in one tap compare every POST seen at both: the correlator pairs the two views
(trace id, method, name, params digest), the core diffs them (``compare_hops``: every
change, classified for the kind of box) and the hop-comparison record is rendered with its
redacted changes. This runs exactly that (``Correlator.offer`` + ``comparison_record`` with
a real :class:`~mcp_tap.core.redaction.Redactor`) on the shapes fastmcp 4.2.3's proxy
produced around the demo origin (a ``tools/list`` of four tools with the gateway's titles
and ``_meta``, its own ids, identity, widened capabilities and log level; and a
``tools/call``), against an HTTP box passing the same exchange unchanged::

    .venv/bin/python bench/hop_cost.py [-n PAIRS]

Prints CPU microseconds per pair and per exchange (a pair is two exchanges, one per hop)
for each shape. Compare with the recording process's own cost per exchange
(``bench/recording_cost.py``, ``bench/benchmark.md``): the comparison only runs with two
hops, so a one-hop tap (what ``bench/run.py`` measures against direct) does none of it.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.hops import HopThresholds, HopView
from mcp_tap.core.redaction import Redactor
from mcp_tap.core.redaction.policy import RedactionPolicy
from mcp_tap.proxy.correlate import Correlator, Pending
from mcp_tap.proxy.hoprecord import ChangeRenderer, RedactedSides, comparison_record

HEADERS = HeaderMap((("host", "127.0.0.1:8080"), ("accept", "application/json, text/event-stream"),
                     ("content-type", "application/json"), ("mcp-protocol-version", "2026-07-28"),
                     ("mcp-method", "tools/list"), ("user-agent", "python-httpx/0.28"),
                     ("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")))
RESPONSE_HEADERS = HeaderMap((("content-type", "application/json"), ("server", "uvicorn"),
                              ("content-length", "900")))


def _request(rpc_id: int, client: str, widened: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": (
            {"elicitation": {"form": {}, "url": {}}, "roots": {"listChanged": True},
             "sampling": {}} if widened else {}),
        "io.modelcontextprotocol/clientInfo": {"name": client, "version": "1.0"},
    }
    if widened:
        meta["io.modelcontextprotocol/logLevel"] = "debug"
    return {"jsonrpc": "2.0", "id": rpc_id, "method": "tools/list", "params": {"_meta": meta}}


def _tools(rpc_id: int, server: str, titled: bool) -> dict[str, Any]:
    tools = []
    for name in ("echo", "add", "lookup", "slow_count"):
        tool: dict[str, Any] = {
            "name": name, "description": f"The {name} tool.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}},
                            "required": ["text"]},
        }
        if titled:
            tool["title"] = name.title()
            tool["_meta"] = {"fastmcp": {"tags": []}}
        tools.append(tool)
    return {"jsonrpc": "2.0", "id": rpc_id, "result": {
        "tools": tools, "resultType": "complete",
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": server, "version": "1"}}}}


def _pending(hop: str, at: float, request: Any, answer: Any, box: str) -> Pending:
    view = HopView(hop, HEADERS, request, 200, (answer,), forwarded_headers=HEADERS,
                   response_headers=RESPONSE_HEADERS)
    return Pending(f"{hop}-{at}", view, at, "http://127.0.0.1:9000", box,
                   "0af7651916cd43dd8448eb211c80319c", False, at + 0.01,
                   RedactedSides(copy.deepcopy(request), (copy.deepcopy(answer),)))


def _shapes() -> dict[str, tuple[Pending, Pending]]:
    gateway_outer = _pending("edge", 1.0, _request(2, "client", False),
                             _tools(2, "gateway", True), "mcp-gateway")
    gateway_inner = _pending("origin", 1.001, _request(1, "gateway", True),
                             _tools(1, "origin", False), "http")
    same_outer = _pending("edge", 1.0, _request(2, "client", False), _tools(2, "origin", False),
                          "http")
    same_inner = _pending("origin", 1.001, _request(2, "client", False),
                          _tools(2, "origin", False), "http")
    return {"mcp-gateway (fastmcp's changes)": (gateway_outer, gateway_inner),
            "http box, nothing changed": (same_outer, same_inner)}


def run(n: int) -> None:
    """Time ``n`` pairs of each shape."""
    redactor = Redactor(RedactionPolicy(), pseudonym_key=b"bench" * 8)
    renderer = ChangeRenderer(redactor)
    for label, (outer, inner) in _shapes().items():
        correlator = Correlator(HopThresholds())
        changes = 0
        start = time.process_time()
        for i in range(n):
            correlator.offer(inner, float(i))
            pair = correlator.offer(outer, float(i))
            assert pair is not None
            record = comparison_record(pair, "0af7651916cd43dd8448eb211c80319c", renderer, [])
            changes = len(record["changes"])
        spent = time.process_time() - start
        per_pair = spent / n * 1e6
        print(f"{label}: {changes} changes per pair, {per_pair:.1f} us CPU per pair, "
              f"{per_pair / 2:.1f} us per exchange")


def main(argv: list[str] | None = None) -> int:
    """Parse ``-n`` and run."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=5000, help="pairs per shape")
    run(parser.parse_args(argv).n)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
