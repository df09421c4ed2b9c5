"""Tests for the incremental SSE decoder and the wire encoder (mcp_tap.core.sse)."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_tap.core.sse import SSEDecoder, SSEError, SSEEvent, encode_event

BOM = b"\xef\xbb\xbf"


def decode(chunks: Iterable[bytes], decoder: SSEDecoder | None = None) -> list[SSEEvent]:
    """Feed ``chunks`` in order to a (new) decoder, close it, and return every event."""
    dec = decoder if decoder is not None else SSEDecoder()
    events: list[SSEEvent] = []
    for chunk in chunks:
        events += dec.feed(chunk)
    events += dec.close()
    return events


class TestSSEDecoder:
    """SSEDecoder: the WHATWG parsing rules, one behaviour per test."""

    @pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
    def test_each_line_ending(self, eol: bytes) -> None:
        """LF, CRLF and CR each end lines and the blank line ends the event."""
        stream = b"event: ping" + eol + b"data: a" + eol + b"data: b" + eol + eol
        assert decode([stream]) == [SSEEvent(data="a\nb", event="ping")]

    def test_mixed_line_endings(self) -> None:
        """Line endings may change from line to line within one stream."""
        assert decode([b"data: a\rdata: b\r\ndata: c\n\r\n"]) == [SSEEvent(data="a\nb\nc")]

    def test_crlf_split_across_chunks_is_one_line_ending(self) -> None:
        """A CR ending one chunk and an LF starting the next make one line ending, not two."""
        assert decode([b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"]) == [SSEEvent(data="a\nb")]

    def test_cr_then_non_lf_chunk(self) -> None:
        """A CR at a chunk end followed by another CR is two line endings: a blank line."""
        assert decode([b"data: a\r", b"\r"]) == [SSEEvent(data="a")]

    def test_leading_bom_is_stripped(self) -> None:
        """A UTF-8 BOM at the very start of the stream is not part of the first field name."""
        assert decode([BOM + b"data: x\n\n"]) == [SSEEvent(data="x")]

    def test_bom_split_across_chunks_is_stripped(self) -> None:
        """A leading BOM split over several chunks is still recognised."""
        assert decode([BOM[:1], BOM[1:2], BOM[2:] + b"data: x\n\n"]) == [SSEEvent(data="x")]

    def test_bom_after_start_is_kept(self) -> None:
        """Only the first BOM is stripped: a second one makes an unknown field name."""
        assert decode([BOM + BOM + b"data: x\n\n" + BOM + b"data: y\n\n"]) == []

    def test_comments_are_counted_not_dispatched(self) -> None:
        """Comment lines (keep-alives) are counted and never become events."""
        dec = SSEDecoder()
        events = decode([b": keep-alive\n:\n\n:x\ndata: d\n\n"], dec)
        assert (events, dec.comments) == ([SSEEvent(data="d")], 3)

    def test_multiline_data(self) -> None:
        """Several data lines are joined with LF; an empty data line adds an empty line."""
        assert decode([b"data: one\ndata:\ndata: three\n\n"]) == [SSEEvent(data="one\n\nthree")]

    def test_only_one_leading_space_is_removed(self) -> None:
        """Exactly one space after the colon is dropped, further spaces are data."""
        assert decode([b"data:  two\n\n"]) == [SSEEvent(data=" two")]

    def test_field_without_colon(self) -> None:
        """A line without a colon is a field name with an empty value."""
        assert decode([b"data\n\n"]) == [SSEEvent(data="")]

    def test_colon_in_value_is_kept(self) -> None:
        """Only the first colon separates name and value."""
        assert decode([b'data: {"a": 1}\n\n']) == [SSEEvent(data='{"a": 1}')]

    def test_unknown_fields_are_ignored(self) -> None:
        """Unknown field names do not change the event."""
        assert decode([b"foo: bar\nDATA: x\ndata: y\n\n"]) == [SSEEvent(data="y")]

    def test_valid_retry(self) -> None:
        """A retry of ASCII digits is reported on the event and on the decoder."""
        dec = SSEDecoder()
        events = decode([b"retry: 3000\ndata: x\n\n"], dec)
        assert (events, dec.retry) == ([SSEEvent(data="x", retry=3000)], 3000)

    @pytest.mark.parametrize("value", [b"10a", b"-1", b" 10", b"", b"1.5", "\u0663".encode()])
    def test_invalid_retry_is_ignored(self, value: bytes) -> None:
        """A retry that is not only ASCII digits is ignored entirely."""
        dec = SSEDecoder()
        events = decode([b"retry: " + value + b"\ndata: x\n\n"], dec)
        assert (events, dec.retry) == ([SSEEvent(data="x")], None)

    def test_retry_only_block_is_not_dispatched_but_recorded(self) -> None:
        """A block with only retry dispatches nothing yet still sets the reconnection time."""
        dec = SSEDecoder()
        assert (decode([b"retry: 500\n\n"], dec), dec.retry) == ([], 500)

    def test_id_is_per_event(self) -> None:
        """An event's id is its own id field; the sticky value is last_event_id."""
        dec = SSEDecoder()
        events = decode([b"id: 7\ndata: a\n\ndata: b\n\n"], dec)
        assert events == [SSEEvent(data="a", id="7"), SSEEvent(data="b")]
        assert dec.last_event_id == "7"

    def test_empty_id_is_present(self) -> None:
        """An empty id field is reported as the empty string, not as absent."""
        assert decode([b"id\ndata: a\n\n"]) == [SSEEvent(data="a", id="")]

    def test_id_with_nul_is_ignored(self) -> None:
        """An id containing NUL is ignored as the specification requires."""
        assert decode([b"id: a\x00b\ndata: x\n\n"]) == [SSEEvent(data="x")]

    def test_priming_event_with_empty_data(self) -> None:
        """The MCP priming event (id and empty data) is dispatched with empty data."""
        assert decode([b"id: prime-1\ndata:\n\n"]) == [SSEEvent(data="", id="prime-1")]

    def test_id_only_block_is_dispatched(self) -> None:
        """Deviation: a block with an id but no data line is dispatched so priming is visible."""
        assert decode([b"id: prime-1\n\n"]) == [SSEEvent(data="", id="prime-1")]

    def test_block_without_data_or_id_is_dropped(self) -> None:
        """A block with only an event type dispatches nothing, per spec."""
        assert decode([b"event: x\n\n\n\n"]) == []

    def test_empty_event_type_is_default(self) -> None:
        """An empty event field means the default type, reported as None."""
        assert decode([b"event:\ndata: x\n\n"]) == [SSEEvent(data="x", event=None)]

    def test_incomplete_trailing_event_is_discarded(self) -> None:
        """Field lines without the final blank line are discarded and flagged at close."""
        dec = SSEDecoder()
        assert dec.feed(b"data: a\n\ndata: b\n") == [SSEEvent(data="a")]
        assert (dec.close(), dec.pending_incomplete) == ([], True)

    def test_unterminated_trailing_line_is_discarded(self) -> None:
        """Bytes after the last line ending are discarded and flagged at close."""
        dec = SSEDecoder()
        assert (decode([b"data: a\n\ndata: b"], dec), dec.pending_incomplete) == (
            [SSEEvent(data="a")],
            True,
        )

    def test_complete_stream_is_not_flagged(self) -> None:
        """A stream ending with the blank line (or a comment) discards nothing."""
        dec = SSEDecoder()
        assert (decode([b"data: a\n\n: bye\n"], dec), dec.pending_incomplete) == (
            [SSEEvent(data="a")],
            False,
        )

    def test_utf8_split_inside_a_character(self) -> None:
        """A multi-byte character split over chunks decodes intact and is not flagged."""
        raw = "data: \u20ac\U0001f600\n\n".encode()
        dec = SSEDecoder()
        events = decode([raw[i : i + 1] for i in range(len(raw))], dec)
        assert (events, dec.invalid_utf8) == ([SSEEvent(data="\u20ac\U0001f600")], False)

    def test_invalid_utf8_is_replaced_and_flagged(self) -> None:
        """Invalid UTF-8 becomes U+FFFD and sets invalid_utf8."""
        dec = SSEDecoder()
        events = decode([b"data: a\xffb\n\n"], dec)
        assert (events, dec.invalid_utf8) == ([SSEEvent(data="a\ufffdb")], True)

    def test_line_over_limit_raises(self) -> None:
        """A complete line longer than max_line is refused."""
        with pytest.raises(SSEError):
            SSEDecoder(max_line=8).feed(b"data: 12345\n")

    def test_partial_line_over_limit_raises(self) -> None:
        """An unterminated line growing past max_line over chunks is refused early."""
        dec = SSEDecoder(max_line=8)
        dec.feed(b"data:")
        with pytest.raises(SSEError):
            dec.feed(b" 1234")

    def test_line_at_limit_is_accepted(self) -> None:
        """A line of exactly max_line bytes is still accepted."""
        assert decode([b"data: 12\n\n"], SSEDecoder(max_line=8)) == [SSEEvent(data="12")]

    def test_event_data_over_limit_raises(self) -> None:
        """Many short data lines cannot grow one event past max_event."""
        dec = SSEDecoder(max_event=10)
        with pytest.raises(SSEError):
            dec.feed(b"data: 1234\n" * 3)

    def test_feed_after_close_raises(self) -> None:
        """Feeding a closed decoder is a programming error."""
        dec = SSEDecoder()
        dec.close()
        with pytest.raises(RuntimeError):
            dec.feed(b"data: x\n\n")


# Field values may hold anything but CR, LF (line endings) and NUL (an id with NUL is ignored).
_FIELD = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\r\n\x00"), max_size=12)
# Data may span lines (LF only: CR would normalise to LF and not round-trip exactly).
_DATA = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\r"), max_size=40)
_EVENTS = st.lists(
    st.builds(
        SSEEvent,
        data=_DATA,
        event=st.none() | _FIELD.filter(bool),
        id=st.none() | _FIELD,
        retry=st.none() | st.integers(min_value=0, max_value=10**12),
    ),
    max_size=6,
)


@st.composite
def _streams(draw: st.DrawFn) -> tuple[list[SSEEvent], bytes, int]:
    """Draw events and their wire form with one line ending, random comments and maybe a BOM."""
    events = draw(_EVENTS)
    eol = draw(st.sampled_from([b"\n", b"\r\n", b"\r"]))
    lines: list[bytes] = []
    comments = 0
    for event in events:
        block = encode_event(event.data, event=event.event, id=event.id, retry=event.retry)
        # The block ends with "\n\n": after the split its last element is the blank line's "".
        for line in block.split(b"\n")[:-1]:
            if draw(st.booleans()):
                lines.append(b":" + draw(_FIELD).encode("utf-8"))
                comments += 1
            lines.append(line)
    stream = b"".join(line + eol for line in lines)
    if draw(st.booleans()):
        stream = BOM + stream
    return events, stream, comments


class TestSSEDecoderChunking:
    """SSEDecoder against encode_event, for random events, endings, comments and chunkings."""

    @settings(deadline=None, max_examples=300)
    @given(_streams(), st.data())
    def test_any_chunking_decodes_the_original_events(
        self, drawn: tuple[list[SSEEvent], bytes, int], data: st.DataObject
    ) -> None:
        """Splitting the stream anywhere yields the same events as feeding it whole."""
        events, stream, comments = drawn
        cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=12)))
        chunks = [stream[a:b] for a, b in pairwise([0, *cuts, len(stream)])]
        whole = SSEDecoder()
        chunked = SSEDecoder()
        assert decode([stream], whole) == events
        assert decode(chunks, chunked) == events
        assert (chunked.comments, chunked.pending_incomplete, chunked.invalid_utf8) == (
            comments,
            False,
            False,
        )

    @settings(deadline=None)
    @given(_streams())
    def test_byte_by_byte_decodes_the_original_events(
        self, drawn: tuple[list[SSEEvent], bytes, int]
    ) -> None:
        """Feeding one byte at a time splits every CRLF and every multi-byte character."""
        events, stream, _ = drawn
        assert decode([stream[i : i + 1] for i in range(len(stream))]) == events


class TestEncodeEvent:
    """encode_event: the wire form of one event."""

    def test_wire_form(self) -> None:
        """Fields come out in a fixed order, a space after each colon, ending in a blank line."""
        wire = encode_event("a\nb", event="message", id="1", retry=10)
        assert wire == b"event: message\nid: 1\nretry: 10\ndata: a\ndata: b\n\n"

    def test_empty_data(self) -> None:
        """Empty data still produces one data line, so the event is dispatched."""
        assert encode_event("") == b"data: \n\n"

    def test_cr_and_crlf_in_data_become_lf(self) -> None:
        """CR and CRLF in data become separate data lines that decode as LF."""
        assert decode([encode_event("a\r\nb\rc")]) == [SSEEvent(data="a\nb\nc")]

    def test_leading_space_in_value_survives(self) -> None:
        """A value starting with a space keeps it after decoding."""
        assert decode([encode_event(" x", id=" i")]) == [SSEEvent(data=" x", id=" i")]

    @pytest.mark.parametrize(
        ("event", "id_", "retry"),
        [("a\nb", None, None), ("a\rb", None, None), (None, "a\nb", None),
         (None, "a\x00b", None), (None, None, -1)],
    )
    def test_unrepresentable_fields_are_refused(
        self, event: str | None, id_: str | None, retry: int | None
    ) -> None:
        """Field values a decoder would split, ignore or reject raise ValueError."""
        with pytest.raises(ValueError):
            encode_event("x", event=event, id=id_, retry=retry)


# Lines of every kind the decoder tells apart, bytes that are not UTF-8 included.
_RAW_LINES = st.lists(
    st.sampled_from([b"", b"data: x", b"data:y", b"data", b"event: e", b"event:", b"id: 7",
                     b"id:", b"id: a\x00b", b"retry: 12", b"retry: x", b": note", b":",
                     b"other: z", b"data: \xff", BOM + b"data: b", b"data: \xc3\xa9"])
    | st.binary(max_size=8).filter(lambda b: b"\n" not in b and b"\r" not in b),
    max_size=30,
)


class TestSSEDecoderWholeEventChunks:
    """Chunks made of whole events decode exactly as the stream fed byte by byte does: the
    same events, counters and state."""

    @settings(deadline=None, max_examples=400)
    @given(_RAW_LINES, st.data())
    def test_chunks_ending_in_blank_lines_agree_with_byte_by_byte(
        self, lines: list[bytes], data: st.DataObject
    ) -> None:
        stream = b"".join(line + b"\n" for line in lines) + data.draw(st.sampled_from(
            [b"", b"\n", b"data: tail", b"data: tail\n"]))
        # Cut after blank lines (where a chunk holds whole events) and sometimes elsewhere.
        ends = [i + 2 for i in range(len(stream) - 1) if stream[i:i + 2] == b"\n\n"]
        cuts = sorted(set(data.draw(st.lists(st.sampled_from(ends), max_size=8)) if ends
                          else []) | set(data.draw(st.lists(st.integers(0, len(stream)),
                                                            max_size=2))))
        chunks = [stream[a:b] for a, b in pairwise([0, *cuts, len(stream)])]
        fast, slow = SSEDecoder(), SSEDecoder()
        got = [e for chunk in chunks for e in fast.feed(chunk)]
        want = [e for i in range(len(stream)) for e in slow.feed(stream[i:i + 1])]
        assert got == want
        fast.close()
        slow.close()
        for name in ("comments", "invalid_utf8", "pending_incomplete", "last_event_id",
                     "retry"):
            assert getattr(fast, name) == getattr(slow, name), name

    def test_a_chunk_of_whole_events_decodes_every_event_and_comment(self) -> None:
        """A chunk of two whole events and a comment gives both events, counts the comment
        and keeps the last id."""
        decoder = SSEDecoder()
        events = decoder.feed(b"event: message\ndata: a\nid: 1\n\n: keep\ndata: b\n\n")
        assert events == [SSEEvent("a", "message", "1"), SSEEvent("b")]
        assert decoder.comments == 1 and decoder.last_event_id == "1"
