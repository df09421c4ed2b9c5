"""Tests for the request ladder (mcp_tap.core.requests): every request rule, and its order."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from mcp_tap.core.eras import Era
from mcp_tap.core.findings import Boundary, Finding
from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.jsonrpc import Kind
from mcp_tap.core.requests import (
    ParamHeader,
    RequestContext,
    RequestVerdict,
    check_request,
    param_headers,
)

MODERN = "2026-07-28"
UNSUPPORTED = "2099-01-01"
PV = "io.modelcontextprotocol/protocolVersion"
CC = "io.modelcontextprotocol/clientCapabilities"

LOOKUP_SCHEMA = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "limit": {"type": "integer", "x-mcp-header": "Limit"},
        "ratio": {"type": "number", "x-mcp-header": "Ratio"},
        "verbose": {"type": "boolean", "x-mcp-header": "Verbose"},
        "query": {"type": "string"},
    },
}


def meta(version: str = MODERN) -> dict[str, Any]:
    """The two required namespaced `_meta` keys."""
    return {PV: version, CC: {}}


def modern(method: str, *, id: Any = 1, version: str = MODERN, **params: Any) -> dict[str, Any]:
    """A modern request carrying `_meta` with ``version``."""
    return {
        "jsonrpc": "2.0",
        "id": id,
        "method": method,
        "params": {**params, "_meta": meta(version)},
    }


def call(name: str = "echo", **arguments: Any) -> dict[str, Any]:
    """A modern tools/call request."""
    return modern("tools/call", name=name, arguments=arguments)


def headers(
    method: str, *, version: str | None = MODERN, name: str | None = None, **extra: str
) -> HeaderMap:
    """Mirrored headers for a request (``None`` leaves one out)."""
    pairs: list[tuple[str, str]] = []
    if version is not None:
        pairs.append(("MCP-Protocol-Version", version))
    pairs.append(("Mcp-Method", method))
    if name is not None:
        pairs.append(("Mcp-Name", name))
    pairs += [(k.replace("_", "-"), v) for k, v in extra.items()]
    return HeaderMap(tuple(pairs))


def judge_modern(h: HeaderMap, message: Any, **ctx: Any) -> RequestVerdict:
    """Run the modern ladder."""
    return check_request(h, message, RequestContext(Era.MODERN, **ctx))


def judge_legacy(h: HeaderMap, message: Any, **ctx: Any) -> RequestVerdict:
    """Run the legacy branch."""
    return check_request(h, message, RequestContext(Era.LEGACY, **ctx))


def only(verdict: RequestVerdict) -> Finding:
    """The single finding of a verdict (the ladder stops at the first failing rung)."""
    assert len(verdict.findings) == 1, verdict.findings
    return verdict.findings[0]


def lookup(h: dict[str, str], **arguments: Any) -> RequestVerdict:
    """A tools/call of `lookup` with parameter headers, judged with its schema known."""
    return judge_modern(
        headers("tools/call", name="lookup", **h),
        call("lookup", **arguments),
        tool_schemas={"lookup": LOOKUP_SCHEMA},
    )


class TestParamHeaders:
    """param_headers: x-mcp-header declarations reachable through properties."""

    def test_top_level_and_nested(self) -> None:
        """Declarations are found at the top level and through nested properties."""
        schema = {
            "type": "object",
            "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "opts": {
                    "type": "object",
                    "properties": {"depth": {"type": "integer", "x-mcp-header": "Depth"}},
                },
                "plain": {"type": "string"},
            },
        }
        assert param_headers(schema) == (
            ParamHeader(("region",), "Region", "string"),
            ParamHeader(("opts", "depth"), "Depth", "integer"),
        )

    @pytest.mark.parametrize(
        "schema",
        [
            None,
            [],
            {"type": "object"},
            {"properties": []},
            {"properties": {"a": {"x-mcp-header": ""}}},
            {"properties": {"a": "x"}},
        ],
    )
    def test_nothing_declared(self, schema: Any) -> None:
        """Schemas without usable declarations yield nothing."""
        assert param_headers(schema) == ()

    def test_untyped_declaration(self) -> None:
        """A declaration without a string type records None as its type."""
        assert param_headers({"properties": {"a": {"x-mcp-header": "A"}}}) == (
            ParamHeader(("a",), "A", None),
        )


class TestCheckRequestGolden:
    """check_request (modern): conforming requests produce no finding."""

    def test_list(self) -> None:
        """A tools/list with matching headers and metadata is accepted."""
        v = judge_modern(headers("tools/list"), modern("tools/list"))
        assert v.findings == ()
        assert v.era is Era.MODERN
        assert v.version == MODERN

    def test_call_with_name(self) -> None:
        """A tools/call with a matching Mcp-Name is accepted."""
        assert judge_modern(headers("tools/call", name="echo"), call(text="hi")).findings == ()

    @pytest.mark.parametrize(
        ("method", "params", "name"),
        [
            ("resources/read", {"uri": "file:///a.txt"}, "file:///a.txt"),
            ("prompts/get", {"name": "greet"}, "greet"),
        ],
    )
    def test_name_routed_methods(self, method: str, params: dict[str, Any], name: str) -> None:
        """Mcp-Name mirrors params.uri for resources/read and params.name for prompts/get."""
        assert judge_modern(headers(method, name=name), modern(method, **params)).findings == ()

    def test_header_names_any_case(self) -> None:
        """Header names match in any letter case."""
        h = HeaderMap.of(
            {"mcp-protocol-version": MODERN, "MCP-METHOD": "tools/call", "mCp-NaMe": "echo"}
        )
        assert judge_modern(h, call(text="hi")).findings == ()

    def test_identical_duplicates_accepted(self) -> None:
        """Identical duplicate headers count as one value."""
        h = HeaderMap.of(
            [
                ["MCP-Protocol-Version", MODERN],
                ["Mcp-Method", "tools/list"],
                ["mcp-method", "tools/list"],
            ]
        )
        assert judge_modern(h, modern("tools/list")).findings == ()

    def test_optional_meta_keys(self) -> None:
        """Well-typed optional clientInfo and logLevel are accepted."""
        msg = modern("tools/list")
        msg["params"]["_meta"]["io.modelcontextprotocol/clientInfo"] = {"name": "c", "version": "1"}
        msg["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = "debug"
        assert judge_modern(headers("tools/list"), msg).findings == ()

    def test_string_id(self) -> None:
        """A string id is a valid request id."""
        v = judge_modern(headers("tools/list"), modern("tools/list", id="req-7"))
        assert v.findings == ()
        assert v.id == "req-7"

    def test_unknown_method_passes_the_ladder(self) -> None:
        """A method outside the schema is left to the server (answered -32601 there)."""
        assert judge_modern(headers("x/custom"), modern("x/custom")).findings == ()


class TestCheckRequestEnvelope:
    """check_request: request.envelope and request.parse."""

    @pytest.mark.parametrize("bad_id", [None, True, 1.0])
    def test_bad_id_type(self, bad_id: Any) -> None:
        """A null, boolean or float request id is request.envelope -32600."""
        f = only(judge_modern(headers("tools/list"), modern("tools/list", id=bad_id)))
        assert f.rule == "request.envelope"
        assert f.code == -32600
        assert f.boundary is Boundary.REQUEST
        assert f.where == "ingress"

    def test_wrong_jsonrpc_version(self) -> None:
        """jsonrpc other than "2.0" is request.envelope -32600."""
        msg = modern("tools/list")
        msg["jsonrpc"] = "1.0"
        f = only(judge_modern(headers("tools/list"), msg))
        assert f.rule == "request.envelope"
        assert f.code == -32600

    def test_batch_in_modern(self) -> None:
        """A batch (JSON array) is request.envelope -32600 in the modern era."""
        f = only(judge_modern(headers("tools/list"), [modern("tools/list")]))
        assert f.rule == "request.envelope"
        assert f.code == -32600

    def test_response_posted_by_client(self) -> None:
        """A modern client POSTing a JSON-RPC response is request.envelope -32600."""
        f = only(judge_modern(HeaderMap(), {"jsonrpc": "2.0", "id": 1, "result": {}}))
        assert f.rule == "request.envelope"
        assert f.code == -32600

    def test_parse_error(self) -> None:
        """A body that is not JSON is request.parse -32700, whatever the message argument."""
        v = check_request(
            HeaderMap(), {"ignored": True}, RequestContext(Era.MODERN), parse_error="not JSON"
        )
        f = only(v)
        assert f.rule == "request.parse"
        assert f.code == -32700
        assert v.kind is Kind.INVALID

    def test_envelope_beats_missing_meta(self) -> None:
        """A bad id is reported before missing metadata."""
        msg = {"jsonrpc": "2.0", "id": None, "method": "tools/list"}
        assert only(judge_modern(HeaderMap(), msg)).rule == "request.envelope"


class TestCheckRequestMeta:
    """check_request: request.meta.missing (-32602) for absent or mistyped metadata."""

    @pytest.mark.parametrize(
        ("params", "fragment"),
        [
            (None, "_meta is missing"),
            ({}, "_meta is missing"),
            ({"_meta": []}, "must be an object"),
            ({"_meta": {PV: MODERN}}, CC),
            ({"_meta": {CC: {}}}, PV),
            ({"_meta": {"protocolVersion": MODERN, "clientCapabilities": {}}}, "bare alias"),
            ({"_meta": {PV: 20260728, CC: {}}}, "must be a string"),
            ({"_meta": {PV: MODERN, CC: []}}, "must be an object"),
            (
                {"_meta": {PV: MODERN, CC: {}, "io.modelcontextprotocol/clientInfo": "c"}},
                "must be an object",
            ),
            (
                {"_meta": {PV: MODERN, CC: {}, "io.modelcontextprotocol/logLevel": 3}},
                "must be a string",
            ),
        ],
    )
    def test_missing_or_mistyped(self, params: Any, fragment: str) -> None:
        """Each missing or mistyped metadata shape is request.meta.missing -32602."""
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        if params is not None:
            msg["params"] = params
        f = only(judge_modern(headers("tools/list"), msg))
        assert f.rule == "request.meta.missing"
        assert f.code == -32602
        assert fragment in f.message

    def test_missing_meta_beats_header_checks(self) -> None:
        """Missing metadata wins over missing and mismatched headers."""
        msg = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo"}}
        h = HeaderMap.of({"Mcp-Method": "prompts/get", "Mcp-Name": "other"})
        f = only(judge_modern(h, msg))
        assert f.rule == "request.meta.missing"
        assert f.code == -32602


class TestCheckRequestHeaders:
    """check_request: missing, duplicate, mismatched and badly encoded mirrored headers."""

    def test_missing_version_header(self) -> None:
        """An absent MCP-Protocol-Version is request.header.missing -32020."""
        f = only(judge_modern(headers("tools/list", version=None), modern("tools/list")))
        assert f.rule == "request.header.missing"
        assert f.code == -32020
        assert "MCP-Protocol-Version" in f.message

    def test_missing_method_header(self) -> None:
        """An absent Mcp-Method is request.header.missing -32020."""
        h = HeaderMap.of({"MCP-Protocol-Version": MODERN})
        f = only(judge_modern(h, modern("tools/list")))
        assert f.rule == "request.header.missing"
        assert f.code == -32020
        assert "Mcp-Method" in f.message

    def test_missing_name_header(self) -> None:
        """An absent Mcp-Name on tools/call is request.header.missing -32020."""
        f = only(judge_modern(headers("tools/call"), call(text="x")))
        assert f.rule == "request.header.missing"
        assert f.code == -32020
        assert "Mcp-Name" in f.message

    def test_name_header_not_required_for_unrouted_method(self) -> None:
        """tools/list carries no Mcp-Name and needs none."""
        assert judge_modern(headers("tools/list"), modern("tools/list")).findings == ()

    @pytest.mark.parametrize("name", ["MCP-Protocol-Version", "Mcp-Method", "Mcp-Name"])
    def test_conflicting_duplicate(self, name: str) -> None:
        """Conflicting duplicates of any mirrored header are request.header.duplicate -32020."""
        h = headers("tools/call", name="echo")
        h = HeaderMap((*h.pairs, (name.lower(), "something-else")))
        f = only(judge_modern(h, call(text="x")))
        assert f.rule == "request.header.duplicate"
        assert f.code == -32020

    def test_method_value_is_case_sensitive(self) -> None:
        """Mcp-Method TOOLS/CALL does not mirror tools/call: request.header.mismatch -32020."""
        f = only(judge_modern(headers("TOOLS/CALL", name="echo"), call(text="x")))
        assert f.rule == "request.header.mismatch"
        assert f.code == -32020

    def test_version_mismatch(self) -> None:
        """A version header other than the body's is request.header.mismatch -32020."""
        f = only(judge_modern(headers("tools/list", version="2025-11-25"), modern("tools/list")))
        assert f.rule == "request.header.mismatch"
        assert f.code == -32020

    def test_name_mismatch(self) -> None:
        """An Mcp-Name other than params.name is request.header.mismatch -32020."""
        f = only(judge_modern(headers("tools/call", name="echo"), call("delete_everything")))
        assert f.rule == "request.header.mismatch"
        assert f.code == -32020

    def test_uri_mismatch(self) -> None:
        """An Mcp-Name other than params.uri on resources/read is a mismatch."""
        f = only(
            judge_modern(
                headers("resources/read", name="file:///b"),
                modern("resources/read", uri="file:///a"),
            )
        )
        assert f.rule == "request.header.mismatch"
        assert f.code == -32020

    def test_name_header_without_body_value(self) -> None:
        """An Mcp-Name for a routed method whose body lacks the value is a mismatch."""
        f = only(
            judge_modern(headers("resources/read", name="file:///a"), modern("resources/read"))
        )
        assert f.rule == "request.header.mismatch"
        assert f.code == -32020

    def test_sentinel_decoded_before_compare(self) -> None:
        """A Base64 sentinel is decoded and matches a name with surrounding spaces."""
        h = headers("tools/call", name="=?base64?ICBwYWRkZWQgdG9vbCA=?=")
        assert judge_modern(h, call("  padded tool ")).findings == ()

    def test_uppercase_marker_is_literal(self) -> None:
        """=?BASE64?...?= is a literal value: equal to the same literal name, no decoding."""
        literal = "=?BASE64?ZWNobw==?="
        assert judge_modern(headers("tools/call", name=literal), call(literal)).findings == ()
        f = only(judge_modern(headers("tools/call", name=literal), call("echo")))
        assert f.rule == "request.header.mismatch"
        assert f.code == -32020

    @pytest.mark.parametrize(
        ("raw", "body"),
        [
            ("caf\u00e9", "caf\u00e9"),
            ("=?base64?!!!!?=", "echo"),
            ("=?base64?ZWNobw?=", "echo"),
            ("=?base64?/w==?=", "echo"),
        ],
    )
    def test_bad_encoding(self, raw: str, body: str) -> None:
        """Raw unsafe values and bad sentinels are request.header.encoding -32020 (must)."""
        f = only(judge_modern(headers("tools/call", name=raw), call(body)))
        assert (f.rule, f.code, f.strength) == ("request.header.encoding", -32020, "must")

    @pytest.mark.parametrize(
        ("raw", "body"),
        [
            (" echo", " echo"),  # HTTP strips the space: the header carries "echo"
            ("=?base64?ZWNobw==", "echo"),  # no "?=": a literal, not "echo"
        ],
    )
    def test_literal_values_that_differ_are_a_mismatch(self, raw: str, body: str) -> None:
        """A value that is not the sentinel is a literal; compared to the body it mismatches."""
        f = only(judge_modern(headers("tools/call", name=raw), call(body)))
        assert (f.rule, f.code, f.strength) == ("request.header.mismatch", -32020, "must")

    @pytest.mark.parametrize("raw", ["  echo ", "\techo", "=?base64?ZWNobw==?= "])
    def test_optional_whitespace_is_accepted(self, raw: str) -> None:
        """Mcp-Name:  echo  carries echo: the server must accept it (SEP-2243)."""
        assert judge_modern(headers("tools/call", name=raw), call("echo")).findings == ()

    def test_sentinel_lookalike_without_suffix_matches_itself(self) -> None:
        """A name that starts with '=?base64?' but lacks '?=' travels raw and matches itself."""
        name = "=?base64?not-encoded"
        assert judge_modern(headers("tools/call", name=name), call(name)).findings == ()


class TestCheckRequestParamHeaders:
    """check_request: Mcp-Param-* headers against x-mcp-header tool arguments."""

    def test_a_schema_is_read_as_it_is_at_each_call(self) -> None:
        """Nothing about a schema is remembered: a declaration added to the same object (or
        to an equal one) after a call without any is judged on the next call."""
        schema: dict[str, Any] = {"type": "object", "properties": {"region": {"type": "string"}}}
        h, message = headers("tools/call", name="lookup"), call("lookup", region="eu")
        assert judge_modern(h, message, tool_schemas={"lookup": schema}).findings == ()
        schema["properties"]["region"]["x-mcp-header"] = "Region"
        f = only(judge_modern(h, message, tool_schemas={"lookup": schema}))
        assert f.rule == "request.header.missing" and "Mcp-Param-Region" in f.message
        del schema["properties"]["region"]["x-mcp-header"]
        assert judge_modern(h, message, tool_schemas={"lookup": schema}).findings == ()

    def test_string_match(self) -> None:
        """A string argument is mirrored exactly."""
        assert lookup({"Mcp_Param_Region": "eu-west-1"}, region="eu-west-1").findings == ()

    @pytest.mark.parametrize("value", ["42", "42.0", "042", "42.000"])
    def test_integer_compares_numerically(self, value: str) -> None:
        """An integer argument compares numerically: "42.0" equals 42."""
        assert lookup({"Mcp_Param_Limit": value}, limit=42).findings == ()

    @pytest.mark.parametrize("value", ["4e1", "40e0", "NaN", "+40", "40.5", "0x28", "forty"])
    def test_integer_non_decimal_rejected(self, value: str) -> None:
        """Exponent forms, signs, hex and other values never equal the integer 40."""
        f = only(lookup({"Mcp_Param_Limit": value}, limit=40))
        assert f.rule == "request.header.mismatch"
        assert f.code == -32020

    def test_number_compares_numerically(self) -> None:
        """A number argument compares numerically: "0.50" equals 0.5."""
        assert lookup({"Mcp_Param_Ratio": "0.50"}, ratio=0.5).findings == ()

    @pytest.mark.parametrize(("value", "arg"), [("true", True), ("false", False)])
    def test_booleans(self, value: str, arg: bool) -> None:
        """Booleans mirror as lowercase true/false."""
        assert lookup({"Mcp_Param_Verbose": value}, verbose=arg).findings == ()

    @pytest.mark.parametrize(
        ("value", "arg"), [("True", True), ("1", True), ("false", True), ("0", False)]
    )
    def test_boolean_other_spellings_rejected(self, value: str, arg: bool) -> None:
        """Any other spelling of a boolean is request.header.mismatch -32020."""
        f = only(lookup({"Mcp_Param_Verbose": value}, verbose=arg))
        assert f.rule == "request.header.mismatch"
        assert f.code == -32020

    def test_string_mismatch(self) -> None:
        """A different string is request.header.mismatch -32020."""
        f = only(lookup({"Mcp_Param_Region": "us-east-1"}, region="eu-west-1"))
        assert f.rule == "request.header.mismatch"
        assert f.code == -32020

    def test_missing_param_header(self) -> None:
        """A declared argument without its header is request.header.missing -32020."""
        f = only(lookup({}, region="eu-west-1"))
        assert f.rule == "request.header.missing"
        assert f.code == -32020
        assert "Mcp-Param-Region" in f.message

    def test_header_without_argument(self) -> None:
        """A parameter header for an absent argument is request.header.mismatch -32020."""
        f = only(lookup({"Mcp_Param_Region": "eu"}, query="q"))
        assert f.rule == "request.header.mismatch"
        assert f.code == -32020

    def test_param_header_name_any_case(self) -> None:
        """Parameter header names match in any letter case."""
        assert lookup({"mcp_param_region": "eu"}, region="eu").findings == ()

    def test_param_sentinel(self) -> None:
        """A parameter header may carry the Base64 sentinel (" eu" encoded)."""
        assert lookup({"Mcp_Param_Region": "=?base64?IGV1?="}, region=" eu").findings == ()

    def test_param_bad_encoding(self) -> None:
        """A raw unsafe parameter value is request.header.encoding -32020."""
        f = only(lookup({"Mcp_Param_Region": "e\u00fc"}, region="e\u00fc"))
        assert (f.rule, f.code, f.strength) == ("request.header.encoding", -32020, "must")

    def test_param_edge_whitespace_cannot_travel_raw(self) -> None:
        """An argument ' eu' sent raw arrives as 'eu' (HTTP strips it): a mismatch."""
        f = only(lookup({"Mcp_Param_Region": " eu"}, region=" eu"))
        assert (f.rule, f.code) == ("request.header.mismatch", -32020)

    def test_unknown_tool_schema_skips_rung(self) -> None:
        """Without the tool's schema the parameter rung is not judged."""
        v = judge_modern(
            headers("tools/call", name="lookup", Mcp_Param_Region="x"), call("lookup", region="y")
        )
        assert v.findings == ()


class TestCheckRequestLadderOrder:
    """check_request: the first failing rung decides the rule and the code."""

    def test_header_vs_unsupported_body_is_mismatch(self) -> None:
        """A header disagreeing with a body carrying an unsupported version is -32020."""
        f = only(judge_modern(headers("tools/list"), modern("tools/list", version=UNSUPPORTED)))
        assert f.rule == "request.header.mismatch"
        assert f.code == -32020

    def test_missing_header_vs_unsupported_body_is_missing(self) -> None:
        """A missing version header with an unsupported body version is -32020, not -32022."""
        f = only(
            judge_modern(
                headers("tools/list", version=None), modern("tools/list", version=UNSUPPORTED)
            )
        )
        assert f.rule == "request.header.missing"
        assert f.code == -32020

    def test_agreed_unsupported_version(self) -> None:
        """Header and body agreeing on an unsupported version is request.version.unsupported."""
        f = only(
            judge_modern(
                headers("tools/list", version=UNSUPPORTED),
                modern("tools/list", version=UNSUPPORTED),
            )
        )
        assert f.rule == "request.version.unsupported"
        assert f.code == -32022

    def test_supported_versions_come_from_context(self) -> None:
        """A version outside the context's supported list is unsupported."""
        f = only(
            judge_modern(
                headers("tools/list"), modern("tools/list"), supported_versions=("2030-01-01",)
            )
        )
        assert f.rule == "request.version.unsupported"
        assert f.code == -32022

    def test_method_header_after_unsupported_body(self) -> None:
        """A method mismatch with an agreed unsupported version is still -32020."""
        f = only(
            judge_modern(
                headers("tools/call", version=UNSUPPORTED),
                modern("tools/list", version=UNSUPPORTED),
            )
        )
        assert f.rule == "request.header.mismatch"
        assert f.code == -32020

    def test_name_mismatch_before_unsupported_version(self) -> None:
        """An Mcp-Name mismatch beats an agreed unsupported version."""
        msg = modern("tools/call", version=UNSUPPORTED, name="b", arguments={})
        f = only(judge_modern(headers("tools/call", version=UNSUPPORTED, name="a"), msg))
        assert f.rule == "request.header.mismatch"
        assert f.code == -32020

    def test_version_rung_before_method_rung(self) -> None:
        """With both the version and the method header wrong, the version is reported."""
        f = only(judge_modern(headers("tools/call", version="2025-11-25"), modern("tools/list")))
        assert f.rule == "request.header.mismatch"
        assert "MCP-Protocol-Version" in f.message

    def test_method_rung_before_name_rung(self) -> None:
        """With the method and the name header wrong, the method is reported."""
        f = only(judge_modern(headers("prompts/get", name="other"), call("echo")))
        assert f.rule == "request.header.mismatch"
        assert "Mcp-Method" in f.message

    def test_name_rung_before_param_rung(self) -> None:
        """With the name and a parameter header wrong, the name is reported."""
        v = judge_modern(
            headers("tools/call", name="other", Mcp_Param_Region="x"),
            call("lookup", region="y"),
            tool_schemas={"lookup": LOOKUP_SCHEMA},
        )
        f = only(v)
        assert f.rule == "request.header.mismatch"
        assert "Mcp-Name" in f.message

    def test_duplicate_beats_unsupported_version(self) -> None:
        """Conflicting duplicate headers beat an unsupported version."""
        h = HeaderMap.of(
            [
                ["MCP-Protocol-Version", UNSUPPORTED],
                ["Mcp-Method", "tools/list"],
                ["Mcp-Method", "tools/call"],
            ]
        )
        f = only(judge_modern(h, modern("tools/list", version=UNSUPPORTED)))
        assert f.rule == "request.header.duplicate"
        assert f.code == -32020

    def test_removed_method(self) -> None:
        """initialize sent as a modern request is request.method.removed -32601."""
        f = only(judge_modern(headers("initialize"), modern("initialize")))
        assert f.rule == "request.method.removed"
        assert f.code == -32601

    def test_header_mismatch_beats_removed_method(self) -> None:
        """A removed method with a wrong method header is -32020 first."""
        f = only(judge_modern(headers("ping", version=MODERN), modern("initialize")))
        assert f.rule == "request.header.mismatch"
        assert f.code == -32020

    def test_unsupported_version_beats_removed_method(self) -> None:
        """A removed method with an agreed unsupported version is -32022 first."""
        f = only(
            judge_modern(headers("ping", version=UNSUPPORTED), modern("ping", version=UNSUPPORTED))
        )
        assert f.rule == "request.version.unsupported"
        assert f.code == -32022

    def test_schema_is_last(self) -> None:
        """A request the official schema rejects is wire.schema -32602, after every rung."""
        f = only(judge_modern(headers("tools/call"), modern("tools/call", arguments={})))
        assert f.rule == "request.schema"
        assert f.code == -32602

    def test_unsupported_version_beats_schema(self) -> None:
        """An agreed unsupported version is reported before schema problems."""
        msg = modern("tools/call", version=UNSUPPORTED, arguments="not an object")
        f = only(judge_modern(headers("tools/call", version=UNSUPPORTED), msg))
        assert f.rule == "request.version.unsupported"


class TestCheckRequestNotifications:
    """check_request (modern): notifications carry no header rules but duplicates."""

    def test_bare_notification_accepted(self) -> None:
        """A notification with no mirrored headers and no _meta is accepted."""
        v = judge_modern(HeaderMap(), {"jsonrpc": "2.0", "method": "notifications/cancelled"})
        assert v.findings == ()
        assert v.kind is Kind.NOTIFICATION
        assert v.id is None

    def test_conflicting_duplicate(self) -> None:
        """Conflicting duplicate routing headers on a notification are still -32020."""
        h = HeaderMap.of([["Mcp-Method", "notifications/cancelled"], ["Mcp-Method", "x"]])
        f = only(judge_modern(h, {"jsonrpc": "2.0", "method": "notifications/cancelled"}))
        assert f.rule == "request.header.duplicate"
        assert f.code == -32020


class TestCheckRequestLegacy:
    """check_request (legacy): the handshake era's own branch."""

    INIT: ClassVar[dict[str, Any]] = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "c", "version": "1"},
        },
    }

    def test_initialize(self) -> None:
        """A legacy initialize is accepted and its offered version recorded."""
        v = judge_legacy(HeaderMap(), self.INIT)
        assert v.findings == ()
        assert v.era is Era.LEGACY
        assert v.version == "2025-11-25"

    def test_call_without_meta(self) -> None:
        """A legacy request needs no _meta and no mirrored headers."""
        msg = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        v = judge_legacy(
            HeaderMap.of({"MCP-Protocol-Version": "2025-11-25"}),
            msg,
            negotiated_version="2025-11-25",
        )
        assert v.findings == ()
        assert v.version == "2025-11-25"

    def test_modern_meta_leak(self) -> None:
        """Modern _meta keys on a legacy exchange are request.legacy-leak -32020."""
        msg = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": meta()}}
        f = only(judge_legacy(HeaderMap(), msg))
        assert f.rule == "request.legacy-leak"
        assert f.code == -32020
        assert PV in f.message

    def test_modern_version_header_leak(self) -> None:
        """A modern MCP-Protocol-Version header on a legacy exchange is request.legacy-leak."""
        msg = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        f = only(judge_legacy(HeaderMap.of({"mcp-protocol-version": MODERN}), msg))
        assert f.rule == "request.legacy-leak"
        assert f.code == -32020

    def test_bad_id(self) -> None:
        """A null id is request.envelope -32600 in the legacy era too."""
        f = only(judge_legacy(HeaderMap(), {"jsonrpc": "2.0", "id": None, "method": "ping"}))
        assert f.rule == "request.envelope"
        assert f.code == -32600

    def test_batch_refused_after_2025_03_26(self) -> None:
        """A batch is request.envelope -32600 outside 2025-03-26."""
        batch = [{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}]
        f = only(judge_legacy(HeaderMap(), batch, negotiated_version="2025-06-18"))
        assert f.rule == "request.envelope"
        assert f.code == -32600

    def test_batch_allowed_in_2025_03_26(self) -> None:
        """A batch of valid requests is accepted in 2025-03-26."""
        batch = [
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            {"jsonrpc": "2.0", "method": "notifications/cancelled"},
        ]
        assert judge_legacy(HeaderMap(), batch, negotiated_version="2025-03-26").findings == ()

    def test_batch_item_checked_in_2025_03_26(self) -> None:
        """An invalid batch item is request.envelope -32600 in 2025-03-26."""
        batch = [
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"},
        ]
        f = only(judge_legacy(HeaderMap(), batch, negotiated_version="2025-03-26"))
        assert f.rule == "request.envelope"
        assert f.code == -32600

    def test_schema(self) -> None:
        """A legacy initialize without clientInfo is wire.schema -32602."""
        msg = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}},
        }
        f = only(judge_legacy(HeaderMap(), msg))
        assert f.rule == "request.schema"
        assert f.code == -32602

    def test_legacy_removed_methods_allowed(self) -> None:
        """ping exists in the legacy era."""
        msg = {"jsonrpc": "2.0", "id": 3, "method": "ping"}
        assert judge_legacy(HeaderMap(), msg, negotiated_version="2025-11-25").findings == ()


class TestRequestVerdict:
    """RequestVerdict: derived properties of a ladder outcome."""

    def test_rejection_is_first_coded_finding(self) -> None:
        """rejection names the finding a server must answer."""
        v = judge_modern(headers("tools/list", version=None), modern("tools/list"))
        assert v.rejection is not None
        assert v.rejection.rule == "request.header.missing"

    def test_no_rejection_when_accepted(self) -> None:
        """An accepted request has no rejection."""
        assert judge_modern(headers("tools/list"), modern("tools/list")).rejection is None

    def test_request_properties(self) -> None:
        """kind, method and id come from the classified request."""
        v = judge_modern(headers("tools/list"), modern("tools/list", id=9))
        assert (v.kind, v.method, v.id) == (Kind.REQUEST, "tools/list", 9)

    def test_invalid_request_has_no_id(self) -> None:
        """An invalid request exposes no id (its answer cannot be matched by id)."""
        v = judge_modern(headers("tools/list"), modern("tools/list", id=1.0))
        assert v.id is None
