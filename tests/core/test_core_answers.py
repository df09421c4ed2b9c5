"""What an answer MAY be, and the answer a rejected request is owed (issue 27, classes 2, 3).

Class 2: every MAY about an answer's shape in the transport and base pages of 2026-07-28,
2025-11-25 and 2025-03-26 gives no finding. Class 3: every "the server MUST respond with X"
that follows a request-side rule is judged on the answer, with its own rule id.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from mcp_tap.core.exchange import Exchange, judge
from mcp_tap.core.findings import Finding, Strength
from mcp_tap.core.headers import HeaderMap
from mcp_tap.transcripts import judge_alone

PV = "io.modelcontextprotocol/protocolVersion"
CC = "io.modelcontextprotocol/clientCapabilities"
MODERN = "2026-07-28"
ACCEPT = {"Accept": "application/json, text/event-stream"}
LEGACY = {**ACCEPT, "Mcp-Session-Id": "s1", "MCP-Protocol-Version": "2025-11-25"}
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list",
        "params": {"_meta": {PV: MODERN, CC: {}}}}
MODERN_HEADERS = {**ACCEPT, "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"}
LIST_RESULT = {"resultType": "complete", "tools": [], "ttlMs": 0, "cacheScope": "private"}
LREQ = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
LRES = {"jsonrpc": "2.0", "id": 2, "result": {"tools": []}}
EVIL = {"Host": "127.0.0.1:8000", "Origin": "https://evil.example"}


def _run(
    headers: dict[str, str],
    request: Any,
    status: int,
    body: Any = None,
    *,
    ctype: str | None = None,
    negotiated: str | None = None,
    legacy: bool = False,
    method: str = "POST",
    response_headers: dict[str, str] | None = None,
) -> list[tuple[str, int | None, Strength]]:
    raw = body if isinstance(body, bytes) else b"" if body is None else orjson.dumps(body)
    rh = {"Content-Type": ctype or "application/json"} if raw else {}
    rh.update(response_headers or {})
    exchange = Exchange(
        request_headers=HeaderMap.of(headers),
        request_body=b"" if request is None else orjson.dumps(request),
        response_status=status,
        response_headers=HeaderMap.of(rh),
        response_body=raw,
        legacy_session=legacy or negotiated is not None,
        negotiated_version=negotiated,
        http_method=method,
    )
    return _ids(list(judge_alone(exchange)[1]))


def _ids(found: list[Finding]) -> list[tuple[str, int | None, Strength]]:
    return [(f.rule, f.code, f.strength) for f in found]


class TestMayAnswers:
    """Class 2: each MAY about an answer's shape is no finding."""

    def test_origin_403_error_without_id(self) -> None:
        """2026-07-28 "Security & Endpoint": the 403's body MAY be an id-less error."""
        err = {"jsonrpc": "2.0", "error": {"code": -32600, "message": "forbidden"}}
        assert _run({**MODERN_HEADERS, **EVIL}, LIST, 403, err) == []

    def test_legacy_origin_403_error_with_null_id(self) -> None:
        """2025-11-25 "Security Warning": the same, with a null id."""
        err = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "no"}}
        assert _run({**LEGACY, **EVIL}, LREQ, 403, err, negotiated="2025-11-25") == []

    def test_2025_03_26_origin_refused_with_any_4xx(self) -> None:
        """2025-03-26 "Security Warning" names no status: any 4xx refusal is allowed..."""
        headers = {**ACCEPT, "Mcp-Session-Id": "s1", **EVIL}
        assert _run(headers, LREQ, 400, b"bad origin", ctype="text/plain",
                    negotiated="2025-03-26") == []

    def test_2025_03_26_origin_served_is_a_finding(self) -> None:
        """... but serving the request is not validating its Origin."""
        headers = {**ACCEPT, "Mcp-Session-Id": "s1", **EVIL}
        assert _run(headers, LREQ, 200, LRES, negotiated="2025-03-26") == [
            ("response.origin", None, Strength.MUST)]

    @pytest.mark.parametrize("status", [400, 403, 500])
    def test_notification_refused_with_error_without_id(self, status: int) -> None:
        """"Sending Messages" 5: a refused notification's body MAY be an id-less error."""
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        err = {"jsonrpc": "2.0", "error": {"code": -32600, "message": "refused"}}
        assert _run(LEGACY, note, status, err, negotiated="2025-11-25") == []

    def test_legacy_client_response_refused_with_error_without_id(self) -> None:
        """2025-11-25 "Sending Messages to the Server" 4: a client response likewise."""
        answer = {"jsonrpc": "2.0", "id": 7, "result": {"roots": []}}
        err = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "no"}}
        assert _run(LEGACY, answer, 400, err, negotiated="2025-11-25") == []

    @pytest.mark.parametrize("ctype", ["application/json", "text/event-stream"])
    def test_json_or_sse_is_the_servers_choice(self, ctype: str) -> None:
        """"Sending Messages" 6: a request is answered with JSON or an SSE stream."""
        response = {"jsonrpc": "2.0", "id": 1, "result": LIST_RESULT}
        body = orjson.dumps(response)
        if ctype == "text/event-stream":
            body = b"data: " + body + b"\n\n"
        assert _run(MODERN_HEADERS, LIST, 200, body, ctype=ctype) == []

    def test_comments_and_empty_events(self) -> None:
        """SSE comments and events without data (keep-alives, a priming id) carry nothing."""
        response = orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": LIST_RESULT})
        body = b": keep-alive\n\nevent: ping\ndata:\n\nid: 0\ndata:\n\ndata: " + response + b"\n\n"
        assert _run(MODERN_HEADERS, LIST, 200, body, ctype="text/event-stream") == []

    def test_legacy_priming_event_and_retry(self) -> None:
        """2025-11-25 "Sending Messages to the Server" 6: a priming event (id, empty data)
        and a retry field before the response."""
        body = b"id: e0\nretry: 500\ndata:\n\nid: e1\ndata: " + orjson.dumps(LRES) + b"\n\n"
        assert _run(LEGACY, LREQ, 200, body, ctype="text/event-stream",
                    negotiated="2025-11-25") == []

    def test_legacy_connection_closed_after_event_id(self) -> None:
        """The server MAY close the connection after an event with an id without ending the
        stream: judged alone, the stream waits for its resumption."""
        body = b"id: e0\nretry: 1000\ndata:\n\n"
        assert _run(LEGACY, LREQ, 200, body, ctype="text/event-stream",
                    negotiated="2025-11-25") == []

    def test_legacy_stream_without_event_id_is_unterminated(self) -> None:
        """Without an event id there is nothing to resume: the stream ended unanswered."""
        body = b": nothing\n\n"
        assert _run(LEGACY, LREQ, 200, body, ctype="text/event-stream",
                    negotiated="2025-11-25") == [("sse.unterminated", None, Strength.SHOULD)]

    def test_legacy_get_answered_405(self) -> None:
        """2025-11-25 "Listening for Messages from the Server" 3: 405 instead of a stream."""
        assert _run({**LEGACY, "Accept": "text/event-stream"}, None, 405, method="GET",
                    negotiated="2025-11-25") == []

    def test_legacy_delete_answered_405(self) -> None:
        """"Session Management" 5: the server MAY answer DELETE with 405."""
        assert _run(LEGACY, None, 405, method="DELETE", negotiated="2025-11-25") == []

    def test_modern_get_answered_405(self) -> None:
        """2026-07-28 "Earlier Streamable HTTP Revisions": GET gets 405."""
        headers = {"Accept": "text/event-stream", "MCP-Protocol-Version": MODERN}
        assert _run(headers, None, 405, method="GET") == []

    def test_legacy_get_stream_closed_at_once(self) -> None:
        """"The server MAY close the SSE stream at any time": an empty GET stream."""
        assert _run({**LEGACY, "Accept": "text/event-stream"}, None, 200, b": hi\n\n",
                    ctype="text/event-stream", method="GET", negotiated="2025-11-25") == []

    def test_error_data_of_any_type(self) -> None:
        """2026-07-28 basic "Error Responses": `data` MAY be of any type."""
        err = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "x",
                                                   "data": [1, "two"]}}
        assert _run(MODERN_HEADERS, LIST, 500, err) == []

    def test_missing_version_header_served_as_2025_03_26(self) -> None:
        """A server MAY treat a request without MCP-Protocol-Version as 2025-03-26: its legacy
        answer is not the modern rejection owed otherwise."""
        headers = {**ACCEPT, "Mcp-Method": "tools/list"}
        legacy_answer = {"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}
        assert _run(headers, LIST, 200, legacy_answer) == [
            ("request.header.missing", -32020, Strength.MUST)]
        assert _run(headers, LIST, 400, b"Bad Request: no session", ctype="text/plain") == [
            ("request.header.missing", -32020, Strength.MUST)]
        # The real SDK's legacy transport: 400, -32600 "Missing session ID", id null.
        refusal = {"jsonrpc": "2.0", "id": None,
                   "error": {"code": -32600, "message": "Bad Request: Missing session ID"}}
        assert _run(headers, LIST, 400, refusal) == [
            ("request.header.missing", -32020, Strength.MUST)]

    @pytest.mark.parametrize("status", [401, 405, 413, 415, 429])
    def test_pre_body_error_without_id(self, status: int) -> None:
        """An answer given before the body was read cannot carry its id ("except in error
        cases where the ID could not be read"), and owes nothing the body would have."""
        request = {**LIST, "params": {"_meta": {PV: MODERN, CC: {}}}}
        headers = {**MODERN_HEADERS, "Mcp-Method": "tools/call"}  # a mismatch, too
        err = {"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": "no"}}
        found = _run(headers, request, status, err,
                     response_headers={"WWW-Authenticate": 'Bearer realm="mcp"'})
        assert found == [("request.header.mismatch", -32020, Strength.MUST)]

    def test_401_with_jsonrpc_body_still_owes_the_challenge(self) -> None:
        """RFC 9110 15.5.2: a 401 carries WWW-Authenticate, whatever its body."""
        err = {"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": "auth"}}
        assert _run(MODERN_HEADERS, LIST, 401, err) == [
            ("response.unauthorized.challenge", None, Strength.MUST)]

    def test_whitespace_event_data(self) -> None:
        """An event whose data is only whitespace carries no message, like an empty one."""
        response = orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": LIST_RESULT})
        body = b"data:  \n\ndata: " + response + b"\n\n"
        assert _run(MODERN_HEADERS, LIST, 200, body, ctype="text/event-stream") == []

    def test_legacy_missing_session_400_error_without_id(self) -> None:
        """"Servers that require a session ID SHOULD respond to requests without an
        MCP-Session-Id header ... with HTTP 400": the real SDK's body has a null id."""
        err = {"jsonrpc": "2.0", "id": None,
               "error": {"code": -32600, "message": "Bad Request: Missing session ID"}}
        headers = {**ACCEPT, "MCP-Protocol-Version": "2025-11-25"}
        assert _run(headers, LREQ, 400, err, legacy=True) == []

    def test_legacy_404_error_without_id(self) -> None:
        """A legacy 404 is the ended session's answer: an id-less error body is allowed."""
        err = {"jsonrpc": "2.0", "id": None, "error": {"code": -32001,
                                                      "message": "Session not found"}}
        assert _run(LEGACY, LREQ, 404, err, negotiated="2025-11-25") == []

    def test_batched_sse_responses_in_2025_03_26(self) -> None:
        """2025-03-26: "These responses MAY be batched"."""
        body = b"data: " + orjson.dumps([LRES]) + b"\n\n"
        headers = {**ACCEPT, "Mcp-Session-Id": "s1"}
        assert _run(headers, LREQ, 200, body, ctype="text/event-stream",
                    negotiated="2025-03-26") == []


class TestOwedAnswers:
    """Class 3: the answer owed after a request-side rule, with its own rule id."""

    def test_missing_version_header_served_as_modern(self) -> None:
        """Served as a modern request, the request without the header was not rejected."""
        headers = {**ACCEPT, "Mcp-Method": "tools/list"}
        found = _run(headers, LIST, 200, {"jsonrpc": "2.0", "id": 1, "result": LIST_RESULT})
        assert found == [("request.header.missing", -32020, Strength.MUST),
                         ("response.header-mismatch-unanswered", -32020, Strength.MUST)]

    def test_missing_version_header_rejected_under_another_id(self) -> None:
        """Rejected with -32020, the rejection is judged as one (its id)."""
        headers = {**ACCEPT, "Mcp-Method": "tools/list"}
        err = {"jsonrpc": "2.0", "id": 9, "error": {"code": -32020, "message": "m"}}
        found = _run(headers, LIST, 400, err)
        assert ("response.header-mismatch-unanswered", -32020, Strength.MUST) in found

    def test_unsupported_version_served(self) -> None:
        """2026-07-28 "Protocol Version Header": 400 and UnsupportedProtocolVersionError."""
        request = {**LIST, "params": {"_meta": {PV: "2099-01-01", CC: {}}}}
        headers = {**MODERN_HEADERS, "MCP-Protocol-Version": "2099-01-01"}
        found = _run(headers, request, 200, {"jsonrpc": "2.0", "id": 1, "result": LIST_RESULT})
        assert found == [("request.version.unsupported", -32022, Strength.MUST),
                         ("response.expected-error", -32022, Strength.MUST)]

    @pytest.mark.parametrize(("status", "owed"), [(200, True), (202, True), (500, True),
                                                  (400, False), (401, False), (404, False)])
    def test_legacy_invalid_version_on_a_request(self, status: int, owed: bool) -> None:
        """2025-11-25 "Protocol Version Header": an invalid version MUST get 400 (an answer
        given before the request was read, 401 or an unknown session's 404, is not judged)."""
        headers = {**LEGACY, "MCP-Protocol-Version": "2025-13-45"}
        found = _run(headers, LREQ, status, LRES if status == 200 else None,
                     negotiated="2025-11-25")
        expected = [("request.version.invalid", None, Strength.MUST)]
        if owed:
            expected.append(("response.legacy-version-status", None, Strength.MUST))
        assert found == expected

    @pytest.mark.parametrize("request_body", [
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 7, "result": {"roots": []}},
    ], ids=["notification", "client-response"])
    def test_legacy_invalid_version_on_a_notification_or_response(
            self, request_body: dict[str, Any]) -> None:
        """Its 202 is no 400: the version is checked before the message is accepted."""
        headers = {**LEGACY, "MCP-Protocol-Version": "banana"}
        assert _run(headers, request_body, 202, negotiated="2025-11-25") == [
            ("request.version.invalid", None, Strength.MUST),
            ("response.legacy-version-status", None, Strength.MUST)]
        assert _run(headers, request_body, 400, negotiated="2025-11-25") == [
            ("request.version.invalid", None, Strength.MUST)]

    @pytest.mark.parametrize("method", ["GET", "DELETE"])
    def test_legacy_invalid_version_on_get_and_delete(self, method: str) -> None:
        """Every request with an invalid version owes 400, GET and DELETE too."""
        headers = {**LEGACY, "Accept": "text/event-stream", "MCP-Protocol-Version": "v1"}
        body = b": open\n\n" if method == "GET" else None
        found = _run(headers, None, 200, body, ctype="text/event-stream", method=method,
                     negotiated="2025-11-25")
        assert found == [("request.version.invalid", None, Strength.MUST),
                         ("response.legacy-version-status", None, Strength.MUST)]
        assert _run(headers, None, 400, method=method, negotiated="2025-11-25") == [
            ("request.version.invalid", None, Strength.MUST)]

    def test_2025_03_26_defines_no_version_header(self) -> None:
        """A 2025-03-26 session is not judged on the header its revision lacks."""
        headers = {**ACCEPT, "Mcp-Session-Id": "s1", "MCP-Protocol-Version": "draft"}
        assert _run(headers, LREQ, 200, LRES, negotiated="2025-03-26") == []

    def test_accept_refused_406_is_before_the_body(self) -> None:
        """No page names the answer to a bad Accept: a 406 (before the body, like 415) owes
        nothing else, though the body lacks its metadata."""
        headers = {**MODERN_HEADERS, "Accept": "application/json"}
        request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        assert _run(headers, request, 406, b"Not Acceptable", ctype="text/plain") == [
            ("request.meta.missing", -32602, Strength.MUST),
            ("request.accept", None, Strength.MUST)]

    def test_header_mismatch_answered_400_without_body(self) -> None:
        """"Server Validation": servers MUST return 400 AND a JSON-RPC -32020 error."""
        request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "delete", "arguments": {}, "_meta": {PV: MODERN, CC: {}}}}
        headers = {**MODERN_HEADERS, "Mcp-Method": "tools/call", "Mcp-Name": "echo"}
        assert _run(headers, request, 400) == [
            ("request.header.mismatch", -32020, Strength.MUST),
            ("response.header-mismatch-unanswered", -32020, Strength.MUST)]

    def test_plain_judge_still_reports_the_unterminated_stream(self) -> None:
        """The proxy parks on sse.unterminated: judge() itself keeps reporting it."""
        exchange = Exchange(
            request_headers=HeaderMap.of(LEGACY), request_body=orjson.dumps(LREQ),
            response_status=200, response_headers=HeaderMap.of(
                {"Content-Type": "text/event-stream"}),
            response_body=b"id: e0\ndata:\n\n", legacy_session=True,
            negotiated_version="2025-11-25")
        assert [f.rule for f in judge(exchange).findings] == ["sse.unterminated"]
