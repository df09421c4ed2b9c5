"""One exchange in flight on a client connection: the forwarder's state for it."""

from __future__ import annotations

import asyncio

from mcp_tap.proxy.capture import RawExchange
from mcp_tap.proxy.splice.framing import ParserError, RequestMessage, ResponseMessage
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
        "finished",
        "idle",
        "raw",
        "remaining",
        "replay",
        "request",
        "request_done",
        "reserved",
        "response",
        "response_done",
        "response_framing",
        "response_head",
        "skip_body",
        "stray",
        "tunnel",
        "upstream",
        "upstream_eof",
        "upstream_paused",
        "waiting",
        "waiting_size",
    )

    def __init__(self, raw: RawExchange, request: RequestMessage) -> None:
        self.raw = raw
        self.request = request
        self.skip_body = False
        self.upstream: UpstreamConnection | None = None
        self.waiting: list[bytes] = []  # request bytes held until the upstream is connected
        self.waiting_size = 0
        self.replay: list[bytes] | None = None  # what was sent, while a resend is possible
        self.response: ResponseMessage | None = None
        self.response_head: bytes | None = b""  # None once the final head passed
        self.response_framing = ""
        self.remaining = -1  # response Content-Length bytes still due (-1: not length-framed)
        self.request_done = request.complete
        self.response_done = False
        self.close_client = not request.keep_alive
        self.finished = False
        self.tunnel = False
        self.stray = False  # the upstream sent bytes past the answer's end
        self.connecting: asyncio.Task[None] | None = None
        self.idle: Timer | None = None
        self.upstream_paused = False
        self.reserved = False
        self.client_eof = False
        self.upstream_eof = False


def parser_reason(exc: Exception) -> str:
    """A short reason for a parser error: llhttp's own static text, never the input bytes."""
    if isinstance(exc, ValueError) and not isinstance(exc, ParserError):
        return "invalid Content-Length"
    text = str(exc.args[0]) if exc.args else type(exc).__name__
    return text if text.isascii() and text.isprintable() and len(text) < 100 else "invalid"

