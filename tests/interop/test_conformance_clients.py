"""The official conformance suite's CLIENT scenarios, direct and through the tap.

``@modelcontextprotocol/conformance@0.2.0-alpha.12 client --scenario S --spec-version V``
starts the suite's own test server for scenario ``S`` and runs the client under test with
its URL. The client under test is the real TypeScript SDK v2 client
(``tests/support/peers_ts/conformance_client.mjs``: connect, list tools, call each, close). Each
scenario runs twice: with that client directly, and with ``tests/support/tapped_client.py`` in
front of it, which puts an ``mcp-tap proxy`` subprocess between the client and the suite's
server. A transparent tap changes no verdict: the same check ids with the same status.

Every non-auth client scenario of 2026-07-28 and of 2025-11-25 (as ``conformance list
--client`` names them) runs for verdicts. The auth scenarios cannot pass through a reverse
proxy on another origin (the protected-resource metadata names the origin, and the client
rightly refuses the mismatch), so the auth suite runs once through the tap only, for its
recorded 401 exchanges (a sample of six scenarios): those must give no finding.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conformance import SKIP_ENV, Installation, InstallError, _child_env
from thirdparty import PEERS_TS, ensure_peers

from mcp_tap.evidence import read_bundle, verify_bundle

_TESTS = Path(__file__).resolve().parents[1] / "support"
_ENTRY = re.compile(r"^  - (?P<name>\S+) \[(?P<versions>[^\]]*)\]$")
_RESULT = re.compile(r"^(?P<scenario>.+)-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z$")
_SCENARIO_TIMEOUT_MS = 90_000


@dataclass(frozen=True)
class Suite:
    """Where Node and the suite's CLI are."""

    node: Path
    cli: Path

    def run(self, *args: str, cwd: Path, timeout: float = 240.0) -> str:
        """Run the suite's CLI (exit 0 or 1 both mean it ran); return its output."""
        done = subprocess.run([str(self.node), str(self.cli), *args], cwd=cwd,
                              env=_child_env(self.node.parent), stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode not in (0, 1):
            raise RuntimeError(f"conformance {' '.join(args)} exited {done.returncode}:\n"
                               f"{(done.stdout + done.stderr)[-3000:]}")
        return done.stdout + done.stderr


@pytest.fixture(scope="module")
def suite() -> Suite:
    """Node 22, the suite and the TypeScript peers, installed into ``.cache`` if missing."""
    try:
        node = ensure_peers()
        from conformance import ensure_installed

        found: Installation = ensure_installed()
        return Suite(node=node, cli=found.cli)
    except InstallError as exc:
        problem = str(exc)
    if os.environ.get(SKIP_ENV) == "1" or os.environ.get("MCP_TAP_SKIP_PEERS") == "1":
        pytest.skip(f"the conformance suite or the peers could not be installed: {problem}")
    pytest.fail(f"the conformance suite or the peers could not be installed: {problem}",
                pytrace=False)


def client_scenarios(suite: Suite, version: str, work: Path) -> list[str]:
    """The suite's client scenarios for ``version``, without auth and extension ones."""
    out = suite.run("list", "--client", "--spec-version", version, cwd=work)
    names = [m["name"] for line in out.splitlines() if (m := _ENTRY.match(line))]
    return [n for n in names if not n.startswith("auth/") and not n.startswith("sep-2640-")]


def read_checks(results: Path) -> dict[str, str]:
    """``{"<scenario>/<check id>[#n]": status}`` from every ``*/checks.json`` under ``results``."""
    verdicts: dict[str, str] = {}
    for path in sorted(results.rglob("checks.json")):
        match = _RESULT.match(path.parent.name)
        assert match is not None, path
        scenario = str(path.parent.parent.relative_to(results) / match["scenario"])
        scenario = scenario.removeprefix("./")
        grouped: dict[str, list[str]] = {}
        for check in json.loads(path.read_text()):
            grouped.setdefault(str(check["id"]), []).append(str(check["status"]))
        for check_id, statuses in grouped.items():
            for n, status in enumerate(sorted(statuses), start=1):
                verdicts[f"{scenario}/{check_id}" + (f"#{n}" if n > 1 else "")] = status
    return verdicts


def _client_command(suite: Suite, evidence: Path | None) -> str:
    client = f"{suite.node} {PEERS_TS / 'conformance_client.mjs'}"
    if evidence is None:
        return client
    return f"{sys.executable} {_TESTS / 'tapped_client.py'} {evidence} {client}"


def run_scenario(suite: Suite, scenario: str, version: str, work: Path,
                 evidence: Path | None) -> dict[str, str]:
    """One client scenario (through a tap writing to ``evidence`` when given): its verdicts."""
    out = Path(tempfile.mkdtemp(prefix="results-", dir=work))
    output = suite.run("client", "--command", _client_command(suite, evidence), "--scenario",
                       scenario, "--spec-version", version, "--timeout",
                       str(_SCENARIO_TIMEOUT_MS), "-o", str(out), cwd=work)
    verdicts = read_checks(out)
    assert verdicts, f"{scenario} ({version}) wrote no checks:\n{output[-3000:]}"
    return verdicts


def bundles(evidence: Path) -> Iterator[Path]:
    """Every bundle the taps wrote under ``evidence`` (one per scenario run)."""
    yield from sorted(p.parent for p in evidence.glob("*/run-*/*.manifest.json"))


def recorded(evidence: Path) -> list[dict[str, Any]]:
    """The exchange records of every bundle under ``evidence``, scenario by scenario."""
    out = []
    for bundle in sorted(set(bundles(evidence))):
        for record in read_bundle(bundle, lenient=True).records:
            if record.get("kind") == "exchange":
                out.append({**record, "scenario": bundle.parent.name})
    return out


def _describe(rec: dict[str, Any]) -> str:
    origin = rec["origin"] or {}
    challenge = next((v for k, v in origin.get("headers", []) if k.lower() == "www-authenticate"),
                     None)
    found = [f["rule"] for f in rec["findings"]]
    return (f"{rec['scenario']}: {rec['ingress']['httpMethod']} {rec.get('method')} -> "
            f"{origin.get('status')} {origin.get('contentType')}"
            f"{f' WWW-Authenticate: {challenge[:60]}' if challenge else ''} {found}")


@pytest.fixture(scope="module")
def verdict_runs(suite: Suite, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every non-auth client scenario of both revisions, direct and tapped (2 at a time)."""
    work = tmp_path_factory.mktemp("conformance-clients")
    evidence = work / "evidence"
    jobs = [(version, scenario) for version in ("2026-07-28", "2025-11-25")
            for scenario in client_scenarios(suite, version, work)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        direct = pool.map(lambda j: run_scenario(suite, j[1], j[0], work, None), jobs)
        tapped = pool.map(lambda j: run_scenario(suite, j[1], j[0], work, evidence / j[0]), jobs)
        pairs = list(zip(jobs, direct, tapped, strict=True))
    return {"pairs": pairs, "evidence": evidence}


class TestClientScenarioVerdicts:
    """Non-auth client scenarios: identical verdicts, a complete and verifiable record."""

    def test_verdicts_are_identical_direct_and_through_the_tap(
        self, verdict_runs: dict[str, Any]
    ) -> None:
        """Every check id of every scenario has the same status both ways."""
        pairs = verdict_runs["pairs"]
        scenarios = {(version, scenario) for (version, scenario), _, _ in pairs}
        # Both revisions ran, the scenarios the suite names for them, with real outcomes.
        assert ("2026-07-28", "http-custom-headers") in scenarios
        assert {("2025-11-25", "initialize"), ("2025-11-25", "sse-retry")} <= scenarios
        statuses = [s for _, direct, _ in pairs for s in direct.values()]
        assert len(statuses) >= 40 and "SUCCESS" in statuses
        differences = [
            f"{version} {key}: direct {direct.get(key)} / through the tap {tapped.get(key)}"
            for (version, _), direct, tapped in pairs
            for key in sorted(set(direct) | set(tapped))
            if direct.get(key) != tapped.get(key)
        ]
        assert not differences, "verdicts differ through the tap:\n" + "\n".join(differences)

    def test_the_tap_recorded_every_scenario_in_verifiable_bundles(
        self, verdict_runs: dict[str, Any]
    ) -> None:
        """One bundle per scenario run, each verifies, every exchange forwarded."""
        evidence: Path = verdict_runs["evidence"]
        found = [b for version in ("2026-07-28", "2025-11-25")
                 for b in bundles(evidence / version)]
        assert len(found) == len(verdict_runs["pairs"])
        for bundle in found:
            report = verify_bundle(bundle)
            assert report.ok, report.to_json()
        recs = [r for version in ("2026-07-28", "2025-11-25")
                for r in recorded(evidence / version)]
        assert len(recs) >= 30
        assert all(r["tapError"] is None and r["origin"] is not None for r in recs)
        assert {r["era"] for r in recs} >= {"modern", "legacy"}
        # sse-retry: the client resumed the closed stream with a GET carrying Last-Event-ID.
        resumed = [r for r in recs if r["scenario"] == "sse-retry"
                   and r["ingress"]["httpMethod"] == "GET"
                   and any(k.lower() == "last-event-id" for k, _ in r["ingress"]["headers"])]
        assert resumed, [_describe(r) for r in recs if r["scenario"] == "sse-retry"]


    def test_the_only_finding_is_the_suite_servers_deliberate_fault(
        self, verdict_runs: dict[str, Any]
    ) -> None:
        """No finding on the clients' traffic but the suite server's missing resultType."""
        evidence: Path = verdict_runs["evidence"]
        found = [
            (version, r["scenario"], r.get("method"), f["rule"], f["code"])
            for version in ("2026-07-28", "2025-11-25")
            for r in recorded(evidence / version)
            if r["scenario"] != "sse-retry"  # the polling close, checked on its own below
            for f in r["findings"]
        ]
        # Each is a true finding against the suite's own test servers, which misbehave on
        # purpose to see whether the client copes:
        # - sep-2322-client-request-state answers its `test_mrtr_no_result_type` tool without
        #   resultType; 2026-07-28 basic/index "Responses": the result MUST include one.
        # - http-invalid-tool-headers lists tools whose x-mcp-header declarations are invalid
        #   (an empty one); 2026-07-28 server/tools "x-mcp-header": it MUST NOT be empty.
        # - json-schema-ref-no-deref answers the client's tools/call with -32601 inside a 200
        #   SSE stream; 2026-07-28 streamable-http: -32601 MUST be HTTP 404 (issue 11, point 10).
        assert sorted(found) == [
            ("2026-07-28", "http-invalid-tool-headers", "tools/list",
             "response.payload.x-mcp-header", -32600),
            ("2026-07-28", "json-schema-ref-no-deref", "tools/call", "response.http-status",
             -32600),
            ("2026-07-28", "sep-2322-client-request-state", "tools/call",
             "response.result-type.missing", -32600),
        ]
        (rec,) = [r for r in recorded(evidence / "2026-07-28")
                  if r["scenario"] == "sep-2322-client-request-state" and r["findings"]]
        assert rec["ingress"]["body"]["params"]["name"] == "test_mrtr_no_result_type"
        assert "resultType" not in rec["origin"]["body"]["result"]
        assert all(f.get("strength", "must") == "must" for f in rec["findings"])

    def test_the_sse_retry_scenario_gives_no_finding(self, verdict_runs: dict[str, Any]) -> None:
        """sse-retry closes the POST stream and the client resumes it: that is polling."""
        recs = [r for r in recorded(verdict_runs["evidence"] / "2025-11-25")
                if r["scenario"] == "sse-retry"]
        wrong = [_describe(r) for r in recs if r["findings"]]
        assert not wrong, "\n".join(wrong)


AUTH_SCENARIOS = (
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/scope-from-www-authenticate",
    "auth/scope-step-up",
    "auth/token-endpoint-auth-basic",
    "auth/resource-mismatch",
)
"""Auth scenarios whose challenges differ (metadata location, scope in the challenge,
step-up, token endpoint, resource): a sample, as each costs a tap start-up."""


@pytest.fixture(scope="module")
def auth_run(suite: Suite, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The sampled auth scenarios (2026-07-28), through the tap only: every recorded exchange."""
    work = tmp_path_factory.mktemp("conformance-auth")
    listed = suite.run("list", "--client", "--spec-version", "2026-07-28", cwd=work)
    assert all(f"  - {name} [" in listed for name in AUTH_SCENARIOS), listed
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(lambda name: run_scenario(suite, name, "2026-07-28", work,
                                                work / "evidence"), AUTH_SCENARIOS))
    return recorded(work / "evidence")


class TestAuthScenarioChallenges:
    """The auth scenarios' recorded 401 exchanges, for the no-false-finding check."""

    def test_the_401_challenges_are_recorded_as_the_suite_sent_them(
        self, auth_run: list[dict[str, Any]]
    ) -> None:
        """Each auth scenario's server challenged the client: 401 with WWW-Authenticate."""
        challenged = [r for r in auth_run if (r["origin"] or {}).get("status") == 401]
        scenarios = {r["scenario"] for r in challenged}
        assert scenarios == {n.replace("/", "__") for n in AUTH_SCENARIOS}, [
            _describe(r) for r in auth_run
        ]
        for rec in challenged:
            headers = {k.lower(): v for k, v in rec["origin"]["headers"]}
            assert headers["www-authenticate"].startswith("Bearer"), _describe(rec)
            assert rec["egress"]["status"] == 401 and rec["tapError"] is None

    def test_the_401_challenges_give_no_finding(self, auth_run: list[dict[str, Any]]) -> None:
        """A 401 challenge is plain HTTP (basic/authorization): no finding on any of them."""
        challenged = [r for r in auth_run if (r["origin"] or {}).get("status") == 401]
        assert challenged
        wrong = [_describe(r) for r in challenged if r["findings"]]
        assert not wrong, "\n".join(wrong)
