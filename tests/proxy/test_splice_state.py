"""The exchange state machine (:mod:`mcp_tap.proxy.splice.state`), sans-IO: its table, and a
real client connection driven with bytes (transports that keep what is written, no socket)
whose exchange goes through the phases the table says, event by event."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from splices import ANSWER, ANSWER_BODY, BODY, REQUEST, Splice

from mcp_tap.errors import PhaseError
from mcp_tap.proxy.splice.exchange import Exchange
from mcp_tap.proxy.splice.state import (
    HEAD_AWAITED,
    REQUEST_OPEN,
    TRANSITIONS,
    Event,
    Phase,
    next_phase,
)

Step = tuple[Phase, Event, Phase]


@pytest.fixture
def steps(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Step]]:
    """Every transition any exchange makes, as (from, event, to)."""
    seen: list[Step] = []
    to = Exchange.to

    def recording(ex: Exchange, event: Event) -> Phase:
        before = ex.phase
        after = to(ex, event)
        seen.append((before, event, after))
        return after

    monkeypatch.setattr(Exchange, "to", recording)
    yield seen


def test_the_table_finishes_every_phase_once_and_has_no_way_back() -> None:
    for phase in Phase:
        if phase is Phase.FINISHED:
            assert TRANSITIONS[phase] == {}
        else:
            assert TRANSITIONS[phase][Event.FINISH] is Phase.FINISHED
    assert next_phase(Phase.SENDING, Event.REQUEST_ENDED) is Phase.WAITING
    assert next_phase(Phase.CROSSING, Event.REQUEST_ENDED) is Phase.ANSWERING
    assert next_phase(Phase.SENDING, Event.ANSWER_ENDED) is Phase.ANSWERED_EARLY
    with pytest.raises(PhaseError, match="no transition from FINISHED on FINISH"):
        next_phase(Phase.FINISHED, Event.FINISH)
    with pytest.raises(PhaseError, match="from ANSWERING on UPGRADED"):
        next_phase(Phase.ANSWERING, Event.UPGRADED)
    # the request ends once: no phase after it takes the event again
    for phase in (Phase.WAITING, Phase.ANSWERING, Phase.TUNNEL, Phase.ANSWERED):
        assert Event.REQUEST_ENDED not in TRANSITIONS[phase]
    assert {Phase.SENDING, Phase.CROSSING} == REQUEST_OPEN
    assert {Phase.SENDING, Phase.WAITING} == HEAD_AWAITED


async def test_a_request_and_its_answer_in_pieces_go_through_each_phase(
    steps: list[Step],
) -> None:
    splice = Splice()
    cut = REQUEST.index(b"\r\n\r\n") + 4
    splice.client.data_received(REQUEST[: cut + 5])
    ex = splice.client.exchange
    assert ex is not None and ex.phase is Phase.SENDING and steps == []
    splice.client.data_received(REQUEST[cut + 5:])
    assert ex.phase is Phase.WAITING
    answer_cut = ANSWER.index(b"\r\n\r\n") + 4
    splice.conn.data_received(ANSWER[: answer_cut - 3])  # half a head: still awaited
    assert ex.phase is Phase.WAITING and ex.head_part == ANSWER[: answer_cut - 3]
    splice.conn.data_received(ANSWER[answer_cut - 3: answer_cut + 4])
    assert ex.phase is Phase.ANSWERING and ex.remaining == len(ANSWER_BODY) - 4
    splice.conn.data_received(ANSWER[answer_cut + 4:])
    assert ex.phase is Phase.FINISHED and splice.client.exchange is None
    assert steps == [
        (Phase.SENDING, Event.REQUEST_ENDED, Phase.WAITING),
        (Phase.WAITING, Event.FINAL_HEAD, Phase.ANSWERING),
        (Phase.ANSWERING, Event.ANSWER_ENDED, Phase.ANSWERED),
        (Phase.ANSWERED, Event.FINISH, Phase.FINISHED),
    ]
    (raw,) = splice.recorder.records
    assert raw.request.ended and raw.request.chunks and b"".join(raw.request.chunks) == BODY
    assert b"".join(splice.up.writes) == REQUEST and b"".join(splice.down.writes) == ANSWER
    assert splice.hop.pool.idle == [splice.conn]  # answered cleanly: reused
    splice.close()


async def test_a_whole_request_at_once_ends_with_its_head(steps: list[Step]) -> None:
    splice = Splice()
    splice.client.data_received(bytes(REQUEST))
    assert steps == [(Phase.SENDING, Event.REQUEST_ENDED, Phase.WAITING)]
    splice.conn.data_received(bytes(ANSWER))
    assert [event for _, event, _ in steps] == [
        Event.REQUEST_ENDED, Event.FINAL_HEAD, Event.ANSWER_ENDED, Event.FINISH]
    splice.close()


async def test_an_answer_before_the_request_ended_closes_the_connection(
    steps: list[Step],
) -> None:
    splice = Splice()
    closed: list[int] = []
    splice.down.close = lambda: closed.append(1)  # type: ignore[method-assign]
    splice.client.data_received(REQUEST[:-10])  # the body is not all there
    early = b"HTTP/1.1 413 Content Too Large\r\nContent-Length: 0\r\n\r\n"
    splice.conn.data_received(early)
    assert steps == [
        (Phase.SENDING, Event.FINAL_HEAD, Phase.CROSSING),
        (Phase.CROSSING, Event.ANSWER_ENDED, Phase.ANSWERED_EARLY),
        (Phase.ANSWERED_EARLY, Event.FINISH, Phase.FINISHED),
    ]
    (raw,) = splice.recorder.records
    assert raw.status == 413 and raw.request.ended is False
    assert closed == [1]  # the rest of the request cannot be told from a next one
    assert splice.hop.pool.idle == []  # nor is the upstream connection reused
    assert splice.down.writes == [early]


async def test_the_tap_answer_to_a_bad_body_ends_the_answer_first(steps: list[Step]) -> None:
    splice = Splice()
    bad = (b"POST /mcp HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"zz\r\nnot a chunk\r\n")
    splice.client.data_received(bad)
    assert steps == [
        (Phase.SENDING, Event.ANSWER_ENDED, Phase.ANSWERED_EARLY),
        (Phase.ANSWERED_EARLY, Event.FINISH, Phase.FINISHED),
    ]
    (raw,) = splice.recorder.records
    assert raw.tap_error is not None and raw.tap_error["phase"] == "bad-request-body"
    assert raw.egress_status == 400 and splice.up.writes == []
    assert b"Connection: close" in splice.down.writes[0]


async def test_a_pipelined_request_waits_for_the_answer_before_it(steps: list[Step]) -> None:
    splice = Splice()
    splice.client.data_received(REQUEST + REQUEST)
    first = splice.client.exchange
    assert first is not None and first.phase is Phase.WAITING
    assert bytes(splice.client.buffer) == REQUEST  # the second: not an exchange yet
    splice.conn.data_received(bytes(ANSWER))
    assert first.phase is Phase.FINISHED and splice.client.exchange is None
    splice.client._next_request()  # (the loop's callback the finish scheduled)
    second = splice.client.exchange
    assert second is not None and second is not first and second.phase is Phase.WAITING
    assert [step[1] for step in steps].count(Event.REQUEST_ENDED) == 2
    splice.close()


async def test_an_upgrade_answered_101_is_a_tunnel_until_both_sides_end(
    steps: list[Step],
) -> None:
    splice = Splice()
    upgrade = (b"GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: x\r\n\r\n")
    splice.client.data_received(upgrade + b"early")
    ex = splice.client.exchange
    assert ex is not None and ex.phase is Phase.WAITING
    assert ex.raw.request.ended is False  # the bytes after the head are the tunnel's
    switched = b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: x\r\n\r\n"
    splice.conn.data_received(switched + b"hello")
    assert ex.phase is Phase.TUNNEL
    splice.client.data_received(b"more")
    assert b"".join(splice.up.writes) == upgrade + b"early" + b"more"
    assert b"".join(splice.down.writes) == switched + b"hello"
    assert splice.client.eof_received() is True and ex.phase is Phase.TUNNEL
    splice.conn.eof_received()
    assert ex.phase is Phase.FINISHED
    assert [step[1] for step in steps] == [
        Event.REQUEST_ENDED, Event.UPGRADED, Event.FINISH]
    (raw,) = splice.recorder.records
    assert raw.upgraded and raw.tunnel is not None
    assert raw.tunnel[0].chunks == [b"early", b"more"] and raw.tunnel[1].chunks == [b"hello"]


async def test_a_client_gone_mid_answer_is_recorded_from_where_it_was(
    steps: list[Step],
) -> None:
    splice = Splice()
    splice.client.data_received(bytes(REQUEST))
    splice.conn.data_received(ANSWER[:-5])
    splice.client.connection_lost(None)
    assert steps[-1] == (Phase.ANSWERING, Event.FINISH, Phase.FINISHED)
    (raw,) = splice.recorder.records
    assert raw.client_gone is True
    assert raw.response is not None and raw.response.ended is False
