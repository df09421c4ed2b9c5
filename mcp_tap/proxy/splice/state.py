"""Where an exchange is: one :class:`Phase` at a time, moved only by :func:`next_phase`.

Sans-IO, like h11's ``_state.py``: the table :data:`TRANSITIONS` is the whole state machine
of one exchange on a client connection; the connection's code reports events and reads the
phase, and nothing else says where an exchange is. Two things progress independently (the
request's bytes going upstream, the answer's coming back), so a phase names both::

    SENDING ──request ended──▶ WAITING ──final head──▶ ANSWERING ──answer ended──▶ ANSWERED
       │                          │                                                    │
       final head                 101 to an Upgrade ──▶ TUNNEL                          │
       ▼                                                                                ▼
    CROSSING (answered before the request ended) ──answer ended──▶ ANSWERED_EARLY   FINISHED
    CROSSING ──request ended──▶ ANSWERING

Every phase goes to FINISHED on :attr:`Event.FINISH` (recorded, its upstream let go); the
tap's own answer (a 502, a 504, ...) ends the answer from SENDING or WAITING. An answer that
ended before its request (ANSWERED_EARLY) closes the connection: the rest of the request
cannot be told from the next one.
"""

from __future__ import annotations

import enum

from mcp_tap.errors import PhaseError


class Phase(enum.IntEnum):
    """Where one exchange is (an int: hashed and compared in C, read per request)."""

    SENDING = 1
    """The request's body is still going upstream; no final answer head yet."""
    WAITING = 2
    """The whole request went upstream; no final answer head yet."""
    CROSSING = 3
    """The answer streams while the request's body still comes (an early 4xx, ...)."""
    ANSWERING = 4
    """The whole request went upstream; the answer's body streams to the client."""
    TUNNEL = 5
    """An Upgrade was answered 101: bytes go both ways untouched until both sides end."""
    ANSWERED = 6
    """Request and answer both ended (the upstream connection may be reused)."""
    ANSWERED_EARLY = 7
    """The answer ended before the request did: the client connection closes after it."""
    FINISHED = 8
    """Recorded; the connection has gone on to its next request."""


class Event(enum.IntEnum):
    """What moves an exchange from one phase to the next."""

    REQUEST_ENDED = 1  # the request's last byte went upstream
    FINAL_HEAD = 2  # the answer's final (non-1xx) head went to the client
    UPGRADED = 3  # a 101 to an Upgrade request: the connection is a tunnel
    ANSWER_ENDED = 4  # the answer's last byte went out (the origin's or the tap's)
    FINISH = 5  # recorded: the exchange is over, whatever phase it was in


# The phases and events as module names: the forwarder reads them per request, and a
# module global is read ~4x faster than an enum class's attribute (Python 3.11).
SENDING, WAITING, CROSSING, ANSWERING = (
    Phase.SENDING, Phase.WAITING, Phase.CROSSING, Phase.ANSWERING)
TUNNEL, ANSWERED, ANSWERED_EARLY, FINISHED = (
    Phase.TUNNEL, Phase.ANSWERED, Phase.ANSWERED_EARLY, Phase.FINISHED)
REQUEST_ENDED, FINAL_HEAD, UPGRADED, ANSWER_ENDED, FINISH = (
    Event.REQUEST_ENDED, Event.FINAL_HEAD, Event.UPGRADED, Event.ANSWER_ENDED, Event.FINISH)

TRANSITIONS: dict[Phase, dict[Event, Phase]] = {
    Phase.SENDING: {
        Event.REQUEST_ENDED: Phase.WAITING,
        Event.FINAL_HEAD: Phase.CROSSING,
        Event.ANSWER_ENDED: Phase.ANSWERED_EARLY,
        Event.FINISH: Phase.FINISHED,
    },
    Phase.WAITING: {
        Event.FINAL_HEAD: Phase.ANSWERING,
        Event.UPGRADED: Phase.TUNNEL,
        Event.ANSWER_ENDED: Phase.ANSWERED,
        Event.FINISH: Phase.FINISHED,
    },
    Phase.CROSSING: {
        Event.REQUEST_ENDED: Phase.ANSWERING,
        Event.ANSWER_ENDED: Phase.ANSWERED_EARLY,
        Event.FINISH: Phase.FINISHED,
    },
    Phase.ANSWERING: {Event.ANSWER_ENDED: Phase.ANSWERED, Event.FINISH: Phase.FINISHED},
    Phase.TUNNEL: {Event.FINISH: Phase.FINISHED},
    Phase.ANSWERED: {Event.FINISH: Phase.FINISHED},
    Phase.ANSWERED_EARLY: {Event.FINISH: Phase.FINISHED},
    Phase.FINISHED: {},
}
"""Each phase's next phase by event: the whole state machine of an exchange."""

REQUEST_OPEN = frozenset({Phase.SENDING, Phase.CROSSING})
"""Phases in which the request's body is still coming from the client."""
HEAD_AWAITED = frozenset({Phase.SENDING, Phase.WAITING})
"""Phases in which the answer's final head has not come yet (bytes from upstream are a head)."""


def next_phase(phase: Phase, event: Event) -> Phase:
    """The phase after ``event`` (raises :class:`PhaseError` where the table has none)."""
    try:
        return TRANSITIONS[phase][event]
    except KeyError:
        raise PhaseError(f"no transition from {phase.name} on {event.name}") from None
