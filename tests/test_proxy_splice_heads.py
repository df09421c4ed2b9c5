"""The head memos: a head's analysis remembered by its bytes is the analysis of those very
bytes (whatever came before), and the memo stays bounded."""

from __future__ import annotations

import pytest

from mcp_tap.proxy.splice import framing
from mcp_tap.proxy.splice.framing import (
    KEPT_HEAD_BYTES,
    KEPT_HEADS,
    REQUEST_SCAN,
    HeadMemo,
    head_scan,
    request_head,
    response_head,
)


def test_a_remembered_head_gives_what_analysing_it_gives() -> None:
    memo = HeadMemo(request_head)
    heads = [
        b"POST /mcp HTTP/1.1\r\nContent-Length: 2\r\n\r\n",
        b"POST /mcp HTTP/1.1\r\ncontent-length: 2\r\nMcp-Session-Id: s\r\n\r\n",
        b"POST /mcp HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"GET /x HTTP/1.1\r\nConnection: close\r\n\r\n",
        b"GET /\r\n\r\n",  # no version: no method
    ]
    for _ in range(2):  # learnt, then remembered
        for head in heads:
            assert memo[bytes(head)] == request_head(head)
    assert len(memo) == len(heads)
    assert memo[heads[0]] == ("length", 2, False, "POST", "/mcp")
    assert memo[heads[1]][2] is True  # a session is notable
    assert memo[heads[2]][:2] == ("chunked", 0)
    assert memo[heads[4]][3:] == (None, "")
    assert response_head(b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\nKeep-Alive: x\r\n\r\n") \
        == ("length", 7, True)
    assert head_scan(heads[0].lower(), REQUEST_SCAN) == memo[heads[0]][:3]


def test_the_memo_is_bounded_and_keeps_no_long_head() -> None:
    memo = HeadMemo(request_head)
    long = b"GET / HTTP/1.1\r\nX: " + b"a" * KEPT_HEAD_BYTES + b"\r\n\r\n"
    assert memo[long] == request_head(long)
    assert long not in memo
    for i in range(KEPT_HEADS + 10):
        memo[b"GET /%d HTTP/1.1\r\n\r\n" % i]
        assert len(memo) <= KEPT_HEADS
    assert 0 < len(memo) <= KEPT_HEADS
    assert memo[b"GET /3 HTTP/1.1\r\n\r\n"] == ("none", 0, False, "GET", "/3")


def test_the_forwarder_reads_both_memos() -> None:
    assert framing.REQUEST_HEADS.analyse is request_head
    assert framing.RESPONSE_HEADS.analyse is response_head


def _chunked_answer() -> framing.ResponseMessage:
    from mcp_tap.proxy.capture import RawBody

    response = framing.ResponseMessage(RawBody(1 << 20), False, lambda: 0.0)
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
