"""The release gate end to end on evidence the real proxy recorded, never on hand-made records.

Topologies (real HTTP on loopback, no mocks of the peers)::

    SDK client -> tap -> demo origin (the real MCP Python SDK server)
    SDK client / httpx -> tap hop edge -> Gateway(collapse-errors) -> tap hop origin -> demo origin
    SDK client -> tap -> a small aiohttp origin whose tools/list carries an unknown field

Every capture stops its tap (draining and closing the bundle) before the gate reads it, and
the gate runs through the command line (``mcp_tap.cli.main``) with a rollback payload
attested by ``mcp-tap attest``, exactly as a release pipeline would run it.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import httpx2
import orjson
import pytest
from aiohttp import web
from gateways import GENERIC_500, Gateway
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from peers import raw_modern_request, sdk_mode
from releases import gate_json, reason_rules, rollback_payload, run
from taps import hop_url, running_tap, tap_options

StartApp = Callable[[web.Application], Awaitable[str]]  # the `serve_app` fixture

SIGNER = "release-controller@e2e"
KEY_ENV = "MCP_TAP_E2E_ROLLBACK_KEY"
# A deterministic, non-secret test fixture key (at least 32 bytes).
KEY = "mcp-tap end-to-end rollback key, not a secret"
TIMEOUT = 30.0

ECHO_CALLS = 6
SLOW_STEPS = 3
MIN_SAMPLES = 8
"""Clean traffic: one tools/list, ECHO_CALLS echo calls and one slow_count stream."""

POLICY = f"""
[health]
min_samples = {MIN_SAMPLES}
max_error_rate = 0.01
# Generous on purpose: these tests assert decisions, never timing.
max_latency_ms = 60000.0
min_observation_seconds = 0.0

[rollback]
trusted_signers = ["{SIGNER}"]
algorithms = ["hmac-sha256"]
hmac_key_env = "{KEY_ENV}"
"""

TWO_HOP_POLICY = POLICY.replace("[health]\n", '[health]\nhop = "edge"\n') + """
[hop]
require_two_hop = true
"""


# --- helpers --------------------------------------------------------------------------------


def gate(
    bundle: Path, policy: Path, rollback: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, dict[str, Any]]:
    """Run `mcp-tap gate BUNDLE --policy P --rollback R --json`; return exit code and decision."""
    capsys.readouterr()  # drop what ran before (a tap's structured logs)
    return gate_json([str(bundle), "--policy", str(policy), "--rollback", str(rollback)], capsys)


def reasons_of(decision: dict[str, Any], rule: str) -> list[dict[str, Any]]:
    """The JSON decision's reasons with gate rule ``rule``."""
    return [r for r in decision["reasons"] if r["rule"] == rule]


def write_policy(tmp_path: Path, text: str = POLICY) -> Path:
    """Write a policy file into ``tmp_path`` and return its path."""
    path = tmp_path / "policy.toml"
    path.write_text(text)
    return path


@contextlib.asynccontextmanager
async def sdk_client(url: str) -> AsyncIterator[Client]:
    """The real SDK client in the modern era (2026-07-28, no probe) against ``url``."""
    async with (
        httpx2.AsyncClient(timeout=TIMEOUT) as http,
        Client(streamable_http_client(url, http_client=http), mode=sdk_mode("modern"),
               read_timeout_seconds=TIMEOUT) as client,
    ):
        yield client


async def clean_traffic(url: str) -> None:
    """tools/list, ECHO_CALLS echo calls (JSON) and one slow_count answered as SSE."""
    progress: list[float] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(done)

    async with sdk_client(url) as client:
        listed = await client.list_tools()
        assert "echo" in {tool.name for tool in listed.tools}
        for n in range(ECHO_CALLS):
            echoed = await client.call_tool("echo", {"text": f"hi {n}"})
            assert echoed.content[0].text == f"hi {n}"
        counted = await client.call_tool("slow_count", {"n": SLOW_STEPS},
                                         progress_callback=on_progress)
        assert counted.content[0].text == f"counted to {SLOW_STEPS}"
    assert progress == [float(i) for i in range(1, SLOW_STEPS + 1)]


async def capture_clean(evidence: Path, origin: str) -> Path:
    """Record clean SDK traffic through one tap hop; return the closed bundle."""
    async with running_tap(tap_options(evidence, upstream=origin)) as server:
        await clean_traffic(hop_url(server))
    return server.bundle_dir


@pytest.fixture(scope="module")
def clean_bundle(tmp_path_factory: pytest.TempPathFactory, origin_base: str) -> Path:
    """A bundle of clean, modern SDK traffic to the real SDK server (read-only: copy to edit)."""
    evidence = tmp_path_factory.mktemp("clean-evidence")
    return asyncio.run(capture_clean(evidence, origin_base))


@pytest.fixture
def attested(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
             capsys: pytest.CaptureFixture[str]) -> Path:
    """A rollback payload attested with HMAC-SHA-256 by `mcp-tap attest`, key from the env."""
    monkeypatch.setenv(KEY_ENV, KEY)
    payload = tmp_path / "rollback-payload.json"
    payload.write_bytes(orjson.dumps(rollback_payload()))
    out = tmp_path / "rollback.json"
    code, _, err = run(["attest", str(payload), "--signer", SIGNER, "--hmac-key-env", KEY_ENV,
                        "--out", str(out)], capsys)
    assert (code, err) == (0, "")
    return out


# --- 1. a clean candidate -------------------------------------------------------------------


class TestCleanCandidate:
    """Clean SDK traffic to the real SDK server through the tap, with a verified rollback target."""

    def test_promotes(self, tmp_path: Path, clean_bundle: Path, attested: Path,
                      capsys: pytest.CaptureFixture[str]) -> None:
        """The gate promotes (exit 0) with per-source summaries, the rollback and a digest."""
        code, decision = gate(clean_bundle, write_policy(tmp_path), attested, capsys)
        assert (code, decision["action"], reason_rules(decision)) == (0, "promote", [])
        sources = decision["sources"]
        assert list(sources) == ["conformance", "sdk", "hop", "integrity", "health"]
        assert all(source["passed"] for source in sources.values())
        posts = 1 + ECHO_CALLS + 1
        assert (sources["conformance"]["exchanges"], sources["conformance"]["findings"]) == (
            posts, 0)
        assert (sources["sdk"]["compared"], sources["sdk"]["differences"]) == (posts, 0)
        assert sources["hop"]["comparisons"] == 0
        (bundle,) = sources["integrity"]["bundles"]
        assert (bundle["role"], bundle["ok"], bundle["records"], bundle["lost"]) == (
            "candidate", True, posts, 0)
        window = sources["health"]["window"]
        assert (window["samples"], window["errors"]) == (posts, 0)
        assert (window["sseStreams"], window["sseEvents"]) == (1, SLOW_STEPS + 1)
        rollback = decision["rollback"]
        assert (rollback["ready"], rollback["signer"], rollback["algorithm"]) == (
            True, SIGNER, "hmac-sha256")
        assert rollback["previousVersion"] == "1.4.2"
        assert len(decision["policyDigest"]) == 64
        assert len(decision["evidenceDigest"]) == 64

    def test_digest_is_reproducible(self, tmp_path: Path, clean_bundle: Path, attested: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
        """Gating the same evidence twice gives the same evidence digest."""
        policy = write_policy(tmp_path)
        _, first = gate(clean_bundle, policy, attested, capsys)
        _, second = gate(clean_bundle, policy, attested, capsys)
        assert first["evidenceDigest"] == second["evidenceDigest"]

    def test_bundle_verifies(self, clean_bundle: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
        """`mcp-tap verify` accepts the bundle the tap wrote (exit 0)."""
        code, out, err = run(["verify", str(clean_bundle), "--json"], capsys)
        assert (code, err) == (0, "")
        report = orjson.loads(out)
        assert report["ok"] is True
        assert report["records"] == 1 + ECHO_CALLS + 1


# --- 2. a tampered rollback payload --------------------------------------------------------


class TestTamperedRollback:
    """The clean evidence with rollback evidence changed after `mcp-tap attest` signed it."""

    @pytest.mark.parametrize(
        ("change", "rules"),
        [
            ({"healthy": "yes"}, ["gate.rollback.field", "gate.rollback.attestation"]),
            ({"artifactSha256": "e" * 64}, ["gate.rollback.attestation"]),
        ],
        ids=["healthy-yes", "changed-digest"],
    )
    def test_holds(self, tmp_path: Path, clean_bundle: Path, attested: Path,
                   change: dict[str, Any], rules: list[str],
                   capsys: pytest.CaptureFixture[str]) -> None:
        """A changed field breaks the HMAC (and a truthy string fails its field): hold, exit 3."""
        payload = orjson.loads(attested.read_bytes())
        attested.write_bytes(orjson.dumps({**payload, **change}))
        code, decision = gate(clean_bundle, write_policy(tmp_path), attested, capsys)
        assert (code, decision["action"], reason_rules(decision)) == (3, "hold", rules)
        assert all(source["passed"] for source in decision["sources"].values())
        assert decision["rollback"]["ready"] is False
        (attestation,) = reasons_of(decision, "gate.rollback.attestation")
        assert attestation["message"] == "HMAC signature does not match the payload and key"
        for reason in reasons_of(decision, "gate.rollback.field"):
            assert reason["details"] == {"field": "healthy", "expected": "exactly true",
                                         "got": "string"}


# --- 3. a faulty intermediary ---------------------------------------------------------------


MISMATCH_ID = 9001


def header_mismatch(rpc_id: int) -> tuple[dict[str, str], dict[str, Any]]:
    """An echo call whose ``Mcp-Name`` says ``add``: the SDK server answers 400 / -32020."""
    headers, body = raw_modern_request(
        "tools/call", {"name": "echo", "arguments": {"text": "hi"}}, request_id=rpc_id)
    return {**headers, "Mcp-Name": "add"}, body


async def capture_two_hops(evidence: Path, origin: str) -> tuple[Path, str]:
    """Record SDK traffic and a header mismatch across a collapsing gateway; return bundle, URL."""
    async with Gateway(fault="collapse-errors") as gateway:
        options = tap_options(evidence, hops=[("edge", gateway.url), ("origin", origin)])
        async with running_tap(options) as server:
            gateway.upstream = hop_url(server, "origin", path="")
            await clean_traffic(hop_url(server, "edge"))
            headers, body = header_mismatch(MISMATCH_ID)
            async with httpx.AsyncClient(timeout=TIMEOUT) as http:
                answer = await http.post(hop_url(server, "edge"), headers=headers, json=body)
        # The SDK origin answered 400 / -32020; the gateway turned it into a generic 500.
        assert (answer.status_code, answer.content) == (500, GENERIC_500)
        return server.bundle_dir, gateway.url


class TestFaultyIntermediary:
    """A gateway that collapses the SDK origin's 400 / -32020 into a 500, between two tap hops."""

    async def test_rolls_back_naming_the_gateway(
        self, tmp_path: Path, origin_base: str, attested: Path,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        """The gate rolls back (exit 1) with gate.hop [hop.error-collapse] naming the gateway."""
        bundle, gateway_url = await capture_two_hops(tmp_path / "evidence", origin_base)
        code, decision = gate(bundle, write_policy(tmp_path, TWO_HOP_POLICY), attested, capsys)
        assert (code, decision["action"]) == (1, "rollback")
        assert decision["rollback"]["ready"] is True
        assert sorted((r["rule"], tuple(r["findings"])) for r in decision["reasons"]) == [
            # The client's own bad request, judged at both hops.
            ("gate.conformance", ("request.header.mismatch",)),
            # What the client got instead of 400 / -32020: a text/plain 500 (a plain HTTP
            # answer, so no JSON-RPC parse finding besides the unanswered mismatch).
            ("gate.conformance", ("response.header-mismatch-unanswered",)),
            ("gate.health.error-rate", ()),
            ("gate.hop", ("hop.error-collapse",)),
        ]
        (hop,) = reasons_of(decision, "gate.hop")
        assert gateway_url in hop["details"]["box"]
        assert "hop edge upstream" in hop["details"]["box"]
        assert hop["details"]["count"] == 1
        posts = 1 + ECHO_CALLS + 1 + 1
        assert decision["sources"]["hop"]["comparisons"] == posts
        assert decision["sources"]["hop"]["boxes"] == [hop["details"]["box"]]
        # The health window is the edge hop's, the clients' view: the collapsed 500 counts.
        window = decision["sources"]["health"]["window"]
        assert (window["hop"], window["samples"], window["errors"]) == ("edge", posts, 1)
        assert window["errorCounts"]["http5xx"] == 1
        assert decision["sources"]["sdk"]["passed"] is True
        assert decision["sources"]["integrity"]["passed"] is True


# --- 4. an SDK field loss --------------------------------------------------------------------

LISTINGS = 8
"""tools/list calls through the tap to the future origin (ttlMs 0: nothing is cached)."""


def future_tools_list(rpc_id: Any) -> dict[str, Any]:
    """A correct modern tools/list response with a result field the SDK does not know."""
    return {"jsonrpc": "2.0", "id": rpc_id, "result": {
        "resultType": "complete",
        "ttlMs": 0,
        "cacheScope": "private",
        "futureHint": {"batch": True},
        "tools": [{"name": "echo", "description": "Return the text unchanged.",
                   "inputSchema": {"type": "object",
                                   "properties": {"text": {"type": "string"}}}}],
    }}


async def future_origin(request: web.Request) -> web.Response:
    """A modern MCP server that only lists tools, with ``futureHint`` in the result."""
    message = await request.json()
    if "id" not in message:
        return web.Response(status=202)
    if message.get("method") != "tools/list":
        error = {"code": -32601, "message": "Method not found"}
        return web.json_response({"jsonrpc": "2.0", "id": message["id"], "error": error},
                                 status=404)
    return web.json_response(future_tools_list(message["id"]))


async def capture_future(evidence: Path, serve_app: StartApp) -> Path:
    """Record LISTINGS SDK tools/list calls to the future origin through one tap hop."""
    app = web.Application()
    app.router.add_post("/mcp", future_origin)
    origin = await serve_app(app)
    async with (
        running_tap(tap_options(evidence, upstream=origin)) as server,
        sdk_client(hop_url(server)) as client,
    ):
        for _ in range(LISTINGS):
            listed = await client.list_tools()
            assert [tool.name for tool in listed.tools] == ["echo"]
            # The real SDK client's typed view already lost the field the wire carried.
            assert "futureHint" not in listed.model_dump(by_alias=True)
    return server.bundle_dir


class TestSdkFieldLoss:
    """An origin whose tools/list result carries a field the real SDK client drops."""

    async def test_does_not_promote(self, tmp_path: Path, serve_app: StartApp, attested: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
        """The gate rolls back with gate.sdk [sdk.dropped] and sdk-diff exits 1 on the bundle."""
        bundle = await capture_future(tmp_path / "evidence", serve_app)
        code, decision = gate(bundle, write_policy(tmp_path), attested, capsys)
        assert (code, decision["action"], reason_rules(decision)) == (1, "rollback", ["gate.sdk"])
        (reason,) = decision["reasons"]
        assert reason["findings"] == ["sdk.dropped"]
        assert reason["details"] == {"count": LISTINGS, "where": ["result.futureHint"]}
        sdk = decision["sources"]["sdk"]
        assert (sdk["compared"], sdk["differences"], sdk["rejected"]) == (LISTINGS, LISTINGS, 0)
        # Everything else about this candidate is fine: the loss alone blocks it.
        assert [name for name, s in decision["sources"].items() if not s["passed"]] == ["sdk"]

        code, out, err = run(["sdk-diff", str(bundle), "--json"], capsys)
        assert (code, err) == (1, "")
        report = orjson.loads(out)
        found = {(f["rule"], f["where"]) for e in report["entries"] for f in e["findings"]}
        assert found == {("sdk.dropped", "result.futureHint")}

    async def test_allowed_field_promotes(self, tmp_path: Path, serve_app: StartApp,
                                          attested: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
        """With `[sdk] allow_fields = ["futureHint"]` the same capture promotes."""
        bundle = await capture_future(tmp_path / "evidence", serve_app)
        policy = write_policy(tmp_path, POLICY + '\n[sdk]\nallow_fields = ["futureHint"]\n')
        code, decision = gate(bundle, policy, attested, capsys)
        assert (code, decision["action"], reason_rules(decision)) == (0, "promote", [])


# --- 5. integrity ------------------------------------------------------------------------------


class TestIntegrity:
    """The clean evidence with one byte of its segment flipped on disk."""

    def test_flipped_byte_blocks(self, tmp_path: Path, clean_bundle: Path, attested: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
        """verify fails (exit 1) and the gate refuses to promote with gate.integrity only."""
        bundle = Path(shutil.copytree(clean_bundle, tmp_path / "bundle"))
        (segment,) = bundle.glob("segment-*.jsonl")
        data = bytearray(segment.read_bytes())
        at = data.index(b'"hi 3"') + 1
        data[at] ^= 0x20  # "hi 3" -> "Hi 3": still valid JSON, no longer the recorded bytes
        segment.write_bytes(bytes(data))

        code, _, err = run(["verify", str(bundle)], capsys)
        assert (code, err) == (1, "")
        code, decision = gate(bundle, write_policy(tmp_path), attested, capsys)
        # The rollback target is verified, so incomplete evidence means rollback, not hold.
        assert (code, decision["action"]) == (1, "rollback")
        assert set(reason_rules(decision)) == {"gate.integrity"}
        kinds = sorted(r["details"]["kind"] for r in decision["reasons"])
        assert kinds == ["digest", "manifest"]
        (digest,) = [r for r in decision["reasons"] if r["details"]["kind"] == "digest"]
        assert digest["message"].endswith("digest mismatch")
        (checked,) = decision["sources"]["integrity"]["bundles"]
        assert (checked["ok"], checked["problems"]) == (False, 2)
        failing = [name for name, s in decision["sources"].items() if not s["passed"]]
        assert failing == ["integrity"]
