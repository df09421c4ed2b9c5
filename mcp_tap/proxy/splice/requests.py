"""Reading requests: each whole head starts an exchange; body bytes go upstream as they
come, cut exactly at the message's end (a pipelined request may follow).

:class:`RequestSide` is the part of :class:`~mcp_tap.proxy.splice.client.ClientConnection`
that owns the client's bytes: :meth:`~RequestSide.data_received` routes them,
:meth:`~RequestSide._next_request` finds the next head, :meth:`~RequestSide._start_exchange`
starts its exchange.
"""

from __future__ import annotations

import structlog

from mcp_tap.proxy.capture import RawBody, RawExchange
from mcp_tap.proxy.holdback import REASON as HELD
from mcp_tap.proxy.splice.base import ConnectionBase
from mcp_tap.proxy.splice.exchange import HIGH_WATER, REPLAY_MAX, Exchange, parser_reason
from mcp_tap.proxy.splice.framing import ParserError, RequestMessage
from mcp_tap.proxy.splice.head import HEAD_END, field, may_change, parse_head, rewrite
from mcp_tap.proxy.splice.state import CROSSING, FINISHED, REQUEST_ENDED, SENDING, TUNNEL
from mcp_tap.proxy.splice.tracing import new_traceparent, trace_id_of

log = structlog.get_logger("mcp_tap.proxy")

_WHY_TRACE = "hop correlation: the client sent no traceparent"
_SESSION = b"\r\nmcp-session-id:"
_TRACEPARENT = b"\r\ntraceparent:"
_HEAD_END_SIZE = len(HEAD_END)


class RequestSide(ConnectionBase):
    """The client's bytes: requests found, started, and forwarded."""

    def data_received(self, data: bytes) -> None:
        """Client bytes (``asyncio.Protocol``'s callback): part of the exchange in flight
        (its body, its tunnel, or a pipelined request that waits), or the next head."""
        ex = self.exchange
        if ex is not None and ex.phase is not FINISHED:
            phase = ex.phase
            if phase is TUNNEL or (ex.request.upgrade and not self.buffer):
                self._tunnel_up(ex, data)
            elif (phase is SENDING or phase is CROSSING) and not self.buffer:
                self._request_body(ex, data)
            else:  # the next request: it waits until this exchange is over
                self._keep(data)
        elif self.buffer:
            self.buffer += data
            self._next_request()
        else:
            self._next_request(data)  # read in place, no copy

    def _keep(self, data: bytes) -> None:
        """Buffer client bytes that are not the exchange's; pause reading when they pile up."""
        self.buffer += data
        if len(self.buffer) > HIGH_WATER:
            self._pause("pipelined")

    def _next_request(self, data: bytes | None = None) -> None:
        """Find the next request's head: in ``data`` when nothing was buffered before it,
        else in the buffer (``data`` None: look at the buffer, as after an exchange). Starts
        its exchange once the head is whole; a head past ``max_head_bytes`` gets a 431."""
        self._scheduled = False
        if self.closed or self.exchange is not None:
            if data:
                self.buffer += data
            return
        limit = self.hop.max_head_bytes
        if data is None or data[:2] == b"\r\n":
            buf = self.buffer
            if data is not None:
                buf += data
            while buf[:2] == b"\r\n":  # empty lines before a request line are ignored (RFC 9112)
                del buf[:2]
            if not buf:
                return
            end = buf.find(HEAD_END)
            if end < 0 or end + _HEAD_END_SIZE > limit:
                if len(buf) > limit:
                    self._refuse(431, "head-too-large", "the request head exceeds max_head_bytes")
                return
            data = bytes(buf)
            self.buffer = bytearray()
        else:
            end = data.find(HEAD_END)
            if end < 0 or end + _HEAD_END_SIZE > limit:
                if len(data) > limit:
                    self._refuse(431, "head-too-large", "the request head exceeds max_head_bytes")
                else:
                    self.buffer += data  # a head in pieces: wait for the rest
                return
        self.head_timer.stop()
        self._start_exchange(data, end + _HEAD_END_SIZE)

    def _start_exchange(self, data: bytes, cut: int) -> None:
        """Start the exchange of the head ``data[:cut]`` (``data``: it and the bytes after
        it): parsed (or refused), recorded as begun, sent upstream with what of its body came."""
        hop = self.hop
        raw_head = data[:cut] if len(data) > cut else data
        body = RawBody(hop.max_body_bytes)
        request = self._requests
        if request is None:
            request = self._requests = RequestMessage(body, hop.heads)
        try:
            # With the bytes after the head, when they are all its body: one parser call.
            fed = request.start(raw_head, body, None if raw_head is data else data)
        except (ParserError, ValueError) as exc:
            self._refuse(400, "bad-request", parser_reason(exc))
            return
        method = request.method
        if method is None:  # llhttp takes an HTTP/0.9 line (no version): not forwardable
            self._refuse(400, "bad-request", "a request line without an HTTP version")
            return
        if method == "CONNECT":
            self._refuse(400, "connect-not-supported", "a reverse proxy does not tunnel CONNECT")
            return
        raw = RawExchange(
            hop.name, hop.target.url, self.peer, method, request.target, raw_head, body,
            self.clock(),
        )
        raw.request_framing = "upgrade" if request.upgrade else request.framing
        forward = self._forward_head(raw, request, raw_head)
        ex = Exchange(raw, request)
        ex.skip_body = method == "HEAD"
        self.exchange = ex
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
        if self._first_bytes(ex, data, raw_head, forward, fed):
            self._bind(ex)

    def _forward_head(self, raw: RawExchange, request: RequestMessage, raw_head: bytes) -> bytes:
        """The head to send upstream (``raw_head`` itself unless a change applies), noting
        the session, the trace id and any change in ``raw``."""
        hop = self.hop
        # The parser's scan of the head says whether it needs a closer look (a session, a
        # traceparent or a hop-by-hop field); most heads have none.
        notable = request.notable
        lower = raw_head.lower() if notable else b""  # (only a notable head is looked at)
        if notable and lower.find(_SESSION) >= 0:
            session = field(raw_head, lower, _SESSION)
            if session is not None:
                raw.session = session.decode("latin-1")
        if not (hop.add_traceparent or hop.rewrites or (
                notable and (lower.find(_TRACEPARENT) >= 0 or may_change(lower)))):
            return raw_head
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
        return forward

    def _first_bytes(
        self, ex: Exchange, data: bytes, raw_head: bytes, forward: bytes, fed: int
    ) -> bool:
        """The bytes that came with the head (``data``: both; ``fed``: how many the parser
        took with the head): the request's body upstream, a tunnel's bytes, or the next
        request's kept. False when the tap answered instead (a bad body)."""
        request = ex.request
        cut = len(raw_head)
        if fed:  # the whole request came at once (the usual case), parsed already
            if forward is raw_head:
                self._held_whole(ex, data)
            else:
                self._to_upstream(ex, data[cut:])
        elif raw_head is not data:
            rest = data[cut:]
            if request.upgrade:
                self._tunnel_up(ex, rest)
                # (The body capture stays open: these bytes are the tunnel's, not a body.)
                self._request_ended(ex, body_ended=False)
                return True
            try:
                taken = request.feed(rest) if not request.complete else 0
            except (ParserError, ValueError) as exc:
                # Nothing went upstream yet: the tap's own 400, and the connection ends.
                self._rejected_body(400, parser_reason(exc))
                self._answer(ex, 400, "bad-request-body", parser_reason(exc))
                return False
            if taken == len(rest) and forward is raw_head:
                self._held_whole(ex, data)
            elif taken:
                self._to_upstream(ex, rest if taken == len(rest) else rest[:taken])
            if taken < len(rest):
                self._keep(rest[taken:])
        if request.complete:  # (no answer can have come yet)
            self._request_ended(ex)
        return True

    def _held_whole(self, ex: Exchange, data: bytes) -> None:
        """Hold head and body as they came, in one object: one write upstream, no join."""
        ex.waiting[0] = data
        ex.waiting_size = len(data)
        if ex.waiting_size > HIGH_WATER:
            self._pause("connecting")

    def _rejected_body(self, status: int | None, reason: str) -> None:
        """Count and log (one line, no raw bytes) a request body the parser rejected, as a
        rejected head is by ``_refuse``."""
        self.hop.count("bad_request")
        log.warning("tap.bad-request", hop=self.hop.name, status=status,
                    error="bad-request-body", reason=reason)

    def _request_body(self, ex: Exchange, data: bytes) -> None:
        """Body bytes of the request in flight: upstream up to its end, the rest kept for
        the next."""
        try:
            taken = ex.request.feed(data)
        except (ParserError, ValueError) as exc:
            # Mid-body: the head is upstream already; the honest signal is a cut stream.
            self._rejected_body(None, parser_reason(exc))
            self._cut(ex, "bad-request-body", parser_reason(exc))
            return
        self._to_upstream(ex, data if taken == len(data) else data[:taken])
        if ex.request.complete:
            self._request_ended(ex)
            if taken < len(data):
                self._keep(data[taken:])

    def _request_ended(self, ex: Exchange, body_ended: bool = True) -> None:
        """The request's last byte went upstream (``body_ended``: its body capture ends)."""
        ex.to(REQUEST_ENDED)
        if body_ended:
            ex.raw.request.ended = True
        if self.hop.held:  # held while the request came: the next one waits in the kernel
            self._pause(HELD)

    def _tunnel_up(self, ex: Exchange, data: bytes) -> None:
        """Bytes after an Upgrade request's head: forwarded untouched, a copy captured."""
        if ex.raw.tunnel is not None:
            ex.raw.tunnel[0].feed(data, self.clock())
        self._to_upstream(ex, data)

    def _to_upstream(self, ex: Exchange, data: bytes) -> None:
        """Send request bytes upstream (held until the connection is there)."""
        conn = ex.upstream
        if conn is None:
            ex.waiting.append(data)
            ex.waiting_size += len(data)
            if ex.waiting_size > HIGH_WATER:
                self._pause("connecting")
            return
        conn.write(data)
        if ex.replay is not None:
            ex.replay.append(data)
            if sum(len(d) for d in ex.replay) > REPLAY_MAX:
                ex.replay = None
