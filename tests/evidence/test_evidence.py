"""Tests for evidence bundles: format, writer, reader, verify and the ``verify`` command."""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import io
import itertools
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest
from structlog.testing import capture_logs

from mcp_tap.cli import main
from mcp_tap.core.hashing import canonical_json, digest
from mcp_tap.errors import BundleFormatError, InputError
from mcp_tap.evidence import (
    FORMAT_VERSION,
    MIGRATIONS,
    EvidenceWriter,
    Migration,
    answer_is_whole,
    check_format,
    iter_records,
    manifest_name,
    read_bundle,
    record_digest,
    segment_name,
    supported_formats,
    verify_bundle,
)
from mcp_tap.evidence.format import encode_record
from mcp_tap.evidence.verify import VerifyReport

# -- helpers -------------------------------------------------------------------------------


def exchange(i: int, **extra: Any) -> dict[str, Any]:
    """A small redacted exchange record."""
    return {"kind": "exchange", "hop": "edge", "method": "tools/call", "rpcId": i,
            "note": "payload", **extra}


def write_bundle(path: Path, count: int, **options: Any) -> Path:
    """Write ``count`` exchange records with a sync writer and close it."""
    with EvidenceWriter(path, **options) as writer:
        for i in range(count):
            assert writer.submit(exchange(i))
    return path


def segment(path: Path, number: int = 1) -> Path:
    return path / segment_name(number)


def lines_of(path: Path, number: int = 1) -> list[bytes]:
    return segment(path, number).read_bytes().splitlines(keepends=True)


def rewrite(path: Path, number: int, lines: list[bytes]) -> None:
    segment(path, number).write_bytes(b"".join(lines))


def load_json(path: Path) -> dict[str, Any]:
    value = orjson.loads(path.read_bytes())
    assert isinstance(value, dict)
    return value


def save_json(path: Path, value: dict[str, Any]) -> None:
    path.write_bytes(orjson.dumps(value))


def kinds(report: VerifyReport) -> set[str]:
    return {problem.kind for problem in report.problems}


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Disk:
    """A segment opener whose files fail on demand (root can write to read-only dirs)."""

    def __init__(self) -> None:
        self.failing = False
        self.partial = False
        self.truncate_fails = False

    def open(self, path: Path) -> FlakyFile:
        if self.failing:
            raise OSError(errno.ENOSPC, "No space left on device")
        return FlakyFile(path, self)


class FlakyFile(io.FileIO):
    """An append-mode file that fails writes (optionally half-written) while the disk fails."""

    def __init__(self, path: Path, disk: Disk) -> None:
        super().__init__(path, "ab")
        self.disk = disk

    def write(self, data: Any) -> int:
        if self.disk.failing:
            if self.disk.partial:
                super().write(bytes(data)[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        return super().write(data)

    def truncate(self, size: int | None = None) -> int:
        if self.disk.truncate_fails:
            raise OSError(errno.EIO, "Input/output error")
        return super().truncate(size)


# -- format --------------------------------------------------------------------------------


class TestFormat:
    def test_names(self) -> None:
        """Segment and manifest names are zero-padded to six digits."""
        assert segment_name(1) == "segment-000001.jsonl"
        assert manifest_name(12) == "segment-000012.manifest.json"

    def test_record_digest_ignores_digest_key(self) -> None:
        """A record's digest does not depend on the digest it carries."""
        record = {"kind": "gap", "seq": 0, "prev": ""}
        assert record_digest(record) == record_digest({**record, "digest": "anything"})
        assert record_digest(record) != record_digest({**record, "seq": 1})

    @pytest.mark.parametrize("record", [
        {"kind": "x", "b": {"é": 1, "e": [{"z": 1, "y": None}], "Z": 2.5}, "a": "\U0001f600"},
        {"kind": "x", 1: "an int key", "1": "its string twin"},
        {"kind": "x", "nested": {2: "b", 1: "a"}},
    ])
    def test_line_is_canonical_json_plus_digest(self, record: dict[Any, Any]) -> None:
        """A line is the record's canonical JSON with the digest appended, whatever its
        keys (str keys take orjson's faster options, any other key the full ones)."""
        line, record_hash = encode_record(record)
        assert record_hash == digest(record)
        assert line == canonical_json(record)[:-1] + b',"digest":"' + record_hash.encode() + b'"}\n'

    def test_unknown_version_rejected(self) -> None:
        """An unknown version raises BundleFormatError naming the place and the versions read."""
        with pytest.raises(BundleFormatError) as caught:
            check_format(7, "x/bundle.json")
        assert str(caught.value) == (
            "x/bundle.json: evidence format 7 is not supported (this mcp-tap reads 1, 2)"
        )

    def test_non_integer_version_rejected(self) -> None:
        """A version that is not an integer (true, a string, missing) is rejected."""
        for value in (True, "1", None):
            with pytest.raises(BundleFormatError, match="is not a version number"):
                check_format(value, "b")

    def test_migration_extends_supported_versions(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Registering a version-0 migration makes version 0 readable."""
        assert supported_formats() == (1, FORMAT_VERSION)
        monkeypatch.setitem(MIGRATIONS, 0, Migration())
        assert supported_formats() == (0, 1, 2)
        assert check_format(0, "b") == 0


# -- writer --------------------------------------------------------------------------------


class TestAnswerIsWhole:
    """answer_is_whole: whether a recorded view holds the whole answer."""

    @staticmethod
    def _stream(*, ended: bool, truncated: bool, with_response: bool) -> dict[str, Any]:
        progress = {"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": "p", "progress": 1}}
        events = [{"at": 0.0, "id": None, "event": None, "data": progress}]
        if with_response:
            response = {"jsonrpc": "2.0", "id": 7, "result": {"content": []}}
            events.append({"at": 0.1, "id": None, "event": None, "data": response})
        return {"status": 200, "sse": events, "truncated": truncated, "ended": ended}

    def test_complete_view(self) -> None:
        """A view that is not truncated is whole."""
        assert answer_is_whole(self._stream(ended=True, truncated=False, with_response=True))

    def test_stream_left_after_its_response(self) -> None:
        """A stream not read to its end but holding the response is whole."""
        assert answer_is_whole(self._stream(ended=False, truncated=True, with_response=True))

    def test_stream_cut_before_its_response(self) -> None:
        """A stream cut before the response arrived is not whole."""
        assert not answer_is_whole(self._stream(ended=False, truncated=True, with_response=False))

    def test_capped_view_read_to_its_end(self) -> None:
        """A view cut by the capture cap (read to its end) is not whole, response or not."""
        assert not answer_is_whole(self._stream(ended=True, truncated=True, with_response=True))

    def test_cut_json_body(self) -> None:
        """A JSON body not read to its end is not whole."""
        assert not answer_is_whole({"status": 200, "body": None, "truncated": True,
                                    "ended": False})


class TestEvidenceWriter:
    def test_sync_bundle_verifies(self, tmp_path: Path) -> None:
        """A bundle written from sync code has chained, numbered records and verifies."""
        bundle = write_bundle(tmp_path / "b", 5)
        records = read_bundle(bundle).records
        assert [r["seq"] for r in records] == [0, 1, 2, 3, 4]
        assert records[0]["prev"] == ""
        assert all(b["prev"] == a["digest"] for a, b in itertools.pairwise(records))
        report = verify_bundle(bundle)
        assert (report.ok, report.records, report.segments, report.problems) == (True, 5, 1, [])

    async def test_async_bundle_verifies(self, tmp_path: Path) -> None:
        """A bundle written from a coroutine with ``async with`` verifies."""
        async with EvidenceWriter(tmp_path / "b") as writer:
            for i in range(3):
                assert writer.submit(exchange(i))
        assert writer.counters()["written"] == 3
        assert verify_bundle(tmp_path / "b").ok

    def test_writer_keys_replaced(self, tmp_path: Path) -> None:
        """Caller-supplied seq, prev and digest are replaced by the writer's."""
        with EvidenceWriter(tmp_path / "b") as writer:
            writer.submit(exchange(0, seq=99, prev="x", digest="y"))
        (record,) = read_bundle(tmp_path / "b").records
        assert (record["seq"], record["prev"]) == (0, "")
        assert record["digest"] == record_digest(record)

    @pytest.mark.parametrize("inline", [True, False])
    def test_an_owned_batch_writes_the_same_lines(self, tmp_path: Path, inline: bool) -> None:
        """submit_many(owned=True) sets seq and prev in the records themselves: the same
        segment bytes as a batch the writer copies, caller-set writer keys replaced alike."""
        def batch() -> list[dict[str, Any]]:
            return [exchange(0, seq=99, prev="x", digest="y"), exchange(1), exchange(2)]

        for name, owned in (("copied", False), ("owned", True)):
            writer = EvidenceWriter(tmp_path / name)
            writer.start(inline=inline)
            assert writer.submit_many(batch(), owned=owned)
            assert writer.submit_many(batch(), owned=owned)
            assert writer.close()
        segment = "segment-000001.jsonl"
        copied = (tmp_path / "copied" / segment).read_bytes()
        assert copied.count(b"\n") == 6
        assert (tmp_path / "owned" / segment).read_bytes() == copied
        assert verify_bundle(tmp_path / "owned").ok

    def test_kind_required(self, tmp_path: Path) -> None:
        """A record without a string kind is a programming error."""
        writer = EvidenceWriter(tmp_path / "b")
        with pytest.raises(ValueError, match="kind"):
            writer.submit({"method": "tools/call"})

    def test_bundle_json_and_closed_summary(self, tmp_path: Path) -> None:
        """bundle.json names format, tool and creation time, and gains a closing summary."""
        bundle = write_bundle(tmp_path / "b", 2, clock=FakeClock(5.0))
        meta = load_json(bundle / "bundle.json")
        assert (meta["format"], meta["tool"], meta["createdAt"]) == (2, "mcp-tap", 5.0)
        assert meta["signing"] is None
        last = read_bundle(bundle).records[-1]
        assert meta["closed"] == {"at": 5.0, "segments": 1, "records": 2, "lastSeq": 1,
                                  "chainHead": last["digest"], "lost": 0, "end": "closed"}

    def test_manifest(self, tmp_path: Path) -> None:
        """The manifest attests the file's size, SHA-256, seq range and chain head."""
        bundle = write_bundle(tmp_path / "b", 3, clock=FakeClock(7.0))
        manifest = load_json(bundle / manifest_name(1))
        records = read_bundle(bundle).records
        assert manifest["firstSeq"] == 0
        assert manifest["lastSeq"] == 2
        assert manifest["count"] == 3
        assert manifest["bytes"] == segment(bundle).stat().st_size
        assert manifest["chainHead"] == records[-1]["digest"]
        assert manifest["prevSegmentChainHead"] == ""
        assert (manifest["createdAt"], manifest["closedAt"]) == (7.0, 7.0)

    def test_manifest_attests_what_the_writer_wrote(self, tmp_path: Path) -> None:
        """A segment someone else appended to while it was open does not match its
        manifest (size and SHA-256 of the writer's own bytes), and verify says so."""
        bundle = tmp_path / "b"
        with capture_logs() as logs, EvidenceWriter(bundle) as writer:
            for i in range(3):
                assert writer.submit(exchange(i))
            assert writer.flush(timeout=10)
            written = segment(bundle).read_bytes()
            with segment(bundle).open("ab") as other:
                other.write(b'{"kind":"exchange","seq":3}\n')
        manifest = load_json(bundle / manifest_name(1))
        assert manifest["bytes"] == len(written)
        assert manifest["fileSha256"] == hashlib.sha256(written).hexdigest()
        assert [e["event"] for e in logs if e["event"] == "evidence.segment_changed"] == [
            "evidence.segment_changed"]
        report = verify_bundle(bundle)
        assert ("manifest", "error") in [(p.kind, p.severity) for p in report.problems]

    def test_refuses_existing_bundle(self, tmp_path: Path) -> None:
        """A directory that already holds a bundle is not written into again."""
        bundle = write_bundle(tmp_path / "b", 1)
        with pytest.raises(InputError, match="already holds an evidence bundle"):
            EvidenceWriter(bundle).start()

    def test_rotation_by_size(self, tmp_path: Path) -> None:
        """Small segments rotate by size and the chain verifies across them."""
        bundle = write_bundle(tmp_path / "b", 10, max_segment_bytes=300)
        loaded = read_bundle(bundle)
        assert len(loaded.segments) > 1
        assert sum(s.manifest["count"] for s in loaded.segments if s.manifest) == 10
        heads = [s.manifest["chainHead"] for s in loaded.segments if s.manifest]
        links = [s.manifest["prevSegmentChainHead"] for s in loaded.segments if s.manifest]
        assert links == ["", *heads[:-1]]
        report = verify_bundle(bundle)
        assert (report.ok, report.records, report.segments) == (True, 10, len(loaded.segments))

    def test_rotation_by_age(self, tmp_path: Path) -> None:
        """A segment older than the age limit is closed and the next record opens a new one."""
        clock = FakeClock(1000.0)
        with EvidenceWriter(tmp_path / "b", max_segment_age_s=10, clock=clock) as writer:
            writer.submit(exchange(0))
            writer.submit(exchange(1))
            assert writer.flush(timeout=10)
            clock.now = 1011.0
            writer.submit(exchange(2))
            assert writer.flush(timeout=10)
            clock.now = 1022.0
            writer.submit(exchange(3))
        loaded = read_bundle(tmp_path / "b")
        counts = [s.manifest["count"] for s in loaded.segments if s.manifest]
        created = [s.manifest["createdAt"] for s in loaded.segments if s.manifest]
        assert (counts, created) == ([2, 1, 1], [1000.0, 1011.0, 1022.0])
        assert writer.segments == 3
        assert verify_bundle(tmp_path / "b").ok

    def test_full_queue_counts_logs_and_records_gap(self, tmp_path: Path) -> None:
        """With the disk stuck, submit never waits: losses are counted, logged and a gap written."""
        entered, release = threading.Event(), threading.Event()

        def stuck_opener(path: Path) -> io.FileIO:
            entered.set()
            release.wait(timeout=30)
            return io.FileIO(path, "ab")

        writer = EvidenceWriter(tmp_path / "b", queue_size=2, opener=stuck_opener)
        writer.start()
        try:
            assert writer.submit(exchange(0))
            assert entered.wait(timeout=30)  # the writer holds record 0 and waits on the disk
            with capture_logs() as logs:
                results = [writer.submit(exchange(i)) for i in range(1, 6)]
        finally:
            release.set()
        assert results == [True, True, False, False, False]
        assert writer.lost == 3
        assert any(e["event"] == "evidence.lost" and e["log_level"] == "warning" for e in logs)
        assert writer.flush(timeout=30)
        assert writer.submit(exchange(6))
        assert writer.close(timeout=30)
        records = read_bundle(tmp_path / "b").records
        assert [r["kind"] for r in records] == ["exchange"] * 3 + ["gap", "exchange"]
        assert (records[3]["lost"], records[3]["reason"]) == (3, "queue full")
        report = verify_bundle(tmp_path / "b")
        assert not report.ok
        assert [p.message for p in report.problems] == [
            "gap: 3 records lost (queue full) at record seq 3 in segment-000001.jsonl"
        ]

    @pytest.mark.parametrize("partial", [False, True])
    def test_disk_failure_counted_and_gap_recorded(self, tmp_path: Path, partial: bool) -> None:
        """Records the disk refuses are counted and a gap record follows once it recovers."""
        disk = Disk()
        disk.partial = partial
        with EvidenceWriter(tmp_path / "b", opener=disk.open) as writer:
            writer.submit(exchange(0))
            writer.submit(exchange(1))
            assert writer.flush(timeout=30)
            disk.failing = True
            writer.submit(exchange(2))
            writer.submit(exchange(3))
            assert writer.flush(timeout=30)
            disk.failing = False
            writer.submit(exchange(4))
        assert writer.lost_disk == 2
        assert writer.disk_errors >= 2
        records = read_bundle(tmp_path / "b").records
        assert [r.get("rpcId", r["kind"]) for r in records] == [0, 1, "gap", 4]
        assert (records[2]["lost"], records[2]["reason"]) == (2, "disk error")
        report = verify_bundle(tmp_path / "b")
        assert [(p.kind, p.seq) for p in report.problems] == [("gap", 2)]
        assert "gap: 2 records lost (disk error)" in report.problems[0].message

    def test_unrepairable_segment_abandoned(self, tmp_path: Path) -> None:
        """A half-written line that cannot be cut off leaves its segment unmanifested."""
        disk = Disk()
        with EvidenceWriter(tmp_path / "b", opener=disk.open) as writer:
            writer.submit(exchange(0))
            assert writer.flush(timeout=30)
            disk.failing = disk.partial = disk.truncate_fails = True
            writer.submit(exchange(1))
            assert writer.flush(timeout=30)
            disk.failing = disk.partial = disk.truncate_fails = False
            writer.submit(exchange(2))
        assert (writer.lost_disk, writer.segments) == (1, 2)
        report = verify_bundle(tmp_path / "b")
        assert {(p.kind, p.segment) for p in report.problems} == {
            ("truncated", "segment-000001.jsonl"),
            ("manifest", "segment-000001.jsonl"),
            ("gap", "segment-000002.jsonl"),
        }

    def test_unserialisable_record_becomes_gap(self, tmp_path: Path) -> None:
        """Records orjson cannot encode (bytes, dataclasses) are lost as counted gaps."""

        @dataclasses.dataclass
        class Body:
            text: str

        with EvidenceWriter(tmp_path / "b") as writer:
            writer.submit(exchange(0, body=b"raw"))
            writer.submit(exchange(1, body=Body("x")))
            writer.submit(exchange(2))
        assert writer.lost_invalid == 2
        records = read_bundle(tmp_path / "b").records
        assert [r["kind"] for r in records] == ["gap", "gap", "exchange"]
        assert {r.get("reason") for r in records[:2]} == {"unserialisable record"}

    def test_submit_after_close_is_lost(self, tmp_path: Path) -> None:
        """A record submitted after close is refused and counted, not silently dropped."""
        writer = EvidenceWriter(tmp_path / "b")
        writer.start()
        assert writer.close(timeout=30)
        assert not writer.submit(exchange(0))
        assert writer.lost == 1

    def test_close_without_start_counts_queued(self, tmp_path: Path) -> None:
        """Closing a writer that never started counts its queued records as lost."""
        writer = EvidenceWriter(tmp_path / "b")
        writer.submit(exchange(0))
        assert writer.close(timeout=30)
        assert writer.lost == 1
        assert not (tmp_path / "b").exists()

    def test_inline_writes_before_submit_returns(self, tmp_path: Path) -> None:
        """An inline writer (no thread) has each batch on disk when submit returns; the
        bundle is the same as the thread's: chained, manifested, closed, verified."""
        writer = EvidenceWriter(tmp_path / "b")
        writer.start(inline=True)
        assert not any(t.name == "mcp-tap-evidence" for t in threading.enumerate())
        assert writer.submit_many([exchange(0), exchange(1)])
        assert writer.counters()["written"] == 2 and writer.flush(timeout=0)
        assert writer.submit(exchange(2))
        assert writer.written == 3
        assert writer.close(timeout=30)
        assert not writer.submit(exchange(3))
        assert writer.lost == 1
        records = read_bundle(tmp_path / "b").records
        assert [r["rpcId"] for r in records] == [0, 1, 2]
        report = verify_bundle(tmp_path / "b")
        assert (report.ok, report.records) == (True, 3)

    def test_inline_states_losses_and_rotates_when_idle(self, tmp_path: Path) -> None:
        """Inline: disk errors become a gap once the disk recovers, reported losses a gap at
        once, an abrupt close its in-flight gap; idle() rotates an aged segment."""
        disk, clock = Disk(), FakeClock(1000.0)
        writer = EvidenceWriter(tmp_path / "b", opener=disk.open, clock=clock,
                                max_segment_age_s=10)
        writer.start(inline=True)
        writer.submit(exchange(0))
        disk.failing = True
        writer.submit_many([exchange(1), exchange(2)])
        assert (writer.lost_disk, writer.failing) == (2, True)
        disk.failing = False
        writer.idle()  # the gap goes out with the next write or when idle
        assert writer.failing is False
        writer.report_lost(4, "recording queue full")
        clock.now = 1011.0
        writer.idle()
        assert writer.segments == 1  # closed by age; the next record opens segment 2
        writer.submit(exchange(3))
        assert writer.segments == 2
        assert writer.close(timeout=30, abrupt=True, inflight=2)
        records = read_bundle(tmp_path / "b").records
        assert [(r["kind"], r.get("lost")) for r in records] == [
            ("exchange", None), ("gap", 2), ("gap", 4), ("exchange", None), ("gap", 2)]
        meta = load_json(tmp_path / "b" / "bundle.json")
        assert (meta["closed"]["end"], meta["closed"]["lost"]) == ("abrupt", 8)
        assert verify_bundle(tmp_path / "b").lost == 8

    def test_rejects_bad_limits(self, tmp_path: Path) -> None:
        """Non-positive limits are refused at construction."""
        with pytest.raises(ValueError):
            EvidenceWriter(tmp_path, queue_size=0)


# -- reader --------------------------------------------------------------------------------


class TestReadBundle:
    def test_exchanges(self, tmp_path: Path) -> None:
        """Bundle.exchanges() returns only exchange records, in order."""
        with EvidenceWriter(tmp_path / "b") as writer:
            writer.submit(exchange(0))
            writer.submit({"kind": "hop-comparison", "findings": []})
            writer.submit(exchange(1))
        bundle = read_bundle(tmp_path / "b")
        assert [r["rpcId"] for r in bundle.exchanges()] == [0, 1]
        assert len(bundle.records) == 3
        assert [r["seq"] for r in iter_records(tmp_path / "b")] == [0, 1, 2]

    def test_unknown_format_message(self, tmp_path: Path) -> None:
        """A bundle of format 7 is rejected with the exact message."""
        bundle = write_bundle(tmp_path / "b", 1)
        meta = load_json(bundle / "bundle.json")
        save_json(bundle / "bundle.json", {**meta, "format": 7})
        with pytest.raises(BundleFormatError) as caught:
            read_bundle(bundle)
        assert str(caught.value) == (
            f"{bundle / 'bundle.json'}: evidence format 7 is not supported "
            "(this mcp-tap reads 1, 2)"
        )

    def test_malformed_line_named(self, tmp_path: Path) -> None:
        """A malformed line raises naming the file and line; lenient mode skips it."""
        bundle = write_bundle(tmp_path / "b", 3)
        lines = lines_of(bundle)
        rewrite(bundle, 1, [*lines[:2], b"{not json\n", *lines[2:]])
        malformed = r"segment-000001\.jsonl line 3: not valid JSON"
        with pytest.raises(BundleFormatError, match=malformed):
            read_bundle(bundle)
        # Lenient skips the line, and reads no further than the size the manifest states
        # (the inserted line pushed the last record past it).
        assert len(read_bundle(bundle, lenient=True).records) == 2

    def test_not_a_bundle(self, tmp_path: Path) -> None:
        """A missing directory and a directory without bundle.json are input errors."""
        with pytest.raises(InputError, match="not a directory"):
            read_bundle(tmp_path / "missing")
        with pytest.raises(InputError, match=r"no bundle\.json"):
            read_bundle(tmp_path)

    def test_version_zero_migrated(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """A synthetic version-0 bundle is upgraded on read yet still verifies as stored."""
        with EvidenceWriter(tmp_path / "b") as writer:
            writer.submit({"kind": "exchange", "hopName": "edge"})
        bundle = tmp_path / "b"
        for name in ("bundle.json", manifest_name(1)):
            save_json(bundle / name, {**load_json(bundle / name), "format": 0})
        with pytest.raises(BundleFormatError, match="evidence format 0 is not supported"):
            read_bundle(bundle)

        def rename_hop(record: dict[str, Any]) -> dict[str, Any]:
            upgraded = {k: v for k, v in record.items() if k != "hopName"}
            if "hopName" in record:
                upgraded["hop"] = record["hopName"]
            return upgraded

        monkeypatch.setitem(MIGRATIONS, 0, Migration(record=rename_hop))
        loaded = read_bundle(bundle)
        assert loaded.format == 0
        assert loaded.records[0]["hop"] == "edge"
        assert "hopName" not in loaded.records[0]
        assert verify_bundle(bundle).ok


# -- verify --------------------------------------------------------------------------------


class TestVerifyBundle:
    def test_flipped_byte(self, tmp_path: Path) -> None:
        """A flipped byte inside record 12 is a digest mismatch naming seq 12."""
        bundle = write_bundle(tmp_path / "b", 20)
        lines = lines_of(bundle)
        damaged = bytearray(lines[12])
        at = damaged.index(b"payload")
        damaged[at] ^= 0x01
        lines[12] = bytes(damaged)
        rewrite(bundle, 1, lines)
        report = verify_bundle(bundle)
        assert not report.ok
        digest = [p for p in report.problems if p.kind == "digest"]
        assert [(p.seq, p.message) for p in digest] == [
            (12, "record seq 12 in segment-000001.jsonl: digest mismatch")
        ]
        assert any(p.kind == "manifest" and "fileSha256" in p.message for p in report.problems)

    def test_deleted_record(self, tmp_path: Path) -> None:
        """A deleted line is reported as missing seq (records deleted)."""
        bundle = write_bundle(tmp_path / "b", 10)
        lines = lines_of(bundle)
        del lines[5]
        rewrite(bundle, 1, lines)
        report = verify_bundle(bundle)
        sequence = [p for p in report.problems if p.kind == "sequence"]
        assert [(p.seq, "deleted" in p.message) for p in sequence] == [(5, True)]
        assert not report.ok

    def test_deleted_last_record(self, tmp_path: Path) -> None:
        """Deleting the last record is caught by the closing summary."""
        bundle = write_bundle(tmp_path / "b", 4)
        rewrite(bundle, 1, lines_of(bundle)[:-1])
        report = verify_bundle(bundle)
        assert any(p.kind == "sequence" and p.seq == 3 and "at the end" in p.message
                   for p in report.problems)

    @pytest.mark.parametrize(("closed", "fragment"), [
        ("yes", "closing summary must be an object, got 'yes'"),
        ({"lost": "lots"}, "closing lost must be an integer >= 0, got 'lots'"),
        ({"lost": -7}, "closing lost must be an integer >= 0, got -7"),
        ({"records": "x"}, "closing records must be an integer >= 0, got 'x'"),
        ({"segments": None}, "closing segments must be an integer >= 0, got None"),
        ({"lastSeq": "3"}, "closing lastSeq must be an integer >= -1, got '3'"),
        ({"chainHead": 5}, "closing chainHead must be a string, got 5"),
    ])
    def test_closing_summary_of_the_wrong_shape(
            self, closed: Any, fragment: str, tmp_path: Path) -> None:
        """An edited closing summary is a format error, not a summary to skip field by field."""
        bundle = write_bundle(tmp_path / "b", 4)
        meta = load_json(bundle / "bundle.json")
        meta["closed"] = closed if not isinstance(closed, dict) else {**meta["closed"], **closed}
        save_json(bundle / "bundle.json", meta)
        report = verify_bundle(bundle)
        assert not report.ok
        assert [p.message for p in report.problems if p.kind == "format"] == [
            f"bundle.json: {fragment}"]

    def test_reordered_records(self, tmp_path: Path) -> None:
        """Two swapped lines are reported once as reordered, with no broken chain links."""
        bundle = write_bundle(tmp_path / "b", 6)
        lines = lines_of(bundle)
        lines[3], lines[4] = lines[4], lines[3]
        rewrite(bundle, 1, lines)
        report = verify_bundle(bundle)
        sequence = [p for p in report.problems if p.kind == "sequence"]
        assert [(p.seq, "reordered" in p.message) for p in sequence] == [(3, True)]
        assert "chain" not in kinds(report)

    def test_forged_record_breaks_chain(self, tmp_path: Path) -> None:
        """A record rewritten with a fresh digest breaks the next record's prev link."""
        bundle = write_bundle(tmp_path / "b", 6)
        lines = lines_of(bundle)
        record = orjson.loads(lines[2])
        record["note"] = "forged"
        record["digest"] = record_digest(record)
        lines[2] = orjson.dumps(record) + b"\n"
        rewrite(bundle, 1, lines)
        report = verify_bundle(bundle)
        assert [(p.kind, p.seq) for p in report.problems if p.kind in ("chain", "digest")] == [
            ("chain", 3)
        ]

    def test_truncated_segment(self, tmp_path: Path) -> None:
        """A segment cut in the middle of its last line is reported as truncated."""
        bundle = write_bundle(tmp_path / "b", 5)
        data = segment(bundle).read_bytes()
        segment(bundle).write_bytes(data[:-20])
        report = verify_bundle(bundle)
        truncated = [p for p in report.problems if p.kind == "truncated"]
        assert len(truncated) == 1
        assert "truncated segment" in truncated[0].message
        assert not report.ok

    def test_unclosed_last_segment_is_warning(self, tmp_path: Path) -> None:
        """A running writer's last segment without manifest is a warning; the bundle is ok."""
        bundle = write_bundle(tmp_path / "b", 6, max_segment_bytes=300)
        last = len(read_bundle(bundle).segments)
        (bundle / manifest_name(last)).unlink()
        meta = load_json(bundle / "bundle.json")
        del meta["closed"]
        save_json(bundle / "bundle.json", meta)
        report = verify_bundle(bundle)
        assert report.ok
        assert [(p.kind, p.severity) for p in report.problems] == [("unclosed", "warning")]

    def test_missing_manifest_is_error(self, tmp_path: Path) -> None:
        """A missing manifest on a segment that is not the last one is an error."""
        bundle = write_bundle(tmp_path / "b", 6, max_segment_bytes=300)
        (bundle / manifest_name(1)).unlink()
        report = verify_bundle(bundle)
        assert [(p.kind, p.severity) for p in report.problems] == [("manifest", "error")]

    def test_deleted_trailing_segment(self, tmp_path: Path) -> None:
        """Deleting the last segment and its manifest is caught by the closing summary."""
        bundle = write_bundle(tmp_path / "b", 6, max_segment_bytes=300)
        last = len(read_bundle(bundle).segments)
        segment(bundle, last).unlink()
        (bundle / manifest_name(last)).unlink()
        report = verify_bundle(bundle)
        assert not report.ok
        assert any("segments deleted" in p.message for p in report.problems)
        assert any("missing at the end" in p.message for p in report.problems)

    def test_cross_segment_link(self, tmp_path: Path) -> None:
        """Replacing a whole middle segment's chain shows as a broken link across segments."""
        bundle = write_bundle(tmp_path / "b", 6, max_segment_bytes=300)
        first = orjson.loads(lines_of(bundle, 2)[0])
        first["prev"] = "0" * 64
        first["digest"] = record_digest(first)
        rewrite(bundle, 2, [orjson.dumps(first) + b"\n", *lines_of(bundle, 2)[1:]])
        report = verify_bundle(bundle)
        assert ("chain", first["seq"]) in {(p.kind, p.seq) for p in report.problems}

    def test_empty_bundle_ok(self, tmp_path: Path) -> None:
        """A closed bundle with no records verifies with zero records and segments."""
        with EvidenceWriter(tmp_path / "b"):
            pass
        report = verify_bundle(tmp_path / "b")
        assert (report.ok, report.records, report.segments) == (True, 0, 0)


# -- the verify command --------------------------------------------------------------------


class TestVerifyCommand:
    def test_ok_exit_0(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A sound bundle exits 0 with an ok summary line."""
        bundle = write_bundle(tmp_path / "b", 3)
        assert main(["verify", str(bundle)]) == 0
        assert capsys.readouterr().out.splitlines()[-1] == "ok: 3 records in 1 segment"

    def test_problems_exit_1(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A damaged bundle exits 1, one line per problem and a FAILED line."""
        bundle = write_bundle(tmp_path / "b", 3)
        rewrite(bundle, 1, lines_of(bundle)[:-1])
        assert main(["verify", str(bundle)]) == 1
        out = capsys.readouterr().out.splitlines()
        assert out[-1] == f"FAILED: {len(out) - 1} problems"
        assert all(line.startswith("error: ") for line in out[:-1])

    def test_missing_dir_exit_2(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A directory that does not exist is one error line and exit 2."""
        assert main(["verify", str(tmp_path / "nope")]) == 2
        assert capsys.readouterr().err.startswith("mcp-tap: error: ")

    def test_unknown_format_exit_2(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """An unknown format version is one error line and exit 2."""
        bundle = write_bundle(tmp_path / "b", 1)
        save_json(bundle / "bundle.json", {**load_json(bundle / "bundle.json"), "format": 7})
        assert main(["verify", str(bundle)]) == 2
        assert "evidence format 7 is not supported" in capsys.readouterr().err

    def test_json_shape(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """--json prints the report object with one object per problem."""
        bundle = write_bundle(tmp_path / "b", 4)
        lines = lines_of(bundle)
        lines[1], lines[2] = lines[2], lines[1]
        rewrite(bundle, 1, lines)
        assert main(["verify", "--json", str(bundle)]) == 1
        report = orjson.loads(capsys.readouterr().out)
        assert set(report) == {"path", "format", "ok", "records", "segments", "errors",
                               "warnings", "problems", "chainHead", "bundleId", "signer",
                               "signed", "exchanges", "lost", "end", "inflight"}
        assert (report["ok"], report["records"], report["segments"]) == (False, 4, 1)
        assert report["errors"] == len(report["problems"])
        assert all(set(p) == {"kind", "severity", "segment", "seq", "message"}
                   for p in report["problems"])
        assert {"kind": "sequence", "severity": "error", "segment": "segment-000001.jsonl",
                "seq": 1, "message": "record seq 1 in segment-000001.jsonl: comes after seq 2 "
                "(records reordered)"} in report["problems"]


class TestLossStated:
    """The writer states every loss in the bundle, with the count its counters show."""

    def test_submit_many_is_one_batch(self, tmp_path: Path) -> None:
        """A batch submitted in one call is written in order and verifies."""
        with EvidenceWriter(tmp_path / "b") as writer:
            assert writer.submit_many([exchange(i) for i in range(5)])
            assert writer.submit_many([])
        records = read_bundle(tmp_path / "b").records
        assert [r["rpcId"] for r in records] == [0, 1, 2, 3, 4]
        assert verify_bundle(tmp_path / "b").ok

    def test_abrupt_close_states_in_flight(self, tmp_path: Path) -> None:
        """close(abrupt=True) writes the in-flight count as a gap and ends the bundle abrupt."""
        writer = EvidenceWriter(tmp_path / "b")
        writer.start()
        writer.submit(exchange(0))
        assert writer.close(abrupt=True, inflight=3)
        meta = load_json(tmp_path / "b" / "bundle.json")
        assert (meta["closed"]["end"], meta["closed"]["inflight"], meta["closed"]["lost"]) == (
            "abrupt", 3, 3)
        report = verify_bundle(tmp_path / "b")
        assert (report.ok, report.end, report.inflight, report.lost) == (False, "abrupt", 3, 3)
        assert [p.kind for p in report.problems] == ["gap", "abrupt"]
        assert writer.counters()["lost_total"] == 3

    def test_deleted_directory_starts_a_fresh_bundle(self, tmp_path: Path) -> None:
        """rm -rf of the bundle: the next records go to a fresh bundle led by the gap."""
        import shutil

        with EvidenceWriter(tmp_path / "b") as writer:
            writer.submit_many([exchange(i) for i in range(5)])
            assert writer.flush(timeout=30)
            shutil.rmtree(tmp_path / "b")
            writer.submit(exchange(5))
        records = read_bundle(tmp_path / "b").records
        assert [(r["kind"], r.get("lost"), r.get("reason")) for r in records] == [
            ("gap", 5, "evidence directory deleted"), ("exchange", None, None)]
        assert (writer.lost_deleted, writer.lost_total) == (5, 5)
        assert load_json(tmp_path / "b" / "bundle.json")["previous"]["records"] == 5

    def test_deleted_segment_states_its_records(self, tmp_path: Path) -> None:
        """The open segment unlinked: its records are stated lost; the chain goes on."""
        with EvidenceWriter(tmp_path / "b") as writer:
            writer.submit_many([exchange(i) for i in range(3)])
            assert writer.flush(timeout=30)
            segment(tmp_path / "b").unlink()
            writer.submit(exchange(3))
        gaps = [r for r in read_bundle(tmp_path / "b", lenient=True).records
                if r["kind"] == "gap"]
        assert [(g["lost"], g["reason"]) for g in gaps] == [(3, "segment file deleted")]
        assert writer.lost_total == 3
