"""Test helpers for the capture commands: record real SDK traffic through a tap.

:func:`record` runs a scenario of real ``mcp==2.3.0`` client calls (both eras) through an
in-process tap in front of an origin and returns the bundle and what the client got live.
:func:`run_script_origin` runs a test origin script (``tests/candidate_origin.py``).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from peers import Era, free_port, sdk_call_tool, sdk_list_tools
from taps import hop_url, running_tap, tap_options

_TESTS = Path(__file__).resolve().parent

Call = tuple[str, dict[str, Any]]  # (tool name, arguments); name "" lists tools


@dataclass
class Recorded:
    """A recorded run: the bundle directory and what the SDK client got, call by call."""

    bundle: Path
    live: list[tuple[Era, str, Any]]


DEFAULT_CALLS: tuple[Call, ...] = (
    ("", {}),
    ("add", {"a": 1, "b": 2}),
    ("echo", {"text": "hello"}),
    ("lookup", {"region": "eu-west", "query": "pods"}),
    ("slow_count", {"n": 3}),
)


async def client_calls(url: str, era: Era, calls: Sequence[Call]) -> list[tuple[Era, str, Any]]:
    """Make ``calls`` with the real SDK client; a JSON-RPC error is kept as its text."""
    from mcp.shared.exceptions import MCPError

    got: list[tuple[Era, str, Any]] = []
    for name, arguments in calls:
        try:
            if name == "":
                got.append((era, "tools/list", await sdk_list_tools(url, era)))
            else:
                got.append((era, name, await sdk_call_tool(url, era, name, arguments)))
        except MCPError as exc:
            got.append((era, name, f"error: {exc}"))
    return got


async def record(evidence: Path, upstream_base: str, calls: Sequence[Call] = DEFAULT_CALLS,
                 eras: Sequence[Era] = ("modern", "legacy")) -> Recorded:
    """Run ``calls`` in each era through a tap in front of ``upstream_base``; return the run."""
    live: list[tuple[Era, str, Any]] = []
    async with running_tap(tap_options(evidence, upstream=upstream_base)) as tap:
        url = hop_url(tap)
        for era in eras:
            live += await client_calls(url, era, calls)
    return Recorded(tap.bundle_dir, live)


@contextlib.contextmanager
def run_script_origin(script: str = "candidate_origin.py") -> Iterator[str]:
    """Run ``tests/SCRIPT --listen`` on a free port; yield its base URL (no ``/mcp``)."""
    port = free_port()
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    proc = subprocess.Popen([sys.executable, str(_TESTS / script), "--listen",
                             f"127.0.0.1:{port}"], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        import socket

        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
                    raise RuntimeError(f"{script} did not start: {out}") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()
