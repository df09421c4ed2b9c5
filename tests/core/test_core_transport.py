"""Tests for HTTP-level rules (mcp_tap.core.transport) through judge: every exchange judged."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import httpx
import orjson
import pytest
from peers import run_origin

from mcp_tap.core.eras import Era
from mcp_tap.core.exchange import Exchange, judge
from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.sse import encode_event
from mcp_tap.core.transport import http_only, origin_invalid

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
ACCEPT = "application/json, text/event-stream"
META = {"io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {}}
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}}
LIST_OK = {"jsonrpc": "2.0", "id": 1,
           "result": {"resultType": "complete", "tools": [], "ttlMs": 0, "cacheScope": "private"}}
HEADERS = {"Accept": ACCEPT, "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"}


def post(
    status: int | None = 200, body: Any = LIST_OK, *, headers: dict[str, str] | None = None,
    response_headers: dict[str, str] | None = None, request: Any = LIST, **kw: Any,
) -> Exchange:
    """A POST exchange (JSON bodies unless bytes are given)."""
    raw = body if isinstance(body, bytes) else b"" if body is None else orjson.dumps(body)
    rh = response_headers if response_headers is not None else (
        {"Content-Type": "application/json"} if raw else {})
    return Exchange(
        request_headers=HeaderMap.of(HEADERS if headers is None else headers),
        request_body=request if isinstance(request, bytes) else orjson.dumps(request),
        response_status=status,
        response_headers=HeaderMap.of(rh),
        response_body=raw,
        **kw,
    )


def other(method: str, status: int, era: Era | None, *, ctype: str | None = None,
          body: bytes = b"", headers: dict[str, str] | None = None, **kw: Any) -> Exchange:
    """A GET/DELETE/OPTIONS exchange."""
    return Exchange(
        request_headers=HeaderMap.of(
            headers if headers is not None else {"Accept": "text/event-stream"}),
        request_body=b"",
        response_status=status,
        response_headers=HeaderMap.of({"Content-Type": ctype} if ctype else None),
        response_body=body,
        http_method=method,
        era=era,
        **kw,
    )


def found(exchange: Exchange) -> list[tuple[str, int | None, str]]:
    """(rule, code, strength) of every finding of the judged exchange."""
    return [(f.rule, f.code, str(f.strength)) for f in judge(exchange).findings]


class TestAccept:
    """request.accept: the client lists both media types (a legacy GET: the stream)."""

    @pytest.mark.parametrize("accept", [None, "application/json", "text/event-stream", "*/*"])
    def test_missing(self, accept: str | None) -> None:
        """A POST whose Accept misses one of the two types is request.accept (must)."""
        headers = {k: v for k, v in HEADERS.items() if k != "Accept"}
        if accept is not None:
            headers["Accept"] = accept
        assert found(post(headers=headers)) == [("request.accept", None, "must")]

    @pytest.mark.parametrize("accept", [ACCEPT, "text/event-stream;q=1, Application/JSON"])
    def test_listed(self, accept: str) -> None:
        """Both types, in any order, case and with parameters, pass."""
        assert found(post(headers={**HEADERS, "Accept": accept})) == []

    def test_legacy_get_needs_the_stream(self) -> None:
        """A legacy GET without text/event-stream in Accept is request.accept."""
        ex = other("GET", 405, Era.LEGACY, headers={"Accept": "application/json"})
        assert found(ex) == [("request.accept", None, "must")]


class TestHttpOnlyAnswers:
    """Plain HTTP errors are judged by their own rules, never as malformed JSON-RPC."""

    def test_401_with_challenge_and_oauth_body(self) -> None:
        """A 401 with WWW-Authenticate and an OAuth error body has no finding."""
        ex = post(401, {"error": "invalid_token"},
                  response_headers={"WWW-Authenticate": 'Bearer resource_metadata="x"',
                                    "Content-Type": "application/json"})
        assert found(ex) == []

    def test_401_without_challenge(self) -> None:
        """A 401 without WWW-Authenticate is response.unauthorized.challenge (must)."""
        assert found(post(401, None)) == [("response.unauthorized.challenge", None, "must")]

    @pytest.mark.parametrize("status", [403, 404, 405, 413, 415, 429, 500, 502, 503])
    def test_plain_errors(self, status: int) -> None:
        """Other HTTP errors without JSON-RPC carry no finding."""
        assert found(post(status, b"<html>error</html>",
                          response_headers={"Content-Type": "text/html"})) == []

    def test_rejection_still_owed_at_500(self) -> None:
        """A header mismatch answered 500 without a body still owed 400/-32020."""
        ex = post(500, None, headers={**HEADERS, "Mcp-Method": "tools/call"})
        assert [r for r, _, _ in found(ex)] == [
            "request.header.mismatch", "response.header-mismatch-unanswered"]

    def test_rejection_not_owed_before_the_body(self) -> None:
        """A 401 to a mismatched request is no unanswered mismatch: auth comes first."""
        ex = post(401, None, headers={**HEADERS, "Mcp-Method": "tools/call"},
                  response_headers={"WWW-Authenticate": "Bearer"})
        assert [r for r, _, _ in found(ex)] == ["request.header.mismatch"]

    def test_http_only(self) -> None:
        """A JSON-RPC body is not HTTP-only, whatever the status; no body is."""
        assert http_only(500, b"") and http_only(401, b'{"error":"x"}')
        assert not http_only(400, b'{"jsonrpc":"2.0","id":1,"error":{}}')
        assert not http_only(200, b"")


class TestOrigin:
    """response.origin: an invalid Origin must get 403."""

    def test_accepted(self) -> None:
        """A foreign Origin on a loopback Host answered 200 is response.origin (must)."""
        ex = post(headers={**HEADERS, "Host": "127.0.0.1:9", "Origin": "http://evil.example"})
        assert found(ex) == [("response.origin", None, "must")]

    def test_refused(self) -> None:
        """The 403, whatever its body, is what is owed."""
        ex = post(403, {"jsonrpc": "2.0", "error": {"code": -32600, "message": "no"}},
                  headers={**HEADERS, "Host": "localhost:9", "Origin": "https://evil.example"})
        assert found(ex) == []

    @pytest.mark.parametrize("body_id", [{}, {"id": None}])
    def test_refused_by_policy_error_without_id(self, body_id: dict[str, Any]) -> None:
        """A 403 whose Origin the tap cannot call invalid MAY still carry an id-less error."""
        ex = post(403, {"jsonrpc": "2.0", **body_id, "error": {"code": -32600, "message": "no"}},
                  headers={**HEADERS, "Origin": "https://app.example"})
        assert found(ex) == []

    def test_error_without_id_at_200_is_still_response_id(self) -> None:
        """The MAY is the 403's: an id-less error answered 200 is response.id (must)."""
        ex = post(200, {"jsonrpc": "2.0", "error": {"code": -32600, "message": "no"}})
        assert ("response.id", -32600, "must") in found(ex)

    @pytest.mark.parametrize(
        ("headers", "allowed", "invalid"),
        [
            ({"Host": "127.0.0.1:1", "Origin": "http://localhost:3"}, None, False),
            ({"Host": "[::1]:1", "Origin": "http://127.0.0.1"}, None, False),
            ({"Host": "mcp.example.com", "Origin": "https://app.example"}, None, False),
            ({"Host": "127.0.0.1:1"}, None, False),
            ({"Host": "127.0.0.1:1", "Origin": "null"}, None, True),
            ({"Host": "mcp.example.com", "Origin": "https://app.example"},
             ("https://ok.example",), True),
        ],
    )
    def test_invalid(self, headers: dict[str, str], allowed: Any, invalid: bool) -> None:
        """Only a known-invalid Origin (DNS rebinding on loopback, or off the allowlist)."""
        assert (origin_invalid(HeaderMap.of(headers), allowed) is not None) is invalid


class TestNonPost:
    """GET, DELETE and OPTIONS are judged by era."""

    @pytest.mark.parametrize("method", ["GET", "DELETE"])
    def test_modern_should_405(self, method: str) -> None:
        """A modern-only endpoint answering GET/DELETE with 200 is a warning."""
        assert found(other(method, 200, Era.MODERN, ctype="text/event-stream")) == [
            ("response.method-not-allowed", None, "should")]
        assert found(other(method, 405, Era.MODERN)) == []

    def test_modern_version_header_makes_a_get_modern(self) -> None:
        """A GET saying MCP-Protocol-Version: 2026-07-28 (no session) is judged modern."""
        ex = other("GET", 200, None, ctype="text/event-stream",
                   headers={"Accept": "text/event-stream", "MCP-Protocol-Version": MODERN})
        assert found(ex) == [("response.method-not-allowed", None, "should")]
        assert judge(ex).era is Era.MODERN

    def test_unknown_era_not_judged(self) -> None:
        """Without a known era (a server may speak both) a GET stream is no finding."""
        assert found(other("GET", 200, None, ctype="text/event-stream")) == []

    def test_options_not_judged(self) -> None:
        """OPTIONS (CORS preflight) is HTTP's business."""
        assert found(other("OPTIONS", 204, Era.MODERN, headers={})) == []

    def test_legacy_get_json(self) -> None:
        """A legacy GET answered 200 without an SSE stream is response.get-stream (must)."""
        ex = other("GET", 200, Era.LEGACY, ctype="application/json", body=b"{}")
        assert found(ex) == [("response.get-stream", None, "must")]

    @pytest.mark.parametrize("status", [400, 404, 405])
    def test_legacy_get_refused(self, status: int) -> None:
        """A legacy GET may be refused (405, no session 400, ended session 404)."""
        assert found(other("GET", status, Era.LEGACY)) == []

    def test_legacy_get_response_without_resumption(self) -> None:
        """A response on a GET stream that resumes nothing is sse.get-response (must)."""
        body = encode_event('{"jsonrpc":"2.0","id":3,"result":{}}')
        ex = other("GET", 200, Era.LEGACY, ctype="text/event-stream", body=body)
        assert found(ex) == [("sse.get-response", -32600, "must")]
        resumed = other("GET", 200, Era.LEGACY, ctype="text/event-stream", body=body,
                        headers={"Accept": "text/event-stream", "Last-Event-ID": "e1"})
        assert found(resumed) == []

    def test_get_401_without_challenge(self) -> None:
        """A GET answered 401 without a challenge is judged too."""
        assert found(other("GET", 401, Era.LEGACY)) == [
            ("response.unauthorized.challenge", None, "must")]


class TestLegacyTransport:
    """Legacy transport rules: the version header, the session id, client responses."""

    H: ClassVar[dict[str, Any]] = {
        "Accept": ACCEPT, "MCP-Protocol-Version": LEGACY, "Mcp-Session-Id": "s"}
    REQ: ClassVar[dict[str, Any]] = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}

    def legacy(self, status: int, body: Any, headers: dict[str, str], **kw: Any) -> Exchange:
        """A POST in a legacy session."""
        return post(status, body, headers=headers, request=kw.pop("request", self.REQ),
                    era=Era.LEGACY, legacy_session=True, negotiated_version=LEGACY, **kw)

    def test_invalid_version(self) -> None:
        """An invalid version header is request.version.invalid; a 200 to it breaks the 400."""
        h = {**self.H, "MCP-Protocol-Version": "v9"}
        assert found(self.legacy(400, None, h)) == [("request.version.invalid", None, "must")]
        assert found(self.legacy(200, {"jsonrpc": "2.0", "id": 2, "result": {"tools": []}}, h)) == [
            ("request.version.invalid", None, "must"),
            ("response.legacy-version-status", None, "must"),
        ]

    def test_session_id_visible_ascii(self) -> None:
        """An initialize answer with a session id holding a space is response.session-id."""
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": LEGACY, "capabilities": {},
                           "clientInfo": {"name": "c", "version": "1"}}}
        res = {"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": LEGACY,
               "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}}}
        ex = post(200, res, headers={"Accept": ACCEPT}, request=init,
                  response_headers={"Content-Type": "application/json", "Mcp-Session-Id": "a b"})
        assert found(ex) == [("response.session-id", None, "must")]

    def test_client_response_owed_202(self) -> None:
        """A client's POSTed JSON-RPC response gets 202 and no body; anything 2xx else fails."""
        answer = {"jsonrpc": "2.0", "id": "s1", "result": {}}
        assert found(self.legacy(202, None, self.H, request=answer)) == []
        assert found(self.legacy(200, {"ok": 1}, self.H, request=answer)) == [
            ("notification.response", -32600, "must")]


# --- against the real SDK server (mcp==2.3.0, the demo origin) ---------------------------


@pytest.fixture(scope="module")
def sdk_url() -> Iterator[str]:
    """The demo origin (the real SDK server) on a free loopback port."""
    with run_origin() as url:
        yield url


def _exchange(response: httpx.Response, method: str, headers: dict[str, str], body: bytes,
              era: Era | None = None) -> Exchange:
    return Exchange(
        request_headers=HeaderMap.of({"Host": response.request.headers["host"], **headers}),
        request_body=body,
        response_status=response.status_code,
        response_headers=HeaderMap(tuple(response.headers.multi_items())),
        response_body=response.content,
        http_method=method,
        era=era,
    )


class TestRealSdkServer:
    """The transport rules against the real SDK server: its right answers give no finding."""

    def test_invalid_origin_refused(self, sdk_url: str) -> None:
        """The SDK refuses a foreign Origin with 403: no response.origin finding."""
        headers = {**HEADERS, "Origin": "http://evil.example", "Content-Type": "application/json"}
        body = orjson.dumps(LIST)
        r = httpx.post(sdk_url, headers=headers, content=body, timeout=10)
        assert r.status_code == 403
        assert found(_exchange(r, "POST", headers, body)) == []

    @pytest.mark.parametrize("method", ["GET", "DELETE"])
    def test_modern_get_and_delete_get_405(self, sdk_url: str, method: str) -> None:
        """GET and DELETE with the modern version header get 405: no finding."""
        headers = {"Accept": "text/event-stream", "MCP-Protocol-Version": MODERN}
        r = httpx.request(method, sdk_url, headers=headers, timeout=10)
        assert r.status_code == 405
        assert found(_exchange(r, method, headers, b"")) == []  # era from the header

    def test_clean_request_is_clean(self, sdk_url: str) -> None:
        """A conforming tools/list answered by the SDK gives zero findings."""
        headers = {**HEADERS, "Content-Type": "application/json"}
        body = orjson.dumps(LIST)
        r = httpx.post(sdk_url, headers=headers, content=body, timeout=10)
        assert found(_exchange(r, "POST", headers, body)) == []

    def test_missing_accept_is_the_clients_fault(self, sdk_url: str) -> None:
        """Without Accept the SDK still answers; the finding is the client's request.accept."""
        headers = {k: v for k, v in HEADERS.items() if k != "Accept"}
        headers["Content-Type"] = "application/json"
        body = orjson.dumps(LIST)
        r = httpx.post(sdk_url, headers=headers, content=body, timeout=10)
        assert found(_exchange(r, "POST", headers, body)) == [("request.accept", None, "must")]
