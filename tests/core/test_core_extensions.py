"""Issue 27, classes 4-7: the tasks extension on the wire, sub-capabilities of input
requests, server notifications against the schema, and the published schema.json
(``wire.schema`` on results, ``structuredContent`` against a learnt ``outputSchema``).

Every negative case asserts the exact rule id, code and strength.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

import orjson
import pytest

from mcp_tap.core import schema
from mcp_tap.core.eras import Era
from mcp_tap.core.exchange import Exchange, judge
from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.sse import encode_event

MODERN = "2026-07-28"
PV = "io.modelcontextprotocol/protocolVersion"
CC = "io.modelcontextprotocol/clientCapabilities"
SUB = "io.modelcontextprotocol/subscriptionId"
TASKS = "io.modelcontextprotocol/tasks"
WITH_TASKS = {"extensions": {TASKS: {}}}
STAMP = "2026-07-28T10:00:00Z"


def request(method: str, params: dict[str, Any] | None = None,
            caps: dict[str, Any] | None = None, rid: Any = 1) -> dict[str, Any]:
    """A modern request with its ``_meta``."""
    body = dict(params or {})
    body["_meta"] = {PV: MODERN, CC: caps if caps is not None else {}}
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": body}


def headers(message: dict[str, Any]) -> HeaderMap:
    """The headers a conforming client sends with ``message``."""
    pairs = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": message["method"],
    }
    params = message.get("params", {})
    for key in ("name", "uri", "taskId"):
        if key in params:
            pairs["Mcp-Name"] = params[key]
            break
    return HeaderMap.of(pairs)


def judged(message: dict[str, Any], status: int, answer: Any, *, sse: bool = False,
           capabilities: frozenset[str] = frozenset({TASKS}),
           outputs: dict[str, Any] | None = None, era: Era | None = None,
           version: str | None = None) -> list[tuple[str, int | None, str]]:
    """(rule, code, strength) of every finding on one exchange."""
    if sse:
        body = b"".join(encode_event(orjson.dumps(m).decode()) for m in answer)
        ctype = "text/event-stream"
    else:
        body, ctype = orjson.dumps(answer), "application/json"
    exchange = Exchange(
        request_headers=headers(message) if era is None else HeaderMap.of(
            {"Accept": "application/json, text/event-stream",
             "Content-Type": "application/json"}),
        request_body=orjson.dumps(message),
        response_status=status,
        response_headers=HeaderMap.of({"Content-Type": ctype}),
        response_body=body,
        era=era,
        capabilities=capabilities,
        output_schemas=outputs or {},
        legacy_session=era is Era.LEGACY,
        negotiated_version=version,
    )
    return [(f.rule, f.code, str(f.strength)) for f in judge(exchange).findings]


def task(status: str = "working", **extra: Any) -> dict[str, Any]:
    """A Task of the extension, as tasks/get answers it."""
    return {"resultType": "complete", "taskId": "t1", "status": status, "createdAt": STAMP,
            "lastUpdatedAt": STAMP, "ttlMs": None, **extra}


MISSING_CAP = {"code": -32021, "message": "Missing required client capability",
               "data": {"requiredCapabilities": {"extensions": {TASKS: {}}}}}


class TestTasksExtension:
    """ext-tasks-draft "Error Handling": -32021 for non-declaring clients."""

    @pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
    def test_undeclared_task_method_answered_with_result(self, method: str) -> None:
        """A task method from a client that did not declare the extension is owed -32021:
        request.capability.missing -32021 (must), and the result is response.expected-error
        carrying -32021 (must)."""
        msg = request(method, {"taskId": "t1"})
        found = judged(msg, 200, {"jsonrpc": "2.0", "id": 1, "result": task()})
        assert found == [("request.capability.missing", -32021, "must"),
                         ("response.expected-error", -32021, "must")]

    @pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
    def test_undeclared_task_method_answered_with_32021(self, method: str) -> None:
        """The owed answer (HTTP 400, -32021 naming the extension) leaves only the request's
        finding, which says why the server had to refuse."""
        msg = request(method, {"taskId": "t1"})
        found = judged(msg, 400, {"jsonrpc": "2.0", "id": 1, "error": MISSING_CAP})
        assert found == [("request.capability.missing", -32021, "must")]

    def test_declared_task_get_is_golden(self) -> None:
        """tasks/get from a declaring client, answered with a working Task: no finding."""
        msg = request("tasks/get", {"taskId": "t1"}, WITH_TASKS)
        assert judged(msg, 200, {"jsonrpc": "2.0", "id": 1, "result": task()}) == []

    def test_32021_with_200_is_an_http_status_finding(self) -> None:
        """-32021 must be HTTP 400: response.http-status -32600 (must)."""
        msg = request("tasks/cancel", {"taskId": "t1"})
        found = judged(msg, 200, {"jsonrpc": "2.0", "id": 1, "error": MISSING_CAP})
        assert found == [("request.capability.missing", -32021, "must"),
                         ("response.http-status", -32600, "must")]

    def _listen(self, caps: dict[str, Any], *notes: dict[str, Any],
                filt: dict[str, Any] | None = None) -> list[tuple[str, int | None, str]]:
        msg = request("subscriptions/listen",
                      {"notifications": filt if filt is not None else {"taskIds": ["t1"]}},
                      caps, rid=7)
        ack = {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
               "params": {"_meta": {SUB: 7}, "notifications": {"taskIds": ["t1"]}}}
        return judged(msg, 200, [ack, *notes], sse=True)

    @staticmethod
    def _status(task_id: str = "t1", status: str = "completed") -> dict[str, Any]:
        params = {k: v for k, v in task(status).items() if k != "resultType"}
        params.update({"taskId": task_id, "_meta": {SUB: 7}})
        if status == "completed":
            params["result"] = {"content": [{"type": "text", "text": "done"}], "isError": False}
        return {"jsonrpc": "2.0", "method": "notifications/tasks", "params": params}

    def test_listen_for_task_ids_is_golden(self) -> None:
        """A declaring client's listen stream of task status notifications for the taskIds
        it asked for: no finding (the filter knows the extension's taskIds)."""
        assert self._listen(WITH_TASKS, self._status(), self._status(status="working")) == []

    def test_listen_for_another_task_is_sse_listen(self) -> None:
        """A status notification for a task the filter did not list: sse.listen -32600."""
        assert self._listen(WITH_TASKS, self._status("t2")) == [("sse.listen", -32600, "must")]

    def test_listen_task_ids_undeclared_owes_32021(self) -> None:
        """taskIds without the extension: request.capability.missing -32021 (must); a stream
        instead of the error is response.expected-error -32021 (must)."""
        assert self._listen({}, self._status()) == [
            ("request.capability.missing", -32021, "must"),
            ("response.expected-error", -32021, "must"),
        ]

    def test_listen_without_task_ids_needs_no_extension(self) -> None:
        """A listen request that asks for no taskIds owes nothing to the extension."""
        ack = {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
               "params": {"_meta": {SUB: 7}, "notifications": {"toolsListChanged": True}}}
        msg = request("subscriptions/listen", {"notifications": {"toolsListChanged": True}},
                      {}, rid=7)
        assert judged(msg, 200, [ack], sse=True) == []


def input_required(*requests: dict[str, Any]) -> dict[str, Any]:
    """A tools/call answer asking the client for input."""
    return {"jsonrpc": "2.0", "id": 1, "result": {
        "resultType": "input_required",
        "inputRequests": {f"r{i}": r for i, r in enumerate(requests)}}}


def elicit(mode: str | None) -> dict[str, Any]:
    """An elicitation/create input request of ``mode`` (None: no mode field, form)."""
    params: dict[str, Any] = {"message": "Sign in"}
    if mode == "url":
        params.update(mode="url", url="https://example.com/auth", elicitationId="e1")
    else:
        params["requestedSchema"] = {"type": "object", "properties": {}}
        if mode is not None:
            params["mode"] = mode
    return {"method": "elicitation/create", "params": params}


def sample(**extra: Any) -> dict[str, Any]:
    """A sampling/createMessage input request."""
    return {"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
        "maxTokens": 10, **extra}}


TOOL = {"name": "t", "description": "a tool", "inputSchema": {"type": "object"}}


class TestSubCapabilities:
    """client/elicitation and client/sampling "Capabilities": the members of the declared
    capability, not only its key."""

    @pytest.mark.parametrize(
        ("declared", "mode", "ok"),
        [
            ({}, None, True),  # {} means form only
            ({}, "form", True),
            ({}, "url", False),
            ({"form": {}}, "url", False),
            ({"url": {}}, "url", True),
            ({"url": {}}, None, False),  # url only: a form request is a mode not declared
            ({"form": {}, "url": {}}, "url", True),
        ],
    )
    def test_elicitation_modes(self, declared: dict[str, Any], mode: str | None,
                               ok: bool) -> None:
        """A mode the client did not declare: response.payload.input-required -32600."""
        msg = request("tools/call", {"name": "t"}, {"elicitation": declared})
        found = judged(msg, 200, input_required(elicit(mode)))
        assert found == ([] if ok else [("response.payload.input-required", -32600, "must")])

    def test_tool_enabled_sampling_needs_sampling_tools(self) -> None:
        """tools in a sampling request to a client without sampling.tools:
        response.payload.input-required -32600 (must)."""
        msg = request("tools/call", {"name": "t"}, {"sampling": {}})
        found = judged(msg, 200, input_required(sample(tools=[TOOL])))
        assert found == [("response.payload.input-required", -32600, "must")]

    def test_tool_enabled_sampling_with_sampling_tools_is_golden(self) -> None:
        """The same request to a client that declared sampling.tools: no finding."""
        msg = request("tools/call", {"name": "t"}, {"sampling": {"tools": {}}})
        found = judged(msg, 200, input_required(sample(tools=[TOOL],
                                                        toolChoice={"mode": "auto"})))
        assert found == []

    def test_include_context_without_sampling_context_is_a_warning(self) -> None:
        """includeContext thisServer without sampling.context is a SHOULD NOT:
        response.payload.sampling-context -32600 (should)."""
        msg = request("tools/call", {"name": "t"}, {"sampling": {}})
        found = judged(msg, 200, input_required(sample(includeContext="thisServer")))
        assert found == [("response.payload.sampling-context", -32600, "should")]
        msg = request("tools/call", {"name": "t"}, {"sampling": {"context": {}}})
        assert judged(msg, 200, input_required(sample(includeContext="allServers"))) == []

    def test_input_required_task_asks_within_the_capabilities(self) -> None:
        """A tasks/get answer whose inputRequests ask for a URL elicitation of a client
        that declared elicitation {}: response.payload.input-required -32600 (must)."""
        caps = {**WITH_TASKS, "elicitation": {}}
        msg = request("tasks/get", {"taskId": "t1"}, caps)
        answer = {"jsonrpc": "2.0", "id": 1,
                  "result": task("input_required", inputRequests={"e": elicit("url")})}
        assert judged(msg, 200, answer) == [("response.payload.input-required", -32600, "must")]
        answer["result"]["inputRequests"] = {"e": elicit(None)}
        assert judged(msg, 200, answer) == []


class TestNotificationSchema:
    """Server notifications on request and listen streams are messages too."""

    def _stream(self, note: dict[str, Any]) -> list[tuple[str, int | None, str]]:
        msg = request("tools/call", {"name": "t"})
        msg["params"]["_meta"]["progressToken"] = "p"
        msg["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = "debug"
        done = {"jsonrpc": "2.0", "id": 1, "result": {
            "resultType": "complete", "content": [{"type": "text", "text": "ok"}]}}
        return judged(msg, 200, [note, done], sse=True)

    @pytest.mark.parametrize(
        "params",
        [
            {"level": "loud", "data": "x"},  # not a LoggingLevel
            {"data": "x"},  # no level
        ],
    )
    def test_bad_log_message(self, params: dict[str, Any]) -> None:
        """wire.schema.notification -32600 (must)."""
        note = {"jsonrpc": "2.0", "method": "notifications/message", "params": params}
        assert self._stream(note) == [("wire.schema.notification", -32600, "must")]

    def test_progress_not_a_number(self) -> None:
        """A progress that is not a number: wire.schema.notification -32600 (must)."""
        note = {"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": "p", "progress": "half"}}
        assert self._stream(note) == [("wire.schema.notification", -32600, "must")]

    def test_good_notifications_are_golden(self) -> None:
        """Well-formed log and progress notifications: no finding."""
        for note in (
            {"jsonrpc": "2.0", "method": "notifications/message",
             "params": {"level": "warning", "data": {"k": 1}}},
            {"jsonrpc": "2.0", "method": "notifications/progress",
             "params": {"progressToken": "p", "progress": 0.5, "total": 1}},
        ):
            assert self._stream(note) == []

    def test_listen_stream_notification(self) -> None:
        """An acknowledgement without its notifications field on a listen stream:
        wire.schema.notification -32600 (must)."""
        msg = request("subscriptions/listen", {"notifications": {"toolsListChanged": True}},
                      rid=7)
        ack = {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
               "params": {"_meta": {SUB: 7}}}
        found = judged(msg, 200, [ack], sse=True)
        assert found == [("wire.schema.notification", -32600, "must")]

    def test_legacy_stream_notification(self) -> None:
        """A legacy request stream is judged by its negotiated revision's schema."""
        msg = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "t", "arguments": {}}}
        note = {"jsonrpc": "2.0", "method": "notifications/message",
                "params": {"level": "verbose", "data": "x"}}
        done = {"jsonrpc": "2.0", "id": 1, "result": {"content": []}}
        for version in ("2025-11-25", "2025-03-26"):
            found = judged(msg, 200, [note, done], sse=True, era=Era.LEGACY, version=version)
            assert found == [("wire.schema.notification", -32600, "must")]


class TestPublishedSchema:
    """wire.schema is the published schema.json, stricter than the SDK's models."""

    def test_server_info_needs_name_and_version(self) -> None:
        """Implementation requires name and version: wire.schema -32600 (must)."""
        msg = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "c", "version": "1"}}}
        answer = {"jsonrpc": "2.0", "id": 1, "result": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {}}}
        found = judged(msg, 200, answer, era=Era.LEGACY, version="2025-11-25")
        assert found == [("wire.schema", -32600, "must")]
        answer["result"]["serverInfo"] = {"name": "s", "version": "1"}
        assert judged(msg, 200, answer, era=Era.LEGACY, version="2025-11-25") == []

    @pytest.mark.parametrize("revision", schema.SCHEMA_REVISIONS)
    def test_every_revision_ships(self, revision: str) -> None:
        """Each revision's schema is package data and names its messages."""
        requests, results, notes = schema._methods(revision)
        assert "tools/call" in requests and results["tools/call"] == "CallToolResult"
        assert notes["notifications/message"] == "LoggingMessageNotification"

    def test_format_is_an_annotation(self) -> None:
        """format: uri is not asserted (2020-12 makes it an annotation): a relative URI in a
        resource link passes."""
        result = {"resultType": "complete", "content": [
            {"type": "resource_link", "uri": "not a uri", "name": "x"}]}
        assert schema.result_problem("tools/call", MODERN, result) == ""


OUTPUT = {"type": "object", "properties": {"temperature": {"type": "number"}},
          "required": ["temperature"]}


class TestStructuredContent:
    """server/tools "Output Schema": structured results MUST conform to it."""

    def _call(self, result: dict[str, Any], outputs: dict[str, Any] | None = None
              ) -> list[tuple[str, int | None, str]]:
        msg = request("tools/call", {"name": "weather"})
        body = {"resultType": "complete", "content": [{"type": "text", "text": "{}"}], **result}
        return judged(msg, 200, {"jsonrpc": "2.0", "id": 1, "result": body},
                      outputs={"weather": OUTPUT} if outputs is None else outputs)

    def test_conforming_is_golden(self) -> None:
        """structuredContent that conforms: no finding."""
        assert self._call({"structuredContent": {"temperature": 21.5}}) == []

    @pytest.mark.parametrize(
        "result",
        [
            {"structuredContent": {"temperature": "warm"}},  # wrong type
            {"structuredContent": {}},  # required property missing
            {},  # no structured content at all, not an error result
        ],
    )
    def test_nonconforming(self, result: dict[str, Any]) -> None:
        """response.payload.structured-content -32600 (must)."""
        assert self._call(result) == [("response.payload.structured-content", -32600, "must")]

    def test_error_result_owes_no_structured_content(self) -> None:
        """An isError result without structuredContent: no finding."""
        assert self._call({"isError": True}) == []

    def test_unknown_tool_or_no_schema_is_not_judged(self) -> None:
        """No learnt outputSchema for the tool: nothing to judge."""
        assert self._call({"structuredContent": {"temperature": "warm"}}, outputs={}) == []

    def test_remote_ref_is_never_fetched(self) -> None:
        """A $ref to a network URI is not dereferenced (basic/index "$ref Resolution"), and
        so not judged."""
        remote = {"$ref": "https://example.invalid/schema.json"}
        found = self._call({"structuredContent": {"temperature": 1}},
                           outputs={"weather": remote})
        assert found == []


class TestTasksPayloads:
    """The rest of the extension's wire MUSTs: status notifications carry a whole Task,
    update and cancel are acknowledged with an empty result, legacy tasks are not the
    extension's."""

    def test_status_notification_without_its_result(self) -> None:
        """A completed task's notification without result: response.payload.task -32600."""
        msg = request("subscriptions/listen", {"notifications": {"taskIds": ["t1"]}},
                      WITH_TASKS, rid=7)
        ack = {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
               "params": {"_meta": {SUB: 7}, "notifications": {"taskIds": ["t1"]}}}
        params = {k: v for k, v in task("completed").items() if k != "resultType"}
        note = {"jsonrpc": "2.0", "method": "notifications/tasks",
                "params": {**params, "_meta": {SUB: 7}}}
        found = judged(msg, 200, [ack, note], sse=True)
        assert found == [("response.payload.task", -32600, "must")]

    @pytest.mark.parametrize("method", ["tasks/update", "tasks/cancel"])
    def test_ack_must_be_empty(self, method: str) -> None:
        """A Task instead of the empty acknowledgement: response.payload.task -32600."""
        params: dict[str, Any] = {"taskId": "t1"}
        if method == "tasks/update":
            params["inputResponses"] = {}
        msg = request(method, params, WITH_TASKS)
        found = judged(msg, 200, {"jsonrpc": "2.0", "id": 1, "result": task()})
        assert found == [("response.payload.task", -32600, "must")]
        empty = {"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete"}}
        assert judged(msg, 200, empty) == []

    def test_legacy_task_is_the_revisions_own(self) -> None:
        """A 2025-11-25 tasks/get answer (ttl, no result on completion) is judged by that
        revision's schema, not by the extension's Task: no finding."""
        msg = {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"taskId": "t1"}}
        answer = {"jsonrpc": "2.0", "id": 1, "result": {
            "taskId": "t1", "status": "completed", "createdAt": STAMP,
            "lastUpdatedAt": STAMP, "ttl": None}}
        assert judged(msg, 200, answer, era=Era.LEGACY, version="2025-11-25") == []


def test_legacy_get_stream_notifications_are_validated() -> None:
    """A legacy GET (listen) stream's notifications meet the session revision's schema:
    wire.schema.notification -32600 (must)."""
    note = {"jsonrpc": "2.0", "method": "notifications/message",
            "params": {"level": "loud", "data": "x"}}
    good = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    body = b"".join(encode_event(orjson.dumps(m).decode()) for m in (good, note))
    exchange = Exchange(
        request_headers=HeaderMap.of({"Accept": "text/event-stream",
                                      "Mcp-Session-Id": "s1",
                                      "MCP-Protocol-Version": "2025-11-25"}),
        request_body=b"", http_method="GET", response_status=200,
        response_headers=HeaderMap.of({"Content-Type": "text/event-stream"}),
        response_body=body, legacy_session=True, negotiated_version="2025-11-25",
    )
    found = [(f.rule, f.code, str(f.strength)) for f in judge(exchange).findings]
    assert found == [("wire.schema.notification", -32600, "must")]


SPEC = Path("/work/shared/spec")  # present on the project's machines, absent on a fresh CI box


@pytest.mark.parametrize("revision", schema.SCHEMA_REVISIONS)
def test_shipped_schema_is_the_published_one(revision: str) -> None:
    """The package's copy of each schema.json is the published file, byte for byte (the
    installed package carries it; this only catches a copy gone stale)."""
    published = SPEC / revision / "schema.json"
    if not published.is_file():
        pytest.skip("the published specification is not on this machine")
    shipped = resources.files("mcp_tap.core.specschema").joinpath(f"{revision}.json")
    assert shipped.read_bytes() == published.read_bytes()


def test_32021_must_name_the_tasks_extension() -> None:
    """The owed -32021 names the extension: without it, response.error.data -32600 (must)."""
    msg = request("tasks/get", {"taskId": "t1"})
    other = {"code": -32021, "message": "Missing required client capability",
             "data": {"requiredCapabilities": {"elicitation": {}}}}
    found = judged(msg, 400, {"jsonrpc": "2.0", "id": 1, "error": other})
    assert found == [("request.capability.missing", -32021, "must"),
                     ("response.error.data", -32600, "must")]


class TestLegacyServerRequests:
    """A legacy session's client declares its capabilities at initialize; the server's
    requests on its streams must stay within them, members included."""

    CALL: ClassVar[dict[str, Any]] = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                      "params": {"name": "t", "arguments": {}}}
    DONE: ClassVar[dict[str, Any]] = {"jsonrpc": "2.0", "id": 1, "result": {"content": []}}

    def _stream(self, server_request: dict[str, Any],
                declared: dict[str, Any] | None) -> list[tuple[str, int | None, str]]:
        message = {"jsonrpc": "2.0", "id": "s1", **server_request}
        exchange = Exchange(
            request_headers=HeaderMap.of({"Accept": "application/json, text/event-stream",
                                          "Content-Type": "application/json",
                                          "MCP-Protocol-Version": "2025-11-25"}),
            request_body=orjson.dumps(self.CALL), response_status=200,
            response_headers=HeaderMap.of({"Content-Type": "text/event-stream"}),
            response_body=b"".join(encode_event(orjson.dumps(m).decode())
                                   for m in (message, self.DONE)),
            era=Era.LEGACY, legacy_session=True, negotiated_version="2025-11-25",
            session_capabilities=declared,
        )
        return [(f.rule, f.code, str(f.strength)) for f in judge(exchange).findings]

    @pytest.mark.parametrize(
        ("request_", "declared"),
        [
            (elicit("url"), {"elicitation": {}}),
            (elicit(None), {"elicitation": {"url": {}}}),
            (sample(tools=[TOOL]), {"sampling": {}}),
            (elicit(None), {"sampling": {}}),  # no elicitation at all
            ({"method": "roots/list"}, {}),
        ],
    )
    def test_undeclared(self, request_: dict[str, Any], declared: dict[str, Any]) -> None:
        """sse.server-request -32600 (must)."""
        assert self._stream(request_, declared) == [("sse.server-request", -32600, "must")]

    @pytest.mark.parametrize(
        ("request_", "declared"),
        [
            (elicit(None), {"elicitation": {}}),
            (elicit("url"), {"elicitation": {"url": {}}}),
            (sample(tools=[TOOL]), {"sampling": {"tools": {}}}),
            ({"method": "roots/list"}, {"roots": {"listChanged": True}}),
            ({"method": "ping"}, {}),
        ],
    )
    def test_declared_is_golden(self, request_: dict[str, Any],
                                declared: dict[str, Any]) -> None:
        """Within the declared capabilities: no finding."""
        assert self._stream(request_, declared) == []

    def test_unknown_session_is_not_judged(self) -> None:
        """Without the session's initialize the tap knows nothing: no finding."""
        assert self._stream(elicit("url"), None) == []

    def test_include_context_is_a_warning(self) -> None:
        """includeContext without sampling.context: response.payload.sampling-context
        (should), in the legacy era too."""
        found = self._stream(sample(includeContext="allServers"), {"sampling": {}})
        assert found == [("response.payload.sampling-context", -32600, "should")]
