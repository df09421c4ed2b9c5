"""Message boundaries from a C parser (httptools, llhttp) reading a copy of the bytes.

The forwarder never forwards what the parser produces; it forwards the bytes it received and
asks the parser only where a message ends, what its framing is and what its body payload is
(for the capture). A connection's requests share one parser (a message is fed exactly its
own bytes, so the next one starts clean); each exchange's answer gets a new one.

A request must be cut exactly where it ends (the next pipelined request follows in the same
bytes), so a request's bytes are fed in pieces that cannot run past its end: the head (found
by :data:`~mcp_tap.proxy.splice.head.HEAD_END`), then at most the ``Content-Length`` still
due, or, for a chunked body, up to each LF (a chunked message can only end at one). A response
is only ever followed by the answer to the next request the tap sends, so it is fed whole.

The parser reports body pieces and message ends through C callables, not Python methods (a
call back into Python per piece costs more than the parsing): ``on_body`` is ``list.append``
on the message's pieces, taken into its :class:`RawBody` after each ``feed_data``;
``on_message_complete`` is ``list.clear`` on a one-item list, empty once the message ended.
Only ``on_headers_complete`` is Python: the keep-alive verdict must be read then (llhttp
clears it when a message without a body completes in the same call).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple, TypeVar

import httptools

from mcp_tap.proxy.capture import RawBody

ParserError = httptools.HttpParserError
Upgrade = httptools.HttpParserUpgrade

_TE = b"\r\ntransfer-encoding:"
# The parser has accepted the head: a Content-Length is digits after optional whitespace,
# and there is at most one. (One regex scan: a find, a slice and a strip cost twice as much.)
_CL = re.compile(rb"\r\ncontent-length:[ \t]*(\d+)").search
# One scan of a head (lowercased) for its framing fields and any line that may name a
# hop-by-hop field (see head.may_change: over-matching only sends it down the rewrite path);
# requests also flag an Mcp-Session-Id or a traceparent. One findall costs less than the three
# scans it replaces (framing_of's two and may_change's).
_HOP = rb"connection|keep-alive|proxy-|te|upgrade"
RESPONSE_SCAN = re.compile(
    rb"\r\n(?:content-length:[ \t]*(\d+)|(transfer-encoding:)|" + _HOP + rb")").findall
REQUEST_SCAN = re.compile(
    rb"\r\n(?:content-length:[ \t]*(\d+)|(transfer-encoding:)|mcp-session-id:|traceparent:|"
    + _HOP + rb")").findall
Scan = Callable[[bytes], list[tuple[bytes, bytes]]]


def framing_of(lower: bytes) -> tuple[str, int]:
    """``("chunked"|"length"|"none", content length)`` of a head the parser accepted
    (``lower``: the head lowercased); ``"length"`` with 0 for ``Content-Length: 0``."""
    if lower.find(_TE) >= 0:
        return "chunked", 0
    length = _CL(lower)
    return ("length", int(length[1])) if length is not None else ("none", 0)


def head_scan(lower: bytes, scan: Scan) -> tuple[str, int, bool]:
    """:func:`framing_of` of a head, and whether ``scan`` (:data:`RESPONSE_SCAN` or
    :data:`REQUEST_SCAN`) found any other field it looks for, in one pass."""
    framing, length, other = "none", 0, False
    for digits, te in scan(lower):
        if te:
            framing, length = "chunked", 0  # whatever Content-Length says
        elif digits:
            if framing == "none":  # the first one (the parser allows no other)
                framing, length = "length", int(digits)
        else:
            other = True
    return framing, length, other


KEPT_HEADS = 512
"""How many heads' analyses each memo keeps (it starts over when full)."""
KEPT_HEAD_BYTES = 2048
"""A longer head is analysed each time, not kept (the memos stay under a MiB)."""

_V = TypeVar("_V")

class RequestHead(NamedTuple):
    """What :meth:`HeadMemo.request_head` says of a request head (kept per head bytes)."""

    framing: str  # head_scan: "length", "chunked" or "none"
    length: int  # the Content-Length when framed by length, else 0
    notable: bool  # head_scan found another field it looks for
    method: str | None  # None when the request line has no version (HTTP/0.9 to llhttp)
    target: str


ResponseHead = tuple[str, int, bool]


class HeadMemo:
    """One hop's memory of the heads it has seen, by their bytes (each hop owns one: what one
    hop's traffic taught is not another's, and nothing is kept per process).

    What :meth:`request_head` / :meth:`response_head` said of a head: a head seen before (a
    client's repeated request, an origin's repeated answer head) costs one dict look-up
    (``memo.known_request(raw) or memo.request_head(raw)``), not a lowercased copy and a
    regex scan. Exact, whatever the traffic: the analysis is a function of the bytes alone,
    and the look-up compares them whole.

    And the parser's verdict on a head: llhttp starts every message from the same state (a
    connection's parser is fed whole messages, a message's bytes only), so whether it accepts
    a head, and what it says of it, is a function of the head's bytes. A head it accepted
    before is not parsed again when its whole message is in view: a head without a body, or
    with a Content-Length body all there (whose payload is its bytes, so the parser would only
    count them). The parser is left at the message's end, as parsing would have left it. A
    verdict is kept from a head's second sighting on (when the scan's memo knew it): heads
    that never repeat cost no more than before. Each memo starts over when it holds
    :data:`KEPT_HEADS`.
    """

    __slots__ = (
        "accepted_request",
        "accepted_requests",
        "accepted_response",
        "accepted_responses",
        "known_request",
        "known_response",
        "requests",
        "responses",
    )

    def __init__(self) -> None:
        self.requests: dict[bytes, RequestHead] = {}
        """Request heads' :meth:`request_head`, by their bytes."""
        self.responses: dict[bytes, ResponseHead] = {}
        """Final response heads' :meth:`response_head`, by their bytes."""
        self.accepted_requests: dict[bytes, bool] = {}
        """Request heads the parser accepted (not an upgrade), by their bytes: keep-alive."""
        self.accepted_responses: dict[bytes, tuple[int, bool, int]] = {}
        """Final length-framed response heads the parser accepted (with a body: not 204 or
        304, not an answer to a HEAD), by their bytes: status, keep-alive, Content-Length."""
        # The look-ups, bound once (read per message; clearing a dict keeps them valid).
        self.known_request = self.requests.get
        self.known_response = self.responses.get
        self.accepted_request = self.accepted_requests.get
        self.accepted_response = self.accepted_responses.get

    def request_head(self, raw: bytes) -> RequestHead:
        """A request head's :func:`head_scan` (:data:`REQUEST_SCAN`), then its method and
        target (latin-1; None and "" when the request line has no version, which llhttp takes
        as HTTP/0.9); remembered (a head of at most :data:`KEPT_HEAD_BYTES`)."""
        framing, length, notable = head_scan(raw.lower(), REQUEST_SCAN)
        parts = raw[: raw.find(b"\r\n")].split(b" ", 2)
        found = (
            RequestHead(framing, length, notable, parts[0].decode("latin-1"),
                        parts[1].decode("latin-1"))
            if len(parts) == 3 else RequestHead(framing, length, notable, None, "")
        )
        if len(raw) <= KEPT_HEAD_BYTES:
            _keep(self.requests, raw, found)
        return found

    def response_head(self, raw: bytes) -> ResponseHead:
        """A final response head's :func:`head_scan` (:data:`RESPONSE_SCAN`); remembered (a
        head of at most :data:`KEPT_HEAD_BYTES`)."""
        found = head_scan(raw.lower(), RESPONSE_SCAN)
        if len(raw) <= KEPT_HEAD_BYTES:
            _keep(self.responses, raw, found)
        return found

    def accept_request(self, raw: bytes, keep_alive: bool) -> None:
        """Keep the parser's verdict on a request head it accepted."""
        _keep(self.accepted_requests, raw, keep_alive)

    def accept_response(self, raw: bytes, verdict: tuple[int, bool, int]) -> None:
        """Keep the parser's verdict on a final length-framed response head it accepted."""
        _keep(self.accepted_responses, raw, verdict)


def _keep(memo: dict[bytes, _V], raw: bytes, value: _V) -> None:
    """Remember ``value`` for ``raw``; a full memo starts over (attacker-chosen heads cannot
    grow it)."""
    if len(memo) >= KEPT_HEADS:
        memo.clear()
    memo[raw] = value


class RequestMessage:
    """One request's framing, from its head to the end of its body (kept in ``body``)."""

    __slots__ = (
        "_open",
        "_parser",
        "body",
        "complete",
        "framing",
        "headed",
        "keep_alive",
        "memo",
        "method",
        "notable",
        "on_body",
        "on_message_complete",
        "pieces",
        "remaining",
        "target",
        "upgrade",
    )

    def __init__(self, body: RawBody, memo: HeadMemo) -> None:
        self.memo = memo  # the hop's (see HeadMemo)
        self.pieces: list[bytes] = []  # body payload pieces the parser gave (chunked framing off)
        self._open: list[None] = []  # [None] while the message has not ended
        self.on_body = self.pieces.append
        self.on_message_complete = self._open.clear
        self._parser = httptools.HttpRequestParser(self)
        self.reset(body)

    def reset(self, body: RawBody) -> None:
        """Ready for the connection's next request (whose body goes to ``body``)."""
        self.body = body
        self.complete = False
        self.headed = False
        self.upgrade = False
        self.keep_alive = True
        self.framing = "none"
        self.remaining = 0
        self.notable = False  # the head has a session, a traceparent or a hop-by-hop hint
        self.method: str | None = None  # (set by start: None for a line without a version)
        self.target = ""

    def on_headers_complete(self) -> None:
        """The parser's callback: the head is whole, read what the parser knows about it."""
        self.headed = True
        self.keep_alive = self._parser.should_keep_alive()

    # -- the forwarder's side --
    def start(
        self, raw: bytes, body: RawBody | None = None, data: bytes | None = None
    ) -> int:
        """Feed the head (of the connection's next request, whose body goes to ``body``,
        when given: :meth:`reset` in the same call); raises :data:`ParserError` when the
        parser rejects it.

        ``data``: the head and the bytes that came after it. When those are all part of a
        length-framed body they are fed in the same call (one parser call for a whole
        request, the usual case); returns how many of them were (0: feed them next).
        """
        if body is not None:
            self.body = body
            self.complete = self.headed = self.upgrade = self.notable = False
            self.keep_alive = True
            self.framing = "none"
            self.remaining = 0
        # The scan comes first, to know how much to feed; its findings count only once the
        # parser has accepted the head (a rejected one raises before they are used).
        memo = self.memo
        seen = memo.known_request(raw)
        framing, remaining, notable, self.method, self.target = seen or memo.request_head(raw)
        fed = 0
        whole = raw
        if data is not None and framing == "length":
            after = len(data) - len(raw)  # (bytes after the head)
            if after <= remaining:
                fed = after
                whole = data
        # (The whole message is in view: no body, or all of a Content-Length one.)
        keep_alive = memo.accepted_request(raw) \
            if fed == remaining and framing != "chunked" and seen is not None else None
        if keep_alive is not None:  # accepted before: its verdict stands (see HeadMemo)
            self.headed = True
            self.keep_alive = keep_alive
            if fed:
                self.body.feed(whole[len(raw):])  # the payload is the bytes themselves
        else:
            self._open.append(None)
            try:
                self._parser.feed_data(whole)
            except Upgrade:
                self.upgrade = True
                self.complete = True  # what follows is the tunnel's, not HTTP
                self.pieces.clear()
                return 0
            if not self.headed:  # llhttp pauses on PRI (an HTTP/2 preface), silently: no head
                raise ParserError("an HTTP/2 connection preface")
            if seen is not None:  # (a head seen once is not: see HeadMemo)
                memo.accept_request(raw, self.keep_alive)
            if fed:
                pieces = self.pieces
                self.body.take(pieces, 0.0)  # the payload is the bytes themselves
                pieces.clear()
        self.notable = notable
        if framing == "length" and not remaining:
            framing = "none"  # Content-Length: 0 is no body, as none at all
        self.framing = framing
        remaining -= fed
        self.remaining = remaining
        if framing == "none" or (fed and not remaining):
            self.complete = True
        return fed

    def feed(self, data: bytes) -> int:
        """Feed body bytes; returns how many of them belong to this message."""
        if self.complete:
            return 0
        pieces = self.pieces
        if self.framing == "length":
            take = len(data)
            if take > self.remaining:
                take = self.remaining
                data = data[:take]
            self._parser.feed_data(data)
            self.remaining -= take
            if not self.remaining:
                self.complete = True
            pieces.clear()
            self.body.feed(data)  # the payload is the bytes themselves
            return take
        view = memoryview(data)
        start, size = 0, len(data)
        ended = self._open
        while start < size:
            newline = data.find(b"\n", start)
            end = size if newline < 0 else newline + 1
            self._parser.feed_data(view[start:end])
            start = end
            if not ended:
                self.complete = True
                break
        if pieces:
            self.body.take(pieces, 0.0)
            pieces.clear()
        return start


class ResponseMessage:
    """One exchange's answer: interim 1xx answers, then the final one, fed as it comes.

    An upstream connection keeps its one for the answers that follow on it (:meth:`reset`),
    except after an answer to a HEAD (the parser would wait for the body it announced) or a
    message that did not end cleanly (the connection is not reused then).
    """

    __slots__ = (
        "_open",
        "_parser",
        "body",
        "careful",
        "chunked",
        "clock",
        "complete",
        "head_done",
        "keep_alive",
        "memo",
        "on_body",
        "on_message_complete",
        "pieces",
        "skip_body",
        "status",
        "tunnel_offset",
        "upgraded",
    )

    def __init__(
        self, body: RawBody, skip_body: bool, clock: Callable[[], float], memo: HeadMemo
    ) -> None:
        self.memo = memo  # the hop's (see HeadMemo)
        self.pieces: list[bytes] = []  # body payload pieces of the last feed
        self._open: list[None] = []  # [None] while the message has not ended
        self.on_body = self.pieces.append
        self.on_message_complete = self._open.clear
        self._parser = httptools.HttpResponseParser(self)
        self.clock = clock
        self.reset(body, skip_body)

    def reset(self, body: RawBody, skip_body: bool) -> None:
        """Ready for the next answer on the same connection (its body kept in ``body``)."""
        self.body = body
        self.skip_body = skip_body  # the answer to a HEAD: no body whatever its headers say
        self.complete = False
        self.head_done = False
        self.keep_alive = True
        self.status = 0
        self.upgraded = False
        self.tunnel_offset = 0
        self.chunked = False  # set by the forwarder once the final head is read
        self.careful = False  # fed line by line: the end of a chunked body may be in view
        if not self._open:
            self._open.append(None)

    def on_headers_complete(self) -> None:
        """The parser's callback: a head (interim or final) is whole."""
        self.status = status = self._parser.get_status_code()
        self.keep_alive = self._parser.should_keep_alive()
        if status >= 200 or status == 101:
            self.head_done = True
            if self.skip_body:
                self.complete = True

    def _upgraded(self, exc: Upgrade) -> None:
        """The parser stopped at a 101's end: the bytes after it are the tunnel's."""
        self.upgraded = True
        self.complete = True
        self.tunnel_offset = int(exc.args[0]) if exc.args else 0

    def feed_head(self, head: bytes) -> None:
        """:meth:`feed_whole` of one whole head (interim or final: nothing of a body yet,
        or an upgrade's tunnel). Raises :data:`ParserError` on bytes that are not HTTP."""
        try:
            self._parser.feed_data(head)
        except Upgrade as exc:
            self._upgraded(exc)
            return
        if not self._open and not self.complete:  # a bodiless answer, or a 1xx one ended
            if self.status >= 200:
                self.complete = True
            else:  # an interim 1xx answer ended: the final one follows
                self._open.append(None)

    def accepted(self, verdict: tuple[int, bool, int]) -> None:
        """:meth:`feed_head` of a final head the parser accepted before, whose whole body
        follows (:class:`HeadMemo`'s ``verdict``): not parsed again."""
        self.status, self.keep_alive, _ = verdict
        self.head_done = True

    def accepted_body(self, data: bytes, at: float) -> None:
        """:meth:`feed_body` of the whole body after an :meth:`accepted` head: kept as it
        is (its payload is its bytes), and the answer is complete."""
        self.body.feed(data, at)
        self._open.clear()
        self.complete = True

    def remember(self, raw: bytes, length: int) -> None:
        """Keep the parser's verdict on the final head ``raw`` it just accepted (see
        :class:`HeadMemo`; ``length``: its Content-Length, when length-framed; a head the
        memo keeps, so at most :data:`KEPT_HEAD_BYTES`)."""
        if length and not self.skip_body and self.status not in (204, 304) \
                and not self.upgraded:
            self.memo.accept_response(raw, (self.status, self.keep_alive, length))

    def feed_body(self, data: bytes, at: float) -> None:
        """Body bytes of the final answer that do not run past its end (length-framed ones
        cut at it, chunked ones with no last-chunk line in view, or a close-delimited body;
        ``at``: when they came): parsed, kept in the capture, and :attr:`complete` once the
        last one is in."""
        self._parser.feed_data(data)
        pieces = self.pieces
        if pieces:
            if not self.skip_body:
                self.body.take(pieces, at)
            pieces.clear()
        if not self._open:
            self.complete = True

    def feed(self, data: bytes) -> int:
        """Feed response bytes; how many belong to this answer (the rest follow its end and
        belong to no answer). Raises :data:`ParserError` on bytes that are not HTTP."""
        if self.complete:
            return 0
        if not self.chunked or not (self.careful or data[:1] == b"0" or data.find(b"\n0") >= 0):
            return self.feed_whole(data)
        # A chunked body can only end on the LF of a line after a last-chunk line ("0" at a
        # line start): the bytes before the first one in view go in at once (the end cannot
        # be there), then up to each LF, so the parser stops exactly at the end.
        size = len(data)
        if not self.careful:
            # The end is at the second LF from that line's start, or a later one: when the
            # second is the last byte (the usual "0\r\n\r\n" that closes a stream), it is
            # all one parser call.
            at = 0 if data[:1] == b"0" else data.find(b"\n0") + 1
            if data.find(b"\n", data.find(b"\n", at) + 1) == size - 1:
                taken = self.feed_whole(data)
                self.careful = True  # (not ended: a trailer section may go on after these)
                return taken
        ended = self._open
        view = memoryview(data)
        start = 0
        if not self.careful and data[:1] != b"0":
            start = data.find(b"\n0") + 1
            self._parser.feed_data(view[:start])
        self.careful = True
        while start < size and ended:
            newline = data.find(b"\n", start)
            end = size if newline < 0 else newline + 1
            self._parser.feed_data(view[start:end])
            start = end
        self._took()
        return start

    def feed_whole(self, data: bytes) -> int:
        """:meth:`feed` of bytes the answer's end cannot be in, or that end with it (not
        length-framed past its end, not chunked with a last-chunk line in view)."""
        if self.complete:
            return 0
        try:
            self._parser.feed_data(data)
        except Upgrade as exc:
            self._upgraded(exc)
            return len(data)
        self._took()
        return len(data)

    def _took(self) -> None:
        """After a feed: the body pieces into the capture, and whether the answer ended."""
        if self.pieces:
            if not self.skip_body:  # an answer to a HEAD has no body, whatever it says
                self.body.take(self.pieces, self.clock())
            self.pieces.clear()
        if not self._open and not self.complete:
            if self.status >= 200:
                self.complete = True
            else:  # an interim 1xx answer ended: the final one follows
                self._open.append(None)
