"""Two hops around a real MCP gateway: fastmcp 4.2.3's proxy (``fastmcp run URL --transport
http``), with the README's two-hop configuration, the demo origin behind it and the real
``mcp==2.3.0`` client in front in its three modes (``auto``, ``legacy``, ``2026-07-28``).

Topology (real HTTP on loopback, no mocks)::

    SDK client -> tap hop "edge" (box = "mcp-gateway") -> fastmcp proxy (subprocess)
               -> tap hop "origin" -> demo origin (the real MCP Python SDK server)

Clean traffic gives no ``must`` finding anywhere; every pair is made (by trace id, method
and name: the gateway sends its own JSON-RPC ids and, in the handshake era, its own
session); every comparison lists its changes with paths; the capability widening and the
added log level are ``should`` findings naming their paths. (The faults no real gateway makes
on purpose are in ``test_proxy_hops.py``, through the faulty aiohttp gateway.)
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from peers import run_origin, sdk_call_tool, stop_process
from ports import free_port, wait_listening
from taps import running_tap

from mcp_tap.evidence import read_bundle
from mcp_tap.proxy.options import load_options

README = Path(__file__).resolve().parents[2] / "README.md"
CAPS = "/params/_meta/io.modelcontextprotocol~1clientCapabilities/"
LEGACY_CAPS = "/params/capabilities/"
LOG_LEVEL = "/params/_meta/io.modelcontextprotocol~1logLevel"
WIDENED = ["elicitation", "roots", "sampling"]  # what fastmcp 4.2.3 declares for any client


def readme_two_hop_config(evidence: Path, ports: dict[int, int]) -> str:
    """The README's two-hop TOML, its ports replaced by ``ports``, evidence in ``evidence``."""
    text = README.read_text(encoding="utf-8")
    start = text.index("- **Two-hop canary**")
    block = re.search(r"```toml\n(.*?)```", text[start:], re.S)
    assert block is not None, "the README's two-hop section lost its TOML block"
    config = "\n".join(line.removeprefix("  ") for line in block.group(1).splitlines())
    config = config.replace('dir = "evidence"', f'dir = "{evidence.as_posix()}"')
    for readme_port, port in ports.items():
        config = config.replace(f"127.0.0.1:{readme_port}", f"127.0.0.1:{port}")
    return config


@pytest.fixture(scope="module")
def origin_port() -> Iterator[int]:
    """The demo origin (a real SDK server) in a subprocess for the module."""
    port = free_port()
    with run_origin(port):
        yield port


@pytest.fixture
def gateway_port() -> int:
    return free_port()


def start_fastmcp_proxy(upstream: str, port: int) -> subprocess.Popen[bytes]:
    """``fastmcp run UPSTREAM --transport http`` (fastmcp's proxy of a remote server)."""
    fastmcp = Path(sys.executable).with_name("fastmcp")
    proc = subprocess.Popen(
        [str(fastmcp), "run", upstream, "--transport", "http", "--host", "127.0.0.1",
         "--port", str(port), "--no-banner", "--log-level", "WARNING"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if not wait_listening(port, proc, 60.0):
        output = b""
        if proc.poll() is not None and proc.stdout is not None:
            output = proc.stdout.read()
        stop_process(proc)
        raise RuntimeError(f"fastmcp's proxy did not listen on {port}: {output!r}")
    return proc


async def run_chain(tmp_path: Path, origin_port: int, gateway_port: int,
                    recording: str) -> tuple[list[dict[str, Any]], dict[str, Any], list[str]]:
    """The three SDK modes through the README's chain; (records, closing summary, answers)."""
    edge, inner = free_port(), free_port()
    config = tmp_path / "two-hop.toml"
    config.write_text(readme_two_hop_config(
        tmp_path / "evidence", {8080: edge, 8081: inner, 9000: gateway_port,
                                9100: origin_port}) + f'\n[recording]\nmode = "{recording}"\n',
        encoding="utf-8")
    options = load_options(str(config), env={})
    assert [(h.name, h.box) for h in options.hops] == [("edge", "mcp-gateway"),
                                                       ("origin", "http")]
    answers = []
    async with running_tap(options) as server:
        proxy = start_fastmcp_proxy(f"http://127.0.0.1:{inner}/mcp", gateway_port)
        try:
            for mode in ("auto", "legacy", "modern"):
                result = await sdk_call_tool(f"http://127.0.0.1:{edge}/mcp", mode, "add",
                                             {"a": 2, "b": 3})
                answers.append(result["content"][0]["text"])
        finally:
            stop_process(proxy)
    bundle = read_bundle(server.bundle_dir)
    return bundle.records, bundle.meta["closed"], answers


def findings(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f for r in records if r["kind"] in ("exchange", "hop-comparison")
            for f in r["findings"]]


@pytest.mark.parametrize("recording", ["process", "inline"])
async def test_fastmcp_gateway_changes_are_listed_and_no_must(
    tmp_path: Path, origin_port: int, gateway_port: int, recording: str
) -> None:
    records, closed, answers = await run_chain(tmp_path, origin_port, gateway_port, recording)
    assert answers == ["5", "5", "5"]

    # Clean traffic through a real gateway: no MUST anywhere.
    assert [f["rule"] for f in findings(records) if f["strength"] == "must"] == []

    comparisons = [r for r in records if r["kind"] == "hop-comparison"]
    edge_posts = [r for r in records if r["kind"] == "exchange" and r["hop"] == "edge"
                  and r["ingress"]["httpMethod"] == "POST"]
    # Every edge request is paired (the legacy notifications/initialized is answered by the
    # gateway itself: 202, nothing sent on).
    requests = [r for r in edge_posts if r["rpcId"] is not None]
    assert sorted(r["method"] for r in requests) == sorted(
        ["server/discover", "tools/list", "tools/call",  # auto: discovery, then modern
         "initialize", "tools/list", "tools/call",  # legacy
         "tools/list", "tools/call"])  # 2026-07-28
    paired_edge = {c["exchangeIds"][0] for c in comparisons}
    assert paired_edge == {r["exchangeId"] for r in requests}
    assert {c["pairedBy"] for c in comparisons} == {"traceparent"}
    assert {c["boxKind"] for c in comparisons} == {"mcp-gateway"}

    # The origin's exchanges no pair took are the gateway's own session set-up.
    paired_inner = {c["exchangeIds"][1] for c in comparisons}
    own = [r["method"] for r in records if r["kind"] == "exchange" and r["hop"] == "origin"
           and r["ingress"]["httpMethod"] == "POST" and r["exchangeId"] not in paired_inner]
    assert set(own) <= {"initialize", "notifications/initialized"}
    assert closed["hopPairing"] == {"paired": {"traceparent": 8},
                                    "unpaired": {"edge": 1, "origin": len(own)},
                                    "ambiguous": 0}

    for c in comparisons:
        assert c["changes"], c["exchangeIds"]  # the gateway is a server: its identity at least
        for change in c["changes"]:
            assert change["path"].startswith(("/", "header:", "http:", "stream:")), change
            assert change["direction"] in ("request", "response")
            assert change["kind"] in ("added", "removed", "changed")
        # A finding names exactly the paths of its changes.
        for f in c["findings"]:
            assert f["paths"] == [ch["path"] for ch in c["changes"] if ch["meaning"] == f["rule"]]

    by_method = {}
    for c in comparisons:
        edge = next(r for r in requests if r["exchangeId"] == c["exchangeIds"][0])
        by_method.setdefault((edge["era"], edge["method"]), []).append(c)
    widened = {(f["rule"], f["strength"], tuple(sorted(f["paths"])))
               for c in comparisons for f in c["findings"]}
    assert ("hop.gateway.capability-widened", "should",
            tuple(CAPS + w for w in WIDENED)) in widened
    assert ("hop.gateway.capability-widened", "should",
            tuple(LEGACY_CAPS + w for w in WIDENED)) in widened
    assert ("hop.gateway.param-added", "should", (LOG_LEVEL,)) in widened
    assert {f["rule"] for f in findings(comparisons)} == {
        "hop.gateway.capability-widened", "hop.gateway.param-added"}

    # What a gateway changes by being one is expected: its ids, identity and session.
    (legacy_call,) = by_method[("legacy", "tools/call")]
    meanings = {(ch["class"], ch["path"], ch["meaning"]) for ch in legacy_call["changes"]}
    assert ("jsonrpc-id", "/id", "expected") in meanings
    assert ("session", "header:mcp-session-id", "expected") in meanings
    session = next(ch for ch in legacy_call["changes"] if ch["path"] == "header:mcp-session-id")
    # Session ids are secrets: keyed pseudonyms, different on each side of the box.
    assert re.fullmatch(r"\[REDACTED:[0-9a-f]+\]", session["before"])
    assert session["before"] != session["after"]
