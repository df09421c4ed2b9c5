"""Tests of ``mcp_tap.replay`` and the ``replay`` command.

The evidence is recorded by the real proxy (``taps.running_tap``) in front of the real SDK
server (``peers.run_origin``), driven by raw modern requests and by the real SDK client in
the legacy era. It is replayed against the same server (nothing changes) and against a
"changed" candidate: a small aiohttp server in front of the same SDK server that lists one
tool less, upper-cases ``echo`` and answers a header mismatch with another error code.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import orjson
import pytest
from aiohttp import web
from peers import (
    free_port,
    modern_meta,
    raw_modern_request,
    run_origin,
    sdk_call_tool,
)
from taps import exchanges, hop_url, running_tap, tap_options

from mcp_tap.cli import main
from mcp_tap.core.headers import HeaderMap
from mcp_tap.errors import InputError
from mcp_tap.replay import (
    Answer,
    Case,
    ReplayOptions,
    Skipped,
    bundle_records,
    compare,
    differences,
    fresh_id,
    iter_replay,
    normalise,
    parse_ignore,
    recorded_answer,
    replay,
    replay_headers,
    select_cases,
)

SECRET = "s3cr3t-recorded-token"


# --- the peers ----------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def _tapped(origin: str, evidence: Path) -> AsyncIterator[str]:
    async with running_tap(tap_options(evidence, upstream=origin.removesuffix("/mcp"))) as tap:
        yield hop_url(tap)
        records = exchanges(tap)
    assert records


async def _record(origin: str, evidence: Path) -> None:
    """Drive modern raw requests and a legacy SDK client through the tap."""
    async with _tapped(origin, evidence) as url, httpx.AsyncClient(timeout=30) as http:
        headers, body = raw_modern_request("tools/list", request_id=1)
        headers["Authorization"] = f"Bearer {SECRET}"
        assert (await http.post(url, headers=headers, json=body)).status_code == 200
        headers, body = raw_modern_request(
            "tools/call", {"name": "echo", "arguments": {"text": "hello"}}, request_id="two")
        assert (await http.post(url, headers=headers, json=body)).status_code == 200
        headers, body = raw_modern_request(
            "tools/call", {"name": "slow_count", "arguments": {"n": 3}}, request_id=3,
            meta=modern_meta(progress_token="p3"))
        answer = await http.post(url, headers=headers, json=body)
        assert answer.headers["content-type"].startswith("text/event-stream")
        headers, body = raw_modern_request(
            "tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}, request_id=4)
        headers["Mcp-Name"] = "echo"  # a header mismatch: the server owes 400 / -32020
        assert (await http.post(url, headers=headers, json=body)).status_code == 400
        headers, body = raw_modern_request("notifications/roots/list_changed", request_id=None)
        assert (await http.post(url, headers=headers, json=body)).status_code == 202
        # The legacy era with the real SDK client: initialize, initialized, list, call.
        result = await sdk_call_tool(url, "legacy", "echo", {"text": "legacy hello"})
        assert result["content"][0]["text"] == "legacy hello"


@pytest.fixture(scope="module")
def origin() -> Iterator[str]:
    """The real SDK server (the demo origin), both eras on one endpoint."""
    with run_origin() as url:
        yield url


@pytest.fixture(scope="module")
def evidence(origin: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An evidence directory recorded by the real tap in front of the real SDK server."""
    path = tmp_path_factory.mktemp("evidence")
    asyncio.run(_record(origin, path))
    return path


def _records(evidence: Path) -> list[dict[str, Any]]:
    from mcp_tap.evidence import find_bundles, read_bundle

    return [r for b in find_bundles(evidence) for r in read_bundle(b).records]


class Candidate:
    """A changed candidate: the SDK server behind an aiohttp front that alters some answers.

    ``tools/list`` loses its last tool, ``echo`` answers in upper case and a -32020 error
    becomes -32602. Every request it receives is kept in ``seen`` (lower-cased headers and body).
    """

    def __init__(self, origin: str, *, change: bool = True) -> None:
        """Front ``origin``; ``change=False`` forwards everything untouched."""
        self.origin = origin
        self.change = change
        self.seen: list[tuple[dict[str, str], Any]] = []
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @staticmethod
    def _alter(message: Any, echo: bool) -> Any:
        if not isinstance(message, dict):
            return message
        result = message.get("result")
        if isinstance(result, dict) and isinstance(result.get("tools"), list):
            result["tools"] = result["tools"][:-1]
        if isinstance(result, dict) and isinstance(result.get("structuredContent"), dict):
            content = result.get("content") or []
            if content and isinstance(content[0].get("text"), str) and echo:
                content[0]["text"] = content[0]["text"].upper()
                result["structuredContent"]["result"] = content[0]["text"]
        error = message.get("error")
        if isinstance(error, dict) and error.get("code") == -32020:
            error["code"] = -32602
        return message

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body = orjson.loads(raw) if raw else None
        self.seen.append(({k.lower(): v for k, v in request.headers.items()}, body))
        params = body.get("params") if isinstance(body, dict) else None
        echo = isinstance(params, dict) and params.get("name") == "echo"
        headers = {k: v for k, v in request.headers.items()
                   if k.lower() not in ("host", "content-length")}
        async with aiohttp.ClientSession() as session, session.request(
            request.method, self.origin, headers=headers, data=raw
        ) as upstream:
            data = await upstream.read()
            ctype = upstream.headers.get("Content-Type", "")
            out_headers = {k: v for k, v in upstream.headers.items()
                           if k.lower() not in ("content-length", "transfer-encoding",
                                                "content-encoding", "date", "server")}
            if self.change and ctype.startswith("application/json") and data:
                data = orjson.dumps(self._alter(orjson.loads(data), echo))
            elif self.change and ctype.startswith("text/event-stream"):
                lines = []
                for line in data.decode().split("\n"):
                    if line.startswith("data: ") and line[6:].strip():
                        altered = self._alter(orjson.loads(line[6:]), echo)
                        line = "data: " + orjson.dumps(altered).decode()
                    lines.append(line)
                data = "\n".join(lines).encode()
            return web.Response(status=upstream.status, body=data, headers=out_headers)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._main())

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        app = web.Application()
        app.router.add_route("*", "/mcp", self._handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", self.port).start()
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()

    def __enter__(self) -> Candidate:
        self._thread.start()
        assert self._ready.wait(15), "the candidate did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(15)
        self._loop.close()


class Faltering(Candidate):
    """The unchanged SDK server behind a front that answers ``answers`` requests, then hangs
    up on every later one without a word (the connection closed before any answer)."""

    def __init__(self, origin: str, answers: int) -> None:
        """Front ``origin``, forwarding the first ``answers`` requests only."""
        super().__init__(origin, change=False)
        self.answers = answers

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if len(self.seen) >= self.answers:
            await request.read()
            assert request.transport is not None
            request.transport.close()
            return web.Response()  # never sent: the connection is gone
        return await super()._handle(request)


class Trickling(Candidate):
    """A candidate that answers every request with an SSE stream that never ends: a comment
    line every 50 ms, each within any read timeout, never the response."""

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        answer = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await answer.prepare(request)
        while True:
            await answer.write(b": still thinking\n\n")
            await asyncio.sleep(0.05)


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run ``mcp-tap`` and return (exit code, stdout, stderr)."""
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def replay_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    """Run ``mcp-tap replay ... --json`` and return the exit code and the report."""
    code, out, err = run_cli(["replay", *argv, "--json"], capsys)
    assert err == ""
    report: dict[str, Any] = orjson.loads(out)
    return code, report


def by_method(report: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Group a JSON report's exchanges by ``(era) method`` label."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for entry in report["exchanges"]:
        groups.setdefault(f"{entry['era']} {entry['method']}", []).append(entry)
    return groups


# --- pure units ----------------------------------------------------------------------------


class TestFreshId:
    """fresh_id keeps the JSON type of the original id."""

    def test_types(self) -> None:
        """An int id gets an int, a string id a string, anything else is kept."""
        assert isinstance(fresh_id(1, 5), int) and fresh_id(1, 5) != 1
        assert isinstance(fresh_id("a", 5), str) and fresh_id("a", 5) != "a"
        assert fresh_id(True, 5) is True
        assert fresh_id(None, 5) is None
        assert fresh_id(1.5, 5) == 1.5


class TestParseOptions:
    """Ignore paths are parsed strictly."""

    def test_ignore(self) -> None:
        """Dotted paths with an optional $ prefix, [] wildcards and [n] indices."""
        assert parse_ignore("result.structuredContent.time") == (
            "result", "structuredContent", "time")
        assert parse_ignore("$.result.tools[].title") == ("result", "tools", "*", "title")
        assert parse_ignore("result.content[0].text") == ("result", "content", "0", "text")
        with pytest.raises(InputError):
            parse_ignore("$")


class TestNormalise:
    """normalise drops ids, _meta timestamps and the ignored paths."""

    def test_volatile_fields(self) -> None:
        """The top-level id and timestamp-like _meta keys go; other _meta keys stay."""
        message = {"jsonrpc": "2.0", "id": 7, "result": {
            "_meta": {"io.example/timestamp": 1, "createdAt": "x", "served": "2024-01-01T00:00",
                      "io.modelcontextprotocol/serverInfo": {"name": "s"}},
            "time": "kept outside _meta"}}
        assert normalise(message) == {"jsonrpc": "2.0", "result": {
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "s"}},
            "time": "kept outside _meta"}}

    def test_ignore_paths(self) -> None:
        """Ignored paths are removed, with wildcards over list elements."""
        message = {"result": {"items": [{"a": 1, "t": 2}, {"a": 3, "t": 4}], "t": 5}}
        ignore = [parse_ignore("result.items[].t"), parse_ignore("result.t")]
        assert normalise(message, ignore) == {"result": {"items": [{"a": 1}, {"a": 3}]}}

    def test_differences(self) -> None:
        """differences names the paths that were removed, added or changed."""
        found = differences({"tools": [{"name": "a"}, {"name": "b"}], "x": 1},
                            {"tools": [{"name": "a"}], "x": 1.0, "y": True})
        assert found == ["tools[1]: removed (was {\"name\":\"b\"})", "x: 1 -> 1.0", "y: added true"]


def _answer(status: int, message: Any, *, sse: list[Any] | None = None) -> Answer:
    if sse is not None:
        from mcp_tap.core.sse import SSEEvent

        events = tuple(SSEEvent(orjson.dumps(m).decode()) for m in sse)
        return Answer(status, HeaderMap.of({"Content-Type": "text/event-stream"}),
                      b"x", tuple(sse), events, 1)
    body = b"" if message is None else orjson.dumps(message)
    return Answer(status, HeaderMap.of({"Content-Type": "application/json"}), body,
                  () if message is None else (message,), None, len(body))


def _case(body: dict[str, Any], recorded: Answer, kind: str = "request") -> Case:
    headers, _ = raw_modern_request(str(body["method"]), body.get("params"))
    return Case("x1", "tap", "modern", str(body["method"]), kind, body,
                HeaderMap.of(headers), None, recorded)


class TestCompare:
    """compare reports status, outcome, error code, payload, notifications and findings."""

    def request(self, request_id: Any = 1) -> dict[str, Any]:
        """A modern tools/list request body."""
        _, body = raw_modern_request("tools/list", request_id=request_id)
        return body

    def result(self, request_id: Any, tools: list[str]) -> dict[str, Any]:
        """A modern tools/list response listing ``tools``."""
        return {"jsonrpc": "2.0", "id": request_id, "result": {
            "resultType": "complete", "ttlMs": 0, "cacheScope": "private", "tools": [
                {"name": n, "description": f"Tool {n}.", "inputSchema": {"type": "object"}}
                for n in tools]}}

    def test_same(self) -> None:
        """Only the id differs: no change."""
        case = _case(self.request(1), _answer(200, self.result(1, ["a"])))
        sent = self.request(99)
        changes, notes = compare(case, case.headers, sent, _answer(200, self.result(99, ["a"])))
        assert (changes, notes) == ([], [])

    def test_payload(self) -> None:
        """A tool less is a payload change naming the path."""
        case = _case(self.request(1), _answer(200, self.result(1, ["a", "b"])))
        changes, _ = compare(case, case.headers, self.request(9),
                             _answer(200, self.result(9, ["a"])))
        assert [c.what for c in changes] == ["payload"]
        assert changes[0].paths[0].startswith("result.tools[1]: removed")

    def test_error_code_and_status(self) -> None:
        """Status, error code and the findings the core derives from them all count."""
        err = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "bad"}}
        case = _case(self.request(1), _answer(200, self.result(1, ["a"])))
        changes, _ = compare(case, case.headers, self.request(1), _answer(400, err))
        assert [c.what for c in changes] == ["status", "outcome"]
        case = _case(self.request(1), _answer(400, err))
        other = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "other"}}
        changes, notes = compare(case, case.headers, self.request(1), _answer(404, other))
        assert [c.what for c in changes] == ["status", "error.code"]
        assert notes == ["error message 'bad' -> 'other'"]

    def test_findings(self) -> None:
        """An answer with the wrong id type gains response.id: a findings change."""
        case = _case(self.request(1), _answer(200, self.result(1, ["a"])))
        changes, _ = compare(case, case.headers, self.request(1),
                             _answer(200, self.result("1", ["a"])))
        assert [(c.what, c.replayed) for c in changes] == [("findings", ["response.id"])]

    def test_sse_notifications(self) -> None:
        """For a stream the notification methods and the final response are compared."""
        progress = {"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": "p", "progress": 1}}
        final = self.result(1, ["a"])
        request = self.request(1)
        request["params"]["_meta"]["progressToken"] = "p"  # the progress relates to it
        case = _case(request, _answer(200, None, sse=[progress, final]))
        changes, notes = compare(case, case.headers, request,
                                 _answer(200, self.result(1, ["a"])))
        assert [c.what for c in changes] == ["notifications"]
        assert notes == ["transport SSE -> JSON"]

    def test_notification(self) -> None:
        """A notification is compared on status and body emptiness."""
        _, body = raw_modern_request("notifications/roots/list_changed", request_id=None)
        empty = Answer(202, HeaderMap(), b"", (), None, 0)
        case = _case(body, empty, kind="notification")
        assert compare(case, case.headers, body, empty) == ([], [])
        changes, _ = compare(case, case.headers, body, Answer(200, HeaderMap(), b"{}", (), None, 2))
        assert [c.what for c in changes] == ["status", "body", "findings"]


class TestRecordedAnswer:
    """recorded_answer rebuilds the origin's answer and says whether it is whole."""

    def test_stream_left_after_its_response_is_replayable(self) -> None:
        """A stream the client left once the response had arrived is not truncated."""
        response = {"jsonrpc": "2.0", "id": 7, "result": {"content": []}}
        record = {"origin": {"status": 200, "headers": [["Content-Type", "text/event-stream"]],
                             "sse": [{"at": 0.1, "id": None, "event": None, "data": response}],
                             "truncated": True, "ended": False}}
        answer = recorded_answer(record)
        assert answer is not None and not answer.truncated and answer.messages == (response,)
        record["origin"]["ended"] = True  # read to its end yet truncated: the capture cap
        answer = recorded_answer(record)
        assert answer is not None and answer.truncated


class TestSelectCases:
    """select_cases keeps replayable POSTs and says why others are skipped."""

    def test_skips(self, evidence: Path) -> None:
        """Non-POSTs and truncated bodies are skipped with a reason; the rest become cases."""
        records = _records(evidence)
        first = next(r for r in records if r["kind"] == "exchange")
        truncated = {**first, "exchangeId": "cut",
                     "ingress": {**first["ingress"], "truncated": True}}
        get = {**first, "exchangeId": "get", "ingress": {**first["ingress"], "httpMethod": "GET"}}
        answer = {**first, "exchangeId": "answer", "messageKind": "response"}
        pair = {"kind": "hop-comparison", "exchangeIds": [first["exchangeId"], "inner"]}
        cases, skipped = select_cases([first, truncated, get, answer, pair])
        reasons = {s.exchange_id: s.reason for s in skipped}
        assert cases == []
        assert reasons == {
            first["exchangeId"]: "outer hop of a two-hop pair (replayed at the inner hop)",
            "cut": "request body truncated in the evidence",
            "get": "GET request (only POSTs are replayed)",
            "answer": "a client's answer to a server request (the request it answered is gone)",
        }

    def test_hop_filter(self, evidence: Path) -> None:
        """--hop keeps one hop's exchanges and names the hop of the others."""
        cases, skipped = select_cases(_records(evidence), hop="elsewhere")
        assert cases == [] and {s.reason for s in skipped} == {"recorded at hop tap"}

    def test_credentials_not_replayed(self, evidence: Path) -> None:
        """The redacted Authorization is not among the re-sent headers."""
        cases, _ = select_cases(_records(evidence))
        listed = cases[0]
        assert listed.headers.get("Authorization") == "Bearer [REDACTED]"
        names = [n.lower() for n, _ in replay_headers(listed.headers)]
        assert names == ["accept", "content-type", "mcp-protocol-version", "mcp-method"]


# --- end to end ----------------------------------------------------------------------------


class TestReplayCommand:
    """`mcp-tap replay` against the real SDK server, a changed candidate and nothing."""

    def test_same_server(self, evidence: Path, origin: str,
                         capsys: pytest.CaptureFixture[str]) -> None:
        """Replayed against the server it was recorded from, nothing changes (exit 0)."""
        code, report = replay_json([str(evidence), "--target", origin], capsys)
        assert (code, report["ok"], report["changed"]) == (0, True, 0)
        groups = by_method(report)
        assert {"modern tools/list", "modern tools/call", "modern notifications/roots/list_changed",
                "legacy initialize", "legacy notifications/initialized", "legacy tools/list",
                "legacy tools/call"} <= set(groups)
        assert all(e["verdict"] == "same" for e in report["exchanges"])
        statuses = sorted(e["status"]["replayed"] for e in groups["modern tools/call"])
        assert statuses == [200, 200, 400]
        stream = [e for e in groups["modern tools/call"] if e["notes"]]
        assert stream == []
        # The legacy SDK client's GET stream and DELETE are not replayed.
        assert {s["reason"] for s in report["skippedExchanges"]} <= {
            "GET request (only POSTs are replayed)", "DELETE request (only POSTs are replayed)"}

    def test_text_output(self, evidence: Path, origin: str,
                         capsys: pytest.CaptureFixture[str]) -> None:
        """The human report has one line per exchange and a summary line."""
        code, out, err = run_cli(["replay", str(evidence), "--target", origin], capsys)
        lines = out.splitlines()
        assert (code, err) == (0, "")
        assert lines[-1].startswith("replay: ") and " 0 changed" in lines[-1]
        assert any(line.startswith("same    ") and "tools/list (modern) HTTP 200" in line
                   for line in lines)

    def test_changed_server(self, evidence: Path, origin: str,
                            capsys: pytest.CaptureFixture[str]) -> None:
        """The changed candidate is caught: exactly the altered exchanges, with what changed."""
        with Candidate(origin) as candidate:
            code, report = replay_json([str(evidence), "--target", candidate.url], capsys)
        assert (code, report["ok"]) == (1, False)
        changed = {(e["era"], e["method"], e["status"]["recorded"]):
                   [c["what"] for c in e["changes"]]
                   for e in report["exchanges"] if e["verdict"] == "changed"}
        assert changed == {
            ("modern", "tools/list", 200): ["payload"],
            ("modern", "tools/call", 200): ["payload"],  # echo, upper-cased
            ("modern", "tools/call", 400): ["error.code", "findings"],
            ("legacy", "tools/list", 200): ["payload"],
            ("legacy", "tools/call", 200): ["payload"],
        }
        assert report["changed"] == 5
        entries = [e for e in report["exchanges"] if e["verdict"] == "changed"]
        listing = next(e for e in entries if e["method"] == "tools/list")
        assert listing["changes"][0]["message"].startswith(
            'result.tools[3]: removed (was {"name":"slow_count",')
        echo = next(e for e in entries if e["method"] == "tools/call"
                    and e["status"]["recorded"] == 200)
        assert "result.content[0].text: 'hello' -> 'HELLO'" in echo["changes"][0]["paths"]
        mismatch = next(e for e in entries if e["status"]["recorded"] == 400)
        assert mismatch["changes"][0]["message"] == "error code -32020 -> -32602"
        assert mismatch["changes"][1]["replayed"] == ["response.header-mismatch-unanswered"]
        # The SSE stream (slow_count) and the notification did not change.
        same = [e for e in report["exchanges"] if e["verdict"] == "same"]
        assert any(e["method"] == "notifications/roots/list_changed" for e in same)

    def test_changed_text_output(self, evidence: Path, origin: str,
                                 capsys: pytest.CaptureFixture[str]) -> None:
        """The human report shows each changed exchange with its changes (exit 1)."""
        with Candidate(origin) as candidate:
            code, out, _ = run_cli(["replay", str(evidence), "--target", candidate.url], capsys)
        assert code == 1
        assert "        error.code: error code -32020 -> -32602" in out.splitlines()
        assert out.splitlines()[-1].startswith("replay: ") and " 5 changed" in out

    def test_ignore_paths(self, evidence: Path, origin: str,
                          capsys: pytest.CaptureFixture[str]) -> None:
        """Ignoring the echoed text and the tool list leaves only the error-code change."""
        with Candidate(origin) as candidate:
            code, report = replay_json(
                [str(evidence), "--target", candidate.url, "--ignore", "result.content[].text",
                 "--ignore", "$.result.structuredContent", "--ignore", "result.tools"], capsys)
        assert code == 1
        changed = [(e["method"], e["status"]["recorded"])
                   for e in report["exchanges"] if e["verdict"] == "changed"]
        assert changed == [("tools/call", 400)]

    def test_fresh_ids_and_credentials(self, evidence: Path, origin: str,
                                       capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
        """Ids are fresh (same JSON type) and only the injected credentials are sent."""
        recorded_ids = {r["exchangeId"]: r["rpcId"] for r in _records(evidence)
                        if r["kind"] == "exchange"}
        monkeypatch.setenv("REPLAY_TOKEN", "Bearer fresh-token")
        with Candidate(origin, change=False) as candidate:
            code, report = replay_json(
                [str(evidence), "--target", candidate.url, "--header-env",
                 "Authorization=REPLAY_TOKEN", "--header", "X-Replay: yes"], capsys)
            seen = list(candidate.seen)
        assert code == 0 and report["changed"] == 0
        posts = [(h, b) for h, b in seen if isinstance(b, dict)]
        assert posts and all(h.get("authorization") == "Bearer fresh-token" for h, _ in posts)
        assert all(h.get("x-replay") == "yes" for h, _ in posts)
        assert not any(SECRET in orjson.dumps(h).decode() or "[REDACTED]" in h.get(
            "authorization", "") for h, _ in seen)
        sent_ids = [b["id"] for _, b in posts if "id" in b]
        originals = [i for i in recorded_ids.values() if i is not None]
        assert not set(map(str, sent_ids)) & set(map(str, originals))
        assert {type(i) for i in sent_ids} == {int, str}
        # The legacy exchanges ran in a session the replay opened on the candidate.
        sessions = {h.get("mcp-session-id") for h, b in posts
                    if b.get("method") in ("tools/list", "tools/call")
                    and "_meta" not in (b.get("params") or {})}
        assert len(sessions) == 1 and None not in sessions

    def test_text_is_printed_as_it_goes(self, evidence: Path, origin: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
        """A target that stops answering midway leaves the lines already replayed on stdout."""
        with Faltering(origin, answers=2) as candidate:
            code, out, err = run_cli(["replay", str(evidence), "--target", candidate.url],
                                     capsys)
        lines = out.splitlines()
        assert code == 2 and err.startswith("mcp-tap: upstream error: ")
        assert err.count("\n") == 1
        assert [line.split()[0] for line in lines] == ["same", "same"], out
        assert lines[0].split()[2] == "tools/list" and not any(
            line.startswith("replay: ") for line in lines)

    def test_unreachable(self, evidence: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """An unreachable target is one line on stderr and exit 2."""
        url = f"http://127.0.0.1:{free_port()}/mcp"
        code, out, err = run_cli(["replay", str(evidence), "--target", url], capsys)
        assert (code, out) == (2, "")
        assert err.startswith("mcp-tap: upstream error: ") and "cannot connect" in err
        assert err.count("\n") == 1

    def test_timeout_bounds_a_streaming_answer(self, evidence: Path, origin: str) -> None:
        """--timeout ends an answer that keeps streaming: one upstream-error line, exit 2.

        Run as a child process, so a replay that never ends fails this test (its
        subprocess timeout) instead of hanging the suite.
        """
        with Trickling(origin) as candidate:
            done = subprocess.run(
                [sys.executable, "-m", "mcp_tap", "replay", str(evidence), "--target",
                 candidate.url, "--timeout", "1"],
                env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
                capture_output=True, text=True, timeout=120, check=False)
        assert (done.returncode, done.stderr.count("\n")) == (2, 1), done.stderr
        assert done.stderr.startswith("mcp-tap: upstream error: ")
        assert "still streaming after --timeout 1 s" in done.stderr

    def test_bad_input(self, tmp_path: Path, evidence: Path,
                       capsys: pytest.CaptureFixture[str]) -> None:
        """A missing bundle, a bad header or a non-HTTP target is exit 2 with one line."""
        for argv in (
            [str(tmp_path / "none"), "--target", "http://127.0.0.1:9/mcp"],
            [str(evidence), "--target", "http://127.0.0.1:9/mcp", "--header", "nocolon"],
            [str(evidence), "--target", "ftp://x/mcp"],
        ):
            code, out, err = run_cli(["replay", *argv], capsys)
            assert (code, out, err.count("\n")) == (2, "", 1)
            assert err.startswith("mcp-tap: error: ")


class TestReplayApi:
    """replay() can be called directly with an httpx client of the caller's choosing."""

    def test_client_injection(self, evidence: Path, origin: str) -> None:
        """A caller-provided httpx.Client is used and left open."""
        with httpx.Client(timeout=30) as client:
            report = replay(_records(evidence), ReplayOptions(origin), client=client)
            assert report.ok and report.results
            assert not client.is_closed


def _write_bundle(path: Path, templates: list[dict[str, Any]], exchanges: int) -> Path:
    """A bundle of ``exchanges`` copies of ``templates`` written by the real EvidenceWriter.

    Segments rotate at 64 KiB, below the reader's 1 MiB read size: both bundles then read
    in full-size pieces, so a peak that still grew would be records kept, not a read buffer
    still growing toward its cap.
    """
    from mcp_tap.evidence import EvidenceWriter

    with EvidenceWriter(path, queue_size=exchanges + 16,
                        max_segment_bytes=64 * 1024) as writer:
        for n in range(exchanges):
            record = dict(templates[n % len(templates)])
            record["exchangeId"] = f"stream-{n:06d}"
            assert writer.submit(record)
    assert writer.lost_total == 0
    return path


def _peak(work: Callable[[], object]) -> tuple[int, object]:
    """The tracemalloc peak (bytes) while ``work`` runs, and what it returned."""
    import gc
    import tracemalloc

    gc.collect()
    tracemalloc.start()
    try:
        value = work()
        return tracemalloc.get_traced_memory()[1], value
    finally:
        tracemalloc.stop()


@pytest.fixture(scope="module")
def bundles(evidence: Path, tmp_path_factory: pytest.TempPathFactory
            ) -> tuple[Path, Path]:
    """Two bundles of the recorded modern calls, the second ten times the first."""
    templates = [
        {k: v for k, v in r.items() if k not in ("seq", "prev", "digest")}
        for r in _records(evidence)
        if r.get("kind") == "exchange" and r.get("era") == "modern"
        and r.get("method") in ("tools/list", "tools/call")
        and (r.get("origin") or {}).get("status") == 200]
    assert len(templates) >= 3
    root = tmp_path_factory.mktemp("streaming")
    return (_write_bundle(root / "small", templates, 30),
            _write_bundle(root / "large", templates, 300))


def _flat(small_peak: int, large_peak: int) -> bool:
    """Whether a tenfold bundle peaked within 25% (+128 KiB) of the small one."""
    return large_peak <= small_peak * 1.25 + 128 * 1024


class TestStreaming:
    """Replay reads the evidence one record at a time: memory is flat in the bundle's size."""

    @staticmethod
    def _replay(bundle: Path, origin: str) -> Callable[[], object]:
        def work() -> object:
            counts = {"same": 0, "changed": 0, "skipped": 0}
            options = ReplayOptions(target=origin, ignore=(("result", "structuredContent"),))
            for item in iter_replay(bundle_records([bundle]), options):
                key = "skipped" if isinstance(item, Skipped) else item.verdict
                counts[key] += 1  # counted, not kept: the caller decides what to hold
            return counts
        return work

    def test_memory_is_flat(self, bundles: tuple[Path, Path], origin: str) -> None:
        """Replaying ten times the exchanges peaks within the flat bound of the small run."""
        small, large = bundles
        self._replay(small, origin)()  # warm-up: imports, caches and the connection pool
        small_peak, small_counts = _peak(self._replay(small, origin))
        large_peak, large_counts = _peak(self._replay(large, origin))
        assert small_counts == {"same": 30, "changed": 0, "skipped": 0}
        assert large_counts == {"same": 300, "changed": 0, "skipped": 0}
        assert _flat(small_peak, large_peak), (small_peak, large_peak)

    def test_holding_records_would_show(self, bundles: tuple[Path, Path]) -> None:
        """The same bound fails when the records are held (the old whole read): it can fail."""
        small, large = bundles
        small_peak, _ = _peak(lambda: list(bundle_records([small])()))
        large_peak, _ = _peak(lambda: list(bundle_records([large])()))
        assert not _flat(small_peak, large_peak), (small_peak, large_peak)
