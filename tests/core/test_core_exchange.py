"""Tests for the exchange model and judge (mcp_tap.core.exchange), and era inference."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from mcp_tap.core.eras import Era, infer_era
from mcp_tap.core.exchange import Exchange, client_extensions, decode_body, judge
from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.jsonrpc import Kind
from mcp_tap.core.sse import SSEEvent, encode_event

MODERN = "2026-07-28"
PV = "io.modelcontextprotocol/protocolVersion"
CC = "io.modelcontextprotocol/clientCapabilities"
TASKS = "io.modelcontextprotocol/tasks"
JSON = HeaderMap.of({"Content-Type": "application/json"})
SSE = HeaderMap.of({"Content-Type": "text/event-stream"})
CALL_RESULT = {
    "jsonrpc": "2.0",
    "id": 1,
    "result": {"resultType": "complete", "content": [{"type": "text", "text": "hi"}]},
}
TASK_RESULT = {
    "jsonrpc": "2.0",
    "id": 1,
    "result": {
        "resultType": "task",
        "taskId": "t",
        "status": "working",
        "createdAt": "2026-07-28T00:00:00Z",
        "lastUpdatedAt": "2026-07-28T00:00:00Z",
        "ttlMs": None,
    },
}


def call(*, name: str = "echo", caps: dict[str, Any] | None = None) -> dict[str, Any]:
    """A modern tools/call request."""
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": name,
            "arguments": {"text": "hi"},
            "_meta": {PV: MODERN, CC: caps or {}},
        },
    }


ACCEPT = HeaderMap.of({"Accept": "application/json, text/event-stream"})
CALL_HEADERS = HeaderMap.of(
    {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "echo",
    }
)


def exchange(
    request: Any = None, status: int | None = 200, response: Any = CALL_RESULT, **kw: Any
) -> Exchange:
    """A POST exchange of JSON bodies (bytes are used as they are)."""
    req = call() if request is None else request
    return Exchange(
        request_headers=kw.pop("request_headers", CALL_HEADERS),
        request_body=req if isinstance(req, bytes) else orjson.dumps(req),
        response_status=status,
        response_headers=kw.pop("response_headers", JSON),
        response_body=response if isinstance(response, bytes) else orjson.dumps(response),
        **kw,
    )


def rules(j: Any) -> list[tuple[str, int | None]]:
    """(rule, code) pairs of a judgement."""
    return [(f.rule, f.code) for f in j.findings]


class TestInferEra:
    """infer_era: the era of one request from what crossed the wire."""

    def test_modern_meta(self) -> None:
        """Namespaced modern _meta makes a request modern."""
        assert infer_era(call(), MODERN) is Era.MODERN

    def test_modern_meta_beats_legacy_header(self) -> None:
        """Modern _meta with a legacy version header is modern (then judged a mismatch)."""
        assert infer_era(call(), "2025-11-25") is Era.MODERN

    def test_initialized_is_legacy(self) -> None:
        """notifications/initialized is legacy even with modern metadata leaking in."""
        msg = {
            "jsonrpc": "2.0",
            "method": "notifications/initialized",
            "params": {"_meta": {PV: MODERN, CC: {}}},
        }
        assert infer_era(msg, None) is Era.LEGACY

    def test_modern_shaped_initialize_is_modern(self) -> None:
        """An initialize carrying the per-request metadata is a modern (removed-method) request."""
        msg = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"_meta": {PV: MODERN, CC: {}}}}
        assert infer_era(msg, None) is Era.MODERN

    def test_plain_initialize_is_legacy(self) -> None:
        """The handshake without modern metadata is legacy."""
        msg = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                          "clientInfo": {"name": "c", "version": "1"}}}
        assert infer_era(msg, None) is Era.LEGACY

    def test_legacy_session_wins(self) -> None:
        """A request of a legacy session is legacy whatever it carries."""
        assert infer_era(call(), MODERN, legacy_session=True) is Era.LEGACY

    @pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"])
    def test_legacy_header_only(self, version: str) -> None:
        """A legacy version header with no modern metadata is legacy."""
        assert infer_era({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, version) is Era.LEGACY

    @pytest.mark.parametrize("header", [None, MODERN, "2099-01-01", "garbage"])
    def test_no_legacy_sign_is_modern(self, header: str | None) -> None:
        """Without legacy signs a request is modern (and the ladder judges what is missing)."""
        assert infer_era({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, header) is Era.MODERN

    def test_bare_aliases_are_not_modern_signs(self) -> None:
        """Bare protocolVersion in _meta is no modern sign: a legacy header then wins."""
        msg = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/list",
            "params": {"_meta": {"protocolVersion": MODERN}},
        }
        assert infer_era(msg, "2025-11-25") is Era.LEGACY

    @pytest.mark.parametrize("message", [None, "text"])
    def test_non_object(self, message: Any) -> None:
        """Unparseable or non-object bodies are judged in the modern era by default."""
        assert infer_era(message, None) is Era.MODERN

    def test_headerless_batch_is_legacy(self) -> None:
        """A batch without MCP-Protocol-Version speaks 2025-03-26 (no modern request is an
        array); with a modern version header it is a modern (invalid) body."""
        assert infer_era([1], None) is Era.LEGACY
        assert infer_era([1], "2025-11-25") is Era.LEGACY
        assert infer_era([1], MODERN) is Era.MODERN


class TestDecodeBody:
    """decode_body: JSON or the reason it is not."""

    def test_json(self) -> None:
        """A JSON body decodes with no error."""
        assert decode_body(b'{"a": 1}') == ({"a": 1}, None)

    @pytest.mark.parametrize("raw", [b"", b"  \n", b"{", b"\xff"])
    def test_not_json(self, raw: bytes) -> None:
        """Empty or malformed bodies give a reason and no message."""
        message, problem = decode_body(raw)
        assert message is None
        assert problem


class TestClientExtensions:
    """client_extensions: the extension ids a modern request declares."""

    def test_declared(self) -> None:
        """Keys of clientCapabilities.extensions are the declared extensions."""
        assert client_extensions(call(caps={"extensions": {TASKS: {}}})) == frozenset({TASKS})

    def test_none_declared(self) -> None:
        """Capabilities without extensions declare none."""
        assert client_extensions(call()) == frozenset()

    @pytest.mark.parametrize("message", [{"jsonrpc": "2.0", "method": "x"}, None])
    def test_unknown(self, message: Any) -> None:
        """Without clientCapabilities the declared extensions are unknown."""
        assert client_extensions(message) is None


class TestJudge:
    """judge: request rules on ingress, response rules at the given view."""

    def test_golden(self) -> None:
        """A conforming modern exchange has no finding and carries what was decoded."""
        j = judge(exchange())
        assert j.findings == ()
        assert j.era is Era.MODERN
        assert (j.method, j.rpc_id, j.kind) == ("tools/call", 1, Kind.REQUEST)
        assert j.request_message == call()
        assert j.response_messages == (CALL_RESULT,)

    def test_request_and_response_findings(self) -> None:
        """A mismatch answered with 500 reports the request and the response rule."""
        j = judge(exchange(call(name="other"), 500, b"", response_headers=HeaderMap()))
        assert rules(j) == [
            ("request.header.mismatch", -32020),
            ("response.header-mismatch-unanswered", -32020),
        ]
        assert [f.where for f in j.findings] == ["ingress", "origin"]

    def test_where(self) -> None:
        """Response findings name the view judge was told."""
        j = judge(
            exchange(call(name="other"), 500, b"", response_headers=HeaderMap()), where="egress"
        )
        assert j.findings[1].where == "egress"

    def test_no_response_seen(self) -> None:
        """Without a response only request rules run."""
        j = judge(exchange(call(name="other"), None))
        assert rules(j) == [("request.header.mismatch", -32020)]
        assert j.response_messages == ()

    def test_parse_error(self) -> None:
        """A request body that is not JSON is request.parse -32700."""
        j = judge(
            exchange(
                b"{not json",
                400,
                {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "x"}},
            )
        )
        assert rules(j) == [("request.parse", -32700)]
        assert j.request_message is None

    def test_era_given(self) -> None:
        """A given era overrides inference (a modern-looking request judged as legacy)."""
        j = judge(exchange(era=Era.LEGACY))
        assert j.era is Era.LEGACY
        assert rules(j) == [("request.legacy-leak", -32020)]

    def test_era_inferred_legacy(self) -> None:
        """A legacy initialize exchange is inferred legacy and accepted."""
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "c", "version": "1"},
            },
        }
        result = {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "serverInfo": {"name": "s", "version": "1"},
            },
        }
        j = judge(exchange(init, 200, result, request_headers=ACCEPT))
        assert j.era is Era.LEGACY
        assert j.findings == ()

    def test_legacy_session(self) -> None:
        """A legacy-session request without resultType in its result is accepted."""
        req = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {}},
        }
        res = {"jsonrpc": "2.0", "id": 1, "result": {"content": []}}
        j = judge(exchange(req, 200, res, request_headers=ACCEPT, legacy_session=True))
        assert j.era is Era.LEGACY
        assert j.findings == ()

    @pytest.mark.parametrize(("session", "era"), [(False, Era.UNKNOWN), (True, Era.LEGACY)])
    def test_non_post(self, session: bool, era: Era) -> None:
        """GET and DELETE carry no request rules; the era is legacy only in a session."""
        get_headers = HeaderMap.of({"Accept": "text/event-stream"})
        j = judge(Exchange(get_headers, b"", 405, http_method="GET", legacy_session=session))
        assert j.findings == ()
        assert j.era is era
        assert j.request is None
        assert (j.method, j.rpc_id, j.kind) == (None, None, None)

    def test_request_truncated(self) -> None:
        """A truncated request body is judged incompletely, never falsely."""
        j = judge(exchange(b'{"jsonrpc": "2.0", "id": 1, "meth', request_truncated=True))
        assert j.findings == ()
        assert j.request is None

    def test_response_truncated(self) -> None:
        """A truncated response body skips response rules but keeps request rules."""
        j = judge(exchange(call(name="other"), 500, b"<partial", response_truncated=True))
        assert rules(j) == [("request.header.mismatch", -32020)]

    def test_capabilities_and_client_extensions(self) -> None:
        """A task result passes only with the capability advertised and the client declaring."""
        declared = call(caps={"extensions": {TASKS: {}}})
        assert (
            judge(exchange(declared, 200, TASK_RESULT, capabilities=frozenset({TASKS}))).findings
            == ()
        )
        assert rules(judge(exchange(declared, 200, TASK_RESULT))) == [
            ("response.result-type.unknown", -32600)
        ]
        assert rules(
            judge(
                exchange(
                    call(caps={"extensions": {}}), 200, TASK_RESULT, capabilities=frozenset({TASKS})
                )
            )
        ) == [("response.payload.task", -32600)]

    def test_tool_schemas(self) -> None:
        """Tool schemas enable the Mcp-Param-* rung."""
        schema = {
            "type": "object",
            "properties": {"text": {"type": "string", "x-mcp-header": "Text"}},
        }
        j = judge(exchange(tool_schemas={"echo": schema}))
        assert rules(j) == [
            ("request.header.missing", -32020),
            ("response.header-mismatch-unanswered", -32020),
        ]

    def test_supported_versions(self) -> None:
        """The exchange's supported versions feed the ladder's last rung."""
        j = judge(exchange(supported_versions=("2030-01-01",)))
        assert ("request.version.unsupported", -32022) in rules(j)

    def test_sse_events_given(self) -> None:
        """Events decoded while streaming are judged instead of the body."""
        events = [SSEEvent(orjson.dumps({**CALL_RESULT, "id": 2}).decode())]
        body = encode_event(orjson.dumps(CALL_RESULT).decode())
        j = judge(exchange(response=body, response_headers=SSE, sse_events=events))
        assert rules(j) == [("sse.id", -32600)]

    def test_sse_body(self) -> None:
        """An SSE body is decoded and its response judged."""
        body = encode_event(orjson.dumps(CALL_RESULT).decode())
        j = judge(exchange(response=body, response_headers=SSE))
        assert j.findings == ()
        assert j.response_messages == (CALL_RESULT,)
