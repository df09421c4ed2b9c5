"""Operating the tap: admin, configuration, the real process, evidence loss, disconnects."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import threading
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web
from peers import free_port, modern_meta, parse_sse, raw_modern_request
from proxy_processes import DIGEST_KEY as _DIGEST_KEY
from proxy_processes import TIMEOUT as _TIMEOUT
from proxy_processes import exited as _exited
from proxy_processes import proxy_process as proxy_process  # the fixture, re-exported
from proxy_processes import tools_list as _tools_list
from proxy_processes import until as _until
from taps import Lines, exchanges, hop_url, records, running_tap, tap_options

from mcp_tap.cli import main
from mcp_tap.core.hashing import DigestKey, body_digest
from mcp_tap.errors import InputError
from mcp_tap.evidence import EvidenceWriter, read_bundle
from mcp_tap.proxy.options import EvidenceOptions, RecordingOptions, load_options
from mcp_tap.proxy.server import TapServer
from mcp_tap.proxy.worker import ProcessRecorder

StartApp = Callable[[web.Application], Awaitable[str]]  # the `serve_app` fixture

REPO_ROOT = Path(__file__).resolve().parents[2]


def _admin(tap: TapServer, path: str) -> str:
    assert tap.admin_address is not None
    host, port = tap.admin_address
    return f"http://{host}:{port}{path}"


# -- admin -----------------------------------------------------------------------------------


async def test_admin_health_readiness_and_metrics(tmp_path: Path, origin_base: str) -> None:
    opts = tap_options(tmp_path, upstream=origin_base, admin=True)
    async with running_tap(opts) as tap, httpx.AsyncClient(timeout=_TIMEOUT) as client:
        health = await client.get(_admin(tap, "/healthz"))
        ready = await client.get(_admin(tap, "/readyz"))
        for i in range(3):
            headers, body = _tools_list(i)
            assert (await client.post(hop_url(tap), headers=headers, json=body)).status_code == 200
        headers, body = _tools_list(99)
        mismatch = await client.post(
            hop_url(tap), headers={**headers, "Mcp-Method": "tools/call"}, json=body
        )
        await _until(lambda: tap.metrics.exchanges.value(hop="tap", era="modern") >= 4)
        metrics = await client.get(_admin(tap, "/metrics"))

    assert health.status_code == 200 and health.json() == {"status": "ok"}
    assert ready.status_code == 200 and ready.json() == {"ready": True, "problems": []}
    assert mismatch.status_code == 400
    assert metrics.status_code == 200
    assert metrics.headers["content-type"].startswith("text/plain")
    lines = metrics.text.splitlines()
    assert 'mcptap_exchanges_total{era="modern",hop="tap"} 4.0' in lines
    assert 'mcptap_findings_total{hop="tap",rule="request.header.mismatch"} 1.0' in lines
    assert [line for line in lines if line.startswith("mcptap_findings_total{")] == [
        'mcptap_findings_total{hop="tap",rule="request.header.mismatch"} 1.0'
    ]
    assert "# TYPE mcptap_exchanges_total counter" in lines
    assert 'mcptap_upstream_latency_seconds_count{hop="tap"} 4.0' in lines
    assert 'mcptap_evidence_records_lost_total{reason="queue"} 0.0' in lines


async def test_readiness_names_the_hop_whose_upstream_is_down(
    tmp_path: Path, origin_base: str
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    opts = tap_options(tmp_path, [("edge", origin_base), ("inner", dead)], admin=True)
    async with running_tap(opts) as tap, httpx.AsyncClient(timeout=_TIMEOUT) as client:
        ready = await client.get(_admin(tap, "/readyz"))
        health = await client.get(_admin(tap, "/healthz"))

    assert health.status_code == 200  # alive, just not ready
    assert ready.status_code == 503
    body = ready.json()
    assert body["ready"] is False
    assert body["problems"] == [f"hop inner: upstream {dead} is not reachable"]


# -- configuration ---------------------------------------------------------------------------

_CONFIG = """
[[hop]]
name = "edge"
listen = "127.0.0.1:0"
upstream = "http://127.0.0.1:9000/"

[evidence]
dir = "from-file"
queue_size = 50

[upstream]
verify_tls = true
idle_timeout_s = 12.5

[capture]
max_body_bytes = 2048

[[redaction.argument]]
method = "tools/call"
tool = "lookup"
argument = "query"
"""


def test_config_file_and_environment_overrides(tmp_path: Path) -> None:
    config = tmp_path / "tap.toml"
    config.write_text(_CONFIG, encoding="utf-8")

    from_file = load_options(str(config), env={})
    assert [(h.name, h.listen, h.upstream) for h in from_file.hops] == [
        ("edge", "127.0.0.1:0", "http://127.0.0.1:9000")
    ]
    assert from_file.evidence.dir == "from-file"
    assert from_file.evidence.queue_size == 50
    assert from_file.upstream.verify_tls is True
    assert from_file.upstream.idle_timeout_s == 12.5
    assert from_file.capture.max_body_bytes == 2048
    (policy,) = from_file.redaction.argument_policies
    assert (policy.method, policy.tool, policy.argument) == ("tools/call", "lookup", "query")

    env = {"MCP_TAP_EVIDENCE_DIR": "from-env", "MCP_TAP_UPSTREAM_VERIFY_TLS": "false"}
    from_env = load_options(str(config), env=env)
    assert from_env.evidence.dir == "from-env"
    assert from_env.upstream.verify_tls is False
    assert from_env.evidence.queue_size == 50  # the rest of the file still holds
    assert from_env.upstream.idle_timeout_s == 12.5

    flags = load_options(str(config), env=env, evidence_dir="from-flag", admin="")
    assert flags.evidence.dir == "from-flag"  # flags beat the environment
    assert flags.admin.listen == ""
    assert from_file.recording.mode == "process"  # the default: judging off the event loop
    assert load_options(str(config), env={"MCP_TAP_RECORDING_MODE": "inline"}).recording == (
        RecordingOptions(mode="inline")
    )


@pytest.mark.parametrize(
    ("text", "env", "expected"),
    [
        ("[[hop]\nlisten = 1", {}, "not valid TOML"),
        (
            '[[hop]]\nlisten = "127.0.0.1:0"\nupstream = "ftp://x"\n',
            {},
            "[[hop]] hop1 upstream: 'ftp://x' is not an http:// or https:// URL",
        ),
        ('[[hop]]\nlisten = "nowhere"\nupstream = "http://x"\n', {}, "is not HOST:PORT"),
        ('[evidence]\nqueue_size = "many"\n', {}, "[evidence] queue_size must be an integer"),
        ("[surprise]\nx = 1\n", {}, "tap.toml: unknown key surprise in the top level"),
        ("[upstream]\nverify = false\n", {}, "tap.toml: unknown key upstream.verify in [upstream]"),
        (
            '[[hop]]\nlisten = "127.0.0.1:0"\nupstream = "http://x"\n',
            {"MCP_TAP_UPSTREAM_VERIFY_TLS": "maybe"},
            "[upstream] verify_tls must be a boolean",
        ),
        (
            '[[hop]]\nlisten = "127.0.0.1:0"\nupstream = "http://x"\n'
            '[recording]\nmode = "thread"\n',
            {},
            "[recording] mode must be one of inline, process, got 'thread'",
        ),
    ],
    ids=["toml", "upstream-url", "listen", "type", "section", "option", "env-bool", "mode"],
)
def test_malformed_config_is_one_line_input_error(
    tmp_path: Path, text: str, env: dict[str, str], expected: str
) -> None:
    config = tmp_path / "tap.toml"
    config.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_options(str(config), env=env)
    message = str(caught.value)
    assert expected in message
    assert "\n" not in message


def test_cli_proxy_with_bad_config_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(os.environ):
        if name.startswith("MCP_TAP_"):
            monkeypatch.delenv(name)
    bad = tmp_path / "bad.toml"
    bad.write_text("[[hop]]\nlisten = \n", encoding="utf-8")
    assert main(["proxy", "--config", str(bad)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith(f"mcp-tap: error: {bad}: not valid TOML")
    assert "Traceback" not in err


# -- the real process ------------------------------------------------------------------------


@pytest.mark.parametrize("proxy_process", ["inline", "process"], indirect=True)
async def test_proxy_process_drains_an_sse_call_on_sigterm_and_exits_0(
    proxy_process: tuple[subprocess.Popen[bytes], str, Path, Lines],
    capsys: pytest.CaptureFixture[str],
) -> None:
    proc, url, evidence, stderr = proxy_process
    headers, body = _tools_list(1)
    call_headers, call_body = raw_modern_request(
        "tools/call",
        {"name": "slow_count", "arguments": {"n": 3}},
        request_id=2,
        meta=modern_meta(progress_token="p1"),
    )
    received = bytearray()
    async with httpx.AsyncClient(timeout=_TIMEOUT) as client:
        listed = await client.post(url, headers=headers, json=body)
        async with client.stream("POST", url, headers=call_headers, json=call_body) as response:
            assert response.headers["content-type"] == "text/event-stream"
            async for chunk in response.aiter_raw():
                if not received:
                    # The first event is here; the origin is still counting (the proxy
                    # logs proxy.draining; not asserted, as that would be a timing race).
                    proc.send_signal(signal.SIGTERM)
                received.extend(chunk)
    code = await asyncio.to_thread(proc.wait, _TIMEOUT)
    log = stderr.join()

    assert listed.status_code == 200
    events = parse_sse(received.decode())
    assert [e["data"]["params"]["progress"] for e in events[:-1]] == [1, 2, 3]
    assert events[-1]["data"]["id"] == 2
    assert events[-1]["data"]["result"]["content"][0]["text"] == "counted to 3"
    assert code == 0, log
    assert "Traceback" not in log
    assert log.count('"event":"exchange"') == 2  # one line per exchange, in either mode
    lines = [json.loads(line) for line in log.splitlines()]  # every stderr line is JSON
    assert {line["event"] for line in lines} >= {"proxy.started", "exchange", "proxy.stopped"}

    capsys.readouterr()
    assert main(["verify", str(evidence)]) == 0
    assert capsys.readouterr().out.startswith("ok: ")
    (bundle,) = [p for p in evidence.iterdir() if p.is_dir()]
    recs = [r for r in read_bundle(bundle).records if r["kind"] == "exchange"]
    assert [r["method"] for r in recs] == ["tools/list", "tools/call"]
    call = recs[1]
    assert call["egress"]["bodyDigest"] == body_digest(DigestKey(_DIGEST_KEY, "operator"), received)
    assert call["digests"] == DigestKey(_DIGEST_KEY, "operator").describe()
    assert call["origin"]["sse"][-1]["data"]["result"]["content"][0]["text"] == "counted to 3"
    assert call["findings"] == [] and call["tapError"] is None
    logged = [(x["exchange_id"], x["trace_id"]) for x in lines if x["event"] == "exchange"]
    assert sorted(logged) == sorted((r["exchangeId"], r["traceId"]) for r in recs)


# -- evidence loss ---------------------------------------------------------------------------


async def test_evidence_queue_full_is_counted_and_leaves_a_gap_while_traffic_flows(
    tmp_path: Path,
    origin_base: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A stuck disk (the writer blocked on its first record) with a queue of one."""
    release = threading.Event()
    blocked: list[dict[str, Any]] = []
    handle = EvidenceWriter._handle

    def slow_handle(self: EvidenceWriter, item: Any) -> None:
        # The first batch of records (inline recording hands one per loop iteration).
        if isinstance(item, dict | list) and not blocked:
            blocked.append(item)
            release.wait(_TIMEOUT)
        handle(self, item)

    monkeypatch.setattr(EvidenceWriter, "_handle", slow_handle)
    n = 8
    opts = replace(
        tap_options(tmp_path, upstream=origin_base, admin=True),
        evidence=EvidenceOptions(dir=str(tmp_path), queue_size=1),
    )
    try:
        async with running_tap(opts) as tap, httpx.AsyncClient(timeout=_TIMEOUT) as client:

            async def one(i: int) -> httpx.Response:
                headers, body = _tools_list(i)
                return await client.post(hop_url(tap), headers=headers, json=body)

            # One after the other: each exchange ends in its own loop iteration, so each is
            # its own batch: the first blocks the writer, the next fills the queue of one.
            answers = [await one(i) for i in range(n)]
            await _until(lambda: tap.metrics.exchanges.value(hop="tap", era="modern") >= n)
            metrics = (await client.get(_admin(tap, "/metrics"))).text
            lost = tap.writer.lost
            release.set()
    finally:
        release.set()
    recs = records(tap)

    assert [a.status_code for a in answers] == [200] * n  # traffic never waited for the disk
    assert 1 <= lost <= n - 1
    assert f'mcptap_evidence_records_lost_total{{reason="queue"}} {lost}.0' in metrics.splitlines()
    gaps = [r for r in recs if r["kind"] == "gap"]
    assert gaps and all(g["reason"] == "queue full" for g in gaps)
    assert sum(g["lost"] for g in gaps) == lost
    assert len([r for r in recs if r["kind"] == "exchange"]) == n - lost
    # The loss is in the bundle, so verify fails it: the evidence is incomplete, visibly.
    capsys.readouterr()
    assert main(["verify", str(tap.bundle_dir)]) == 1
    reported = re.findall(r"gap: (\d+) records lost \(queue full\)", capsys.readouterr().out)
    assert reported and sum(map(int, reported)) == lost


# -- client disconnect -----------------------------------------------------------------------


@pytest.mark.parametrize("origin_pings", [True, False], ids=["pinging-origin", "silent-origin"])
async def test_client_disconnect_mid_sse_closes_the_upstream_stream(
    tmp_path: Path, serve_app: StartApp, origin_pings: bool
) -> None:
    upstream_closed = asyncio.Event()
    first = {
        "jsonrpc": "2.0",
        "method": "notifications/message",
        "params": {"level": "info", "data": "started"},
    }

    async def endless(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        try:
            await response.write(f"event: message\ndata: {json.dumps(first)}\n\n".encode())
            while True:  # keep-alive comments (or silence) until the tap hangs up
                await asyncio.sleep(0.05)
                if origin_pings:
                    await response.write(b": ping\n\n")
        except (asyncio.CancelledError, ConnectionResetError):
            upstream_closed.set()
            raise

    app = web.Application()
    app.router.add_post("/mcp", endless)
    base = await serve_app(app)
    headers, body = raw_modern_request(
        "tools/call", {"name": "echo", "arguments": {"text": "x"}}, request_id=3
    )
    # The origin streams a log message first: the request asks for them (logging page).
    body["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = "info"
    async with running_tap(tap_options(tmp_path, upstream=base)) as tap:
        async with (
            httpx.AsyncClient(timeout=_TIMEOUT) as client,
            client.stream("POST", hop_url(tap), headers=headers, json=body) as response,
        ):
            async for chunk in response.aiter_raw():
                assert b"started" in chunk
                break  # the client goes away mid-stream
        await asyncio.wait_for(upstream_closed.wait(), _TIMEOUT)  # a hang guard only
    (rec,) = exchanges(tap)

    assert upstream_closed.is_set()
    assert rec["egress"]["clientGone"] is True
    assert rec["origin"]["sse"][0]["data"] == first
    assert rec["tapError"] is None
    assert rec["findings"] == []  # the origin did nothing wrong: the client left


async def _raw_post(url: str, headers: dict[str, str], body: bytes, *, length: int) -> tuple[
    asyncio.StreamReader, asyncio.StreamWriter
]:
    """Open a raw connection and send a POST whose ``Content-Length`` is ``length``."""
    target = httpx.URL(url)
    reader, writer = await asyncio.open_connection(target.host, target.port)
    head = [f"POST {target.raw_path.decode()} HTTP/1.1", f"Host: {target.host}"]
    head += [f"{k}: {v}" for k, v in headers.items()]
    head += [f"Content-Length: {length}", "", ""]
    writer.write("\r\n".join(head).encode() + body)
    await writer.drain()
    return reader, writer


async def _hang_up(writer: asyncio.StreamWriter) -> None:
    writer.close()
    await writer.wait_closed()


class TestClientLeavesMidExchange:
    """A client that leaves is the client's doing: no finding blames the origin or the client's
    request for what the tap could not see."""

    async def test_client_gone_while_the_answer_body_is_pending(
        self, tmp_path: Path, serve_app: StartApp
    ) -> None:
        """A JSON answer cut short by the client's hang-up is not judged as an empty body."""
        released = asyncio.Event()

        async def stalls(request: web.Request) -> web.StreamResponse:
            await request.read()
            response = web.StreamResponse(
                headers={"Content-Type": "application/json", "Content-Length": "200"}
            )
            await response.prepare(request)
            await response.write(b'{"jsonrpc": "2.0", ')  # a tenth of the promised body
            await released.wait()
            return response

        app = web.Application()
        app.router.add_post("/mcp", stalls)
        base = await serve_app(app)
        headers, body = _tools_list(7)
        data = json.dumps(body).encode()
        try:
            async with running_tap(tap_options(tmp_path, upstream=base)) as tap:
                reader, writer = await _raw_post(hop_url(tap), headers, data, length=len(data))
                status_line = await asyncio.wait_for(reader.readline(), _TIMEOUT)
                assert b" 200 " in status_line
                await _hang_up(writer)
        finally:
            released.set()
        (rec,) = exchanges(tap)

        assert rec["egress"]["clientGone"] is True
        assert rec["origin"]["ended"] is False
        assert rec["origin"]["truncated"] is True
        assert rec["origin"]["body"] is None
        assert rec["tapError"] is None
        assert rec["findings"] == []
        assert rec["method"] == "tools/list"  # the request side is still judged

    async def test_client_gone_while_sending_the_request_body(
        self, tmp_path: Path, serve_app: StartApp
    ) -> None:
        """Half a request body is not judged as an empty or unparsable request."""
        origin_reading = asyncio.Event()

        async def reads(request: web.Request) -> web.Response:
            origin_reading.set()
            await request.read()
            return web.json_response({"jsonrpc": "2.0", "id": 1, "result": {}})

        app = web.Application()
        app.router.add_post("/mcp", reads)
        base = await serve_app(app)
        headers, body = _tools_list(1)
        data = json.dumps(body).encode()
        async with running_tap(tap_options(tmp_path, upstream=base)) as tap:
            _, writer = await _raw_post(
                hop_url(tap), headers, data[: len(data) // 2], length=len(data)
            )
            await asyncio.wait_for(origin_reading.wait(), _TIMEOUT)
            await _hang_up(writer)
        (rec,) = exchanges(tap)

        assert rec["egress"]["clientGone"] is True
        assert rec["ingress"]["ended"] is False
        assert rec["ingress"]["truncated"] is True
        assert rec["ingress"]["bodySize"] == len(data) // 2
        assert rec["ingress"]["body"] is None
        assert rec["findings"] == []


# -- the recording process -------------------------------------------------------------------


class TestRecordingProcess:
    """``[recording] mode = "process"``: the same evidence, judged in another process."""

    @staticmethod
    def _options(
        tmp_path: Path, upstream: str, queue_size: int = 10000, max_wait_ms: int = 500
    ) -> Any:
        return tap_options(
            tmp_path,
            upstream=upstream,
            admin=True,
            recording=RecordingOptions(mode="process", queue_size=queue_size,
                                       max_wait_ms=max_wait_ms),
        )

    async def test_findings_and_metrics_come_back_from_the_recording_process(
        self, tmp_path: Path, origin_base: str
    ) -> None:
        """A finding judged in the recording process reaches the evidence and /metrics."""
        headers, body = _tools_list(1)
        bad = dict(headers, **{"Mcp-Method": "tools/call"})  # the body says tools/list
        async with running_tap(self._options(tmp_path, origin_base)) as tap:
            assert tap.writer is None and isinstance(tap.recorder, ProcessRecorder)
            async with httpx.AsyncClient(timeout=_TIMEOUT) as client:
                good = await client.post(hop_url(tap), headers=headers, json=body)
                mismatch = await client.post(hop_url(tap), headers=bad, json=body)
                await _until(lambda: tap.metrics.exchanges.value(hop="tap", era="modern") >= 2)
                metrics = (await client.get(_admin(tap, "/metrics"))).text
        recs = exchanges(tap)

        assert good.status_code == 200 and mismatch.status_code == 400
        assert [[f["rule"] for f in r["findings"]] for r in recs] == [
            [],
            ["request.header.mismatch"],
        ]
        assert recs[1]["findings"][0]["code"] == -32020
        lines = metrics.splitlines()
        assert 'mcptap_exchanges_total{era="modern",hop="tap"} 2.0' in lines
        assert 'mcptap_findings_total{hop="tap",rule="request.header.mismatch"} 1.0' in lines
        assert tap.metrics.findings.value(hop="tap", rule="request.header.mismatch") == 1

    async def test_a_full_handover_queue_is_counted_and_leaves_a_gap(
        self, tmp_path: Path, origin_base: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Captures that do not fit the queue are counted lost and become a gap record (no
        back-pressure: max_wait_ms = 0)."""
        opts = self._options(tmp_path, origin_base, queue_size=2, max_wait_ms=0)
        async with running_tap(opts) as tap:
            assert isinstance(tap.recorder, ProcessRecorder)
            pid = tap.recorder.pid
            async with httpx.AsyncClient(timeout=_TIMEOUT) as client:
                os.kill(pid, signal.SIGSTOP)  # the recording process takes nothing now
                try:
                    answers = [
                        await client.post(hop_url(tap), headers=h, json=b)
                        for h, b in map(_tools_list, range(1, 6))
                    ]
                    lost_while_stopped = tap.recorder.lost
                    counted = tap.recorder.counters()["lost"]
                finally:
                    os.kill(pid, signal.SIGCONT)
                await _until(lambda: tap.metrics.exchanges.value(hop="tap", era="modern") >= 2)
                headers, body = _tools_list(6)
                await client.post(hop_url(tap), headers=headers, json=body)
        recs = records(tap)

        assert [a.status_code for a in answers] == [200] * 5  # traffic never waited
        assert lost_while_stopped == counted == 3
        assert [r["kind"] for r in recs] == ["exchange", "exchange", "gap", "exchange"]
        assert recs[2]["lost"] == 3 and recs[2]["reason"] == "recording queue full"
        assert [r["rpcId"] for r in recs if r["kind"] == "exchange"] == [1, 2, 6]
        assert tap.recorder.counters()["lost"] == 3  # the recording process's final report
        capsys.readouterr()
        assert main(["verify", str(tap.bundle_dir)]) == 1
        assert "gap: 3 records lost (recording queue full)" in capsys.readouterr().out

    async def test_an_unwritable_evidence_directory_is_one_input_error(
        self, tmp_path: Path, origin_base: str
    ) -> None:
        """A recording process that cannot open the bundle stops the start with InputError."""
        blocker = tmp_path / "not-a-dir"
        blocker.write_text("")
        opts = self._options(tmp_path, origin_base)
        opts = replace(opts, evidence=replace(opts.evidence, dir=str(blocker)))
        server = TapServer(opts)
        with pytest.raises(InputError, match="the recording process did not start: "):
            await server.start()
        await server.stop()
        assert server.addresses == {}

    async def test_a_recording_process_that_dies_while_starting_is_one_input_error(
        self, tmp_path: Path, origin_base: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Killed before it says ready, the recording process is named with its exit code."""
        opts = self._options(tmp_path, origin_base)
        bundle_dir = tmp_path / "bundle"
        recorder = ProcessRecorder(opts, bundle_dir, TapServer(opts).metrics)
        process = recorder._process  # the real child; killed the moment it exists
        spawn = type(process).start

        def spawn_then_kill(self: Any) -> None:
            spawn(self)
            os.kill(self.pid, signal.SIGKILL)

        # On the class: the process object itself is pickled for the child.
        monkeypatch.setattr(type(process), "start", spawn_then_kill)
        with pytest.raises(InputError) as info:
            await recorder.start()
        assert str(info.value) == "the recording process did not start: it exited (code -9)"
        assert not process.is_alive() and process.exitcode == -9
        await recorder.aclose()  # nothing left to hand over or wait for

    async def test_a_recording_process_that_dies_is_counted_and_named(
        self, tmp_path: Path, origin_base: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Traffic goes on; /readyz names the exit until the new process is up; every
        exchange is either recorded or stated lost in a gap record, exactly."""
        release = asyncio.Event()  # holds the restart, so /readyz is read while it is due
        start = ProcessRecorder._start_process

        async def held_start(self: ProcessRecorder) -> None:
            if self.restarts:
                await release.wait()
            await start(self)

        monkeypatch.setattr(ProcessRecorder, "_start_process", held_start)
        async with running_tap(self._options(tmp_path, origin_base)) as tap:
            recorder = tap.recorder
            assert isinstance(recorder, ProcessRecorder)
            pid = recorder.pid
            assert pid is not None
            async with httpx.AsyncClient(timeout=_TIMEOUT) as client:
                headers, body = _tools_list(1)
                first = await client.post(hop_url(tap), headers=headers, json=body)
                await _until(lambda: tap.metrics.exchanges.value(hop="tap", era="modern") >= 1)
                os.kill(pid, signal.SIGKILL)
                await _until(lambda: _exited(pid) and recorder.restarts == 1)
                later = [await client.post(hop_url(tap), headers=h, json=b)
                         for h, b in map(_tools_list, range(2, 12))]
                dead = await client.get(_admin(tap, "/readyz"))
                release.set()
                await _until(lambda: recorder.pid not in (None, pid) and not recorder.problems())
                again = await client.get(_admin(tap, "/readyz"))
                h12, b12 = _tools_list(12)
                last = await client.post(hop_url(tap), headers=h12, json=b12)
        assert [a.status_code for a in (first, *later, last)] == [200] * 12
        assert dead.status_code == 503
        assert dead.json()["problems"] == [
            "the recording process exited (code -9); restarting it"]
        assert again.status_code == 200
        assert len(recorder.bundle_dirs) == 2
        kept = [r for bundle in recorder.bundle_dirs
                for r in read_bundle(bundle, lenient=True).records]
        recorded = sum(r.get("kind") == "exchange" for r in kept)
        gaps = [r for r in kept if r.get("kind") == "gap"]
        stated = sum(g["lost"] for g in gaps)
        assert recorded + stated == 12  # every answered exchange, one way or the other
        assert stated == recorder.lost
        assert 10 <= stated <= 11  # the ten sent while none ran; the first if not yet written
        assert gaps and all(g["reason"].startswith("the recording process died; captures from ")
                            for g in gaps)


@pytest.mark.parametrize("proxy_process", ["process"], indirect=True)
async def test_recording_process_closes_the_bundle_when_the_proxy_is_killed(
    proxy_process: tuple[subprocess.Popen[bytes], str, Path, Lines],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """SIGKILL of the proxy: its recording process writes what it was handed and closes the
    bundle as ended abruptly (nothing was in flight here)."""
    proc, url, evidence, stderr = proxy_process
    (recording_pid,) = (
        int(pid)
        for task in Path(f"/proc/{proc.pid}/task").iterdir()
        for pid in (task / "children").read_text().split()
        if "spawn_main" in Path(f"/proc/{pid}/cmdline").read_text()
    )
    async with httpx.AsyncClient(timeout=_TIMEOUT) as client:
        answers = [
            await client.post(url, headers=h, json=b) for h, b in map(_tools_list, (1, 2, 3))
        ]
    (bundle,) = [p for p in evidence.iterdir() if p.is_dir()]
    await _until(lambda: len(read_bundle(bundle, lenient=True).records) == 3)
    proc.kill()
    proc.wait(timeout=_TIMEOUT)
    await _until(lambda: _exited(recording_pid))
    log = stderr.join()

    assert [a.status_code for a in answers] == [200] * 3
    assert "Traceback" not in log
    capsys.readouterr()
    # Closed by the recording process (no truncated segment), but not by a proxy that drained.
    assert main(["verify", str(evidence)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        "error: bundle ended abruptly (forwarder ended abruptly): 0 exchange(s) in flight "
        "were never recorded", "FAILED: 1 problem"]
    assert [r["rpcId"] for r in read_bundle(bundle).records] == [1, 2, 3]


async def test_a_dead_recording_process_is_replaced_and_the_gap_is_counted(
    tmp_path: Path, origin_base: str
) -> None:
    """SIGKILL the recording process: traffic goes on, a new one starts (a new bundle), and
    every exchange is either recorded or counted in a gap record with its time span."""
    opts = tap_options(tmp_path, upstream=origin_base,
                       recording=RecordingOptions(mode="process"))
    sent = 0
    async with running_tap(opts) as tap, httpx.AsyncClient(timeout=_TIMEOUT) as client:
        recorder = tap.recorder
        assert isinstance(recorder, ProcessRecorder)

        async def call() -> None:
            nonlocal sent
            headers, body = _tools_list(sent + 1)
            answer = await client.post(hop_url(tap), headers=headers, json=body)
            assert answer.status_code == 200  # forwarding never waits for recording
            sent += 1

        for _ in range(3):
            await call()
        first_pid = recorder.pid
        assert first_pid is not None
        os.kill(first_pid, signal.SIGKILL)
        await _until(lambda: recorder.restarts == 1)
        for _ in range(5):  # while no recording process runs (or just after one started)
            await call()
        await _until(lambda: recorder.pid != first_pid and recorder._transport is not None)
        for _ in range(2):
            await call()
        bundles = list(recorder.bundle_dirs)
    assert len(bundles) == 2
    recs = [r for b in bundles for r in read_bundle(b, lenient=True).records]
    recorded = [r for r in recs if r["kind"] == "exchange"]
    gaps = [r for r in recs if r["kind"] == "gap"]
    assert gaps and all("captures from " in g["reason"] for g in gaps)
    assert len(recorded) + sum(g["lost"] for g in gaps) == sent  # none unaccounted for
    assert all(g in read_bundle(bundles[1], lenient=True).records for g in gaps)
