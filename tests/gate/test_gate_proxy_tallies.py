"""The tallies the real proxy seals: the recording process of a running tap writes them
into its signed manifests while real SDK clients of both eras call the real SDK server,
and the gate's decision from them is the full read's."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest
from peers import sdk_call_tool, sdk_list_tools
from taps import hop_url, running_tap, tap_options

from mcp_tap.evidence import find_bundles, verify_bundle
from mcp_tap.evidence.signing import Signer
from mcp_tap.gate import GateRequest, evaluate
from mcp_tap.gate.policy import EvidencePolicy, HealthPolicy, Policy
from mcp_tap.proxy.options import RecordingOptions

SEED = bytes(range(64, 96))  # a deterministic, non-secret test key (raw Ed25519 seed)
KEY_ENV = "MCP_TAP_TEST_SIGNING_KEY"


@pytest.mark.parametrize("mode", ["process", "inline"])
async def test_the_proxy_seals_what_the_full_read_gives(
        tmp_path: Path, origin_base: str, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    monkeypatch.setenv(KEY_ENV, SEED.hex())
    options = tap_options(tmp_path / "evidence", upstream=origin_base)
    options = replace(options, recording=RecordingOptions(mode=mode),
                      evidence=replace(options.evidence, signing_key_env=KEY_ENV,
                                       max_segment_bytes=16_000))
    async with running_tap(options) as server:
        url = hop_url(server)
        for n in range(6):
            await sdk_list_tools(url, "modern")
            await sdk_call_tool(url, "legacy", "add", {"a": n, "b": 1}, list_first=False)
            await sdk_call_tool(url, "modern", "echo", {"text": f"hi {n}"})
    (bundle,) = find_bundles(tmp_path / "evidence")
    manifests = sorted(bundle.glob("segment-*.manifest.json"))
    # Inline, each batch is a write (segments rotate); the recording process may write
    # everything it was handed at once.
    assert len(manifests) >= (3 if mode == "inline" else 1)
    tallies: list[Any] = [orjson.loads(m.read_bytes())["tallies"] for m in manifests]
    assert sum(t["exchanges"] for t in tallies) == verify_bundle(bundle).exchanges
    policy = Policy(
        health=HealthPolicy(min_samples=1, min_observation_seconds=0),
        evidence=EvidencePolicy(trusted_keys=(bytes.fromhex(Signer(SEED).public_hex),),
                                require_signed=True))
    request = GateRequest(evidence=(bundle,), policy=policy)
    merged, full = evaluate(request, workers=1), evaluate(request, workers=1, full=True)
    assert merged.reading.mode == "tallies"
    assert merged.reading.sealed_segments == len(manifests)
    assert merged.reading.records_read == 0
    assert merged.to_json() == full.to_json()
    summary = merged.to_json()["sources"]
    assert summary["sdk"]["compared"] > 0 and summary["conformance"]["exchanges"] >= 18
