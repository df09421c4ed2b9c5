"""verify's fast path (mcp_tap.evidence.head) against the full orjson parse it stands in for."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_tap.evidence.format import encode_record, line_digest
from mcp_tap.evidence.head import line_head
from mcp_tap.keys import ed25519_public_hex

_KEY = bytes(range(32))  # a deterministic, non-secret test key (raw Ed25519 seed)

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
        seen: list[dict[str, object]] = []
        batches: list[int] = []

        def consumer(records: list[dict[str, object]]) -> None:
            batches.append(len(records))
            seen.extend(records)

        report = verify_bundle(tmp_path / "b", consumer=consumer)
        assert report.ok and report.segments > 1
        assert seen == list(iter_records(tmp_path / "b"))
        # Records parsed fully come a few at a time (PARSED_BATCH), in order.
        from mcp_tap.evidence.verify import PARSED_BATCH

        assert len(batches) >= report.segments and all(0 < n <= PARSED_BATCH for n in batches)
        plain = verify_bundle(tmp_path / "b")
        assert (plain.ok, plain.records, plain.exchanges, plain.chain_head) == (
            report.ok, report.records, report.exchanges, report.chain_head)

    def test_fast_and_full_paths_report_the_same_damage(self, tmp_path: Path) -> None:
        """A flipped byte, a garbage line and a cut record give the same problems with and
        without a consumer (the consumer forces the full parse of every line; without one a
        bundle signed by a trusted key takes the fast path)."""
        from mcp_tap.evidence import EvidenceWriter, verify_bundle

        with EvidenceWriter(tmp_path / "b", signing_key=_KEY) as writer:
            for n in range(20):
                assert writer.submit({"kind": "exchange", "exchangeId": f"x{n}", "rpcId": n})
        segment = next((tmp_path / "b").glob("segment-*.jsonl"))
        lines = segment.read_bytes().split(b"\n")
        lines[3] = lines[3].replace(b'"x3"', b'"y3"')
        lines[7] = b"not json"
        lines[11] = lines[11][:40]
        segment.write_bytes(b"\n".join(lines))
        trusted = [bytes.fromhex(ed25519_public_hex(_KEY))]
        fast = verify_bundle(tmp_path / "b", trusted_keys=trusted)
        full = verify_bundle(tmp_path / "b", trusted_keys=trusted,
                             consumer=lambda _records: None)
        assert not fast.ok
        assert [(p.kind, p.message) for p in fast.problems] == [
            (p.kind, p.message) for p in full.problems]
        kinds = {p.kind for p in fast.problems}
        assert {"digest", "format"} <= kinds


def _put_huge_number(bundle: Path) -> int:
    """Replace the number 12345 in the bundle's last record by 1e400 and fix everything a
    holder of the disk can fix without the signing key: the record's digest, the manifest's
    size, SHA-256 and chain head, the closing summary's chain head. Return the line number."""
    import hashlib

    segment = sorted(bundle.glob("segment-*.jsonl"))[-1]
    lines = segment.read_bytes().split(b"\n")[:-1]
    line = lines[-1].replace(b"12345", b"1e400")
    digest = line_digest(line)
    assert digest is not None
    line = line[:-66] + digest.encode() + b'"}'
    lines[-1] = line
    data = b"\n".join(lines) + b"\n"
    segment.write_bytes(data)
    manifest_path = segment.with_name(segment.name.replace(".jsonl", ".manifest.json"))
    manifest = orjson.loads(manifest_path.read_bytes())
    manifest.update(bytes=len(data), fileSha256=hashlib.sha256(data).hexdigest(),
                    chainHead=digest)
    manifest_path.write_bytes(orjson.dumps(manifest))
    meta = orjson.loads((bundle / "bundle.json").read_bytes())
    meta["closed"]["chainHead"] = digest
    (bundle / "bundle.json").write_bytes(orjson.dumps(meta))
    return len(lines)


class TestHugeNumbers:
    """A number too large for a double (1e400): the writer never writes one, orjson (the
    reader of every consumer) rejects it, msgspec's fast path would skip over it."""

    def _bundle(self, path: Path, key: bytes | None) -> Path:
        from mcp_tap.evidence import EvidenceWriter

        with EvidenceWriter(path, signing_key=key) as writer:
            for n in range(5):
                assert writer.submit({"kind": "exchange", "exchangeId": f"x{n}", "rpcId": n,
                                      "origin": {"body": {"result": {"n": 12345}}}})
        return path

    def test_the_fast_path_alone_would_accept_it(self) -> None:
        line = _LINE.replace(b"2.5", b"1e400")
        assert line_head(line) is not None
        assert _full(line) is None

    def test_unsigned_bundle_fails_with_the_line_named(self, tmp_path: Path) -> None:
        from mcp_tap.errors import BundleFormatError
        from mcp_tap.evidence import iter_records, verify_bundle

        bundle = self._bundle(tmp_path / "b", None)
        number = _put_huge_number(bundle)
        report = verify_bundle(bundle)
        assert not report.ok
        assert ("format", f"segment-000001.jsonl line {number}: not valid JSON") in [
            (p.kind, p.message) for p in report.problems]
        with pytest.raises(BundleFormatError, match=f"line {number}: not valid JSON"):
            list(iter_records(bundle))

    def test_trusted_bundle_fails_on_the_fast_path(self, tmp_path: Path) -> None:
        from mcp_tap.evidence import verify_bundle

        bundle = self._bundle(tmp_path / "b", _KEY)
        _put_huge_number(bundle)
        trusted = [bytes.fromhex(ed25519_public_hex(_KEY))]
        report = verify_bundle(bundle, trusted_keys=trusted)
        assert not report.ok
        assert {p.kind for p in report.problems} >= {"signature"}
        assert report.signer is None

    def test_the_gate_fails_integrity(self, tmp_path: Path) -> None:
        from mcp_tap.gate import GateRequest, evaluate
        from mcp_tap.gate.policy import Policy

        bundle = self._bundle(tmp_path / "b", None)
        _put_huge_number(bundle)
        decision = evaluate(GateRequest(evidence=(bundle,), policy=Policy()), workers=1)
        (integrity,) = [s for s in decision.sources if s.name == "integrity"]
        assert not integrity.passed
