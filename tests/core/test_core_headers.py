"""Tests for the ordered, case-insensitive header multimap (mcp_tap.core.headers)."""

from __future__ import annotations

import pytest

from mcp_tap.core.headers import ConflictingHeaderError, HeaderMap


class TestHeaderMap:
    """HeaderMap: order, case and duplicates kept; names case-insensitive; values not."""

    def test_of_mapping_keeps_order(self) -> None:
        """A mapping becomes pairs in insertion order."""
        h = HeaderMap.of({"B": "2", "A": "1"})
        assert h.pairs == (("B", "2"), ("A", "1"))

    def test_of_pairs_keeps_duplicates(self) -> None:
        """A pair list keeps duplicate names in order."""
        h = HeaderMap.of([["X", "1"], ["x", "2"]])
        assert h.pairs == (("X", "1"), ("x", "2"))
        assert len(h) == 2

    def test_of_none_is_empty(self) -> None:
        """None builds an empty map."""
        assert len(HeaderMap.of(None)) == 0

    def test_of_map_is_identity(self) -> None:
        """Building from a HeaderMap returns that same map."""
        h = HeaderMap.of({"A": "1"})
        assert HeaderMap.of(h) is h

    def test_of_bad_pair_raises(self) -> None:
        """A pair with other than two items is rejected."""
        with pytest.raises(ValueError, match="two items"):
            HeaderMap.of([["A", "1", "2"]])

    def test_lookup_is_case_insensitive(self) -> None:
        """Names match in any letter case."""
        h = HeaderMap.of({"MCP-Protocol-Version": "2026-07-28"})
        assert h.get("mcp-protocol-version") == "2026-07-28"
        assert h.get_all("MCP-PROTOCOL-VERSION") == ["2026-07-28"]
        assert "mcp-PROTOCOL-version" in h

    def test_get_default(self) -> None:
        """An absent name yields the default."""
        assert HeaderMap().get("X", "d") == "d"
        assert HeaderMap().get("X") is None

    def test_contains_rejects_non_strings(self) -> None:
        """Membership is only defined for string names."""
        assert 1 not in HeaderMap.of({"1": "x"})

    def test_single_absent_is_none(self) -> None:
        """single() of an absent header is None."""
        assert HeaderMap().single("Mcp-Method") is None

    def test_single_collapses_identical_duplicates(self) -> None:
        """Identical duplicates (in any name case) are one value."""
        h = HeaderMap.of([["Mcp-Method", "tools/list"], ["mcp-method", "tools/list"]])
        assert h.single("MCP-METHOD") == "tools/list"

    def test_single_rejects_conflicting_duplicates(self) -> None:
        """Conflicting duplicates raise with the name and every value."""
        h = HeaderMap.of([["Mcp-Method", "tools/list"], ["mcp-method", "tools/call"]])
        with pytest.raises(ConflictingHeaderError) as info:
            h.single("Mcp-Method")
        assert info.value.name == "Mcp-Method"
        assert info.value.values == ("tools/list", "tools/call")

    def test_values_are_case_sensitive(self) -> None:
        """Duplicates differing only in value case conflict: values are case-sensitive."""
        h = HeaderMap.of([["Mcp-Method", "tools/call"], ["Mcp-Method", "TOOLS/CALL"]])
        with pytest.raises(ConflictingHeaderError):
            h.single("Mcp-Method")

    def test_names_with_prefix(self) -> None:
        """Distinct names with a prefix come back once each, as first spelled."""
        h = HeaderMap.of(
            [["Mcp-Param-A", "1"], ["mcp-param-a", "1"], ["MCP-PARAM-B", "2"], ["Mcp-Name", "x"]]
        )
        assert h.names_with_prefix("mcp-param-") == ["Mcp-Param-A", "MCP-PARAM-B"]

    @pytest.mark.parametrize(
        ("value", "media"),
        [
            ("application/json; charset=utf-8", "application/json"),
            ("Text/Event-Stream", "text/event-stream"),
            (None, ""),
        ],
    )
    def test_content_type(self, value: str | None, media: str) -> None:
        """content_type() is the lowercased media type without parameters."""
        h = HeaderMap.of({"Content-Type": value} if value is not None else None)
        assert h.content_type() == media

    def test_without(self) -> None:
        """without() drops every header of the given names, in any case."""
        h = HeaderMap.of([["Connection", "close"], ["A", "1"], ["connection", "x"]])
        assert h.without(["CONNECTION"]).pairs == (("A", "1"),)

    def test_to_json_and_iteration(self) -> None:
        """The evidence shape is a list of [name, value] pairs, iteration yields tuples."""
        h = HeaderMap.of([["A", "1"], ["B", "2"]])
        assert h.to_json() == [["A", "1"], ["B", "2"]]
        assert list(h) == [("A", "1"), ("B", "2")]
