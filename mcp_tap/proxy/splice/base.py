"""What every part of a client connection shares: its state, and the parts' entry points.

:class:`~mcp_tap.proxy.splice.client.ClientConnection` is one class made of four parts, one
module each (like h11's connection and uvicorn's protocol, split where the job splits):
:class:`~.requests.RequestSide` (client bytes: heads found, exchanges started, bodies
forwarded), :class:`~.binding.UpstreamSide` (the exchange's upstream connection),
:class:`~.responses.ResponseSide` (answers back to the client) and :class:`~.endings.Endings`
(recorded, answered by the tap, cut, refused). Each part is a subclass of
:class:`ConnectionBase`, which declares the state they share and the methods one part calls
on another (defined by the part that owns them; the stubs here only name them for the type
checker). An exchange's phase is :mod:`~mcp_tap.proxy.splice.state`'s.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from mcp_tap.proxy.splice.exchange import Exchange
from mcp_tap.proxy.splice.framing import RequestMessage
from mcp_tap.proxy.splice.timeouts import Timer

if TYPE_CHECKING:
    from mcp_tap.proxy.splice.hop import HopCore


class ConnectionBase(asyncio.Protocol):
    """The state of one client connection of a hop (see the module's docstring)."""

    hop: HopCore
    loop: asyncio.AbstractEventLoop
    clock: Callable[[], float]
    transport: asyncio.Transport | None
    peer: str
    buffer: bytearray  # bytes not yet part of an exchange
    exchange: Exchange | None  # the exchange in flight (one at a time, in order)
    _requests: RequestMessage | None  # the connection's request parser
    closed: bool
    _paused: set[str]  # why reading the client is paused (empty: it is not)
    _scheduled: bool  # a look at the buffer for a pipelined request is queued
    head_timer: Timer
    stall_timer: Timer
    idle_timer: Timer  # the upstream idle timer of the exchange in flight (reused)

    def _pause(self, reason: str) -> None:
        """Stop reading the client for ``reason`` (until every reason is gone)."""
        if not self._paused and self.transport is not None and not self.closed:
            self.transport.pause_reading()
        self._paused.add(reason)

    def _resume(self, reason: str) -> None:
        """``reason`` to stop reading the client is gone: read again if it was the last."""
        if reason not in self._paused:
            return
        self._paused.discard(reason)
        if not self._paused and self.transport is not None and not self.closed:
            self.transport.resume_reading()

    def _close(self) -> None:
        """Close after what was written is flushed."""
        self.head_timer.stop()
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    # -- each part's entry points for the others (defined there) --
    def _next_request(self, data: bytes | None = None) -> None:
        """:class:`~.requests.RequestSide`: look for the next request's head."""
        raise NotImplementedError

    def _bind(self, ex: Exchange) -> None:
        """:class:`~.binding.UpstreamSide`: give the exchange an upstream connection."""
        raise NotImplementedError

    def _abort_upstream(self, ex: Exchange) -> None:
        """:class:`~.binding.UpstreamSide`: drop the exchange's upstream connection."""
        raise NotImplementedError

    def upstream_data(self, data: bytes) -> None:
        """:class:`~.responses.ResponseSide`: bytes from the upstream."""
        raise NotImplementedError

    def _response_complete(self, ex: Exchange) -> None:
        """:class:`~.responses.ResponseSide`: the answer ended."""
        raise NotImplementedError

    def _answer(self, ex: Exchange, status: int, phase: str, reason: str) -> None:
        """:class:`~.endings.Endings`: answer with the tap's own error."""
        raise NotImplementedError

    def _cut(self, ex: Exchange, phase: str, reason: str) -> None:
        """:class:`~.endings.Endings`: end an exchange whose answer had begun."""
        raise NotImplementedError

    def _finish(self, ex: Exchange) -> None:
        """:class:`~.endings.Endings`: record the exchange and go on."""
        raise NotImplementedError

    def _finish_closing(self, ex: Exchange) -> None:
        """:class:`~.endings.Endings`: finish, then close the client connection."""
        raise NotImplementedError

    def _refuse(self, status: int, phase: str, reason: str) -> None:
        """:class:`~.endings.Endings`: answer a request the tap cannot forward."""
        raise NotImplementedError
