"""Canary analysis: the tap's /gate answers what the shipped AnalysisTemplate and Flagger expect.

A real tap (the proxy in this process, real HTTP on loopback) sits in front of the real SDK
server; the real SDK client sends traffic; the admin listener's ``GET /gate`` is judged
with the very conditions of ``examples/k8s/analysis-template.yaml`` for all three outcomes,
and ``POST /gate/flagger`` with Flagger's contract. The manifests are validated against the
Kubernetes schemas (kubernetes-validate) and the Argo Rollouts and Flagger CRDs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
import jsonschema
import kubernetes_validate
import pytest
import yaml
from gate_bundles import KEY, KEY_ENV, SIGNER, write_attested
from peers import sdk_list_tools
from taps import hop_url, running_tap, tap_options

from mcp_tap.commands import gate_server
from mcp_tap.core.eras import Era
from mcp_tap.evidence.signing import Signer
from mcp_tap.proxy.options import GateOptions, RecordingOptions

K8S = Path(__file__).parents[2] / "examples" / "k8s"
CRDS = Path(__file__).parents[1] / "data" / "crds"
KUBERNETES = "1.37.0"


def manifests(name: str) -> list[dict[str, Any]]:
    """The YAML documents of one example file."""
    return [d for d in yaml.safe_load_all((K8S / name).read_text()) if d]


def crd_schema(path: Path, kind: str) -> dict[str, Any]:
    """The openAPIV3Schema of ``kind``'s served version in a CRD file."""
    for doc in yaml.safe_load_all(path.read_text()):
        if doc and doc.get("kind") == "CustomResourceDefinition" and \
                doc["spec"]["names"]["kind"] == kind:
            version = next(v for v in doc["spec"]["versions"] if v.get("served"))
            schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
            return schema
    raise AssertionError(f"no CRD for {kind} in {path}")


def strategic_merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """Merge a Deployment patch the way kubectl's strategic merge does for these fields:
    maps recursively, ``containers`` and ``volumes`` lists by ``name``."""
    merged = copy.deepcopy(base)

    def merge(into: dict[str, Any], extra: dict[str, Any]) -> None:
        for key, value in extra.items():
            if isinstance(value, dict) and isinstance(into.get(key), dict):
                merge(into[key], value)
            elif key in ("containers", "volumes") and isinstance(into.get(key), list):
                by_name = {item["name"]: item for item in into[key]}
                for item in value:
                    if item["name"] in by_name:
                        merge(by_name[item["name"]], item)
                    else:
                        into[key].append(item)
            else:
                into[key] = value

    merge(merged, patch)
    return merged


class TestManifests:
    """examples/k8s validates against the schemas its resources are read with."""

    def test_deployment_with_sidecar(self) -> None:
        """The patched Deployment is a valid apps/v1 Deployment with probes on the admin port."""
        (base,) = manifests("deployment.yaml")
        (patch,) = manifests("sidecar-patch.yaml")
        merged = strategic_merge(base, patch)
        kubernetes_validate.validate(merged, KUBERNETES, strict=True)
        kubernetes_validate.validate(base, KUBERNETES, strict=True)
        containers = {c["name"]: c for c in merged["spec"]["template"]["spec"]["containers"]}
        tap = containers["mcp-tap"]
        assert tap["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "admin"}
        assert tap["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "admin"}
        assert {"name": "admin", "containerPort": 9464} in tap["ports"]
        env = {e["name"] for e in tap["env"]}
        assert {"MCP_TAP_GATE_POLICY", "MCP_TAP_GATE_ROLLBACK"} <= env
        assert "--upstream=http://127.0.0.1:9000" in tap["args"]
        volumes = {v["name"] for v in merged["spec"]["template"]["spec"]["volumes"]}
        mounts = {m["name"] for m in tap["volumeMounts"]}
        assert mounts <= volumes

    def test_services(self) -> None:
        """Both Services are valid v1 Services exposing the tap and the admin port."""
        docs = manifests("service.yaml")
        for doc in docs:
            kubernetes_validate.validate(doc, KUBERNETES, strict=True)
        assert [d["metadata"]["name"] for d in docs] == ["mcp-server", "mcp-server-canary"]

    def test_network_policy(self) -> None:
        """The NetworkPolicy is a valid networking.k8s.io/v1 one: the tap's port open, the
        admin port only from the monitoring and rollout namespaces; kustomize lists it."""
        (policy,) = manifests("networkpolicy.yaml")
        kubernetes_validate.validate(policy, KUBERNETES, strict=True)
        tap, admin = policy["spec"]["ingress"]
        assert tap == {"ports": [{"port": "mcp", "protocol": "TCP"}]}
        assert admin["ports"] == [{"port": "admin", "protocol": "TCP"}]
        assert len(admin["from"]) == 3
        (kustomization,) = manifests("kustomization.yaml")
        assert "networkpolicy.yaml" in kustomization["resources"]

    def test_analysis_template(self) -> None:
        """The AnalysisTemplate validates against the Argo Rollouts CRD, web provider on /gate."""
        (template,) = manifests("analysis-template.yaml")
        schema = crd_schema(CRDS / "argo-rollouts-analysis-template-crd.yaml", "AnalysisTemplate")
        jsonschema.validate(template, schema)
        (metric,) = template["spec"]["metrics"]
        assert metric["provider"]["web"]["url"].endswith(
            ".svc:9466/gate?release={{args.release}}")
        assert template["spec"]["args"][0]["name"] == "release"
        assert metric["provider"]["web"]["jsonPath"] == "{$}"

    def test_flagger_canary(self) -> None:
        """The Canary validates against the Flagger CRD; its webhooks call /gate/flagger."""
        (canary,) = manifests("flagger-canary.yaml")
        jsonschema.validate(canary, crd_schema(CRDS / "flagger-crd.yaml", "Canary"))
        urls = {w["url"] for w in canary["spec"]["analysis"]["webhooks"]}
        assert urls == {"http://mcp-tap-gate.mcp:9466/gate/flagger?release=mcp-server-canary"}

    def test_gate_service(self) -> None:
        """The gate service's Deployment and Service validate; the Service reaches the port
        gate-server listens on, and every argument is one gate-server accepts."""
        deployment, service = manifests("gate-server.yaml")
        for doc in (deployment, service):
            kubernetes_validate.validate(doc, KUBERNETES, strict=True)
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        assert container["args"][0] == "gate-server"
        parser = argparse.ArgumentParser()
        gate_server.add_arguments(parser)
        args = parser.parse_args(container["args"][1:])
        assert args.listen.endswith(":9466") and args.evidence.startswith("s3://")
        assert service["spec"]["ports"][0]["targetPort"] == container["ports"][0]["name"]
        assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]

    def test_verify_shards_job(self) -> None:
        """The Indexed Job validates and runs as many shards as it has completions."""
        (job,) = manifests("verify-shards-job.yaml")
        kubernetes_validate.validate(job, KUBERNETES, strict=True)
        spec = job["spec"]
        assert spec["completionMode"] == "Indexed"
        script = spec["template"]["spec"]["containers"][0]["args"][0]
        assert f'--shard "$JOB_COMPLETION_INDEX/{spec["completions"]}"' in script

    def test_kustomization_lists_the_fleet_resources(self) -> None:
        (kustomization,) = manifests("kustomization.yaml")
        assert {"gate-server.yaml", "verify-shards-job.yaml"} <= set(kustomization["resources"])

    def test_schemas_reject_a_broken_template(self) -> None:
        """The CRD schema is strict enough to catch a typo (the validation can fail)."""
        (template,) = manifests("analysis-template.yaml")
        template["spec"]["metrics"][0]["provider"]["web"]["timeoutSeconds"] = "soon"
        schema = crd_schema(CRDS / "argo-rollouts-analysis-template-crd.yaml", "AnalysisTemplate")
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(template, schema)


_CONDITION = re.compile(r'^result\.([A-Za-z_.]+) == "([a-z]+)"$')


def argo_status(result: dict[str, Any]) -> str:
    """Argo's measurement status for ``result`` under the shipped template's conditions.

    The template's conditions are of the one form ``result.PATH == "VALUE"``; Argo checks
    failure first, then success, and a measurement meeting neither is inconclusive.
    """
    (template,) = manifests("analysis-template.yaml")
    (metric,) = template["spec"]["metrics"]

    def holds(condition: str) -> bool:
        match = _CONDITION.match(condition)
        assert match, condition
        value: Any = result
        for part in match.group(1).split("."):
            value = value.get(part) if isinstance(value, dict) else None
        return bool(value == match.group(2))

    if holds(metric["failureCondition"]):
        return "Failed"
    if holds(metric["successCondition"]):
        return "Successful"
    return "Inconclusive"


POLICY = f"""
[health]
min_samples = 3
max_error_rate = 0.0
max_latency_ms = {{latency}}
min_observation_seconds = 0.0

[rollback]
trusted_signers = ["{SIGNER}"]
hmac_key_env = "{KEY_ENV}"
"""


@pytest.fixture
def attested(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Attested rollback evidence, with its key in the environment the tap inherits."""
    monkeypatch.setenv(KEY_ENV, KEY)
    return write_attested(tmp_path / "rollback.json")


OUTCOMES = [
    # (outcome, max latency in ms, rollback given, Argo status, Flagger status)
    ("promote", 60_000.0, True, "Successful", 200),
    ("rollback", 0.001, True, "Failed", 412),
    ("hold", 60_000.0, False, "Inconclusive", 503),
]


class TestEndpoint:
    """A real tap's /gate and /gate/flagger for each outcome."""

    @pytest.mark.parametrize(("outcome", "latency", "with_rollback", "argo", "flagger"),
                             OUTCOMES, ids=[o[0] for o in OUTCOMES])
    async def test_outcome(self, tmp_path: Path, origin_base: str, origin_url: str,
                           attested: Path, outcome: str, latency: float, with_rollback: bool,
                           argo: str, flagger: int) -> None:
        """The decision JSON meets the template's condition for its outcome; Flagger's too."""
        policy = tmp_path / "policy.toml"
        policy.write_text(POLICY.format(latency=latency))
        gate = GateOptions(policy=str(policy), rollback=str(attested) if with_rollback else "")
        opts = tap_options(tmp_path / "evidence", upstream=origin_base, admin=True, gate=gate)
        async with running_tap(opts) as tap:
            for _ in range(3):
                await sdk_list_tools(hop_url(tap), Era.MODERN)
            assert tap.writer is not None
            tap.flush_inline()
            assert tap.writer.flush(timeout=30)
            assert tap.admin_address is not None
            host, port = tap.admin_address
            timeout = aiohttp.ClientTimeout(total=180)
            async with aiohttp.ClientSession(timeout=timeout) as client:
                async with client.get(f"http://{host}:{port}/gate") as answer:
                    status, result = answer.status, await answer.json()
                async with client.post(f"http://{host}:{port}/gate/flagger",
                                       json={"name": "mcp-server", "namespace": "mcp",
                                             "phase": "Progressing"}) as hook:
                    hook_status, hook_body = hook.status, await hook.json()
        assert status == 200, result
        assert result["action"] == outcome, result["reasons"]
        assert argo_status(result) == argo
        assert result["sources"]["conformance"]["exchanges"] >= 3
        assert result["sources"]["conformance"]["findings"] == 0
        assert (hook_status, hook_body["action"]) == (flagger, outcome)
        if outcome == "rollback":
            assert [r["rule"] for r in result["reasons"]] == ["gate.health.latency"]
            assert "latency" in hook_body["reason"]
        if outcome == "hold":
            assert [r["rule"] for r in result["reasons"]] == ["gate.rollback.missing"]

    async def test_bad_policy_is_503(self, tmp_path: Path, origin_base: str) -> None:
        """A malformed policy answers 503 with the one-line error, never a traceback."""
        policy = tmp_path / "policy.toml"
        policy.write_text("[health]\nmin_samples = 'many'\n")
        opts = tap_options(tmp_path / "evidence", upstream=origin_base, admin=True,
                           gate=GateOptions(policy=str(policy)))
        async with running_tap(opts) as tap:
            assert tap.admin_address is not None
            host, port = tap.admin_address
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=180)) as c, \
                    c.get(f"http://{host}:{port}/gate") as answer:
                status, body = answer.status, await answer.json()
        assert status == 503
        assert "health.min_samples" in body["error"] and "Traceback" not in body["error"]

    @pytest.mark.parametrize("command", ["proxy", "gate-server"])
    @pytest.mark.parametrize(("policy_text", "rollback_text", "says"), [
        (None, None, "cannot read policy"),
        ("[health]\nmin_samples = 'many'\n", None, "health.min_samples"),
        ("", "not json", "is not valid JSON"),
    ])
    def test_a_bad_decision_file_stops_the_start(
        self, tmp_path: Path, command: str, policy_text: str | None,
        rollback_text: str | None, says: str,
    ) -> None:
        """A policy or rollback file that cannot be read is one line and exit 2 at start,
        before anything listens (a later change to it is the 503 above)."""
        policy, rollback = tmp_path / "policy.toml", tmp_path / "rollback.json"
        if policy_text is not None:
            policy.write_text(policy_text)
        rollback_args: list[str] = []
        if rollback_text is not None:
            rollback.write_text(rollback_text)
            rollback_args = ["--rollback", str(rollback)]
        if command == "proxy":
            config = tmp_path / "tap.toml"
            gate = f'policy = "{policy}"\n' + (f'rollback = "{rollback}"\n' if rollback_args
                                              else "")
            config.write_text('[[hop]]\nlisten = "127.0.0.1:0"\nupstream = "http://127.0.0.1:9"'
                              f'\n[evidence]\ndir = "{tmp_path / "ev"}"\n[gate]\n{gate}')
            argv = ["proxy", "--config", str(config), "--admin", "127.0.0.1:0"]
        else:
            argv = ["gate-server", "--listen", "127.0.0.1:0", "--evidence", str(tmp_path),
                    "--policy", str(policy), *rollback_args]
        done = subprocess.run([sys.executable, "-m", "mcp_tap", *argv], capture_output=True,
                              text=True, timeout=120, check=False)
        assert done.returncode == 2, done.stderr
        assert done.stdout == "" and "Traceback" not in done.stderr
        assert len(done.stderr.splitlines()) == 1 and says in done.stderr

    async def test_no_policy_no_route(self, tmp_path: Path, origin_base: str) -> None:
        """Without a gate policy the admin listener has no /gate route."""
        opts = tap_options(tmp_path / "evidence", upstream=origin_base, admin=True)
        async with running_tap(opts) as tap:
            assert tap.admin_address is not None
            host, port = tap.admin_address
            async with aiohttp.ClientSession() as client, \
                    client.get(f"http://{host}:{port}/gate") as answer:
                assert answer.status == 404


SIGNING_SEED = bytes(range(64, 96))  # a deterministic, non-secret test key (raw Ed25519 seed)
LIVE_POLLS = 12


async def _traffic(url: str, done: asyncio.Event, counted: list[int]) -> None:
    """Real SDK sessions (initialize, tools/list, both eras) until ``done``."""
    eras = (Era.MODERN, Era.LEGACY)
    while not done.is_set():
        await sdk_list_tools(url, eras[len(counted) % 2])
        counted.append(1)


class TestLive:
    """/gate while the tap writes its bundle: an open bundle is judged, never failed.

    The tap runs as shipped (a recording process writing the bundle, small segments so
    they rotate under the polls), real SDK sessions run all the time, and every poll must
    promote: signed under a trusted key (no closing summary yet) and unsigned (a poll may
    land on a line the writer is in the middle of).
    """

    @pytest.mark.parametrize("signed", [True, False], ids=["signed", "unsigned"])
    async def test_polls_under_traffic_promote(self, tmp_path: Path, origin_base: str,
                                               attested: Path, signed: bool) -> None:
        """Every one of LIVE_POLLS polls, and Flagger's hook, promotes during traffic."""
        policy = tmp_path / "policy.toml"
        trust = f'[evidence]\ntrusted_keys = ["{Signer(SIGNING_SEED).public_hex}"]\n'
        policy.write_text(POLICY.format(latency=60_000.0) + (trust if signed else ""))
        key = tmp_path / "signing.key"
        key.write_text(SIGNING_SEED.hex())
        opts = tap_options(tmp_path / "evidence", upstream=origin_base, admin=True,
                           gate=GateOptions(policy=str(policy), rollback=str(attested)),
                           recording=RecordingOptions(mode="process"))
        opts = replace(opts, evidence=replace(
            opts.evidence, max_segment_bytes=16_384, signing_key_file=str(key) if signed else ""))
        actions: list[tuple[int, str, list[str]]] = []
        counted: list[int] = []
        done = asyncio.Event()
        async with running_tap(opts) as tap:
            traffic = asyncio.ensure_future(_traffic(hop_url(tap), done, counted))
            try:
                assert tap.admin_address is not None
                host, port = tap.admin_address
                timeout = aiohttp.ClientTimeout(total=180)
                async with aiohttp.ClientSession(timeout=timeout) as client:
                    while len(counted) < 3:
                        await asyncio.sleep(0.05)
                    for _ in range(LIVE_POLLS):
                        async with client.get(f"http://{host}:{port}/gate") as answer:
                            result = await answer.json()
                        actions.append((answer.status, result.get("action"),
                                        [r["message"] for r in result.get("reasons", [])]))
                    async with client.post(f"http://{host}:{port}/gate/flagger",
                                           json={"phase": "Progressing"}) as hook:
                        hook_status = hook.status
            finally:
                done.set()
                with contextlib.suppress(asyncio.CancelledError):
                    await traffic
        assert actions == [(200, "promote", [])] * LIVE_POLLS
        assert hook_status == 200
        assert len(counted) > LIVE_POLLS  # sessions ran between the polls
