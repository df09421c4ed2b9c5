"""Tests for JSON-RPC 2.0 classification and id rules (mcp_tap.core.jsonrpc)."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_tap.core.jsonrpc import (
    Kind,
    classify,
    is_valid_id,
    json_type,
    parse_json,
    same_id,
)


class TestClassify:
    """classify: request, notification, response or invalid, never raising."""

    def test_request(self) -> None:
        """A message with a method and a valid id is a request."""
        c = classify({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}})
        assert c.kind is Kind.REQUEST
        assert c.method == "tools/list"
        assert c.id == 7

    def test_notification(self) -> None:
        """A message with a method and no id is a notification."""
        c = classify({"jsonrpc": "2.0", "method": "notifications/progress"})
        assert c.kind is Kind.NOTIFICATION
        assert c.id is None

    @pytest.mark.parametrize(
        "message",
        [
            {"jsonrpc": "2.0", "id": 1, "result": {}},
            {"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "x"}},
            {"jsonrpc": "2.0", "id": 1},
        ],
    )
    def test_response(self, message: dict[str, Any]) -> None:
        """A message without a method but with result, error or id is a response."""
        c = classify(message)
        assert c.kind is Kind.RESPONSE
        assert c.method is None

    @pytest.mark.parametrize(
        ("message", "problem"),
        [
            ([{"jsonrpc": "2.0", "id": 1, "method": "m"}], "got array"),
            ("text", "got string"),
            ({"id": 1, "method": "m"}, "jsonrpc must be"),
            ({"jsonrpc": "1.0", "id": 1, "method": "m"}, "jsonrpc must be"),
            ({"jsonrpc": 2.0, "id": 1, "method": "m"}, "jsonrpc must be"),
            ({"jsonrpc": "2.0", "id": 1, "method": ""}, "method must be a non-empty string"),
            ({"jsonrpc": "2.0", "id": 1, "method": 5}, "method must be a non-empty string"),
            ({"jsonrpc": "2.0", "id": 1, "method": "m", "params": [1]}, "params must be an object"),
            ({"jsonrpc": "2.0", "id": 1, "method": "m", "result": {}}, "must not carry result"),
            ({"jsonrpc": "2.0", "id": None, "method": "m"}, "got null"),
            ({"jsonrpc": "2.0", "id": True, "method": "m"}, "got boolean"),
            ({"jsonrpc": "2.0", "id": 1.0, "method": "m"}, "got number"),
            ({"jsonrpc": "2.0", "id": [1], "method": "m"}, "got array"),
            ({"jsonrpc": "2.0"}, "neither a request"),
        ],
    )
    def test_invalid(self, message: Any, problem: str) -> None:
        """Malformed messages (bad envelope, bad id type) are invalid, with a reason."""
        c = classify(message)
        assert c.kind is Kind.INVALID
        assert problem in c.problem

    def test_invalid_non_object_has_no_method_or_id(self) -> None:
        """A non-object message exposes neither a method nor an id."""
        c = classify(["x"])
        assert c.method is None
        assert c.id is None

    def test_non_string_method_is_not_exposed(self) -> None:
        """The method property is None when the member is not a string."""
        assert classify({"jsonrpc": "2.0", "id": 1, "method": 3}).method is None


class TestIsValidId:
    """is_valid_id: request ids are strings or integers, never null, booleans or floats."""

    @pytest.mark.parametrize("value", ["6", "", 6, 0, -1, 2**63])
    def test_valid(self, value: Any) -> None:
        """Strings and integers are valid request ids."""
        assert is_valid_id(value)

    @pytest.mark.parametrize("value", [None, True, False, 1.0, 1.5, [], {}])
    def test_invalid(self, value: Any) -> None:
        """Null, booleans, floats and containers are not valid request ids."""
        assert not is_valid_id(value)


class TestSameId:
    """same_id: ids match in value and in JSON type."""

    @pytest.mark.parametrize(("a", "b"), [(6, 6), ("6", "6"), (True, True), (None, None)])
    def test_equal(self, a: Any, b: Any) -> None:
        """Equal values of the same JSON type are the same id."""
        assert same_id(a, b)

    @pytest.mark.parametrize(
        ("a", "b"),
        [
            ("6", 6),
            (6, "6"),
            (True, 1),
            (1, True),
            (False, 0),
            (1.0, 1),
            (1, 1.0),
            (6, 7),
            (True, False),
            (None, 0),
        ],
    )
    def test_different(self, a: Any, b: Any) -> None:
        """A different value or JSON type ("6" vs 6, true vs 1, 1.0 vs 1) is another id."""
        assert not same_id(a, b)


class TestJsonType:
    """json_type: the JSON type name of a decoded value."""

    @pytest.mark.parametrize(
        ("value", "name"),
        [
            (None, "null"),
            (True, "boolean"),
            (1, "integer"),
            (1.0, "number"),
            ("s", "string"),
            ([], "array"),
            ({}, "object"),
        ],
    )
    def test_names(self, value: Any, name: str) -> None:
        """Each decoded Python value maps to its JSON type name (booleans are not integers)."""
        assert json_type(value) == name


class TestParseJson:
    """parse_json: orjson decoding that keeps number types."""

    def test_float_stays_float(self) -> None:
        """A JSON 1.0 decodes as a float, so it can be told apart from the integer 1."""
        value = parse_json(b'{"id": 1.0}')
        assert isinstance(value["id"], float)

    @pytest.mark.parametrize("raw", [b"", b"{", b"not json", b"\xff"])
    def test_bad_input_raises_value_error(self, raw: bytes) -> None:
        """Malformed input raises ValueError."""
        with pytest.raises(ValueError):
            parse_json(raw)
