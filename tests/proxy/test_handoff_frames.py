"""The hand-off frames between the forwarding and the recording process: marshal for plain
values, a pickle (flagged in the length prefix) for anything else; decoded in any pieces."""

from __future__ import annotations

import time
from fractions import Fraction

import pytest

from mcp_tap.proxy import handoff
from mcp_tap.proxy.capture import (
    COMMON_NAMES,
    FLAT_NAMES,
    LISTED,
    RARE_NAMES,
    RawBody,
    RawExchange,
    flat_fields,
)
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


def _read(raw: RawExchange, name: str) -> object:
    """A field as the readers of the hand-off give it (a list field's None as [])."""
    value = getattr(raw, name)
    return [] if value is None and name in LISTED else value


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


def test_the_flat_state_holds_every_flat_field_and_restores_it() -> None:
    raw = _exchange()  # rare fields set: they go as a tuple
    flat = raw.state()[0]
    assert len(flat) == len(COMMON_NAMES) + 1 and flat[-1] is not None
    assert flat[:-1] == tuple(getattr(raw, name) for name in COMMON_NAMES)
    assert flat[-1] == tuple(getattr(raw, name) for name in RARE_NAMES)
    # every flat field but the key, which the hand-off message carries (not twice)
    assert set(COMMON_NAMES) | set(RARE_NAMES) | {"handover_key"} == set(FLAT_NAMES)
    assert "handover_key" not in COMMON_NAMES + RARE_NAMES
    assert len(FLAT_NAMES) == len(RawExchange.__slots__) - 3  # all but the bodies' fields
    assert list(flat_fields(flat)) == list(FLAT_NAMES)
    raw.handover_key = 41
    restored = RawExchange.restored(raw.state())
    assert restored.handover_key is None
    assert all(getattr(restored, n) == _read(raw, n) for n in FLAT_NAMES
               if n != "handover_key")
    assert raw.egress_changes is None and restored.egress_changes == []  # (read as a list)


def test_a_request_body_goes_without_its_times_and_an_answer_with_them() -> None:
    raw = _exchange()
    answer = RawBody(64)
    answer.take([b"data: 1\n\n", b"data: 2\n\n"], 5.5)
    raw.response = answer
    raw.request.times[:] = [0.0] * len(raw.request.times)  # (as the splice core stamps them)
    _, request, response, _ = raw.state()
    assert request[2] is None and request[1] == raw.request.chunks
    assert response[2] == [5.5, 5.5]
    restored = RawExchange.restored(raw.state())
    assert restored.request.times == raw.request.times == [0.0, 0.0]
    assert restored.response is not None and restored.response.times == [5.5, 5.5]


def test_rare_fields_at_their_usual_values_go_as_none_and_come_back_equal() -> None:
    body = RawBody(64)
    raw = RawExchange("tap", "http://127.0.0.1:1", "127.0.0.1", "GET", "/", b"GET / HTTP/1.1"
                      b"\r\n\r\n", body, 1.0)
    raw.status = raw.egress_status = 200
    raw.end_at = 2.5
    raw.egress_end_at = 2.5  # equal, another object
    flat = raw.state()[0]
    assert flat[-1] is None
    fields = flat_fields(flat)
    assert fields == {n: _read(raw, n) for n in FLAT_NAMES}
    assert raw.interim is None and fields["interim"] == []
    assert fields["egress_status"] == 200 and fields["egress_end_at"] == 2.5
    # Built fresh per exchange: one capture's list is never another's.
    assert fields["interim"] is not flat_fields(flat)["interim"]
    # Any one rare field away from its usual value sends them all.
    for name, value in (("egress_status", 502), ("egress_end_at", 3.0), ("interim", [100]),
                        ("client_gone", True), ("trace_id", "ab"), ("session", ""),
                        ("session_version", "v"), ("head_changes", [{"change": "x"}])):
        other = RawExchange.restored(raw.state())
        setattr(other, name, value)
        rare = other.state()[0][-1]
        assert rare is not None and rare[RARE_NAMES.index(name)] == value
        assert flat_fields(other.state()[0])[name] == value


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


def test_a_list_field_is_none_until_it_holds_something() -> None:
    raw = _exchange()
    raw.egress_changed([])
    assert raw.egress_changes is None  # nothing to add: still the usual value
    raw.egress_changed([{"change": "removed"}])
    raw.egress_changed([{"change": "dropped"}])
    assert raw.egress_changes == [{"change": "removed"}, {"change": "dropped"}]
    fresh = RawExchange("tap", "u", "c", "GET", "/", b"", RawBody(1), 0.0)
    assert fresh.interim is None
    fresh.interim_sent(100)
    fresh.interim_sent(103)
    assert fresh.interim == [100, 103]
    assert flat_fields(fresh.state()[0])["interim"] == [100, 103]


def test_the_recording_side_reads_a_list_field_never_set_as_a_fresh_list() -> None:
    from mcp_tap.proxy.captured import materialize

    raw = RawExchange("tap", "u", "c", "GET", "/", b"GET / HTTP/1.1\r\n\r\n", RawBody(1), 0.0)
    for trace_id in ("", "ab"):  # the rare fields as None, then as a tuple
        raw.trace_id = trace_id
        first, second = materialize(raw, 10), materialize(raw, 10)
        assert first.head_changes == first.egress_changes == first.interim == []
        assert first.interim is not second.interim
        assert first.trace_id == trace_id
