"""Signed evidence: every forgery of issue 12 is rejected with a trusted key, by verify and gate."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import orjson
import pytest
from gate_bundles import attested as attested  # the fixtures, re-exported
from gate_bundles import exchange, write_policy
from gate_bundles import key_env as key_env
from releases import gate_json, reason_rules, run

from mcp_tap.errors import InputError
from mcp_tap.evidence import EvidenceWriter, manifest_name, segment_name, verify_bundle
from mcp_tap.evidence.format import encode_record
from mcp_tap.evidence.signing import Signer, load_signing_key
from mcp_tap.gate.decision import BundleCheck, integrity_source
from mcp_tap.gate.policy import EvidencePolicy, parse_policy
from mcp_tap.keys import ed25519_public_hex, generate_ed25519_key, parse_ed25519_private_key

# Deterministic, non-secret test keys (raw Ed25519 seeds).
OPERATOR = bytes(range(32))
ATTACKER = bytes(range(100, 132))


def write(path: Path, records: list[dict[str, Any]], key: bytes | None = OPERATOR,
          **options: Any) -> Path:
    """Write ``records`` with the real writer, signed with ``key`` (one submit each, so
    small segments rotate between records)."""
    with EvidenceWriter(path, signing_key=key, **options) as writer:
        for record in records:
            assert writer.submit(record)
    return path


def trust_file(tmp_path: Path, key: bytes = OPERATOR) -> Path:
    path = tmp_path / "trusted.pub"
    path.write_text(ed25519_public_hex(key) + "\n")
    return path


def load(path: Path) -> dict[str, Any]:
    value = orjson.loads(path.read_bytes())
    assert isinstance(value, dict)
    return value


def reseal(bundle: Path, key: bytes | None, edit: Any = None) -> None:
    """What a holder of the disk can do: rewrite records, re-chain, re-hash every manifest and
    the summary, and sign with ``key`` (None: keep the old, now wrong, signatures).

    ``edit(records)`` changes the list of records (all segments, in order) in place.
    """
    meta = load(bundle / "bundle.json")
    segments = sorted(bundle.glob("segment-*.jsonl"))
    per_segment = [[orjson.loads(line) for line in s.read_bytes().splitlines()]
                   for s in segments]
    flat = [(i, r) for i, records in enumerate(per_segment) for r in records]
    records = [r for _, r in flat]
    owners = [i for i, _ in flat]
    if edit is not None:
        owners = edit(records, owners)
    signer = Signer(key) if key is not None else None
    if signer is not None:
        meta["signing"] = signer.signing()
    prev, lines_by_segment = "", [[] for _ in segments]  # type: list[list[bytes]]
    heads: list[tuple[int, str, int, int]] = []
    for seq, (record, owner) in enumerate(zip(records, owners, strict=True)):
        body = {k: v for k, v in record.items() if k != "digest"}
        body.update(seq=seq, prev=prev)
        line, prev = encode_record(body)
        lines_by_segment[owner].append(line)
        heads.append((owner, prev, seq, 0))
    chain_prev = ""
    for index, segment in enumerate(segments):
        data = b"".join(lines_by_segment[index])
        segment.write_bytes(data)
        number = index + 1
        manifest_path = bundle / manifest_name(number)
        manifest = load(manifest_path)
        mine = [h for h in heads if h[0] == index]
        manifest.update(count=len(mine), bytes=len(data),
                        fileSha256=hashlib.sha256(data).hexdigest(),
                        prevSegmentChainHead=chain_prev)
        if mine:
            manifest.update(firstSeq=mine[0][2], lastSeq=mine[-1][2], chainHead=mine[-1][1])
            chain_prev = mine[-1][1]
        else:
            manifest.update(chainHead=chain_prev)
        if signer is not None:
            manifest = signer.sign(manifest)
        manifest_path.write_bytes(orjson.dumps(manifest))
    closed = meta["closed"]
    closed.update(records=len(records), lastSeq=len(records) - 1, chainHead=prev,
                  segments=len(segments),
                  lost=sum(r.get("lost", 0) for r in records if r["kind"] == "gap"))
    if signer is not None:
        meta = signer.sign(meta)
    (bundle / "bundle.json").write_bytes(orjson.dumps(meta))


def forge_record(records: list[dict[str, Any]], owners: list[int]) -> list[int]:
    records[2]["method"] = "forged"
    return owners


def drop_gap(records: list[dict[str, Any]], owners: list[int]) -> list[int]:
    (at,) = [i for i, r in enumerate(records) if r["kind"] == "gap"]
    del records[at]
    del owners[at]
    return owners


def signatures_of(report: Any) -> list[str]:
    return [p.message for p in report.problems if p.kind == "signature"]


@pytest.fixture
def signed(tmp_path: Path) -> Path:
    records = [exchange(n) for n in range(12)]
    records.insert(6, {"kind": "gap", "lost": 2, "reason": "queue full"})
    return write(tmp_path / "b", records, max_segment_bytes=4000)


class TestSignedWriter:
    def test_signed_bundle_verifies_under_its_key(self, signed: Path) -> None:
        """A bundle the writer signed verifies with the trusted key (the gap still fails it)."""
        report = verify_bundle(signed, trusted_keys=[bytes.fromhex(ed25519_public_hex(OPERATOR))])
        assert report.signer == ed25519_public_hex(OPERATOR)
        assert [p.kind for p in report.problems] == ["gap"]
        assert report.lost == 2
        assert len(list(signed.glob("*.manifest.json"))) >= 2
        assert all("signature" in load(m) for m in signed.glob("*.manifest.json"))

    def test_unsigned_bundle_marked(self, tmp_path: Path) -> None:
        """Without a key bundle.json says signing: null and --trust rejects it."""
        bundle = write(tmp_path / "b", [exchange(0)], key=None)
        assert load(bundle / "bundle.json")["signing"] is None
        assert verify_bundle(bundle).ok
        report = verify_bundle(bundle, trusted_keys=[bytes(32)])
        assert signatures_of(report) == [
            "bundle is unsigned, but signed evidence from a trusted key is required"]

    def test_key_from_environment(self) -> None:
        """The proxy's key comes from a file or the environment, parsed like attest's."""
        pem, _public = generate_ed25519_key()
        from_env = load_signing_key("", "K", {"K": pem.decode()})
        assert from_env == parse_ed25519_private_key(pem, "x")
        assert load_signing_key("", "K", {}) is None


class TestForgeries:
    """Each forgery of issue 12, done as a holder of the disk would, rejected with --trust."""

    def _rejected(self, bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                  fragment: str) -> None:
        code, out, err = run(["verify", str(bundle), "--trust", str(trust_file(tmp_path))],
                             capsys)
        assert (code, err) == (1, "")
        assert fragment in out

    def test_edit_and_rehash_keeping_signatures(
            self, signed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """An edited record with chain, manifests and summary re-hashed: signatures fail."""
        reseal(signed, None, forge_record)
        assert not [p for p in verify_bundle(signed).problems if p.kind in ("digest", "chain")]
        self._rejected(signed, tmp_path, capsys, "signature does not verify")

    def test_edit_and_resign_with_another_key(
            self, signed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """The same edit re-signed with the forger's key: signed by a key that is not trusted."""
        reseal(signed, ATTACKER, forge_record)
        assert verify_bundle(signed).signer == ed25519_public_hex(ATTACKER)
        self._rejected(signed, tmp_path, capsys,
                       f"signed by key {ed25519_public_hex(ATTACKER)}, which is not trusted")

    def test_drop_a_gap_record(
            self, signed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Dropping the gap (a failing bundle made passing) and re-hashing: rejected."""
        reseal(signed, None, drop_gap)
        assert verify_bundle(signed).lost == 0
        self._rejected(signed, tmp_path, capsys, "signature does not verify")
        reseal(signed, ATTACKER)
        assert verify_bundle(signed).ok  # self-consistent, but not by the trusted key
        self._rejected(signed, tmp_path, capsys, "which is not trusted")

    def test_delete_last_segment_and_fix_summary(
            self, signed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Deleting the last segment and fixing the summary breaks the summary's signature."""
        last = max(int(p.name[8:14]) for p in signed.glob("segment-*.jsonl"))
        (signed / segment_name(last)).unlink()
        (signed / manifest_name(last)).unlink()
        reseal(signed, None)
        self._rejected(signed, tmp_path, capsys, "bundle.json: signature does not verify")

    def test_strip_the_summary(
            self, signed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Putting back the opening bundle.json (no summary) hides nothing under --trust."""
        last = max(int(p.name[8:14]) for p in signed.glob("segment-*.jsonl"))
        (signed / segment_name(last)).unlink()
        (signed / manifest_name(last)).unlink()
        meta = load(signed / "bundle.json")
        del meta["closed"]
        (signed / "bundle.json").write_bytes(orjson.dumps(Signer(OPERATOR).sign(meta)))
        # (Re-signed with the operator key here only to stand for a copy of the opening
        # bundle.json; a forger has no key.) Without a summary the tail is unproven.
        self._rejected(signed, tmp_path, capsys, "no closing summary: unclosed")

    def test_whole_bundle_from_our_own_writer_under_another_key(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A bundle written end to end with mcp-tap's EvidenceWriter and another key."""
        forged = write(tmp_path / "forged", [exchange(n) for n in range(5)], key=ATTACKER)
        assert verify_bundle(forged).ok
        self._rejected(forged, tmp_path, capsys, "which is not trusted")

    def test_strip_signatures(
            self, signed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Marking a signed bundle unsigned (signing null, signatures gone) is unsigned."""
        meta = load(signed / "bundle.json")
        meta["signing"] = None
        meta.pop("signature")
        (signed / "bundle.json").write_bytes(orjson.dumps(meta))
        for path in signed.glob("*.manifest.json"):
            manifest = load(path)
            manifest.pop("signature")
            path.write_bytes(orjson.dumps(manifest))
        self._rejected(signed, tmp_path, capsys, "bundle is unsigned")

    def test_manifest_from_another_bundle(self, tmp_path: Path) -> None:
        """A manifest signed for another bundle (same key) names the wrong bundle id."""
        a = write(tmp_path / "a", [exchange(0)])
        b = write(tmp_path / "b", [exchange(0)])
        for name in (segment_name(1), manifest_name(1)):
            (b / name).write_bytes((a / name).read_bytes())
        report = verify_bundle(b, trusted_keys=[bytes.fromhex(ed25519_public_hex(OPERATOR))])
        assert any(p.kind == "manifest" and "bundleId" in p.message for p in report.problems)


class TestGatePolicy:
    def test_policy_section(self, tmp_path: Path) -> None:
        """[evidence] reads trusted keys, require_signed (on with keys) and max_loss_ratio."""
        raw = (f'[evidence]\ntrusted_keys = ["{ed25519_public_hex(OPERATOR)}"]\n'
               "max_loss_ratio = 0.01\n").encode()
        policy = parse_policy(raw, base_dir=tmp_path).evidence
        assert policy.trusted_keys == (bytes.fromhex(ed25519_public_hex(OPERATOR)),)
        assert (policy.require_signed, policy.max_loss_ratio) == (True, 0.01)
        with pytest.raises(InputError, match=r"evidence\.max_loss_ratio"):
            parse_policy(b"[evidence]\nmax_loss_ratio = 2\n", base_dir=tmp_path)

    def test_loss_ratio_bounds(self) -> None:
        """A stated loss fails integrity at the default ratio 0 and passes within a bound."""
        check = BundleCheck(role="candidate", ok=False, records=101, exchanges=99, lost=1,
                            problems=(("gap", "error", "gap: 1 records lost"),))
        assert [r.details["kind"] for r in integrity_source([check]).reasons] == ["gap"]
        assert integrity_source([check], EvidencePolicy(max_loss_ratio=0.01)).passed
        failing = integrity_source([check], EvidencePolicy(max_loss_ratio=0.005))
        assert [r.details["kind"] for r in failing.reasons] == ["gap", "loss"]

    def test_abrupt_end_is_a_loss(self) -> None:
        """An abrupt end fails integrity unless its in-flight loss is within the ratio."""
        check = BundleCheck(role="candidate", ok=False, exchanges=1000, lost=2, end="abrupt",
                            problems=(("gap", "error", "gap: 2"), ("abrupt", "error", "ended")))
        assert {r.details["kind"] for r in integrity_source([check]).reasons} == {
            "gap", "abrupt"}
        assert integrity_source([check], EvidencePolicy(max_loss_ratio=0.01)).passed

    def test_gate_rejects_forged_and_unsigned(
            self, tmp_path: Path, attested: Path,
            capsys: pytest.CaptureFixture[str]) -> None:
        """The gate with trusted keys promotes only the operator's bundle; digest has heads."""
        policy = write_policy(tmp_path, f'\n[evidence]\ntrusted_keys = '
                                        f'["{ed25519_public_hex(OPERATOR)}"]\n')
        records = [exchange(n) for n in range(120)]
        good = write(tmp_path / "good", records)
        code, decision = gate_json([str(good), "--policy", str(policy), "--rollback",
                                    str(attested)], capsys)
        assert (code, decision["action"]) == (0, "promote")
        (bundle,) = decision["sources"]["integrity"]["bundles"]
        assert bundle["head"] == verify_bundle(good).chain_head != ""
        assert bundle["signer"] == ed25519_public_hex(OPERATOR)
        for name, key in (("unsigned", None), ("forged", ATTACKER)):
            other = write(tmp_path / name, records, key=key)
            code, decision = gate_json([str(other), "--policy", str(policy), "--rollback",
                                        str(attested)], capsys)
            assert (code, decision["action"], reason_rules(decision)) == (
                1, "rollback", ["gate.integrity"])
            assert decision["reasons"][0]["details"]["kind"] == "signature"
