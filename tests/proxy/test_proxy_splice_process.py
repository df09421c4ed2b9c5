"""The forwarding core in a real ``mcp-tap proxy`` process: hostile input and shutdown.

A flood of malformed requests leaves no traceback and only JSON log lines; SIGTERM with an
upload that never ends (a gzip bomb trickled to an origin that never answers) still exits,
at the drain deadline, with the exchange recorded as cut.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from peers import free_port
from taps import Lines

from mcp_tap.evidence import read_bundle

REPO_ROOT = Path(__file__).resolve().parents[2]
_TIMEOUT = 60.0
_MALFORMED = (
    b"GET / HTTP/1.1\r\nBad Header: x\r\n\r\n",
    b"\x00\xff\xfe binary\r\n\r\n",
    b"POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
    b"GET / HTTP/9.9\r\n\r\n",
    b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
    b"GET /\x7f HTTP/1.1\r\nAuthorization: Bearer s3cr3t-token\r\nX: \x01\r\n\r\n",
)


@pytest.fixture
def tap_process(tmp_path: Path) -> Iterator[Any]:
    """Start ``mcp-tap proxy`` against ``upstream`` (a function so the origin comes first)."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(
        upstream: str, *args: str, **env_extra: str
    ) -> tuple[subprocess.Popen[bytes], int, Lines]:
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_TAP_")}
        env.update(PYTHONPATH=str(REPO_ROOT), PYTHONUNBUFFERED="1", **env_extra)
        proc = subprocess.Popen(
            [sys.executable, "-m", "mcp_tap", "proxy", "--listen", f"127.0.0.1:{port}",
             "--upstream", upstream, "--evidence", str(tmp_path / "evidence"), "--admin", "",
             *args],
            cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        procs.append(proc)
        stderr = Lines(proc.stderr)
        stderr.wait_for('"event":"proxy.started"', _TIMEOUT)
        return proc, port, stderr

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()


async def _silent_origin() -> tuple[asyncio.Server, str, list[int]]:
    """An origin that reads whatever comes and never answers."""
    got: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                got.append(len(data))
        except ConnectionError:
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", got


def _log_lines(lines: list[str]) -> list[str]:
    """stderr lines that are log lines (not the start-up announcement to the operator)."""
    return [ln for ln in lines if ln.strip() and not ln.startswith("mcp-tap: ")]


async def test_1000_malformed_requests_leave_no_traceback_and_only_json_lines(
    tap_process: Any, tmp_path: Path
) -> None:
    """Each malformed request gets a 400 and a JSON log line; nothing quotes raw bytes."""
    server, upstream, _ = await _silent_origin()
    proc, port, stderr = tap_process(upstream, MCP_TAP_RECORDING_MODE="inline")
    answers: list[bytes] = []
    gate = asyncio.Semaphore(32)

    async def one(i: int) -> None:
        async with gate:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(_MALFORMED[i % len(_MALFORMED)])
            answers.append(await asyncio.wait_for(reader.read(), _TIMEOUT))
            writer.close()

    await asyncio.gather(*(one(i) for i in range(1000)))
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=_TIMEOUT) == 0
    server.close()
    lines = stderr.join().splitlines(keepends=True)
    assert all(a.startswith(b"HTTP/1.1 400 ") and b"X-Mcp-Tap-Error: " in a for a in answers)
    assert not any("Traceback" in ln for ln in lines)
    logs = _log_lines(lines)
    events = [json.loads(ln) for ln in logs]  # every log line is JSON
    assert sum(1 for e in events if e.get("event") == "tap.bad-request") == 1000
    assert not any("s3cr3t" in ln for ln in lines)
    (bundle,) = (tmp_path / "evidence").iterdir()
    recs = [r for r in read_bundle(bundle).records if r.get("kind") == "exchange"]
    assert len(recs) == 1000
    assert all([f["rule"] for f in r["findings"]] == ["tap.bad-request"] for r in recs)


async def test_sigterm_with_a_stuck_gzip_bomb_upload_exits_at_the_drain_deadline(
    tap_process: Any, tmp_path: Path
) -> None:
    """An upload that never ends cannot hold shutdown: it is cut at the deadline and
    recorded as cut; the process exits 0."""
    server, upstream, got = await _silent_origin()
    proc, port, stderr = tap_process(upstream, MCP_TAP_LISTENER_DRAIN_TIMEOUT_S="1")
    bomb = zlib.compressobj(1, zlib.DEFLATED, 31)
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /mcp HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n"
                 b"Content-Encoding: gzip\r\nContent-Length: 1073741824\r\n\r\n")
    zeros = b"\0" * (16 << 20)
    for _ in range(16):  # 256 MB inflated, about 1 MB on the wire; then it stalls
        writer.write(bomb.compress(zeros))
        await writer.drain()
    while sum(got) < 256 << 10:  # the origin is receiving the upload as it comes
        await asyncio.sleep(0.05)
    status = Path(f"/proc/{proc.pid}/status").read_text()
    rss_kb = int(next(ln for ln in status.splitlines() if ln.startswith("VmRSS:")).split()[1])
    assert rss_kb < 300 * 1024  # nothing inflated the bomb on the forwarding path
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=_TIMEOUT) == 0  # a hang guard; the deadline is 1 s
    writer.close()
    server.close()
    lines = stderr.join().splitlines(keepends=True)
    assert not any("Traceback" in ln for ln in lines)
    events = [json.loads(ln) for ln in _log_lines(lines)]
    assert any(e.get("event") == "proxy.drain-deadline" and e.get("cut") == 1 for e in events)
    (bundle,) = (tmp_path / "evidence").iterdir()
    (rec,) = [r for r in read_bundle(bundle).records if r.get("kind") == "exchange"]
    assert rec["tapError"]["phase"] == "drain-deadline"
    tap_rules = [(f["rule"], f["strength"]) for f in rec["findings"]
                 if f["rule"].startswith("tap.")]
    assert tap_rules == [("tap.drain-deadline", "must"), ("tap.capture-truncated", "must")]
    assert rec["ingress"]["ended"] is False
    assert rec["ingress"]["truncated"] is True


@pytest.mark.parametrize("loop", [("--uvloop",), ("--loop", "asyncio"), ()],
                         ids=["uvloop", "asyncio", "default"])
async def test_the_splicing_core_runs_on_each_loop(
    tap_process: Any, tmp_path: Path, loop: tuple[str, ...]
) -> None:
    """On uvloop (whose transports are not asyncio.Transport subclasses), on asyncio's own
    loop, and on the default (uvloop, installed with the package), a request and its answer
    pass byte for byte and are recorded."""
    if loop != ("--loop", "asyncio"):
        pytest.importorskip("uvloop")
    request = b"POST /mcp HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n{}"
    answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
    received: list[bytes] = []
    origin_side: list[asyncio.StreamWriter] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        origin_side.append(writer)
        received.append(await reader.readexactly(len(request)))
        writer.write(answer)
        await writer.drain()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    upstream = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    proc, port, stderr = tap_process(upstream, *loop, MCP_TAP_RECORDING_MODE="inline")
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    got = await asyncio.wait_for(reader.readexactly(len(answer)), _TIMEOUT)
    writer.close()
    await writer.wait_closed()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=_TIMEOUT) == 0
    for side in origin_side:
        side.close()
    server.close()
    await server.wait_closed()
    assert got == answer and received == [request]
    assert not any("Traceback" in ln or "uvloop_missing" in ln for ln in stderr.join().splitlines())
    (bundle,) = (tmp_path / "evidence").iterdir()
    (rec,) = [r for r in read_bundle(bundle).records if r.get("kind") == "exchange"]
    assert rec["origin"]["status"] == 200
