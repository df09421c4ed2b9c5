"""The hand-off frames between the forwarding and the recording process: marshal for plain
values, a pickle (flagged in the length prefix) for anything else; decoded in any pieces."""

from __future__ import annotations

import time
from fractions import Fraction

import pytest

from mcp_tap.proxy import handoff
from mcp_tap.proxy.capture import FLAT_NAMES, RawBody, RawExchange
from mcp_tap.proxy.handoff import HEADER, PICKLED, FrameDecoder, encode


def _exchange() -> RawExchange:
    body = RawBody(64)
    body.feed(b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}', time.time())
    body.feed(b"x" * 100, time.time())  # past the cap: a running digest, frozen by state()
    body.ended = True
    raw = RawExchange("tap", "http://127.0.0.1:1", "127.0.0.1", "POST", "/mcp",
                      b"POST /mcp HTTP/1.1\r\nHost: a\r\n\r\n", body, time.time())
    raw.head_changes = [{"change": "removed", "header": "Connection", "why": "hop-by-hop"}]
    raw.tap_error = {"status": None, "phase": "cut", "reason": "x"}
    raw.response_pairs = ((b"Content-Type", b"application/json"),)
    raw.interim = [100]
    raw.egress_status = 200
    return raw


def test_plain_values_go_as_marshal_and_come_back_equal() -> None:
    raw = _exchange()
    batch = [("begin", 7, "tap", "session-1"), ("record", 7, raw.state()), ("stop",)]
    frame = encode(batch)
    assert not int.from_bytes(frame[:HEADER], "big") & PICKLED
    decoder = FrameDecoder()
    [back] = decoder.feed(frame)
    assert back == batch
    restored = RawExchange.restored(back[1][2])
    assert restored.request.chunks == raw.request.chunks
    assert restored.request.digest == raw.request.digest != ""
    assert restored.request.size == 146 and restored.request.truncated
    assert restored.head_changes == raw.head_changes and restored.interim == [100]
    assert decoder.frames == 1 and decoder.bad == 0 and decoder.pending == 0


def test_the_flat_state_holds_every_flat_field_in_flat_names_order() -> None:
    raw = _exchange()
    flat = raw.state()[0]
    assert flat == tuple(getattr(raw, name) for name in FLAT_NAMES)
    assert len(flat) == len(RawExchange.__slots__) - 3  # all but the three bodies' fields
    restored = RawExchange.restored(raw.state())
    assert all(getattr(restored, n) == getattr(raw, n) for n in FLAT_NAMES)


def test_what_marshal_cannot_encode_goes_as_a_flagged_pickle() -> None:
    batch = [("lost", 3, "why"), ("odd", Fraction(1, 3))]
    frame = encode(batch)
    assert int.from_bytes(frame[:HEADER], "big") & PICKLED
    assert FrameDecoder().feed(frame) == [batch]


def test_frames_split_across_reads_decode_in_order() -> None:
    batches = [[("begin", n, "tap", None)] for n in range(3)] + [[("x", Fraction(n))]
                                                                  for n in range(2)]
    data = b"".join(encode(b) for b in batches)
    decoder = FrameDecoder()
    got = []
    for at in range(0, len(data), 5):  # 5 bytes per read: every header and body is split
        got += decoder.feed(data[at : at + 5])
    assert got == batches
    assert decoder.pending == 0 and decoder.frames == 5


def test_a_frame_that_does_not_decode_is_counted_and_skipped() -> None:
    good = encode([("begin", 1, "tap", None)])
    corrupt = (6).to_bytes(HEADER, "big") + b"\xff" * 6  # a marshal type code that is none
    truncated_pickle = encode([("odd", Fraction(1, 2))])
    cut = (len(truncated_pickle) - HEADER - 3) | PICKLED  # the pickle's last bytes missing
    truncated = cut.to_bytes(HEADER, "big") + truncated_pickle[HEADER:-3]
    decoder = FrameDecoder()
    assert decoder.feed(corrupt + good + truncated + good) == [[("begin", 1, "tap", None)]] * 2
    assert decoder.bad == 2 and decoder.frames == 2


def test_a_frame_cut_short_by_the_pipe_end_stays_pending() -> None:
    frame = encode([("begin", 1, "tap", None)])
    decoder = FrameDecoder()
    assert decoder.feed(frame + frame[:-1]) == [[("begin", 1, "tap", None)]]
    assert decoder.pending == len(frame) - 1 and decoder.bad == 0


def test_a_batch_too_big_for_one_frame_goes_as_several(monkeypatch: pytest.MonkeyPatch) -> None:
    batch = [("begin", n, "tap", "s" * 20) for n in range(9)]
    monkeypatch.setattr(handoff, "MAX_FRAME", 100)
    data = encode(batch)
    decoder = FrameDecoder()
    got = decoder.feed(data)
    assert decoder.frames > 1 and [m for b in got for m in b] == batch
