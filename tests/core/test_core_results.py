"""Tests for the result rules (mcp_tap.core.results): resultType by era, then method payloads."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from mcp_tap.core.eras import Era
from mcp_tap.core.findings import Boundary, Finding
from mcp_tap.core.results import check_result

TASKS = "io.modelcontextprotocol/tasks"
TOOL = {
    "name": "echo",
    "description": "Echo the text.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
}
CACHE = {"ttlMs": 60000, "cacheScope": "public"}
TASK = {
    "resultType": "task",
    "taskId": "t-1",
    "status": "working",
    "createdAt": "2026-07-28T10:00:00Z",
    "lastUpdatedAt": "2026-07-28T10:00:01.5+02:00",
    "ttlMs": 60000,
}


def modern(method: str | None, result: Any, **kw: Any) -> list[Finding]:
    """check_result in the modern era."""
    return check_result(method, result, Era.MODERN, **kw)


def legacy(method: str | None, result: Any, **kw: Any) -> list[Finding]:
    """check_result in the legacy era."""
    return check_result(method, result, Era.LEGACY, **kw)


def only(found: list[Finding]) -> Finding:
    """The single finding (result rules stop at the first problem)."""
    assert len(found) == 1, [(f.rule, f.message) for f in found]
    return found[0]


def tools_list(*tools: Any, **extra: Any) -> dict[str, Any]:
    """A modern complete tools/list result."""
    return {"resultType": "complete", "tools": list(tools), **CACHE, **extra}


def completion(**fields: Any) -> dict[str, Any]:
    """A modern complete completion/complete result."""
    return {"resultType": "complete", "completion": {"values": ["a", "b"], **fields}}


class TestCheckResultType:
    """check_result: the resultType discriminator, by era."""

    def test_modern_complete(self) -> None:
        """A modern complete tools/call result is accepted."""
        assert modern("tools/call", {"resultType": "complete", "content": []}) == []

    def test_modern_missing(self) -> None:
        """A modern result without resultType is response.result-type.missing -32600."""
        f = only(modern("tools/call", {"content": []}))
        assert f.rule == "response.result-type.missing"
        assert f.code == -32600
        assert f.boundary is Boundary.RESPONSE

    def test_legacy_missing_is_complete(self) -> None:
        """A legacy tools/list without resultType (or caching fields) is accepted."""
        assert legacy("tools/list", {"tools": [TOOL]}) == []

    def test_same_result_only_accepted_in_legacy(self) -> None:
        """The legacy-valid result above is rejected once judged as modern."""
        assert only(modern("tools/list", {"tools": [TOOL]})).rule == "response.result-type.missing"

    @pytest.mark.parametrize("rtype", ["partial", "Complete", "", "task"])
    def test_modern_unknown(self, rtype: str) -> None:
        """An unknown (or unadvertised extension) resultType is response.result-type.unknown."""
        f = only(modern("tools/call", {"resultType": rtype, "content": []}))
        assert f.rule == "response.result-type.unknown"
        assert f.code == -32600

    @pytest.mark.parametrize("rtype", [None, 1, True, ["complete"]])
    def test_not_a_string(self, rtype: Any) -> None:
        """A non-string resultType is response.result-type.unknown -32600, never complete."""
        f = only(modern("tools/call", {"resultType": rtype, "content": []}))
        assert f.rule == "response.result-type.unknown"
        assert f.code == -32600

    @pytest.mark.parametrize("rtype", ["input_required", "task"])
    def test_legacy_non_complete(self, rtype: str) -> None:
        """resultType values other than complete do not exist in the legacy era."""
        f = only(
            legacy("tools/call", {"resultType": rtype, "requestState": "s"}, capabilities=[TASKS])
        )
        assert f.rule == "response.result-type.unknown"
        assert f.code == -32600

    def test_not_an_object(self) -> None:
        """A result that is not an object is response.envelope -32600."""
        f = only(modern("tools/call", [1]))
        assert f.rule == "response.envelope"
        assert f.code == -32600

    def test_additive_unknown_fields(self) -> None:
        """Additive unknown fields (futureHint) are valid."""
        assert modern("tools/list", tools_list(TOOL, futureHint={"x": 1})) == []

    def test_wire_schema(self) -> None:
        """A result the official schema rejects is wire.schema -32600."""
        f = only(modern("tools/call", {"resultType": "complete", "content": [{"type": "text"}]}))
        assert f.rule == "wire.schema"
        assert f.code == -32600

    def test_wire_schema_legacy(self) -> None:
        """The legacy schema applies to legacy results."""
        f = only(legacy("tools/call", {"content": [{"type": "text"}]}))
        assert f.rule == "wire.schema"
        assert "2025-11-25" in f.message

    def test_unknown_method_not_schema_checked(self) -> None:
        """A method outside the schema is judged by the discriminator alone."""
        assert modern("x/custom", {"resultType": "complete", "anything": 1}) == []

    def test_where(self) -> None:
        """Findings carry the given view."""
        assert only(modern("tools/call", {}, where="egress")).where == "egress"


class TestCheckResultTask:
    """check_result: the tasks extension's task result (response.payload.task)."""

    def test_golden(self) -> None:
        """An advertised, well-formed task result of tools/call is accepted."""
        assert modern("tools/call", TASK, capabilities=[TASKS]) == []

    def test_null_ttl(self) -> None:
        """ttlMs may be null."""
        assert modern("tools/call", {**TASK, "ttlMs": None}, capabilities=[TASKS]) == []

    def test_client_declared(self) -> None:
        """A client that declared the extension may get a task."""
        assert (
            modern("tools/call", TASK, capabilities=[TASKS], client_extensions=frozenset({TASKS}))
            == []
        )

    def test_unadvertised(self) -> None:
        """A task result without the advertised capability is response.result-type.unknown."""
        f = only(modern("tools/call", TASK))
        assert f.rule == "response.result-type.unknown"
        assert f.code == -32600

    @pytest.mark.parametrize(
        ("change", "fragment"),
        [
            ({"status": "done"}, "status"),
            ({"status": None}, "status"),
            ({"taskId": ""}, "taskId"),
            ({"taskId": 5}, "taskId"),
            ({"createdAt": "yesterday"}, "createdAt"),
            ({"lastUpdatedAt": "2026-07-28"}, "lastUpdatedAt"),
            ({"ttlMs": -1}, "ttlMs"),
            ({"ttlMs": 1.5}, "ttlMs"),
            ({"ttlMs": True}, "ttlMs"),
            ({"pollIntervalMs": -5}, "pollIntervalMs"),
            ({"pollIntervalMs": "5"}, "pollIntervalMs"),
        ],
    )
    def test_bad_fields(self, change: dict[str, Any], fragment: str) -> None:
        """Each malformed task field is response.payload.task -32600."""
        f = only(modern("tools/call", {**TASK, **change}, capabilities=[TASKS]))
        assert f.rule == "response.payload.task"
        assert f.code == -32600
        assert fragment in f.message

    def test_missing_ttl(self) -> None:
        """ttlMs must be present."""
        task = {k: v for k, v in TASK.items() if k != "ttlMs"}
        f = only(modern("tools/call", task, capabilities=[TASKS]))
        assert f.rule == "response.payload.task"
        assert f.code == -32600

    def test_wrong_method(self) -> None:
        """A task result for anything but tools/call is response.payload.task."""
        f = only(modern("tools/list", TASK, capabilities=[TASKS]))
        assert f.rule == "response.payload.task"
        assert f.code == -32600

    def test_client_did_not_declare(self) -> None:
        """A task for a client that declared other extensions is response.payload.task."""
        f = only(
            modern(
                "tools/call",
                TASK,
                capabilities=[TASKS],
                client_extensions=frozenset({"x.example/other"}),
            )
        )
        assert f.rule == "response.payload.task"
        assert f.code == -32600


class TestCheckResultInputRequired:
    """check_result: input_required results (response.payload.input-required)."""

    @pytest.mark.parametrize("method", ["tools/call", "resources/read", "prompts/get"])
    def test_golden(self, method: str) -> None:
        """input_required with requestState is valid on the three retryable methods."""
        assert modern(method, {"resultType": "input_required", "requestState": "opaque"}) == []

    def test_input_requests(self) -> None:
        """input_required with inputRequests alone is valid."""
        assert modern("tools/call", {"resultType": "input_required", "inputRequests": {}}) == []

    def test_neither(self) -> None:
        """input_required without inputRequests and requestState is rejected."""
        f = only(modern("tools/call", {"resultType": "input_required"}))
        assert f.rule == "response.payload.input-required"
        assert f.code == -32600

    @pytest.mark.parametrize("method", ["tools/list", "server/discover", None])
    def test_wrong_method(self, method: str | None) -> None:
        """input_required on another method is rejected."""
        f = only(modern(method, {"resultType": "input_required", "requestState": "s"}))
        assert f.rule == "response.payload.input-required"
        assert f.code == -32600

    @pytest.mark.parametrize("change", [{"inputRequests": []}, {"requestState": 5}])
    def test_wrong_types(self, change: dict[str, Any]) -> None:
        """inputRequests must be an object and requestState a string."""
        f = only(modern("tools/call", {"resultType": "input_required", **change}))
        assert f.rule == "response.payload.input-required"
        assert f.code == -32600


class TestCheckResultToolsList:
    """check_result: tools/list payload rules (response.payload.tools-list)."""

    def test_golden(self) -> None:
        """A well-formed tools/list with caching fields is accepted."""
        assert modern("tools/list", tools_list(TOOL, {**TOOL, "name": "other"})) == []

    @pytest.mark.parametrize(
        "result",
        [
            {"resultType": "complete", "tools": {"echo": TOOL}, **CACHE},
            tools_list("echo"),
            tools_list({**TOOL, "name": ""}),
            tools_list({**TOOL, "name": 3}),
            tools_list({**TOOL, "description": 7}),
            tools_list({**TOOL, "inputSchema": {"type": "array"}}),
            tools_list({**TOOL, "inputSchema": True}),
            tools_list({k: v for k, v in TOOL.items() if k != "inputSchema"}),
        ],
        ids=[
            "not-array",
            "not-object",
            "empty-name",
            "name-type",
            "description-type",
            "array-schema",
            "bool-schema",
            "no-schema",
        ],
    )
    def test_bad(self, result: dict[str, Any]) -> None:
        """Each broken payload rule is response.payload.tools-list -32600 (must)."""
        f = only(modern("tools/list", result))
        assert (f.rule, f.code, f.strength) == ("response.payload.tools-list", -32600, "must")

    @pytest.mark.parametrize("description", [None, "", "   "])
    def test_description_is_optional(self, description: str | None) -> None:
        """schema.ts Tool: description is optional; absent or blank is no finding."""
        tool = {k: v for k, v in TOOL.items() if k != "description"}
        if description is not None:
            tool["description"] = description
        assert modern("tools/list", tools_list(tool)) == []

    def test_duplicate_names_are_a_warning(self) -> None:
        """Unique tool names are a SHOULD: response.payload.tool-names-unique (should)."""
        f = only(modern("tools/list", tools_list(TOOL, TOOL)))
        assert (f.rule, f.code, f.strength) == (
            "response.payload.tool-names-unique", -32600, "should")

    def test_legacy_payload_checked(self) -> None:
        """Payload rules apply in the legacy era too."""
        f = only(legacy("tools/list", {"tools": [{**TOOL, "inputSchema": {"type": "array"}}]}))
        assert f.rule == "response.payload.tools-list"

    @pytest.mark.parametrize(
        "props",
        [
            {"r": {"type": "string", "x-mcp-header": ""}},
            {"r": {"type": "string", "x-mcp-header": "My Region"}},
            {"r": {"type": "string", "x-mcp-header": "Region:Primary"}},
            {"r": {"type": "string", "x-mcp-header": "R\u00e9gion"}},
            {"r": {"type": "string", "x-mcp-header": "Region\t1"}},
            {"r": {"type": "number", "x-mcp-header": "Ratio"}},
            {"r": {"type": "array", "x-mcp-header": "List"}},
            {"a": {"type": "string", "x-mcp-header": "Region"},
             "b": {"type": "string", "x-mcp-header": "REGION"}},
            {"l": {"type": "array", "items": {"type": "string", "x-mcp-header": "Item"}}},
            {"o": {"anyOf": [{"type": "string", "x-mcp-header": "Choice"}]}},
        ],
        ids=["empty", "space", "colon", "non-ascii", "control", "number", "array",
             "case-duplicate", "items", "any-of"],
    )
    def test_x_mcp_header_constraints(self, props: dict[str, Any]) -> None:
        """Broken x-mcp-header declarations are response.payload.x-mcp-header (must)."""
        tool = {**TOOL, "inputSchema": {"type": "object", "properties": props}}
        f = only(modern("tools/list", tools_list(tool)))
        assert (f.rule, f.code, f.strength) == ("response.payload.x-mcp-header", -32600, "must")

    def test_x_mcp_header_valid(self) -> None:
        """Tokens on primitive properties reached through properties (nested too) are fine."""
        props = {"region": {"type": "string", "x-mcp-header": "Region"},
                 "meta": {"type": "object", "properties": {
                     "tenant": {"type": "integer", "x-mcp-header": "Tenant-Id"}}},
                 "flag": {"type": "boolean", "x-mcp-header": "Method"}}
        tool = {**TOOL, "inputSchema": {"type": "object", "properties": props}}
        assert modern("tools/list", tools_list(tool)) == []


class TestCheckResultCompletion:
    """check_result: completion/complete payload rules (response.payload.completion)."""

    @pytest.mark.parametrize("fields", [{}, {"total": 2, "hasMore": False}, {"total": 50}])
    def test_golden(self, fields: dict[str, Any]) -> None:
        """Values with an optional consistent total and boolean hasMore are accepted."""
        assert modern("completion/complete", completion(**fields)) == []

    def test_hundred_values(self) -> None:
        """Exactly 100 values are allowed."""
        result = {"resultType": "complete", "completion": {"values": ["v"] * 100}}
        assert modern("completion/complete", result) == []

    @pytest.mark.parametrize(
        "result",
        [
            {"resultType": "complete", "completion": ["a"]},
            {"resultType": "complete", "completion": {"values": ["v"] * 101}},
            {"resultType": "complete", "completion": {"values": ["a", 1]}},
            {"resultType": "complete", "completion": {"values": "a"}},
            completion(total=1),
            completion(total=-1),
            completion(total=2.0),
            completion(total=True),
            completion(hasMore="yes"),
        ],
        ids=[
            "not-object",
            "too-many",
            "non-string",
            "values-string",
            "total-below",
            "total-negative",
            "total-float",
            "total-bool",
            "has-more-string",
        ],
    )
    def test_bad(self, result: dict[str, Any]) -> None:
        """Each broken payload rule is response.payload.completion -32600."""
        f = only(modern("completion/complete", result))
        assert f.rule == "response.payload.completion"
        assert f.code == -32600


class TestCheckResultCaching:
    """check_result: SEP-2549 caching fields (response.payload.caching)."""

    @pytest.mark.parametrize(
        ("method", "result"),
        [
            ("server/discover", {"supportedVersions": ["2026-07-28"], "capabilities": {}}),
            ("tools/list", {"tools": []}),
            ("prompts/list", {"prompts": []}),
            ("resources/list", {"resources": []}),
            ("resources/templates/list", {"resourceTemplates": []}),
            ("resources/read", {"contents": []}),
        ],
    )
    def test_cacheable_methods_need_fields(self, method: str, result: dict[str, Any]) -> None:
        """Every cacheable complete result without ttlMs/cacheScope is rejected."""
        base = {"resultType": "complete", **result}
        f = only(modern(method, base))
        assert f.rule == "response.payload.caching"
        assert f.code == -32600
        assert modern(method, {**base, "ttlMs": 0, "cacheScope": "private"}) == []

    @pytest.mark.parametrize(
        "fields",
        [
            {"ttlMs": -1, "cacheScope": "public"},
            {"ttlMs": 1.5, "cacheScope": "public"},
            {"ttlMs": True, "cacheScope": "public"},
            {"ttlMs": 10, "cacheScope": "shared"},
            {"ttlMs": 10},
        ],
    )
    def test_bad_values(self, fields: dict[str, Any]) -> None:
        """A negative, non-integer or boolean ttlMs, or another cacheScope, is rejected."""
        result = {"resultType": "complete", "tools": [TOOL], **fields}
        f = only(modern("tools/list", result))
        assert f.rule == "response.payload.caching"
        assert f.code == -32600

    def test_not_cacheable(self) -> None:
        """tools/call results need no caching fields."""
        assert modern("tools/call", {"resultType": "complete", "content": []}) == []

    def test_input_required_not_cached(self) -> None:
        """An input_required resources/read needs no caching fields."""
        assert modern("resources/read", {"resultType": "input_required", "requestState": "s"}) == []

    def test_legacy_not_required(self) -> None:
        """The legacy era has no caching fields."""
        assert legacy("resources/read", {"contents": []}) == []


class TestCheckResultTaskPolling:
    """check_result: tasks/get answers per status (tasks extension "Task Polling")."""

    BASE: ClassVar[dict[str, Any]] = {k: v for k, v in TASK.items() if k != "resultType"}

    @pytest.mark.parametrize(
        "fields",
        [{"status": "working"}, {"status": "cancelled"},
         {"status": "completed", "result": {"content": []}},
         {"status": "failed", "error": {"code": -32603, "message": "x"}},
         {"status": "input_required", "inputRequests": {}}],
    )
    def test_golden(self, fields: dict[str, Any]) -> None:
        """Each status with its payload is accepted."""
        result = {"resultType": "complete", **self.BASE, **fields}
        assert [f for f in modern("tasks/get", result) if f.rule != "wire.schema"] == []

    @pytest.mark.parametrize(
        "fields",
        [{"status": "completed"}, {"status": "failed"}, {"status": "input_required"},
         {"status": "done"}, {"status": "working", "taskId": ""}],
    )
    def test_bad(self, fields: dict[str, Any]) -> None:
        """A status without its payload (completed without result, ...) is response.payload.task."""
        f = only(modern("tasks/get", {"resultType": "complete", **self.BASE, **fields}))
        assert (f.rule, f.code, f.strength) == ("response.payload.task", -32600, "must")


class TestCheckResultInputCapabilities:
    """check_result: inputRequests only for capabilities the client declared (mrtr)."""

    ELICIT: ClassVar[dict[str, Any]] = {
        "method": "elicitation/create",
        "params": {"message": "?", "requestedSchema": {"type": "object", "properties": {}}},
    }

    def result(self, request: Any) -> dict[str, Any]:
        """An input_required result asking for one input."""
        return {"resultType": "input_required", "inputRequests": {"a": request}}

    def test_declared(self) -> None:
        """An elicitation for a client that declared elicitation is accepted."""
        found = modern("tools/call", self.result(self.ELICIT),
                       client_capabilities={"elicitation": {}})
        assert [f for f in found if f.rule != "wire.schema"] == []

    def test_undeclared(self) -> None:
        """An elicitation for a client without the capability is response.payload.input-required."""
        f = only(modern("tools/call", self.result(self.ELICIT), client_capabilities={}))
        assert (f.rule, f.code, f.strength) == ("response.payload.input-required", -32600, "must")

    def test_not_an_input_request(self) -> None:
        """An input request of another kind (tools/call) is response.payload.input-required."""
        f = only(modern("tools/call", self.result({"method": "tools/call", "params": {}}),
                        client_capabilities={"elicitation": {}}))
        assert f.rule == "response.payload.input-required"


class TestCompleteResultCache:
    """A complete result's verdict is cached by everything it depends on (schema.VERDICTS)."""

    @pytest.fixture(autouse=True)
    def fresh_cache(self) -> Any:
        """Each test starts with an empty cache, so the first judgement of a value is a miss."""
        from mcp_tap.core import schema

        schema.VERDICTS.clear()
        yield schema.VERDICTS
        schema.VERDICTS.clear()

    def test_a_repeat_is_a_hit_with_the_same_findings(self, fresh_cache: Any) -> None:
        """The second judgement of an equal result comes from the cache and agrees."""
        bad = tools_list(TOOL, {**TOOL, "name": ""})
        first = modern("tools/list", bad)
        misses = fresh_cache.misses
        assert modern("tools/list", {**bad}) == first and fresh_cache.misses == misses
        assert only(first).rule == "response.payload.tools-list"

    @pytest.mark.parametrize("change", [
        {"ttlMs": -1},                                       # a payload rule (caching)
        {"tools": [{**TOOL, "inputSchema": {"type": "string"}}]},  # a tools-list rule
        {"tools": [{**TOOL, "title": 5}]},                   # the schema alone
        {"tools": [TOOL, TOOL]},                             # a SHOULD (names unique)
    ])
    def test_results_equal_but_one_field_get_their_own_verdicts(
        self, change: dict[str, Any]
    ) -> None:
        """Judged after the clean result, in either order, each keeps its own verdict."""
        good, bad = tools_list(TOOL), tools_list(TOOL, **change) | change
        assert modern("tools/list", good) == []
        found = modern("tools/list", bad)
        assert found
        assert modern("tools/list", good) == []
        assert modern("tools/list", bad) == found

    def test_the_method_era_and_revision_are_part_of_the_key(self) -> None:
        """One result: a tools/list answer is not a prompts/list answer; the caching rule
        is modern only; an unknown revision has no schema to break."""
        result = tools_list(TOOL)
        assert modern("tools/list", result) == []
        assert only(modern("prompts/list", result)).rule == "wire.schema"
        uncached = {"resultType": "complete", "tools": [TOOL]}
        assert only(modern("tools/list", uncached)).rule == "response.payload.caching"
        assert legacy("tools/list", uncached) == []
        # The same revision in both eras: the payload rule is modern only, the schema's not.
        same = {"version": "2026-07-28"}
        assert only(modern("tools/list", uncached, **same)).rule == "response.payload.caching"
        assert only(legacy("tools/list", uncached, **same)).rule == "wire.schema"
        prompts = {"resultType": "complete", "prompts": "x", **CACHE}
        assert only(modern("prompts/list", prompts, version="2026-07-28")).rule == "wire.schema"
        assert modern("prompts/list", prompts, version="1999-01-01") == []

    def test_a_finding_is_placed_where_it_was_seen_each_time(self) -> None:
        """A cached finding seen again at another place carries that place."""
        bad = tools_list(TOOL, ttlMs=-1)
        assert only(modern("tools/list", bad, where="origin")).where == "origin"
        assert only(modern("tools/list", bad, where="egress sse[3]")).where == "egress sse[3]"
        assert only(modern("tools/list", bad, where="origin")).where == "origin"

    def test_an_equal_value_of_another_type_is_another_key(self) -> None:
        """1 and 1.0 and true are written apart: the schema tells them apart."""
        assert modern("tools/list", tools_list(TOOL, ttlMs=1)) == []
        assert only(modern("tools/list", tools_list(TOOL, ttlMs=1.0))).rule == (
            "response.payload.caching")
        assert only(modern("tools/list", tools_list(TOOL, ttlMs=True))).rule == (
            "response.payload.caching")
