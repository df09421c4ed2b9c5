"""The client side of a hop: one :class:`ClientConnection` (an ``asyncio.Protocol``) per
client connection, splicing its bytes to an upstream connection and back.

Per exchange: the request head is found, checked by the parser and forwarded (rewritten only
as :mod:`~mcp_tap.proxy.splice.head` says); body bytes go upstream as they arrive; response
bytes go to the client as they arrive, then a copy is parsed for the boundaries and the
capture. Requests are handled one at a time, in order: a pipelined request waits in the
buffer until the answer before it is complete (reading pauses if it grows). Where an
exchange is, is its phase (:mod:`~mcp_tap.proxy.splice.state`).

Flow control both ways: a side whose write buffer passes its high-water mark pauses reading
from the other side until it drains (like uvicorn's ``httptools_impl``); a client that stops
reading for ``write_timeout_s`` is cut. And a third: a recording process that falls behind
holds every client back for a bounded time (see :mod:`~mcp_tap.proxy.holdback`). Nothing
here raises into the event loop: the tap's own failures are answers with
``X-Mcp-Tap-Error`` or cut streams, recorded in the evidence.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, cast

from mcp_tap.proxy.holdback import REASON as HELD
from mcp_tap.proxy.splice.binding import UpstreamSide
from mcp_tap.proxy.splice.endings import Endings
from mcp_tap.proxy.splice.requests import RequestSide
from mcp_tap.proxy.splice.responses import ResponseSide
from mcp_tap.proxy.splice.state import ANSWERED, FINISHED, REQUEST_OPEN, TUNNEL
from mcp_tap.proxy.splice.timeouts import Timer

if TYPE_CHECKING:
    from mcp_tap.proxy.splice.hop import HopCore


class ClientConnection(RequestSide, ResponseSide, UpstreamSide, Endings):
    """One client connection of a hop: its ``asyncio.Protocol`` callbacks here, the parts
    of its exchanges in the four parts it is made of (see :mod:`~mcp_tap.proxy.splice.base`)."""

    def __init__(self, hop: HopCore) -> None:
        self.hop = hop
        self.loop = hop.loop
        self.clock = hop.clock
        self.transport = None
        self.peer = ""
        self.buffer = bytearray()
        self.exchange = None
        self._requests = None
        self.closed = False
        self._paused = set()
        self._scheduled = False
        listener = hop.options.listener
        self.head_timer = Timer(self.loop, listener.head_timeout_s, self._head_timeout)
        self.stall_timer = Timer(self.loop, listener.write_timeout_s, self._write_stalled)
        self.idle_timer = Timer(self.loop, hop.options.upstream.idle_timeout_s,
                                self._upstream_idle_now)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """A client connected."""
        # uvloop's transports are not asyncio.Transport subclasses, but have its methods.
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.peer = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        self.hop.connections.add(self)
        if self.hop.held:  # the recording process is behind: wait in the kernel's buffer
            self._pause(HELD)
        self.head_timer.start()

    def eof_received(self) -> bool:
        """The client half-closed: answer a whole request not yet answered, then close."""
        ex = self.exchange
        if ex is None or ex.phase is FINISHED:
            return False
        if ex.phase is TUNNEL:
            ex.client_eof = True
            if ex.raw.tunnel is not None:
                ex.raw.tunnel[0].ended = True
            up = ex.upstream.transport if ex.upstream is not None else None
            if up is not None and up.can_write_eof():
                up.write_eof()
            if ex.upstream_eof:
                self._finish(ex)
            return True
        ex.close_client = True
        if ex.phase not in REQUEST_OPEN and ex.raw.sent_at is None:
            # A half-close after a whole request: the client waits for its answer. Once the
            # answer streams, an EOF is taken as the client leaving (as nginx and aiohttp
            # do): a silent stream would otherwise never notice.
            return True
        ex.raw.client_gone = True
        self._abort_upstream(ex)
        self._finish(ex)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        """The client is gone: whatever is in flight is cut (and recorded)."""
        self.closed = True
        self.head_timer.cancel()
        self.stall_timer.cancel()
        self.idle_timer.cancel()
        self.hop.connections.discard(self)
        ex = self.exchange
        if ex is not None and ex.phase is not FINISHED:
            if ex.phase is not ANSWERED:
                ex.raw.client_gone = True
            self._abort_upstream(ex)
            self._finish(ex)

    def pause_writing(self) -> None:
        """The client's write buffer is full: stop reading the upstream, start the stall
        clock."""
        self.stall_timer.start()
        ex = self.exchange
        if ex is not None and ex.upstream is not None and ex.upstream.transport is not None:
            ex.upstream.transport.pause_reading()
            ex.upstream_reading_paused = True

    def resume_writing(self) -> None:
        """The client drained: read the upstream again."""
        self.stall_timer.stop()
        ex = self.exchange
        if ex is not None and ex.upstream_reading_paused and ex.upstream is not None:
            ex.upstream_reading_paused = False
            if ex.upstream.transport is not None and not ex.upstream.closed:
                ex.upstream.transport.resume_reading()

    def close_if_idle(self) -> bool:
        """Close the connection when no exchange is in flight (for draining)."""
        if self.exchange is None:
            self._close()
            return True
        return False

    def hold_reading(self) -> None:
        """Stop reading the client while the recording hand-off is behind (see
        :mod:`~mcp_tap.proxy.holdback`). A request whose body is still coming is in
        flight: it is read to its end first (``_request_ended`` holds then), as is a tunnel's
        traffic, or the exchange would wait out the bound instead of ending."""
        ex = self.exchange
        if ex is None or not (ex.phase in REQUEST_OPEN or ex.phase is TUNNEL):
            self._pause(HELD)

    def release_reading(self) -> None:
        """Read the client again (unless paused for another reason)."""
        if self.exchange is None and self.head_timer.running:
            # The head clock counts from when the tap reads again: a request that waited
            # unread in the kernel is not taken for a slow head by a timer already due.
            self.head_timer.start()
        self._resume(HELD)
