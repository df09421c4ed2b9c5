"""The exchange's upstream connection: bound (idle, new, or a 503 at the cap), connected,
retried once when a reused one closed unanswered, let go; its end and its idle timeout.

Part of :class:`~mcp_tap.proxy.splice.client.ClientConnection`: each function here is bound
there as a method of the same name (``client`` is the connection).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import structlog

from mcp_tap.proxy.splice.exchange import REPLAY_MAX, Exchange
from mcp_tap.proxy.splice.upstream import UpstreamConnection

if TYPE_CHECKING:
    from mcp_tap.proxy.splice.client import ClientConnection

log = structlog.get_logger("mcp_tap.proxy")


def bind(client: ClientConnection, ex: Exchange) -> None:
    """Give the exchange an upstream connection: an idle one, a new one, or a 503."""
    hop = client.hop
    if hop.stopping:
        client._answer(ex, 503, "draining", "the tap is shutting down")
        return
    pool = hop.pool
    if not pool.reserve():
        hop.count("saturated")
        client._answer(ex, 503, "saturated", "upstream connections are at max_connections")
        return
    ex.reserved = True
    conn = pool.take_idle()
    if conn is not None:
        client._attach(ex, conn)
        return
    ex.connecting = client.loop.create_task(client._connect(ex))


async def connect(client: ClientConnection, ex: Exchange) -> None:
    """Open a new upstream connection for the exchange (502/504 when that fails)."""
    try:
        conn = await client.hop.pool.connect()
    except TimeoutError:
        client._connect_failed(ex, 504, "upstream-timeout",
                             "the upstream did not accept the connection in time")
        return
    except OSError as exc:
        client._connect_failed(ex, 502, "upstream-unreachable", f"{type(exc).__name__}: {exc}")
        return
    except asyncio.CancelledError:
        if not ex.finished:
            ex.reserved = False
            client.hop.pool.unreserve()
        raise
    ex.connecting = None
    if ex.finished:  # the client left meanwhile: a fresh, unused connection is reusable
        client.hop.pool.bound += 1
        client.hop.pool.release(conn, reusable=True)
        return
    client._attach(ex, conn)


def connect_failed(
    client: ClientConnection, ex: Exchange, status: int, phase: str, reason: str
) -> None:
    """No connection: give the slot back and answer with the tap's error."""
    ex.connecting = None
    if ex.reserved:
        ex.reserved = False
        client.hop.pool.unreserve()
    if not ex.finished:
        client._answer(ex, status, phase, reason)


def attach(client: ClientConnection, ex: Exchange, conn: UpstreamConnection) -> None:
    """Bind a connection to the exchange and send what waited for it."""
    ex.upstream = conn
    conn.owner = client
    ex.raw.forwarded_at = client.clock()
    waiting = ex.waiting
    data = b"".join(waiting) if len(waiting) > 1 else waiting[0]
    ex.replay = waiting if conn.reused and ex.waiting_size <= REPLAY_MAX else None
    ex.waiting = []
    ex.waiting_size = 0
    if conn.transport is not None and not conn.closed:  # (conn.write, without the call)
        conn.transport.write(data)
    if client._paused:
        client._resume("connecting")
    ex.idle = client.idle_timer
    ex.idle.start()


def retry(client: ClientConnection, ex: Exchange) -> None:
    """Resend the request once on a new connection: a reused one closed before answering
    (the upstream's keep-alive ran out just as the tap reused it)."""
    assert ex.replay is not None
    ex.waiting, ex.waiting_size = ex.replay, sum(len(d) for d in ex.replay)
    ex.replay = None
    ex.upstream = None
    if ex.idle is not None:
        ex.idle.stop()
    ex.connecting = client.loop.create_task(client._connect(ex))


def abort_upstream(client: ClientConnection, ex: Exchange) -> None:
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
            client.hop.pool.release(conn, reusable=False)
        conn.abort()


def upstream_eof(client: ClientConnection) -> None:
    """The upstream half-closed: the end of a close-delimited answer, or of a tunnel."""
    ex = client.exchange
    if ex is None or ex.finished:
        return
    if ex.tunnel:
        ex.upstream_eof = True
        if ex.raw.tunnel is not None:
            ex.raw.tunnel[1].ended = True
        if client.transport is not None and client.transport.can_write_eof():
            client.transport.write_eof()
        if ex.client_eof:
            client._finish(ex)
        return
    conn = ex.upstream
    client._upstream_gone(ex)
    if conn is not None:
        conn.close()


def upstream_lost(client: ClientConnection, exc: Exception | None) -> None:
    """The upstream connection closed."""
    ex = client.exchange
    if ex is None or ex.finished:
        return
    client._upstream_gone(ex)


def upstream_paused(client: ClientConnection) -> None:
    """The upstream's write buffer is full: stop reading the client."""
    client._pause("upstream")


def upstream_resumed(client: ClientConnection) -> None:
    """The upstream drained: read the client again."""
    client._resume("upstream")


def upstream_gone(client: ClientConnection, ex: Exchange) -> None:
    """The upstream connection ended: the answer's end, a retry, a 502 or a cut."""
    conn = ex.upstream
    if conn is not None and ex.reserved:
        ex.reserved = False
        conn.owner = None
        client.hop.pool.release(conn, reusable=False)
    ex.upstream = None
    if ex.tunnel:
        client._finish_closing(ex)
        return
    if ex.response_head is None and client.response_framing_is_close(ex):
        client._response_complete(ex)
        return
    if ex.raw.sent_at is None and not ex.raw.interim:
        reused = ex.replay is not None and conn is not None and conn.reused
        if reused and client.hop.pool.reserve():
            ex.reserved = True
            client._retry(ex)
            return
        client._answer(ex, 502, "upstream-reset",
                     "the upstream closed the connection before answering")
        return
    client._cut(ex, "upstream-reset", "the upstream connection closed mid-answer")


def response_framing_is_close(ex: Exchange) -> bool:
    """Whether the answer ends with the connection (no length, not chunked)."""
    return ex.response_framing == "close"


def upstream_idle_now(client: ClientConnection) -> None:
    """The idle timer fired for the exchange in flight."""
    if client.exchange is not None:
        client._upstream_idle(client.exchange)


def upstream_idle(client: ClientConnection, ex: Exchange) -> None:
    """The upstream said nothing for idle_timeout_s: 504 before an answer, a cut after."""
    if ex.finished:
        return
    if ex.upstream_paused:  # the client is slow, not the upstream: the stall clock rules
        if ex.idle is not None:
            ex.idle.start()
        return
    client._abort_upstream(ex)
    if ex.raw.sent_at is None and not ex.raw.interim:
        client._answer(ex, 504, "upstream-timeout", "the upstream did not answer in time")
    else:
        client._cut(ex, "upstream-idle-timeout", "the upstream stream was idle past the timeout")
