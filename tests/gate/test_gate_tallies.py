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
from mcp_tap.gate.attest import ed25519_public_hex
from mcp_tap.gate.policy import ConformancePolicy, EvidencePolicy, Policy
from mcp_tap.gate.segments import SegmentTally

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
