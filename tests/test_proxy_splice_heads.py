"""The head memos: a head's analysis remembered by its bytes is the analysis of those very
bytes (whatever came before), and the memo stays bounded."""

from __future__ import annotations

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
