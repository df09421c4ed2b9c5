"""The routing headers' usual case, tested in ``requests._routing_problem`` without calling
``mirror_problem`` and ``name_header_problem`` (a specialisation kept for its measured gain,
docs/benchmark.md "Issue 28: the manual inlinings"): tied here to those sources. For any
headers, the rungs give the answer the sources give when called one after the other."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_tap.core.eras import (
    HEADER_METHOD,
    HEADER_NAME,
    HEADER_PROTOCOL_VERSION,
    MODERN_VERSIONS,
    NAME_ROUTED_PARAMS,
)
from mcp_tap.core.findings import Finding
from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.mirrored import (
    mirror_problem,
    name_header_problem,
    param_header_problem,
)
from mcp_tap.core.requests import _routing_problem

MODERN_VERSION = MODERN_VERSIONS[0]

# Values that take each branch of the usual case: equal, equal after the optional
# whitespace, different, empty, not ASCII, not printable, the sentinel's encoding, case.
_VALUES = [
    MODERN_VERSION, f" {MODERN_VERSION}\t", "2025-11-25", "", "tools/call", "tools/list",
    " tools/call ", "TOOLS/CALL", "echo", " echo", "Echo", "ech\x7fo", "\u00e9ch\u043e",
    "=?base64?ZWNobw==?=", "=?base64?ZWNobw?=", "=?base64?!!?=", "add", "tools/list\r",
]
_NAMES = ["echo", "ech\x7fo", "\u00e9ch\u043e", "=?base64?ZWNobw==?=", "", " echo ", 7, None]
_METHODS = ["tools/call", "tools/list", "prompts/get", "resources/read"]


def _reference(headers: HeaderMap, message: dict[str, Any], version: str) -> Finding | None:
    """Rungs 2-4 as the sources say, each called (no usual case tested first)."""
    method = message["method"]
    for name, value, what in ((HEADER_PROTOCOL_VERSION, version, "the _meta protocol version"),
                              (HEADER_METHOD, method, "the method")):
        problem = mirror_problem(headers, name, value, what)
        if problem:
            return problem
    if NAME_ROUTED_PARAMS.get(method) is not None:
        problem = name_header_problem(headers, message, method)
        if problem:
            return problem
        if method == "tools/call":
            return param_header_problem(headers, message, method, {})
    return None


def _copies(name: str, usual: str) -> st.SearchStrategy[list[tuple[str, str]]]:
    """Half the time the usual header (one copy, the body's value), else none, one or two
    (equal or not) of any value, the name in any case."""
    spelled = st.sampled_from([name, name.lower(), name.upper()])
    any_copies = st.lists(st.tuples(spelled, st.sampled_from(_VALUES)), max_size=2)
    return st.one_of(st.just([(name, usual)]), any_copies)


@settings(max_examples=600, deadline=None)
@given(
    method=st.sampled_from(_METHODS),
    routed=st.sampled_from(_NAMES),
    version_headers=_copies(HEADER_PROTOCOL_VERSION, MODERN_VERSION),
    method_headers=st.data(),
    name_headers=st.data(),
)
def test_the_usual_case_answers_as_the_sources(
    method: str, routed: Any, version_headers: list[tuple[str, str]],
    method_headers: st.DataObject, name_headers: st.DataObject,
) -> None:
    """Same finding (or none) from the rungs and from the sources, for every header mix."""
    by_method = method_headers.draw(_copies(HEADER_METHOD, method))
    names = [v for v in _NAMES if isinstance(v, str)]
    by_name = name_headers.draw(st.one_of(
        _copies(HEADER_NAME, routed if isinstance(routed, str) else "echo"),
        st.lists(st.tuples(st.just(HEADER_NAME), st.sampled_from(names)), max_size=2)))
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
            "io.modelcontextprotocol/clientCapabilities": {}}
    params: dict[str, Any] = {"_meta": meta}
    if routed is not None:
        params[NAME_ROUTED_PARAMS.get(method) or "name"] = routed
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    headers = HeaderMap(tuple(version_headers + by_method + by_name))

    assert _routing_problem(headers, message, meta, MODERN_VERSION, {}) == _reference(
        headers, message, MODERN_VERSION)


def test_the_usual_request_has_no_routing_problem() -> None:
    """The case the specialisation exists for answers None both ways (not vacuous above)."""
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
            "io.modelcontextprotocol/clientCapabilities": {}}
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "echo", "_meta": meta}}
    headers = HeaderMap(((HEADER_PROTOCOL_VERSION, MODERN_VERSION),
                         (HEADER_METHOD, "tools/call"), (HEADER_NAME, "echo")))
    assert _routing_problem(headers, message, meta, MODERN_VERSION, {}) is None
    assert _reference(headers, message, MODERN_VERSION) is None
    mismatched = HeaderMap(((HEADER_PROTOCOL_VERSION, MODERN_VERSION),
                            (HEADER_METHOD, "tools/call"), (HEADER_NAME, "add")))
    found = _routing_problem(mismatched, message, meta, MODERN_VERSION, {})
    assert found is not None and found.rule == "request.header.mismatch"
    assert found == _reference(mismatched, message, MODERN_VERSION)
