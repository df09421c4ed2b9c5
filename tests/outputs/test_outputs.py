"""CI outputs: every command's JUnit validates against JUnit.xsd, its SARIF against SARIF 2.1.0.

The schemas in tests/data/schemas are the published ones (see the README there): the
windyroad JUnit.xsd and the OASIS sarif-schema-2.1.0.json.
"""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
from ci_outputs import failures, junit, sarif
from gate_bundles import KEY, KEY_ENV, exchange, write_attested, write_bundle, write_policy
from releases import run

from mcp_tap.core.catalog import RULES


@pytest.fixture
def gate_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    """A candidate with two response.id findings, the test policy, attested rollback."""
    monkeypatch.setenv(KEY_ENV, KEY)
    records = [exchange(n, findings=("response.id",) if n in (7, 42) else ())
               for n in range(120)]
    bundle = write_bundle(tmp_path / "b", records)
    return bundle, write_policy(tmp_path), write_attested(tmp_path / "rollback.json")


def _gate(files: tuple[Path, Path, Path], fmt: str, capsys: pytest.CaptureFixture[str],
          *, rollback: bool = True) -> tuple[int, str]:
    bundle, policy, attested = files
    argv = ["gate", str(bundle), "--policy", str(policy), "--format", fmt]
    if rollback:
        argv += ["--rollback", str(attested)]
    code, out, err = run(argv, capsys)
    assert err == ""
    return code, out


class TestGateOutputs:
    """The gate's decision in JUnit, SARIF and Markdown, and its exit codes."""

    def test_junit(self, gate_files: tuple[Path, Path, Path],
                   capsys: pytest.CaptureFixture[str]) -> None:
        """A case per source; the finding's failure names the segment line of each example."""
        code, out = _gate(gate_files, "junit", capsys)
        suite = junit(out)
        assert code == 1
        assert suite.get("tests") == "6" and suite.get("failures") == "1"
        failure = failures(suite)["conformance: response.id"]
        assert failure.get("type") == "response.id"
        assert failure.get("message") == "response.id: 2 finding(s)"
        segment = gate_files[0] / "segment-000001.jsonl"
        assert f"evidence: {segment}, line 8, seq 7, exchange x0007" in (failure.text or "")
        assert f"evidence: {segment}, line 43, seq 42, exchange x0042" in (failure.text or "")

    def test_sarif(self, gate_files: tuple[Path, Path, Path],
                   capsys: pytest.CaptureFixture[str]) -> None:
        """Every catalog rule is a reporting rule; the finding is an error at its line."""
        _, out = _gate(gate_files, "sarif", capsys)
        result_run = sarif(out)
        rules = result_run["tool"]["driver"]["rules"]
        assert {r["id"] for r in rules} >= {r.id for r in RULES}
        (result,) = result_run["results"]
        assert (result["ruleId"], result["level"]) == ("response.id", "error")
        assert rules[result["ruleIndex"]]["id"] == "response.id"
        lines = [loc["physicalLocation"]["region"]["startLine"] for loc in result["locations"]]
        assert lines == [8, 43]
        uri = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        assert uri == str(gate_files[0] / "segment-000001.jsonl")
        assert result["locations"][0]["logicalLocations"][0]["fullyQualifiedName"] == "x0007"

    def test_markdown(self, gate_files: tuple[Path, Path, Path],
                      capsys: pytest.CaptureFixture[str]) -> None:
        """The summary leads with the action and lists the failure with its rule."""
        _, out = _gate(gate_files, "markdown", capsys)
        assert out.startswith("### :x: mcp-tap gate: rollback\n")
        assert "| **FAIL** | conformance: response.id | `response.id` |" in out

    def test_exit_codes(self, gate_files: tuple[Path, Path, Path],
                        capsys: pytest.CaptureFixture[str]) -> None:
        """Rollback exits 1 and hold 3, whatever the format; the JSON says the same action."""
        assert _gate(gate_files, "text", capsys)[0] == 1
        code, out = _gate(gate_files, "json", capsys, rollback=False)
        assert (code, orjson.loads(out)["action"]) == (3, "hold")
        code, out = _gate(gate_files, "junit", capsys, rollback=False)
        assert code == 3 and "gate.rollback.missing" in failures(junit(out))[
            "rollback: gate.rollback.missing"].get("type", "")

    def test_json_alias(self, gate_files: tuple[Path, Path, Path],
                        capsys: pytest.CaptureFixture[str]) -> None:
        """--json prints exactly what --format json prints."""
        bundle, policy, rollback = gate_files
        base = ["gate", str(bundle), "--policy", str(policy), "--rollback", str(rollback)]
        _, alias, _ = run([*base, "--json"], capsys)
        _, named, _ = run([*base, "--format", "json"], capsys)
        assert orjson.loads(alias) == orjson.loads(named)

    def test_format_and_json_conflict(self, gate_files: tuple[Path, Path, Path],
                                      capsys: pytest.CaptureFixture[str]) -> None:
        """--json with --format is a usage error (exit 2), not a silent choice."""
        bundle, policy, _ = gate_files
        with pytest.raises(SystemExit) as exited:
            run(["gate", str(bundle), "--policy", str(policy), "--json", "--format", "junit"],
                capsys)
        out, err = capsys.readouterr()
        assert (exited.value.code, out) == (2, "") and "not allowed with argument" in err


class TestOfflineCommands:
    """transcripts, verify and sdk-diff in every CI format."""

    def test_transcripts(self, capsys: pytest.CaptureFixture[str]) -> None:
        """One test case per corpus case, all passing; SARIF has no result."""
        _, data, _ = run(["transcripts", "--json"], capsys)
        cases = len(orjson.loads(data)["cases"])
        code, out, _ = run(["transcripts", "--format", "junit"], capsys)
        suite = junit(out)
        assert (code, suite.get("tests"), suite.get("failures")) == (0, str(cases), "0")
        _, out, _ = run(["transcripts", "--format", "sarif"], capsys)
        assert sarif(out)["results"] == []

    def test_transcripts_failure(self, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
        """A golden case expected to break a rule fails: a JUnit failure, a SARIF result."""
        corpus = Path(__file__).parents[2] / "mcp_tap/transcripts/corpus/legacy.json"
        case = orjson.loads(corpus.read_bytes())[0]
        case.update(name="wrong-expectation", expectedRule="request.envelope",
                    expectedErrorCode=-32600)
        path = tmp_path / "case.json"
        path.write_bytes(orjson.dumps([case]))
        code, out, _ = run(["transcripts", str(path), "--format", "junit"], capsys)
        suite = junit(out)
        assert (code, suite.get("tests"), suite.get("failures")) == (1, "1", "1")
        assert "wrong-expectation" in failures(suite)
        _, out, _ = run(["transcripts", str(path), "--format", "sarif"], capsys)
        (result,) = sarif(out)["results"]
        assert result["ruleId"] == "mcp-tap.check"
        assert result["properties"]["check"] == "wrong-expectation"

    def test_verify_damaged(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A record changed after writing is a failed case naming its segment and seq."""
        bundle = write_bundle(tmp_path / "b", [exchange(n) for n in range(5)])
        segment = bundle / "segment-000001.jsonl"
        lines = segment.read_bytes().splitlines(keepends=True)
        lines[2] = lines[2].replace(b'"rpcId":2', b'"rpcId":9')
        segment.write_bytes(b"".join(lines))
        code, out, _ = run(["verify", str(bundle), "--format", "junit"], capsys)
        suite = junit(out)
        assert code == 1
        names = failures(suite)
        assert f"{bundle}: verified" in names
        digest_cases = [n for n in names if "digest" in n and "seq 2" in n]
        assert digest_cases, names
        _, out, _ = run(["verify", str(bundle), "--format", "sarif"], capsys)
        results = sarif(out)["results"]
        seqs = {loc.get("properties", {}).get("seq") for r in results for loc in r["locations"]}
        assert 2 in seqs
        assert all(r["level"] == "error" for r in results)

    def test_sdk_diff(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A clean bundle is one passing case; a result the SDK changes fails by rule."""
        clean = write_bundle(tmp_path / "clean", [exchange(n) for n in range(3)])
        code, out, _ = run(["sdk-diff", str(clean), "--format", "junit"], capsys)
        suite = junit(out)
        assert (code, suite.get("tests"), suite.get("failures")) == (0, "1", "0")
        odd = {"name": "echo", "description": "Echo", "inputSchema": {"type": "object"},
               "futureField": 1}
        changed = write_bundle(tmp_path / "changed", [exchange(0, tool=odd)])
        code, out, _ = run(["sdk-diff", str(changed), "--format", "sarif"], capsys)
        results = sarif(out)["results"]
        assert code == 1 and results
        assert {r["ruleId"] for r in results} <= {r.id for r in RULES}
        _, out, _ = run(["sdk-diff", str(changed), "--format", "markdown"], capsys)
        assert out.startswith("### :x: mcp-tap sdk-diff: differences")


class TestLiveCommands:
    """probe and replay against the real SDK server."""

    def test_probe(self, origin_url: str, capsys: pytest.CaptureFixture[str]) -> None:
        """Every probed case is a test case; the report's failures are the XML's."""
        _, data, _ = run(["probe", "--target", origin_url, "--json"], capsys)
        report = orjson.loads(data)
        _, out, _ = run(["probe", "--target", origin_url, "--format", "junit"], capsys)
        suite = junit(out)
        assert suite.get("tests") == str(len(report["cases"]))
        failed = sum(1 for c in report["cases"] if not c["passed"] and not c.get("skipped"))
        assert suite.get("failures") == str(failed)
        _, out, _ = run(["probe", "--target", origin_url, "--format", "sarif"], capsys)
        assert len(sarif(out)["results"]) == failed

    def test_replay(self, tmp_path: Path, origin_url: str,
                    capsys: pytest.CaptureFixture[str]) -> None:
        """Each replayed exchange is a test case, a changed answer a failure naming it."""
        bundle = write_bundle(tmp_path / "b", [exchange(n) for n in range(2)])
        code, out, _ = run(["replay", str(bundle), "--target", origin_url, "--format",
                            "junit"], capsys)
        suite = junit(out)
        assert suite.get("tests") == "2"
        _, data, _ = run(["replay", str(bundle), "--target", origin_url, "--json"], capsys)
        changed = orjson.loads(data)["changed"]
        assert suite.get("failures") == str(changed)
        assert code == (1 if changed else 0)
        _, out, _ = run(["replay", str(bundle), "--target", origin_url, "--format", "sarif"],
                        capsys)
        assert len(sarif(out)["results"]) == changed


class TestWorkflowExample:
    """examples/github-actions uses the gate as the CLI defines it."""

    def test_exit_code_mapping(self) -> None:
        """The workflow maps exactly the CLI's exit codes to actions, and its formats exist."""
        import yaml

        from mcp_tap.cli import EXIT_HOLD, EXIT_NO, EXIT_OK
        from mcp_tap.outputs import FORMATS

        path = Path(__file__).parents[2] / "examples/github-actions/mcp-tap-gate.yml"
        workflow = yaml.safe_load(path.read_text())
        steps = {s.get("id"): s for s in workflow["jobs"]["gate"]["steps"] if s.get("id")}
        script = steps["gate"]["run"]
        for code, action in ((EXIT_OK, "promote"), (EXIT_NO, "rollback"), (EXIT_HOLD, "hold")):
            assert f'{code}) echo "action={action}"' in script
        used = set(re.findall(r"--format (\w+)", path.read_text()))
        assert used and used <= set(FORMATS)
        assert set(workflow["jobs"]) == {"gate", "promote", "rollback", "hold"}
