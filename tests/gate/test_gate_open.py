"""The gate on a bundle still being written: judged on what is complete, never failed for
being open.

A live ``/gate`` poll reads the tap's own bundle while the writer appends to it: no closing
summary yet, a last segment without its manifest, and (when the poll lands mid-write) a last
line without its newline. These tests take that moment from the real writer (a copy of its
bundle after a flush, before close, plus the half of a line a reader may find) and assert
that an open bundle promotes, signed by a trusted key or not, while everything before the
open line is still checked as strictly as in a closed bundle.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from gate_bundles import KEY, KEY_ENV, exchange, write_attested, write_policy

from mcp_tap.evidence import EvidenceWriter, verify_bundle
from mcp_tap.evidence.signing import Signer
from mcp_tap.gate import GateRequest, evaluate, load_request

SEED = bytes(range(32, 64))  # a deterministic, non-secret test key (raw Ed25519 seed)
PUBLIC = Signer(SEED).public_hex
HALF_LINE = b'{"kind":"exchange","hop":"edge","exchangeId":"x9'  # the writer mid-write


def open_snapshot(tmp_path: Path, *, signed: bool, half_line: bool = True,
                  segment_bytes: int = 1 << 20) -> Path:
    """What a poll finds: the real writer's bundle after a flush, before its close, plus the
    start of the next line when ``half_line``."""
    live = tmp_path / "live"
    writer = EvidenceWriter(live, signing_key=SEED if signed else None,
                            max_segment_bytes=segment_bytes)
    writer.start()
    try:
        for n in range(120):
            assert writer.submit(exchange(n))
        assert writer.flush(timeout=30)
        snapshot = tmp_path / "snapshot"
        shutil.copytree(live, snapshot)
    finally:
        writer.close()
    if half_line:
        segment = max(snapshot.glob("segment-*.jsonl"))
        with segment.open("ab") as out:
            out.write(HALF_LINE)
    return snapshot


def request(tmp_path: Path, bundle: Path, *, trusted: bool, live: bool) -> GateRequest:
    """The gate request a tap's /gate makes (``live``) or a CI run on the same files."""
    extra = f'\n[evidence]\ntrusted_keys = ["{PUBLIC}"]\n' if trusted else ""
    rollback = write_attested(tmp_path / "rollback.json")
    return load_request([bundle], write_policy(tmp_path, extra), rollback,
                        open_bundles=[bundle] if live else [])


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


@pytest.mark.parametrize("signed", [True, False], ids=["signed", "unsigned"])
def test_open_bundle_promotes(tmp_path: Path, signed: bool) -> None:
    """Mid-write, with no closing summary: promote, and the integrity summary says open."""
    bundle = open_snapshot(tmp_path, signed=signed)
    decision = evaluate(request(tmp_path, bundle, trusted=signed, live=True), workers=1)
    assert decision.action == "promote", [r.to_json() for r in decision.reasons]
    (integrity,) = (s for s in decision.sources if s.name == "integrity")
    (summary,) = integrity.summary["bundles"]
    assert (summary["end"], summary["records"], summary["problems"]) == ("open", 120, 0)
    assert summary["signer"] == (PUBLIC if signed else None)


@pytest.mark.parametrize("signed", [True, False], ids=["signed", "unsigned"])
def test_the_same_files_closed_are_judged_as_before(tmp_path: Path, signed: bool) -> None:
    """Not declared open (a CI gate on a finished run), the same files roll back for the
    cut-short line, the missing summary named beside it."""
    bundle = open_snapshot(tmp_path, signed=signed)
    decision = evaluate(request(tmp_path, bundle, trusted=signed, live=False), workers=1)
    assert decision.action == "rollback"
    kinds = {r.details.get("kind") for r in decision.reasons if r.rule == "gate.integrity"}
    assert kinds == {"unclosed", "truncated"}


def test_open_segment_damage_still_fails(tmp_path: Path) -> None:
    """A complete record edited in the open segment is a digest error, open or not."""
    bundle = open_snapshot(tmp_path, signed=True, half_line=False)
    segment = max(bundle.glob("segment-*.jsonl"))
    data = segment.read_bytes()
    segment.write_bytes(data.replace(b'"x0007"', b'"x0008"', 1))
    decision = evaluate(request(tmp_path, bundle, trusted=True, live=True), workers=1)
    assert decision.action == "rollback"
    assert any(r.details.get("kind") == "digest" for r in decision.reasons)


def test_only_the_last_segment_may_lack_its_manifest(tmp_path: Path) -> None:
    """A deleted manifest of an earlier segment is not writing in progress: rollback."""
    bundle = open_snapshot(tmp_path, signed=True, segment_bytes=20_000)
    manifests = sorted(bundle.glob("segment-*.manifest.json"))
    assert len(manifests) >= 2
    manifests[0].unlink()
    decision = evaluate(request(tmp_path, bundle, trusted=True, live=True), workers=1)
    assert decision.action == "rollback"
    assert any(r.details.get("kind") == "manifest" for r in decision.reasons)


def test_a_closed_bundle_named_open_is_closed(tmp_path: Path) -> None:
    """Once the writer wrote its closing summary, a cut-short line is damage again."""
    bundle = tmp_path / "closed"
    with EvidenceWriter(bundle, signing_key=SEED) as writer:
        for n in range(120):
            assert writer.submit(exchange(n))
    with max(bundle.glob("segment-*.jsonl")).open("ab") as out:
        out.write(HALF_LINE)
    report = verify_bundle(bundle, open_bundle=True)
    assert report.end == "closed"
    # The half line lies past the bytes the sealed segment's manifest states: the read stops
    # at that bound and says so, as for any segment that grew after it was sealed.
    assert not report.ok
    assert {p.kind for p in report.errors} >= {"manifest"}


def test_open_report_of_verify(tmp_path: Path) -> None:
    """verify_bundle(open_bundle=True) on the mid-write copy: ok, end open, the half line
    unread; without it, a truncated segment and an unclosed warning."""
    bundle = open_snapshot(tmp_path, signed=True)
    trusted = [bytes.fromhex(PUBLIC)]
    live = verify_bundle(bundle, trusted_keys=trusted, open_bundle=True)
    assert (live.ok, live.end, live.records, live.problems) == (True, "open", 120, [])
    closed = verify_bundle(bundle)
    assert closed.end is None
    assert [(p.kind, p.severity) for p in closed.problems] == [
        ("truncated", "error"), ("unclosed", "warning")]
