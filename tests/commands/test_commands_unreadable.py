"""Evidence the user cannot read: one line naming it, exit 2, never a traceback.

Permissions are real: the directory or file is chmod'ed and the command runs in a child
process that permission checks apply to. As root (this CI's user) the child runs without
CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (util-linux ``setpriv``), so root reads only what
the mode bits allow, as any other user would.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from gate_bundles import healthy, write_policy

REPO = Path(__file__).parents[2]
_DROP = "-dac_override,-dac_read_search"


def as_user(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run ``mcp-tap argv`` in a child process bound by file permissions."""
    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("root without setpriv: permissions cannot be made to apply")
        prefix = [setpriv, f"--bounding-set={_DROP}", f"--inh-caps={_DROP}"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([*prefix, sys.executable, "-m", "mcp_tap", *argv], env=env,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture
def evidence(tmp_path: Path) -> Iterator[Path]:
    """An evidence directory with one healthy bundle; modes restored afterwards."""
    root = tmp_path / "evidence"
    healthy(root / "b1", count=10)
    yield root
    for path in [root, *root.rglob("*")]:
        path.chmod(0o700)


COMMANDS = [
    ["verify", "{ev}"],
    ["gate", "{ev}", "--policy", "{policy}"],
    ["report", "{ev}", "--out", "{tmp}/r.html"],
    ["diff", "{ev}", "{ev}"],
    ["export", "{ev}", "--format", "jsonl", "--out", "{tmp}/x.jsonl"],
    ["sdk-diff", "{ev}"],
    ["redact", "{ev}/b1", "--policy", "{repo}/examples/strict.toml", "--out", "{tmp}/derived"],
    # Nothing listens on port 9: the evidence is read (and refused) before any request.
    ["replay", "{ev}", "--target", "http://127.0.0.1:9/mcp"],
    ["serve", "{ev}", "--listen", "127.0.0.1:0"],
]


@pytest.mark.parametrize("how", ["no-search", "no-list", "segment"])
@pytest.mark.parametrize("argv", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_unreadable_evidence(tmp_path: Path, evidence: Path, argv: list[str], how: str) -> None:
    """A bundle directory without search or read permission, or an unreadable segment."""
    bundle = evidence / "b1"
    if how == "no-search":
        bundle.chmod(0o000)
    elif how == "no-list":
        bundle.chmod(0o300)  # may be entered, not listed
    else:
        next(bundle.glob("segment-*.jsonl")).chmod(0o000)
    values = {"ev": str(evidence), "policy": str(write_policy(tmp_path)), "tmp": str(tmp_path),
              "repo": str(REPO)}
    done = as_user([word.format(**values) for word in argv])
    assert "Traceback" not in done.stderr
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("mcp-tap: error: ") and "Permission denied" in line, line
    assert str(bundle) in line
