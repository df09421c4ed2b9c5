"""Tests for the schema verdict cache (mcp_tap.core.schema)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from mcp_tap.core import schema

VERSION = "2026-07-28"
GOOD = {"tools": [{"name": "t", "inputSchema": {"type": "object"}}], "resultType": "complete",
        "ttlMs": 0, "cacheScope": "private"}


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    """Each test starts with an empty cache."""
    schema.VERDICTS.clear()
    yield
    schema.VERDICTS.clear()


def _uncached(method: str, result: Any) -> str:
    """The verdict with the cache out of the way."""
    return schema._result_problem(method, VERSION, result)


class TestVerdictCache:
    """VerdictCache: the same verdicts, computed once per distinct value."""

    def test_a_repeated_value_is_a_hit_with_the_same_verdict(self) -> None:
        """The second judgement of an equal value, written alike, comes from the cache."""
        first = schema.result_problem("tools/list", VERSION, GOOD)
        second = schema.result_problem("tools/list", VERSION, dict(GOOD.items()))
        assert first == second == _uncached("tools/list", GOOD) == ""
        assert (schema.VERDICTS.hits, schema.VERDICTS.misses) == (1, 1)

    def test_another_key_order_is_another_key_with_the_same_verdict(self) -> None:
        """The key is the value as written (no sorting): reordered keys miss, and agree."""
        first = schema.result_problem("tools/list", VERSION, GOOD)
        second = schema.result_problem("tools/list", VERSION, dict(reversed(GOOD.items())))
        assert first == second == ""
        assert (schema.VERDICTS.hits, schema.VERDICTS.misses) == (0, 2)

    def test_values_the_schema_tells_apart_are_keyed_apart(self) -> None:
        """A wrong value after a right one is still rejected (0 and 0.5 are distinct)."""
        assert schema.result_problem("tools/list", VERSION, GOOD) == ""
        for bad in ({**GOOD, "ttlMs": 0.5}, {**GOOD, "tools": "x"}, {**GOOD, "cacheScope": 1}):
            verdict = schema.result_problem("tools/list", VERSION, bad)
            assert verdict == _uncached("tools/list", bad) != ""
            assert verdict.startswith("tools/list result does not match the 2026-07-28 schema")

    def test_request_and_result_of_one_method_are_keyed_apart(self) -> None:
        """The kind is part of the key: a valid result does not vouch for a request."""
        params = {"name": 5}
        assert schema.request_problem("tools/call", VERSION, params) != ""
        assert schema.request_problem("tools/call", VERSION, params) != ""
        assert schema.VERDICTS.hits == 1

    def test_values_too_big_or_deep_to_key_are_judged_uncached(self) -> None:
        """A large value is validated every time and never stored."""
        big = {**GOOD, "tools": [{"name": "t" * 10000, "inputSchema": {"type": "object"}}]}
        assert schema.result_problem("tools/list", VERSION, big) == ""
        assert schema.VERDICTS.key("result", "tools/list", VERSION, big) is None
        assert (schema.VERDICTS.hits, schema.VERDICTS.misses) == (0, 0)

    def test_the_cache_is_bounded(self) -> None:
        """Past its bound, the least recently used verdict falls out."""
        cache = schema.VerdictCache(max_entries=2)
        keys = [cache.key("result", "m", VERSION, {"n": n}) for n in range(3)]
        for key in keys:
            assert key is not None
            cache.put(key, "")
        assert cache.get(keys[0]) is None and cache.get(keys[2]) == ""
