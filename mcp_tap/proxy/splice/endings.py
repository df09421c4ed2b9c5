"""How an exchange ends: recorded and its upstream let go, answered by the tap itself, cut,
or refused before it began (bad syntax, head timeout, a client that stops reading).

Part of :class:`~mcp_tap.proxy.splice.client.ClientConnection`: each function here is bound
there as a method of the same name (``client`` is the connection).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from mcp_tap.proxy.capture import SPENT, RawBody, RawExchange
from mcp_tap.proxy.holdback import REASON as HELD
from mcp_tap.proxy.splice.answers import tap_answer
from mcp_tap.proxy.splice.exchange import Exchange

if TYPE_CHECKING:
    from mcp_tap.proxy.splice.client import ClientConnection

log = structlog.get_logger("mcp_tap.proxy")


def answer(client: ClientConnection, ex: Exchange, status: int, phase: str, reason: str) -> None:
    """Answer the exchange with the tap's own error (nothing of the origin's was sent)."""
    raw = ex.raw
    close = ex.close_client or not ex.request_done
    head, body, pairs = tap_answer(status, phase, client.hop.name, close)
    raw.tap_error = {"status": status, "phase": phase, "reason": reason}
    raw.egress_status = status
    raw.egress_pairs = pairs
    raw.egress_body = body
    raw.egress_bytes = len(body)
    raw.sent_at = raw.egress_end_at = raw.end_at = client.clock()
    ex.close_client = close
    if client.transport is not None and not client.closed:
        client.transport.write(head + body)
    ex.response_done = True
    client._finish(ex)


def cut_exchange(client: ClientConnection, ex: Exchange, phase: str, reason: str) -> None:
    """End an exchange whose answer had begun: the only honest signal left is a broken
    stream (the client sees the connection close mid-answer)."""
    if ex.finished:
        return
    ex.raw.tap_error = {"status": None, "phase": phase, "reason": reason}
    client.hop.count("cut")
    client._abort_upstream(ex)
    ex.close_client = True
    if client.transport is not None:
        client.transport.abort()
    client._finish(ex)


def cut_connection(client: ClientConnection, phase: str, reason: str) -> None:
    """Cut whatever is in flight (the drain deadline passed); close the connection."""
    ex = client.exchange
    if ex is not None and not ex.finished:
        client._cut(ex, phase, reason)
    elif client.transport is not None:
        client.transport.abort()


def finish_closing(client: ClientConnection, ex: Exchange) -> None:
    """Finish the exchange and close the client connection after it."""
    ex.close_client = True
    client._finish(ex)


def finish(client: ClientConnection, ex: Exchange) -> None:
    """Record the exchange, free its upstream connection, go on with the next request."""
    if ex.finished:
        return
    ex.finished = True
    raw = ex.raw
    if ex.idle is not None:
        ex.idle.active = False  # (Timer.stop, without the call)
    if ex.connecting is not None:
        ex.connecting.cancel()
        ex.connecting = None
    if raw.end_at is None:
        raw.end_at = raw.egress_end_at = client.clock()
    conn = ex.upstream
    if conn is not None:
        ex.upstream = None
        response = ex.response
        reusable = (
            ex.request_done
            and ex.response_done
            and raw.tap_error is None
            and not ex.request.upgrade
            and response is not None
            and response.keep_alive
            and ex.response_framing != "close"
            and ex.remaining <= 0
            and not ex.stray
        )
        if ex.upstream_paused and conn.transport is not None and not conn.closed:
            conn.transport.resume_reading()
        if reusable and response is not None:
            response.body = SPENT  # (see below: reset gives it the next answer's body)
        if ex.reserved:
            ex.reserved = False
            client.hop.pool.release(conn, reusable)
        else:
            conn.close()
    elif ex.reserved:
        ex.reserved = False
        client.hop.pool.unreserve()
    # (A body's running digest, if it grew past the cap, is frozen by RawBody.state.)
    if raw.response is not None and raw.egress_body is None:
        raw.egress_bytes = raw.response.size  # spliced: what came is what was sent
    client.exchange = None
    if ex.request_done:
        # The parsers let go of the finished bodies (the next message's start or reset
        # gives them theirs): the hand-off's marshal then meets their chunk and time lists
        # only once, and does not index them (~0.5k instructions an exchange).
        ex.request.body = SPENT
    status = raw.egress_status
    client.hop.answered[status // 100 if status is not None and 100 <= status < 600 else 0] += 1
    try:
        client.hop.recorder.record(raw)
    except Exception as exc:  # noqa: BLE001 - evidence must never break traffic
        log.error("record.failed", hop=client.hop.name, error=type(exc).__name__)
    if client.closed:
        return
    if ex.close_client or client.hop.stopping:
        client._close()
        return
    if client._paused:  # (usually not: no call then)
        client._resume("upstream")
        client._resume("pipelined")
    client.head_timer.start()
    if client.buffer and not client._scheduled:
        client._scheduled = True  # not recursively: pipelined requests go one per callback
        client.loop.call_soon(client._next_request)


def refuse(client: ClientConnection, status: int, phase: str, reason: str) -> None:
    """Answer a request the tap cannot forward (bad syntax, CONNECT, head too large) with
    a 400/431, a counter, one log line (no raw bytes) and a tap.bad-request record."""
    hop = client.hop
    hop.count("bad_request")
    log.warning("tap.bad-request", hop=hop.name, status=status, error=phase, reason=reason)
    now = client.clock()
    raw = RawExchange(hop.name, hop.target.url, client.peer, "", "", (),
                      RawBody(0), now)
    raw.tap_error = {"status": status, "phase": phase, "reason": reason}
    head, body, pairs = tap_answer(status, phase, hop.name, close=True)
    raw.egress_status = status
    raw.egress_pairs = pairs
    raw.egress_body = body
    raw.egress_bytes = len(body)
    raw.sent_at = raw.egress_end_at = raw.end_at = now
    client.buffer = bytearray()
    if client.transport is not None:
        client.transport.write(head + body)
    client._close()
    hop.began += 1
    hop.answered[status // 100 if 100 <= status < 600 else 0] += 1
    try:
        hop.recorder.record(raw)
    except Exception as exc:  # noqa: BLE001 - evidence must never break traffic
        log.error("record.failed", hop=hop.name, error=type(exc).__name__)


def head_timeout(client: ClientConnection) -> None:
    """No whole request head in time: a partial one gets 408, an idle connection closes."""
    if client.exchange is not None or client.closed:
        return
    if HELD in client._paused:
        # The tap is not reading this client (the recording process is behind, a bounded
        # pause): its head may be waiting unread. Count again once it is read.
        client.head_timer.start()
        return
    if client.buffer.strip(b"\r\n"):
        client.hop.count("head_timeout")
        head, body, _ = tap_answer(408, "head-timeout", client.hop.name, close=True)
        if client.transport is not None:
            client.transport.write(head + body)
        log.info("tap.head-timeout", hop=client.hop.name)
    client.buffer = bytearray()
    client._close()


def write_stalled(client: ClientConnection) -> None:
    """The client read nothing for ``write_timeout_s``: cut its exchange."""
    client.hop.count("write_stall")
    ex = client.exchange
    if ex is not None and not ex.finished:
        client._cut(ex, "client-write-timeout", "the client stopped reading")
    elif client.transport is not None:
        client.transport.abort()
