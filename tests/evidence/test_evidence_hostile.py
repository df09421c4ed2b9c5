"""Hostile evidence: every offline command ends quickly with one clear line.

A bundle from a shared store may hold anything. Each case plants one thing in an otherwise
valid bundle -- a FIFO as a segment, a symlink to ``/dev/zero``, a 20 GB sparse segment
(with its manifest, and as an unclosed last segment without one), records with impossible
values -- and runs every offline command on it as a real process. Each must end (the
subprocess timeout is only a guard against a hang), exit 1 or 2, name the problem in one
line, and print no traceback and no ``MemoryError``. The gate is given attested rollback
evidence, as a canary's gate is, so evidence that does not verify is a rollback (exit 1),
never a promote; without rollback evidence it would hold (exit 3), having nothing to roll
back to.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from command_fuzz import HOSTILE, all_paths, base_record, hostile_record, run_commands
from gate_bundles import KEY, KEY_ENV, write_attested, write_policy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_tap.evidence import EvidenceWriter
from mcp_tap.evidence.reader import RECORD_LIMIT_ENV

REPO_ROOT = Path(__file__).resolve().parents[2]
_GUARD = 120.0  # seconds: a hang fails the test instead of hanging the suite
_SPARSE = 20 * 1024**3


def _exchange(n: int, **extra: Any) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": n, "method": "tools/list", "params": {}}
    answer = {"jsonrpc": "2.0", "id": n, "result": {"tools": []}}
    record = {
        "kind": "exchange", "hop": "edge", "exchangeId": f"e{n}", "era": "modern",
        "method": "tools/list", "rpcId": n, "messageKind": "request",
        "ingress": {"httpMethod": "POST", "receivedAt": 1_700_000_000.0 + n,
                    "headers": [["Content-Type", "application/json"]], "body": body,
                    "truncated": False},
        "origin": {"status": 200, "headers": [["Content-Type", "application/json"]],
                   "body": answer, "sse": None, "truncated": False,
                   "endAt": 1_700_000_000.5 + n},
        "findings": [],
    }
    for path, value in extra.items():
        *parents, last = path.split(".")
        node = record
        for parent in parents:
            node = node[parent]
        node[last] = value
    return record


def _bundle(path: Path, **extra: Any) -> Path:
    with EvidenceWriter(path) as writer:
        for n in range(3):
            writer.submit(_exchange(n, **extra))
    return path


def _fifo(path: Path) -> None:
    segment = path / "segment-000001.jsonl"
    segment.unlink()
    os.mkfifo(segment)


def _dev_zero(path: Path) -> None:
    segment = path / "segment-000001.jsonl"
    segment.unlink()
    segment.symlink_to("/dev/zero")


def _sparse(path: Path) -> None:
    with open(path / "segment-000001.jsonl", "r+b") as handle:
        handle.truncate(_SPARSE)


def _sparse_unclosed(path: Path) -> None:
    """The last segment of a bundle still being written: no manifest bounds it."""
    (path / "segment-000001.manifest.json").unlink()
    meta = orjson.loads((path / "bundle.json").read_bytes())
    meta.pop("closed", None)
    (path / "bundle.json").write_bytes(orjson.dumps(meta))
    _sparse(path)


CASES: dict[str, tuple[dict[str, Any], Any, str]] = {
    # name: (record fields, damage, fragment of the line that names the problem)
    "fifo": ({}, _fifo, "a FIFO, not a regular file"),
    "dev-zero": ({}, _dev_zero, "a symlink out of"),
    "sparse-20g": ({}, _sparse, f"bytes expected, {_SPARSE} found); nothing past byte "),
    "sparse-20g-unclosed": ({}, _sparse_unclosed, "(the record limit); read no further"),
    "bogus-boundary": ({"findings": [{"rule": "x", "code": None, "boundary": "bogus",
                                      "message": "m", "where": "", "strength": "must"}]},
                       None, "Invalid enum value 'bogus' - at $.findings[0].boundary"),
    "received-1e20": ({"ingress.receivedAt": 1e20}, None, "at $.ingress.receivedAt"),
    "received-negative": ({"ingress.receivedAt": -5.0}, None, "at $.ingress.receivedAt"),
    "status-huge": ({"origin.status": 10**12}, None, "at $.origin.status"),
}


def _commands(bundle: Path, good: Path, out: Path) -> dict[str, list[str]]:
    redact_policy = out / "redact.toml"
    redact_policy.write_text('[redaction]\nextra_keys = ["ticket"]\n')
    return {
        "verify": ["verify", str(bundle)],
        "gate": ["gate", "--policy", str(write_policy(out)), "--rollback",
                 str(write_attested(out / "rollback.json")), str(bundle)],
        "report": ["report", "--out", str(out / "r.html"), str(bundle)],
        "export": ["export", "--format", "har", "--out", str(out / "x.har"), str(bundle)],
        "diff": ["diff", str(good), str(bundle)],
        "sdk-diff": ["sdk-diff", str(bundle)],
        "redact": ["redact", "--policy", str(redact_policy), "--out", str(out / "red"),
                   str(bundle)],
        "replay": ["replay", "--target", "http://127.0.0.1:9/mcp", str(bundle)],
    }


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clean bundle (diff's baseline)."""
    return _bundle(tmp_path_factory.mktemp("good") / "bundle")


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_offline_command_ends_with_one_clear_line(
        case: str, good: Path, tmp_path: Path) -> None:
    """Each command on the planted bundle: exit 1 or 2, the problem named, no traceback,
    no MemoryError, no hang."""
    extra, damage, fragment = CASES[case]
    bundle = _bundle(tmp_path / "bundle", **extra)
    if damage is not None:
        damage(bundle)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_TAP_")}
    env.update(PYTHONPATH=str(REPO_ROOT), **{RECORD_LIMIT_ENV: str(4 * 1024 * 1024)})
    env[KEY_ENV] = KEY
    failures = []
    for name, argv in _commands(bundle, good, tmp_path).items():
        shutil.rmtree(tmp_path / "red", ignore_errors=True)
        done = subprocess.run([sys.executable, "-m", "mcp_tap", *argv], cwd=REPO_ROOT, env=env,
                              capture_output=True, text=True, timeout=_GUARD, check=False)
        said = done.stdout + done.stderr
        if (done.returncode not in (1, 2) or "Traceback" in said or "MemoryError" in said
                or (name != "gate" and fragment not in said)):
            failures.append(f"{name}: exit {done.returncode}: {said[-600:]}")
    assert not failures, "\n".join(failures)


def test_allow_unverified_reads_what_it_can(good: Path, tmp_path: Path) -> None:
    """With --allow-unverified a reading command goes on, says so first, and skips the
    records with impossible values (read leniently)."""
    bundle = _bundle(tmp_path / "bundle", **{"ingress.receivedAt": -5.0})
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_TAP_")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    done = subprocess.run(
        [sys.executable, "-m", "mcp_tap", "export", "--format", "jsonl", "--out",
         str(tmp_path / "x.jsonl"), "--summary-format", "text", "--allow-unverified",
         str(bundle)], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
        timeout=_GUARD, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("mcp-tap: warning: UNVERIFIED EVIDENCE: 1 of 1 bundle(s)")
    assert done.stdout.startswith("UNVERIFIED: exported 0 records"), done.stdout
    report = subprocess.run(
        [sys.executable, "-m", "mcp_tap", "report", "--out", str(tmp_path / "r.html"),
         str(bundle)], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
        timeout=_GUARD, check=False)
    assert report.returncode == 1, report.stderr
    assert report.stdout.startswith(
        "UNVERIFIED (1 bundle(s) do not verify; first error: "
        "segment-000001.jsonl line 1: evidence schema 2: "), report.stdout
    page = (tmp_path / "r.html").read_text()
    # The integrity card is the first thing in the page's main part.
    assert page.index('<main><section id="integrity" class="unverified">') >= 0


def test_diff_and_sdk_diff_say_unverified_first(good: Path, tmp_path: Path) -> None:
    """With --allow-unverified, diff's text starts with the banner and sdk-diff's JSON holds
    it: the output never passes for an answer about verified evidence."""
    bundle = tmp_path / "bundle"
    with EvidenceWriter(bundle) as writer:
        writer.submit(_exchange(0))
        writer.submit(_exchange(1, **{"origin.status": 10**12}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_TAP_")}
    env["PYTHONPATH"] = str(REPO_ROOT)

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "mcp_tap", *argv], cwd=REPO_ROOT, env=env,
                              capture_output=True, text=True, timeout=_GUARD, check=False)

    diff = run("diff", "--allow-unverified", str(good), str(bundle))
    assert "Traceback" not in diff.stderr
    assert diff.stdout.startswith("UNVERIFIED EVIDENCE: 1 of 2 bundle(s) do not verify"), diff
    assert "at $.origin.status" in diff.stdout.splitlines()[0]
    refused = run("diff", str(good), str(bundle))
    assert refused.returncode == 2 and "--allow-unverified" in refused.stderr
    sdk = run("sdk-diff", "--allow-unverified", "--json", str(bundle))
    assert orjson.loads(sdk.stdout)["unverified"].startswith("UNVERIFIED EVIDENCE: 1 of 1")


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(sorted(all_paths(base_record()), key=str)),
                          st.sampled_from(HOSTILE)), min_size=1, max_size=3))
def test_hostile_values_at_any_path_never_crash_a_command(
        tmp_path: Path, changes: list[tuple[tuple[Any, ...], Any]]) -> None:
    """A record with hostile values at any of its paths: every reading command ends at the
    CLI's boundary (exit code, one line), none raises past it (the long run:
    bench/fuzz_commands.py)."""
    assert run_commands(tmp_path, hostile_record(changes)) is None
