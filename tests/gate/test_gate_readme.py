"""The README's gate example is what the commands it shows print.

``mcp-tap demo --drive`` (the real SDK server and client), then the README's ``attest`` and
``gate`` lines as written, in a fresh directory: the output equals the README's block but
for what differs per run (latency, observation time, the evidence digest). It went stale
once: two warnings and a client-caused error rate shown as blocking.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from peers import free_port

ROOT = Path(__file__).resolve().parents[2]
_VARIES = [(re.compile(r"p95 [0-9.]+ ms, observed [0-9.]+ s"), "p95 _ ms, observed _ s"),
           (re.compile(r"evidence digest: [0-9a-f]{64}"), "evidence digest: _")]


def readme_example() -> tuple[list[list[str]], list[str]]:
    """The README's commands (after ``$ ``, continuations joined) and the gate's output."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("$ export MCP_TAP_ROLLBACK_KEY=")
    block = text[start:text.index("```", start)]
    joined = block.replace("\\\n", " ")
    commands = [shlex.split(line[2:]) for line in joined.splitlines()
                if line.startswith("$ mcp-tap ")]
    shown = joined.split("$ mcp-tap gate ", 1)[1].splitlines()[1:]
    return commands, [line for line in shown if line]


def normal(lines: list[str]) -> list[str]:
    """Lines with the per-run figures replaced."""
    out = []
    for line in lines:
        for pattern, replacement in _VARIES:
            line = pattern.sub(replacement, line)
        out.append(line)
    return out


def test_readme_gate_example(tmp_path: Path) -> None:
    """The tour's evidence, attested rollback target, and the gate's text as shown."""
    commands, shown = readme_example()
    assert [c[:2] for c in commands] == [["mcp-tap", "attest"], ["mcp-tap", "gate"]]
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    env = {**os.environ, "PYTHONPATH": str(ROOT),
           "MCP_TAP_ROLLBACK_KEY": "a test key of at least 32 bytes, not a secret"}

    def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "mcp_tap", *argv], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300, check=False)

    tour = run(["demo", "--drive", "--admin", "", "--listen", f"127.0.0.1:{free_port()}"])
    assert tour.returncode == 0, tour.stderr
    assert run(commands[0][1:]).returncode == 0
    gate = run(commands[1][1:])
    assert gate.returncode == 1, gate.stderr  # rollback
    assert normal(gate.stdout.splitlines()) == normal(shown)
