"""Test helpers for the capture commands: record real SDK traffic through a tap.

:func:`record` runs a scenario of real ``mcp==2.3.0`` client calls (both eras) through an
in-process tap in front of an origin and returns the bundle and what the client got live.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp.shared.exceptions import MCPError
from peers import Era, run_origin, sdk_call_tool, sdk_list_tools
from taps import hop_url, running_tap, tap_options

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


def capture_releases(root: Path) -> dict[str, Path]:
    """Three real captures under ``root``: the demo origin twice as ``baseline`` and
    ``again`` (one release), and the candidate origin once as ``candidate``."""

    async def go() -> dict[str, Path]:
        found: dict[str, Path] = {}
        with run_origin() as url:
            base = url.removesuffix("/mcp")
            found["baseline"] = (await record(root / "baseline", base)).bundle
            found["again"] = (await record(root / "again", base)).bundle
        with run_origin(module="candidate_origin") as url:
            found["candidate"] = (await record(root / "candidate",
                                               url.removesuffix("/mcp"))).bundle
        return found

    return asyncio.run(go())
