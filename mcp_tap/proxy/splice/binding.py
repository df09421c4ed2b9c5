"""The exchange's upstream connection: bound (idle, new, or a 503 at the cap), connected,
retried once when a reused one closed unanswered, let go; its end and its idle timeout.

:class:`UpstreamSide` is the part of :class:`~mcp_tap.proxy.splice.client.ClientConnection`
that owns the upstream leg; its public methods are the
:class:`~mcp_tap.proxy.splice.upstream.UpstreamOwner` callbacks.
"""

from __future__ import annotations

import asyncio

from mcp_tap.proxy.splice.base import ConnectionBase
from mcp_tap.proxy.splice.exchange import REPLAY_MAX, Exchange
from mcp_tap.proxy.splice.state import FINISHED, TUNNEL
from mcp_tap.proxy.splice.upstream import UpstreamConnection


class UpstreamSide(ConnectionBase):
    """The exchange's upstream connection, from binding to letting go."""

    def _bind(self, ex: Exchange) -> None:
        """Give the exchange an upstream connection: an idle one, a new one, or a 503."""
        hop = self.hop
        if hop.stopping:
            self._answer(ex, 503, "draining", "the tap is shutting down")
            return
        pool = hop.pool
        if not pool.reserve():
            hop.count("saturated")
            self._answer(ex, 503, "saturated", "upstream connections are at max_connections")
            return
        ex.reserved = True
        conn = pool.take_idle()
        if conn is not None:
            self._attach(ex, conn)
            return
        ex.connecting = self.loop.create_task(self._connect(ex))

    async def _connect(self, ex: Exchange) -> None:
        """Open a new upstream connection for the exchange (502/504 when that fails)."""
        try:
            conn = await self.hop.pool.connect()
        except TimeoutError:
            self._connect_failed(ex, 504, "upstream-timeout",
                                 "the upstream did not accept the connection in time")
            return
        except OSError as exc:
            self._connect_failed(ex, 502, "upstream-unreachable",
                                 f"{type(exc).__name__}: {exc}")
            return
        except asyncio.CancelledError:
            if ex.phase is not FINISHED:
                ex.reserved = False
                self.hop.pool.unreserve()
            raise
        ex.connecting = None
        if ex.phase is FINISHED:  # the client left meanwhile: a fresh one is reusable
            self.hop.pool.bound += 1
            self.hop.pool.release(conn, reusable=True)
            return
        self._attach(ex, conn)

    def _connect_failed(self, ex: Exchange, status: int, phase: str, reason: str) -> None:
        """No connection: give the slot back and answer with the tap's error."""
        ex.connecting = None
        if ex.reserved:
            ex.reserved = False
            self.hop.pool.unreserve()
        if ex.phase is not FINISHED:
            self._answer(ex, status, phase, reason)

    def _attach(self, ex: Exchange, conn: UpstreamConnection) -> None:
        """Bind a connection to the exchange and send what waited for it."""
        ex.upstream = conn
        conn.owner = self
        ex.raw.forwarded_at = self.clock()
        waiting = ex.waiting
        data = b"".join(waiting) if len(waiting) > 1 else waiting[0]
        ex.replay = waiting if conn.reused and ex.waiting_size <= REPLAY_MAX else None
        ex.waiting = []
        ex.waiting_size = 0
        conn.write(data)
        if self._paused:
            self._resume("connecting")
        ex.idle = self.idle_timer
        ex.idle.start()

    def _retry(self, ex: Exchange) -> None:
        """Resend the request once on a new connection: a reused one closed before answering
        (the upstream's keep-alive ran out just as the tap reused it)."""
        assert ex.replay is not None
        ex.waiting, ex.waiting_size = ex.replay, sum(len(d) for d in ex.replay)
        ex.replay = None
        ex.upstream = None
        if ex.idle is not None:
            ex.idle.stop()
        ex.connecting = self.loop.create_task(self._connect(ex))

    def _abort_upstream(self, ex: Exchange) -> None:
        """Drop the exchange's upstream connection at once (it is not reused)."""
        if ex.connecting is not None:
            ex.connecting.cancel()
            ex.connecting = None
        conn = ex.upstream
        if conn is not None:
            ex.upstream = None
            if ex.reserved:
                ex.reserved = False
                conn.owner = None
                self.hop.pool.release(conn, reusable=False)
            conn.abort()

    def upstream_eof(self) -> None:
        """The upstream half-closed: the end of a close-delimited answer, or of a tunnel."""
        ex = self.exchange
        if ex is None or ex.phase is FINISHED:
            return
        if ex.phase is TUNNEL:
            ex.upstream_eof = True
            if ex.raw.tunnel is not None:
                ex.raw.tunnel[1].ended = True
            if self.transport is not None and self.transport.can_write_eof():
                self.transport.write_eof()
            if ex.client_eof:
                self._finish(ex)
            return
        conn = ex.upstream
        self._upstream_gone(ex)
        if conn is not None:
            conn.close()

    def upstream_lost(self, exc: Exception | None) -> None:
        """The upstream connection closed."""
        ex = self.exchange
        if ex is None or ex.phase is FINISHED:
            return
        self._upstream_gone(ex)

    def upstream_buffer_full(self) -> None:
        """The upstream's write buffer is full: stop reading the client."""
        self._pause("upstream")

    def upstream_buffer_drained(self) -> None:
        """The upstream's write buffer drained: read the client again."""
        self._resume("upstream")

    def _upstream_gone(self, ex: Exchange) -> None:
        """The upstream connection ended: the answer's end, a retry, a 502 or a cut."""
        conn = ex.upstream
        if conn is not None and ex.reserved:
            ex.reserved = False
            conn.owner = None
            self.hop.pool.release(conn, reusable=False)
        ex.upstream = None
        if ex.phase is TUNNEL:
            self._finish_closing(ex)
            return
        if ex.response_framing == "close":  # (known once the final head passed)
            self._response_complete(ex)
            return
        if ex.raw.sent_at is None and not ex.raw.interim:
            reused = ex.replay is not None and conn is not None and conn.reused
            if reused and self.hop.pool.reserve():
                ex.reserved = True
                self._retry(ex)
                return
            self._answer(ex, 502, "upstream-reset",
                         "the upstream closed the connection before answering")
            return
        self._cut(ex, "upstream-reset", "the upstream connection closed mid-answer")

    def _upstream_idle_now(self) -> None:
        """The idle timer fired for the exchange in flight."""
        if self.exchange is not None:
            self._upstream_idle(self.exchange)

    def _upstream_idle(self, ex: Exchange) -> None:
        """The upstream said nothing for idle_timeout_s: 504 before an answer, a cut after."""
        if ex.phase is FINISHED:
            return
        if ex.upstream_reading_paused:  # the client is slow, not the upstream: the stall clock
            if ex.idle is not None:
                ex.idle.start()
            return
        self._abort_upstream(ex)
        if ex.raw.sent_at is None and not ex.raw.interim:
            self._answer(ex, 504, "upstream-timeout", "the upstream did not answer in time")
        else:
            self._cut(ex, "upstream-idle-timeout",
                      "the upstream stream was idle past the timeout")
