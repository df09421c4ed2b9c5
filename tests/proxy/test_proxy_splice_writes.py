"""The splice path in-process, with transports that keep what is written: bytes that arrive
together leave in one write of the very object received (no copy, no split head and body),
and every other shape of arrival still leaves byte for byte."""

from __future__ import annotations

import asyncio

from splices import ANSWER, ANSWER_BODY, BODY, REQUEST, Splice

from mcp_tap.proxy.capture import SPENT


async def test_what_arrives_together_leaves_in_one_write_of_the_same_object() -> None:
    """Head and body in one read: the origin gets that very object, and the client the
    answer's, each in one write; the capture still holds the bodies."""
    splice = Splice()
    request, answer = bytes(REQUEST), bytes(ANSWER)
    splice.client.data_received(request)
    splice.conn.data_received(answer)
    assert len(splice.up.writes) == 1 and splice.up.writes[0] is request
    assert len(splice.down.writes) == 1 and splice.down.writes[0] is answer
    (raw,) = splice.recorder.records
    assert raw.request.chunks == [BODY] and raw.response is not None
    assert raw.response.chunks == [ANSWER_BODY]
    assert splice.hop.began == 1 and splice.hop.answered[2] == 1
    splice.close()


async def test_pieces_and_blank_lines_leave_byte_for_byte() -> None:
    """A head in pieces after blank lines (ignored), a body in pieces, an answer in pieces."""
    splice = Splice()
    pieces = [b"\r\n", REQUEST[:7], REQUEST[7:40], REQUEST[40:-10], REQUEST[-10:]]
    for piece in pieces:
        splice.client.data_received(piece)
    for at in range(0, len(ANSWER), 9):
        splice.conn.data_received(ANSWER[at : at + 9])
    assert b"".join(splice.up.writes) == REQUEST
    assert b"".join(splice.down.writes) == ANSWER
    assert len(splice.recorder.records) == 1
    splice.close()


async def test_a_rewritten_head_is_sent_with_the_body_as_received() -> None:
    """A hop-by-hop field leaves the head; the body that came with it follows untouched."""
    splice = Splice()
    request = REQUEST.replace(b"Host: a\r\n", b"Host: a\r\nKeep-Alive: 5\r\n")
    splice.client.data_received(request)
    splice.conn.data_received(ANSWER)
    assert b"".join(splice.up.writes) == REQUEST
    assert splice.down.writes == [ANSWER]
    splice.close()


async def test_pipelined_requests_are_cut_at_each_end() -> None:
    """Two requests in one read: the first goes alone; the second after the first answer."""
    splice = Splice()
    splice.client.data_received(REQUEST + REQUEST)
    assert splice.up.writes == [REQUEST]
    splice.conn.data_received(ANSWER)
    await asyncio.sleep(0)  # the next pipelined request starts in the next loop iteration
    assert b"".join(splice.up.writes) == REQUEST + REQUEST
    splice.conn.data_received(ANSWER)
    assert b"".join(splice.down.writes) == ANSWER + ANSWER
    assert len(splice.recorder.records) == 2
    splice.close()



def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


# The second chunk's data has a line starting with "0" (not the last chunk).
CHUNKED = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
           b"\r\n" + _chunk(b"event: message\ndata: 1\n\n") + _chunk(b"data: 2\n0\n\n")
           + b"0;ext=1\r\nTrailer: t\r\n\r\n")


async def test_a_chunked_answer_ends_exactly_wherever_the_reads_split_it() -> None:
    """The last chunk and trailers end the answer at their last byte, whether it comes in
    one read (that object, one write) or split anywhere; what follows is not sent."""
    for split in range(1, len(CHUNKED)):
        splice = Splice()
        splice.client.data_received(REQUEST)
        splice.conn.data_received(CHUNKED[:split])
        splice.conn.data_received(CHUNKED[split:] + b"stray")
        assert b"".join(splice.down.writes) == CHUNKED, split
        (raw,) = splice.recorder.records
        assert raw.response is not None and raw.response.ended
        splice.close()
    splice = Splice()
    answer = bytes(CHUNKED)
    splice.client.data_received(REQUEST)
    splice.conn.data_received(answer)
    assert len(splice.down.writes) == 1 and splice.down.writes[0] is answer
    splice.close()


async def test_finished_bodies_are_let_go_and_nothing_feeds_the_stand_in() -> None:
    """Once an exchange is recorded its parsers hold the stand-in body, not its bodies
    (so the hand-off meets those only once); the next exchange's bodies are its own."""
    splice = Splice()
    for n in range(3):
        splice.client.data_received(bytes(REQUEST))
        assert splice.client._requests is not None
        ex = splice.client.exchange
        assert ex is not None and splice.client._requests.body is ex.raw.request
        assert len(splice.recorder.records) == n
        splice.conn.data_received(bytes(ANSWER))
        raw = splice.recorder.records[-1]
        assert splice.client._requests.body is SPENT
        assert splice.conn.response is not None and splice.conn.response.body is SPENT
        assert raw.request.chunks == [BODY] and raw.response is not None
        assert raw.response.chunks == [ANSWER_BODY] and raw.response.ended
    assert len(splice.recorder.records) == 3
    splice.close()
    assert SPENT.size == 0 and SPENT.chunks == [] and SPENT.times == []
