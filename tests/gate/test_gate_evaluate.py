"""The gate as a library: typed request in, Decision out, streamed and parallel per bundle."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import FrozenInstanceError
from pathlib import Path

import orjson
import pytest
from gate_bundles import KEY, KEY_ENV, exchange, write_attested, write_bundle, write_policy

from mcp_tap.errors import InputError
from mcp_tap.gate import GateRequest, evaluate, evaluate_files, load_request
from mcp_tap.gate.decision import conformance_source, hop_source, judge_conformance, judge_hop
from mcp_tap.gate.health import WindowTally, compute_window
from mcp_tap.gate.policy import ConformancePolicy, ErrorCounting, HopPolicy
from mcp_tap.gate.tally import ConformanceTally, HopTally


def _records(start: int, count: int) -> list[dict[str, object]]:
    # Every fifth exchange carries a finding, so tallies have rules, examples and counts.
    return [exchange(n, findings=("response.id",) if n % 5 == 0 else ())
            for n in range(start, start + count)]


@pytest.fixture
def rollback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Attested rollback evidence, with its key in the environment (the tap's too)."""
    monkeypatch.setenv(KEY_ENV, KEY)
    return write_attested(tmp_path / "rollback.json")


class TestTallies:
    """Tallies merged bundle by bundle judge exactly as one pass over every record."""

    def test_conformance_merge_equals_one_pass(self) -> None:
        """Two merged conformance tallies give the one-pass result, examples included."""
        first, second = _records(0, 7), _records(7, 9)
        policy = ConformancePolicy(examples=2)
        merged = ConformanceTally(2).add_all(first)
        merged.merge(ConformanceTally(2).add_all(second))
        assert judge_conformance(merged, policy) == conformance_source(first + second, policy)
        assert merged.rules["response.id"].count == 4

    def test_hop_merge_equals_one_pass(self) -> None:
        """Two merged hop tallies give the one-pass result."""
        first = [{"kind": "hop-comparison", "box": "gw", "findings": [
            {"rule": "hop.body-changed", "boundary": "hop", "message": "m"}]}]
        second = [{"kind": "hop-comparison", "box": "gw", "findings": [
            {"rule": "hop.body-changed", "boundary": "hop", "message": "m"}]}]
        merged = HopTally(3).add_all(first)
        merged.merge(HopTally(3).add_all(second))
        assert judge_hop(merged, HopPolicy()) == hop_source(first + second, HopPolicy())
        assert merged.boxes[("hop.body-changed", "gw")].count == 2

    def test_window_merge_equals_one_pass(self) -> None:
        """Two merged window tallies give the one-pass window: percentiles, span, errors."""
        first, second = _records(0, 30), _records(30, 40)
        merged = WindowTally(ErrorCounting())
        for record in first:
            merged.add(record)
        other = WindowTally(ErrorCounting())
        for record in second:
            other.add(record)
        merged.merge(other)
        assert merged.window() == compute_window(first + second, ErrorCounting())
        assert merged.window().samples == 70


class TestEvaluate:
    """evaluate() on bundles the real writer wrote."""

    def test_request_is_frozen(self, tmp_path: Path, rollback: Path) -> None:
        """A request is a frozen value: nothing changes it after it was read."""
        bundle = write_bundle(tmp_path / "b", _records(0, 120))
        request = load_request([bundle], write_policy(tmp_path), rollback)
        with pytest.raises(FrozenInstanceError):
            request.policy = request.policy  # type: ignore[misc]  # the point of the test
        assert isinstance(request, GateRequest) and request.evidence == (bundle,)

    def test_parallel_equals_sequential(self, tmp_path: Path, rollback: Path) -> None:
        """Bundles scanned in two processes give the very decision of one process."""
        bundles = [write_bundle(tmp_path / f"b{i}", _records(i * 80, 80)) for i in range(3)]
        request = load_request(bundles, write_policy(tmp_path), rollback)
        one = evaluate(request, workers=1)
        two = evaluate(request, workers=2)
        assert one == two
        assert one.to_json()["sources"]["conformance"]["exchanges"] == 240
        assert one.to_json()["sources"]["conformance"]["rules"] == {"response.id": 48}
        assert str(one.action) == "rollback"

    def test_library_equals_command(self, tmp_path: Path, rollback: Path) -> None:
        """The command prints exactly the library's decision."""
        bundle = write_bundle(tmp_path / "b", [exchange(n) for n in range(120)])
        policy = write_policy(tmp_path)
        decision = evaluate_files([bundle], policy, rollback)
        done = subprocess.run(
            [sys.executable, "-m", "mcp_tap", "gate", str(bundle), "--policy", str(policy),
             "--rollback", str(rollback), "--json"],
            capture_output=True, check=False, timeout=120)
        assert (done.returncode, done.stderr) == (0, b"")
        printed = orjson.loads(done.stdout)
        # ... and how it read the evidence, outside the decision's digest.
        assert printed.pop("reading") == decision.reading.to_json()
        assert printed == decision.to_json()
        assert str(decision.action) == "promote"

    def test_environ_is_an_input(self, tmp_path: Path, rollback: Path) -> None:
        """The HMAC key is looked up in the request's environ, not only os.environ."""
        bundle = write_bundle(tmp_path / "b", [exchange(n) for n in range(120)])
        request = load_request([bundle], write_policy(tmp_path), rollback, environ={})
        decision = evaluate(request, workers=1)
        assert str(decision.action) == "hold"
        assert "gate.rollback.attestation" in [r.rule for r in decision.reasons]

    def test_bad_rollback_json_is_input_error(self, tmp_path: Path) -> None:
        """Rollback evidence that is not JSON is bad input naming the file."""
        bundle = write_bundle(tmp_path / "b", [exchange(0)])
        bad = tmp_path / "rollback.json"
        bad.write_text("{not json")
        with pytest.raises(InputError, match=r"rollback evidence .* is not valid JSON"):
            load_request([bundle], write_policy(tmp_path), bad)


class TestLayering:
    """Nothing below the command layer imports from it."""

    def test_report_and_gate_do_not_import_commands(self) -> None:
        """Importing the report and the gate library loads no command module."""
        code = ("import sys, mcp_tap.report, mcp_tap.gate.evaluation\n"
                "print(sorted(m for m in sys.modules if m.startswith('mcp_tap.commands.')))")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True,
                              timeout=120)
        assert done.stdout.strip() == b"[]"


class TestSdkMemo:
    """The SDK differential's remembered outcomes equal computed ones."""

    def test_repeated_results_have_the_same_findings(self) -> None:
        """Two exchanges with the same odd result give the same difference, both reported."""
        from mcp_tap.sdkdiff import DEFAULT_ALLOWLIST, diff_records

        odd = {"name": "echo", "description": "Echo", "inputSchema": {"type": "object"},
               "futureField": 1}
        report = diff_records([exchange(0, tool=odd), exchange(1, tool=odd)], DEFAULT_ALLOWLIST)
        first, second = ([f.to_json() for f in e.findings] for e in report.entries)
        assert first == second and first
        assert {f["rule"] for f in first} == {"sdk.dropped"}

    def test_a_rejection_is_remembered_as_a_rejection(self) -> None:
        """A result the SDK rejects is rejected again, not remembered as clean."""
        from mcp_tap.sdkdiff import DEFAULT_ALLOWLIST, diff_records

        records = [exchange(n) for n in range(2)]
        for record in records:
            record["origin"]["body"]["result"]["tools"] = "not a list"
        report = diff_records(records, DEFAULT_ALLOWLIST)
        assert [e.error is not None for e in report.entries] == [True, True]
        assert [f.rule for e in report.entries for f in e.findings] == ["sdk.rejected"] * 2
