"""JSON-RPC batches judged by the negotiated revision (issue 27, class 9).

2025-03-26 defines batches: "MCP implementations MAY support sending JSON-RPC batches, but
MUST support receiving JSON-RPC batches" (basic/index "Batching"); a stream's responses,
requests and notifications MAY be batched (basic/transports "Sending Messages to the
Server" 6). Every later revision has none. The era and revision come from the session's
negotiated version, else the version header, else 2025-03-26 (no header).
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from mcp_tap.core.eras import Era, infer_era
from mcp_tap.core.exchange import Exchange, judge
from mcp_tap.core.findings import Finding, Strength
from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.sse import SSEEvent, encode_event, unbatched

ACCEPT = {"Accept": "application/json, text/event-stream", "Mcp-Session-Id": "s1"}
BATCH = [
    {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
    {"jsonrpc": "2.0", "id": 2, "method": "prompts/list"},
]
TOOLS = {"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}
PROMPTS = {"jsonrpc": "2.0", "id": 2, "result": {"prompts": []}}


def _judge(
    request: Any,
    status: int,
    body: Any,
    *,
    negotiated: str | None = "2025-03-26",
    headers: dict[str, str] | None = None,
    sse: list[Any] | None = None,
) -> list[Finding]:
    if sse is not None:
        raw = b"".join(encode_event(orjson.dumps(m).decode()) for m in sse)
        ctype = "text/event-stream"
    else:
        raw = b"" if body is None else orjson.dumps(body)
        ctype = "application/json"
    exchange = Exchange(
        request_headers=HeaderMap.of(headers if headers is not None else ACCEPT),
        request_body=orjson.dumps(request),
        response_status=status,
        response_headers=HeaderMap.of({"Content-Type": ctype}) if raw else HeaderMap(),
        response_body=raw,
        legacy_session=negotiated is not None,
        negotiated_version=negotiated,
    )
    return list(judge(exchange).findings)


def _rules(found: list[Finding]) -> list[tuple[str, int | None, Strength]]:
    return [(f.rule, f.code, f.strength) for f in found]


class TestGolden:
    """What 2025-03-26 allows is no finding."""

    def test_json_array_answer(self) -> None:
        """A batch answered with an array of its responses, in any order."""
        assert _judge(BATCH, 200, [PROMPTS, TOOLS]) == []

    def test_sse_one_event_per_response(self) -> None:
        """A batch answered with a stream of one response per request."""
        assert _judge(BATCH, 200, None, sse=[TOOLS, PROMPTS]) == []

    def test_sse_batched_responses(self) -> None:
        """"These responses MAY be batched": one event holding an array of responses."""
        assert _judge(BATCH, 200, None, sse=[[TOOLS, PROMPTS]]) == []

    def test_sse_batched_notifications_before_responses(self) -> None:
        """"These requests and notifications MAY be batched" (legacy notifications)."""
        note = {"jsonrpc": "2.0", "method": "notifications/message",
                "params": {"level": "info", "data": "x"}}
        assert _judge(BATCH, 200, None, sse=[[note, note], TOOLS, PROMPTS]) == []

    def test_single_request_answered_by_batched_event(self) -> None:
        """A single request's response may come batched too (a one-item array)."""
        request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        assert _judge(request, 200, None, sse=[[TOOLS]]) == []

    def test_headerless_batch_without_session_is_2025_03_26(self) -> None:
        """No session, no version header: the batch is a 2025-03-26 one, accepted."""
        assert infer_era(BATCH, None) is Era.LEGACY
        found = _judge(BATCH, 200, [TOOLS, PROMPTS], negotiated=None,
                       headers={"Accept": "application/json, text/event-stream"})
        assert found == []

    def test_notification_batch_202(self) -> None:
        """A batch of notifications only is accepted with 202 and no body."""
        notes = [{"jsonrpc": "2.0", "method": "notifications/initialized"}] * 2
        assert _judge(notes, 202, None) == []

    def test_invalid_item_answered_by_null_id_error(self) -> None:
        """An invalid item is answered by an error without id (JSON-RPC 2.0 "Batch")."""
        batch = [BATCH[0], {"jsonrpc": "2.0"}]
        err = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "bad"}}
        found = _judge(batch, 200, [TOOLS, err])
        assert _rules(found) == [("request.envelope", -32600, Strength.MUST)]


class TestNegative:
    """What 2025-03-26 forbids, with its exact rule, code and strength."""

    def test_batch_refused_with_one_error(self) -> None:
        """Servers MUST support receiving batches: one id-less error refuses the batch."""
        err = {"jsonrpc": "2.0", "id": None,
               "error": {"code": -32600, "message": "Batches not supported"}}
        found = _judge(BATCH, 400, err)
        assert _rules(found) == [("response.batch.refused", -32600, Strength.MUST)]

    def test_batch_refused_with_http_error(self) -> None:
        """A valid batch answered with HTTP 400 and no JSON-RPC body is refused."""
        found = _judge(BATCH, 400, None)
        assert _rules(found) == [("response.batch.refused", -32600, Strength.MUST)]

    def test_pre_body_refusal_is_not_a_batch_refusal(self) -> None:
        """A 429 (rate limit) comes before the body is read: not about batches."""
        exchange_found = _judge(BATCH, 429, None)
        assert exchange_found == []

    def test_json_answer_missing_a_response(self) -> None:
        """One response per request SHOULD come: a JSON array without one is a warning."""
        found = _judge(BATCH, 200, [TOOLS])
        assert _rules(found) == [("response.batch.incomplete", -32600, Strength.SHOULD)]

    def test_sse_answer_missing_a_response(self) -> None:
        """The stream SHOULD include one response per request (legacy: a warning)."""
        found = _judge(BATCH, 200, None, sse=[TOOLS])
        assert _rules(found) == [("sse.unterminated", None, Strength.SHOULD)]

    def test_response_for_no_request(self) -> None:
        """A response whose id names no request of the batch."""
        stray = {"jsonrpc": "2.0", "id": 9, "result": {"tools": []}}
        found = _judge(BATCH, 200, [TOOLS, PROMPTS, stray])
        assert _rules(found) == [("response.id", -32600, Strength.MUST)]

    @pytest.mark.parametrize("negotiated", ["2025-11-25", "2025-06-18"])
    def test_batch_in_a_later_revision(self, negotiated: str) -> None:
        """A batch in a session of a revision without batches is the client's error."""
        found = _judge(BATCH, 400, {"jsonrpc": "2.0", "id": None,
                                    "error": {"code": -32600, "message": "no batches"}},
                       negotiated=negotiated)
        assert _rules(found) == [("request.envelope", -32600, Strength.MUST)]
        assert negotiated in found[0].message

    def test_header_names_a_later_revision(self) -> None:
        """No session known: the version header decides (2025-11-25 has no batches)."""
        found = _judge(BATCH, 400, None, negotiated=None,
                       headers={**ACCEPT, "MCP-Protocol-Version": "2025-11-25"})
        assert [f.rule for f in found] == ["request.envelope",
                                          "response.expected-error.jsonrpc"]

    def test_batched_event_in_a_later_revision(self) -> None:
        """An array event on a 2025-11-25 stream is not a message of that revision."""
        request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        found = _judge(request, 200, None, sse=[[TOOLS]], negotiated="2025-11-25")
        assert ("sse.event", -32600, Strength.MUST) in _rules(found)


def test_initialize_in_a_batch() -> None:
    """2025-03-26 lifecycle "Initialization": initialize MUST NOT be part of a batch; the
    batch is then invalid and may be refused as a whole."""
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-03-26", "capabilities": {},
                       "clientInfo": {"name": "c", "version": "1"}}}
    err = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "no"}}
    found = _judge([init, BATCH[1]], 400, err, negotiated=None,
                   headers={"Accept": "application/json, text/event-stream"})
    assert _rules(found) == [("request.envelope", -32600, Strength.MUST)]
    assert "initialize" in found[0].message


def test_unbatched_splits_arrays_only() -> None:
    """unbatched: an array event becomes one event per item (id and type kept); others pass."""
    events = [SSEEvent('[{"a":1},{"b":2}]', None, "7"), SSEEvent(""), SSEEvent("[1")]
    out = list(unbatched(events))
    assert [(e.data, e.id) for e in out] == [('{"a":1}', "7"), ('{"b":2}', "7"), ("", None),
                                             ("[1", None)]
