"""The gate names the pod (and release) whose evidence drives each reason: a fleet's bundles,
written by the real writer with the ``fleet`` member the shipper puts in ``bundle.json``,
read from a real S3-compatible store (SeaweedFS on loopback) and from directories."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from gate_bundles import exchange, write_attested, write_policy
from releases import run
from seaweed import SeaweedStore, seaweed_store, upload_bundle

from mcp_tap.evidence import EvidenceWriter

BUCKET = "fleet"
KEY = "mcp-tap test rollback key, not a secret"


def _pod_bundle(path: Path, pod: str, findings: tuple[str, ...], every: int) -> Path:
    with EvidenceWriter(path, meta={"fleet": {"release": "v7", "pod": pod}}) as writer:
        for n in range(120):
            assert writer.submit(exchange(n, findings=findings if n % every == 0 else ()))
    return path


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SeaweedStore, Path]]:
    """Release v7 of three pods: canary-1 clean; canary-2 breaks a MUST (response.id) in
    two bundles; canary-3's bundle was tampered with (a flipped byte in a record)."""
    root = tmp_path_factory.mktemp("fleet-pods")
    local = root / "v7"
    _pod_bundle(local / "canary-1" / "run-a", "canary-1", (), 1)
    _pod_bundle(local / "canary-2" / "run-a", "canary-2", ("response.id",), 4)
    _pod_bundle(local / "canary-2" / "run-b", "canary-2", ("response.id",), 10)
    tampered = _pod_bundle(local / "canary-3" / "run-a", "canary-3", (), 1)
    segment = tampered / "segment-000001.jsonl"
    data = bytearray(segment.read_bytes())
    data[data.index(b'"tools/list"') + 2] ^= 0x01
    segment.write_bytes(bytes(data))
    with seaweed_store(root) as store:
        store.make_bucket(BUCKET)
        for bundle in sorted(local.glob("*/*")):
            upload_bundle(store, BUCKET, f"canary/v7/{bundle.parent.name}/{bundle.name}",
                          bundle)
        yield store, local


@pytest.fixture
def gate(fleet: tuple[SeaweedStore, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
         capsys: pytest.CaptureFixture[str]) -> Any:
    store, _ = fleet
    for name, value in store.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MCP_TAP_TEST_ROLLBACK_KEY", KEY)
    policy = write_policy(tmp_path)
    rollback = write_attested(tmp_path / "rollback.json")

    def gate(*where: str, json: bool = True) -> tuple[int, str]:
        code, out, err = run(["gate", *where, "--policy", str(policy), "--rollback",
                              str(rollback), *(["--json"] if json else [])], capsys)
        assert err == "", err
        return code, out

    return gate


def test_the_decision_names_the_pods_from_the_store(fleet: tuple[SeaweedStore, Path],
                                                   gate: Any) -> None:
    _, local = fleet
    code, out = gate(f"s3://{BUCKET}/canary/v7")
    decision = orjson.loads(out)
    assert (code, decision["action"]) == (1, "rollback")
    bundles = decision["sources"]["integrity"]["bundles"]
    assert [(b["pod"], b["release"]) for b in bundles] == [
        ("canary-1", "v7"), ("canary-2", "v7"), ("canary-2", "v7"), ("canary-3", "v7")]
    (conformance,) = [r for r in decision["reasons"] if r["rule"] == "gate.conformance"]
    assert conformance["findings"] == ["response.id"]
    assert conformance["message"] == (
        "response.id: 42 finding(s) in pod canary-2 of release v7 "
        "(30 in bundle 1 run-a, 12 in bundle 2 run-b)")
    assert conformance["details"]["pods"] == [
        {"pod": "canary-2", "release": "v7", "bundle": 1, "name": "run-a", "count": 30},
        {"pod": "canary-2", "release": "v7", "bundle": 2, "name": "run-b", "count": 12}]
    integrity = [r for r in decision["reasons"] if r["rule"] == "gate.integrity"]
    assert integrity and all(r["details"]["pod"] == "canary-3" for r in integrity)
    assert integrity[0]["message"].startswith("bundle 3 (pod canary-3, release v7): digest: ")
    # The same decision from the directories (the pods' names come from bundle.json).
    _, from_disk = gate(*(str(p) for p in sorted(local.iterdir())))
    assert orjson.loads(from_disk)["evidenceDigest"] == decision["evidenceDigest"]


def test_the_text_output_names_the_pod(gate: Any) -> None:
    code, out = gate(f"s3://{BUCKET}/canary/v7", json=False)
    assert code == 1
    lines = out.splitlines()
    assert "  gate.conformance [response.id]: response.id: 42 finding(s) in pod canary-2 of " \
           "release v7 (30 in bundle 1 run-a, 12 in bundle 2 run-b)" in lines
    assert any(line.startswith("  gate.integrity: bundle 3 (pod canary-3, release v7): ")
               for line in lines), out


def test_a_bundle_naming_no_pod_or_a_hostile_one_names_none(tmp_path: Path, gate: Any) -> None:
    plain = _pod_bundle(tmp_path / "plain", "x", ("response.id",), 4)
    meta = orjson.loads((plain / "bundle.json").read_bytes())
    for name, fleet in (("none", None), ("hostile", {"pod": "a b\nc", "release": "v7"})):
        copy = tmp_path / name
        copy.mkdir()
        for path in plain.iterdir():
            (copy / path.name).write_bytes(path.read_bytes())
        (copy / "bundle.json").write_bytes(orjson.dumps({**meta, "fleet": fleet}))
        _, out = gate(str(copy))
        decision = orjson.loads(out)
        (reason,) = [r for r in decision["reasons"] if r["rule"] == "gate.conformance"]
        assert reason["message"] == "response.id: 30 finding(s)"
        assert "pods" not in reason["details"]
        assert "pod" not in decision["sources"]["integrity"]["bundles"][0]


def test_hop_reasons_and_many_pods_are_named_by_box_and_release() -> None:
    """A hop reason counts its (rule, box) in each bundle; pods of two releases are kept
    apart; past three pods the message says how many more (details list them all)."""
    from mcp_tap.gate.decision import Reason, SourceResult
    from mcp_tap.gate.pods import PlacedCounts, name_pods

    rule, box = "hop.body-changed", "edge->inner"
    bundles = [PlacedCounts(i, f"p{i % 5}", "v1" if i < 5 else "v2", f"run-{i}", {},
                            {(rule, box): i + 1, (rule, "other"): 100})
               for i in range(6)]
    hop = SourceResult("hop", (Reason("gate.hop", f"{rule} {box}: 21 finding(s)", (rule,),
                                      {"box": box, "count": 21}),
                               Reason("gate.hop.change", "a change", details={"box": box})))
    named, change = name_pods(hop, bundles).reasons
    assert change.message == "a change" and "pods" not in change.details
    assert named.message == (
        f"{rule} {box}: 21 finding(s) in pods p0 of release v1 (1 in bundle 0 run-0); "
        "p1 of release v1 (2 in bundle 1 run-1); p2 of release v1 (3 in bundle 2 run-2); "
        "and 3 more")
    assert [(p["pod"], p["release"], p["count"]) for p in named.details["pods"]] == [
        ("p0", "v1", 1), ("p1", "v1", 2), ("p2", "v1", 3), ("p3", "v1", 4), ("p4", "v1", 5),
        ("p0", "v2", 6)]
