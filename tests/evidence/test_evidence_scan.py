"""SegmentScan: the file in whole-line blocks whatever the read size, hashed as it is read,
and verify's in-place line loop over those blocks."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

import mcp_tap.evidence.reader as reader
from mcp_tap.evidence import EvidenceWriter, iter_records, verify_bundle
from mcp_tap.evidence.reader import SegmentScan

CASES = [
    b"",
    b"\n",
    b"a\n",
    b"abc",  # one line, no newline
    b"one\ntwo\n\nthree\n",
    b"x" * 40 + b"\n" + b"y" * 3 + b"\n" + b"z" * 25,  # lines longer than a read, cut last
    b"\n\n\nq" + b"r" * 30 + b"\n",
]


@pytest.mark.parametrize("chunk", [1, 2, 7, 64, 1 << 20])
@pytest.mark.parametrize("data", CASES)
def test_spans_and_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int,
                          data: bytes) -> None:
    monkeypatch.setattr(reader, "_CHUNK", chunk)
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    scan = SegmentScan(path)
    blocks = [buffer[start:stop] for buffer, start, stop in scan.spans()]
    assert b"".join(blocks) == data
    assert all(block.endswith(b"\n") for block in blocks[:-1])
    assert all(block for block in blocks)
    assert (scan.size, scan.sha256) == (len(data), hashlib.sha256(data).hexdigest())
    pieces = data.split(b"\n")
    expected = [(n + 1, piece, True) for n, piece in enumerate(pieces[:-1])]
    if pieces[-1]:
        expected.append((len(pieces), pieces[-1], False))
    assert list(SegmentScan(path).lines()) == expected


@pytest.mark.parametrize("chunk", [5, 333, 1 << 20])
def test_verify_reads_the_same_whatever_the_read_size(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    """Records crossing reads (and longer than one) verify and stream as with one read;
    a cut last line is still reported as truncated."""
    with EvidenceWriter(tmp_path / "b", max_segment_bytes=2048) as writer:
        for n in range(40):
            assert writer.submit({"kind": "exchange", "exchangeId": f"x{n}", "rpcId": n,
                                  "text": "é" * (n * 7 % 50)})
    monkeypatch.setattr(reader, "_CHUNK", chunk)
    seen: list[dict[str, object]] = []
    report = verify_bundle(tmp_path / "b", consumer=seen.extend)
    assert report.ok and report.records == 40 and report.segments > 1
    assert seen == list(iter_records(tmp_path / "b"))
    last = sorted((tmp_path / "b").glob("segment-*.jsonl"))[-1]
    last.write_bytes(last.read_bytes()[:-5])
    cut = verify_bundle(tmp_path / "b")
    assert "truncated" in {p.kind for p in cut.problems}


def test_invalid_utf8_is_caught_per_block(tmp_path: Path) -> None:
    """A block holding invalid UTF-8 has its lines checked one by one: the bad line is
    reported as the full parse reports it, on the fast path as on the consumer's, and the
    valid non-ASCII lines beside it are accepted."""
    from mcp_tap.keys import ed25519_public_hex

    key = bytes(range(1, 33))
    with EvidenceWriter(tmp_path / "b", signing_key=key) as writer:
        for n in range(12):
            assert writer.submit({"kind": "exchange", "exchangeId": f"x{n}", "text": "é" * n})
    segment = next((tmp_path / "b").glob("segment-*.jsonl"))
    segment.write_bytes(segment.read_bytes().replace(b'"x5"', b'"x\xff"'))
    trusted = [bytes.fromhex(ed25519_public_hex(key))]
    fast = verify_bundle(tmp_path / "b", trusted_keys=trusted)
    full = verify_bundle(tmp_path / "b", trusted_keys=trusted, consumer=lambda _records: None)
    problems = [(p.kind, p.message) for p in fast.problems]
    assert problems == [(p.kind, p.message) for p in full.problems]
    assert ("format", "segment-000001.jsonl line 6: not valid JSON") in problems
    assert fast.records == 11


@pytest.mark.parametrize("chunk", [1, 2, 7, 64, 1 << 20])
@pytest.mark.parametrize("data", CASES)
def test_spans_are_the_file_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     chunk: int, data: bytes) -> None:
    monkeypatch.setattr(reader, "_CHUNK", chunk)
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    spans = [buffer[start:stop] for buffer, start, stop in SegmentScan(path).spans()]
    assert b"".join(spans) == data
    assert all(span.endswith(b"\n") for span in spans[:-1])
    assert all(span for span in spans)
