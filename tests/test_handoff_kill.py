"""SIGKILL of ``mcp-tap proxy`` under load, every request without a session: the exchanges
in flight are known to the recording process from the begun key ranges alone (no per-exchange
``begin`` message), and the bundle still states them (as in ``test_evidence_faults``, whose
requests all name a session)."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import httpx
import pytest
from taps import Lines as _Lines
from test_evidence_faults import _exchanges, _gaps
from test_proxy_ops import _exited, _tools_list, _until
from test_proxy_ops import proxy_process as proxy_process  # the fixture, re-exported

from mcp_tap.evidence import find_bundles, verify_bundle

_TIMEOUT = 30.0


@pytest.mark.parametrize("proxy_process", ["process"], indirect=True)
async def test_kill_9_with_sessionless_exchanges_in_flight_is_stated(
    proxy_process: tuple[subprocess.Popen[bytes], str, Path, _Lines],
) -> None:
    proc, url, evidence, _stderr = proxy_process
    (recording_pid,) = (
        int(pid)
        for task in Path(f"/proc/{proc.pid}/task").iterdir()
        for pid in (task / "children").read_text().split()
        if "spawn_main" in Path(f"/proc/{pid}/cmdline").read_text()
    )
    answered = sent = 0
    stop = asyncio.Event()

    async def client_loop(client: httpx.AsyncClient) -> None:
        nonlocal answered, sent
        for _ in range(400):  # bounded: the kill comes long before
            if stop.is_set():
                return
            headers, body = _tools_list(sent)
            assert not any(k.lower() == "mcp-session-id" for k in headers)
            sent += 1
            try:
                response = await client.post(url, headers=headers, json=body)
            except httpx.HTTPError:
                return
            if response.status_code == 200:
                answered += 1

    async with httpx.AsyncClient(timeout=_TIMEOUT, limits=httpx.Limits(max_connections=16)) \
            as client:
        loops = [asyncio.create_task(client_loop(client)) for _ in range(16)]
        await _until(lambda: answered >= 100)  # under load: the kill comes mid-stream
        proc.kill()
        stop.set()
        await asyncio.gather(*loops)
    proc.wait(timeout=_TIMEOUT)
    await _until(lambda: _exited(recording_pid))

    (bundle,) = find_bundles(evidence)
    report = verify_bundle(bundle)
    recorded = _exchanges(bundle)
    gaps = _gaps(bundle)
    assert report.end == "abrupt"
    assert [g["reason"] for g in gaps] == ["forwarder ended abruptly"] or report.inflight == 0
    assert sum(g["lost"] for g in gaps) == report.inflight == report.lost
    # What the client saw answered is recorded or stated in flight; nothing is over-counted.
    assert answered - recorded <= report.inflight
    assert recorded + report.inflight <= sent
    assert not report.ok
