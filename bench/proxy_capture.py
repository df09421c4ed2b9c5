"""A capture the real proxy wrote: real MCP SDK clients through ``mcp-tap proxy`` to the demo
origin (the real MCP SDK server), in both eras, JSON and SSE answers.

Two taps ("pods") run as real processes, each in front of its own demo origin: one origin
answers in JSON (``--json-response``), one over SSE. Client sessions (``mcp.Client`` of the
real SDK, half of them ``legacy``: an ``initialize`` handshake and an ``Mcp-Session-Id`` the
tap redacts to a keyed pseudonym tag, half ``2026-07-28``) call ``tools/list``, ``echo``,
``add`` and ``lookup`` in a loop until the taps recorded ``--exchanges`` exchanges; then
the taps are stopped with SIGTERM (drained, closed bundles). The taps sign their evidence
(``MCP_TAP_SIGNING_KEY``, a fixed bench key) and seal tallies into every manifest.

    .venv/bin/python bench/proxy_capture.py --out /tmp/capture --exchanges 20000

Prints one JSON line: the bundles, their exchange counts and the proxy's wall time.
Used by ``bench/fleet_gate.py``, which builds the fleet from these bundles.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
BENCH_SEED = bytes(range(100, 132))  # the bench's signing key: fixed, not a secret
SESSIONS = 8


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"a bench process exited early ({proc.args})")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise SystemExit(f"nothing listened on {port}")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_TAP_")}
    env.update(PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1", **extra)
    return env


def start_pod(evidence: Path, json_response: bool) -> tuple[list[subprocess.Popen[bytes]], str]:
    """A demo origin and a tap in front of it; returns the processes and the tap's URL."""
    origin_port, tap_port = _free_port(), _free_port()
    origin = subprocess.Popen(
        [sys.executable, "-m", "mcp_tap.demo.origin", "--listen", f"127.0.0.1:{origin_port}",
         *(["--json-response"] if json_response else [])],
        env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait(origin_port, origin)
    tap = subprocess.Popen(
        [sys.executable, "-m", "mcp_tap", "proxy", "--listen", f"127.0.0.1:{tap_port}",
         "--upstream", f"http://127.0.0.1:{origin_port}", "--evidence", str(evidence),
         "--admin", "", "--log-level", "warning"],
        env=_env(MCP_TAP_SIGNING_KEY=BENCH_SEED.hex(), MCP_TAP_ERAS_LEGACY_ALLOWED="true"),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait(tap_port, tap)
    return [origin, tap], f"http://127.0.0.1:{tap_port}/mcp"


async def _session(url: str, era: str, stop_at: list[int], done: list[int]) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(timeout=httpx2.Timeout(30)) as http:
        transport = streamable_http_client(url, http_client=http)
        mode = "legacy" if era == "legacy" else "2026-07-28"
        async with Client(transport, mode=mode, read_timeout_seconds=30) as client:
            n = 0
            while done[0] < stop_at[0]:
                n += 1
                await client.list_tools()
                await client.call_tool("echo", {"text": f"hello {n}"})
                await client.call_tool("add", {"a": n, "b": 2})
                await client.call_tool("lookup", {"region": "eu", "query": f"q{n}"})
                done[0] += 4


async def drive(urls: list[str], exchanges: int) -> int:
    """Run SDK sessions against ``urls`` until about ``exchanges`` calls were made."""
    done, stop_at = [0], [exchanges]
    # Each pod gets sessions of both eras.
    tasks = [_session(urls[(i // 2) % len(urls)], "legacy" if i % 2 else "modern", stop_at,
                      done) for i in range(SESSIONS)]
    await asyncio.gather(*tasks)
    return done[0]


def capture(out: Path, exchanges: int) -> dict[str, Any]:
    """Write the two pods' bundles under ``out`` (see the module docstring)."""
    processes: list[subprocess.Popen[bytes]] = []
    urls = []
    for name, json_response in (("json", True), ("sse", False)):
        started, url = start_pod(out / name, json_response)
        processes += started
        urls.append(url)
    began = time.monotonic()
    try:
        calls = asyncio.run(drive(urls, exchanges))
    finally:
        for proc in processes[1::2] + processes[0::2]:  # the taps first: they drain
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
    bundles = sorted(str(p.parent) for p in out.glob("*/*/bundle.json"))
    return {"bundles": bundles, "calls": calls, "seconds": round(time.monotonic() - began, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="a new directory for the bundles")
    parser.add_argument("--exchanges", type=int, default=20_000,
                        help="calls the clients make in all (default 20000)")
    args = parser.parse_args()
    sys.stdout.write(orjson.dumps(capture(args.out, args.exchanges)).decode() + "\n")


if __name__ == "__main__":
    main()
