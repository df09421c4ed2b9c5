"""The capture diff over streams: bounded memory, the same answer, ``overBound`` past a bound."""

from __future__ import annotations

from typing import Any

from mcp_tap.drift import diff_captures, iter_lines
from mcp_tap.drift.stream import Pairing, SideTally, diff_streams


def exchange(n: int, args: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """A tools/call exchange with JSON-RPC id ``n`` answered with ``result``."""
    return {
        "kind": "exchange", "hop": "tap", "exchangeId": f"x{n}", "era": "modern",
        "method": "tools/call", "rpcId": n,
        "ingress": {"httpMethod": "POST", "truncated": False, "receivedAt": 1.0 + n,
                    "body": {"jsonrpc": "2.0", "id": n, "method": "tools/call",
                             "params": {"name": "t", "arguments": args}}},
        "origin": {"status": 200, "headers": [["content-type", "application/json"]],
                   "truncated": False, "ended": True, "endAt": 1.01 + n,
                   "body": {"jsonrpc": "2.0", "id": n, "result": result}},
        "tapError": None, "findings": [],
    }


def side(count: int, value: Any, *, distinct: bool = False) -> list[dict[str, Any]]:
    """``count`` calls; each answered ``{"v": value}`` (or its own value when ``distinct``)."""
    return [exchange(n, {"k": n} if distinct else {}, {"v": f"{value}{n}" if distinct
                                                       else value}) for n in range(count)]


class TestDiffStreams:
    def test_a_generator_gives_what_a_list_gives(self) -> None:
        old, new = side(40, 1), side(40, 2)
        from_list = diff_captures(old, new)
        from_stream = diff_streams(iter(old), iter(new))
        assert from_stream.to_json() == from_list.to_json()
        assert from_list.compared == 40 and not from_list.over_bound
        (change,) = [c for c in from_list.changes if c.aspect == "payload result.v"]
        assert change.examples == ("x0", "x1", "x2")  # identical changes once, 3 examples

    def test_answers_differing_only_in_ids_are_kept_once(self) -> None:
        pairing = Pairing()
        tally = SideTally(None)
        for record in side(500, 1):
            item = tally.add(record)
            assert item is not None
            pairing.add_baseline(item)
        assert len(pairing.answers) == 1 and pairing.kept_requests == 500
        assert tally.exchanges == tally.requests == 500

    def test_over_the_answer_bound(self) -> None:
        old, new = side(10, "a", distinct=True), side(10, "b", distinct=True)
        within = diff_streams(old, new)
        assert within.compared == 10 and not within.over_bound
        over = diff_streams(old, new, max_answers=4)
        assert over.over_bound and over.compared == 4
        assert over.to_json()["overBound"] is True
        assert any(line.startswith("over bound:") for line in iter_lines(over))
        # Counts and the other comparisons stay exact past the bound.
        assert (over.baseline.exchanges, over.candidate.requests) == (10, 10)
        assert over.health == within.health

    def test_over_the_request_bound(self) -> None:
        old, new = side(10, "a", distinct=True), side(12, "b", distinct=True)
        over = diff_streams(old, new, max_requests=6)
        assert over.over_bound and over.compared == 6
        assert over.only_candidate == () and len(diff_streams(old, new).only_candidate) == 2
        assert not diff_streams(side(5, 1), side(5, 2), max_requests=6).over_bound
