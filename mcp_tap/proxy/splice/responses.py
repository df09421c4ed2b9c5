"""Reading responses: each head forwarded (hop-by-hop fields dropped, interim 1xx ones too),
body bytes to the client first and the copy parsed after; bytes past an answer's end are
nobody's and are not sent.

Part of :class:`~mcp_tap.proxy.splice.client.ClientConnection`: each function here is bound
there as a method of the same name (``client`` is the connection).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from mcp_tap.proxy.capture import RawBody
from mcp_tap.proxy.splice.exchange import Exchange, parser_reason
from mcp_tap.proxy.splice.framing import (
    ParserError,
    ResponseMessage,
    accepted_response,
    known_response,
    response_head,
)
from mcp_tap.proxy.splice.head import HEAD_END, may_change, parse_head, rewrite

if TYPE_CHECKING:
    from mcp_tap.proxy.splice.client import ClientConnection

log = structlog.get_logger("mcp_tap.proxy")



def upstream_data(client: ClientConnection, data: bytes) -> None:
    """Bytes from the upstream: to the client first, then parsed for the capture."""
    ex = client.exchange
    if ex is None or ex.finished or client.transport is None:
        return
    ex.replay = None
    if ex.tunnel:
        if ex.idle is not None:
            ex.idle.touch()
        client.transport.write(data)
        if ex.raw.tunnel is not None:
            ex.raw.tunnel[1].feed(data, client.clock())
        return
    if ex.response_head is not None:
        client._response_heads(ex, data)
    else:
        client._body_out(ex, data, b"", None)  # body bytes of the answer in flight
    # The upstream spoke: its idle clock starts again, after the bytes are handled, so an
    # answer that ended in them costs no clock read (finishing stopped the timer).
    if ex.idle is not None and not ex.finished:
        ex.idle.touch()


def response_heads(client: ClientConnection, ex: Exchange, data: bytes) -> None:
    """Forward each whole response head (hop-by-hop fields dropped, interim 1xx ones
    too), then the body bytes after it."""
    assert client.transport is not None and ex.response_head is not None
    raw = ex.raw
    if ex.response_head:
        data = ex.response_head + data
    while True:
        end = data.find(HEAD_END)
        if end < 0:
            if len(data) > 4 * client.hop.max_head_bytes:
                client._abort_upstream(ex)
                client._answer(ex, 502, "upstream-bad-response",
                             "the upstream's response head is too large")
                return
            ex.response_head = data
            return
        cut = end + 4  # (+ len(HEAD_END))
        raw_head = data[:cut] if len(data) > cut else data
        rest = data[cut:]
        if raw.first_byte_at is None:
            raw.first_byte_at = client.clock()
        response = ex.response
        if response is None:
            response = ex.response = client._response_message(ex)
        # A final head the parser accepted before, with its whole body here: not parsed
        # again (see framing.ACCEPTED_RESPONSES).
        scanned = known_response(raw_head)
        known = accepted_response(raw_head) if scanned is not None else None
        if known is not None and len(rest) == known[2] and not response.skip_body:
            response.accepted(known)
        else:
            known = None
            try:
                response.feed_head(raw_head)
            except (ParserError, ValueError) as exc:
                client._abort_upstream(ex)
                if raw.sent_at is None and not raw.interim:
                    client._answer(ex, 502, "upstream-bad-response", parser_reason(exc))
                else:
                    client._cut(ex, "upstream-bad-response", parser_reason(exc))
                return
        if not response.head_done:  # an interim 1xx answer (100 Continue, 103, ...)
            out = raw_head
            if may_change(raw_head.lower()):
                out, changes = rewrite(parse_head(raw_head), raw_head)
                interim = str(response.status)
                for change in changes:
                    change["interim"] = interim
                raw.egress_changed(changes)
            client.transport.write(out)
            raw.interim_sent(response.status)
            data = rest
            continue
        ex.response_head = None
        upgrade = response.upgraded and ex.request.upgrade
        framing, length, hop_hint = scanned or response_head(raw_head)
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
            client.transport.write(data if out is raw_head else out + rest if rest else out)
            if rest and raw.tunnel is not None:
                raw.tunnel[1].feed(rest, client.clock())
            raw.sent_at = client.clock()
            raw.upgraded = upgrade
            raw.response_framing = "upgrade"
            if not upgrade:  # a 101 nobody asked for: nothing to tunnel
                client._cut(ex, "upstream-bad-response", "101 to a request without Upgrade")
                return
            ex.tunnel = True
            return
        framing = set_framing(client, ex, framing, length, response)
        if not rest:
            client.transport.write(out)
            raw.sent_at = client.clock()
            if response.complete:
                client._response_complete(ex)
            return
        if response.complete:  # a bodiless answer: whatever follows is no one's
            client.transport.write(out)
            raw.sent_at = client.clock()
            client._stray(ex, len(rest))
            client._response_complete(ex)
            return
        if framing == "length" and len(rest) <= length:  # (usually: the whole answer)
            # Head and body as received, in one object: one write to the client, no join.
            client.transport.write(data if out is raw_head else out + rest)
            raw.sent_at = at = client.clock()
            ex.remaining = length - len(rest)
            if known is not None:  # the whole body of an accepted head (see above)
                response.accepted_body(rest, at)
                client._response_complete(ex)
                return
            _body_copy(client, ex, response, rest, at)
            return
        client._body_out(ex, rest, out, data if out is raw_head else None)
        return


def _body_copy(
    client: ClientConnection, ex: Exchange, response: ResponseMessage, data: bytes, at: float
) -> None:
    """Parse a copy of body bytes already sent, none past the answer's end (``at``: when
    they came)."""
    try:
        response.feed_body(data, at)
    except (ParserError, ValueError) as exc:
        client._abort_upstream(ex)
        client._cut(ex, "upstream-bad-response", parser_reason(exc))
        return
    if response.complete:
        client._response_complete(ex)


def response_message(client: ClientConnection, ex: Exchange) -> ResponseMessage:
    """The parser of the exchange's answer (the connection's own, when it has one)."""
    body = RawBody(client.hop.max_body_bytes)
    ex.raw.response = body
    conn = ex.upstream
    response = conn.response if conn is not None else None
    if response is None:
        response = ResponseMessage(body, ex.skip_body, client.clock)
        if conn is not None and not ex.skip_body:
            conn.response = response  # reused for the next answer on this connection
    else:
        response.reset(body, ex.skip_body)
    if ex.skip_body and conn is not None:
        conn.response = None  # its parser waits for the body the HEAD answer announced
    return response


def set_framing(
    client: ClientConnection, ex: Exchange, framing: str, length: int, response: ResponseMessage
) -> str:
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


def body_out(
    client: ClientConnection, ex: Exchange, data: bytes, head: bytes, whole: bytes | None
) -> None:
    """Body bytes (after ``head``, when it goes in the same send; ``whole``: the bytes
    received, head and body as they came, when nothing in the head changed): to the client
    first, then the copy is parsed; bytes past the answer's end are no one's and not sent."""
    assert client.transport is not None and ex.response is not None
    response = ex.response
    remaining = ex.remaining
    if remaining >= 0:  # length-framed: the tap knows where it ends
        stray = len(data) - remaining
        if stray > 0:
            data = data[:remaining]
            whole = None
        ex.remaining = remaining - len(data)
        client.transport.write(whole if whole is not None else head + data if head else data)
        at = client.clock()
        if head:
            ex.raw.sent_at = at
        if stray > 0:
            client._stray(ex, stray)
        _body_copy(client, ex, response, data, at)
        return
    if response.chunked and (response.careful or data[:1] == b"0" or data.find(b"\n0") >= 0):
        # The end may be in these bytes: parse first, to send only what is the answer's.
        try:
            taken = response.feed(data)
        except (ParserError, ValueError) as exc:
            if head:
                client.transport.write(head)
                ex.raw.sent_at = client.clock()
            client._abort_upstream(ex)
            client._cut(ex, "upstream-bad-response", parser_reason(exc))
            return
        if taken < len(data):
            body, whole = data[:taken], None
        else:
            body = data
        client.transport.write(whole if whole is not None else head + body if head else body)
        if head:
            ex.raw.sent_at = client.clock()
        if taken < len(data):
            client._stray(ex, len(data) - taken)
        if response.complete:
            client._response_complete(ex)
        return
    # To the client first ...
    client.transport.write(whole if whole is not None else head + data if head else data)
    at = client.clock()
    if head:
        ex.raw.sent_at = at
    _body_copy(client, ex, response, data, at)  # ... then the copy is parsed


def stray(client: ClientConnection, ex: Exchange, size: int) -> None:
    """Bytes after the end of a complete answer: not forwarded, the upstream connection
    is closed (it no longer frames answers), and the exchange says so."""
    ex.stray = True
    client.hop.count("stray_upstream_bytes")
    ex.raw.egress_changed([{
        "change": "dropped", "bytes": str(size),
        "why": "bytes after the end of the answer belong to no response; "
               "the upstream connection was closed",
    }])


def response_complete(client: ClientConnection, ex: Exchange) -> None:
    """The answer ended: the exchange is over unless its request is not."""
    raw = ex.raw
    if raw.response is not None:
        raw.response.ended = True
    raw.end_at = raw.egress_end_at = client.clock()
    ex.response_done = True
    if ex.request.upgrade:  # declined: the bytes sent after its head were not HTTP
        ex.close_client = True
    if not ex.request_done:
        # Answered before the request ended (an early 4xx, a declined Expect): the rest of
        # the request cannot be told from the next one, so the connection ends here.
        ex.close_client = True
    client._finish(ex)
