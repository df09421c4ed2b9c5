"""``mcp-tap demo``: the proxy in front of a local demo origin (the real MCP SDK server).

Starts ``python -m mcp_tap.demo.origin`` on a loopback port, puts a tap hop in front of it
and prints how to talk to it. ``--drive`` sends a short tour of MCP traffic through the tap
(both eras, JSON and SSE answers, a notification, a header mismatch), stops, verifies the
evidence and prints what was recorded.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import socket
import subprocess
import sys
import time
from collections import Counter
from typing import Any

import httpx
import orjson

from mcp_tap.core.eras import (
    META_CLIENT_CAPABILITIES,
    META_PROTOCOL_VERSION,
    MODERN_VERSIONS,
    PINNED_LEGACY_VERSION,
)
from mcp_tap.errors import InputError
from mcp_tap.evidence import read_bundle, verify_bundle
from mcp_tap.logs import add_log_level_option, configure_logging
from mcp_tap.outputs.printable import printable_lines
from mcp_tap.proxy.options import load_options
from mcp_tap.proxy.server import TapServer

NAME = "demo"
HELP = "run the proxy in front of a local demo origin (the real MCP SDK server)"
MODERN = MODERN_VERSIONS[0]
ACCEPT = "application/json, text/event-stream"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the command's options."""
    parser.add_argument("--listen", default="127.0.0.1:8080", help="where the tap listens")
    parser.add_argument("--evidence", default="evidence", help="evidence directory")
    parser.add_argument("--admin", default="127.0.0.1:8081", help="admin listener ('' = off)")
    parser.add_argument("--drive", action="store_true",
                        help="send a tour of MCP traffic through the tap, then stop and report")
    add_log_level_option(parser, "warning", "proxy log level")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _start_origin() -> tuple[subprocess.Popen[bytes], str]:
    if importlib.util.find_spec("mcp") is None:
        raise InputError("the demo origin needs the MCP SDK: pip install 'mcp-tap[demo]'")
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcp_tap.demo.origin", "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise InputError("the demo origin exited at start-up")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    proc.terminate()
    raise InputError("the demo origin did not start within 30 s")


def _modern(method: str, params: dict[str, Any] | None = None, *, rid: int = 1,
            name: str | None = None, **meta: Any) -> tuple[dict[str, str], bytes]:
    body_params = dict(params or {})
    body_params["_meta"] = {META_PROTOCOL_VERSION: MODERN, META_CLIENT_CAPABILITIES: {}, **meta}
    headers = {"Content-Type": "application/json", "Accept": ACCEPT,
               "MCP-Protocol-Version": MODERN, "Mcp-Method": method,
               "Authorization": "Bearer demo-secret-token"}
    if name is not None:
        headers["Mcp-Name"] = name
    message = {"jsonrpc": "2.0", "id": rid, "method": method, "params": body_params}
    return headers, orjson.dumps(message)


async def _tour(url: str) -> list[str]:
    """Send the tour; return one line per exchange as the client saw it."""
    lines: list[str] = []
    async with httpx.AsyncClient(timeout=30) as client:
        steps = [
            ("modern server/discover", _modern("server/discover")),
            ("modern tools/list", _modern("tools/list", rid=2)),
            ("modern tools/call echo (JSON)",
             _modern("tools/call", {"name": "echo", "arguments": {"text": "hi"}}, rid=3,
                     name="echo")),
            ("modern tools/call slow_count (SSE)",
             _modern("tools/call", {"name": "slow_count", "arguments": {"n": 3}}, rid=4,
                     name="slow_count", progressToken="tour")),
            ("modern header mismatch (Mcp-Name says echo, body says add)",
             _modern("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}, rid=5,
                     name="echo")),
        ]
        for label, (headers, body) in steps:
            r = await client.post(url, headers=headers, content=body)
            lines.append(f"{label}: HTTP {r.status_code} {r.headers.get('content-type', '')}")
        headers = {"Content-Type": "application/json", "Accept": ACCEPT,
                   "MCP-Protocol-Version": MODERN, "Mcp-Method": "notifications/cancelled"}
        note = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": 99}}
        r = await client.post(url, headers=headers, json=note)
        lines.append(f"modern notification: HTTP {r.status_code}")
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": PINNED_LEGACY_VERSION, "capabilities": {},
                           "clientInfo": {"name": "mcp-tap-demo", "version": "1"}}}
        r = await client.post(url, headers={"Accept": ACCEPT}, json=init)
        lines.append(f"legacy initialize: HTTP {r.status_code}")
        session = r.headers.get("mcp-session-id", "")
        legacy = {"Accept": ACCEPT, "MCP-Protocol-Version": PINNED_LEGACY_VERSION,
                  "Mcp-Session-Id": session}
        await client.post(url, headers=legacy,
                          json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        r = await client.post(url, headers=legacy,
                              json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        lines.append(f"legacy tools/list: HTTP {r.status_code}")
        await client.delete(url, headers=legacy)
    return lines


def _summary(server: TapServer) -> str:
    bundle = read_bundle(server.bundle_dir)
    exchanges = bundle.exchanges()
    rules: Counter[str] = Counter(f["rule"] for r in exchanges for f in r.get("findings", []))
    report = verify_bundle(server.bundle_dir)
    out = [f"evidence: {server.bundle_dir} ({len(exchanges)} exchanges, verify "
           f"{'ok' if report.ok else 'FAILED'})"]
    for r in exchanges:
        found = ", ".join(sorted({f["rule"] for f in r.get("findings", [])})) or "no findings"
        out.append(f"  {r['era']:<7} {r['ingress']['httpMethod']:<6} {r.get('method') or '-':<24} "
                   f"{r['egress'].get('status')}  {found}")
    out.append("findings by rule: " + (", ".join(f"{k} x{v}" for k, v in sorted(rules.items()))
                                       or "none"))
    return "\n".join(out) + "\n"


async def _run(args: argparse.Namespace, origin: str) -> None:
    options = load_options(None, listen=args.listen, upstream=origin, hop="demo",
                           evidence_dir=args.evidence, admin=args.admin)
    server = TapServer(options, log_level=args.log_level)
    if not args.drive:
        def ready(s: TapServer) -> None:
            host, port = s.addresses["demo"]
            sys.stderr.write(
                f"mcp-tap demo: tap on http://{host}:{port}/mcp -> demo origin {origin}/mcp\n"
                f"  evidence: {s.bundle_dir}\n  try:\n"
                f"  curl -s http://{host}:{port}/mcp -H 'Content-Type: application/json' "
                f"-H 'Accept: {ACCEPT}' -H 'MCP-Protocol-Version: {MODERN}' "
                "-H 'Mcp-Method: tools/list' -d '{\"jsonrpc\":\"2.0\",\"id\":1,"
                "\"method\":\"tools/list\",\"params\":{\"_meta\":{\"io.modelcontextprotocol/"
                f"protocolVersion\":\"{MODERN}\",\"io.modelcontextprotocol/clientCapabilities"
                "\":{}}}}'\n  then: mcp-tap verify " f"{s.options.evidence.dir}\n"
                "  Ctrl-C stops (evidence is flushed first)\n")
        await server.run_until_signalled(ready)
        return
    await server.start()
    try:
        host, port = server.addresses["demo"]
        lines = await _tour(f"http://{host}:{port}/mcp")
    finally:
        await server.stop()
    sys.stdout.write(printable_lines(f"client: {line}" for line in lines))
    sys.stdout.write(_summary(server))


def run(args: argparse.Namespace) -> int:
    """Run the demo; with ``--drive`` exit after the tour."""
    configure_logging(args.log_level)
    proc, origin = _start_origin()
    try:
        asyncio.run(_run(args, origin))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
    return 0
