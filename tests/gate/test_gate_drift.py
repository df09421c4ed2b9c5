"""The gate's drift source (``gate --baseline``) on real captures of two SDK "releases".

The captures are real, as in tests/drift/test_diff.py: the real ``mcp==2.3.0`` client in both eras
through the tap in front of the real SDK demo origin (the baseline, captured twice) and of
``tests/support/candidate_origin.py`` (``echo`` removed, ``add`` given a new required argument,
``lookup``'s header declaration dropped, ``multiply`` added).
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from captures import capture_releases
from releases import gate_json, reason_rules, rollback_payload

from mcp_tap.drift import diff_captures
from mcp_tap.errors import InputError
from mcp_tap.evidence import read_bundle
from mcp_tap.gate.attest import attest_hmac
from mcp_tap.gate.policy import DriftPolicy, parse_policy

SIGNER = "release-bot@example"
KEY_ENV = "MCP_TAP_TEST_DRIFT_ROLLBACK_KEY"
KEY = "mcp-tap drift test rollback key, not a secret"  # a deterministic test fixture key

# Health and observation thresholds a short test capture can meet, so the decision turns on
# drift alone.
POLICY = f"""
[health]
min_samples = 1
min_observation_seconds = 0.0
max_latency_ms = 60000.0

[rollback]
trusted_signers = ["{SIGNER}"]
hmac_key_env = "{KEY_ENV}"
"""


@pytest.fixture(scope="module")
def releases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The demo origin captured twice (one release) and the candidate release once."""
    root = tmp_path_factory.mktemp("drift-releases")
    found = capture_releases(root)
    rollback = root / "rollback.json"
    rollback.write_bytes(orjson.dumps(attest_hmac(rollback_payload(), SIGNER, KEY.encode())))
    found["rollback"] = rollback
    return found


def _gate(releases: dict[str, Path], tmp_path: Path, candidate: str, extra: str,
          capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
          ) -> tuple[int, dict[str, object]]:
    monkeypatch.setenv(KEY_ENV, KEY)
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY + extra)
    return gate_json([str(releases[candidate]), "--baseline", str(releases["baseline"]),
                      "--policy", str(policy), "--rollback", str(releases["rollback"])], capsys)


def _breaking(releases: dict[str, Path], area: str) -> list[str]:
    diff = diff_captures(read_bundle(releases["baseline"]).records,
                         read_bundle(releases["candidate"]).records)
    return [c.message for c in diff.changes
            if str(c.area) == area and str(c.severity) == "breaking"]


class TestGateDriftSource:
    """`mcp-tap gate --baseline` against real captures."""

    def test_breaking_inventory_drift_rolls_back(
            self, releases: dict[str, Path], tmp_path: Path,
            capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
        """By default each breaking inventory change is one gate.drift reason: rollback."""
        expected = _breaking(releases, "inventory")
        assert len(expected) >= 3
        code, decision = _gate(releases, tmp_path, "candidate", "", capsys, monkeypatch)
        assert (code, decision["action"]) == (1, "rollback")
        assert reason_rules(decision) == ["gate.drift"] * len(expected)
        reasons = decision["reasons"]
        assert isinstance(reasons, list)
        assert [r["details"]["area"] for r in reasons] == ["inventory"] * len(expected)
        subjects = {r["details"]["subject"] for r in reasons}
        assert {"tool echo", "tool add", "tool lookup"} <= subjects
        drift = decision["sources"]["drift"]  # type: ignore[index]
        assert drift["passed"] is False and drift["blocking"] == len(expected)
        # Breaking behaviour drift is reported, not blocking, under the default policy.
        assert drift["counts"]["behaviour"]["breaking"] == len(_breaking(releases, "behaviour"))
        assert drift["counts"]["behaviour"]["breaking"] >= 2

    def test_policy_blocks_every_breaking_change(
            self, releases: dict[str, Path], tmp_path: Path,
            capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
        """drift.block = ["*.breaking"] makes breaking behaviour drift block as well."""
        count = len(_breaking(releases, "inventory")) + len(_breaking(releases, "behaviour"))
        code, decision = _gate(releases, tmp_path, "candidate",
                               '\n[drift]\nblock = ["*.breaking"]\n', capsys, monkeypatch)
        assert (code, decision["action"]) == (1, "rollback")
        assert len(reason_rules(decision)) >= count
        assert set(reason_rules(decision)) == {"gate.drift"}

    def test_drift_reported_but_not_blocking(
            self, releases: dict[str, Path], tmp_path: Path,
            capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
        """drift.block = [] reports the drift and promotes."""
        code, decision = _gate(releases, tmp_path, "candidate", "\n[drift]\nblock = []\n",
                               capsys, monkeypatch)
        assert (code, decision["action"], reason_rules(decision)) == (0, "promote", [])
        drift = decision["sources"]["drift"]  # type: ignore[index]
        assert drift["passed"] is True and drift["blocking"] == 0
        assert drift["counts"]["inventory"]["breaking"] == len(_breaking(releases, "inventory"))

    def test_same_release_promotes(
            self, releases: dict[str, Path], tmp_path: Path,
            capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
        """The same release captured twice has no blocking drift: promote."""
        code, decision = _gate(releases, tmp_path, "again", "", capsys, monkeypatch)
        assert (code, decision["action"], reason_rules(decision)) == (0, "promote", [])
        drift = decision["sources"]["drift"]  # type: ignore[index]
        assert drift["passed"] is True and drift["compared"] == 23

    def test_no_baseline_no_drift_source(
            self, releases: dict[str, Path], tmp_path: Path,
            capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
        """Without --baseline the decision has no drift source."""
        monkeypatch.setenv(KEY_ENV, KEY)
        policy = tmp_path / "policy.toml"
        policy.write_text(POLICY)
        code, decision = gate_json([str(releases["candidate"]), "--policy", str(policy),
                                    "--rollback", str(releases["rollback"])], capsys)
        assert (code, "drift" in decision["sources"]) == (0, False)  # type: ignore[operator]

    def test_baseline_without_exchanges(
            self, releases: dict[str, Path], tmp_path: Path,
            capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
        """A baseline with no exchange cannot be compared: gate.drift.empty blocks."""
        from mcp_tap.evidence import EvidenceWriter

        with EvidenceWriter(tmp_path / "empty"):
            pass
        monkeypatch.setenv(KEY_ENV, KEY)
        policy = tmp_path / "policy.toml"
        policy.write_text(POLICY)
        code, decision = gate_json([str(releases["again"]), "--baseline", str(tmp_path / "empty"),
                                    "--policy", str(policy), "--rollback",
                                    str(releases["rollback"])], capsys)
        assert (code, decision["action"]) == (1, "rollback")
        assert "gate.drift.empty" in reason_rules(decision)


class TestDriftPolicy:
    """The [drift] policy section."""

    def test_default_blocks_breaking_inventory_only(self) -> None:
        """The default blocks breaking inventory drift and nothing else."""
        policy = parse_policy(b"", base_dir=Path("."))
        assert policy.drift == DriftPolicy(("inventory.breaking",))
        assert policy.drift.blocks("inventory", "breaking")
        assert not policy.drift.blocks("behaviour", "breaking")
        assert not policy.drift.blocks("inventory", "compatible")

    def test_wildcards(self) -> None:
        """Either part of a pattern may be *."""
        policy = DriftPolicy(("*.breaking", "health.*"))
        assert policy.blocks("conformance", "breaking") and policy.blocks("health", "changed")
        assert not policy.blocks("inventory", "changed")

    @pytest.mark.parametrize("value", ['["inventory"]', '["tools.breaking"]',
                                       '["inventory.bad"]', '"inventory.breaking"', "[1]"])
    def test_malformed_block_is_bad_input(self, value: str) -> None:
        """A pattern that could never match is refused, naming drift.block."""
        with pytest.raises(InputError, match=r"drift\.block"):
            parse_policy(f"[drift]\nblock = {value}\n".encode(), base_dir=Path("."))
