"""Generated HTTP/1.1 inputs for the forwarding core, and the sans-IO properties they must keep.

Shared by ``tests/proxy/test_fuzz_http.py`` (hypothesis draws a seed) and ``bench/fuzz_http.py``
(the long run): every input is a function of one ``random.Random``, so a seed replays it.

The sans-IO checks drive the same steps the client connection runs on a head
(:mod:`mcp_tap.proxy.splice.requests`, :mod:`~mcp_tap.proxy.splice.responses`): find the
head's end, ``parse_head``, the C parser's
verdict (``RequestMessage.start`` / ``ResponseMessage.feed``), the start-line split, and
``rewrite``; then the body through the message's ``feed``. The parser's ``ParserError`` and
``ValueError`` (an unparseable ``Content-Length``) are the documented rejections; anything
else is a crash.
"""

from __future__ import annotations

import random
from types import SimpleNamespace

from mcp_tap.proxy.capture import RawBody
from mcp_tap.proxy.splice.framing import (
    RESPONSE_SCAN,
    HeadMemo,
    ParserError,
    RequestMessage,
    ResponseMessage,
    framing_of,
    head_scan,
)
from mcp_tap.proxy.splice.head import HEAD_END, HOP_BY_HOP, may_change, parse_head, rewrite
from mcp_tap.proxy.splice.responses import set_framing

MARKER = b"zqmark"
"""Planted in header values and bodies: it must never reach the tap's logs."""

_METHODS = (b"POST", b"GET", b"DELETE", b"PUT", b"OPTIONS", b"HEAD", b"PATCH", b"CONNECT",
            b"TRACE", b"post", b"G\xc3\xa9T", b"", b"M-SEARCH", b"PRI")
_TARGETS = (b"/mcp", b"/", b"/echo", b"/mcp?x=1&y=%zz", b"*", b"http://h/mcp", b"h:80",
            b"/a b", b"/\xff\xfe", b"/%00", b"//x", b"/" + b"a" * 300, b"", b"/mcp#f",
            b"/\x7f", b"/mcp;token=x")
_VERSIONS = (b"HTTP/1.1", b"HTTP/1.0", b"HTTP/2.0", b"HTTP/0.9", b"http/1.1", b"HTTP/1.1 ",
             b"HTTP/9.9", b"HTTP/1", b"")
_NAMES = (b"Host", b"Content-Type", b"Accept", b"Mcp-Session-Id", b"MCP-Protocol-Version",
          b"Mcp-Method", b"Connection", b"Keep-Alive", b"TE", b"Upgrade", b"Proxy-Connection",
          b"Proxy-Authorization", b"Transfer-Encoding", b"Content-Length", b"traceparent",
          b"X-Custom", b"x-CuStOm", b"Expect", b"Authorization", b"Cookie", b"Origin",
          b"HOST", b"content-length", b"TRANSFER-ENCODING", b"connection", b"X-\xff",
          b"Bad Name", b"", b"X:Y", b"X\x00", b"Last-Event-ID")
_VALUES = (b"h", b"application/json", b"application/json, text/event-stream", b"close",
           b"keep-alive", b"Upgrade, X-Custom", b"chunked", b"gzip, chunked", b"chunked, gzip",
           b"identity", b"0", b"5", b"-1", b"+5", b"1_0", b"99999999999999999999999", b"5, 5",
           b" 5 ", b"0x10", b"100-continue", b"websocket", b"\xc3\xa9\xff", b"\x01", b"a\x00b",
           b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", b"", b"  ",
           b"x" * 200, MARKER + b"-value", b"\t" + MARKER, b"2026-07-28", b"tools/call")
_CHUNK_SIZES = (b"0", b"5", b"a", b"FFFFFFFFFFFFFFFFFF", b"-1", b"5;ext=1", b"5 ", b"zz", b"",
                b"0x5", b"5\x00", b"05", b"1" * 40)
_EOL = (b"\r\n", b"\r\n", b"\r\n", b"\r\n", b"\n", b"\r", b"\r\n ", b"\n\r")


def _pick(rng: random.Random, options: tuple[bytes, ...]) -> bytes:
    return options[rng.randrange(len(options))]


def _case(rng: random.Random, name: bytes) -> bytes:
    roll = rng.random()
    if roll < 0.15:
        return name.upper()
    if roll < 0.3:
        return name.lower()
    if roll < 0.4:
        return bytes(c ^ 0x20 if 0x41 <= (c & ~0x20) <= 0x5A and rng.random() < 0.5 else c
                     for c in name)
    return name


def _body(rng: random.Random) -> bytes:
    return rng.choice([
        b"", b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":"' + MARKER + b'"}}',
        MARKER * rng.randint(1, 4), bytes(rng.randrange(256) for _ in range(rng.randint(0, 64))),
        b"\xff\xfe" + MARKER, b"[" * 50,
    ])


def _chunked(rng: random.Random, body: bytes) -> bytes:
    """A chunked body, sometimes with garbage sizes, extensions or trailers."""
    out = b""
    pos = 0
    while pos < len(body) and rng.random() < 0.9:
        size = rng.randint(1, max(1, len(body) - pos))
        piece = body[pos:pos + size]
        pos += size
        head = (b"%x" % len(piece)) if rng.random() < 0.85 else _pick(rng, _CHUNK_SIZES)
        out += head + _pick(rng, _EOL) + piece + b"\r\n"
    out += rng.choice([b"0\r\n\r\n", b"0\r\nX-Trailer: " + MARKER + b"\r\n\r\n", b"0\r\n",
                       b"", b"0\n\n", _pick(rng, _CHUNK_SIZES) + b"\r\n\r\n"])
    return out


def valid_request(rng: random.Random, body: bytes | None = None, path: bytes = b"/mcp",
                  chunked: bool | None = None) -> bytes:
    """A well-formed request with a Content-Length or (sometimes) a chunked body."""
    body = _body(rng) if body is None else body
    lines = [b"POST " + path + b" HTTP/1.1", b"Host: 127.0.0.1",
             b"Content-Type: application/json", b"Accept: application/json, text/event-stream",
             b"X-Fuzz: " + MARKER]
    if chunked if chunked is not None else rng.random() < 0.3:
        lines.append(b"Transfer-Encoding: chunked")
        framed = _chunked(random.Random(0), body)  # fixed seed: always well formed
        if not framed.endswith(b"0\r\n\r\n"):
            framed = b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n" if body else b"0\r\n\r\n"
    else:
        lines.append(b"Content-Length: %d" % len(body))
        framed = body
    return b"\r\n".join(lines) + b"\r\n\r\n" + framed


def _generated_head(rng: random.Random, request: bool) -> tuple[bytes, bytes]:
    """A head from parts (start line, fields in any case, duplicates, odd bytes) and a body."""
    if request:
        start = b" ".join(p for p in (_pick(rng, _METHODS), _pick(rng, _TARGETS),
                                      _pick(rng, _VERSIONS)) if rng.random() < 0.97)
    else:
        start = rng.choice([b"HTTP/1.1", b"HTTP/1.0", b"HTTP/2", b"http/1.1", b"HTTP/1.1 "]) + \
            b" " + rng.choice([b"200", b"100", b"101", b"103", b"204", b"304", b"404", b"500",
                               b"999", b"20", b"abc", b"", b"2000"]) + \
            rng.choice([b" OK", b"", b" ", b" \xff\xfe", b" Continue"])
    fields = []
    for _ in range(rng.randint(0, 12)):
        name = _case(rng, _pick(rng, _NAMES))
        sep = rng.choice([b": ", b":", b" : ", b":\t", b": ", b":  "])
        fields.append(name + sep + _pick(rng, _VALUES))
        if rng.random() < 0.1:  # obs-fold continuation line
            fields.append(rng.choice([b" ", b"\t"]) + _pick(rng, _VALUES))
        if rng.random() < 0.1:  # a duplicate
            fields.append(fields[-1])
    body = _body(rng)
    framing = rng.random()
    if framing < 0.35:
        fields.append(b"Content-Length: %d" % len(body))
    elif framing < 0.55:
        fields.append(b"Transfer-Encoding: chunked")
        body = _chunked(rng, body)
    elif framing < 0.65:  # conflicting framing
        fields += [b"Content-Length: %d" % len(body), b"Transfer-Encoding: chunked"]
        rng.shuffle(fields)
    if rng.random() < 0.3:
        rng.shuffle(fields)
    eol = b"\r\n" if rng.random() < 0.85 else _pick(rng, _EOL)
    head = start + b"\r\n" + b"".join(f + eol for f in fields)
    head += b"\r\n" if rng.random() < 0.9 else _pick(rng, _EOL)
    return head, body


def mutate(rng: random.Random, data: bytes) -> bytes:
    """Flip, cut, repeat, insert odd bytes."""
    for _ in range(rng.randint(1, 4)):
        if not data:
            return bytes(rng.randrange(256) for _ in range(rng.randint(1, 20)))
        at = rng.randrange(len(data))
        op = rng.randrange(7)
        if op == 0:
            data = data[:at] + bytes([rng.randrange(256)]) + data[at + 1:]
        elif op == 1:
            data = data[:at]
        elif op == 2:
            data = data[:at] + rng.choice([b"\r", b"\n", b"\r\n", b"\x00", b" ", b"\t", b":",
                                           b"\xff", b"\r\n\r\n", b"\x80\xc0", b";"]) + data[at:]
        elif op == 3:
            data = data[:at] + data[at + 1:]
        elif op == 4:
            end = min(len(data), at + rng.randint(1, 40))
            data = data[:end] + data[at:end] * rng.randint(1, 5) + data[end:]
        elif op == 5:
            data = data[:at] + data[at:].replace(b"\r\n", b"\n", 1)
        else:
            data = data[:at] + bytes(rng.randrange(256) for _ in range(8)) + data[at:]
    return data


def request_stream(rng: random.Random, max_head: int = 65536) -> bytes:
    """The bytes one client sends on one connection: a mix of what a hostile client would."""
    roll = rng.random()
    if roll < 0.25:
        head, body = _generated_head(rng, request=True)
        data = head + body
    elif roll < 0.5:
        data = mutate(rng, valid_request(rng))
    elif roll < 0.6:
        data = bytes(rng.randrange(256) for _ in range(rng.randint(0, 200)))
    elif roll < 0.65:  # oversized head
        data = (b"GET /mcp HTTP/1.1\r\nX-Big: " + b"a" * rng.randint(max_head - 64, max_head + 64)
                + b"\r\n\r\n")
    elif roll < 0.7:  # many fields
        data = b"GET / HTTP/1.1\r\n" + b"X-A: b\r\n" * rng.randint(50, 3000) + b"\r\n"
    elif roll < 0.78:  # pipelined: valid then garbage, or two generated requests
        first = valid_request(rng)
        head, body = _generated_head(rng, request=True)
        data = first + (head + body if rng.random() < 0.5 else mutate(rng, first))
    elif roll < 0.86:  # a valid head with a broken chunked body
        head = (b"POST /mcp HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
                b"X-Fuzz: " + MARKER + b"\r\n\r\n")
        data = head + mutate(rng, _chunked(rng, _body(rng) or MARKER))
    elif roll < 0.92:  # bare LF and obs-fold spelled out
        data = rng.choice([
            b"POST /mcp HTTP/1.1\nHost: h\nContent-Length: 2\n\n{}",
            b"GET / HTTP/1.1\r\nX: a\r\n b\r\nHost: h\r\n\r\n",
            b"GET / HTTP/1.1\r\n X: leading fold\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: h\nX: y\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: h\r\n\n",
            b"\r\n\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n",
        ])
    else:  # non-UTF-8 everywhere
        data = (b"POST /\xe9\xff HTTP/1.1\r\nHost: \xc3\x28\r\nX-\xfe: \xff" + MARKER +
                b"\r\nContent-Length: 3\r\n\r\n\xff\xfe\xfd")
    return data


def response_stream(rng: random.Random) -> bytes:
    """The bytes an upstream sends back for one exchange."""
    roll = rng.random()
    if roll < 0.4:
        head, body = _generated_head(rng, request=False)
        data = head + body
    elif roll < 0.7:
        body = _body(rng)
        data = mutate(rng, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                           b"Content-Length: %d\r\n\r\n" % len(body) + body)
    elif roll < 0.8:
        data = b"HTTP/1.1 100 Continue\r\n\r\n" + mutate(rng, b"HTTP/1.1 200 OK\r\n"
                                                           b"Content-Length: 2\r\n\r\n{}")
    else:
        data = bytes(rng.randrange(256) for _ in range(rng.randint(0, 120)))
    return data


# -- sans-IO properties -----------------------------------------------------------------------


class Rejected(Exception):
    """The parser refused the input (the documented outcome for bad bytes)."""


def _kept_is_identity(head: object, raw: bytes, forward: bytes, changes: list[dict[str, str]],
                      upgrade: bool) -> None:
    """With no feature configured, a head is forwarded as it came, minus hop-by-hop lines."""
    assert isinstance(head, type(parse_head(b"A\r\n\r\n")))
    if not changes:
        assert forward == raw, "an unchanged head is not byte-identical"
        assert all(n.decode("latin-1") not in HOP_BY_HOP or
                   (upgrade and n in (b"connection", b"upgrade")) for n in head.lower), \
            "a hop-by-hop field passed"
        return
    assert all(c["change"] == "removed" for c in changes), changes
    removed = {c["header"].encode("latin-1").lower() for c in changes}
    kept = [line for line, n in zip(head.lines, head.lower, strict=True)
            if n not in removed]
    assert forward == b"\r\n".join([head.start, *kept]) + HEAD_END, "kept lines changed"
    assert len(head.lines) - len(kept) == len(changes)


def check_request_bytes(data: bytes, max_head: int = 65536) -> str:
    """Run one client byte stream through the request side; return the outcome's name.

    Raises ``AssertionError`` on a broken property; any other exception is a crash.
    """
    buf = bytearray(data)
    outcome = "incomplete"
    requests = RequestMessage(RawBody(0), HeadMemo())
    first = True
    while True:
        while buf[:2] == b"\r\n":
            del buf[:2]
        end = buf.find(HEAD_END)
        if end < 0 or end + len(HEAD_END) > max_head:
            return "too-large" if len(buf) > max_head else outcome
        raw = bytes(buf[: end + len(HEAD_END)])
        rest = bytes(buf[end + len(HEAD_END):])
        head = parse_head(raw)
        if not first:
            requests.reset(RawBody(0))
        first = False
        try:
            requests.start(raw)
        except (ParserError, ValueError):
            return "rejected"
        assert requests.headed or requests.upgrade, "a head the parser did not read passed"
        lower = raw.lower()
        if not requests.upgrade:
            framing, length = framing_of(lower)
            assert requests.remaining == length, "head_scan length differs"
            assert requests.framing == ("none" if framing == "length" and not length
                                        else framing), "head_scan framing differs"
            assert requests.notable == (
                may_change(lower) or lower.find(b"\r\nmcp-session-id:") >= 0
                or lower.find(b"\r\ntraceparent:") >= 0), "head_scan notable differs"
        parts = head.start.split(b" ", 2)
        assert (requests.method, requests.target) == (
            (parts[0].decode("latin-1"), parts[1].decode("latin-1")) if len(parts) == 3
            else (None, "")), "the remembered request line differs"
        if len(parts) != 3:  # the client refuses it as 400 (an HTTP/0.9 line)
            return "rejected"
        method = parts[0]
        forward, changes = rewrite(head, raw, upgrade=requests.upgrade)
        _kept_is_identity(head, raw, forward, changes, requests.upgrade)
        # Every feature at once: never an exception, the start line keeps method and version.
        featured, _ = rewrite(head, raw, upgrade=requests.upgrade, host=b"up.example:8080",
                              target_prefix=b"/base",
                              add=((b"traceparent", b"00-" + b"1" * 32 + b"-" + b"2" * 16 +
                                    b"-01", "hop"),))
        assert featured.startswith(method + b" "), "the method changed"
        assert featured.endswith(HEAD_END)
        if method == b"CONNECT" or requests.upgrade:
            return "connect" if method == b"CONNECT" else "upgrade"
        outcome = "forwarded"
        try:
            taken = requests.feed(rest) if not requests.complete else 0
        except (ParserError, ValueError):
            return "bad-body"
        assert 0 <= taken <= len(rest)
        if not requests.complete:
            return outcome
        buf = bytearray(rest[taken:])


def check_response_bytes(data: bytes, head_request: bool = False) -> str:
    """Run one upstream byte stream through the response side; return the outcome's name."""
    response = ResponseMessage(RawBody(65536), head_request, lambda: 0.0, HeadMemo())
    buf = data
    while True:
        end = buf.find(HEAD_END)
        if end < 0:
            return "incomplete"
        raw, rest = buf[: end + len(HEAD_END)], buf[end + len(HEAD_END):]
        try:
            response.feed(raw)
        except (ParserError, ValueError):
            return "rejected"
        if not response.head_done:
            buf = rest
            continue
        head = parse_head(raw)
        upgrade = response.upgraded
        forward, changes = rewrite(head, raw, upgrade=upgrade)
        _kept_is_identity(head, raw, forward, changes, upgrade)
        if response.upgraded:
            return "upgraded"
        ex = SimpleNamespace(skip_body=head_request, response_framing="", remaining=-1,
                             close_client=False, raw=SimpleNamespace(response_framing=""))
        lower = raw.lower()
        framing, length, hop_hint = head_scan(lower, RESPONSE_SCAN)
        # The one-pass scan agrees with the reference scans it replaces.
        assert (framing, length) == framing_of(lower), "head_scan framing differs"
        assert hop_hint == may_change(lower), "head_scan hop hint differs"
        set_framing(ex, framing, length, response)  # type: ignore[arg-type]
        try:
            response.feed(rest)
        except (ParserError, ValueError):
            return "bad-body"
        return "complete" if response.complete else "open"
