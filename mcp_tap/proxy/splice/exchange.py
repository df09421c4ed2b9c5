"""One exchange in flight on a client connection: the forwarder's state for it.

Where it is is its :attr:`Exchange.phase` (:mod:`~mcp_tap.proxy.splice.state`), moved only
by :meth:`Exchange.to`; the other fields are what the phase does not say: the resources it
holds (its upstream connection and pool slot, the bytes waiting for that connection), flow
control, and facts the recording needs.
"""

from __future__ import annotations

import asyncio

from mcp_tap.proxy.capture import RawExchange
from mcp_tap.proxy.splice.framing import ParserError, RequestMessage, ResponseMessage
from mcp_tap.proxy.splice.state import SENDING, Event, Phase, next_phase
from mcp_tap.proxy.splice.timeouts import Timer
from mcp_tap.proxy.splice.upstream import UpstreamConnection

HIGH_WATER = 256 * 1024
"""Bytes held for a side that cannot take them yet, before reading the other side pauses."""
REPLAY_MAX = 64 * 1024
"""Request bytes kept to resend once on a reused connection."""


class Exchange:
    """One request and its answer in flight on a client connection."""

    __slots__ = (
        "client_eof",
        "close_client",
        "connecting",
        "head_part",
        "idle",
        "phase",
        "raw",
        "remaining",
        "replay",
        "request",
        "reserved",
        "response",
        "response_framing",
        "skip_body",
        "stray",
        "upstream",
        "upstream_eof",
        "upstream_reading_paused",
        "waiting",
        "waiting_size",
    )

    def __init__(self, raw: RawExchange, request: RequestMessage) -> None:
        self.phase = SENDING
        self.raw = raw
        self.request = request
        self.skip_body = False  # the answer to a HEAD: no body, whatever its head says
        self.upstream: UpstreamConnection | None = None
        self.reserved = False  # holds a slot of the upstream pool
        self.connecting: asyncio.Task[None] | None = None
        self.waiting: list[bytes] = []  # request bytes held until the upstream is connected
        self.waiting_size = 0
        self.replay: list[bytes] | None = None  # what was sent, while a resend is possible
        self.response: ResponseMessage | None = None
        self.head_part = b""  # the start of an answer head not yet whole
        self.response_framing = ""
        self.remaining = -1  # response Content-Length bytes still due (-1: not length-framed)
        self.close_client = not request.keep_alive  # the client connection ends after this
        self.stray = False  # the upstream sent bytes past the answer's end
        self.idle: Timer | None = None
        # Reading the upstream is paused: the client's write buffer is full (its flow control).
        self.upstream_reading_paused = False
        # A tunnel's half-closes: it ends when both sides have ended theirs.
        self.client_eof = False
        self.upstream_eof = False

    def to(self, event: Event) -> Phase:
        """Move to the phase ``event`` leads to (:data:`~.state.TRANSITIONS`); returns it.
        Raises :class:`~.state.PhaseError` for an event the phase has no transition for."""
        self.phase = phase = next_phase(self.phase, event)
        return phase


def parser_reason(exc: Exception) -> str:
    """A short reason for a parser error: llhttp's own static text, never the input bytes."""
    if isinstance(exc, ValueError) and not isinstance(exc, ParserError):
        return "invalid Content-Length"
    text = str(exc.args[0]) if exc.args else type(exc).__name__
    return text if text.isascii() and text.isprintable() and len(text) < 100 else "invalid"
