"""Tests for the response rules (mcp_tap.core.responses): envelope, id, errors, status, SSE."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from mcp_tap.core.eras import META_LOG_LEVEL, META_SUBSCRIPTION_ID, Era
from mcp_tap.core.findings import Boundary, Finding
from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.requests import RequestContext, RequestVerdict, check_request
from mcp_tap.core.responses import (
    ResponseContext,
    check_message,
    check_response,
    check_sse_stream,
    decode_sse,
)
from mcp_tap.core.sse import SSEEvent, encode_event

MODERN = "2026-07-28"
UNSUPPORTED = "2099-01-01"
PV = "io.modelcontextprotocol/protocolVersion"
CC = "io.modelcontextprotocol/clientCapabilities"
JSON = HeaderMap.of({"Content-Type": "application/json"})
SSE = HeaderMap.of({"Content-Type": "text/event-stream"})
MCTX = ResponseContext(Era.MODERN)
LCTX = ResponseContext(Era.LEGACY)
CALL_RESULT = {"resultType": "complete", "content": [{"type": "text", "text": "hi"}]}


def modern_request(
    method: str = "tools/call", *, id: Any = 1, version: str = MODERN, **params: Any
) -> dict[str, Any]:
    """A modern request body."""
    if method == "tools/call":
        params.setdefault("name", "echo")
        params.setdefault("arguments", {"text": "hi"})
    return {
        "jsonrpc": "2.0",
        "id": id,
        "method": method,
        "params": {**params, "_meta": {PV: version, CC: {}}},
    }


def verdict(
    message: Any, h: dict[str, str] | None = None, *, era: Era = Era.MODERN
) -> RequestVerdict:
    """The ladder's verdict on ``message`` with mirrored headers filled in unless given."""
    if h is None and isinstance(message, dict) and era is Era.MODERN:
        params = message.get("params", {})
        h = {
            "MCP-Protocol-Version": params.get("_meta", {}).get(PV, MODERN),
            "Mcp-Method": message.get("method", ""),
        }
        if "name" in params:
            h["Mcp-Name"] = params["name"]
        if "uri" in params:
            h["Mcp-Name"] = params["uri"]
    return check_request(HeaderMap.of(h), message, RequestContext(era))


OK = verdict(modern_request())
MISMATCH = verdict(
    modern_request(name="delete_everything"),
    {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "echo"},
)
UNSUPPORTED_VERDICT = verdict(modern_request("tools/list", version=UNSUPPORTED))
NOTIFICATION = verdict({"jsonrpc": "2.0", "method": "notifications/cancelled"}, {})


def body(value: Any) -> bytes:
    """JSON bytes of a value."""
    return orjson.dumps(value)


def result(value: Any = None, id: Any = 1) -> dict[str, Any]:
    """A JSON-RPC success response."""
    return {"jsonrpc": "2.0", "id": id, "result": CALL_RESULT if value is None else value}


_DATA: dict[int, Any] = {
    -32022: {"supported": [MODERN], "requested": "1999-01-01"},
    -32021: {"requiredCapabilities": {"sampling": {}}},
}


def error(code: Any, id: Any = 1, message: Any = "boom", **kw: Any) -> dict[str, Any]:
    """A JSON-RPC error response (with the schema's ``data`` for -32021/-32022 by default)."""
    err: dict[str, Any] = {"code": code, "message": message}
    data = kw.get("data", _DATA.get(code) if isinstance(code, int) else None)
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "id": id, "error": err}


def answer(
    v: RequestVerdict,
    status: int,
    value: Any,
    *,
    ctx: ResponseContext = MCTX,
    headers: HeaderMap = JSON,
) -> list[Finding]:
    """Findings of check_response on a JSON (or raw bytes) answer."""
    raw = value if isinstance(value, bytes) else body(value)
    found, _ = check_response(v, status, headers, raw, ctx)
    return found


def stream(*events: Any) -> bytes:
    """An SSE body of JSON-RPC objects (or raw data strings)."""
    return b"".join(encode_event(e if isinstance(e, str) else body(e).decode()) for e in events)


def rules(found: list[Finding]) -> list[tuple[str, int | None]]:
    """(rule, code) pairs of findings."""
    return [(f.rule, f.code) for f in found]


def one(found: list[Finding], rule: str) -> Finding:
    """The single finding of ``rule`` in ``found``."""
    matching = [f for f in found if f.rule == rule]
    assert len(matching) == 1, rules(found)
    return matching[0]


class TestCheckResponseEnvelope:
    """check_response: envelope, parse, content type and exclusivity."""

    def test_golden(self) -> None:
        """A 200 JSON success with the request id has no finding and returns the message."""
        found, messages = check_response(OK, 200, JSON, body(result()), MCTX)
        assert found == []
        assert messages == [result()]

    def test_content_type_parameters_accepted(self) -> None:
        """application/json with a charset parameter is JSON."""
        h = HeaderMap.of({"Content-Type": "application/json; charset=utf-8"})
        assert answer(OK, 200, result(), headers=h) == []

    def test_jsonrpc_version(self) -> None:
        """jsonrpc other than "2.0" is response.envelope -32600."""
        f = one(answer(OK, 200, {**result(), "jsonrpc": "1.0"}), "response.envelope")
        assert f.code == -32600
        assert f.boundary is Boundary.RESPONSE
        assert f.where == "origin"

    def test_not_an_object(self) -> None:
        """A JSON array body is response.envelope -32600."""
        f = one(answer(OK, 200, [result()]), "response.envelope")
        assert f.code == -32600

    def test_result_not_an_object(self) -> None:
        """A result that is not an object is response.envelope -32600."""
        f = one(answer(OK, 200, result([1])), "response.envelope")
        assert f.code == -32600

    def test_empty_body(self) -> None:
        """A request answered with an empty body is response.envelope -32600."""
        f = one(answer(OK, 200, b""), "response.envelope")
        assert f.code == -32600

    def test_not_json(self) -> None:
        """A JSON content type with a non-JSON body is response.parse -32700."""
        found = answer(OK, 200, b"<html>oops</html>")
        assert rules(found) == [("response.parse", -32700)]

    @pytest.mark.parametrize("ctype", ["text/plain", None])
    def test_content_type(self, ctype: str | None) -> None:
        """A JSON answer under another or no content type is response.content-type -32600."""
        h = HeaderMap.of({"Content-Type": ctype} if ctype else None)
        f = one(answer(OK, 200, result(), headers=h), "response.content-type")
        assert f.code == -32600

    def test_both_result_and_error(self) -> None:
        """Both result and error is response.exclusivity -32600."""
        f = one(
            answer(OK, 200, {**result(), "error": {"code": 1, "message": "x"}}),
            "response.exclusivity",
        )
        assert f.code == -32600

    def test_neither_result_nor_error(self) -> None:
        """Neither result nor error is response.exclusivity -32600."""
        f = one(answer(OK, 200, {"jsonrpc": "2.0", "id": 1}), "response.exclusivity")
        assert f.code == -32600

    def test_client_response_needs_nothing(self) -> None:
        """A legacy client's POSTed response (answered 202) is not judged as a request."""
        v = verdict({"jsonrpc": "2.0", "id": 5, "result": {}}, {}, era=Era.LEGACY)
        found, messages = check_response(v, 202, HeaderMap(), b"", LCTX)
        assert (found, messages) == ([], [])

    def test_where_is_reported(self) -> None:
        """Findings name the view they were seen at."""
        found, _ = check_response(OK, 200, JSON, b"", MCTX, where="egress")
        assert [f.where for f in found] == ["egress"]


class TestCheckResponseId:
    """check_response: the response id equals the request id in value and JSON type."""

    @pytest.mark.parametrize(
        ("request_id", "raw_response_id"),
        [(6, '"6"'), ("6", "6"), (1, "true"), (1, "1.0"), (1, "2"), (1, "null")],
    )
    def test_id_differs(self, request_id: Any, raw_response_id: str) -> None:
        """ "6" vs 6, true vs 1, 1.0 vs 1, another value or null is response.id -32600."""
        v = verdict(modern_request(id=request_id))
        raw = (
            b'{"jsonrpc":"2.0","id":'
            + raw_response_id.encode()
            + b',"result":'
            + body(CALL_RESULT)
            + b"}"
        )
        f = one(answer(v, 200, raw), "response.id")
        assert f.code == -32600

    def test_id_absent(self) -> None:
        """A response without an id is response.id -32600."""
        f = one(answer(OK, 200, {"jsonrpc": "2.0", "result": CALL_RESULT}), "response.id")
        assert f.code == -32600

    @pytest.mark.parametrize("request_id", [0, "6", "", -3])
    def test_same_id(self, request_id: Any) -> None:
        """The same value of the same type is accepted."""
        v = verdict(modern_request(id=request_id))
        assert answer(v, 200, result(id=request_id)) == []


class TestCheckResponseErrors:
    """check_response: error shape and reserved codes."""

    @pytest.mark.parametrize(
        "err",
        [
            {"code": "-32601", "message": "x"},
            {"code": True, "message": "x"},
            {"code": -32601.0, "message": "x"},
            {"code": -32601},
            {"code": -32601, "message": 5},
            "boom",
            None,
        ],
    )
    def test_shape(self, err: Any) -> None:
        """A non-integer code, a boolean code, a non-string message or no object is -32600."""
        f = one(answer(OK, 404, {"jsonrpc": "2.0", "id": 1, "error": err}), "response.error.shape")
        assert f.code == -32600

    @pytest.mark.parametrize("code", [-32050, -32099, -32023, -32042])
    def test_reserved_undefined_modern(self, code: int) -> None:
        """An undefined code in -32020..-32099 from a modern server is response.error.reserved."""
        f = one(answer(OK, 400, error(code)), "response.error.reserved")
        assert f.code == -32600

    def test_32002_from_modern(self) -> None:
        """-32002 from a modern server is response.error.reserved -32600."""
        v = verdict(modern_request("resources/read", uri="file:///nope"))
        f = one(answer(v, 200, error(-32002)), "response.error.reserved")
        assert f.code == -32600

    @pytest.mark.parametrize("code", [-32002, -32042])
    def test_legacy_codes_allowed(self, code: int) -> None:
        """-32002 and -32042 (URL elicitation) are defined in the legacy era."""
        v = verdict(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "resources/read",
                "params": {"uri": "file:///nope"},
            },
            {},
            era=Era.LEGACY,
        )
        assert answer(v, 200, error(code), ctx=LCTX) == []

    def test_reserved_range_free_in_legacy(self) -> None:
        """The -32020..-32099 reservation starts with 2026-07-28: legacy may use the range."""
        v = verdict({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, {}, era=Era.LEGACY)
        assert answer(v, 200, error(-32050), ctx=LCTX) == []

    @pytest.mark.parametrize("code", [-32050, -32042, -32002])
    def test_reserved_modern(self, code: int) -> None:
        """Undefined reserved codes and the retired -32042/-32002 are violations when modern."""
        f = one(answer(OK, 200, error(code)), "response.error.reserved")
        assert (f.code, f.strength) == (-32600, "must")

    @pytest.mark.parametrize(
        ("code", "data"),
        [(-32022, None), (-32022, {"supported": "2026-07-28", "requested": "x"}),
         (-32022, {"supported": ["2026-07-28"]}), (-32021, {}),
         (-32021, {"requiredCapabilities": ["sampling"]})],
    )
    def test_error_data_shape(self, code: int, data: Any) -> None:
        """-32022 needs data.supported/requested, -32021 data.requiredCapabilities (schema.ts)."""
        body = error(code)
        if data is None:
            del body["error"]["data"]
        else:
            body["error"]["data"] = data
        f = one(answer(UNSUPPORTED_VERDICT, 400, body), "response.error.data")
        assert (f.code, f.strength) == (-32600, "must")

    def test_resource_not_found_32602(self) -> None:
        """-32602 for a missing resource is fine with any status (no mapping applies)."""
        v = verdict(modern_request("resources/read", uri="file:///nope"))
        assert answer(v, 200, error(-32602)) == []


class TestCheckResponseStatus:
    """check_response: the 2026-07-28 HTTP status mapping (response.http-status)."""

    @pytest.mark.parametrize(
        ("code", "wrong"),
        [(-32020, 200), (-32021, 200), (-32021, 500), (-32601, 200), (-32601, 400)],
    )
    def test_error_status_mismatch(self, code: int, wrong: int) -> None:
        """-32020/-32021 need 400 and -32601 needs 404."""
        f = one(answer(OK, wrong, error(code)), "response.http-status")
        assert f.code == -32600

    @pytest.mark.parametrize(
        ("code", "status"), [(-32021, 400), (-32601, 404), (-32603, 500), (-32603, 200)]
    )
    def test_error_status_fits(self, code: int, status: int) -> None:
        """A fitting or unmapped status is accepted."""
        assert answer(OK, status, error(code)) == []

    def test_unsupported_version_needs_400(self) -> None:
        """-32022 answered with HTTP 200 is response.http-status -32600."""
        found = answer(UNSUPPORTED_VERDICT, 200, error(-32022))
        assert rules(found) == [("response.http-status", -32600)]

    def test_unsupported_version_answered_correctly(self) -> None:
        """-32022 with HTTP 400 is what the request is owed."""
        assert answer(UNSUPPORTED_VERDICT, 400, error(-32022)) == []

    def test_missing_meta_needs_400(self) -> None:
        """-32602 for missing _meta must be HTTP 400."""
        v = verdict(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
            {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"},
        )
        f = one(answer(v, 200, error(-32602)), "response.http-status")
        assert f.code == -32600
        assert answer(v, 400, error(-32602)) == []

    @pytest.mark.parametrize("status", [201, 400, 500])
    def test_success_needs_200(self, status: int) -> None:
        """A success result with any status but 200 is response.http-status -32600."""
        f = one(answer(OK, status, result()), "response.http-status")
        assert f.code == -32600

    def test_legacy_has_no_mapping(self) -> None:
        """The legacy era does not map error codes to statuses."""
        v = verdict({"jsonrpc": "2.0", "id": 1, "method": "nope"}, {}, era=Era.LEGACY)
        assert answer(v, 200, error(-32601), ctx=LCTX) == []


class TestCheckResponseOwedAnswers:
    """check_response: a rejected request is owed its error (header mismatch: 400/-32020)."""

    def test_mismatch_answered_correctly(self) -> None:
        """HTTP 400 with JSON-RPC -32020 and the same id passes."""
        assert answer(MISMATCH, 400, error(-32020)) == []

    def test_mismatch_500_empty(self) -> None:
        """HTTP 500 with no body fails with response.header-mismatch-unanswered -32020."""
        found = answer(MISMATCH, 500, b"")
        assert rules(found) == [("response.header-mismatch-unanswered", -32020)]

    def test_mismatch_500_not_json(self) -> None:
        """An intermediary's 500 HTML page fails the rule too."""
        found = answer(
            MISMATCH,
            500,
            b"<h1>Internal Server Error</h1>",
            headers=HeaderMap.of({"Content-Type": "text/html"}),
        )
        assert one(found, "response.header-mismatch-unanswered").code == -32020

    def test_mismatch_generic_error(self) -> None:
        """HTTP 500 with -32603 fails the rule."""
        f = one(answer(MISMATCH, 500, error(-32603)), "response.header-mismatch-unanswered")
        assert f.code == -32020

    def test_mismatch_wrong_id(self) -> None:
        """400/-32020 under another id fails the rule (and response.id)."""
        found = answer(MISMATCH, 400, error(-32020, id=2))
        assert one(found, "response.header-mismatch-unanswered").code == -32020
        assert one(found, "response.id").code == -32600

    def test_mismatch_wrong_status(self) -> None:
        """-32020 with HTTP 200 fails the rule (and the status mapping)."""
        found = answer(MISMATCH, 200, error(-32020))
        assert one(found, "response.header-mismatch-unanswered").code == -32020
        assert one(found, "response.http-status").code == -32600

    def test_mismatch_accepted(self) -> None:
        """A success result to a mismatched request fails the rule; the result is not judged."""
        found = answer(MISMATCH, 200, result({"no": "resultType"}))
        assert rules(found) == [("response.header-mismatch-unanswered", -32020)]

    def test_mismatch_answered_over_sse(self) -> None:
        """-32020 delivered in a 200 SSE stream fails the rule (the status is not 400)."""
        found, _ = check_response(MISMATCH, 200, SSE, stream(error(-32020)), MCTX)
        assert rules(found) == [
            ("response.http-status", -32600), ("response.header-mismatch-unanswered", -32020)]

    def test_mismatch_stream_without_response(self) -> None:
        """An SSE stream that never answers a mismatched request fails the rule."""
        note = {
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "info", "data": "x"},
        }
        found, _ = check_response(MISMATCH, 200, SSE, stream(note), MCTX)
        assert one(found, "response.header-mismatch-unanswered").code == -32020
        assert one(found, "sse.unterminated").code is None

    @pytest.mark.parametrize(
        "rule", ["request.header.missing", "request.header.duplicate", "request.header.encoding"]
    )
    def test_every_header_rule_is_owed_32020(self, rule: str) -> None:
        """Missing, duplicate and badly encoded headers are owed 400/-32020 as well."""
        h = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "echo"}
        pairs = list(h.items())
        if rule == "request.header.missing":
            pairs = pairs[:2]
        elif rule == "request.header.duplicate":
            pairs.append(("Mcp-Name", "other"))
        else:
            pairs[2] = ("Mcp-Name", "\u00e9cho")
        v = check_request(HeaderMap(tuple(pairs)), modern_request(), RequestContext(Era.MODERN))
        assert v.rejection is not None and v.rejection.rule == rule
        f = one(answer(v, 200, result()), "response.header-mismatch-unanswered")
        assert f.code == -32020
        assert answer(v, 400, error(-32020)) == []

    def test_unsupported_version_answered_ok(self) -> None:
        """A success to an unsupported-version request is response.expected-error (-32022)."""
        f = one(
            answer(UNSUPPORTED_VERDICT, 200, result({"resultType": "complete", "tools": []})),
            "response.expected-error",
        )
        assert f.code == -32022

    def test_unsupported_version_wrong_code(self) -> None:
        """Another error code for an unsupported version is response.expected-error."""
        f = one(answer(UNSUPPORTED_VERDICT, 400, error(-32020)), "response.expected-error")
        assert f.code == -32022

    def test_unsupported_version_stream_without_response(self) -> None:
        """An SSE stream with no response owes the expected error too."""
        found, _ = check_response(UNSUPPORTED_VERDICT, 200, SSE, b"", MCTX)
        assert one(found, "response.expected-error").code == -32022

    def test_removed_method_owed_32601(self) -> None:
        """A modern initialize is owed -32601; 404/-32601 passes, a result does not."""
        v = verdict(modern_request("initialize"))
        assert answer(v, 404, error(-32601)) == []
        assert one(answer(v, 200, result({})), "response.expected-error").code == -32601

    def test_bad_envelope_owed_32600(self) -> None:
        """A request with a null id is owed -32600."""
        v = verdict(modern_request(id=None))
        assert answer(v, 400, error(-32600, id=None)) == []
        f = one(answer(v, 200, error(-32603, id=None)), "response.expected-error.jsonrpc")
        assert (f.code, f.strength) == (-32600, "should")

    def test_legacy_leak_not_owed(self) -> None:
        """A legacy-era leak is judged on the request; the server owes no -32020 for it."""
        v = verdict(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/list",
                "params": {"_meta": {PV: MODERN, CC: {}}},
            },
            {},
            era=Era.LEGACY,
        )
        assert v.rejection is not None and v.rejection.rule == "request.legacy-leak"
        assert answer(v, 200, result({"tools": []}), ctx=LCTX) == []


class TestCheckResponseNotification:
    """check_response: notifications get HTTP 202 and an empty body."""

    def test_202_empty(self) -> None:
        """202 with an empty body passes."""
        found, messages = check_response(NOTIFICATION, 202, HeaderMap(), b"", MCTX)
        assert (found, messages) == ([], [])

    @pytest.mark.parametrize(
        ("status", "raw"),
        [
            (200, b'{"jsonrpc":"2.0","id":1,"result":{}}'),
            (204, b""),
            (202, b"{}"),
            (400, b'{"jsonrpc":"2.0","result":{}}'),
        ],
    )
    def test_anything_else(self, status: int, raw: bytes) -> None:
        """A 2xx other than 202-empty, or a success-shaped body, is notification.response."""
        found, _ = check_response(NOTIFICATION, status, JSON, raw, MCTX)
        assert [(f.rule, f.code, f.strength) for f in found] == [
            ("notification.response", -32600, "must")]

    @pytest.mark.parametrize(
        ("status", "raw"),
        [
            (400, b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"x"}}'),
            (400, b'{"jsonrpc":"2.0","error":{"code":-32601,"message":"x"}}'),
            (500, b""),
            (415, b"unsupported"),
        ],
    )
    def test_refused_with_an_error_status(self, status: int, raw: bytes) -> None:
        """A refused notification gets an error status; its body MAY be an error without id."""
        found, _ = check_response(NOTIFICATION, status, JSON, raw, MCTX)
        assert found == []


class TestCheckMessage:
    """check_message: one JSON-RPC response message, body or stream event."""

    def test_in_stream_id_rule_is_sse_id(self) -> None:
        """A wrong id inside a stream is sse.id -32600 rather than response.id."""
        found = check_message(
            OK, result(id=2), MCTX, status=200, where="origin sse[0]", in_stream=True
        )
        assert rules(found) == [("sse.id", -32600)]

    def test_in_stream_keeps_status_mapping(self) -> None:
        """An error in a 200 stream keeps its status rule: -32022 owed 400 is a violation."""
        found = check_message(
            UNSUPPORTED_VERDICT,
            error(-32022),
            MCTX,
            status=200,
            where="origin sse[0]",
            in_stream=True,
        )
        assert [(f.rule, f.code, f.strength) for f in found] == [
            ("response.http-status", -32600, "must")]

    def test_result_rules_applied(self) -> None:
        """An accepted request's result is judged with the result rules."""
        found = check_message(OK, result({"content": []}), MCTX, status=200, where="origin")
        assert rules(found) == [("response.result-type.missing", -32600)]


class TestCheckSseStream:
    """check_sse_stream: valid messages, related notifications first, the response last."""

    def events(self, *items: Any) -> list[SSEEvent]:
        """SSE events of JSON-RPC objects (or raw strings)."""
        return [SSEEvent(i if isinstance(i, str) else body(i).decode()) for i in items]

    def test_golden(self) -> None:
        """A related notification then the response passes and both are returned."""
        msg = modern_request()
        msg["params"]["_meta"][META_LOG_LEVEL] = "info"
        note = {
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "info", "data": "x"},
        }
        found, messages = check_sse_stream(verdict(msg), 200, self.events(note, result()), MCTX)
        assert found == []
        assert messages == [note, result()]

    @pytest.mark.parametrize(
        "method",
        ["notifications/message", "notifications/tools/list_changed",
         "notifications/resources/updated", "notifications/cancelled", "notifications/progress"],
    )
    def test_unrelated_on_a_request_stream(self, method: str) -> None:
        """Log messages nobody asked for, change notifications, cancelled and untokened
        progress do not relate to the request: sse.unrelated -32600 (must)."""
        params = {  # each well-formed, so the schema has nothing to say
            "notifications/message": {"level": "info", "data": "x"},
            "notifications/resources/updated": {"uri": "file:///x"},
            "notifications/cancelled": {"requestId": 1},
            "notifications/progress": {"progressToken": "p", "progress": 1},
        }.get(method, {})
        note = {"jsonrpc": "2.0", "method": method, "params": params}
        found, _ = check_sse_stream(OK, 200, self.events(note, result()), MCTX)
        assert [(f.rule, f.code, f.strength) for f in found] == [
            ("sse.unrelated", -32600, "must")]

    def test_legacy_relatedness_is_not_judged(self) -> None:
        """The legacy page words relatedness as a SHOULD on the message: no finding."""
        v = verdict({"jsonrpc": "2.0", "id": 1, "method": "ping"}, {}, era=Era.LEGACY)
        note = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
        found, _ = check_sse_stream(v, 200, self.events(note, result()), LCTX)
        assert found == []

    def test_priming_and_empty_events_skipped(self) -> None:
        """Events with empty data (legacy priming) carry no message."""
        events = [SSEEvent("", id="0"), *self.events(result())]
        found, messages = check_sse_stream(OK, 200, events, MCTX)
        assert found == []
        assert len(messages) == 1

    def test_wrong_id(self) -> None:
        """A response event with another id is sse.id -32600."""
        found, _ = check_sse_stream(OK, 200, self.events(result(id="1")), MCTX)
        assert rules(found) == [("sse.id", -32600)]

    def test_unterminated(self) -> None:
        """A stream without the response is sse.unterminated with no code."""
        found, _ = check_sse_stream(OK, 200, [], MCTX)
        f = one(found, "sse.unterminated")
        assert f.code is None
        assert len(found) == 1

    @pytest.mark.parametrize("data", ["not json", "{"])
    def test_data_not_json(self, data: str) -> None:
        """Event data that is not JSON is sse.event -32600."""
        found, _ = check_sse_stream(OK, 200, self.events(data, result()), MCTX)
        assert rules(found) == [("sse.event", -32600)]

    def test_not_jsonrpc(self) -> None:
        """A JSON event that is not a JSON-RPC message is sse.event -32600."""
        found, _ = check_sse_stream(OK, 200, self.events({"hello": 1}, result()), MCTX)
        assert rules(found) == [("sse.event", -32600)]

    def test_event_after_response(self) -> None:
        """A message after the final response is sse.after-response, a SHOULD (warning)."""
        note = {
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "info", "data": "x"},
        }
        found, _ = check_sse_stream(OK, 200, self.events(result(), note), MCTX)
        assert [(f.rule, f.code, f.strength) for f in found] == [
            ("sse.after-response", -32600, "should")]

    def test_progress_after_completion(self) -> None:
        """Progress after the final response is sse.progress.after-completion (MUST stop)."""
        note = {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": "p", "progress": 1},
        }
        found, _ = check_sse_stream(OK, 200, self.events(result(), note), MCTX)
        assert [(f.rule, f.code, f.strength) for f in found] == [
            ("sse.progress.after-completion", -32600, "must")]

    def test_server_request_on_modern_stream(self) -> None:
        """A server-to-client request on a modern stream is sse.event -32600."""
        req = {"jsonrpc": "2.0", "id": 99, "method": "sampling/createMessage", "params": {}}
        found, _ = check_sse_stream(OK, 200, self.events(req, result()), MCTX)
        assert rules(found) == [("sse.event", -32600)]

    def test_server_request_on_legacy_stream(self) -> None:
        """Server-to-client requests exist in the legacy era."""
        v = verdict(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "hi"}},
            },
            {},
            era=Era.LEGACY,
        )
        req = {"jsonrpc": "2.0", "id": 99, "method": "sampling/createMessage", "params": {}}
        found, _ = check_sse_stream(v, 200, self.events(req, result()), LCTX)
        assert found == []

    def test_unrelated_progress(self) -> None:
        """Progress for another token is sse.event -32600; the request's own is fine."""
        msg = modern_request()
        msg["params"]["_meta"]["progressToken"] = "p1"
        v = verdict(msg)

        def progress(token: str) -> dict[str, Any]:
            return {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": token, "progress": 1},
            }

        found, _ = check_sse_stream(v, 200, self.events(progress("p2"), result()), MCTX)
        assert rules(found) == [("sse.unrelated", -32600)]
        found, _ = check_sse_stream(v, 200, self.events(progress("p1"), result()), MCTX)
        assert found == []

    @staticmethod
    def _note(method: str, sub: Any = 7, **params: Any) -> dict[str, Any]:
        meta = {} if sub is None else {"_meta": {META_SUBSCRIPTION_ID: sub}}
        return {"jsonrpc": "2.0", "method": method, "params": {**meta, **params}}

    def _listen(self, *items: Any) -> list[Finding]:
        msg = modern_request("subscriptions/listen", id=7)
        msg["params"]["notifications"] = {"toolsListChanged": True,
                                          "resourceSubscriptions": ["file:///a"]}
        found, _ = check_sse_stream(verdict(msg), 200, [SSEEvent("", id="p"), *self.events(
            *items)], MCTX)
        return found

    def test_listen_stream(self) -> None:
        """Priming, the acknowledgement, then opted-in notifications: no final response needed."""
        ack = self._note("notifications/subscriptions/acknowledged", notifications={})
        assert self._listen(ack, self._note("notifications/tools/list_changed"),
                            self._note("notifications/resources/updated", uri="file:///a")) == []

    @pytest.mark.parametrize(
        "items",
        [
            # the first message is not the acknowledgement (the priming event does not count)
            [("notifications/tools/list_changed", 7)],
            # the acknowledgement without the subscription id, or with another
            [("notifications/subscriptions/acknowledged", None)],
            [("notifications/subscriptions/acknowledged", "7")],
            # a type not opted in, an unsubscribed resource, a request-scoped type
            [("notifications/subscriptions/acknowledged", 7),
             ("notifications/prompts/list_changed", 7)],
            [("notifications/subscriptions/acknowledged", 7), ("notifications/progress", 7)],
        ],
    )
    def test_listen_violations(self, items: list[tuple[str, Any]]) -> None:
        """Listen stream rules are sse.listen -32600 (must)."""
        well_formed = {  # params the schema asks for, so only the listen rules speak
            "notifications/subscriptions/acknowledged": {"notifications": {}},
            "notifications/progress": {"progressToken": 1, "progress": 1},
        }
        found = self._listen(*(self._note(m, sub, **well_formed.get(m, {})) for m, sub in items))
        assert [(f.rule, f.code, f.strength) for f in found] == [("sse.listen", -32600, "must")]

    def test_listen_unsubscribed_resource(self) -> None:
        """resources/updated for a URI the filter did not list is sse.listen."""
        ack = self._note("notifications/subscriptions/acknowledged", notifications={})
        found = self._listen(ack, self._note("notifications/resources/updated", uri="file:///b"))
        assert rules(found) == [("sse.listen", -32600)]

    def test_stream_status(self) -> None:
        """An SSE stream with a status other than 200 is response.http-status -32600."""
        found, _ = check_sse_stream(OK, 201, self.events(result()), MCTX)
        assert rules(found) == [("response.http-status", -32600)]

    def test_where_names_the_event(self) -> None:
        """Event findings name the event index."""
        found, _ = check_sse_stream(OK, 200, self.events("x", result()), MCTX, where="egress")
        assert found[0].where == "egress sse[0]"

    def test_result_rules_in_stream(self) -> None:
        """A streamed result is judged by the result rules of its era."""
        found, _ = check_sse_stream(OK, 200, self.events(result({"content": []})), MCTX)
        assert rules(found) == [("response.result-type.missing", -32600)]

    def test_check_response_prefers_decoded_events(self) -> None:
        """check_response judges sse_events given while streaming instead of the body."""
        found, messages = check_response(OK, 200, SSE, b"", MCTX, sse_events=self.events(result()))
        assert found == []
        assert messages == [result()]


class TestDecodeSse:
    """decode_sse: a whole SSE body into events plus the cut-off flag."""

    def test_complete(self) -> None:
        """A complete body decodes with no pending event."""
        events, cut = decode_sse(stream(result()))
        assert [e.data for e in events] == [body(result()).decode()]
        assert cut is False

    def test_cut_off(self) -> None:
        """A body ending mid-event reports the cut."""
        events, cut = decode_sse(b'data: {"a":1}\n')
        assert events == []
        assert cut is True


class TestProgressOrder:
    """check_sse_stream: progress increases with each notification (progress "Progress Flow")."""

    @staticmethod
    def _stream(*values: Any, era: Era = Era.MODERN) -> list[Finding]:
        msg = modern_request()
        msg["params"]["_meta"]["progressToken"] = "p"
        notes = [{"jsonrpc": "2.0", "method": "notifications/progress",
                  "params": {"progressToken": "p", "progress": v}} for v in values]
        events = [SSEEvent(body(n).decode()) for n in (*notes, result())]
        found, _ = check_sse_stream(verdict(msg), 200, events, MCTX)
        return found

    def test_increasing(self) -> None:
        """1, 2.5, 3 is fine."""
        assert self._stream(1, 2.5, 3) == []

    @pytest.mark.parametrize("values", [(2, 2), (3, 1)])
    def test_not_increasing(self, values: tuple[int, int]) -> None:
        """A repeated or smaller value is sse.progress -32600 (must)."""
        assert [(f.rule, f.code, f.strength) for f in self._stream(*values)] == [
            ("sse.progress", -32600, "must")]
