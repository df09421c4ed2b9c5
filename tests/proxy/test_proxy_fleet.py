"""The gate service (mcp-tap gate-server): one decision over every canary pod's bundle under
ROOT/RELEASE, the same JSON the gate command prints, over real HTTP on loopback; open
bundles judged on what is complete; requests it does not serve refused."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from gate_bundles import KEY_ENV, exchange, write_attested, write_policy
from releases import run
from served_app import served

from mcp_tap.commands.gate_server import build_app
from mcp_tap.evidence import EvidenceWriter
from mcp_tap.evidence.signing import Signer
from mcp_tap.gate.segments import SegmentTally
from mcp_tap.proxy.admin import MAX_BODY_BYTES
from mcp_tap.proxy.fleet import FleetOptions

SEED = bytes(range(32, 64))  # a deterministic, non-secret test key (raw Ed25519 seed)
PUBLIC = Signer(SEED).public_hex
HALF_LINE = b'{"kind":"exchange","hop":"edge","exchangeId":"x9'


def pod(path: Path, records: list[dict[str, Any]], *, still_writing: bool = False) -> Path:
    """One pod's bundle as its tap writes it (signed, tallies in the manifests, small
    segments, its release and pod named in bundle.json as the shipper names them: the
    directory ``.../<release>/<pod>``); ``still_writing``: a copy taken mid-write, with half
    a line at its end."""
    live = path.parents[2] / "live" / path.name if still_writing else path
    fleet = {"fleet": {"release": path.parent.name, "pod": path.name}}
    writer = EvidenceWriter(live, signing_key=SEED, tallies=SegmentTally,
                            max_segment_bytes=30_000, meta=fleet)
    writer.start()
    for record in records:
        assert writer.submit(record)
    if not still_writing:
        writer.close()
        return path
    assert writer.flush(timeout=30)
    shutil.copytree(live, path)
    writer.close()
    with max(path.glob("segment-*.jsonl")).open("ab") as out:
        out.write(HALF_LINE)
    return path


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FleetOptions:
    """Two releases of three pods: v2 healthy (one pod still writing), v3 with one pod
    whose origin broke a MUST (response.id)."""
    monkeypatch.setenv(KEY_ENV, "mcp-tap test rollback key, not a secret")
    root = tmp_path / "evidence"
    for pod_number in range(3):
        pod(root / "v2" / f"pod-{pod_number}", [exchange(n) for n in range(120)],
            still_writing=pod_number == 2)
        broken = ("response.id",) if pod_number == 1 else ()
        pod(root / "v3" / f"pod-{pod_number}",
            [exchange(n, findings=broken if n % 10 == 3 else ()) for n in range(120)])
    policy = write_policy(tmp_path, f'\n[evidence]\ntrusted_keys = ["{PUBLIC}"]\n')
    rollback = write_attested(tmp_path / "rollback.json")
    return FleetOptions(root=str(root), policy=str(policy), rollback=str(rollback),
                        release="v2")


@asynccontextmanager
async def serving(options: FleetOptions, waiters: int = 64) -> AsyncIterator[str]:
    async with served(build_app(options, max_waiters=waiters)) as base:
        yield base


def _gate_command(where: str, options: FleetOptions, capsys: pytest.CaptureFixture[str]
                  ) -> dict[str, Any]:
    _code, out, _err = run(["gate", where, "--policy", options.policy, "--rollback",
                            options.rollback, "--format", "json"], capsys)
    decision: dict[str, Any] = orjson.loads(out)
    return decision


async def test_one_decision_for_the_fleet(fleet: FleetOptions,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    timeout = aiohttp.ClientTimeout(total=180)
    async with serving(fleet) as base, aiohttp.ClientSession(timeout=timeout) as client:
        async with client.get(f"{base}/gate") as answer:
            assert answer.status == 200
            healthy = await answer.json()
        async with client.get(f"{base}/gate", params={"release": "v3"}) as answer:
            assert answer.status == 200
            broken = await answer.json()
        async with client.post(f"{base}/gate/flagger?release=v3", json={"name": "x"}) as answer:
            assert answer.status == 412
            flagger = await answer.json()
        async with client.post(f"{base}/gate/flagger", data=b"{}") as answer:
            healthy_status = answer.status
    # v2: every pod healthy, one still writing (half a line at its end): promote.
    assert healthy["action"] == "promote", healthy["reasons"]
    assert healthy_status == 200
    assert healthy["reading"]["mode"] == "tallies"
    bundles = healthy["sources"]["integrity"]["bundles"]
    assert sorted(b["end"] for b in bundles) == ["closed", "closed", "open"]
    assert healthy["sources"]["conformance"]["exchanges"] == 360
    # v3: the pod whose origin broke the rule decides for the fleet.
    assert broken["action"] == "rollback"
    reasons = [r for r in broken["reasons"] if r["rule"] == "gate.conformance"]
    assert [(r["findings"], r["details"]["count"]) for r in reasons] == [(["response.id"], 12)]
    # ... naming the pod whose bundle holds the findings (bundles are in pod order).
    (reason,) = reasons
    assert reason["message"] == ("response.id: 12 finding(s) in pod pod-1 of release v3 "
                                 "(12 in bundle 1 pod-1)")
    assert reason["details"]["pods"] == [{"pod": "pod-1", "release": "v3", "bundle": 1,
                                          "name": "pod-1", "count": 12}]
    assert [b["pod"] for b in broken["sources"]["integrity"]["bundles"]] == [
        "pod-0", "pod-1", "pod-2"]
    assert flagger["action"] == "rollback" and "response.id" in flagger["reason"]
    assert "in pod pod-1 of release v3" in flagger["reason"]
    # The same evaluation as the gate command on the same (closed) evidence.
    command = _gate_command(str(Path(fleet.root) / "v3"), fleet, capsys)
    assert command["evidenceDigest"] == broken["evidenceDigest"]


async def test_requests_it_does_not_serve(fleet: FleetOptions) -> None:
    async with serving(fleet) as base, aiohttp.ClientSession() as client:
        for query in ("release=../v2", "release=a/b", "other=1", "release=v2&release=v3"):
            async with client.get(f"{base}/gate?{query}") as answer:
                assert answer.status == 400, query
                assert "error" in await answer.json()
        async with client.get(f"{base}/nothing") as answer:
            assert answer.status == 404
        async with client.put(f"{base}/gate") as answer:
            assert answer.status == 405
        async with client.post(f"{base}/gate/flagger",
                               data=b"x" * (MAX_BODY_BYTES + 1)) as answer:
            assert answer.status == 413
        async with client.get(f"{base}/gate?release=v9") as answer:
            assert answer.status == 503  # no evidence for that release: no decision
            assert "error" in await answer.json()


async def test_waiting_requests_are_bounded(fleet: FleetOptions) -> None:
    """With one waiting slot, concurrent requests while an evaluation runs: one waits for
    the decision, the others get 503 with Retry-After at once."""
    timeout = aiohttp.ClientTimeout(total=180)
    async with serving(fleet, waiters=1) as base, aiohttp.ClientSession(
            timeout=timeout) as client:

        async def ask() -> tuple[int, str | None]:
            async with client.get(f"{base}/gate?release=v3") as answer:
                await answer.read()
                return answer.status, answer.headers.get("Retry-After")

        answers = await asyncio.gather(*(ask() for _ in range(5)))
    assert sorted(answers, key=str) == sorted([(200, None)] + [(503, "1")] * 4, key=str)
