"""``mcp-tap serve``: the real SDK client gets from a capture what it got live.

The capture is real traffic of the real ``mcp==2.3.0`` client (both eras) through the tap
in front of the real SDK demo origin. The same client is then pointed at the mock and
must get the same results, call by call; the mock's own answers, seen through a tap, give
no finding.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from captures import DEFAULT_CALLS, Recorded, client_calls, record
from cli_runs import refused
from mcp.shared.exceptions import MCPError
from peers import free_port, raw_modern_request, run_origin, sdk_call_tool
from taps import exchanges, hop_url, running_tap, tap_options

from mcp_tap.evidence import read_bundle
from mcp_tap.mock import AnswerBook, MockServer
from mcp_tap.mock.book import recorded

_REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """The live run: SDK calls in both eras through a tap in front of the SDK origin."""
    root = tmp_path_factory.mktemp("live")

    async def go() -> Recorded:
        with run_origin() as url:
            return await record(root / "ev", url.removesuffix("/mcp"))

    return asyncio.run(go())


@pytest.fixture
async def mock(live: Recorded, request: pytest.FixtureRequest) -> AsyncIterator[MockServer]:
    """A mock serving the live capture (pacing from the test's parameter, else recorded)."""
    pacing = getattr(request, "param", "recorded")
    server = MockServer(AnswerBook.from_records(read_bundle(live.bundle).records),
                        pacing=pacing)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


class TestSameResults:
    """The SDK client against the mock gets exactly what it got live."""

    @pytest.mark.parametrize("mock", ["recorded", "none"], indirect=True)
    async def test_both_eras(self, live: Recorded, mock: MockServer) -> None:
        """Every call of both eras, tools/list, JSON and SSE answers alike."""
        served = []
        for era in ("modern", "legacy"):
            served += await client_calls(mock.url(), era, DEFAULT_CALLS)
        assert len(served) == len(live.live) == 10
        for got, want in zip(served, live.live, strict=True):
            assert got == want
        assert mock.counters.missed == 0
        assert mock.counters.sessions == 5  # one legacy initialize per legacy call

    async def test_the_mock_is_judged_as_the_origin_was(
            self, live: Recorded, mock: MockServer, tmp_path: Path) -> None:
        """Through a tap, the mock's answers give exactly the live run's findings.

        (One ``client.fallback-unproven``: the test tap allowlists no endpoint for legacy,
        and the SDK client's legacy ``initialize`` is judged for it, live and mocked alike.)
        """
        base = mock.url().removesuffix("/mcp")
        async with running_tap(tap_options(tmp_path, upstream=base)) as tap:
            for era in ("modern", "legacy"):
                await client_calls(hop_url(tap), era, DEFAULT_CALLS)
        seen = exchanges(tap)
        live_records = read_bundle(live.bundle).exchanges()
        assert len(seen) == len(live_records)

        def rules(records: list[dict[str, object]]) -> list[tuple[object, str]]:
            return sorted((r["method"], f["rule"]) for r in records
                          for f in r["findings"])  # type: ignore[attr-defined]

        assert rules(seen) == rules(live_records) == [("initialize", "client.fallback-unproven")]


def _mcp_error(exc: BaseException) -> MCPError:
    """The MCPError an SDK call raised (inside the exception groups of its task groups)."""
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    assert isinstance(exc, MCPError), repr(exc)
    return exc


class TestMisses:
    """A request nothing recorded gets a JSON-RPC error naming what was asked."""

    async def test_unrecorded_arguments(self, mock: MockServer) -> None:
        """Same tool, other arguments: -32602 naming the call and what was recorded."""
        with pytest.raises(BaseException) as caught:  # the SDK wraps it
            await sdk_call_tool(mock.url(), "modern", "add", {"a": 5, "b": 6})
        error = _mcp_error(caught.value)
        assert error.error.code == -32602
        assert error.error.message == ('mcp-tap serve: no recorded answer for tools/call add '
                                       '{"a":5,"b":6}; recorded: tools/call add {"a":1,"b":2}')

    async def test_unrecorded_method_modern_status(self, mock: MockServer) -> None:
        """A method the capture never saw: -32601 and HTTP 404, as 2026-07-28 maps it."""
        headers, body = raw_modern_request("prompts/list", request_id=7)
        async with httpx.AsyncClient() as client:
            answer = await client.post(mock.url(), json=body, headers=headers)
        assert answer.status_code == 404
        error = answer.json()["error"]
        assert answer.json()["id"] == 7 and error["code"] == -32601
        assert error["message"] == ("mcp-tap serve: the capture holds no prompts/list "
                                    "request; asked: prompts/list")

    async def test_sessions(self, mock: MockServer) -> None:
        """An unknown session is 404; DELETE ends a session; a notification is 202."""
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "other-client", "version": "9"}}}
        accept = {"Accept": "application/json, text/event-stream"}
        async with httpx.AsyncClient() as client:
            answer = await client.post(mock.url(), json=init, headers=accept)
            session = answer.headers["Mcp-Session-Id"]
            assert answer.status_code == 200 and session
            with_session = {**accept, "Mcp-Session-Id": session}
            note = await client.post(mock.url(), headers=with_session, json={
                "jsonrpc": "2.0", "method": "notifications/initialized"})
            assert (note.status_code, note.content) == (202, b"")
            assert (await client.delete(mock.url(), headers=with_session)).status_code == 200
            gone = await client.post(mock.url(), headers=with_session, json={
                "jsonrpc": "2.0", "id": 2, "method": "tools/list"})
            assert gone.status_code == 404
            assert (await client.get(mock.url(), headers=accept)).status_code == 405


class TestBook:
    """The answer book on its own."""

    def test_event_delays_come_from_the_record(self, live: Recorded) -> None:
        """Each SSE event's delay is its arrival minus the request's, as recorded."""
        record = next(r for r in read_bundle(live.bundle).exchanges()
                      if r["origin"].get("sse") and len(r["origin"]["sse"]) == 4)
        answer = recorded(record)
        assert answer is not None and answer.events is not None
        start = record["ingress"]["receivedAt"]
        assert [e.delay for e in answer.events] == [
            pytest.approx(e["at"] - start) for e in record["origin"]["sse"]]

    def test_repeated_asks_follow_the_recorded_order(self) -> None:
        """The n-th ask gets the n-th recorded answer, then the last repeats."""
        def exchange(value: int) -> dict[str, object]:
            return {"kind": "exchange", "era": "modern", "method": "tools/call",
                    "ingress": {"path": "/mcp", "body": {
                        "jsonrpc": "2.0", "id": value, "method": "tools/call",
                        "params": {"name": "n"}}},
                    "origin": {"status": 200, "truncated": False, "ended": True,
                               "contentType": "application/json",
                               "body": {"jsonrpc": "2.0", "id": value,
                                        "result": {"v": value}}}}
        book = AnswerBook.from_records([exchange(1), exchange(2)])
        ask = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "n"}}
        values = []
        for _ in range(3):
            found = book.lookup("modern", ask)
            assert not hasattr(found, "code")
            values.append(found.body["result"]["v"])  # type: ignore[union-attr]
        assert values == [1, 2, 2]


class TestHostileRequests:
    """Requests that once broke the mock: each gets one JSON-RPC answer, nothing logged."""

    async def test_big_integer_id_is_echoed_exactly(self, mock: MockServer,
                                                    caplog: pytest.LogCaptureFixture) -> None:
        """An id past 64 bits comes back as the same integer, not a float."""
        headers, body = raw_modern_request("tools/list", request_id=1)
        big = 2**70 + 1
        raw = json.dumps({**body, "id": big})
        async with httpx.AsyncClient() as client:
            answer = await client.post(mock.url(), content=raw, headers=headers)
        assert answer.status_code == 200
        parsed = json.loads(answer.text)  # the stdlib keeps big integers exact
        assert parsed["id"] == big and type(parsed["id"]) is int
        assert "tools" in parsed["result"]
        assert not [r for r in caplog.records if r.levelno >= 40]

    @pytest.mark.parametrize("depth", [300, 1000])
    async def test_deep_request_is_a_miss(self, mock: MockServer, depth: int,
                                          caplog: pytest.LogCaptureFixture) -> None:
        """Arguments nested past orjson's writing limit: a -32602/-32601 miss, not a 500."""
        headers, body = raw_modern_request("tools/call", {"name": "add", "arguments": {}},
                                           request_id=9)
        raw = json.dumps(body).replace('"arguments": {}', '"arguments": {"a": '
                                       + "[" * depth + "]" * depth + "}")
        async with httpx.AsyncClient() as client:
            answer = await client.post(mock.url(), content=raw, headers=headers)
        assert answer.status_code in (400, 404), answer.text
        error = answer.json()["error"]
        assert answer.json()["id"] == 9 and error["code"] in (-32602, -32601)
        assert error["message"].startswith("mcp-tap serve: ")
        assert not [r for r in caplog.records if r.levelno >= 40]


@contextlib.contextmanager
def _serving(bundle: Path) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """``mcp-tap serve BUNDLE`` as a process on a free loopback port (killed if the block
    leaves it running)."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(_REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcp_tap", "serve", str(bundle), "--listen",
         f"127.0.0.1:{port}", "--json", "--pacing", "none"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        yield proc, port
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


class TestCommand:
    """``mcp-tap serve`` as a process."""

    def test_serves_until_sigterm(self, live: Recorded) -> None:
        """The ready line names the URL; SIGTERM stops it with exit 0 and the counts."""
        with _serving(live.bundle) as (proc, port):
            assert proc.stdout is not None
            ready = json.loads(proc.stdout.readline())
            assert ready == {"event": "ready", "url": f"http://127.0.0.1:{port}/mcp",
                             "answers": 23, "pacing": "none"}
            result = asyncio.run(sdk_call_tool(ready["url"], "legacy", "add",
                                               {"a": 1, "b": 2}))
            assert result["structuredContent"] == {"result": 3}
            # Refused before any look-up, and counted as such: not JSON, a batch.
            json_headers = {"Content-Type": "application/json"}
            codes = [httpx.post(ready["url"], content=body, headers=json_headers).json()
                     ["error"]["code"] for body in (b"{not json", b"[]")]
            assert codes == [-32700, -32600]
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        stopped = json.loads(out.splitlines()[-1])
        assert stopped["event"] == "stopped" and stopped["answered"] == 3  # init, list, call
        # The two, and the SDK client's GET for a server stream (405: only POST is served).
        assert (stopped["refused"], stopped["missed"]) == (3, 0)
        assert err == ""


    def test_hostile_requests_to_the_process(self, live: Recorded) -> None:
        """The process as a user runs it: arguments nested deeper than any parser takes
        (100,000 levels) and at the edge of it, and ids past 64 bits; each gets one JSON-RPC
        answer, a big id comes back as the same integer, and nothing reaches stderr."""
        answers: list[tuple[int, Any, int | None]] = []
        with _serving(live.bundle) as (proc, _port):
            assert proc.stdout is not None
            url = json.loads(proc.stdout.readline())["url"]
            headers, body = raw_modern_request("tools/call", {"name": "add", "arguments": {}},
                                               request_id=9)
            with httpx.Client(timeout=30) as client:
                for depth in (1000, 100_000):
                    raw = json.dumps(body).replace('"arguments": {}', '"arguments": {"a": '
                                                   + "[" * depth + "]" * depth + "}")
                    answer = client.post(url, content=raw, headers=headers)
                    answers.append((answer.status_code, answer.json()["id"],
                                    answer.json()["error"]["code"]))
                list_headers, list_body = raw_modern_request("tools/list", request_id=1)
                for big in (2**70 + 1, -(2**64)):
                    answer = client.post(url, content=json.dumps({**list_body, "id": big}),
                                         headers=list_headers)
                    parsed = json.loads(answer.text)  # the stdlib keeps big integers exact
                    assert type(parsed["id"]) is int and "tools" in parsed["result"]
                    answers.append((answer.status_code, parsed["id"], None))
            proc.send_signal(signal.SIGTERM)
            _out, err = proc.communicate(timeout=30)
        assert answers == [(400, 9, -32602), (400, None, -32700),
                           (200, 2**70 + 1, None), (200, -(2**64), None)]
        assert proc.returncode == 0 and err == "", err


class TestBadInput:
    """Bad input to serve: one line, exit 2."""

    def test_bad_listen(self, live: Recorded, capsys: pytest.CaptureFixture[str]) -> None:
        """A listen address that is not HOST:PORT."""
        refused(["serve", str(live.bundle), "--listen", "nowhere"], capsys, "not HOST:PORT")

    def test_nothing_to_serve(self, tmp_path: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
        """A bundle without a whole recorded answer."""
        from releases import raw_bundle

        empty = raw_bundle(tmp_path / "e", [{"kind": "gap", "lost": 2, "reason": "r"}])
        refused(["serve", str(empty)], capsys, "holds no request with a whole recorded answer")

    def test_port_taken(self, live: Recorded, capsys: pytest.CaptureFixture[str]) -> None:
        """A port something else listens on is named."""
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            sock.listen()
            port = sock.getsockname()[1]
            refused(["serve", str(live.bundle), "--listen", f"127.0.0.1:{port}"], capsys,
                    f"cannot listen on 127.0.0.1:{port}")

    def test_bad_pacing(self, live: Recorded, capsys: pytest.CaptureFixture[str]) -> None:
        """Pacing is recorded or none."""
        refused(["serve", str(live.bundle), "--pacing", "fast"], capsys, "invalid choice")
