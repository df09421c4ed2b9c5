"""How an exchange ends: recorded and its upstream let go, answered by the tap itself, cut,
or refused before it began (bad syntax, head timeout, a client that stops reading).

:class:`Endings` is the part of :class:`~mcp_tap.proxy.splice.client.ClientConnection` that
ends exchanges; :meth:`Endings._finish` is the one way to :attr:`~.state.FINISHED`.
"""

from __future__ import annotations

import structlog

from mcp_tap.proxy.capture import SPENT, RawBody, RawExchange
from mcp_tap.proxy.holdback import REASON as HELD
from mcp_tap.proxy.splice.answers import tap_answer
from mcp_tap.proxy.splice.base import ConnectionBase
from mcp_tap.proxy.splice.exchange import Exchange
from mcp_tap.proxy.splice.state import (
    ANSWER_ENDED,
    ANSWERED,
    ANSWERED_EARLY,
    FINISH,
    FINISHED,
    REQUEST_OPEN,
)

log = structlog.get_logger("mcp_tap.proxy")

_REQUEST_NOT_ENDED = REQUEST_OPEN | {ANSWERED_EARLY}


class Endings(ConnectionBase):
    """Every way an exchange (or a request that never became one) ends."""

    def _answer(self, ex: Exchange, status: int, phase: str, reason: str) -> None:
        """Answer the exchange with the tap's own error (nothing of the origin's was sent)."""
        raw = ex.raw
        close = ex.close_client or ex.phase in REQUEST_OPEN
        head, body, pairs = tap_answer(status, phase, self.hop.name, close)
        raw.tap_error = {"status": status, "phase": phase, "reason": reason}
        raw.egress_status = status
        raw.egress_pairs = pairs
        raw.egress_body = body
        raw.egress_bytes = len(body)
        raw.sent_at = raw.egress_end_at = raw.end_at = self.clock()
        ex.close_client = close
        if self.transport is not None and not self.closed:
            self.transport.write(head + body)
        ex.to(ANSWER_ENDED)
        self._finish(ex)

    def _cut(self, ex: Exchange, phase: str, reason: str) -> None:
        """End an exchange whose answer had begun: the only honest signal left is a broken
        stream (the client sees the connection close mid-answer)."""
        if ex.phase is FINISHED:
            return
        ex.raw.tap_error = {"status": None, "phase": phase, "reason": reason}
        self.hop.count("cut")
        self._abort_upstream(ex)
        ex.close_client = True
        if self.transport is not None:
            self.transport.abort()
        self._finish(ex)

    def cut(self, phase: str, reason: str) -> None:
        """Cut whatever is in flight (the drain deadline passed); close the connection."""
        ex = self.exchange
        if ex is not None and ex.phase is not FINISHED:
            self._cut(ex, phase, reason)
        elif self.transport is not None:
            self.transport.abort()

    def _finish_closing(self, ex: Exchange) -> None:
        """Finish the exchange and close the client connection after it."""
        ex.close_client = True
        self._finish(ex)

    def _finish(self, ex: Exchange) -> None:
        """Record the exchange, free its upstream connection, go on with the next request."""
        ended = ex.phase
        if ended is FINISHED:
            return
        ex.to(FINISH)
        raw = ex.raw
        if ex.idle is not None:
            ex.idle.stop()
        if ex.connecting is not None:
            ex.connecting.cancel()
            ex.connecting = None
        if raw.end_at is None:
            raw.end_at = raw.egress_end_at = self.clock()
        self._let_go(ex, ended is ANSWERED)
        # (A body's running digest, if it grew past the cap, is frozen by RawBody.state.)
        if raw.response is not None and raw.egress_body is None:
            raw.egress_bytes = raw.response.size  # spliced: what came is what was sent
        self.exchange = None
        if ended not in _REQUEST_NOT_ENDED:
            # The parsers let go of the finished bodies (the next message's start or reset
            # gives them theirs): the hand-off's marshal then meets their chunk and time
            # lists only once, and does not index them.
            ex.request.body = SPENT
        status = raw.egress_status
        self.hop.answered[status // 100 if status is not None and 100 <= status < 600 else 0] += 1
        try:
            self.hop.recorder.record(raw)
        except Exception as exc:  # noqa: BLE001 - evidence must never break traffic
            log.error("record.failed", hop=self.hop.name, error=type(exc).__name__)
        self._next(ex.close_client)

    def _let_go(self, ex: Exchange, answered: bool) -> None:
        """Give the exchange's upstream connection back to the pool (reusable when its
        answer ``answered`` cleanly and the connection frames the next), or its slot."""
        conn = ex.upstream
        if conn is None:
            if ex.reserved:
                ex.reserved = False
                self.hop.pool.unreserve()
            return
        ex.upstream = None
        response = ex.response
        reusable = (
            answered
            and ex.raw.tap_error is None
            and not ex.request.upgrade
            and response is not None
            and response.keep_alive
            and ex.response_framing != "close"
            and ex.remaining <= 0
            and not ex.stray
        )
        if ex.upstream_reading_paused and conn.transport is not None and not conn.closed:
            conn.transport.resume_reading()
        if reusable and response is not None:
            response.body = SPENT  # (reset gives it the next answer's body)
        if ex.reserved:
            ex.reserved = False
            self.hop.pool.release(conn, reusable)
        else:
            conn.close()

    def _next(self, close: bool) -> None:
        """After an exchange: close (``close``, or draining), or read on; a pipelined
        request waiting in the buffer is looked at in the next loop callback, not here."""
        if self.closed:
            return
        if close or self.hop.stopping:
            self._close()
            return
        if self._paused:  # (usually not: no call then)
            self._resume("upstream")
            self._resume("pipelined")
        self.head_timer.start()
        if self.buffer and not self._scheduled:
            self._scheduled = True  # not recursively: pipelined requests go one per callback
            self.loop.call_soon(self._next_request)

    def _refuse(self, status: int, phase: str, reason: str) -> None:
        """Answer a request the tap cannot forward (bad syntax, CONNECT, head too large) with
        a 400/431, a counter, one log line (no raw bytes) and a tap.bad-request record."""
        hop = self.hop
        hop.count("bad_request")
        log.warning("tap.bad-request", hop=hop.name, status=status, error=phase, reason=reason)
        now = self.clock()
        raw = RawExchange(hop.name, hop.target.url, self.peer, "", "", (), RawBody(0), now)
        raw.tap_error = {"status": status, "phase": phase, "reason": reason}
        head, body, pairs = tap_answer(status, phase, hop.name, close=True)
        raw.egress_status = status
        raw.egress_pairs = pairs
        raw.egress_body = body
        raw.egress_bytes = len(body)
        raw.sent_at = raw.egress_end_at = raw.end_at = now
        self.buffer = bytearray()
        if self.transport is not None:
            self.transport.write(head + body)
        self._close()
        hop.began += 1
        hop.answered[status // 100 if 100 <= status < 600 else 0] += 1
        try:
            hop.recorder.record(raw)
        except Exception as exc:  # noqa: BLE001 - evidence must never break traffic
            log.error("record.failed", hop=hop.name, error=type(exc).__name__)

    def _head_timeout(self) -> None:
        """No whole request head in time: a partial one gets 408, an idle connection closes."""
        if self.exchange is not None or self.closed:
            return
        if HELD in self._paused:
            # The tap is not reading this client (the recording process is behind, a bounded
            # pause): its head may be waiting unread. Count again once it is read.
            self.head_timer.start()
            return
        if self.buffer.strip(b"\r\n"):
            self.hop.count("head_timeout")
            head, body, _ = tap_answer(408, "head-timeout", self.hop.name, close=True)
            if self.transport is not None:
                self.transport.write(head + body)
            log.info("tap.head-timeout", hop=self.hop.name)
        self.buffer = bytearray()
        self._close()

    def _write_stalled(self) -> None:
        """The client read nothing for ``write_timeout_s``: cut its exchange."""
        self.hop.count("write_stall")
        ex = self.exchange
        if ex is not None and ex.phase is not FINISHED:
            self._cut(ex, "client-write-timeout", "the client stopped reading")
        elif self.transport is not None:
            self.transport.abort()
