"""The request ladder's shortcut for the usual ``Mcp-Name`` (one plain value equal to the
routed param, in ``core/requests.py``) is a copy of what ``name_header_problem`` answers for
it. The copy stays for speed (docs/benchmark.md, issue 28); this test ties the two: the same
headers and body give the same finding through the ladder and through the source function."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_tap.core.eras import Era
from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.mirrored import name_header_problem
from mcp_tap.core.requests import RequestContext, check_request

MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}
ROUTED = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}

# Header values: equal, padded, other case, empty, non-ASCII, a control character, DEL, the
# sentinel (valid, malformed, uppercase prefix, without suffix), and numbers as text.
HEADER_VALUES: list[list[str]] = [
    [],
    ["echo"],
    [" echo\t"],
    ["Echo"],
    ["ECHO"],
    [""],
    ["  "],
    ["é"],
    ["ech\x01o"],
    ["echo\x7f"],
    ["=?base64?ZWNobw==?="],
    ["=?base64?ZWNobw?="],
    ["=?base64?!!?="],
    ["=?BASE64?ZWNobw==?="],
    ["=?base64?ZWNobw=="],
    ["=?base64?w6k=?="],
    ["7"],
    ["-0"],
    ["0"],
    ["True"],
    ["true"],
    [str(10**30)],
    ["echo", "echo"],
    ["echo", " echo"],
    ["echo", "other"],
]

# Body values of the routed param: strings, ints, bool, -0, floats, huge ints, None, absent.
BODY_VALUES: list[Any] = [
    "echo",
    "Echo",
    "",
    "  ",
    "é",
    "ech\x01o",
    "echo\x7f",
    "=?base64?ZWNobw==?=",
    "=?BASE64?ZWNobw==?=",
    "=?base64?ZWNobw==",
    7,
    0,
    -0,
    -0.0,
    True,
    False,
    10**30,
    "7",
    "-0",
    str(10**30),
    None,
    "<absent>",
]


def _request(method: str, body_value: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"_meta": META}
    if body_value != "<absent>":
        params[ROUTED[method]] = body_value
    if method == "tools/call":
        params["arguments"] = {}
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def _headers(method: str, values: list[str], name_case: str) -> HeaderMap:
    pairs = [("MCP-Protocol-Version", MODERN), ("Mcp-Method", method)]
    pairs += [(name_case, v) for v in values]
    return HeaderMap(tuple(pairs))


@pytest.mark.parametrize("method", sorted(ROUTED))
@pytest.mark.parametrize("name_case", ["Mcp-Name", "mcp-name", "MCP-NAME"])
@pytest.mark.parametrize("values", HEADER_VALUES, ids=repr)
def test_the_ladder_answers_as_name_header_problem(
    method: str, name_case: str, values: list[str]
) -> None:
    """For every body value: the ladder stops at name_header_problem's finding, or it has
    none and the ladder goes on past the headers (later rungs, e.g. the schema, may speak)."""
    for body_value in BODY_VALUES:
        message = _request(method, body_value)
        headers = _headers(method, values, name_case)
        source = name_header_problem(headers, message, method)
        verdict = check_request(headers, message, RequestContext(Era.MODERN))
        if source is not None:
            assert verdict.findings == (source,), (values, body_value)
        else:
            assert not [f for f in verdict.findings if f.rule.startswith("request.header.")], (
                values,
                body_value,
            )


def test_the_cases_reach_both_answers() -> None:
    """The inputs above reach the shortcut (no finding) and each kind of finding."""
    rules: set[str | None] = set()
    for values in HEADER_VALUES:
        for body_value in BODY_VALUES:
            message = _request("tools/call", body_value)
            found = name_header_problem(_headers("tools/call", values, "Mcp-Name"), message,
                                        "tools/call")
            rules.add(found.rule if found is not None else None)
    assert rules == {
        None,
        "request.header.missing",
        "request.header.mismatch",
        "request.header.duplicate",
        "request.header.encoding",
    }
