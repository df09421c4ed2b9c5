"""A bundle's files: ``bundle.json``, the segment files and their signed manifests, and the
hash chain that runs through them (the disk side of :class:`~mcp_tap.evidence.EvidenceWriter`).

:class:`BundleFiles` is driven by one thread at a time (the writer thread, or the caller of an
inline writer): it assigns ``seq``/``prev`` as records reach the disk, rotates segments by
size and age, seals each closed segment with a manifest (size and SHA-256 of the bytes
written, the chain heads, the gate's tallies), writes the gap records of losses it was told
about (:meth:`BundleFiles.lose`) and notices a deleted segment or directory. The queue in
front of it and the losses before the disk are :mod:`mcp_tap.evidence.writer`'s.

Two hooks tell a follower (the shipper, :mod:`mcp_tap.evidence.shipping`) what became final:
``on_sealed(directory, number)`` once a segment and its manifest are on disk, and
``on_bundle(directory, closed)`` each time ``bundle.json`` is written. A hook runs on the
writing thread, so it must only hand the news over (it must never block).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

import structlog

from mcp_tap.errors import InputError
from mcp_tap.evidence.disk import (
    Every,
    Opener,
    SegmentFile,
    make_private_dirs,
    make_reserve,
    release_reserve,
    write_all,
    write_json_atomically,
)
from mcp_tap.evidence.format import (
    BUNDLE_FILE,
    END_CLOSED,
    FORMAT_VERSION,
    SIGNING,
    TOOL_NAME,
    encode_record_into,
    manifest_name,
    manifest_number,
    segment_name,
    segment_number,
)
from mcp_tap.evidence.signing import Signer
from mcp_tap.version import __version__

REASON_DISK: Final = "disk error"
REASON_INVALID: Final = "unserialisable record"
REASON_DIR_DELETED: Final = "evidence directory deleted"
REASON_SEGMENT_DELETED: Final = "segment file deleted"

_LOG_EVERY_S: Final = 1.0

log = structlog.get_logger("mcp_tap.evidence")

SealedHook = Callable[[Path, int], None]
"""``on_sealed(directory, number)``: segment ``number`` and its manifest are on disk."""
BundleHook = Callable[[Path, bool], None]
"""``on_bundle(directory, closed)``: ``bundle.json`` was written (``closed``: the summary)."""


class Owned(list[dict[str, Any]]):
    """A batch whose record dicts the writer may change (``submit_many(owned=True)``)."""

    __slots__ = ()


class SegmentTallier(Protocol):
    """Counts a segment's record lines for its manifest's ``tallies`` member (the gate's:
    :class:`mcp_tap.gate.segments.SegmentTally`)."""

    def add_data(self, data: bytes) -> None:
        """Count whole record lines the writer has just written."""

    def seal(self) -> dict[str, Any]:
        """The tallies of every line counted, as the manifest holds them."""


@dataclass(slots=True)
class _OpenSegment:
    number: int
    path: Path
    file: SegmentFile
    created_at: float
    first_seq: int
    prev_head: str
    offset: int = 0
    count: int = 0
    gaps: int = 0  # ... of which gap records
    stated: int = 0  # the losses those gap records state
    written: Any = field(default_factory=hashlib.sha256)  # of the bytes written, in order
    tally: SegmentTallier | None = None  # what its manifest's tallies are built from


@dataclass(frozen=True, slots=True)
class Layout:
    """How segments are cut and sealed (the writer's settings that concern the files)."""

    max_bytes: int
    max_age: float
    clock: Callable[[], float]
    opener: Opener
    signer: Signer | None
    tallies: Callable[[], SegmentTallier] | None


class BundleFiles:
    """One bundle's files and chain, and the losses that reached it (see the module doc).

    Counters, readable from any thread: ``written`` (records on disk, gap records included),
    ``bytes_written``, ``segments`` (files opened), ``disk_errors``, ``failing`` (the last
    disk operation failed), ``lost_disk``, ``lost_invalid``, ``lost_deleted``.
    """

    def __init__(self, directory: Path, layout: Layout, meta: Mapping[str, Any]) -> None:
        """Files for ``directory``; ``meta`` adds keys to ``bundle.json``."""
        self.directory = directory
        self.layout = layout
        self._max_bytes = layout.max_bytes
        self._max_age = layout.max_age
        self._clock = layout.clock
        self._opener = layout.opener
        self._signer = layout.signer
        self._tallies = layout.tallies
        self._extra_meta = {k: v for k, v in meta.items() if k != "closed"}
        self.on_sealed: SealedHook | None = None
        self.on_bundle: BundleHook | None = None
        # The closing summary's parts set by the writer (end, heldBack, hopPairing, ...).
        self.end: dict[str, Any] = {"end": END_CLOSED}
        self.held: dict[str, Any] | None = None
        self.pairing: dict[str, Any] | None = None
        self.shipping: dict[str, Any] | None = None

        self.written = 0
        self.bytes_written = 0
        self.segments = 0
        self.disk_errors = 0
        self.failing = False
        self.lost_disk = 0
        self.lost_invalid = 0
        self.lost_deleted = 0

        self._meta: dict[str, Any] = {}
        self._seq = 0
        self._prev = ""
        self._next_segment = 1
        self._segment: _OpenSegment | None = None
        self.unrecorded: dict[str, int] = {}  # reason -> losses without a gap record on disk
        self._stated = 0  # losses of this bundle that are on disk as gap records
        self._gap_records = 0  # how many records of this bundle are gap records
        self._last_disk_error = ""
        self._disk_log = Every(_LOG_EVERY_S)

    def add_unrecorded(self, reason: str, lost: int) -> None:
        """Losses to state with a gap record at the next write (counted by the caller)."""
        self.unrecorded[reason] = self.unrecorded.get(reason, 0) + lost

    def finish(self) -> None:
        """Write pending gaps, seal the open segment and write the closing summary, using
        the space reserve if the disk is (still) full."""
        if self.unrecorded and release_reserve(self.directory):
            # The disk is (still) full: the reserve makes room for the gap and the summary.
            self.record_gaps()
        self.close_segment()
        if not self.write_closed_summary() and release_reserve(self.directory):
            self.write_closed_summary()
        release_reserve(self.directory)

    def create_bundle(self, previous: dict[str, Any] | None = None) -> None:
        """Write a new ``bundle.json`` (OSError propagates; the caller decides what it means)."""
        make_private_dirs(self.directory)
        taken = [
            entry.name
            for entry in self.directory.iterdir()
            if entry.name == BUNDLE_FILE
            or segment_number(entry.name) is not None
            or manifest_number(entry.name) is not None
        ]
        if taken:
            raise InputError(
                f"{self.directory}: already holds an evidence bundle; "
                "give each run its own directory"
            )
        meta: dict[str, Any] = {
            **self._extra_meta,
            "format": FORMAT_VERSION,
            "bundleId": secrets.token_hex(16),
            "createdAt": self._clock(),
            "tool": TOOL_NAME,
            "toolVersion": __version__,
            SIGNING: self._signer.signing() if self._signer is not None else None,
        }
        if previous is not None:
            meta["previous"] = previous
        self._meta = meta
        write_json_atomically(self.directory / BUNDLE_FILE, self._signed(meta))
        make_reserve(self.directory)
        if self.on_bundle is not None:
            self.on_bundle(self.directory, False)

    def _signed(self, value: dict[str, Any]) -> dict[str, Any]:
        return self._signer.sign(value) if self._signer is not None else value

    def lose(self, reason: str, count: int = 1) -> None:
        """Count ``count`` records lost on the way to the disk, to be stated by a gap."""
        if reason == REASON_INVALID:
            self.lost_invalid += count
        else:
            self.lost_disk += count
        self.unrecorded[reason] = self.unrecorded.get(reason, 0) + count

    def record_gaps(self) -> bool:
        """Write a gap record per reason with unrecorded losses; False if the disk refused."""
        for reason in list(self.unrecorded):
            lost = self.unrecorded[reason]
            gap: dict[str, Any] = {"kind": "gap", "lost": lost, "reason": reason}
            if reason == REASON_DISK and self._last_disk_error:
                gap["error"] = self._last_disk_error
            if self.write([gap]):
                # The losses stay unrecorded and are retried with the next write.
                return False
            del self.unrecorded[reason]
        return True

    def segment_expired(self) -> bool:
        """Whether the open segment holds records and is ``max_segment_age_s`` old."""
        segment = self._segment
        return (
            segment is not None
            and segment.count > 0
            and self._clock() - segment.created_at >= self._max_age
        )

    def write(self, records: list[dict[str, Any]]) -> int:
        """Chain, encode and write ``records`` with one write; how many the disk refused.

        A record orjson cannot encode is counted and skipped; the caller counts the records
        the disk refused (a gap record the disk refused is retried, not lost).
        """
        pieces: list[bytes | memoryview] = []  # of every line, joined once (encode_record_into)
        seq, prev = self._seq, self._prev
        lines = 0
        owned = type(records) is Owned
        for record in records:
            if owned:  # the same keys and values as the copy below (orjson sorts the keys)
                full = record
                full["seq"], full["prev"] = seq, prev
            else:
                full = {**record, "seq": seq, "prev": prev}
            full.pop("digest", None)
            try:
                record_hash = encode_record_into(full, pieces)
            except TypeError as exc:  # orjson.JSONEncodeError is a TypeError
                log.error("evidence.invalid_record", kind=record.get("kind"), error=str(exc))
                self.lose(REASON_INVALID)
                continue
            lines += 1
            seq, prev = seq + 1, record_hash
        if not lines:
            return 0
        data = b"".join(pieces)
        segment = self._segment or self._open_segment()
        if segment is None:
            return lines
        try:
            write_all(segment.file, data)
        except OSError as exc:
            self._disk_failed("write", exc)
            self._repair(segment)
            return lines
        self.failing = False
        segment.written.update(data)
        if segment.tally is not None:
            self._tally(segment, data)
        self._seq, self._prev = seq, prev
        gaps = [r for r in records if r.get("kind") == "gap"]
        if gaps:
            stated = sum(r["lost"] for r in gaps if isinstance(r.get("lost"), int))
            segment.gaps += len(gaps)
            segment.stated += stated
            self._gap_records += len(gaps)
            self._stated += stated
        segment.offset += len(data)
        segment.count += lines
        self.written += lines
        self.bytes_written += len(data)
        if segment.offset >= self._max_bytes:
            self.close_segment()
        return 0

    def check_deleted(self) -> None:
        """Notice a deleted segment or directory and start over where the records were lost."""
        segment = self._segment
        if segment is None:
            if not (self.directory / BUNDLE_FILE).exists():
                self._restart(REASON_DIR_DELETED)
            return
        try:
            linked = os.fstat(segment.file.fileno()).st_nlink > 0
        except OSError:
            linked = False
        if linked:
            return
        self._segment = None
        with contextlib.suppress(OSError):
            segment.file.close()
        if (self.directory / BUNDLE_FILE).exists():
            # Only the open segment went: its records are lost, the chain goes on, and the
            # losses its gap records stated are stated again.
            gone = segment.count - segment.gaps
            self._note_deleted(gone, REASON_SEGMENT_DELETED)
            self._stated -= segment.stated
            self._gap_records -= segment.gaps
            self.unrecorded[REASON_SEGMENT_DELETED] = (
                self.unrecorded.get(REASON_SEGMENT_DELETED, 0) + gone + segment.stated)
            return
        self._restart(REASON_DIR_DELETED)

    def _note_deleted(self, count: int, reason: str) -> None:
        self.lost_deleted += count
        log.error("evidence.deleted", reason=reason, lost=count, bundle=str(self.directory))

    def _restart(self, reason: str) -> None:
        """The bundle is gone: count what it held and open a fresh one in its place.

        The fresh bundle goes where the old one was, or, when something else is left there
        (only ``bundle.json`` was deleted), into the first free sibling ``<name>.<n>``.
        """
        gone = self._seq - self._gap_records
        # Losses the old bundle had stated on disk went with it: the new one states them.
        carried = self._stated
        previous = {"bundleId": self._meta.get("bundleId"), "reason": reason,
                    "records": self._seq}
        self._note_deleted(gone, reason)
        self._seq, self._prev, self._stated, self._gap_records = 0, "", 0, 0
        self._next_segment = 1
        self.unrecorded[reason] = self.unrecorded.get(reason, 0) + gone + carried
        base, suffix = self.directory, 0
        while True:
            try:
                self.create_bundle(previous)
            except InputError:
                suffix += 1
                self.directory = base.with_name(f"{base.name}.{suffix}")
                continue
            except OSError as exc:
                self._disk_failed("bundle.json", exc)
            return

    def _open_segment(self) -> _OpenSegment | None:
        number = self._next_segment
        path = self.directory / segment_name(number)
        try:
            file = self._opener(path)
        except OSError as exc:
            self._disk_failed("open", exc)
            return None
        self._next_segment += 1
        self.segments += 1
        self._segment = _OpenSegment(
            number=number,
            path=path,
            file=file,
            created_at=self._clock(),
            first_seq=self._seq,
            prev_head=self._prev,
            tally=self._tallies() if self._tallies is not None else None,
        )
        return self._segment

    def _tally(self, segment: _OpenSegment, data: bytes) -> None:
        """Count lines into the segment's tallies; a tallier that fails is dropped (the
        manifest then holds none, and the gate reads the segment's records)."""
        try:
            assert segment.tally is not None
            segment.tally.add_data(data)
        except Exception:
            segment.tally = None
            log.exception("evidence.tally_failed", segment=segment.path.name)

    def _repair(self, segment: _OpenSegment) -> None:
        """Cut a partly written line off again, or give the segment up if that fails too."""
        try:
            segment.file.truncate(segment.offset)
        except OSError as exc:
            self._disk_failed("truncate", exc)
            # No manifest: verify reports this segment; the chain continues in the next one.
            log.error("evidence.segment_abandoned", segment=segment.path.name)
            self._segment = None
            with contextlib.suppress(OSError):
                segment.file.close()

    def close_segment(self) -> None:
        """Fsync and close the open segment and seal it with its (signed) manifest."""
        segment = self._segment
        if segment is None:
            return
        self._segment = None
        try:
            segment.file.flush()
            os.fsync(segment.file.fileno())
        except OSError as exc:
            self._disk_failed("fsync", exc)
        finally:
            try:
                segment.file.close()
            except OSError as exc:
                self._disk_failed("close", exc)
        try:
            size = segment.path.stat().st_size
            if size != segment.offset:
                # Someone else wrote to, or cut, the open segment; the manifest attests what
                # this writer wrote, so verify finds the file does not match it.
                log.error(
                    "evidence.segment_changed",
                    segment=segment.path.name,
                    expected=segment.offset,
                    found=size,
                )
            manifest = {
                "format": FORMAT_VERSION,
                "bundleId": self._meta.get("bundleId"),
                "segment": segment.number,
                "firstSeq": segment.first_seq,
                "lastSeq": segment.first_seq + segment.count - 1,
                "count": segment.count,
                "bytes": segment.offset,
                "fileSha256": segment.written.hexdigest(),
                "chainHead": self._prev,
                "prevSegmentChainHead": segment.prev_head,
                "createdAt": segment.created_at,
                "closedAt": self._clock(),
            }
            if segment.tally is not None:
                try:
                    manifest["tallies"] = segment.tally.seal()
                except Exception:
                    log.exception("evidence.tally_failed", segment=segment.path.name)
            write_json_atomically(
                self.directory / manifest_name(segment.number), self._signed(manifest))
        except OSError as exc:
            self._disk_failed("manifest", exc)
            log.error("evidence.manifest_failed", segment=segment.path.name)
            return
        if self.on_sealed is not None:
            self.on_sealed(self.directory, segment.number)

    def write_closed_summary(self) -> bool:
        """Rewrite ``bundle.json`` with the ``closed`` summary; False if the disk refused."""
        unstated = sum(self.unrecorded.values())
        closed = {
            "at": self._clock(),
            "segments": self._next_segment - 1,
            "records": self._seq,
            "lastSeq": self._seq - 1,
            "chainHead": self._prev,
            # What this bundle states lost: its gap records, plus losses no gap could hold.
            "lost": self._stated + unstated,
            **self.end,
            **({"heldBack": self.held} if self.held else {}),
            **({"hopPairing": self.pairing} if self.pairing else {}),
            **({"shipping": self.shipping} if self.shipping else {}),
        }
        try:
            write_json_atomically(
                self.directory / BUNDLE_FILE, self._signed({**self._meta, "closed": closed}))
        except OSError as exc:
            self._disk_failed("bundle.json", exc)
            return False
        if self.on_bundle is not None:
            self.on_bundle(self.directory, True)
        return True

    def _disk_failed(self, operation: str, exc: OSError) -> None:
        self.disk_errors += 1
        self.failing = True
        self._last_disk_error = f"{operation}: {exc.strerror or exc}"
        if self._disk_log.due():
            log.error(
                "evidence.disk_error",
                operation=operation,
                error=str(exc),
                lost_disk=self.lost_disk,
                suppressed=self._disk_log.take_suppressed(),
            )


