"""``mcp-tap proxy`` as a real process, and the waits its tests share."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from peers import free_port, raw_modern_request
from taps import Lines

REPO_ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 30.0  # a hang guard, never a timing assertion
DIGEST_KEY = b"an operator digest key for tests"


def tools_list(request_id: int) -> tuple[dict[str, str], dict[str, Any]]:
    """The headers and body of a modern tools/list request with this id."""
    return raw_modern_request("tools/list", request_id=request_id)


async def until(condition: Callable[[], bool]) -> None:
    """Wait for the tap to account for what it forwarded: a client can hold its whole
    answer a moment before the tap's handler records the exchange."""
    async with asyncio.timeout(TIMEOUT):  # a hang guard, not a timing assertion
        while not condition():
            await asyncio.sleep(0.01)


@pytest.fixture
def proxy_process(
    tmp_path: Path, origin_base: str, request: pytest.FixtureRequest
) -> Iterator[tuple[subprocess.Popen[bytes], str, Path, Lines]]:
    """``mcp-tap proxy`` as a real process; the parameter is its recording mode."""
    port = free_port()
    evidence = tmp_path / "evidence"
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), PYTHONUNBUFFERED="1")
    env = {k: v for k, v in env.items() if not k.startswith("MCP_TAP_")}
    env["MCP_TAP_RECORDING_MODE"] = getattr(request, "param", "inline")
    # An operator digest key from the environment, so the test can check a body digest.
    env["MCP_TAP_REDACTION_DIGEST_KEY_ENV"] = "TEST_TAP_DIGEST_KEY"
    env["TEST_TAP_DIGEST_KEY"] = DIGEST_KEY.decode()
    cmd = [
        sys.executable,
        "-m",
        "mcp_tap",
        "proxy",
        "--listen",
        f"127.0.0.1:{port}",
        "--upstream",
        origin_base,
        "--evidence",
        str(evidence),
        "--admin",
        "",
    ]
    proc = subprocess.Popen(
        cmd,
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    stderr = Lines(proc.stderr)
    try:
        stderr.wait_for('"event":"proxy.started"', timeout=TIMEOUT)
        yield proc, f"http://127.0.0.1:{port}/mcp", evidence, stderr
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def exited(pid: int) -> bool:
    """Whether ``pid`` has exited (gone, or a zombie nobody reaped yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True

