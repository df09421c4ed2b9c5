"""verify's fast path (mcp_tap.evidence.head) against the full orjson parse it stands in for."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_tap.evidence.format import encode_record, line_digest
from mcp_tap.evidence.head import line_head

_RECORD = {"kind": "exchange", "seq": 7, "prev": "ab" * 32, "hop": "edge",
           "origin": {"body": {"jsonrpc": "2.0", "id": 1, "result": {"x": [1, 2.5, None]}}},
           "text": "plain"}
_LINE = encode_record(_RECORD)[0].rstrip(b"\n")


def _full(line: bytes) -> tuple[object, ...] | None:
    """What the full parse makes of the four chain fields (None: it rejects the line)."""
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(record, dict):
        return None
    return tuple(record.get(k) for k in ("seq", "prev", "digest", "kind"))


def _agrees(line: bytes) -> None:
    head = line_head(line)
    if head is not None:
        assert _full(line) == (head.seq, head.prev, head.digest, head.kind)


class TestLineHead:
    def test_writer_line(self) -> None:
        """A line the writer wrote gives its chain fields, and its digest checks."""
        head = line_head(_LINE)
        assert head is not None
        assert (head.seq, head.prev, head.kind) == (7, "ab" * 32, "exchange")
        assert head.digest == line_digest(_LINE)

    @pytest.mark.parametrize("line", [
        _LINE.replace(b'"plain"', b'"pl\xffin"'),  # invalid UTF-8 in a skipped string
        _LINE.replace(b'"plain"', b'"\\ud800"'),  # a lone surrogate escape
        _LINE.replace(b"2.5", b"NaN"),
        _LINE.replace(b"2.5", b"02"),
        _LINE.replace(b'"seq":7', b'"seq":true'),
        _LINE.replace(b'"seq":7', b'"seq":7.0'),
        _LINE.replace(b'"seq":7', b'"seq":123456789012345678901234567890'),
        _LINE[:-1],
        _LINE + b"x",
        b'{"seq":1,"prev":"","digest":"","kind":"x","y":' + b"[" * 5000 + b"]" * 5000 + b"}",
        b"[1,2]",
        b"",
    ])
    def test_lines_it_leaves_to_the_full_parse(self, line: bytes) -> None:
        """A line the fast path cannot vouch for gives None (the full parse judges it)."""
        assert line_head(line) is None

    def test_duplicate_member_last_wins_as_in_the_full_parse(self) -> None:
        """A repeated chain member is read as the full parse reads it (the last one)."""
        line = _LINE.replace(b'"seq":7', b'"seq":7,"seq":9')
        head = line_head(line)
        assert head is not None and head.seq == 9
        _agrees(line)

    @settings(max_examples=2000, deadline=None)
    @given(st.lists(st.tuples(st.integers(0, len(_LINE)), st.integers(0, 3),
                              st.binary(min_size=0, max_size=3)), min_size=1, max_size=4))
    def test_mutated_lines_never_disagree(self, edits: list[tuple[int, int, bytes]]) -> None:
        """Whatever bytes are cut or inserted, an accepted line reads as the full parse reads it."""
        line = _LINE
        for at, cut, insert in edits:
            line = line[:at] + insert + line[at + cut:]
        _agrees(line)


class TestVerifyConsumer:
    """verify_bundle(consumer=...): the one pass the gate reads a bundle with."""

    def test_consumer_sees_what_iter_records_yields(self, tmp_path: Path) -> None:
        """On an intact bundle the consumer gets every record iter_records yields, in order,
        and the report is the one verify gives without a consumer."""
        from mcp_tap.evidence import EvidenceWriter, iter_records, verify_bundle

        with EvidenceWriter(tmp_path / "b", max_segment_bytes=4096) as writer:
            for n in range(60):
                assert writer.submit({"kind": "exchange", "exchangeId": f"x{n}", "rpcId": n,
                                      "text": "é" * (n % 3)})
        seen: list[tuple[bytes, dict[str, object]]] = []
        report = verify_bundle(tmp_path / "b", consumer=lambda line, rec: seen.append((line, rec)))
        assert report.ok and report.segments > 1
        assert [rec for _, rec in seen] == list(iter_records(tmp_path / "b"))
        assert all(orjson.loads(line) == rec for line, rec in seen)
        plain = verify_bundle(tmp_path / "b")
        assert (plain.ok, plain.records, plain.exchanges, plain.chain_head) == (
            report.ok, report.records, report.exchanges, report.chain_head)

    def test_fast_and_full_paths_report_the_same_damage(self, tmp_path: Path) -> None:
        """A flipped byte, a garbage line and a cut record give the same problems with and
        without a consumer (the consumer forces the full parse of every line)."""
        from mcp_tap.evidence import EvidenceWriter, verify_bundle

        with EvidenceWriter(tmp_path / "b") as writer:
            for n in range(20):
                assert writer.submit({"kind": "exchange", "exchangeId": f"x{n}", "rpcId": n})
        segment = next((tmp_path / "b").glob("segment-*.jsonl"))
        lines = segment.read_bytes().split(b"\n")
        lines[3] = lines[3].replace(b'"x3"', b'"y3"')
        lines[7] = b"not json"
        lines[11] = lines[11][:40]
        segment.write_bytes(b"\n".join(lines))
        fast = verify_bundle(tmp_path / "b")
        full = verify_bundle(tmp_path / "b", consumer=lambda _line, _rec: None)
        assert not fast.ok
        assert [(p.kind, p.message) for p in fast.problems] == [
            (p.kind, p.message) for p in full.problems]
        kinds = {p.kind for p in fast.problems}
        assert {"digest", "format"} <= kinds
