"""Reading responses: each head forwarded (hop-by-hop fields dropped, interim 1xx ones too),
body bytes to the client first and the copy parsed after; bytes past an answer's end are
nobody's and are not sent.

:class:`ResponseSide` is the part of :class:`~mcp_tap.proxy.splice.client.ClientConnection`
that owns the answer's way back; :func:`set_framing` is its sans-IO step.
"""

from __future__ import annotations

from mcp_tap.proxy.capture import RawBody
from mcp_tap.proxy.splice.base import ConnectionBase
from mcp_tap.proxy.splice.exchange import Exchange, parser_reason
from mcp_tap.proxy.splice.framing import ParserError, ResponseHead, ResponseMessage
from mcp_tap.proxy.splice.head import HEAD_END, may_change, parse_head, rewrite
from mcp_tap.proxy.splice.state import (
    ANSWER_ENDED,
    ANSWERED_EARLY,
    FINAL_HEAD,
    FINISHED,
    SENDING,
    TUNNEL,
    UPGRADED,
    WAITING,
)

_HEAD_END_SIZE = len(HEAD_END)
Verdict = tuple[int, bool, int]


def set_framing(ex: Exchange, framing: str, length: int, response: ResponseMessage) -> str:
    """Note how the final answer is framed (length, chunked, none, or until close), from
    its head's :func:`~mcp_tap.proxy.splice.framing.head_scan`; returns that framing."""
    if ex.skip_body or response.status in (204, 304):
        framing = "none"
    elif framing == "length":
        ex.remaining = length
    elif framing == "chunked":
        response.chunked = True
    else:
        framing = "close"
        ex.close_client = True  # the client reads this answer until the connection ends
    ex.response_framing = ex.raw.response_framing = framing
    return framing


class ResponseSide(ConnectionBase):
    """The answer's way back to the client."""

    def upstream_data(self, data: bytes) -> None:
        """Bytes from the upstream: to the client first, then parsed for the capture."""
        ex = self.exchange
        if ex is None or self.transport is None:
            return
        phase = ex.phase
        if phase is FINISHED:
            return
        ex.replay = None
        if phase is TUNNEL:
            if ex.idle is not None:
                ex.idle.touch()
            self.transport.write(data)
            if ex.raw.tunnel is not None:
                ex.raw.tunnel[1].feed(data, self.clock())
            return
        if phase is SENDING or phase is WAITING:  # (HEAD_AWAITED)
            self._response_heads(ex, data)
        else:
            self._body_out(ex, data, b"", None)  # body bytes of the answer in flight
        # The upstream spoke: its idle clock starts again, after the bytes are handled, so an
        # answer that ended in them costs no clock read (finishing stopped the timer).
        if ex.idle is not None and ex.phase is not FINISHED:
            ex.idle.touch()

    def _response_heads(self, ex: Exchange, data: bytes) -> None:
        """Forward each whole response head (interim 1xx ones, then the final one), then the
        body bytes after it; keep the start of a head not yet whole."""
        raw = ex.raw
        if ex.head_part:
            data = ex.head_part + data
        memo = self.hop.heads
        while True:
            end = data.find(HEAD_END)
            if end < 0:
                if len(data) > 4 * self.hop.max_head_bytes:
                    self._abort_upstream(ex)
                    self._answer(ex, 502, "upstream-bad-response",
                                 "the upstream's response head is too large")
                    return
                ex.head_part = data
                return
            cut = end + _HEAD_END_SIZE
            raw_head = data[:cut] if len(data) > cut else data
            rest = data[cut:]
            if raw.first_byte_at is None:
                raw.first_byte_at = self.clock()
            response = ex.response
            if response is None:
                response = ex.response = self._response_message(ex)
            # A final head the parser accepted before, with its whole body here: not parsed
            # again (see framing.HeadMemo).
            scanned = memo.known_response(raw_head)
            known = memo.accepted_response(raw_head) if scanned is not None else None
            if known is not None and len(rest) == known[2] and not response.skip_body:
                response.accepted(known)
            else:
                known = None
                try:
                    response.feed_head(raw_head)
                except (ParserError, ValueError) as exc:
                    self._bad_response(ex, parser_reason(exc))
                    return
            if response.head_done:
                ex.head_part = b""
                self._final_head(ex, response, data, raw_head, rest,
                                 scanned or memo.response_head(raw_head), scanned, known)
                return
            self._interim(ex, response, raw_head)  # (100 Continue, 103, ...)
            data = rest

    def _bad_response(self, ex: Exchange, reason: str) -> None:
        """The upstream sent bytes that are not HTTP: a 502 before an answer, a cut after."""
        self._abort_upstream(ex)
        if ex.raw.sent_at is None and not ex.raw.interim:
            self._answer(ex, 502, "upstream-bad-response", reason)
        else:
            self._cut(ex, "upstream-bad-response", reason)

    def _interim(self, ex: Exchange, response: ResponseMessage, raw_head: bytes) -> None:
        """Forward an interim 1xx head (hop-by-hop fields dropped, each change recorded)."""
        assert self.transport is not None
        raw = ex.raw
        out = raw_head
        if may_change(raw_head.lower()):
            out, changes = rewrite(parse_head(raw_head), raw_head)
            interim = str(response.status)
            for change in changes:
                change["interim"] = interim
            raw.egress_changed(changes)
        self.transport.write(out)
        raw.interim_sent(response.status)

    def _final_head(
        self, ex: Exchange, response: ResponseMessage, data: bytes, raw_head: bytes,
        rest: bytes, head: ResponseHead, scanned: ResponseHead | None, known: Verdict | None,
    ) -> None:
        """Forward the final head (``data``: it and the bytes after it, ``rest``) and what of
        the body came with it (``head``: its framing scan; ``known``: the parser's kept
        verdict, when it was not parsed again)."""
        assert self.transport is not None
        raw = ex.raw
        upgrade = response.upgraded and ex.request.upgrade
        framing, length, hop_hint = head
        if known is None and scanned is not None and framing == "length":
            response.remember(raw_head, length)  # (seen before: it may well come again)
        out = raw_head
        if hop_hint:
            out, changes = rewrite(parse_head(raw_head), raw_head, upgrade=upgrade)
            if changes:
                raw.egress_changed(changes)
                raw.egress_pairs = out
        raw.status = raw.egress_status = response.status
        raw.response_pairs = raw_head
        if response.upgraded:
            self._switched(ex, data if out is raw_head else out + rest if rest else out,
                           rest, upgrade)
            return
        ex.to(FINAL_HEAD)
        framing = set_framing(ex, framing, length, response)
        if not rest or response.complete:
            self.transport.write(out)
            raw.sent_at = self.clock()
            if rest:  # a bodiless answer: whatever follows is no one's
                self._stray(ex, len(rest))
            if response.complete:
                self._response_complete(ex)
            return
        if framing == "length" and len(rest) <= length:  # (usually: the whole answer)
            # Head and body as received, in one object: one write to the client, no join.
            self.transport.write(data if out is raw_head else out + rest)
            raw.sent_at = at = self.clock()
            ex.remaining = length - len(rest)
            if known is not None:  # the whole body of an accepted head (see above)
                response.accepted_body(rest, at)
                self._response_complete(ex)
                return
            self._body_copy(ex, response, rest, at)
            return
        self._body_out(ex, rest, out, data if out is raw_head else None)

    def _switched(self, ex: Exchange, out: bytes, rest: bytes, upgrade: bool) -> None:
        """A 101 (``out``: its head and the bytes after it): the connection is a tunnel when
        the request asked for an Upgrade; cut when it did not."""
        assert self.transport is not None
        raw = ex.raw
        self.transport.write(out)
        if rest and raw.tunnel is not None:
            raw.tunnel[1].feed(rest, self.clock())
        raw.sent_at = self.clock()
        raw.upgraded = upgrade
        raw.response_framing = "upgrade"
        if not upgrade:  # a 101 nobody asked for: nothing to tunnel
            self._cut(ex, "upstream-bad-response", "101 to a request without Upgrade")
            return
        ex.to(UPGRADED)

    def _body_copy(self, ex: Exchange, response: ResponseMessage, data: bytes, at: float) -> None:
        """Parse a copy of body bytes already sent, none past the answer's end (``at``: when
        they came)."""
        try:
            response.feed_body(data, at)
        except (ParserError, ValueError) as exc:
            self._abort_upstream(ex)
            self._cut(ex, "upstream-bad-response", parser_reason(exc))
            return
        if response.complete:
            self._response_complete(ex)

    def _response_message(self, ex: Exchange) -> ResponseMessage:
        """The parser of the exchange's answer (the connection's own, when it has one)."""
        body = RawBody(self.hop.max_body_bytes)
        ex.raw.response = body
        conn = ex.upstream
        response = conn.response if conn is not None else None
        if response is None:
            response = ResponseMessage(body, ex.skip_body, self.clock, self.hop.heads)
            if conn is not None and not ex.skip_body:
                conn.response = response  # reused for the next answer on this connection
        else:
            response.reset(body, ex.skip_body)
        if ex.skip_body and conn is not None:
            conn.response = None  # its parser waits for the body the HEAD answer announced
        return response

    def _body_out(self, ex: Exchange, data: bytes, head: bytes, whole: bytes | None) -> None:
        """Body bytes (after ``head``, when it goes in the same send; ``whole``: the bytes
        received, head and body as they came, when nothing in the head changed): to the
        client first, then the copy is parsed; bytes past the answer's end are no one's and
        not sent."""
        assert self.transport is not None and ex.response is not None
        response = ex.response
        remaining = ex.remaining
        if remaining >= 0:  # length-framed: the tap knows where it ends
            stray = len(data) - remaining
            if stray > 0:
                data = data[:remaining]
                whole = None
            ex.remaining = remaining - len(data)
            self.transport.write(whole if whole is not None else head + data if head else data)
            at = self.clock()
            if head:
                ex.raw.sent_at = at
            if stray > 0:
                self._stray(ex, stray)
            self._body_copy(ex, response, data, at)
            return
        if response.chunked and (response.careful or data[:1] == b"0"
                                 or data.find(b"\n0") >= 0):
            self._chunked_end(ex, response, data, head, whole)
            return
        # To the client first ...
        self.transport.write(whole if whole is not None else head + data if head else data)
        at = self.clock()
        if head:
            ex.raw.sent_at = at
        self._body_copy(ex, response, data, at)  # ... then the copy is parsed

    def _chunked_end(
        self, ex: Exchange, response: ResponseMessage, data: bytes, head: bytes,
        whole: bytes | None,
    ) -> None:
        """:meth:`_body_out` of chunked bytes the end may be in: parsed first, to send only
        what is the answer's."""
        assert self.transport is not None
        try:
            taken = response.feed(data)
        except (ParserError, ValueError) as exc:
            if head:
                self.transport.write(head)
                ex.raw.sent_at = self.clock()
            self._abort_upstream(ex)
            self._cut(ex, "upstream-bad-response", parser_reason(exc))
            return
        if taken < len(data):
            body, whole = data[:taken], None
        else:
            body = data
        self.transport.write(whole if whole is not None else head + body if head else body)
        if head:
            ex.raw.sent_at = self.clock()
        if taken < len(data):
            self._stray(ex, len(data) - taken)
        if response.complete:
            self._response_complete(ex)

    def _stray(self, ex: Exchange, size: int) -> None:
        """Bytes after the end of a complete answer: not forwarded, the upstream connection
        is closed (it no longer frames answers), and the exchange says so."""
        ex.stray = True
        self.hop.count("stray_upstream_bytes")
        ex.raw.egress_changed([{
            "change": "dropped", "bytes": str(size),
            "why": "bytes after the end of the answer belong to no response; "
                   "the upstream connection was closed",
        }])

    def _response_complete(self, ex: Exchange) -> None:
        """The answer ended: the exchange is over (the connection closes after it when the
        request had not ended: its rest cannot be told from the next request)."""
        raw = ex.raw
        if raw.response is not None:
            raw.response.ended = True
        raw.end_at = raw.egress_end_at = self.clock()
        if ex.to(ANSWER_ENDED) is ANSWERED_EARLY or ex.request.upgrade:
            # (An early 4xx, a declined Expect; or a declined Upgrade, whose bytes after the
            # head were not HTTP.)
            ex.close_client = True
        self._finish(ex)
