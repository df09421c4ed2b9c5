"""A fleet that ships: three real ``mcp-tap proxy`` processes, three pods of one release,
in front of real origins (the demo SDK server; for pod-b a small aiohttp origin that breaks
a MUST), shipping to a real SeaweedFS on loopback. The store is frozen (SIGSTOP) mid-run and
thawed; then pod-c is killed with SIGKILL (its whole process group, as a pod dies) and
started again on the same evidence directory. Every client call is answered throughout;
every exchange answered is in the store or stated lost; the killed pod's bundle ends without
a closing record; and the gate over the store decides rollback, naming pod-b and the rule."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from aiohttp import web
from gate_bundles import KEY, KEY_ENV, SIGNER, write_attested
from peers import raw_modern_request
from ports import free_port, wait_listening
from releases import run
from seaweed import SECRET_KEY, SeaweedStore, aws_env, seaweed_store

from mcp_tap.evidence.signing import Signer

REPO_ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 60.0  # a hang guard, never a timing assertion
SEED = bytes(range(96, 128))  # a deterministic, non-secret test signing key
RELEASE = "v2"
ROOT = "s3://fleet/canary"
PODS = ("pod-a", "pod-b", "pod-c")
POLICY = f"""
[health]
min_samples = 10
max_error_rate = 0.5
max_latency_ms = 5000.0
min_observation_seconds = 0

[evidence]
trusted_keys = ["{Signer(SEED).public_hex}"]

[rollback]
trusted_signers = ["{SIGNER}"]
hmac_key_env = "{KEY_ENV}"
"""


async def _wrong_id(request: web.Request) -> web.Response:
    """A modern origin whose every answer carries another id: response.id (MUST)."""
    message = orjson.loads(await request.read())
    if "id" not in message:
        return web.Response(status=202)
    result = {"tools": [], "ttlMs": 0, "cacheScope": "private", "resultType": "complete"}
    body = {"jsonrpc": "2.0", "id": message["id"] + 1000, "result": result}
    return web.Response(body=orjson.dumps(body), content_type="application/json")


@dataclass
class Pod:
    name: str
    url: str
    admin: str
    evidence: Path
    process: subprocess.Popen[bytes]
    answered: int = 0


def _spawn(store: SeaweedStore, name: str, upstream: str, evidence: Path, log: Path) -> Pod:
    port, admin = free_port(), free_port()
    env = {k: v for k, v in aws_env(store).items() if not k.startswith("MCP_TAP_")}
    env.update(PYTHONPATH=str(REPO_ROOT), PYTHONUNBUFFERED="1", MCP_TAP_POD=name,
               MCP_TAP_EVIDENCE_RELEASE=RELEASE, MCP_TAP_RECORDING_MODE="process",
               # Segments seal every half second, so the store lags the pods by little.
               MCP_TAP_EVIDENCE_MAX_SEGMENT_AGE_S="0.5", MCP_TAP_SIGNING_KEY=SEED.hex())
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "mcp_tap", "proxy", "--listen", f"127.0.0.1:{port}",
             "--upstream", upstream, "--evidence", str(evidence),
             "--admin", f"127.0.0.1:{admin}", "--ship", ROOT],
            cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
            start_new_session=True)  # its own process group: SIGKILL takes the whole pod
    assert wait_listening(port, process, TIMEOUT), log.read_text()[-3000:]
    return Pod(name, f"http://127.0.0.1:{port}/mcp", f"http://127.0.0.1:{admin}", evidence,
               process)


def _stop(pod: Pod) -> None:
    if pod.process.poll() is None:
        pod.process.send_signal(signal.SIGTERM)
        try:
            pod.process.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(pod.process.pid, signal.SIGKILL)
            pod.process.wait()


@contextmanager
def _pods(store: SeaweedStore, tmp_path: Path, upstreams: dict[str, str]) -> Iterator[list[Pod]]:
    with ExitStack() as stack:
        pods = []
        for name in PODS:
            pod = _spawn(store, name, upstreams[name], tmp_path / name / "evidence",
                         tmp_path / f"{name}.log")
            stack.callback(_stop, pod)
            pods.append(pod)
        yield pods


async def _traffic(pods: list[Pod], per_pod: int, first_id: int) -> None:
    """``per_pod`` tools/list calls to each pod at once; every one must be answered."""
    async with httpx.AsyncClient(timeout=TIMEOUT) as client:

        async def one(pod: Pod, i: int) -> None:
            headers, body = raw_modern_request("tools/list", request_id=first_id + i)
            answer = await client.post(pod.url, headers=headers, json=body)
            assert answer.status_code == 200, (pod.name, answer.status_code, answer.text)
            pod.answered += 1

        await asyncio.gather(*(one(pod, i) for pod in pods for i in range(per_pod)))


def _local_exchanges(pod: Pod) -> int:
    return sum(line.count(b'"kind":"exchange"') for path in pod.evidence.rglob("segment-*.jsonl")
               for line in path.read_bytes().splitlines())


async def _until(condition: Any) -> None:
    async with asyncio.timeout(TIMEOUT):  # a hang guard, not a timing assertion
        while not condition():
            await asyncio.sleep(0.05)


def _download(store: SeaweedStore, into: Path) -> Path:
    """The store's copy of the release, as directories (until the commands read s3://)."""
    client = store.client()
    release = into / RELEASE
    for key in store.keys("fleet", f"canary/{RELEASE}/"):
        path = into / key.removeprefix("canary/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(client.get_object(Bucket="fleet", Key=key)["Body"].read())
    return release


def _shipped(bundles: Path) -> tuple[int, int, list[dict[str, Any]]]:
    """Exchange records and stated losses in the shipped bundles, and their bundle.json."""
    exchanges = lost = 0
    for path in sorted(bundles.rglob("segment-*.jsonl")):
        for line in path.read_bytes().splitlines():
            record = orjson.loads(line)
            if record["kind"] == "exchange":
                exchanges += 1
            elif record["kind"] == "gap":
                lost += record["lost"]
    metas = [orjson.loads(p.read_bytes()) for p in sorted(bundles.rglob("bundle.json"))]
    return exchanges, lost, metas


async def test_a_fleet_ships_through_a_frozen_store_and_a_killed_pod(
    tmp_path: Path, origin_base: str, serve_app: Any, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    app = web.Application()
    app.router.add_post("/mcp", _wrong_id)
    broken = await serve_app(app)
    upstreams = {"pod-a": origin_base, "pod-b": broken, "pod-c": origin_base}
    with seaweed_store(tmp_path) as store:
        store.make_bucket("fleet")
        with _pods(store, tmp_path, upstreams) as pods:
            await _traffic(pods, 20, 1)
            await _until(lambda: len(store.keys("fleet", f"canary/{RELEASE}/")) >= 3 * 3)

            store.freeze()
            try:
                # Forwarding goes on while the store answers nothing; segments keep sealing.
                await _traffic(pods, 30, 100)
                await asyncio.sleep(1.5)  # a few segment ages: sealed segments wait to ship
                async with httpx.AsyncClient(timeout=TIMEOUT) as client:
                    for pod in pods:
                        ready = await client.get(f"{pod.admin}/readyz")
                        # A store that is down never makes the tap unready.
                        assert ready.status_code == 200, ready.text
                        shipping = ready.json()["shipping"]
                        assert shipping["segmentsWaiting"] >= 1, shipping
                        metrics = (await client.get(f"{pod.admin}/metrics")).text
                        assert _gauge(metrics, "mcptap_evidence_spool_segments") >= 1
            finally:
                store.thaw()
            await _traffic(pods, 20, 200)

            # pod-c dies (SIGKILL to the pod's every process) once its exchanges are on disk.
            pod_c = pods[2]
            await _until(lambda: _local_exchanges(pod_c) == pod_c.answered)
            os.killpg(pod_c.process.pid, signal.SIGKILL)
            pod_c.process.wait(TIMEOUT)
            for pod in pods[:2]:
                _stop(pod)
                assert pod.process.returncode == 0
            killed_copy = _download(store, tmp_path / "before-restart") / "pod-c"
            killed_exchanges, _, killed_metas = _shipped(killed_copy)
            assert [m.get("closed") for m in killed_metas] == [None]  # no closing record

            # pod-c comes back on the same evidence directory: it ships what its spool held.
            restarted = _spawn(store, "pod-c", origin_base, pod_c.evidence,
                               tmp_path / "pod-c.log")
            _stop(restarted)
            copy = _download(store, tmp_path / "store")
            # The gate over the store itself: every pod's bundles of the release.
            for name, value in store.env.items():
                monkeypatch.setenv(name, value)
            monkeypatch.setenv(KEY_ENV, KEY)
            policy = tmp_path / "policy.toml"
            policy.write_text(POLICY)
            rollback = write_attested(tmp_path / "rollback.json")
            capsys.readouterr()  # what the run printed so far is not the gate's answer
            code, out, _err = run(["gate", f"{ROOT}/{RELEASE}", "--policy", str(policy),
                                   "--rollback", str(rollback), "--format", "json"], capsys)

    for pod in pods:
        exchanges, lost, metas = _shipped(copy / pod.name)
        if pod.name == "pod-c":
            # Its sealed segments all reached the store after the restart; the open segment
            # of the killed run (no manifest) stayed local: that is what the store lacks.
            local_tail = _open_segment_exchanges(pod.evidence)
            assert exchanges + lost + local_tail == pod.answered
            assert exchanges >= killed_exchanges
            ends = sorted(str((m.get("closed") or {}).get("end")) for m in metas)
            assert ends == ["None", "closed"]
        else:
            assert exchanges + lost == pod.answered, pod.name
        # Each bundle says, signed, which release and pod it is.
        assert {m["fleet"]["pod"] for m in metas} == {pod.name}
        assert {m["fleet"]["release"] for m in metas} == {RELEASE}
        if pod.name != "pod-c":
            (meta,) = metas
            assert meta["closed"]["end"] == "closed"
            assert meta["closed"]["shipping"]["to"] == f"{ROOT}/{RELEASE}/{pod.name}"
    for path in (tmp_path / "store").rglob("*"):
        if path.is_file():
            assert SECRET_KEY.encode() not in path.read_bytes()

    assert out, (code, _err)
    decision = orjson.loads(out)
    # The same decision as on a copy of the store in directories (each pod's directory of
    # bundles: the release's bundles sit a level deeper than one evidence directory's).
    _code, local, _ = run(["gate", *(str(copy / name) for name in PODS), "--policy",
                           str(policy), "--rollback", str(rollback), "--format", "json"], capsys)
    assert orjson.loads(local)["evidenceDigest"] == decision["evidenceDigest"]
    assert decision["action"] == "rollback", decision["reasons"]
    reasons = [r for r in decision["reasons"] if r["rule"] == "gate.conformance"]
    assert [r["findings"] for r in reasons] == [["response.id"]]
    # The decision's examples are record digests: each is a record of pod-b's bundle.
    (conformance,) = reasons
    assert conformance["details"]["count"] == pods[1].answered
    # The decision names the pod whose evidence drives it, as its signed bundle.json does.
    assert f" in pod pod-b of release {RELEASE} (" in conformance["message"]
    assert {(p["pod"], p["release"]) for p in conformance["details"]["pods"]} == {
        ("pod-b", RELEASE)}
    assert sum(p["count"] for p in conformance["details"]["pods"]) == pods[1].answered
    for digest in conformance["details"]["examples"]:
        needle = b'"digest":"%s"' % digest.encode()
        holders = {p.parent.parent.name for p in copy.rglob("segment-*.jsonl")
                   if needle in p.read_bytes()}
        assert holders == {"pod-b"}
    # The killed run's bundle is named as the one without a closing summary.
    (unclosed,) = [r for r in decision["reasons"] if r["rule"] == "gate.integrity"]
    assert unclosed["details"]["kind"] == "unclosed"
    assert unclosed["details"]["pod"] == "pod-c"
    assert f"(pod pod-c, release {RELEASE}): " in unclosed["message"]
    bundles = decision["sources"]["integrity"]["bundles"]
    assert bundles[unclosed["details"]["bundle"]]["end"] is None


def _gauge(text: str, name: str) -> float:
    (line,) = [x for x in text.splitlines() if x.startswith(f"{name} ")]
    return float(line.split()[1])


def _open_segment_exchanges(evidence: Path) -> int:
    """Exchanges in segment files without a manifest (a killed run's open segment)."""
    count = 0
    for path in evidence.rglob("segment-*.jsonl"):
        if not path.with_name(path.name.replace(".jsonl", ".manifest.json")).exists():
            count += path.read_bytes().count(b'"kind":"exchange"')
    return count
