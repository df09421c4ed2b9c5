"""The client side of a hop: one :class:`ClientConnection` (an ``asyncio.Protocol``) per
client connection, splicing its bytes to an upstream connection and back.

Per exchange: the request head is found, checked by the parser and forwarded (rewritten only
as :mod:`~mcp_tap.proxy.splice.head` says); body bytes go upstream as they arrive; response
bytes go to the client as they arrive, then a copy is parsed for the boundaries and the
capture. Requests are handled one at a time, in order: a pipelined request waits in the
buffer until the answer before it is complete (reading pauses if it grows).

Flow control both ways: a side whose write buffer passes its high-water mark pauses reading
from the other side until it drains (like uvicorn's ``httptools_impl``); a client that stops
reading for ``write_timeout_s`` is cut. Nothing here raises into the event loop: the tap's own
failures are answers with ``X-Mcp-Tap-Error`` or cut streams, recorded in the evidence.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import structlog

from mcp_tap.proxy.capture import RawBody, RawExchange
from mcp_tap.proxy.splice.answers import tap_answer
from mcp_tap.proxy.splice.framing import (
    ParserError,
    RequestMessage,
    ResponseMessage,
    framing_of,
)
from mcp_tap.proxy.splice.head import HEAD_END, field, may_change, parse_head, rewrite
from mcp_tap.proxy.splice.timeouts import Timer
from mcp_tap.proxy.splice.tracing import new_traceparent, trace_id_of
from mcp_tap.proxy.splice.upstream import UpstreamConnection

if TYPE_CHECKING:
    from mcp_tap.proxy.splice.hop import HopCore

log = structlog.get_logger("mcp_tap.proxy")

_HIGH_WATER = 256 * 1024  # bytes held for a side that cannot take them yet, before pausing
_REPLAY_MAX = 64 * 1024  # request bytes kept to resend once on a reused connection
_WHY_TRACE = "hop correlation: the client sent no traceparent"
_SESSION = b"\r\nmcp-session-id:"
_TRACEPARENT = b"\r\ntraceparent:"
_CONTENT_LENGTH = b"\r\ncontent-length:"


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


class ClientConnection(asyncio.Protocol):
    """One client connection of a hop."""

    def __init__(self, hop: HopCore) -> None:
        self.hop = hop
        self.loop = hop.loop
        self.clock = hop.clock
        self.transport: asyncio.Transport | None = None
        self.peer = ""
        self.buffer = bytearray()  # bytes not yet part of an exchange
        self.exchange: Exchange | None = None
        self._requests: RequestMessage | None = None  # the connection's request parser
        self.closed = False
        self._paused: set[str] = set()
        self._scheduled = False
        listener = hop.options.listener
        self.head_timer = Timer(self.loop, listener.head_timeout_s, self._head_timeout)
        self.stall_timer = Timer(self.loop, listener.write_timeout_s, self._write_stalled)
        # The upstream idle timer of the exchange in flight (one per connection, reused).
        self.idle_timer = Timer(self.loop, hop.options.upstream.idle_timeout_s,
                                self._upstream_idle_now)

    # -- asyncio.Protocol ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """A client connected."""
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        self.hop.connections.add(self)
        self.head_timer.start()

    def data_received(self, data: bytes) -> None:
        """Client bytes: part of the request in flight, or of the next one."""
        ex = self.exchange
        if ex is not None and not ex.finished:
            if ex.tunnel or (ex.request.upgrade and not self.buffer):
                self._tunnel_up(ex, data)
                return
            if not ex.request_done and not self.buffer:
                self._request_body(ex, data)
                return
            self.buffer += data
            if len(self.buffer) > _HIGH_WATER:
                self._pause("pipelined")
            return
        self.buffer += data
        self._next_request()

    def eof_received(self) -> bool:
        """The client half-closed: answer a whole request not yet answered, then close."""
        ex = self.exchange
        if ex is None or ex.finished:
            return False
        if ex.tunnel:
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
        if ex.request_done and ex.raw.sent_at is None:
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
        if ex is not None and not ex.finished:
            if not ex.response_done or not ex.request_done:
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
            ex.upstream_paused = True

    def resume_writing(self) -> None:
        """The client drained: read the upstream again."""
        self.stall_timer.stop()
        ex = self.exchange
        if ex is not None and ex.upstream_paused and ex.upstream is not None:
            ex.upstream_paused = False
            if ex.upstream.transport is not None and not ex.upstream.closed:
                ex.upstream.transport.resume_reading()

    # -- reading requests ------------------------------------------------------------------

    def _next_request(self) -> None:
        """Start the exchange of the next whole request head in the buffer, if any."""
        self._scheduled = False
        if self.closed or self.exchange is not None:
            return
        buf = self.buffer
        while buf[:2] == b"\r\n":  # empty lines before a request line are ignored (RFC 9112)
            del buf[:2]
        if not buf:
            return
        end = buf.find(HEAD_END)
        limit = self.hop.options.listener.max_head_bytes
        if end < 0 or end + len(HEAD_END) > limit:
            if len(buf) > limit:
                self._refuse(431, "head-too-large", "the request head exceeds max_head_bytes")
            return
        self.head_timer.stop()
        cut = end + len(HEAD_END)
        raw_head = bytes(buf[:cut])
        if len(buf) > cut:
            rest = bytes(buf[cut:])
            self.buffer = bytearray()
        else:
            rest = b""
            buf.clear()
        lower = raw_head.lower()
        body = RawBody(self.hop.options.capture.max_body_bytes)
        request = self._requests
        if request is None:
            request = self._requests = RequestMessage(body.feed)
        else:
            request.reset(body.feed)
        try:
            request.start(raw_head, lower)
        except (ParserError, ValueError) as exc:
            self._refuse(400, "bad-request", _parser_reason(exc))
            return
        method, target, _ = raw_head[: raw_head.find(b"\r\n")].split(b" ", 2)
        if method == b"CONNECT":
            self._refuse(400, "connect-not-supported", "a reverse proxy does not tunnel CONNECT")
            return
        hop = self.hop
        raw = RawExchange(
            hop.name, hop.target.url, self.peer, method.decode("latin-1"),
            target.decode("latin-1"), raw_head, body, self.clock(),
        )
        raw.request_framing = "upgrade" if request.upgrade else request.framing
        if _SESSION in lower:
            session = field(raw_head, lower, _SESSION)
            if session is not None:
                raw.session = session.decode("latin-1")
        forward = raw_head
        if _TRACEPARENT in lower or hop.add_traceparent or hop.rewrites or may_change(lower):
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
        ex.skip_body = method == b"HEAD"
        self.exchange = ex
        hop.metrics.exchange_began(hop.name)
        try:
            hop.recorder.begin(raw)
        except Exception as exc:  # noqa: BLE001 - evidence must never break traffic
            log.error("record.failed", hop=hop.name, error=type(exc).__name__)
        ex.waiting.append(forward)
        ex.waiting_size = len(forward)
        if request.upgrade:
            cap = self.hop.options.capture.max_body_bytes
            raw.tunnel = (RawBody(cap), RawBody(cap))
        if rest:
            if request.upgrade:
                self._tunnel_up(ex, rest)
            else:
                taken = request.feed(rest) if not request.complete else 0
                if taken:
                    self._to_upstream(ex, rest[:taken])
                if request.complete:
                    self._request_ended(ex)
                if taken < len(rest):
                    self.buffer += rest[taken:]
                    if len(self.buffer) > _HIGH_WATER:
                        self._pause("pipelined")
        elif request.complete:
            self._request_ended(ex)
        self._bind(ex)

    def _request_body(self, ex: Exchange, data: bytes) -> None:
        try:
            taken = ex.request.feed(data)
        except (ParserError, ValueError) as exc:
            # Mid-body: the head is upstream already; the honest signal is a cut stream.
            self._cut(ex, "bad-request-body", _parser_reason(exc))
            return
        self._to_upstream(ex, data if taken == len(data) else data[:taken])
        if ex.request.complete:
            self._request_ended(ex)
            if taken < len(data):
                self.buffer += data[taken:]
                if len(self.buffer) > _HIGH_WATER:
                    self._pause("pipelined")

    def _request_ended(self, ex: Exchange) -> None:
        ex.request_done = True
        ex.raw.request.ended = True
        if ex.response_done:
            self._finish(ex)

    def _tunnel_up(self, ex: Exchange, data: bytes) -> None:
        """Bytes after an Upgrade request's head: forwarded untouched, a copy captured."""
        if ex.raw.tunnel is not None:
            ex.raw.tunnel[0].feed(data, self.clock())
        self._to_upstream(ex, data)

    def _to_upstream(self, ex: Exchange, data: bytes) -> None:
        conn = ex.upstream
        if conn is None:
            ex.waiting.append(data)
            ex.waiting_size += len(data)
            if ex.waiting_size > _HIGH_WATER:
                self._pause("connecting")
            return
        conn.write(data)
        if ex.replay is not None:
            ex.replay.append(data)
            if sum(len(d) for d in ex.replay) > _REPLAY_MAX:
                ex.replay = None

    # -- the upstream connection -----------------------------------------------------------

    def _bind(self, ex: Exchange) -> None:
        """Give the exchange an upstream connection: an idle one, a new one, or a 503."""
        hop = self.hop
        if hop.stopping:
            self._answer(ex, 503, "draining", "the tap is shutting down")
            return
        if not hop.pool.reserve():
            hop.count("saturated")
            self._answer(ex, 503, "saturated", "upstream connections are at max_connections")
            return
        ex.reserved = True
        conn = hop.pool.take_idle()
        if conn is not None:
            self._attach(ex, conn)
        else:
            ex.connecting = self.loop.create_task(self._connect(ex))

    async def _connect(self, ex: Exchange) -> None:
        try:
            conn = await self.hop.pool.connect()
        except TimeoutError:
            self._connect_failed(ex, 504, "upstream-timeout",
                                 "the upstream did not accept the connection in time")
            return
        except OSError as exc:
            self._connect_failed(ex, 502, "upstream-unreachable", f"{type(exc).__name__}: {exc}")
            return
        except asyncio.CancelledError:
            if not ex.finished:
                ex.reserved = False
                self.hop.pool.unreserve()
            raise
        ex.connecting = None
        if ex.finished:  # the client left meanwhile: a fresh, unused connection is reusable
            self.hop.pool.bound += 1
            self.hop.pool.release(conn, reusable=True)
            return
        self._attach(ex, conn)

    def _connect_failed(self, ex: Exchange, status: int, phase: str, reason: str) -> None:
        ex.connecting = None
        if ex.reserved:
            ex.reserved = False
            self.hop.pool.unreserve()
        if not ex.finished:
            self._answer(ex, status, phase, reason)

    def _attach(self, ex: Exchange, conn: UpstreamConnection) -> None:
        ex.upstream = conn
        conn.owner = self
        ex.raw.forwarded_at = self.clock()
        data = b"".join(ex.waiting) if len(ex.waiting) > 1 else ex.waiting[0]
        ex.replay = list(ex.waiting) if conn.reused and ex.waiting_size <= _REPLAY_MAX else None
        ex.waiting = []
        ex.waiting_size = 0
        conn.write(data)
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

    # -- UpstreamOwner -------------------------------------------------------------------------

    def upstream_data(self, data: bytes) -> None:
        """Bytes from the upstream: to the client first, then parsed for the capture."""
        ex = self.exchange
        if ex is None or ex.finished or self.transport is None:
            return
        if ex.idle is not None:
            ex.idle.touch()
        ex.replay = None
        if ex.tunnel:
            self.transport.write(data)
            if ex.raw.tunnel is not None:
                ex.raw.tunnel[1].feed(data, self.clock())
            return
        if ex.response_head is not None:
            self._response_heads(ex, data)
            return
        self._response_body(ex, data)

    def upstream_eof(self) -> None:
        """The upstream half-closed: the end of a close-delimited answer, or of a tunnel."""
        ex = self.exchange
        if ex is None or ex.finished:
            return
        if ex.tunnel:
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
        if ex is None or ex.finished:
            return
        self._upstream_gone(ex)

    def upstream_paused(self) -> None:
        """The upstream's write buffer is full: stop reading the client."""
        self._pause("upstream")

    def upstream_resumed(self) -> None:
        """The upstream drained: read the client again."""
        self._resume("upstream")

    def _upstream_gone(self, ex: Exchange) -> None:
        conn = ex.upstream
        if conn is not None and ex.reserved:
            ex.reserved = False
            conn.owner = None
            self.hop.pool.release(conn, reusable=False)
        ex.upstream = None
        if ex.tunnel:
            self._finish_closing(ex)
            return
        if ex.response_head is None and self.response_framing_is_close(ex):
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

    @staticmethod
    def response_framing_is_close(ex: Exchange) -> bool:
        """Whether the answer ends with the connection (no length, not chunked)."""
        return ex.response_framing == "close"

    def _upstream_idle_now(self) -> None:
        if self.exchange is not None:
            self._upstream_idle(self.exchange)

    def _upstream_idle(self, ex: Exchange) -> None:
        if ex.finished:
            return
        if ex.upstream_paused:  # the client is slow, not the upstream: the stall clock rules
            if ex.idle is not None:
                ex.idle.start()
            return
        self._abort_upstream(ex)
        if ex.raw.sent_at is None and not ex.raw.interim:
            self._answer(ex, 504, "upstream-timeout", "the upstream did not answer in time")
        else:
            self._cut(ex, "upstream-idle-timeout", "the upstream stream was idle past the timeout")

    # -- reading responses -------------------------------------------------------------------

    def _response_heads(self, ex: Exchange, data: bytes) -> None:
        """Forward each whole response head (hop-by-hop fields dropped, interim 1xx ones
        too), then the body bytes after it."""
        assert self.transport is not None and ex.response_head is not None
        raw = ex.raw
        if ex.response_head:
            data = ex.response_head + data
        while True:
            end = data.find(HEAD_END)
            if end < 0:
                if len(data) > 4 * self.hop.options.listener.max_head_bytes:
                    self._abort_upstream(ex)
                    self._answer(ex, 502, "upstream-bad-response",
                                 "the upstream's response head is too large")
                    return
                ex.response_head = data
                return
            cut = end + len(HEAD_END)
            raw_head = data[:cut] if len(data) > cut else data
            rest = data[cut:]
            if raw.first_byte_at is None:
                raw.first_byte_at = self.clock()
            response = ex.response
            if response is None:
                response = ex.response = self._response_message(ex)
            try:
                response.feed(raw_head)
            except (ParserError, ValueError) as exc:
                self._abort_upstream(ex)
                if raw.sent_at is None and not raw.interim:
                    self._answer(ex, 502, "upstream-bad-response", _parser_reason(exc))
                else:
                    self._cut(ex, "upstream-bad-response", _parser_reason(exc))
                return
            lower = raw_head.lower()
            if not response.head_done:  # an interim 1xx answer (100 Continue, 103, ...)
                out = raw_head
                if may_change(lower):
                    out, changes = rewrite(parse_head(raw_head), raw_head)
                    interim = str(response.status)
                    for change in changes:
                        change["interim"] = interim
                    raw.egress_changes.extend(changes)
                self.transport.write(out)
                raw.interim.append(response.status)
                data = rest
                continue
            ex.response_head = None
            upgrade = response.upgraded and ex.request.upgrade
            out = raw_head
            if may_change(lower):
                out, changes = rewrite(parse_head(raw_head), raw_head, upgrade=upgrade)
                if changes:
                    raw.egress_changes.extend(changes)
                    raw.egress_pairs = out
            raw.status = raw.egress_status = response.status
            raw.response_pairs = raw_head
            if response.upgraded:
                self.transport.write(out + rest if rest else out)
                if rest and raw.tunnel is not None:
                    raw.tunnel[1].feed(rest, self.clock())
                raw.sent_at = self.clock()
                raw.upgraded = upgrade
                raw.response_framing = "upgrade"
                if not upgrade:  # a 101 nobody asked for: nothing to tunnel
                    self._cut(ex, "upstream-bad-response", "101 to a request without Upgrade")
                    return
                ex.tunnel = True
                return
            self._set_framing(ex, raw_head, lower, response)
            if not rest:
                self.transport.write(out)
                raw.sent_at = self.clock()
                if response.complete:
                    self._response_complete(ex)
                return
            if response.complete:  # a bodiless answer: whatever follows is no one's
                self.transport.write(out)
                raw.sent_at = self.clock()
                self._stray(ex, len(rest))
                self._response_complete(ex)
                return
            self._body_out(ex, rest, out)
            return

    def _response_message(self, ex: Exchange) -> ResponseMessage:
        body = RawBody(self.hop.options.capture.max_body_bytes)
        ex.raw.response = body
        conn = ex.upstream
        response = conn.response if conn is not None else None
        if response is None:
            response = ResponseMessage(body, ex.skip_body, self.clock)
            if conn is not None and not ex.skip_body:
                conn.response = response  # reused for the next answer on this connection
        else:
            response.reset(body, ex.skip_body)
        if ex.skip_body and conn is not None:
            conn.response = None  # its parser waits for the body the HEAD answer announced
        return response

    def _set_framing(
        self, ex: Exchange, raw_head: bytes, lower: bytes, response: ResponseMessage
    ) -> None:
        status = response.status
        if ex.skip_body or status in (204, 304):
            ex.response_framing = "none"
        else:
            framing, length = framing_of(raw_head, lower)
            if framing == "chunked":
                ex.response_framing = "chunked"
                response.chunked = True
            elif _CONTENT_LENGTH in lower:
                ex.response_framing = "length"
                ex.remaining = length
            else:
                ex.response_framing = "close"
                ex.close_client = True  # the client reads this answer until the connection ends
        ex.raw.response_framing = ex.response_framing

    def _response_body(self, ex: Exchange, data: bytes) -> None:
        self._body_out(ex, data, b"")

    def _body_out(self, ex: Exchange, data: bytes, head: bytes) -> None:
        """Body bytes (after ``head``, when it goes in the same send): to the client first,
        then the copy is parsed; bytes past the answer's end are no one's and not sent."""
        assert self.transport is not None and ex.response is not None
        response = ex.response
        remaining = ex.remaining
        if remaining >= 0:  # length-framed: the tap knows where it ends
            stray = len(data) - remaining
            if stray > 0:
                data = data[:remaining]
            ex.remaining = remaining - len(data)
            self.transport.write(head + data if head else data)
            if head:
                ex.raw.sent_at = self.clock()
            if stray > 0:
                self._stray(ex, stray)
            self._parse_body(ex, data)
            return
        if response.chunked and (response.careful or data[:1] == b"0" or b"\n0" in data):
            # The end may be in these bytes: parse first, to send only what is the answer's.
            try:
                taken = response.feed(data)
            except (ParserError, ValueError) as exc:
                if head:
                    self.transport.write(head)
                    ex.raw.sent_at = self.clock()
                self._abort_upstream(ex)
                self._cut(ex, "upstream-bad-response", _parser_reason(exc))
                return
            body = data if taken == len(data) else data[:taken]
            self.transport.write(head + body if head else body)
            if head:
                ex.raw.sent_at = self.clock()
            if taken < len(data):
                self._stray(ex, len(data) - taken)
            if response.complete:
                self._response_complete(ex)
            return
        self.transport.write(head + data if head else data)  # to the client first ...
        if head:
            ex.raw.sent_at = self.clock()
        self._parse_body(ex, data)  # ... then the copy is parsed

    def _stray(self, ex: Exchange, size: int) -> None:
        """Bytes after the end of a complete answer: not forwarded, the upstream connection
        is closed (it no longer frames answers), and the exchange says so."""
        ex.stray = True
        self.hop.count("stray_upstream_bytes")
        ex.raw.egress_changes.append({
            "change": "dropped", "bytes": str(size),
            "why": "bytes after the end of the answer belong to no response; "
                   "the upstream connection was closed",
        })

    def _parse_body(self, ex: Exchange, data: bytes) -> None:
        assert ex.response is not None
        try:
            ex.response.feed(data)
        except (ParserError, ValueError) as exc:
            self._abort_upstream(ex)
            self._cut(ex, "upstream-bad-response", _parser_reason(exc))
            return
        if ex.response.complete:
            self._response_complete(ex)

    def _response_complete(self, ex: Exchange) -> None:
        raw = ex.raw
        if raw.response is not None:
            raw.response.ended = True
        raw.end_at = raw.egress_end_at = self.clock()
        ex.response_done = True
        if ex.request.upgrade:  # declined: the bytes sent after its head were not HTTP
            ex.close_client = True
        if not ex.request_done:
            # Answered before the request ended (an early 4xx, a declined Expect): the rest of
            # the request cannot be told from the next one, so the connection ends here.
            ex.close_client = True
        self._finish(ex)

    # -- endings --------------------------------------------------------------------------

    def _answer(self, ex: Exchange, status: int, phase: str, reason: str) -> None:
        """Answer the exchange with the tap's own error (nothing of the origin's was sent)."""
        raw = ex.raw
        close = ex.close_client or not ex.request_done
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
        ex.response_done = True
        self._finish(ex)

    def _cut(self, ex: Exchange, phase: str, reason: str) -> None:
        """End an exchange whose answer had begun: the only honest signal left is a broken
        stream (the client sees the connection close mid-answer)."""
        if ex.finished:
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
        if ex is not None and not ex.finished:
            self._cut(ex, phase, reason)
        elif self.transport is not None:
            self.transport.abort()

    def _finish_closing(self, ex: Exchange) -> None:
        ex.close_client = True
        self._finish(ex)

    def _abort_upstream(self, ex: Exchange) -> None:
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

    def _finish(self, ex: Exchange) -> None:
        """Record the exchange, free its upstream connection, go on with the next request."""
        if ex.finished:
            return
        ex.finished = True
        raw = ex.raw
        if ex.idle is not None:
            ex.idle.stop()
        if ex.connecting is not None:
            ex.connecting.cancel()
            ex.connecting = None
        if raw.end_at is None:
            raw.end_at = raw.egress_end_at = self.clock()
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
            if ex.reserved:
                ex.reserved = False
                self.hop.pool.release(conn, reusable)
            else:
                conn.close()
        elif ex.reserved:
            ex.reserved = False
            self.hop.pool.unreserve()
        raw.request.finish()
        if raw.tunnel is not None:
            raw.tunnel[0].finish()
            raw.tunnel[1].finish()
        if raw.response is not None:
            raw.response.finish()
            if raw.egress_body is None:
                raw.egress_bytes = raw.response.size  # spliced: what came is what was sent
        self.exchange = None
        self.hop.metrics.exchange_ended(self.hop.name, raw.egress_status)
        try:
            self.hop.recorder.record(raw)
        except Exception as exc:  # noqa: BLE001 - evidence must never break traffic
            log.error("record.failed", hop=self.hop.name, error=type(exc).__name__)
        if self.closed:
            return
        if ex.close_client or self.hop.stopping:
            self._close()
            return
        self._resume("upstream")
        self._resume("pipelined")
        self.head_timer.start()
        if self.buffer and not self._scheduled:
            self._scheduled = True  # not recursively: pipelined requests go one per callback
            self.loop.call_soon(self._next_request)

    def _close(self) -> None:
        """Close after what was written is flushed."""
        self.head_timer.stop()
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def close_if_idle(self) -> bool:
        """Close the connection when no exchange is in flight (for draining)."""
        if self.exchange is None:
            self._close()
            return True
        return False

    def _refuse(self, status: int, phase: str, reason: str) -> None:
        """Answer a request the tap cannot forward (bad syntax, CONNECT, head too large) with
        a 400/431, a counter, one log line (no raw bytes) and a tap.bad-request record."""
        hop = self.hop
        hop.count("bad_request")
        log.warning("tap.bad-request", hop=hop.name, status=status, error=phase, reason=reason)
        now = self.clock()
        raw = RawExchange(hop.name, hop.target.url, self.peer, "", "", (),
                          RawBody(0), now)
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
        hop.metrics.exchange_began(hop.name)
        hop.metrics.exchange_ended(hop.name, status)
        try:
            hop.recorder.record(raw)
        except Exception as exc:  # noqa: BLE001 - evidence must never break traffic
            log.error("record.failed", hop=hop.name, error=type(exc).__name__)

    def _head_timeout(self) -> None:
        """No whole request head in time: a partial one gets 408, an idle connection closes."""
        if self.exchange is not None or self.closed:
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
        if ex is not None and not ex.finished:
            self._cut(ex, "client-write-timeout", "the client stopped reading")
        elif self.transport is not None:
            self.transport.abort()

    def _pause(self, reason: str) -> None:
        if not self._paused and self.transport is not None and not self.closed:
            self.transport.pause_reading()
        self._paused.add(reason)

    def _resume(self, reason: str) -> None:
        if reason not in self._paused:
            return
        self._paused.discard(reason)
        if not self._paused and self.transport is not None and not self.closed:
            self.transport.resume_reading()


def _parser_reason(exc: Exception) -> str:
    """A short reason for a parser error: llhttp's own static text, never the input bytes."""
    if isinstance(exc, ValueError) and not isinstance(exc, ParserError):
        return "invalid Content-Length"
    text = str(exc.args[0]) if exc.args else type(exc).__name__
    return text if text.isascii() and text.isprintable() and len(text) < 100 else "invalid"
