"""The parser's remembered verdicts (the hop's ``HeadMemo.accepted_requests`` / ``..._responses``):
a head the parser accepted before is not parsed again when its whole message is in view,
and the exchange is the same as when it was parsed; anything else still goes through the
parser, which stays in step."""

from __future__ import annotations

from typing import Any

from splices import ANSWER, ANSWER_BODY, BODY, REQUEST, Splice

from mcp_tap.proxy.splice.framing import HeadMemo

REQUEST_HEAD = REQUEST[: REQUEST.index(b"\r\n\r\n") + 4]
ANSWER_HEAD = ANSWER[: ANSWER.index(b"\r\n\r\n") + 4]


class _NoParser:
    """Stands in for a parser that must not be called."""

    def feed_data(self, data: Any) -> None:
        raise AssertionError("the parser was called")


def _fields(splice: Splice, i: int) -> tuple[Any, ...]:
    raw = splice.recorder.records[i]
    assert raw.response is not None
    return (raw.http_method, raw.path, raw.status, raw.request.chunks, raw.request.size,
            raw.request.ended, raw.response.chunks, raw.response.size, raw.response.ended,
            raw.request_framing, raw.response_framing, raw.egress_bytes, raw.tap_error)


async def test_an_accepted_head_is_not_parsed_again_and_the_exchange_is_the_same() -> None:
    splice = Splice()
    memo = splice.hop.heads
    for _ in range(2):  # seen once, then seen again: the verdicts are kept from then on
        splice.client.data_received(bytes(REQUEST))
        splice.conn.data_received(bytes(ANSWER))
    assert memo.accepted_requests == {REQUEST_HEAD: True}
    assert {ANSWER_HEAD: (200, True, len(ANSWER_BODY))} == memo.accepted_responses
    request_parser = splice.client._requests
    response_parser = splice.conn.response
    assert request_parser is not None and response_parser is not None
    real = request_parser._parser, response_parser._parser
    request_parser._parser = _NoParser()
    response_parser._parser = _NoParser()
    splice.client.data_received(bytes(REQUEST))
    splice.conn.data_received(bytes(ANSWER))
    assert _fields(splice, 2) == _fields(splice, 0)
    assert _fields(splice, 0)[3] == [BODY] and _fields(splice, 0)[6] == [ANSWER_BODY]
    assert b"".join(splice.up.writes) == REQUEST * 3
    assert b"".join(splice.down.writes) == ANSWER * 3
    assert splice.client.exchange is None and splice.hop.answered[2] == 3
    # The parsers were left where parsing would have left them: in pieces, they parse.
    request_parser._parser, response_parser._parser = real
    splice.client.data_received(REQUEST[:20])
    splice.client.data_received(REQUEST[20:-5])
    splice.client.data_received(REQUEST[-5:])
    splice.conn.data_received(ANSWER[:-3])
    splice.conn.data_received(ANSWER[-3:])
    assert b"".join(splice.recorder.records[3].request.chunks) == BODY
    response = splice.recorder.records[3].response
    assert response is not None and b"".join(response.chunks) == ANSWER_BODY
    assert b"".join(splice.down.writes) == ANSWER * 4
    splice.close()


async def test_a_message_not_all_in_view_is_parsed() -> None:
    splice = Splice()
    for _ in range(2):
        splice.client.data_received(bytes(REQUEST))
        splice.conn.data_received(bytes(ANSWER))
    parser = splice.client._requests
    assert parser is not None and REQUEST_HEAD in splice.hop.heads.accepted_requests
    real = parser._parser
    parser._parser = _NoParser()
    try:  # the head with half its body: the rest follows, so the parser must see it
        splice.client.data_received(REQUEST[:-10])
        raise AssertionError("not parsed")
    except AssertionError as exc:
        assert str(exc) == "the parser was called"
    parser._parser = real
    splice.close()


async def test_the_keep_alive_verdict_is_the_parsers() -> None:
    closing = REQUEST.replace(b"HTTP/1.1", b"HTTP/1.0")  # (no keep-alive: closes after)
    closes = []
    memo = HeadMemo()
    for _ in range(3):  # the third takes the remembered verdict
        splice = Splice(memo)
        splice.down.close = lambda: closes.append(1)  # type: ignore[method-assign]
        splice.client.data_received(bytes(closing))
        splice.conn.data_received(bytes(ANSWER))
        assert splice.up.writes == [closing]
    assert {closing[: closing.index(b"\r\n\r\n") + 4]: False} == memo.accepted_requests
    assert closes == [1, 1, 1]


async def test_a_rejected_head_and_bodiless_answers_are_never_remembered() -> None:
    bad = REQUEST.replace(b"Host: a\r\n", b"Host a\r\n")
    memo = HeadMemo()
    for _ in range(3):
        splice = Splice(memo)
        splice.client.data_received(bytes(bad))
        assert b" 400 " in splice.down.writes[0]
    assert memo.accepted_requests == {}
    head = b"HEAD /mcp HTTP/1.1\r\nHost: a\r\n\r\n"
    no_content = b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"
    splice = Splice(memo)
    for _ in range(3):  # an answer to a HEAD announces a body that does not come
        splice.client.data_received(head)
        splice.conn.data_received(ANSWER_HEAD)
        splice.client.data_received(bytes(REQUEST))
        splice.conn.data_received(no_content)
    assert memo.accepted_responses == {}
    assert len(splice.recorder.records) == 6
    assert [r.status for r in splice.recorder.records] == [200, 204] * 3
    assert b"".join(splice.down.writes) == (ANSWER_HEAD + no_content) * 3
    splice.close()
