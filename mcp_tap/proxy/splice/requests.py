"""Reading requests: each whole head starts an exchange; body bytes go upstream as
they come, cut exactly at the message's end (a pipelined request may follow).

Part of :class:`~mcp_tap.proxy.splice.client.ClientConnection`: each function here is bound
there as a method of the same name (``client`` is the connection).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from mcp_tap.proxy.capture import RawBody, RawExchange
from mcp_tap.proxy.splice.exchange import HIGH_WATER, REPLAY_MAX, Exchange, parser_reason
from mcp_tap.proxy.splice.framing import (
    ParserError,
    RequestMessage,
)
from mcp_tap.proxy.splice.head import HEAD_END, field, may_change, parse_head, rewrite
from mcp_tap.proxy.splice.tracing import new_traceparent, trace_id_of

if TYPE_CHECKING:
    from mcp_tap.proxy.splice.client import ClientConnection

log = structlog.get_logger("mcp_tap.proxy")

_WHY_TRACE = "hop correlation: the client sent no traceparent"
_SESSION = b"\r\nmcp-session-id:"
_TRACEPARENT = b"\r\ntraceparent:"


def next_request(client: ClientConnection, data: bytes | None = None) -> None:
    """Client bytes (``data``; the connection's ``data_received``), or None when called to
    look at the buffer: part of the request in flight, or the start of the next exchange
    once its head is whole (in ``data`` when nothing was buffered before it: read in
    place, no copy; else in the buffer)."""
    if data is not None:  # (data_received: one call fewer per request than a dispatcher)
        ex = client.exchange
        if ex is not None and not ex.finished:
            if ex.tunnel or (ex.request.upgrade and not client.buffer):
                client._tunnel_up(ex, data)
                return
            if not ex.request_done and not client.buffer:
                client._request_body(ex, data)
                return
            client.buffer += data
            if len(client.buffer) > HIGH_WATER:
                client._pause("pipelined")
            return
        if client.buffer:
            client.buffer += data
            data = None
    client._scheduled = False
    if client.closed or client.exchange is not None:
        if data:
            client.buffer += data
        return
    hop = client.hop
    limit = hop.max_head_bytes
    if data is None or data[:2] == b"\r\n":
        buf = client.buffer
        if data is not None:
            buf += data
        while buf[:2] == b"\r\n":  # empty lines before a request line are ignored (RFC 9112)
            del buf[:2]
        if not buf:
            return
        end = buf.find(HEAD_END)
        if end < 0 or end + len(HEAD_END) > limit:
            if len(buf) > limit:
                client._refuse(431, "head-too-large", "the request head exceeds max_head_bytes")
            return
        data = bytes(buf)
        client.buffer = bytearray()
    else:
        end = data.find(HEAD_END)
        if end < 0 or end + 4 > limit:  # (+ len(HEAD_END))
            if len(data) > limit:
                client._refuse(431, "head-too-large", "the request head exceeds max_head_bytes")
            else:
                client.buffer += data  # a head in pieces: wait for the rest
            return
    client.head_timer.active = False  # (Timer.stop, without the call)
    cut = end + 4  # (+ len(HEAD_END))
    raw_head = data[:cut] if len(data) > cut else data
    body = RawBody(hop.max_body_bytes)
    request = client._requests
    if request is None:
        request = client._requests = RequestMessage(body)
    try:
        # With the bytes after the head, when they are all its body: one parser call.
        fed = request.start(raw_head, body, None if raw_head is data else data)
    except (ParserError, ValueError) as exc:
        client._refuse(400, "bad-request", parser_reason(exc))
        return
    method = request.method
    if method is None:  # llhttp takes an HTTP/0.9 line (no version): not forwardable
        client._refuse(400, "bad-request", "a request line without an HTTP version")
        return
    if method == "CONNECT":
        client._refuse(400, "connect-not-supported", "a reverse proxy does not tunnel CONNECT")
        return
    raw = RawExchange(
        hop.name, hop.target.url, client.peer, method, request.target, raw_head, body,
        client.clock(),
    )
    raw.request_framing = "upgrade" if request.upgrade else request.framing
    # The parser's scan of the head says whether it needs a closer look (a session, a
    # traceparent or a hop-by-hop field); most heads have none.
    notable = request.notable
    lower = raw_head.lower() if notable else b""  # (only a notable head is looked at)
    if notable and lower.find(_SESSION) >= 0:
        session = field(raw_head, lower, _SESSION)
        if session is not None:
            raw.session = session.decode("latin-1")
    forward = raw_head
    if hop.add_traceparent or hop.rewrites or (
            notable and (lower.find(_TRACEPARENT) >= 0 or may_change(lower))):
        # The rare path: the head is split into lines, and rewritten if a change applies.
        head = parse_head(raw_head)
        add: tuple[tuple[bytes, bytes, str], ...] = ()
        if head.has(b"traceparent"):
            raw.trace_id = trace_id_of(
                [line.partition(b":")[2] for line, name in zip(head.lines, head.lower,
                                                                strict=True)
                 if name == b"traceparent"])
        elif hop.add_traceparent:
            raw.trace_id, value = new_traceparent(hop.options.tracing)
            add = ((b"traceparent", value, _WHY_TRACE),)
        forward, changes = rewrite(
            head, raw_head, upgrade=request.upgrade, host=hop.host_rewrite,
            target_prefix=hop.target.prefix, add=add,
        )
        if changes:
            raw.head_changes = changes
            raw.forwarded_pairs = forward
    ex = Exchange(raw, request)
    ex.skip_body = method == "HEAD"
    client.exchange = ex
    hop.began += 1
    try:
        hop.recorder.begin(raw)
    except Exception as exc:  # noqa: BLE001 - evidence must never break traffic
        log.error("record.failed", hop=hop.name, error=type(exc).__name__)
    ex.waiting.append(forward)
    ex.waiting_size = len(forward)
    if request.upgrade:
        cap = hop.max_body_bytes
        raw.tunnel = (RawBody(cap), RawBody(cap))
    if fed:  # the whole request came at once (the usual case), parsed already
        if forward is raw_head:
            # Head and body as they came, in one object: one write upstream, no join.
            ex.waiting[0] = data
            ex.waiting_size = len(data)
            if ex.waiting_size > HIGH_WATER:
                client._pause("connecting")
        else:
            client._to_upstream(ex, data[cut:])
        if request.complete:  # (request_ended: no answer can have come yet)
            ex.request_done = True
            body.ended = True
    elif raw_head is not data:
        rest = data[cut:]
        if request.upgrade:
            client._tunnel_up(ex, rest)
        else:
            try:
                taken = request.feed(rest) if not request.complete else 0
            except (ParserError, ValueError) as exc:
                # Nothing went upstream yet: the tap's own 400, and the connection ends.
                _rejected_body(client, 400, parser_reason(exc))
                client._answer(ex, 400, "bad-request-body", parser_reason(exc))
                return
            if taken == len(rest) and forward is raw_head:
                # Head and body as they came, in one object: one write upstream, no join.
                ex.waiting[0] = data
                ex.waiting_size = len(data)
                if ex.waiting_size > HIGH_WATER:
                    client._pause("connecting")
            elif taken:
                client._to_upstream(ex, rest if taken == len(rest) else rest[:taken])
            if request.complete:  # (request_ended: no answer can have come yet)
                ex.request_done = True
                body.ended = True
            if taken < len(rest):
                client.buffer += rest[taken:]
                if len(client.buffer) > HIGH_WATER:
                    client._pause("pipelined")
    elif request.complete:
        ex.request_done = True
        body.ended = True
    client._bind(ex)


def _rejected_body(client: ClientConnection, status: int | None, reason: str) -> None:
    """Count and log (one line, no raw bytes) a request body the parser rejected, as a
    rejected head is by ``refuse``."""
    client.hop.count("bad_request")
    log.warning("tap.bad-request", hop=client.hop.name, status=status,
                error="bad-request-body", reason=reason)


def request_body(client: ClientConnection, ex: Exchange, data: bytes) -> None:
    """Body bytes of the request in flight: upstream up to its end, the rest kept for the next."""
    try:
        taken = ex.request.feed(data)
    except (ParserError, ValueError) as exc:
        # Mid-body: the head is upstream already; the honest signal is a cut stream.
        _rejected_body(client, None, parser_reason(exc))
        client._cut(ex, "bad-request-body", parser_reason(exc))
        return
    client._to_upstream(ex, data if taken == len(data) else data[:taken])
    if ex.request.complete:
        client._request_ended(ex)
        if taken < len(data):
            client.buffer += data[taken:]
            if len(client.buffer) > HIGH_WATER:
                client._pause("pipelined")


def request_ended(client: ClientConnection, ex: Exchange) -> None:
    """The request's last byte went upstream."""
    ex.request_done = True
    ex.raw.request.ended = True
    if ex.response_done:
        client._finish(ex)


def tunnel_up(client: ClientConnection, ex: Exchange, data: bytes) -> None:
    """Bytes after an Upgrade request's head: forwarded untouched, a copy captured."""
    if ex.raw.tunnel is not None:
        ex.raw.tunnel[0].feed(data, client.clock())
    client._to_upstream(ex, data)


def to_upstream(client: ClientConnection, ex: Exchange, data: bytes) -> None:
    """Send request bytes upstream (held until the connection is there)."""
    conn = ex.upstream
    if conn is None:
        ex.waiting.append(data)
        ex.waiting_size += len(data)
        if ex.waiting_size > HIGH_WATER:
            client._pause("connecting")
        return
    conn.write(data)
    if ex.replay is not None:
        ex.replay.append(data)
        if sum(len(d) for d in ex.replay) > REPLAY_MAX:
            ex.replay = None
