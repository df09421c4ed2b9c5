"""Forwarding while the admin listener is hammered: p50 latency and CPU per request.

Starts the benchmark origin and ``mcp-tap proxy`` (admin listener on, a gate policy so
``/gate`` evaluates) as processes, then sends ``--requests`` sequential ``tools/list``
requests through the tap twice: alone, and while ``--hammer`` clients (half on ``/gate``,
half on ``/metrics``) ask in a loop (as fast as the listener answers). Reported per phase:
the p50 and p95 forwarding latency, the tap's CPU per forwarded request (its process and
its children -- the recording process, the gate's evaluation -- apart, from /proc), and
how many admin answers the hammer got, by status.

The stable figure on a shared machine is CPU per request; compare the two phases' ratio.

Run: ``python bench/admin_hammer.py --requests 2000 --hammer 4``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
BODY = b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}'
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
           "MCP-Protocol-Version": "2026-07-28"}


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _cpu_seconds(pid: int) -> tuple[float, float]:
    """CPU seconds of ``pid`` (the forwarding loop, the admin listener) and of its children
    still running (the recording process, the gate's evaluation process)."""
    tick = os.sysconf("SC_CLK_TCK")

    def of(one: int) -> float:
        try:
            fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / tick

    children = Path(f"/proc/{pid}/task/{pid}/children")
    kids = [int(p) for p in children.read_text().split()] if children.exists() else []
    return of(pid), sum(of(kid) for kid in kids)


async def _wait_up(url: str, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    async with aiohttp.ClientSession() as client:
        while time.monotonic() < deadline:
            try:
                async with client.get(url) as answer:
                    if answer.status < 500:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise SystemExit(f"{url} did not come up")


async def _forward(url: str, count: int) -> list[float]:
    latencies = []
    async with aiohttp.ClientSession() as client:
        for _ in range(count):
            start = time.perf_counter()
            async with client.post(url, data=BODY, headers=HEADERS) as answer:
                await answer.read()
            latencies.append((time.perf_counter() - start) * 1000.0)
    return latencies


async def _hammer(base: str, path: str, stop: asyncio.Event, statuses: Counter[str]) -> None:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as client:
        while not stop.is_set():
            if True:  # one path per client: /metrics is not held up behind /gate
                try:
                    async with client.get(base + path) as answer:
                        await answer.read()
                        statuses[f"{path} {answer.status}"] += 1
                except aiohttp.ClientError:
                    statuses[f"{path} error"] += 1


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _phase(name: str, tap: subprocess.Popen[bytes], url: str, admin: str,
                 requests: int, hammer: int) -> None:
    stop = asyncio.Event()
    statuses: Counter[str] = Counter()
    hammers = [asyncio.create_task(_hammer(admin, ("/gate", "/metrics")[i % 2], stop, statuses))
               for i in range(hammer)]
    await asyncio.sleep(0.2 if hammer else 0)
    before = _cpu_seconds(tap.pid)
    latencies = await _forward(url, requests)
    after = _cpu_seconds(tap.pid)
    tap_cpu, kids_cpu = after[0] - before[0], after[1] - before[1]
    stop.set()
    await asyncio.gather(*hammers)
    print(f"{name}: p50 {_pct(latencies, 0.5):.3f} ms, p95 {_pct(latencies, 0.95):.3f} ms, "
          f"tap process CPU {tap_cpu / requests * 1e6:.0f} us/request, children "
          f"{kids_cpu / requests * 1e6:.0f} us/request, "
          f"admin answers {dict(sorted(statuses.items())) or '-'}")


async def _run(args: argparse.Namespace) -> None:
    origin_port, port, admin_port = _free_port(), _free_port(), _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_TAP_")}
    env.update(PYTHONPATH=str(ROOT), MCP_TAP_GATE_POLICY=str(ROOT / "config" / "policy.toml"))
    origin = subprocess.Popen([sys.executable, str(ROOT / "bench" / "origin.py"),
                               "--port", str(origin_port)], env=env)
    with tempfile.TemporaryDirectory() as evidence:
        tap = subprocess.Popen(
            [sys.executable, "-m", "mcp_tap", "proxy", "--listen", f"127.0.0.1:{port}",
             "--upstream", f"http://127.0.0.1:{origin_port}", "--evidence", evidence,
             "--admin", f"127.0.0.1:{admin_port}", "--log-level", "warning"],
            env=env, cwd=ROOT, stdout=subprocess.DEVNULL)
        try:
            admin = f"http://127.0.0.1:{admin_port}"
            await _wait_up(admin + "/healthz")
            url = f"http://127.0.0.1:{port}/mcp"
            await _forward(url, min(200, args.requests))  # warm up
            await _phase("alone", tap, url, admin, args.requests, 0)
            await _phase(f"hammered ({args.hammer} clients on /gate and /metrics)", tap, url,
                         admin, args.requests, args.hammer)
        finally:
            tap.send_signal(signal.SIGTERM)
            tap.wait(timeout=60)
            origin.terminate()
            origin.wait(timeout=30)


def main() -> None:
    """Parse the arguments and run both phases."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000, help="forwarded per phase")
    parser.add_argument("--hammer", type=int, default=4,
                        help="concurrent clients asking /gate and /metrics")
    asyncio.run(_run(parser.parse_args()))


if __name__ == "__main__":
    main()
