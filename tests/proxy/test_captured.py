"""materialize (proxy/captured.py): the recording process's decoding of the raw hand-off."""

from __future__ import annotations

import dataclasses
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_tap.core.headers import HeaderMap
from mcp_tap.proxy.capture import RawBody, RawExchange
from mcp_tap.proxy.captured import Captured, _head_map, _headers, head_pairs, materialize
from mcp_tap.proxy.splice.head import parse_head


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=30), max_size=8), st.binary(max_size=20))
def test_head_pairs_decode_what_parse_head_cuts(lines: list[bytes], start: bytes) -> None:
    """materialize's one-pass decoding of a raw head gives parse_head's pairs, decoded:
    obs-folds, empty lines, colons in values and any byte value included."""
    lines = [line.replace(b"\r\n", b"\n") for line in lines]  # one line each
    raw = start.replace(b"\r\n", b"") + b"\r\n" + b"".join(
        line + b"\r\n" for line in lines) + b"\r\n"
    expected = tuple((k.decode("latin-1"), v.decode("latin-1"))
                     for k, v in parse_head(raw).pairs())
    assert head_pairs(raw) == expected
    # The header map materialize makes: the same pairs, and the index HeaderMap builds.
    made = _head_map(raw)
    assert made.pairs == expected
    assert made._index == HeaderMap(expected)._indexed()


def test_head_lines_seen_before_split_the_same_and_stay_bounded() -> None:
    """Heads sharing lines (the line cache's hits) give head_pairs' pairs and HeaderMap's
    index; distinct lines past the bound start the cache over."""
    from mcp_tap.proxy import captured

    for i in range(captured._MAX_LINES + 10):
        raw = (b"POST /mcp HTTP/1.1\r\nHost: h\r\nX-Id:  %d \t\r\nhost: H2\r\n\r\n" % i)
        made = _head_map(raw)
        assert made.pairs == head_pairs(raw) == (("Host", "h"), ("X-Id", str(i)), ("host", "H2"))
        assert made._index == HeaderMap(made.pairs)._indexed()
    assert len(captured._LINES) <= captured._MAX_LINES
    long_line = "X-Long: " + "v" * captured._MAX_LINE_CHARS
    raw = f"GET / HTTP/1.1\r\n{long_line}\r\n\r\n".encode()
    assert _head_map(raw).pairs == head_pairs(raw)
    assert long_line not in captured._LINES


def test_materialize_sets_every_field_of_captured() -> None:
    """materialize fills Captured's fields without its __init__: each one, none extra, and
    the defaults a fresh Captured would have where the hand-off has nothing."""
    body = RawBody(1024)
    body.feed(b"{}")
    body.ended = True
    head = b"POST /mcp HTTP/1.1\r\nHost: h\r\nUser-Agent: ua\r\n\r\n"
    raw = RawExchange("tap", "http://o", "127.0.0.1", "POST", "/mcp", head, body, time.time())
    cap = materialize(raw, 10)
    names = {f.name for f in dataclasses.fields(Captured)}
    assert not hasattr(cap, "__dict__")  # slots: nothing extra can be set
    assert {name for name in names if hasattr(cap, name)} == names
    assert (cap.user_agent, cap.response, cap.sse, cap.egress_digest, cap.tunnel) == (
        "ua", None, [], "", None)
    assert cap.forwarded_headers is cap.request_headers
    other = materialize(raw, 10)
    assert other.sse is not cap.sse  # no list shared between captures
    assert cap == other


def test_a_capture_pickles_to_an_equal_one() -> None:
    """Captured (slotted) survives a pickle round trip: every field equal, SSE events and
    header maps included."""
    import pickle

    body = RawBody(1024)
    body.feed(b"{}")
    body.ended = True
    head = b"POST /mcp HTTP/1.1\r\nHost: h\r\nUser-Agent: ua\r\n\r\n"
    raw = RawExchange("tap", "http://o", "127.0.0.1", "POST", "/mcp", head, body, time.time())
    raw.status = 200
    raw.response_pairs = ((b"Content-Type", b"text/event-stream"),)
    raw.response = RawBody(1024)
    raw.response.feed(b"id: 1\ndata: {}\n\n")
    raw.response.ended = True
    cap = materialize(raw, 10)
    assert len(cap.sse) == 1
    back = pickle.loads(pickle.dumps(cap))
    assert back == cap and back is not cap


def test_header_pairs_map_like_headermap() -> None:
    """Raw byte pairs (a rewritten head) give HeaderMap's pairs and index, every byte kept
    (latin-1), duplicates and spellings in order."""
    raw = ((b"Content-Type", b"a/b"), (b"X-\xff", b"\xe9"), (b"content-type", b"c/d"))
    made = _headers(raw)
    expected = HeaderMap(tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in raw))
    assert made.pairs == expected.pairs
    assert made._index == expected._indexed()
    assert made.get_all("CONTENT-TYPE") == ["a/b", "c/d"]


def test_a_repeated_head_is_split_once_and_shared() -> None:
    """A head seen again gives the same (immutable) map: no split, no index built again;
    a head that differs by one byte gets its own map."""
    head = b"POST /mcp HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n\r\n"
    first = _headers(head)
    assert _headers(bytes(head)) is first
    other = _headers(head.replace(b"X-A: 1", b"X-A: 2"))
    assert other is not first and other.get("x-a") == "2" and first.get("x-a") == "1"
    pairs = ((b"Content-Type", b"a/b"),)
    assert _headers(pairs) is _headers(((b"Content-Type", b"a/b"),))
    # Pairs in lists (not hashable) are decoded all the same, just not remembered.
    listed = _headers([[b"Content-Type", b"a/b"]])  # type: ignore[list-item]
    assert listed.pairs == (("Content-Type", "a/b"),)


def test_a_repeated_head_is_redacted_once_with_the_same_view() -> None:
    """RecordBuilder.header_lists: the redactor's view of a header map, remembered by the
    map (the one map materialize shares per distinct head); an equal map made apart gets
    an equal view, and secrets and the session pseudonym are redacted as ever."""
    from mcp_tap.core.hashing import DigestKey
    from mcp_tap.core.headers import HeaderMap
    from mcp_tap.core.redaction import Redactor
    from mcp_tap.proxy.records import RecordBuilder

    key = DigestKey(b"k" * 32)
    builder = RecordBuilder(Redactor(pseudonym_key=key.secret), key)
    pairs = (("Authorization", "Bearer abc"), ("Mcp-Session-Id", "s1"), ("X-Q", "a=1"))
    headers = HeaderMap(pairs)
    view = builder.header_lists(headers)
    assert view == builder.redactor.redact_header_lists(pairs)
    assert "abc" not in str(view) and "s1" not in str(view)
    assert builder.header_lists(headers) is view
    assert builder.header_lists(HeaderMap(tuple(pairs))) == view
    other = builder.header_lists(HeaderMap((("Authorization", "Bearer xyz"),)))
    assert other == [["Authorization", "Bearer [REDACTED]"]]
    assert builder.header_lists(HeaderMap([("A", "b")])) == [["A", "b"]]  # type: ignore[arg-type]


def test_exchange_ids_come_in_the_order_they_were_drawn(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """RecordBuilder.exchange_id: 16 hex digits each, cut from one draw of 256 in order,
    then a fresh draw."""
    from mcp_tap.core.hashing import DigestKey
    from mcp_tap.core.redaction import Redactor
    from mcp_tap.proxy import records

    draws = iter(["".join(f"{i:016x}" for i in range(256)), "ab" * 2048])
    monkeypatch.setattr(records.secrets, "token_hex", lambda n: next(draws)[: 2 * n])
    key = DigestKey(b"k" * 32)
    builder = records.RecordBuilder(Redactor(pseudonym_key=key.secret), key)
    ids = [builder.exchange_id() for _ in range(258)]
    assert ids[:256] == [f"{i:016x}" for i in range(256)]
    assert ids[256:] == ["abababababababab"] * 2


def test_request_parts_are_the_judgements_properties() -> None:
    """records.request_parts: Judgement.kind, .method and .rpc_id, read at once."""
    from mcp_tap.core.exchange import Exchange, judge
    from mcp_tap.proxy.records import request_parts

    bodies = [b'{"jsonrpc":"2.0","id":7,"method":"tools/list"}', b'{"jsonrpc":"2.0","method":1}',
              b'{"jsonrpc":"2.0","method":"notifications/initialized"}', b"[1]", b"{",
              b'{"jsonrpc":"2.0","id":"x","result":{}}']
    for body in bodies:
        for method in ("POST", "GET"):
            j = judge(Exchange(HeaderMap((("Content-Type", "application/json"),)), body,
                               http_method=method))
            assert request_parts(j) == (j.kind, j.method, j.rpc_id)


def test_sse_events_materialize_as_timed_events() -> None:
    """The SSE events of a handed-over stream are TimedEvents like any other (made without
    their __init__): equal to ones built the usual way, with their chunk's arrival time."""
    from mcp_tap.core.sse import SSEEvent
    from mcp_tap.proxy.captured import TimedEvent

    head = b"POST /mcp HTTP/1.1\r\nHost: h\r\n\r\n"
    raw = RawExchange("tap", "http://o", "127.0.0.1", "POST", "/mcp", head, RawBody(64),
                      time.time())
    raw.request.ended = True
    raw.status = 200
    raw.response_pairs = ((b"Content-Type", b"text/event-stream"),)
    response = RawBody(1024)
    response.feed(b"id: 1\ndata: {}\n\n", 5.0)
    response.feed(b"data: [1]\n\n", 6.0)
    response.ended = True
    raw.response = response
    cap = materialize(raw, 10)
    assert cap.sse == [TimedEvent(5.0, SSEEvent("{}", None, "1")),
                       TimedEvent(6.0, SSEEvent("[1]"))]
    assert all(type(t) is TimedEvent and vars(t) == {"at": t.at, "event": t.event}
               for t in cap.sse)
