"""Evidence lost to real faults is stated in the evidence, with the count /metrics shows.

Real processes: ``mcp-tap proxy`` killed with SIGKILL under load; a recording process writing
to a small tmpfs that fills up (``mount -t tmpfs -o size=...``; skipped where mounting is not
permitted); the evidence directory deleted while the proxy runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from proxy_processes import exited as _exited
from proxy_processes import proxy_process as proxy_process  # the fixture, re-exported
from proxy_processes import tools_list as _tools_list
from proxy_processes import until as _until
from taps import Lines as _Lines
from taps import hop_url, running_tap, tap_options

from mcp_tap.cli import main
from mcp_tap.evidence import find_bundles, iter_records, verify_bundle
from mcp_tap.proxy.options import EvidenceOptions, RecordingOptions
from mcp_tap.proxy.server import TapServer

_TIMEOUT = 60.0
_METRIC = re.compile(r'^mcptap_evidence_records_lost_total\{reason="(\w+)"\} (\S+)$', re.M)


def _evidence_metrics(text: str) -> dict[str, float]:
    """The evidence loss counters /metrics exposes: per reason, and their total."""
    lost = {reason: float(value) for reason, value in _METRIC.findall(text)}
    return {"lost_total": sum(lost.values()),
            **{f"lost_{reason}": value for reason, value in lost.items()}}


def _admin(tap: TapServer, path: str) -> str:
    assert tap.admin_address is not None
    host, port = tap.admin_address
    return f"http://{host}:{port}{path}"


def _gaps(bundle: Path) -> list[dict[str, Any]]:
    return [r for r in iter_records(bundle, lenient=True) if r.get("kind") == "gap"]


def _exchanges(bundle: Path) -> int:
    return sum(1 for r in iter_records(bundle, lenient=True) if r.get("kind") == "exchange")


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 3 MiB tmpfs: a disk that really fills up (ENOSPC)."""
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)],
                          capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(mount: Path, leave: int) -> Path:
    """Fill the file system but ``leave`` bytes; return the filler file."""
    filler = mount / "filler"
    block = bytes(4096)
    with open(filler, "wb", buffering=0) as handle, contextlib.suppress(OSError):
        while shutil.disk_usage(mount).free > leave:
            handle.write(block)
    return filler


async def _post_many(client: httpx.AsyncClient, url: str, first: int, count: int) -> list[int]:
    statuses = []
    for request_id in range(first, first + count):
        headers, body = _tools_list(request_id)
        statuses.append((await client.post(url, headers=headers, json=body)).status_code)
    return statuses


def _options(tmp_path: Path, evidence: Path, upstream: str) -> Any:
    return tap_options(evidence, upstream=upstream, admin=True,
                       recording=RecordingOptions(mode="process"),
                       evidence=EvidenceOptions(dir=str(evidence), max_segment_bytes=64 * 1024))


class TestDiskFull:
    async def test_full_disk_counted_then_stated_when_space_returns(
            self, small_tmpfs: Path, origin_base: str) -> None:
        """ENOSPC: traffic flows, /readyz fails, and once space returns the gap states exactly
        the loss /metrics shows, and /readyz recovers."""
        evidence = small_tmpfs / "evidence"
        async with running_tap(_options(small_tmpfs, evidence, origin_base)) as tap:
            url = hop_url(tap)
            async with httpx.AsyncClient(timeout=_TIMEOUT) as client:
                assert await _post_many(client, url, 1, 5) == [200] * 5
                filler = _fill(small_tmpfs, leave=0)
                assert await _post_many(client, url, 6, 40) == [200] * 40  # never blocked
                await _until(lambda: tap.recorder.counters().get("lost_disk", 0) > 0)
                ready = await client.get(_admin(tap, "/readyz"))
                filler.unlink()
                assert await _post_many(client, url, 46, 5) == [200] * 5
                await _until(lambda: not tap.recorder.counters().get("failing", 1))
                recovered = await client.get(_admin(tap, "/readyz"))
                metrics = _evidence_metrics((await client.get(_admin(tap, "/metrics"))).text)
        assert ready.status_code == 503
        assert any("failing to write" in p for p in ready.json()["problems"])
        assert recovered.status_code == 200
        (bundle,) = find_bundles(evidence)
        gaps = _gaps(bundle)
        lost = sum(g["lost"] for g in gaps)
        assert lost == metrics["lost_total"] == metrics["lost_disk"] > 0
        assert {g["reason"] for g in gaps} == {"disk error"}
        assert _exchanges(bundle) + lost == 50
        report = verify_bundle(bundle)
        assert (report.ok, report.lost) == (False, lost)

    async def test_disk_never_freed_still_states_the_loss(
            self, small_tmpfs: Path, origin_base: str) -> None:
        """A disk that stays full until shutdown: the space reserve lets the gap and the
        closing summary state every lost record."""
        evidence = small_tmpfs / "evidence"
        async with running_tap(_options(small_tmpfs, evidence, origin_base)) as tap:
            url = hop_url(tap)
            async with httpx.AsyncClient(timeout=_TIMEOUT) as client:
                assert await _post_many(client, url, 1, 3) == [200] * 3
                # The recording process batches its writes: the first three are on disk
                # before the disk fills, so exactly the next thirty are the ones lost.
                await _until(lambda: tap.recorder.counters().get("written", 0) >= 3)
                _fill(small_tmpfs, leave=0)
                assert await _post_many(client, url, 4, 30) == [200] * 30
                await _until(lambda: tap.recorder.counters().get("lost_disk", 0) >= 30)
        counters = tap.recorder.counters()
        (bundle,) = find_bundles(evidence)
        lost = sum(g["lost"] for g in _gaps(bundle))
        assert lost == counters["lost_total"] == 30
        assert _exchanges(bundle) + lost == 33
        assert verify_bundle(bundle).lost == 30


class TestDirectoryDeleted:
    async def test_deleted_directory_is_stated_in_a_fresh_bundle(
            self, tmp_path: Path, origin_base: str, capsys: pytest.CaptureFixture[str]) -> None:
        """rm -rf of the running bundle: the writer notices, counts what went, and the fresh
        bundle in its place starts with a gap equal to /metrics' count."""
        evidence = tmp_path / "evidence"
        async with running_tap(_options(tmp_path, evidence, origin_base)) as tap:
            url = hop_url(tap)
            async with httpx.AsyncClient(timeout=_TIMEOUT) as client:
                assert await _post_many(client, url, 1, 20) == [200] * 20
                await _until(lambda: tap.recorder.counters().get("written", 0) >= 20)
                shutil.rmtree(tap.bundle_dir)
                assert await _post_many(client, url, 21, 10) == [200] * 10
                await _until(lambda: tap.recorder.counters().get("lost_deleted", 0) > 0)
                metrics = _evidence_metrics((await client.get(_admin(tap, "/metrics"))).text)
        (bundle,) = find_bundles(evidence)
        first = next(iter_records(bundle))
        assert (first["kind"], first["reason"]) == ("gap", "evidence directory deleted")
        assert first["lost"] == metrics["lost_deleted"] == metrics["lost_total"] == 20
        assert _exchanges(bundle) == 10
        capsys.readouterr()
        assert main(["verify", str(bundle)]) == 1
        out = capsys.readouterr().out
        assert "gap: 20 records lost (evidence directory deleted)" in out
        assert "20 records stated lost" in out


@pytest.mark.parametrize("proxy_process", ["process"], indirect=True)
@pytest.mark.parametrize("with_session", [True, False], ids=["session", "sessionless"])
async def test_kill_9_of_the_proxy_under_load_is_stated(
    proxy_process: tuple[subprocess.Popen[bytes], str, Path, _Lines],
    capsys: pytest.CaptureFixture[str],
    with_session: bool,
) -> None:
    """SIGKILL of ``mcp-tap proxy`` under load: the orphaned recording process closes the
    bundle as ended abruptly, with the exchanges it knew were in flight as a gap; every
    exchange the load generator saw answered is recorded or counted in flight.

    With a session, each exchange is announced by its own ``begin`` message (the session's
    version is snapshotted then); without, only by the key range its frame begins with:
    both must leave the in-flight count stated."""
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
            if with_session:  # a legacy-looking session, judged
                headers["Mcp-Session-Id"] = uuid.uuid4().hex
            else:
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
    capsys.readouterr()
    assert main(["verify", str(bundle)]) == 1
    assert (f"bundle ended abruptly (forwarder ended abruptly): {report.inflight} "
            "exchange(s) in flight") in capsys.readouterr().out
