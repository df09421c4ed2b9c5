"""The differential's shortcut (members whose view equals the wire are not walked) gives
exactly the full walk's differences, in the same order, on results that differ in every
way the walk tells apart."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mcp_tap.sdkdiff.compare import Difference, _walk, differences
from mcp_tap.sdkdiff.sdk import SdkParseError, _full_view, _parse, sdk_version

_CALL: dict[str, Any] = {
    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "demo", "version": "0.1.0"}},
    "content": [{"text": "q1 in eu", "type": "text"}],
    "isError": False,
    "resultType": "complete",
    "structuredContent": {"result": "q1 in eu", "n": [1, 2.5, None, True]},
}
_LIST: dict[str, Any] = {
    "tools": [{"name": "echo", "inputSchema": {"type": "object", "properties": {}}},
              {"name": "add", "description": None, "inputSchema": {"type": "object"}}],
    "nextCursor": None,
}


def _variants() -> list[tuple[str, dict[str, Any]]]:
    call_cases: list[dict[str, Any]] = [
        _CALL,
        {k: v for k, v in _CALL.items() if k != "resultType"},  # the view invents it
        {**_CALL, "isError": None},  # a wire null the view drops
        {**_CALL, "isError": 0},  # a scalar of another JSON type
        {**_CALL, "content": [{"text": "x", "type": "text", "annotations": None}]},
        {**_CALL, "content": [{"text": "x", "type": "text", "future": {"a": 1}}]},
        {**_CALL, "structuredContent": {"z": {"b": 1, "a": 2}}},  # key order is not a change
        {**_CALL, "unknownMember": [1, 2]},
        {**_CALL, "ttlMs": -3},  # clamped by the client
        {"content": [], "isError": False},
    ]
    listed = {**_LIST, "ttlMs": 5, "cacheScope": "public", "resultType": "complete"}
    list_cases: list[dict[str, Any]] = [_LIST, listed, {**listed, "ttlMs": -1},
                                        {**listed, "tools": [{"name": "x"}]}, {"tools": []}]
    return [("tools/call", c) for c in call_cases] + [("tools/list", c) for c in list_cases]


def _full_walk(method: str, era: str, result: dict[str, Any]) -> list[Difference]:
    model, removed = _parse(method, sdk_version(era), result)
    out: list[Difference] = []
    _walk(result, _full_view(model, removed), "result", "result", out)
    return out


@pytest.mark.parametrize("era", ["modern", "legacy"])
@pytest.mark.parametrize(("method", "result"), _variants())
def test_the_shortcut_is_the_full_walk(era: str, method: str, result: dict[str, Any]) -> None:
    before = copy.deepcopy(result)
    try:
        expected = _full_walk(method, era, result)
    except SdkParseError as exc:
        with pytest.raises(SdkParseError) as raised:
            differences(method, era, result)
        assert str(raised.value) == str(exc)
    else:
        assert differences(method, era, result) == expected
    assert result == before  # the caller's result is never changed


def test_the_cases_cover_both_outcomes() -> None:
    """The cases above include results with and without differences and ones the SDK
    rejects (so the equality above is not vacuous)."""
    found: set[bool | None] = set()
    for method, result in _variants():
        for era in ("modern", "legacy"):
            try:
                found.add(bool(_full_walk(method, era, result)))
            except SdkParseError:
                found.add(None)
    assert found == {True, False, None}
