"""Tests of the ``gate`` and ``attest`` commands on bundles written by the real EvidenceWriter."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import orjson
import pytest
from gate_bundles import (
    KEY,
    KEY_ENV,
    SIGNER,
    exchange,
    healthy,
    write_bundle,
    write_policy,
)
from gate_bundles import attested as attested  # the fixtures, re-exported
from gate_bundles import key_env as key_env
from releases import gate_json, reason_rules, rollback_payload, run

from mcp_tap.core.catalog import CATALOG
from mcp_tap.core.findings import Finding
from mcp_tap.gate.rollback import Trust, check_rollback


class TestGateCommand:
    """`mcp-tap gate` end to end on real bundles."""

    def test_promote(self, tmp_path: Path, attested: Path,
                     capsys: pytest.CaptureFixture[str]) -> None:
        """Clean, healthy, verified evidence with a ready rollback target promotes (exit 0)."""
        bundle = healthy(tmp_path / "candidate")
        code, decision = gate_json([str(bundle), "--policy", str(write_policy(tmp_path)),
                                    "--rollback", str(attested)], capsys)
        assert (code, decision["action"], reason_rules(decision)) == (0, "promote", [])
        assert decision["sources"]["sdk"]["compared"] == 120
        assert decision["sources"]["health"]["window"]["samples"] == 120
        assert decision["rollback"]["ready"] is True
        assert len(decision["evidenceDigest"]) == 64

    def test_text_output(self, tmp_path: Path, attested: Path,
                         capsys: pytest.CaptureFixture[str]) -> None:
        """Without --json the action comes first and the evidence digest last."""
        bundle = healthy(tmp_path / "candidate")
        code, out, _ = run(["gate", str(bundle), "--policy", str(write_policy(tmp_path)),
                            "--rollback", str(attested)], capsys)
        lines = out.splitlines()
        assert (code, lines[0]) == (0, "gate: promote")
        assert lines[-1].startswith("evidence digest: ")
        assert len(lines[-1].split(": ")[1]) == 64

    def test_conformance_failure_rolls_back(self, tmp_path: Path, attested: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
        """A conformance finding with a ready rollback target rolls back (exit 1)."""
        records = [exchange(n, findings=("response.id",) if n == 7 else ())
                   for n in range(120)]
        bundle = write_bundle(tmp_path / "candidate", records)
        code, decision = gate_json([str(bundle), "--policy", str(write_policy(tmp_path)),
                                    "--rollback", str(attested)], capsys)
        assert (code, decision["action"], reason_rules(decision)) == (
            1, "rollback", ["gate.conformance"])
        assert decision["reasons"][0]["findings"] == ["response.id"]
        assert decision["reasons"][0]["details"]["count"] == 1

    def test_sdk_difference_rolls_back(self, tmp_path: Path, attested: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
        """A field the SDK drops and the policy does not allow blocks promotion."""
        tool = {"name": "echo", "description": "Echo", "inputSchema": {"type": "object"},
                "futureHint": {"mode": "new"}}
        bundle = healthy(tmp_path / "candidate", tool=tool)
        policy = write_policy(tmp_path)
        code, decision = gate_json([str(bundle), "--policy", str(policy),
                                    "--rollback", str(attested)], capsys)
        assert (code, decision["action"], reason_rules(decision)) == (
            1, "rollback", ["gate.sdk"])
        assert decision["reasons"][0]["findings"] == ["sdk.dropped"]

    def test_sdk_allowlist_promotes(self, tmp_path: Path, attested: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
        """The same difference on a policy-allowed field does not block."""
        tool = {"name": "echo", "description": "Echo", "inputSchema": {"type": "object"},
                "futureHint": {"mode": "new"}}
        bundle = healthy(tmp_path / "candidate", tool=tool)
        policy = write_policy(tmp_path, '[sdk]\nallow_fields = ["futureHint"]\n')
        code, decision = gate_json([str(bundle), "--policy", str(policy),
                                    "--rollback", str(attested)], capsys)
        assert (code, decision["action"], reason_rules(decision)) == (0, "promote", [])

    def test_full_read_takes_the_sdk_outcome_or_reruns_it(
            self, tmp_path: Path, attested: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """`gate --full` takes a signed segment's SDK outcome from its tallies, `--rerun-sdk`
        runs the SDK on every exchange: the same decision (the dropped field blocks both)."""
        from mcp_tap.evidence import EvidenceWriter
        from mcp_tap.gate.segments import SegmentTally

        tool = {"name": "echo", "description": "Echo", "inputSchema": {"type": "object"},
                "futureHint": {"mode": "new"}}
        bundle = tmp_path / "candidate"
        with EvidenceWriter(bundle, signing_key=bytes(range(32)), tallies=SegmentTally,
                            max_segment_bytes=16_384) as writer:
            for n in range(120):
                assert writer.submit(exchange(n, tool=tool))
        argv = [str(bundle), "--policy", str(write_policy(tmp_path)), "--rollback",
                str(attested), "--full"]
        decisions = [gate_json(argv + extra, capsys) for extra in ([], ["--rerun-sdk"])]
        for code, decision in decisions:
            assert (code, decision["action"], reason_rules(decision)) == (
                1, "rollback", ["gate.sdk"])
            assert decision["reasons"][0]["findings"] == ["sdk.dropped"]
            assert decision["reasons"][0]["details"]["count"] == 120
        (_, taken), (_, rerun) = decisions
        assert taken["evidenceDigest"] == rerun["evidenceDigest"]
        segments = len(list(bundle.glob("*.manifest.json")))
        assert segments > 2
        assert taken["reading"]["sdk"] == {"segmentsFromTallies": segments, "exchangesRun": 0}
        assert rerun["reading"]["sdk"] == {"segmentsFromTallies": 0, "exchangesRun": 120}

    def test_missing_rollback_holds(self, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
        """Without rollback evidence the gate holds even on good evidence."""
        bundle = healthy(tmp_path / "candidate")
        code, decision = gate_json([str(bundle), "--policy", str(write_policy(tmp_path))],
                                   capsys)
        assert (code, decision["action"], reason_rules(decision)) == (
            3, "hold", ["gate.rollback.missing"])

    def test_wrong_key_holds(self, tmp_path: Path, attested: Path,
                             monkeypatch: pytest.MonkeyPatch,
                             capsys: pytest.CaptureFixture[str]) -> None:
        """A gate holding a different key cannot verify the attestation and holds."""
        monkeypatch.setenv(KEY_ENV, "another key that is at least 32 bytes long")
        records = [exchange(n, findings=("response.id",)) for n in range(120)]
        bundle = write_bundle(tmp_path / "candidate", records)
        code, decision = gate_json([str(bundle), "--policy", str(write_policy(tmp_path)),
                                    "--rollback", str(attested)], capsys)
        assert (code, decision["action"], reason_rules(decision)) == (
            3, "hold", ["gate.conformance", "gate.rollback.attestation"])

    def test_tampered_rollback_holds(self, tmp_path: Path, attested: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
        """Rollback evidence changed after signing holds the gate."""
        data = orjson.loads(attested.read_bytes())
        data["artifactSha256"] = "e" * 64
        attested.write_bytes(orjson.dumps(data))
        bundle = healthy(tmp_path / "candidate")
        code, decision = gate_json([str(bundle), "--policy", str(write_policy(tmp_path)),
                                    "--rollback", str(attested)], capsys)
        assert (code, decision["action"], reason_rules(decision)) == (
            3, "hold", ["gate.rollback.attestation"])

    def test_tampered_record_fails_integrity(self, tmp_path: Path, attested: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
        """A record changed on disk makes the evidence incomplete: no promote."""
        bundle = healthy(tmp_path / "candidate")
        segment = next(bundle.glob("segment-*.jsonl"))
        data = segment.read_bytes()
        assert b'"x0005"' in data
        segment.write_bytes(data.replace(b'"x0005"', b'"x9995"'))
        code, decision = gate_json([str(bundle), "--policy", str(write_policy(tmp_path)),
                                    "--rollback", str(attested)], capsys)
        assert (code, decision["action"]) == (1, "rollback")
        assert set(reason_rules(decision)) == {"gate.integrity"}

    def test_truncated_segment_fails_integrity(self, tmp_path: Path, attested: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
        """A segment cut mid-record still gives a decision, never a promote."""
        bundle = healthy(tmp_path / "candidate")
        segment = next(bundle.glob("segment-*.jsonl"))
        segment.write_bytes(segment.read_bytes()[:-40])
        code, decision = gate_json([str(bundle), "--policy", str(write_policy(tmp_path)),
                                    "--rollback", str(attested)], capsys)
        assert (code, decision["action"]) == (1, "rollback")
        assert set(reason_rules(decision)) == {"gate.integrity"}

    def test_gap_fails_integrity(self, tmp_path: Path, attested: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
        """A gap record means lost evidence: no promote."""
        records = [exchange(n) for n in range(120)]
        records.insert(60, {"kind": "gap", "lost": 3, "reason": "queue full"})
        bundle = write_bundle(tmp_path / "candidate", records)
        code, decision = gate_json([str(bundle), "--policy", str(write_policy(tmp_path)),
                                    "--rollback", str(attested)], capsys)
        assert (code, decision["action"], reason_rules(decision)) == (
            1, "rollback", ["gate.integrity"])
        assert decision["sources"]["integrity"]["bundles"][0]["lost"] == 3

    def test_two_hop_finding_names_box(self, tmp_path: Path, attested: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
        """A hop finding from a two-hop capture blocks and names the box."""
        entry = CATALOG["hop.status-changed"]
        collapse = Finding("hop.status-changed", entry.code, entry.boundary, "400 became 502",
                           "egress").to_json()
        records: list[dict[str, Any]] = []
        for n in range(120):
            records += [exchange(n), {**exchange(n), "hop": "origin"}]
        records.append({"kind": "hop-comparison", "between": "edge and origin",
                        "exchangeIds": ["x0001", "x0001"], "findings": [collapse]})
        bundle = write_bundle(tmp_path / "candidate", records)
        policy = write_policy(tmp_path)
        policy.write_text(policy.read_text().replace("[health]\n", '[health]\nhop = "edge"\n'))
        code, decision = gate_json([str(bundle), "--policy", str(policy),
                                    "--rollback", str(attested)], capsys)
        assert (code, decision["action"], reason_rules(decision)) == (
            1, "rollback", ["gate.hop"])
        assert decision["reasons"][0]["details"]["box"] == "between edge and origin"
        assert decision["reasons"][0]["findings"] == ["hop.status-changed"]
        assert decision["sources"]["health"]["window"]["samples"] == 120

    def test_too_few_samples(self, tmp_path: Path, attested: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
        """A short window fails the sample and duration thresholds."""
        bundle = healthy(tmp_path / "candidate", count=10)
        code, decision = gate_json([str(bundle), "--policy", str(write_policy(tmp_path)),
                                    "--rollback", str(attested)], capsys)
        assert (code, decision["action"], reason_rules(decision)) == (
            1, "rollback", ["gate.health.samples", "gate.health.duration"])

    def test_baseline_comparison(self, tmp_path: Path, attested: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
        """A candidate much slower than its baseline fails gate.health.baseline."""
        bundle = healthy(tmp_path / "candidate", latency=0.2)
        baseline = healthy(tmp_path / "baseline", latency=0.05)
        code, decision = gate_json([str(bundle), "--baseline", str(baseline),
                                    "--policy", str(write_policy(tmp_path)),
                                    "--rollback", str(attested)], capsys)
        assert (code, decision["action"], reason_rules(decision)) == (
            1, "rollback", ["gate.health.baseline"])
        assert [b["role"] for b in decision["sources"]["integrity"]["bundles"]] == [
            "candidate", "baseline"]

    def test_failed_transcript_report(self, tmp_path: Path, attested: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
        """A failed case in a transcripts --json report blocks promotion."""
        report = tmp_path / "transcripts.json"
        report.write_bytes(orjson.dumps({"passed": 1, "total": 2, "cases": [
            {"name": "golden", "passed": True, "rule": None},
            {"name": "negative-header-body-mismatch", "passed": False, "rule": None}]}))
        bundle = healthy(tmp_path / "candidate")
        code, decision = gate_json([str(bundle), "--report", str(report),
                                    "--policy", str(write_policy(tmp_path)),
                                    "--rollback", str(attested)], capsys)
        assert (code, decision["action"], reason_rules(decision)) == (
            1, "rollback", ["gate.conformance"])

    def test_ed25519_attestation(self, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
        """A key pair from `attest --generate-ed25519-key` attests evidence the gate accepts."""
        key = tmp_path / "controller.pem"
        code, out, _ = run(["attest", "--generate-ed25519-key", str(key), "--json"], capsys)
        public = orjson.loads(out)["publicKey"]
        assert code == 0
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
        payload = tmp_path / "payload.json"
        payload.write_bytes(orjson.dumps(rollback_payload()))
        rollback = tmp_path / "rollback.json"
        code, _, _ = run(["attest", str(payload), "--signer", SIGNER, "--ed25519-key", str(key),
                          "--out", str(rollback)], capsys)
        assert code == 0
        policy = write_policy(tmp_path, f'[rollback.ed25519_keys]\n"{SIGNER}" = "{public}"\n')
        bundle = healthy(tmp_path / "candidate")
        code, decision = gate_json([str(bundle), "--policy", str(policy),
                                    "--rollback", str(rollback)], capsys)
        assert (code, decision["action"], reason_rules(decision)) == (0, "promote", [])
        assert decision["rollback"]["algorithm"] == "ed25519"

    def test_digest_is_reproducible(self, tmp_path: Path, attested: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
        """Two runs on the same evidence give the same evidence digest."""
        bundle = healthy(tmp_path / "candidate")
        argv = [str(bundle), "--policy", str(write_policy(tmp_path)), "--rollback", str(attested)]
        _, first = gate_json(argv, capsys)
        _, second = gate_json(argv, capsys)
        assert first["evidenceDigest"] == second["evidenceDigest"]


class TestGateBadInput:
    """Bad input exits 2 with one line on stderr and no decision."""

    def check(self, argv: list[str], capsys: pytest.CaptureFixture[str], needle: str) -> None:
        """Assert exit 2, empty stdout and one stderr line containing ``needle``."""
        code, out, err = run(["gate", *argv], capsys)
        assert (code, out) == (2, "")
        assert err.count("\n") == 1
        assert err.startswith("mcp-tap: error: ")
        assert needle in err

    def test_malformed_policy(self, tmp_path: Path, attested: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
        """A malformed policy value names its key."""
        bundle = healthy(tmp_path / "candidate", count=2)
        policy = write_policy(tmp_path, "[hop]\nrequire_two_hop = \"yes\"\n")
        self.check([str(bundle), "--policy", str(policy), "--rollback", str(attested)], capsys,
                   "hop.require_two_hop")

    def test_missing_policy(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """An unreadable policy file is bad input."""
        bundle = healthy(tmp_path / "candidate", count=2)
        self.check([str(bundle), "--policy", str(tmp_path / "absent.toml")], capsys,
                   "cannot read policy")

    def test_unreadable_rollback(self, tmp_path: Path, key_env: None,
                                 capsys: pytest.CaptureFixture[str]) -> None:
        """A rollback file that cannot be read is bad input."""
        bundle = healthy(tmp_path / "candidate", count=2)
        self.check([str(bundle), "--policy", str(write_policy(tmp_path)),
                    "--rollback", str(tmp_path / "absent.json")], capsys,
                   "cannot read rollback evidence")

    def test_rollback_not_json(self, tmp_path: Path, key_env: None,
                               capsys: pytest.CaptureFixture[str]) -> None:
        """A rollback file that is not JSON is bad input."""
        bundle = healthy(tmp_path / "candidate", count=2)
        rollback = tmp_path / "rollback.json"
        rollback.write_text("{not json")
        self.check([str(bundle), "--policy", str(write_policy(tmp_path)),
                    "--rollback", str(rollback)], capsys, "is not valid JSON")

    def test_unknown_bundle_version(self, tmp_path: Path, attested: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
        """A bundle of an unknown format version is bad input."""
        bundle = healthy(tmp_path / "candidate", count=2)
        meta = orjson.loads((bundle / "bundle.json").read_bytes())
        (bundle / "bundle.json").write_bytes(orjson.dumps({**meta, "format": 99}))
        self.check([str(bundle), "--policy", str(write_policy(tmp_path)),
                    "--rollback", str(attested)], capsys, "evidence format 99")

    def test_not_a_bundle(self, tmp_path: Path, attested: Path,
                          capsys: pytest.CaptureFixture[str]) -> None:
        """A path that is not a bundle is bad input."""
        self.check([str(tmp_path / "nothing"), "--policy", str(write_policy(tmp_path)),
                    "--rollback", str(attested)], capsys, "not a directory")

    def test_several_hops_without_health_hop(self, tmp_path: Path, attested: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
        """Evidence of two hops needs health.hop in the policy."""
        records = [exchange(0), {**exchange(1), "hop": "origin"}]
        bundle = write_bundle(tmp_path / "candidate", records)
        self.check([str(bundle), "--policy", str(write_policy(tmp_path)),
                    "--rollback", str(attested)], capsys, "set health.hop")

    @pytest.mark.parametrize("how", ["twice", "bundle-and-directory", "symlink"])
    def test_bundle_named_twice(self, how: str, tmp_path: Path, attested: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
        """A bundle given twice would double its samples: bad input naming the bundle."""
        bundle = healthy(tmp_path / "evidence" / "run-1", count=7)
        other = {"twice": bundle, "bundle-and-directory": tmp_path / "evidence",
                 "symlink": tmp_path / "alias"}[how]
        if how == "symlink":
            other.symlink_to(bundle)
        self.check([str(bundle), str(other), "--policy", str(write_policy(tmp_path)),
                    "--rollback", str(attested)], capsys, "bundle run-1 is already given")

    def test_malformed_report(self, tmp_path: Path, attested: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
        """A report without cases is bad input."""
        bundle = healthy(tmp_path / "candidate", count=2)
        report = tmp_path / "report.json"
        report.write_text("[]")
        self.check([str(bundle), "--report", str(report), "--policy",
                    str(write_policy(tmp_path)), "--rollback", str(attested)], capsys,
                   "`cases` array")


class TestAttestCommand:
    """`mcp-tap attest`."""

    def test_hmac_to_stdout(self, tmp_path: Path, key_env: None,
                            capsys: pytest.CaptureFixture[str]) -> None:
        """The attested payload printed with --json verifies under the same key."""
        payload = tmp_path / "payload.json"
        payload.write_bytes(orjson.dumps(rollback_payload()))
        code, out, _ = run(["attest", str(payload), "--signer", SIGNER,
                            "--hmac-key-env", KEY_ENV, "--json"], capsys)
        assert (code, out.count("\n")) == (0, 1)
        result = check_rollback(orjson.loads(out), Trust((SIGNER,), hmac_key=KEY.encode()))
        assert [r.rule for r in result.reasons] == []

    def test_key_file(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A key file attests like the environment variable does."""
        key = tmp_path / "key"
        key.write_text(KEY + "\n")
        payload = tmp_path / "payload.json"
        payload.write_bytes(orjson.dumps(rollback_payload()))
        code, out, _ = run(["attest", str(payload), "--signer", SIGNER,
                            "--hmac-key-file", str(key)], capsys)
        result = check_rollback(orjson.loads(out), Trust((SIGNER,), hmac_key=KEY.encode()))
        assert (code, [r.rule for r in result.reasons]) == (0, [])

    @pytest.mark.parametrize(
        ("extra", "needle"),
        [
            (["--signer", SIGNER, "--hmac-key-env", "MCP_TAP_TEST_UNSET"], "is not set"),
            (["--signer", SIGNER], "needs --hmac-key-env"),
            (["--hmac-key-env", KEY_ENV], "needs --signer"),
        ],
    )
    def test_bad_input(self, tmp_path: Path, key_env: None, extra: list[str], needle: str,
                       capsys: pytest.CaptureFixture[str]) -> None:
        """Missing key material or signer exits 2 with one line."""
        payload = tmp_path / "payload.json"
        payload.write_bytes(orjson.dumps(rollback_payload()))
        code, out, err = run(["attest", str(payload), *extra], capsys)
        assert (code, out, err.count("\n")) == (2, "", 1)
        assert needle in err

    def test_refuses_truthy_payload(self, tmp_path: Path, key_env: None,
                                    capsys: pytest.CaptureFixture[str]) -> None:
        """A payload with a truthy string is not attested."""
        payload = tmp_path / "payload.json"
        payload.write_bytes(orjson.dumps(rollback_payload(registryStatus="ACTIVE")))
        code, _, err = run(["attest", str(payload), "--signer", SIGNER,
                            "--hmac-key-env", KEY_ENV], capsys)
        assert code == 2
        assert "refusing to attest: registryStatus" in err

    def test_generate_refuses_overwrite(self, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
        """Generating a key never overwrites an existing file."""
        key = tmp_path / "controller.pem"
        key.write_text("existing")
        code, _, err = run(["attest", "--generate-ed25519-key", str(key)], capsys)
        assert (code, key.read_text()) == (2, "existing")
        assert "cannot create key file" in err
        assert os.path.exists(key)
