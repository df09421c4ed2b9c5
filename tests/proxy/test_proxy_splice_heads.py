"""The head memos (one per hop, :class:`~mcp_tap.proxy.splice.framing.HeadMemo`): a head's
analysis remembered by its bytes is the analysis of those very bytes (whatever came before),
and the memo stays bounded."""

from __future__ import annotations

import pytest

from mcp_tap.proxy.splice import framing
from mcp_tap.proxy.splice.framing import (
    KEPT_HEAD_BYTES,
    KEPT_HEADS,
    REQUEST_SCAN,
    RESPONSE_SCAN,
    HeadMemo,
    head_scan,
)


def test_a_remembered_head_gives_what_analysing_it_gives() -> None:
    memo = HeadMemo()
    request_head, known_request = memo.request_head, memo.known_request
    response_head, known_response = memo.response_head, memo.known_response
    heads = [
        b"POST /mcp HTTP/1.1\r\nContent-Length: 2\r\n\r\n",
        b"POST /mcp HTTP/1.1\r\ncontent-length: 2\r\nMcp-Session-Id: s\r\n\r\n",
        b"POST /mcp HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"GET /x HTTP/1.1\r\nConnection: close\r\n\r\n",
        b"GET /\r\n\r\n",  # no version: no method
    ]
    learnt = [request_head(head) for head in heads]
    assert len(memo.requests) == len(heads)
    # remembered by bytes (an equal copy finds it) and the same as analysing them again
    assert [known_request(bytes(bytearray(head))) for head in heads] == learnt
    assert [request_head(head) for head in heads] == learnt
    assert learnt[0] == ("length", 2, False, "POST", "/mcp")
    assert learnt[1][2] is True  # a session is notable
    assert learnt[2][:2] == ("chunked", 0)
    assert learnt[4][3:] == (None, "")
    for head in heads[:4]:  # the inlined scan is head_scan
        assert head_scan(head.lower(), REQUEST_SCAN) == learnt[heads.index(head)][:3]
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\nKeep-Alive: x\r\n\r\n"
    assert response_head(answer) == ("length", 7, True) == known_response(answer)
    assert head_scan(answer.lower(), RESPONSE_SCAN) == ("length", 7, True)
    chunked = b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\nTransfer-Encoding: chunked\r\n\r\n"
    assert response_head(chunked) == ("chunked", 0, False) == head_scan(chunked.lower(),
                                                                        RESPONSE_SCAN)


def test_the_memo_is_bounded_and_keeps_no_long_head() -> None:
    memo = HeadMemo()
    request_head, known_request, response_head = (
        memo.request_head, memo.known_request, memo.response_head)
    long = b"GET / HTTP/1.1\r\nX: " + b"a" * KEPT_HEAD_BYTES + b"\r\n\r\n"
    assert request_head(long) == ("none", 0, False, "GET", "/")
    assert known_request(long) is None
    for i in range(KEPT_HEADS + 10):
        request_head(b"GET /%d HTTP/1.1\r\n\r\n" % i)
        assert len(memo.requests) <= KEPT_HEADS
    assert 0 < len(memo.requests) <= KEPT_HEADS
    assert known_request(b"GET /%d HTTP/1.1\r\n\r\n" % (KEPT_HEADS + 9)) \
        == ("none", 0, False, "GET", f"/{KEPT_HEADS + 9}")
    for i in range(KEPT_HEADS + 10):
        response_head(b"HTTP/1.1 200 OK\r\nX: %d\r\n\r\n" % i)
        assert len(memo.responses) <= KEPT_HEADS


def test_the_bound_look_ups_read_the_memos_even_after_one_starts_over() -> None:
    memo = HeadMemo()
    for i in range(KEPT_HEADS + 1):  # the last one clears the memo before it is kept
        memo.response_head(b"HTTP/1.1 200 OK\r\nX: %d\r\n\r\n" % i)
    assert len(memo.responses) == 1
    assert memo.known_response(b"HTTP/1.1 200 OK\r\nX: %d\r\n\r\n" % KEPT_HEADS) \
        == ("none", 0, False)


def test_each_hop_owns_its_memo() -> None:
    one, two = HeadMemo(), HeadMemo()
    one.request_head(b"GET / HTTP/1.1\r\n\r\n")
    assert one.known_request(b"GET / HTTP/1.1\r\n\r\n") is not None
    assert two.known_request(b"GET / HTTP/1.1\r\n\r\n") is None


def _chunked_answer() -> framing.ResponseMessage:
    from mcp_tap.proxy.capture import RawBody

    response = framing.ResponseMessage(RawBody(1 << 20), False, lambda: 0.0, HeadMemo())
    response.feed_head(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    response.chunked = True
    return response


@pytest.mark.parametrize(("reads", "taken", "complete"), [
    # the usual end of a stream: one parser call, ends exactly at the last byte
    ([b"3\r\nabc\r\n0\r\n\r\n"], [13], True),
    ([b"3\r\nabc\r\n", b"0\r\n\r\n"], [8, 5], True),
    # a trailer section: the end is later than the second LF, and nothing after it is taken
    ([b"3\r\nabc\r\n0\r\nT: x\r\n", b"\r\nHTTP/1.1 200 OK\r\n\r\n"], [17, 2], True),
    ([b"0\r\nT: x\r\n", b"\r\n", b"stray"], [9, 2, 0], True),
    # bytes after the end in the same read are not taken
    ([b"3\r\nabc\r\n0\r\n\r\nstray\r\n"], [13], True),
    # "0" at a line start inside chunk data: no end there, the rest still ends exactly
    ([b"5\r\nx\n0\r\n\r\n", b"0\r\n\r\nzz"], [10, 5], True),
    ([b"4\r\n\n0\r\n\r\n0\r\n\r\n"], [14], True),
])
def test_a_chunked_answer_is_taken_exactly_to_its_end(
    reads: list[bytes], taken: list[int], complete: bool,
) -> None:
    response = _chunked_answer()
    assert [response.feed(data) for data in reads] == taken
    assert response.complete is complete
