"""Tests for resumable legacy streams: the sans-IO tracker and the tap that uses it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web
from conftest import StartApp
from taps import exchanges, hop_url, running_tap, tap_options

from mcp_tap.core.eras import Era
from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.requests import RequestContext, check_request
from mcp_tap.core.responses import ResponseContext, check_sse_stream
from mcp_tap.core.resume import Parked, ResumeTracker, last_event_id, resumable
from mcp_tap.core.sse import SSEEvent
from mcp_tap.proxy.options import EraOptions

LEGACY = "2025-11-25"
CALL = {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "slow", "arguments": {}}}
RESULT = {"jsonrpc": "2.0", "id": 5, "result": {"content": []}}
CTX = ResponseContext(Era.LEGACY)
_TIMEOUT = 30
LEGACY_OK = EraOptions(legacy_allowed=True)  # the polling origin is a legacy endpoint


def legacy_verdict() -> Any:
    """The ladder's verdict on a legacy tools/call."""
    return check_request(HeaderMap(), CALL, RequestContext(Era.LEGACY, negotiated_version=LEGACY))


def parked(tracker: ResumeTracker, since: float = 0.0, event_id: str = "e1") -> None:
    """Park the legacy call's stream in session s1 under ``event_id``."""
    tracker.park(Parked("s1", event_id, legacy_verdict(), CTX, since, "origin"))


class TestResumeTracker:
    """ResumeTracker: park, resume, judge the continuation, end."""

    def test_closed_after_an_id_is_resumable(self) -> None:
        """A legacy stream closed after its priming event (no response) is resumable."""
        events = [SSEEvent("", id="e1", retry=10)]
        found, _ = check_sse_stream(legacy_verdict(), 200, events, CTX)
        assert resumable(legacy_verdict(), found) and last_event_id(events) == "e1"

    def test_resumed_with_the_response(self) -> None:
        """The GET that resumes the stream carries the response: nothing is reported."""
        tracker = ResumeTracker(60)
        parked(tracker)
        stream = tracker.resume("s1", "e1")
        assert stream is not None
        assert tracker.judge_resumed(stream, 200, [SSEEvent(json.dumps(RESULT), id="e2")], 1) == []
        assert len(tracker) == 0

    def test_wrong_session_or_id_resumes_nothing(self) -> None:
        """Correlation needs the same session and the same event id."""
        tracker = ResumeTracker(60)
        parked(tracker)
        assert tracker.resume("s2", "e1") is None and tracker.resume("s1", "e9") is None
        assert len(tracker) == 1

    def test_polled_again(self) -> None:
        """A continuation that closes again after an id is parked again, not reported."""
        tracker = ResumeTracker(60)
        parked(tracker)
        stream = tracker.resume("s1", "e1")
        assert stream is not None
        assert tracker.judge_resumed(stream, 200, [SSEEvent("", id="e2")], 1) == []
        again = tracker.resume("s1", "e2")
        assert again is not None and again.connections == 2

    def test_continuation_is_judged(self) -> None:
        """The resumed part is judged with the request's verdict: a wrong id is sse.id."""
        tracker = ResumeTracker(60)
        parked(tracker)
        stream = tracker.resume("s1", "e1")
        assert stream is not None
        wrong = {**RESULT, "id": 6}
        found = tracker.judge_resumed(stream, 200, [SSEEvent(json.dumps(wrong))], 1)
        assert [f.rule for f in found] == ["sse.id"]

    def test_session_end_reports_unterminated(self) -> None:
        """When the session ends, a parked stream ended without its answer (legacy: should)."""
        tracker = ResumeTracker(60)
        parked(tracker)
        (f,) = tracker.end_session("s1")
        assert (f.rule, f.code, str(f.strength)) == ("sse.unterminated", None, "should")
        assert "its session ended" in f.message
        assert tracker.end_session("s1") == []

    def test_idle_limit(self) -> None:
        """A stream not resumed within the idle limit is reported; a fresh one is not."""
        tracker = ResumeTracker(10)
        parked(tracker, since=0, event_id="old")
        parked(tracker, since=8, event_id="new")
        (f,) = tracker.expire(11)
        assert f.rule == "sse.unterminated" and "for 10 s" in f.message
        assert len(tracker) == 1

    def test_refused_resumption(self) -> None:
        """A resumption answered 404 (the session is gone) ends the stream."""
        tracker = ResumeTracker(60)
        parked(tracker)
        stream = tracker.resume("s1", "e1")
        assert stream is not None
        (f,) = tracker.judge_resumed(stream, 404, [], 1)
        assert f.rule == "sse.unterminated"

    def test_limit_must_be_positive(self) -> None:
        """A non-positive idle limit is a programming error."""
        with pytest.raises(ValueError):
            ResumeTracker(0)


# --- through the tap: a real polling origin ----------------------------------------------


def _polling_origin(resume: bool) -> web.Application:
    """A legacy origin that closes the call's connection after its priming event (polling).

    With ``resume`` the response is delivered on the GET resumed with Last-Event-ID.
    """
    async def post(request: web.Request) -> web.StreamResponse:
        message = await request.json()
        if message.get("method") == "initialize":
            return web.json_response(
                {"jsonrpc": "2.0", "id": message["id"], "result": {
                    "protocolVersion": LEGACY, "capabilities": {},
                    "serverInfo": {"name": "poller", "version": "1"}}},
                headers={"Mcp-Session-Id": "sess-1"})
        if "id" not in message:
            return web.Response(status=202)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b"id: call-5-0\nretry: 10\ndata:\n\n")
        await response.write_eof()  # the connection closes; the stream goes on
        return response

    async def get(request: web.Request) -> web.StreamResponse:
        if not resume or request.headers.get("Last-Event-ID") != "call-5-0":
            return web.Response(status=405)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(f"id: call-5-1\ndata: {json.dumps(RESULT)}\n\n".encode())
        await response.write_eof()
        return response

    async def delete(request: web.Request) -> web.Response:
        return web.Response(status=200)

    app = web.Application()
    app.router.add_post("/mcp", post)
    app.router.add_get("/mcp", get)
    app.router.add_delete("/mcp", delete)
    return app


async def _session(url: str, *, resume: bool) -> None:
    accept = {"Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(timeout=_TIMEOUT) as client:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": LEGACY, "capabilities": {},
            "clientInfo": {"name": "c", "version": "1"}}}
        r = await client.post(url, json=init, headers=accept)
        session = {"Mcp-Session-Id": r.headers["Mcp-Session-Id"], "MCP-Protocol-Version": LEGACY}
        await client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                          headers={**accept, **session})
        await client.post(url, json=CALL, headers={**accept, **session})
        if resume:
            r = await client.get(url, headers={"Accept": "text/event-stream", **session,
                                               "Last-Event-ID": "call-5-0"})
            assert '"id": 5' in r.text
        await client.delete(url, headers=session)


class TestThroughTheTap:
    """The recorder follows a polled stream to its end."""

    async def test_resumed_stream_is_clean(self, tmp_path: Path, serve_app: StartApp) -> None:
        """A call answered on the resumed GET gives no finding on any exchange."""
        base = await serve_app(_polling_origin(resume=True))
        async with running_tap(tap_options(tmp_path, upstream=base, eras=LEGACY_OK)) as tap:
            await _session(hop_url(tap), resume=True)
        recs = exchanges(tap)
        assert [r["ingress"]["httpMethod"] for r in recs] == ["POST", "POST", "POST", "GET",
                                                                "DELETE"]
        assert [f for r in recs for f in r["findings"]] == []

    async def test_never_resumed_is_unterminated_at_session_end(
        self, tmp_path: Path, serve_app: StartApp
    ) -> None:
        """Not resumed before the DELETE: the DELETE's record reports the ended stream."""
        base = await serve_app(_polling_origin(resume=False))
        async with running_tap(tap_options(tmp_path, upstream=base, eras=LEGACY_OK)) as tap:
            await _session(hop_url(tap), resume=False)
        recs = exchanges(tap)
        call, delete = recs[2], recs[3]
        assert call["findings"] == []  # the connection closed after an id: not yet a finding
        assert [(f["rule"], f["strength"]) for f in delete["findings"]] == [
            ("sse.unterminated", "should")]
        assert "tools/call (id 5)" in delete["findings"][0]["message"]
