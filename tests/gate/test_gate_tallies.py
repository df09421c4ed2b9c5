"""The gate on signed evidence reads the tallies sealed into each segment's manifest instead
of the records (mcp_tap.gate.segments, mcp_tap.gate.merging): on the same evidence its
decision is the one the full read gives, and its output says how it read."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import orjson
import pytest
import test_gate_fields
import test_gate_golden

from mcp_tap.evidence import EvidenceWriter, verify_bundle
from mcp_tap.gate import GateRequest, evaluate
from mcp_tap.gate.policy import ConformancePolicy, EvidencePolicy, Policy
from mcp_tap.gate.segments import SegmentTally
from mcp_tap.keys import ed25519_public_hex

TRUSTED = Policy(evidence=EvidencePolicy(
    trusted_keys=(bytes.fromhex(ed25519_public_hex(test_gate_fields.KEY)),),
    require_signed=True))


def _tallying(monkeypatch: pytest.MonkeyPatch, segment_bytes: int) -> None:
    """Make the golden tests' bundles as the proxy writes them: tallies in every manifest,
    and (small ``segment_bytes``) many segments to a bundle."""
    writer = functools.partial(EvidenceWriter, tallies=SegmentTally,
                               max_segment_bytes=segment_bytes)
    monkeypatch.setattr(test_gate_golden, "EvidenceWriter", writer)
    monkeypatch.setattr(test_gate_fields, "EvidenceWriter", writer)


def test_golden_outcomes_from_tallies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bundles whose manifests carry tallies give the golden decisions, byte for byte; the
    damaged one too, because its damage is not a stated loss (it is read whole)."""
    _tallying(monkeypatch, 1 << 26)
    expected = orjson.loads(test_gate_golden.GOLDEN.read_bytes())
    got = test_gate_golden._normalised(test_gate_golden.outcomes(tmp_path))
    assert sorted(got) == sorted(expected)
    for name, value in expected.items():
        if name != "gate damaged, key trusted":
            assert got[name] == value, name
    signed = tmp_path / "signed"
    assert b'"tallies":' in (signed / "segment-000001.manifest.json").read_bytes()


@pytest.mark.parametrize("policy", [Policy(), TRUSTED,
                                    Policy(conformance=ConformancePolicy(examples=1))])
def test_many_segments_decide_as_the_full_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               policy: Policy) -> None:
    _tallying(monkeypatch, 20_000)
    records = test_gate_golden._records()
    signed = test_gate_fields._bundle(tmp_path / "signed", records)
    other = test_gate_fields._bundle(tmp_path / "other", records[::-1])
    request = GateRequest(evidence=(signed, other), policy=policy, baseline=(other,))
    merged = evaluate(request, workers=1)
    full = evaluate(request, workers=1, full=True)
    assert merged.to_json() == full.to_json()
    reading: Any = merged.reading.to_json()
    manifests = len(list(signed.glob("*.manifest.json"))) + len(list(other.glob("*.manifest.json")))
    assert manifests > 8
    assert reading["mode"] == "tallies" and reading["recordsRead"] == 0
    assert reading["segmentsFromTallies"] == manifests + len(list(other.glob("*.manifest.json")))
    assert reading["percentiles"] == {"latency": "exact", "firstEvent": "exact",
                                      "duration": "exact"}
    assert full.reading.to_json()["mode"] == "records"


def test_a_policy_the_tallies_cannot_serve_reads_records(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _tallying(monkeypatch, 20_000)
    signed = test_gate_fields._bundle(tmp_path / "signed", test_gate_golden._records())
    policy = Policy(conformance=ConformancePolicy(examples=11))
    decision = evaluate(GateRequest(evidence=(signed,), policy=policy), workers=1)
    reading: Any = decision.reading.to_json()
    assert reading["mode"] == "records" and reading["segmentsFromTallies"] == 0
    assert reading["segmentsReadBecause"] == {
        "the policy asks for more than 10 examples": len(list(signed.glob("*.manifest.json")))}


def test_damage_inside_a_sealed_segment_is_for_the_full_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tallies gate checks the manifests' signatures and chain, not the segments'
    bytes: a byte flipped in a sealed segment is found by verify and gate --full."""
    _tallying(monkeypatch, 20_000)
    signed = test_gate_fields._bundle(tmp_path / "signed", test_gate_golden._records()[:60])
    segment = signed / "segment-000002.jsonl"
    data = bytearray(segment.read_bytes())
    data[len(data) // 2] ^= 0x01
    segment.write_bytes(bytes(data))
    request = GateRequest(evidence=(signed,), policy=TRUSTED)
    merged, full = evaluate(request, workers=1), evaluate(request, workers=1, full=True)
    def kinds(decision: Any) -> set[str]:
        return {r.details["kind"] for r in decision.reasons if r.rule == "gate.integrity"}

    assert merged.reading.mode == "tallies" and kinds(merged) == {"gap"}
    assert full.reading.mode == "records" and kinds(full) - {"gap"}
    assert not verify_bundle(signed).ok


def _failing() -> list[dict[str, Any]]:
    """Exchanges failing every way the health window tells apart: no answer from the tap,
    no status, 5xx, 4xx, JSON-RPC errors, and a client whose own broken request got one."""
    from gate_bundles import exchange

    records = [exchange(n) for n in range(40)]
    records[1]["tapError"] = {"phase": "connect", "message": "refused"}
    records[2]["origin"]["status"] = None
    records[3]["origin"]["status"] = 503
    records[4]["origin"]["status"] = 404
    for n in (5, 6, 7):
        records[n]["origin"]["body"] = {"jsonrpc": "2.0", "id": n,
                                        "error": {"code": -32602, "message": "bad"}}
    records[6]["origin"]["status"] = 400
    records[7]["findings"] = [{"rule": "request.schema", "code": -32602, "strength": "must",
                               "boundary": "request", "message": "m", "where": "ingress"}]
    records[8]["origin"]["status"] = 500
    records[8]["origin"]["body"] = records[5]["origin"]["body"]
    records[8]["findings"] = records[7]["findings"]
    return records


@pytest.mark.parametrize("counting", [(j, f, x) for j in (True, False) for f in (True, False)
                                      for x in (True, False)])
def test_every_counting_reads_the_same_window(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              counting: tuple[bool, bool, bool]) -> None:
    """A segment's tallies keep failing samples by what failed, so any [health.counting]
    gives the window the records give."""
    from mcp_tap.gate.policy import ErrorCounting, HealthPolicy

    _tallying(monkeypatch, 6_000)
    signed = test_gate_fields._bundle(tmp_path / "signed", _failing())
    jsonrpc, http_5xx, http_4xx = counting
    policy = Policy(health=HealthPolicy(counting=ErrorCounting(jsonrpc, http_5xx, http_4xx)))
    request = GateRequest(evidence=(signed,), policy=policy)
    merged = evaluate(request, workers=1)
    full = evaluate(request, workers=1, full=True)
    assert merged.reading.mode == "tallies" and merged.reading.sealed_segments > 3
    assert merged.to_json() == full.to_json()
    window = full.to_json()["sources"]["health"]["window"]
    assert window["errorCounts"]["tap"] == 1 and window["errorCounts"]["unanswered"] == 1


def _sdk_reasons(decision: Any) -> list[dict[str, Any]]:
    return [r.to_json() for r in decision.reasons if r.rule == "gate.sdk"]


@pytest.mark.parametrize("policy", [Policy(), TRUSTED])
def test_the_full_read_takes_the_sdk_outcome_from_signed_tallies(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, policy: Policy) -> None:
    """gate --full reads every record, and of a signed segment whose tallies hold the SDK
    differential the recording process ran with this SDK, takes that outcome instead of
    running the SDK again: the same decision, SDK differences and rejections included."""
    _tallying(monkeypatch, 20_000)
    records = test_gate_golden._records()
    signed = test_gate_fields._bundle(tmp_path / "signed", records)
    request = GateRequest(evidence=(signed,), policy=policy)
    taken = evaluate(request, workers=1, full=True)
    rerun = evaluate(request, workers=1, full=True, rerun_sdk=True)
    assert taken.to_json() == rerun.to_json()
    assert {r["details"].get("rejected", 0) > 0 for r in _sdk_reasons(rerun)} == {True, False}
    manifests = len(list(signed.glob("*.manifest.json")))
    exchanges = sum(r.get("kind", "exchange") == "exchange" for r in records)
    assert manifests > 4
    assert taken.reading.to_json()["sdk"] == {"segmentsFromTallies": manifests,
                                              "exchangesRun": 0}
    assert rerun.reading.to_json()["sdk"] == {"segmentsFromTallies": 0,
                                              "exchangesRun": exchanges}
    assert taken.reading.records_read == rerun.reading.records_read == len(records)
    assert (f"SDK differential: the recording process's outcome from the signed tallies of "
            f"{manifests} segment(s), run here on 0 exchange(s)") in taken.reading.text()


def test_sdk_tallies_the_policy_cannot_read_run_the_sdk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A policy allowing more SDK fields than the recording process did runs the SDK on
    every exchange read, and says why."""
    from mcp_tap.gate.policy import SdkPolicy

    _tallying(monkeypatch, 20_000)
    signed = test_gate_fields._bundle(tmp_path / "signed", test_gate_golden._records())
    policy = Policy(sdk=SdkPolicy(allow_fields=frozenset({"structuredContent"})))
    decision = evaluate(GateRequest(evidence=(signed,), policy=policy), workers=1, full=True)
    sdk = decision.reading.to_json()["sdk"]
    assert sdk["segmentsFromTallies"] == 0 and sdk["exchangesRun"] > 0
    assert sdk["segmentsRunBecause"] == {
        "the policy allows SDK fields the tallies did not":
            len(list(signed.glob("*.manifest.json")))}


def test_sdk_tallies_of_another_sdk_run_the_sdk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tallies sealed by a recording process with another SDK are not this gate's outcome:
    it runs its own SDK, which gives the decision a re-run gives."""
    import mcp_tap.sdkdiff

    _tallying(monkeypatch, 20_000)
    records = test_gate_golden._records()
    own = mcp_tap.sdkdiff.sdk_provenance()
    with monkeypatch.context() as patched:  # the recording process's SDK, another mcp
        patched.setattr(mcp_tap.sdkdiff, "sdk_provenance", lambda: {**own, "mcp": "0.0.1"})
        signed = test_gate_fields._bundle(tmp_path / "signed", records)
    manifest = orjson.loads((signed / "segment-000001.manifest.json").read_bytes())
    assert manifest["tallies"]["sdk"]["provenance"]["mcp"] == "0.0.1"
    request = GateRequest(evidence=(signed,), policy=Policy())
    decision = evaluate(request, workers=1, full=True)
    sdk = decision.reading.to_json()["sdk"]
    assert sdk["segmentsFromTallies"] == 0
    assert sdk["segmentsRunBecause"] == {
        "the SDK differential ran with another SDK": len(list(signed.glob("*.manifest.json")))}
    assert decision.to_json() == evaluate(request, workers=1, full=True,
                                          rerun_sdk=True).to_json()
    assert _sdk_reasons(decision)


def test_a_damaged_bundle_runs_the_sdk_on_what_it_reads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bundle that fails verification is read again leniently: no segment's tallies stand
    for its records there, the SDK runs on every exchange read."""
    _tallying(monkeypatch, 20_000)
    signed = test_gate_fields._bundle(tmp_path / "signed", test_gate_golden._records())
    segment = signed / "segment-000002.jsonl"
    data = bytearray(segment.read_bytes())
    data[len(data) // 2] ^= 0x01
    segment.write_bytes(bytes(data))
    request = GateRequest(evidence=(signed,), policy=TRUSTED)
    decision = evaluate(request, workers=1, full=True)
    assert decision.reading.to_json()["sdk"]["segmentsFromTallies"] == 0
    assert decision.to_json() == evaluate(request, workers=1, full=True,
                                          rerun_sdk=True).to_json()


def test_sdk_tallies_of_other_differential_code_run_the_sdk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same SDK packages but other code of the differential (another mcp-tap, whose
    default allowlist or comparison may differ): its sealed outcome is not this gate's."""
    from mcp_tap.gate import segments
    from mcp_tap.sdkversion import differential_code

    _tallying(monkeypatch, 20_000)
    with monkeypatch.context() as patched:
        patched.setattr(segments, "differential_code", lambda: "0" * 64)
        signed = test_gate_fields._bundle(tmp_path / "signed", test_gate_golden._records())
    manifest = orjson.loads((signed / "segment-000001.manifest.json").read_bytes())
    assert manifest["tallies"]["sdk"]["differential"] == "0" * 64 != differential_code()
    request = GateRequest(evidence=(signed,), policy=Policy())
    decision = evaluate(request, workers=1, full=True)
    manifests = len(list(signed.glob("*.manifest.json")))
    assert decision.reading.to_json()["sdk"]["segmentsRunBecause"] == {
        "the SDK differential ran with other code (another mcp-tap)": manifests}
    assert decision.to_json() == evaluate(request, workers=1, full=True,
                                          rerun_sdk=True).to_json()
    tallies = evaluate(request, workers=1).reading.to_json()
    assert tallies["mode"] == "records" and tallies["segmentsReadBecause"] == {
        "the SDK differential ran with other code (another mcp-tap)": manifests}


def test_the_differential_code_digest_follows_the_differential(tmp_path: Path) -> None:
    """The digest changes when a file of the differential changes (or the allowlist's
    module), and not when another module of the package does."""
    import shutil
    import subprocess
    import sys

    import mcp_tap

    def digest(tree: Path) -> str:
        done = subprocess.run(
            [sys.executable, "-c", "from mcp_tap.sdkversion import differential_code; "
             "print(differential_code())"], env={"PYTHONPATH": str(tree)}, cwd=tree,
            capture_output=True, text=True, check=True)
        return done.stdout.strip()

    source = Path(mcp_tap.__file__).parent
    trees = {}
    for name, edit in (("same", None), ("compare", "sdkdiff/compare.py"),
                       ("allowlist", "sdkversion.py"), ("other", "gate/health.py")):
        tree = tmp_path / name
        shutil.copytree(source, tree / "mcp_tap", ignore=shutil.ignore_patterns("__pycache__"))
        if edit is not None:
            with (tree / "mcp_tap" / edit).open("a") as out:
                out.write("\n# an edit\n")
        trees[name] = digest(tree)
    assert len(trees["same"]) == 64
    assert trees["other"] == trees["same"]
    assert len({trees["same"], trees["compare"], trees["allowlist"]}) == 3
