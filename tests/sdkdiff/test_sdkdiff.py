"""Tests of the SDK differential (``mcp_tap.sdkdiff``) and the ``sdk-diff`` command.

The SDK is never mocked: the typed view is checked against the real ``mcp`` 2.3.0
``ClientSession`` fed the same raw results, and against the real SDK server's output
(the demo origin, started by ``peers.run_origin``) read both raw and through ``mcp.Client``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import orjson
import pytest
from mcp import Client
from mcp.client.session import ClientSession
from peers import ACCEPT, LEGACY_VERSION, parse_sse, raw_modern_request, run_origin
from pydantic import ValidationError
from releases import raw_bundle

from mcp_tap.cli import main
from mcp_tap.core.rulecounts import WHERES
from mcp_tap.evidence import iter_records
from mcp_tap.sdkdiff import (
    DEFAULT_ALLOWLIST,
    EXAMPLES,
    TYPED_METHODS,
    Difference,
    SdkDiffReport,
    SdkDiffTally,
    SdkParseError,
    diff_bundles,
    diff_records,
    diff_result,
    differences,
    is_allowed,
    sdk_provenance,
    sdk_version,
    sdk_view,
)

SERVER_INFO = "io.modelcontextprotocol/serverInfo"

MODERN_TOOLS_LIST: dict[str, Any] = {
    "resultType": "complete",
    "ttlMs": 60000,
    "cacheScope": "public",
    "futureHint": {"batch": True},
    "tools": [
        {
            "name": "echo",
            "description": "Return the text unchanged.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
            "futureHint": "streaming",
        },
        {
            "name": "add",
            "description": "Add two integers.",
            "inputSchema": {"type": "object"},
        },
    ],
}

LEGACY_TOOLS_LIST: dict[str, Any] = {
    "tools": [{"name": "echo", "description": "Echo.", "inputSchema": {"type": "object"}}],
}

BAD_HEADER_TOOL: dict[str, Any] = {
    "name": "find",
    "description": "Find.",
    "inputSchema": {
        "type": "object",
        "properties": {"filter": {"type": "object", "x-mcp-header": "Filter"}},
    },
}


def rules(findings: list[Any]) -> list[tuple[str, str]]:
    """Return ``(rule, where)`` pairs of findings, in order."""
    return [(f.rule, f.where) for f in findings]


# --- the real SDK client, fed raw results --------------------------------------------------


class _Replay:
    """A dispatcher that answers every request with a canned raw result, as the wire would."""

    def __init__(self, answers: Mapping[str, dict[str, Any]]) -> None:
        self.answers = answers

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: Any = None
    ) -> dict[str, Any]:
        return copy.deepcopy(self.answers[method])

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: Any = None) -> None:
        return None


_EMPTY_LISTING = {
    "modern": {"resultType": "complete", "ttlMs": 0, "cacheScope": "private", "tools": []},
    "legacy": {"tools": []},
}


async def client_view(method: str, era: str, result: dict[str, Any]) -> dict[str, Any]:
    """Return what the real ``ClientSession`` hands the application for ``result``, dumped."""
    answers = {"tools/list": _EMPTY_LISTING[era], method: result}
    session = ClientSession(dispatcher=_Replay(answers))  # type: ignore[arg-type]
    if method not in ("initialize", "server/discover"):
        if era == "modern":
            session.adopt(
                types.DiscoverResult(
                    supported_versions=["2026-07-28"], capabilities=types.ServerCapabilities()
                )
            )
        else:
            session.adopt(
                types.InitializeResult(
                    protocol_version=LEGACY_VERSION,
                    capabilities=types.ServerCapabilities(),
                    server_info=types.Implementation(name="origin", version="1"),
                )
            )
    typed: Any
    if method == "initialize":
        typed = await session.initialize()
    elif method == "server/discover":
        typed = await session.discover()
    elif method == "tools/list":
        typed = await session.list_tools()
    elif method == "tools/call":
        typed = await session.call_tool("echo", {"text": "x"}, allow_input_required=True)
    elif method == "prompts/list":
        typed = await session.list_prompts()
    elif method == "prompts/get":
        typed = await session.get_prompt("greet", {"name": "x"}, allow_input_required=True)
    elif method == "resources/list":
        typed = await session.list_resources()
    elif method == "resources/templates/list":
        typed = await session.list_resource_templates()
    elif method == "resources/read":
        typed = await session.read_resource("demo://readme", allow_input_required=True)
    else:
        typed = await session.complete(
            types.PromptReference(name="greet"), {"name": "name", "value": "A"}
        )
    dumped: dict[str, Any] = typed.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


PARITY_CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("tools/list", "modern", MODERN_TOOLS_LIST),
    ("tools/list", "modern", {**MODERN_TOOLS_LIST, "tools": [BAD_HEADER_TOOL]}),
    ("tools/list", "modern", {**MODERN_TOOLS_LIST, "ttlMs": -5}),
    ("tools/list", "legacy", LEGACY_TOOLS_LIST),
    ("tools/list", "legacy", {**LEGACY_TOOLS_LIST, "ttlMs": 5, "cacheScope": "public"}),
    ("tools/call", "modern", {"resultType": "complete", "content": [], "futureHint": 1}),
    ("tools/call", "modern", {"resultType": "input_required", "requestState": "s1"}),
    ("tools/call", "legacy", {"content": [{"type": "text", "text": "x"}]}),
    ("prompts/list", "legacy", {"prompts": [{"name": "greet", "futureHint": True}]}),
    ("prompts/get", "modern", {"resultType": "complete", "messages": []}),
    (
        "resources/list",
        "modern",
        {"resultType": "complete", "ttlMs": 0, "cacheScope": "private", "resources": []},
    ),
    ("resources/templates/list", "legacy", {"resourceTemplates": []}),
    ("resources/read", "legacy", {"contents": [{"uri": "demo://readme", "text": "hi"}]}),
    ("completion/complete", "legacy", {"completion": {"values": ["Ada"], "total": 1}}),
    ("completion/complete", "modern", {"resultType": "complete", "completion": {"values": []}}),
    ("server/discover", "modern", {"supportedVersions": ["2026-07-28"], "capabilities": {}}),
    (
        "initialize",
        "legacy",
        {
            "protocolVersion": LEGACY_VERSION,
            "capabilities": {},
            "serverInfo": {"name": "origin", "version": "1"},
            "futureHint": 1,
        },
    ),
]

REJECTED_CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("tools/call", "modern", {"content": []}),
    ("tools/list", "modern", {"resultType": "complete", "tools": []}),
    ("tools/list", "legacy", {"tools": [{"name": "x"}]}),
    (
        "initialize",
        "legacy",
        {
            "protocolVersion": "2026-07-28",
            "capabilities": {},
            "serverInfo": {"name": "o", "version": "1"},
        },
    ),
]


class TestSdkClientParity:
    """The typed view is exactly what the real SDK ClientSession returns for the same result."""

    @pytest.mark.parametrize(("method", "era", "result"), PARITY_CASES)
    async def test_view_equals_client_session(
        self, method: str, era: str, result: dict[str, Any]
    ) -> None:
        """``sdk_view`` equals the real session's typed result, dumped the SDK's way."""
        assert sdk_view(method, era, result) == await client_view(method, era, result)

    @pytest.mark.parametrize(("method", "era", "result"), REJECTED_CASES)
    async def test_rejections_match_client_session(
        self, method: str, era: str, result: dict[str, Any]
    ) -> None:
        """A result the real session refuses raises SdkParseError here."""
        with pytest.raises((ValidationError, RuntimeError)):
            await client_view(method, era, result)
        with pytest.raises(SdkParseError):
            sdk_view(method, era, result)

    def test_parity_cases_cover_every_typed_method(self) -> None:
        """Every method the SDK types has at least one parity case."""
        assert {method for method, _, _ in PARITY_CASES} == TYPED_METHODS


class TestSdkVersion:
    """Era to protocol revision, as the SDK session would have negotiated it."""

    def test_era_defaults(self) -> None:
        """Modern is 2026-07-28 and legacy 2025-11-25 unless the request named another."""
        assert sdk_version("modern") == "2026-07-28"
        assert sdk_version("legacy") == "2025-11-25"
        assert sdk_version("legacy", "2025-03-26") == "2025-03-26"

    def test_version_of_the_wrong_era_is_ignored(self) -> None:
        """A modern revision named on a legacy exchange does not change the legacy revision."""
        assert sdk_version("legacy", "2026-07-28") == "2025-11-25"
        assert sdk_version("2025-06-18") == "2025-06-18"

    def test_unknown_era_is_rejected(self) -> None:
        """An unknown era is a ValueError, never a guess."""
        with pytest.raises(ValueError, match="era must be"):
            sdk_version("unknown")


class TestSdkView:
    """The SDK's typed view dumped back to the wire shape."""

    def test_modern_view_drops_unknown_fields(self) -> None:
        """Unknown fields vanish from the view; known ones survive unchanged."""
        view = sdk_view("tools/list", "modern", MODERN_TOOLS_LIST)
        assert "futureHint" not in view
        assert "futureHint" not in view["tools"][0]
        assert view["ttlMs"] == 60000
        assert view["cacheScope"] == "public"

    def test_input_is_not_mutated(self) -> None:
        """The SDK path clamps and strips a copy, never the caller's result."""
        result = {**MODERN_TOOLS_LIST, "ttlMs": -1}
        before = copy.deepcopy(result)
        sdk_view("tools/list", "modern", result)
        assert result == before

    def test_rejection_message_names_the_field(self) -> None:
        """An SDK rejection says which field failed."""
        with pytest.raises(SdkParseError, match="resultType"):
            sdk_view("tools/call", "modern", {"content": []})

    def test_non_object_result_is_rejected(self) -> None:
        """A result that is not a JSON object is an SdkParseError."""
        with pytest.raises(SdkParseError, match="not a JSON object"):
            sdk_view("tools/list", "modern", [])  # type: ignore[arg-type]

    def test_untyped_method_is_a_value_error(self) -> None:
        """A method the SDK does not type is a programming error."""
        with pytest.raises(ValueError, match="not a method the SDK types"):
            sdk_view("ping", "legacy", {})

    def test_provenance_names_the_sdk(self) -> None:
        """The provenance names mcp-types 2.3.0 and the applied tool filter."""
        assert sdk_provenance() == {"mcpTypes": "2.3.0", "mcp": "2.3.0", "toolHeaderFilter": True}


class TestDiffResult:
    """Per-result findings, with the bookkeeping allowlist."""

    def test_unknown_field_is_dropped_with_exact_paths(self) -> None:
        """``futureHint`` at top level and in a tool is ``sdk.dropped`` at its exact path."""
        findings = diff_result("tools/list", "modern", MODERN_TOOLS_LIST)
        assert rules(findings) == [
            ("sdk.dropped", "result.futureHint"),
            ("sdk.dropped", "result.tools[0].futureHint"),
        ]
        assert all(f.boundary == "sdk" and f.code is None for f in findings)

    def test_bookkeeping_drops_are_allowlisted_by_default(self) -> None:
        """Dropped resultType, ttlMs and cacheScope are allowed by the default allowlist."""
        result = {"resultType": "complete", "ttlMs": 5, "cacheScope": "public", "tools": []}
        assert diff_result("tools/list", "legacy", result) == []

    def test_bookkeeping_differences_are_reported_with_an_empty_allowlist(self) -> None:
        """With no allowlist a legacy session's stripped cache hints are reported as changed."""
        result = {"resultType": "complete", "ttlMs": 5, "cacheScope": "public", "tools": []}
        assert rules(diff_result("tools/list", "legacy", result, frozenset())) == [
            ("sdk.changed", "result.ttlMs"),
            ("sdk.changed", "result.cacheScope"),
        ]

    def test_modern_unknown_fields_alone_survive_an_empty_allowlist(self) -> None:
        """A complete modern listing differs only by its unknown fields, allowlist or not."""
        assert rules(diff_result("tools/list", "modern", MODERN_TOOLS_LIST, frozenset())) == [
            ("sdk.dropped", "result.futureHint"),
            ("sdk.dropped", "result.tools[0].futureHint"),
        ]

    def test_legacy_result_type_is_synthesized(self) -> None:
        """A legacy listing gets resultType, ttlMs and cacheScope the wire never carried."""
        findings = diff_result("tools/list", "legacy", LEGACY_TOOLS_LIST, frozenset())
        assert rules(findings) == [
            ("sdk.synthesized", "result.ttlMs"),
            ("sdk.synthesized", "result.cacheScope"),
            ("sdk.synthesized", "result.resultType"),
        ]
        assert '"complete"' in findings[2].message

    def test_legacy_synthesized_bookkeeping_is_allowlisted(self) -> None:
        """The default allowlist forgives the synthesized bookkeeping of a legacy listing."""
        assert diff_result("tools/list", "legacy", LEGACY_TOOLS_LIST) == []

    def test_legacy_tool_call_synthesizes_is_error(self) -> None:
        """A legacy tools/call without isError gets ``isError: false``, not allowlisted."""
        result = {"content": [{"type": "text", "text": "x"}]}
        assert rules(diff_result("tools/call", "legacy", result)) == [
            ("sdk.synthesized", "result.isError"),
        ]

    def test_modern_discover_without_result_type_is_synthesized(self) -> None:
        """The SDK accepts a modern discover result without resultType and invents complete."""
        result = {"supportedVersions": ["2026-07-28"], "capabilities": {}}
        assert rules(diff_result("server/discover", "modern", result, frozenset())) == [
            ("sdk.synthesized", "result.ttlMs"),
            ("sdk.synthesized", "result.cacheScope"),
            ("sdk.synthesized", "result.resultType"),
        ]

    def test_negative_ttl_is_changed(self) -> None:
        """The SDK floors a negative ttlMs to 0, which is a change."""
        result = {"resultType": "complete", "ttlMs": -5, "cacheScope": "private", "tools": []}
        assert rules(diff_result("tools/list", "modern", result, frozenset())) == [
            ("sdk.changed", "result.ttlMs"),
        ]

    def test_modern_client_removes_tool_with_invalid_header_annotation(self) -> None:
        """A tool whose x-mcp-header is invalid is removed from the listing: ``sdk.dropped``."""
        result = {**MODERN_TOOLS_LIST, "futureHint": None, "tools": [BAD_HEADER_TOOL]}
        findings = diff_result("tools/list", "modern", result)
        assert rules(findings) == [
            ("sdk.dropped", "result.futureHint"),
            ("sdk.dropped", "result.tools[0]"),
        ]
        assert "x-mcp-header" in findings[1].message

    def test_removed_tool_keeps_the_others_aligned(self) -> None:
        """Only the removed tool is reported; the tools after it compare at their own index."""
        result = {**MODERN_TOOLS_LIST, "tools": [BAD_HEADER_TOOL, *MODERN_TOOLS_LIST["tools"]]}
        assert rules(diff_result("tools/list", "modern", result)) == [
            ("sdk.dropped", "result.futureHint"),
            ("sdk.dropped", "result.tools[0]"),
            ("sdk.dropped", "result.tools[1].futureHint"),
        ]

    def test_null_for_a_known_field_is_not_a_drop(self) -> None:
        """A wire null for a field the model knows is the model's None, not a drop."""
        result = {**MODERN_TOOLS_LIST, "nextCursor": None, "futureHint": None}
        result["tools"] = [{"name": "a", "description": None, "inputSchema": {"type": "object"}}]
        assert rules(diff_result("tools/list", "modern", result)) == [
            ("sdk.dropped", "result.futureHint"),
        ]

    def test_json_type_change_is_changed(self) -> None:
        """A float ttlMs becomes an integer: same number, different JSON type, ``sdk.changed``."""
        result = {**MODERN_TOOLS_LIST, "ttlMs": 5.0, "futureHint": None}
        findings = differences("tools/list", "modern", result)
        assert [(d.rule, d.path) for d in findings][:1] == [("sdk.changed", "result.ttlMs")]

    def test_keys_that_are_not_identifiers_are_bracketed(self) -> None:
        """A dropped key with a slash is written in brackets."""
        result = {"resultType": "complete", "content": [], "isError": False, "io.example/extra": 1}
        assert rules(diff_result("tools/call", "modern", result)) == [
            ("sdk.dropped", 'result["io.example/extra"]'),
        ]

    def test_allowlist_by_full_and_index_free_path(self) -> None:
        """The allowlist matches a last key, a full path or a path with ``[]`` for indices."""
        diff = Difference("sdk.dropped", "result.tools[3].futureHint", "futureHint", "m")
        assert is_allowed(diff, {"futureHint"})
        assert is_allowed(diff, {"result.tools[3].futureHint"})
        assert is_allowed(diff, {"result.tools[].futureHint"})
        assert not is_allowed(diff, {"result.futureHint"})
        assert not is_allowed(diff, DEFAULT_ALLOWLIST)

    def test_rejection_raises(self) -> None:
        """A result the SDK rejects raises SdkParseError from diff_result too."""
        with pytest.raises(SdkParseError):
            diff_result("tools/list", "modern", {"tools": []})


# --- the real SDK server --------------------------------------------------------------------


def _answer(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC response of an HTTP answer, JSON or SSE."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        final = [e["data"] for e in parse_sse(response.text) if isinstance(e["data"], dict)]
        answer: dict[str, Any] = final[-1]
        return answer
    body: dict[str, Any] = response.json()
    return body


REAL_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("tools/list", {}),
    ("tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}}),
    ("tools/call", {"name": "echo", "arguments": {"text": "hi"}}),
    ("prompts/list", {}),
    ("prompts/get", {"name": "greet", "arguments": {"name": "Ada"}}),
    ("resources/list", {}),
    ("resources/templates/list", {}),
    ("resources/read", {"uri": "demo://readme"}),
    (
        "completion/complete",
        {
            "ref": {"type": "ref/prompt", "name": "greet"},
            "argument": {"name": "name", "value": "A"},
        },
    ),
]


@pytest.fixture(scope="module")
def origin() -> Iterator[str]:
    """The real SDK server (the demo origin), both eras on one endpoint."""
    with run_origin() as url:
        yield url


@pytest.fixture(scope="module")
def modern_results(origin: str) -> dict[str, list[dict[str, Any]]]:
    """Raw 2026-07-28 results of the real server, per method."""
    results: dict[str, list[dict[str, Any]]] = {}
    with httpx.Client(timeout=30) as http:
        for index, (method, params) in enumerate([("server/discover", {}), *REAL_CALLS]):
            headers, body = raw_modern_request(method, params, request_id=index + 1)
            answer = _answer(http.post(origin, json=body, headers=headers))
            results.setdefault(method, []).append(answer["result"])
    return results


@pytest.fixture(scope="module")
def legacy_results(origin: str) -> dict[str, list[dict[str, Any]]]:
    """Raw 2025-11-25 results of the real server after a real initialize handshake."""
    headers = {"Accept": ACCEPT, "Content-Type": "application/json"}
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": LEGACY_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "mcp-tap-tests", "version": "0"},
        },
    }
    results: dict[str, list[dict[str, Any]]] = {}
    with httpx.Client(timeout=30) as http:
        answer = http.post(origin, json=init, headers=headers)
        results["initialize"] = [_answer(answer)["result"]]
        session = {**headers, "MCP-Protocol-Version": LEGACY_VERSION}
        session["Mcp-Session-Id"] = answer.headers["mcp-session-id"]
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert http.post(origin, json=note, headers=session).status_code == 202
        for index, (method, params) in enumerate(REAL_CALLS):
            body = {"jsonrpc": "2.0", "id": index + 1, "method": method, "params": params}
            reply = _answer(http.post(origin, json=body, headers=session))
            results.setdefault(method, []).append(reply["result"])
        http.delete(origin, headers=session)
    return results


def _all_differences(
    results: dict[str, list[dict[str, Any]]], era: str
) -> dict[str, set[tuple[str, str]]]:
    found: dict[str, set[tuple[str, str]]] = {}
    for method, answers in results.items():
        for answer in answers:
            diffs = differences(method, era, answer)
            found.setdefault(method, set()).update((d.rule, d.path) for d in diffs)
    return found


_LEGACY_CACHEABLE = {
    ("sdk.synthesized", "result.ttlMs"),
    ("sdk.synthesized", "result.cacheScope"),
    ("sdk.synthesized", "result.resultType"),
}
_LEGACY_PLAIN = {("sdk.synthesized", "result.resultType")}


class TestRealSdkServer:
    """The real SDK server's own output through the real SDK's typed view."""

    def test_modern_output_has_no_differences_at_all(
        self, modern_results: dict[str, list[dict[str, Any]]]
    ) -> None:
        """Every 2026-07-28 result of the real server survives the SDK view unchanged."""
        assert set(modern_results) == TYPED_METHODS - {"initialize"}
        assert _all_differences(modern_results, "modern") == {m: set() for m in modern_results}

    def test_modern_tools_list_yields_no_findings(
        self, modern_results: dict[str, list[dict[str, Any]]]
    ) -> None:
        """A plain real tools/list result yields no finding, allowlist or not."""
        (listing,) = modern_results["tools/list"]
        assert any("x-mcp-header" in str(tool["inputSchema"]) for tool in listing["tools"])
        assert diff_result("tools/list", "modern", listing, frozenset()) == []

    def test_legacy_output_differs_only_by_synthesized_bookkeeping(
        self, legacy_results: dict[str, list[dict[str, Any]]]
    ) -> None:
        """On 2025-11-25 the SDK adds resultType (and the cache hints of cacheable results)."""
        assert _all_differences(legacy_results, "legacy") == {
            "initialize": set(),
            "tools/list": _LEGACY_CACHEABLE,
            "tools/call": _LEGACY_PLAIN,
            "prompts/list": _LEGACY_CACHEABLE,
            "prompts/get": _LEGACY_PLAIN,
            "resources/list": _LEGACY_CACHEABLE,
            "resources/templates/list": _LEGACY_CACHEABLE,
            "resources/read": _LEGACY_CACHEABLE,
            "completion/complete": _LEGACY_PLAIN,
        }

    def test_legacy_output_yields_no_findings_with_the_default_allowlist(
        self, legacy_results: dict[str, list[dict[str, Any]]]
    ) -> None:
        """The default allowlist covers everything the SDK adds to real legacy output."""
        for method, answers in legacy_results.items():
            for answer in answers:
                assert diff_result(method, "legacy", answer) == [], method

    @pytest.mark.parametrize("era", ["modern", "legacy"])
    async def test_view_equals_what_mcp_client_returns(
        self,
        era: str,
        origin: str,
        modern_results: dict[str, list[dict[str, Any]]],
        legacy_results: dict[str, list[dict[str, Any]]],
    ) -> None:
        """The view of the raw results equals what the real ``mcp.Client`` returns."""
        raw = modern_results if era == "modern" else legacy_results
        mode = "2026-07-28" if era == "modern" else "legacy"
        dump: dict[str, Any] = {"mode": "json", "by_alias": True, "exclude_none": True}
        async with Client(origin, mode=mode, cache=None) as client:
            listing = (await client.list_tools()).model_dump(**dump)
            called = (await client.call_tool("add", {"a": 2, "b": 3})).model_dump(**dump)
            prompts = (await client.list_prompts()).model_dump(**dump)
        assert listing == sdk_view("tools/list", era, raw["tools/list"][0])
        assert called == sdk_view("tools/call", era, raw["tools/call"][0])
        assert prompts == sdk_view("prompts/list", era, raw["prompts/list"][0])


# --- records, report and command ------------------------------------------------------------


def exchange(
    method: str,
    era: str,
    result: Any = None,
    *,
    exchange_id: str = "e1",
    error: dict[str, Any] | None = None,
    sse: bool = False,
    rpc_id: Any = 1,
    truncated: bool = False,
) -> dict[str, Any]:
    """Build an evidence exchange record whose origin answered ``result`` (or ``error``)."""
    response: dict[str, Any] = {"jsonrpc": "2.0", "id": rpc_id}
    if error is not None:
        response["error"] = error
    else:
        response["result"] = result
    origin: dict[str, Any] = {"status": 200, "truncated": truncated, "body": None, "sse": None}
    if sse:
        note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}
        origin["sse"] = [
            {"at": 1.0, "id": None, "event": None, "data": note},
            {"at": 2.0, "id": None, "event": None, "data": response},
        ]
    else:
        origin["body"] = response
    return {
        "kind": "exchange",
        "hop": "edge",
        "exchangeId": exchange_id,
        "era": era,
        "method": method,
        "rpcId": rpc_id,
        "ingress": {"headers": [], "body": {"jsonrpc": "2.0", "id": rpc_id, "method": method}},
        "origin": origin,
    }


class TestDiffRecords:
    """The differential over evidence records, with its counts and JSON."""

    def test_entries_and_findings(self) -> None:
        """Each compared exchange is one entry; findings collect the non-allowlisted ones."""
        report = diff_records(
            [
                exchange("tools/list", "modern", MODERN_TOOLS_LIST, exchange_id="a"),
                exchange("tools/list", "legacy", LEGACY_TOOLS_LIST, exchange_id="b", sse=True),
            ]
        )
        assert report.compared == 2
        assert report.skipped == 0
        assert [e.exchangeId for e in report.entries] == ["a", "b"]
        assert rules(report.findings) == [
            ("sdk.dropped", "result.futureHint"),
            ("sdk.dropped", "result.tools[0].futureHint"),
        ]
        assert rules(report.entries[1].allowed) == [
            ("sdk.synthesized", "result.ttlMs"),
            ("sdk.synthesized", "result.cacheScope"),
            ("sdk.synthesized", "result.resultType"),
        ]
        assert not report.ok

    def test_rejection_is_an_entry_not_a_crash(self) -> None:
        """An SDK rejection is reported as its own entry with an error."""
        report = diff_records([exchange("tools/call", "modern", {"content": []})])
        assert report.compared == 1
        (entry,) = report.entries
        assert entry.error is not None and "resultType" in entry.error
        assert rules(entry.findings) == [("sdk.rejected", "result")]
        assert not report.ok

    def test_skipped_records_are_counted_by_reason(self) -> None:
        """Untyped methods, unknown eras, errors and truncated bodies are skipped, by reason."""
        report = diff_records(
            [
                exchange("ping", "legacy", {}),
                exchange("tools/list", "unknown", LEGACY_TOOLS_LIST),
                exchange("tools/list", "modern", error={"code": -32601, "message": "no"}),
                exchange("tools/list", "modern", MODERN_TOOLS_LIST, truncated=True),
                {"kind": "gap", "lost": 3, "reason": "queue full"},
            ]
        )
        assert report.compared == 0
        assert report.skipped == 4
        assert report.skip_reasons == {
            "method not typed by the SDK": 1,
            "era unknown": 1,
            "error response": 1,
            "origin body truncated": 1,
        }
        assert report.ok

    def test_stream_the_client_left_after_its_response_is_compared(self) -> None:
        """A legacy SSE answer not read to its end, but holding the response, is compared."""
        record = exchange("tools/list", "legacy", LEGACY_TOOLS_LIST, sse=True, truncated=True)
        record["origin"]["ended"] = False
        assert (diff_records([record]).compared, diff_records([record]).skipped) == (1, 0)

    def test_sse_response_must_match_the_request_id(self) -> None:
        """An SSE response event with another id is not taken for the answer."""
        record = exchange("tools/list", "legacy", LEGACY_TOOLS_LIST, sse=True)
        record["rpcId"] = "1"
        report = diff_records([record])
        assert report.skip_reasons == {"no JSON-RPC response": 1}

    def test_request_version_and_initialize_revision(self) -> None:
        """Entries name the revision the request used; initialize is always 2025-11-25."""
        listing = exchange("tools/list", "legacy", LEGACY_TOOLS_LIST)
        listing["ingress"]["headers"] = [["mcp-protocol-version", "2025-06-18"]]
        init = exchange(
            "initialize",
            "legacy",
            {
                "protocolVersion": "2025-03-26",
                "capabilities": {},
                "serverInfo": {"name": "o", "version": "1"},
            },
        )
        report = diff_records([listing, init])
        assert [e.version for e in report.entries] == ["2025-06-18", "2025-11-25"]
        assert report.ok

    def test_extended_allowlist(self) -> None:
        """An extended allowlist moves futureHint from findings to allowed."""
        allowlist = DEFAULT_ALLOWLIST | {"futureHint"}
        report = diff_records([exchange("tools/list", "modern", MODERN_TOOLS_LIST)], allowlist)
        assert report.ok
        assert len(report.entries[0].allowed) == 2

    def test_to_json(self) -> None:
        """The JSON report carries counts, the allowlist, the SDK and per-entry findings."""
        report = diff_records([exchange("tools/list", "modern", MODERN_TOOLS_LIST)])
        data = report.to_json()
        assert isinstance(report, SdkDiffReport)
        assert data["ok"] is False
        assert data["compared"] == 1
        assert data["findings"] == 2
        assert data["allowlist"] == ["_meta", "cacheScope", "resultType", "ttlMs"]
        assert data["sdk"]["mcpTypes"] == "2.3.0"
        entry = data["entries"][0]
        assert entry["exchangeId"] == "e1"
        assert entry["version"] == "2026-07-28"
        assert entry["findings"][0]["rule"] == "sdk.dropped"
        assert entry["findings"][0]["where"] == "result.futureHint"
        orjson.dumps(data)



class TestBoundedReport:
    """Exact counts per rule, bounded example entries, whatever the number of exchanges."""

    @staticmethod
    def records() -> list[dict[str, Any]]:
        """25 exchanges with two drops each (then a rejection), 30 without a difference."""
        out = [exchange("tools/list", "modern", MODERN_TOOLS_LIST, exchange_id=f"d{n}")
               for n in range(25)]
        out.append(exchange("tools/call", "modern", {"content": []}, exchange_id="r0"))
        out += [exchange("tools/list", "legacy", LEGACY_TOOLS_LIST, exchange_id=f"c{n}")
                for n in range(30)]
        return out

    def test_counts_are_exact_and_entries_bounded(self) -> None:
        report = diff_records(self.records())
        assert report.compared == 56
        assert report.differences == 51 and report.rejected == 1
        assert report.allowed == 30 * 3  # the legacy ones: ttlMs, cacheScope, resultType
        dropped = report.by_rule["sdk.dropped"]
        assert (dropped.count, dropped.exchanges) == (50, 25)
        assert dropped.examples == [f"d{n}" for n in range(EXAMPLES)]
        assert sorted(dropped.where) == ["result.futureHint", "result.tools[0].futureHint"]
        assert report.by_rule["sdk.rejected"].examples == ["r0"]
        kept = [e.exchangeId for e in report.entries]
        assert kept == ([f"d{n}" for n in range(EXAMPLES)] + ["r0"]
                        + [f"c{n}" for n in range(EXAMPLES)])
        assert report.entries_omitted == 56 - len(kept)
        data = report.to_json()
        assert data["findings"] == 51 and data["entriesOmitted"] == 35
        assert data["byRule"]["sdk.dropped"]["count"] == 50
        assert not report.ok

    def test_merging_parts_equals_one_pass(self) -> None:
        records = self.records()
        for cut in (0, 5, 12, 26, 40, len(records)):
            tally = SdkDiffTally()
            tally.merge(diff_records(records[:cut]))
            tally.merge(diff_records(records[cut:]))
            assert tally.report().to_json() == diff_records(records).to_json(), cut

    def test_distinct_paths_are_bounded(self) -> None:
        tools = [{"name": f"t{n}", "description": "d", "inputSchema": {"type": "object"},
                  "futureHint": n} for n in range(WHERES + 10)]
        report = diff_records([exchange("tools/list", "legacy", {"tools": tools})])
        dropped = report.by_rule["sdk.dropped"]
        assert dropped.count == WHERES + 10
        assert len(dropped.where) == WHERES and dropped.more_where
        assert report.to_json()["byRule"]["sdk.dropped"]["moreWhere"] is True



class TestSdkDiffCommand:
    """``mcp-tap sdk-diff EVIDENCE`` through the real entry point."""

    def test_semantic_difference_exits_1(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A dropped futureHint exits 1 and is named in the text output."""
        bundle = raw_bundle(tmp_path / "b", [exchange("tools/list", "modern", MODERN_TOOLS_LIST)])
        assert main(["sdk-diff", str(bundle)]) == 1
        out = capsys.readouterr().out
        assert "sdk.dropped result.tools[0].futureHint" in out
        assert "sdk-diff: 1 compared, 0 skipped, 2 difference(s), 0 rejected" in out

    def test_allow_flag_extends_the_allowlist(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """``--allow futureHint`` makes the same evidence pass with exit 0."""
        bundle = raw_bundle(tmp_path / "b", [exchange("tools/list", "modern", MODERN_TOOLS_LIST)])
        assert main(["sdk-diff", str(bundle), "--allow", "futureHint", "--json"]) == 0
        data = orjson.loads(capsys.readouterr().out)
        assert data["ok"] is True
        assert "futureHint" in data["allowlist"]

    def test_clean_legacy_evidence_exits_0(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Legacy evidence whose only differences are bookkeeping exits 0 with JSON on stdout."""
        bundle = raw_bundle(tmp_path / "b", [exchange("tools/list", "legacy", LEGACY_TOOLS_LIST)])
        assert main(["sdk-diff", str(bundle), "--json"]) == 0
        data = orjson.loads(capsys.readouterr().out)
        assert data["compared"] == 1
        assert len(data["entries"][0]["allowed"]) == 3

    def test_evidence_directory_one_process_per_bundle(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """An evidence directory's bundles are diffed in parallel, merged in bundle order."""
        evidence = tmp_path / "evidence"
        evidence.mkdir()
        raw_bundle(evidence / "b1", [exchange("tools/list", "modern", MODERN_TOOLS_LIST,
                                              exchange_id="first"),
                                     {"kind": "gap", "lost": 1}])
        raw_bundle(evidence / "b2", [exchange("tools/call", "modern", {"content": []},
                                              exchange_id="second"),
                                     exchange("ping", "modern", {}, exchange_id="third")])
        assert main(["sdk-diff", str(evidence), "--json"]) == 1
        data = orjson.loads(capsys.readouterr().out)
        assert [e["exchangeId"] for e in data["entries"]] == ["first", "second"]
        assert (data["compared"], data["skipped"], data["rejected"]) == (2, 1, 1)
        assert data["skipReasons"] == {"method not typed by the SDK": 1}
        sequential = diff_records(
            r for b in ("b1", "b2") for r in iter_records(evidence / b)
            if r.get("kind") == "exchange")
        assert data == {**sequential.to_json(), "allowlist": data["allowlist"]}
        assert diff_bundles([evidence / "b1", evidence / "b2"], jobs=2).to_json() == \
            sequential.to_json()

    def test_rejection_exits_1(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A result the SDK rejects makes the command say so and exit 1."""
        bundle = raw_bundle(tmp_path / "b", [exchange("tools/call", "modern", {"content": []})])
        assert main(["sdk-diff", str(bundle)]) == 1
        assert "rejected: the SDK rejects the tools/call result" in capsys.readouterr().out

    def test_missing_bundle_exits_2(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A path that is not a bundle is bad input: one line on stderr, exit 2."""
        assert main(["sdk-diff", str(tmp_path / "nope")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("mcp-tap: error: ") and err.count("\n") == 1
