"""The evidence writer: a bounded queue in front of one background thread that owns the disk.

Why a thread and not an asyncio task: every file operation (write, fsync, reading a closed
segment back to hash it, the manifest) is blocking, and one plain ``threading.Thread`` fed by
a ``queue.Queue(maxsize)`` keeps all of them off the event loop with no per-record hop
through ``asyncio.to_thread``. :meth:`EvidenceWriter.submit` is ``put_nowait`` under a short
lock, so the proxy's request path never waits for the disk.

Losses are counted, logged and written down, never silent:

* queue full -> ``lost`` + a rate-limited ``evidence.lost`` warning; the next record that
  fits is preceded by ``{"kind": "gap", "lost": n, "reason": "queue full"}`` (so the marker
  sits where the loss happened), or the writer adds it itself once it goes idle or closes;
* disk error -> ``lost_disk`` + ``evidence.disk_error``; a partly written line is cut off
  again (so the segment stays parsable), and a ``"disk error"`` gap record is written as soon
  as a write succeeds. If even the cut fails, the segment is abandoned without a manifest
  (``verify`` reports it) and the next record opens a new one;
* a record orjson cannot encode -> ``lost_invalid`` + a ``"unserialisable record"`` gap.

``seq``/``prev``/``digest`` are assigned by the writer thread at the moment a record reaches
the disk, so a record lost to the disk leaves no hole in the sequence: the gap record says
what is missing. Segments rotate after a write that makes them ``max_segment_bytes`` or
larger, and when they are ``max_segment_age_s`` old (checked before each write and when the
writer is idle, so a quiet segment still gets its manifest). A segment is fsynced and
manifested when it closes, not per record. Shutdown (SIGTERM in the proxy): stop accepting,
let in-flight exchanges submit, then ``await writer.aclose()``, which drains the queue, writes
pending gap records, closes the segment and adds the ``closed`` summary to ``bundle.json``.

Records must already be redacted; the writer's own records (gaps) and log lines carry only
counts, reasons and OS error strings, never record content. A submitted record belongs to the
writer from then on: the caller must not mutate it.

``fileSha256`` is computed by reading the closed segment back, because
:mod:`mcp_tap.core.hashing` (the only hashing helper) hashes whole byte strings; segments are
bounded by ``max_segment_bytes`` plus one record, so that costs one segment of memory once
per rotation, on the writer thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import io
import math
import os
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Protocol

import orjson
import structlog

from mcp_tap import __version__
from mcp_tap.core.hashing import sha256_hex
from mcp_tap.errors import InputError
from mcp_tap.evidence.format import (
    BUNDLE_FILE,
    FORMAT_VERSION,
    TOOL_NAME,
    manifest_name,
    manifest_number,
    record_digest,
    segment_name,
    segment_number,
)

DEFAULT_MAX_SEGMENT_BYTES: Final = 64 * 1024 * 1024
DEFAULT_MAX_SEGMENT_AGE_S: Final = 300.0
DEFAULT_QUEUE_SIZE: Final = 10_000
DEFAULT_CLOSE_TIMEOUT_S: Final = 30.0

REASON_QUEUE_FULL: Final = "queue full"
REASON_DISK: Final = "disk error"
REASON_INVALID: Final = "unserialisable record"
REASON_CLOSED: Final = "writer closed"

# How long the writer thread waits for a record before doing its idle work (age rotation,
# writing gap records nobody else will trigger).
_POLL_S: Final = 0.25
_LOG_EVERY_S: Final = 1.0
# orjson writes dataclasses in field order even with OPT_SORT_KEYS, and canonical_json sorts
# nothing else differently, so a dataclass would hash differently once read back as a dict.
# Refusing them keeps "digest of what was written == digest of what is read" true.
_LINE_OPTIONS: Final = orjson.OPT_PASSTHROUGH_DATACLASS

log = structlog.get_logger("mcp_tap.evidence")


class SegmentFile(Protocol):
    """What the writer needs from an open segment file (``io.FileIO`` in append mode)."""

    def write(self, data: bytes, /) -> int | None:
        """Write ``data``; return how many bytes were written."""

    def truncate(self, size: int | None = ..., /) -> int:
        """Cut the file to ``size`` bytes."""

    def flush(self) -> None:
        """Push buffered bytes to the OS."""

    def fileno(self) -> int:
        """Return the OS file descriptor (for fsync)."""

    def close(self) -> None:
        """Close the file."""


Opener = Callable[[Path], SegmentFile]


def open_segment(path: Path) -> SegmentFile:
    """Open a new segment file unbuffered for appending: a record is in the OS once written."""
    return io.FileIO(path, "ab")


def _fsync_dir(directory: Path) -> None:
    # Makes the rename of a manifest durable; not every platform can open a directory.
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _write_json_atomically(path: Path, value: dict[str, Any]) -> None:
    """Write ``value`` to ``path`` via a fsynced temporary file and a rename."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as handle:
        handle.write(orjson.dumps(value, option=orjson.OPT_INDENT_2) + b"\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _write_all(file: SegmentFile, data: bytes) -> None:
    while data:
        written = file.write(data)
        if not written:
            # A regular file that accepts nothing would loop forever; call it an I/O error.
            raise OSError(errno.EIO, "short write")
        data = data[written:]


class _Every:
    """Rate limit for log lines: due at most once per ``interval`` seconds (monotonic)."""

    def __init__(self, interval: float) -> None:
        self._interval = interval
        self._last = -math.inf
        self.suppressed = 0

    def due(self) -> bool:
        now = time.monotonic()
        if now - self._last >= self._interval:
            self._last = now
            return True
        self.suppressed += 1
        return False

    def take_suppressed(self) -> int:
        count, self.suppressed = self.suppressed, 0
        return count


@dataclass(frozen=True, slots=True)
class _Gap:
    """A gap marker travelling through the queue (made by the writer, not by callers)."""

    lost: int
    reason: str


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


class EvidenceWriter:
    """Write redacted records to an evidence bundle without ever blocking the caller.

    ``start()`` creates the bundle (the directory must not already hold one) and the writer
    thread; ``submit(record)`` queues; ``close()``/``aclose()`` drain and finish. Also usable
    as a (sync or async) context manager. Counters for metrics, readable from any thread:
    ``written`` (records on disk, gap records included), ``lost`` (queue full or submitted
    after close), ``lost_disk``, ``lost_invalid``, ``bytes_written``, ``segments`` (segment
    files opened) and ``disk_errors`` (failed disk operations).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        max_segment_bytes: int = DEFAULT_MAX_SEGMENT_BYTES,
        max_segment_age_s: float = DEFAULT_MAX_SEGMENT_AGE_S,
        queue_size: int = DEFAULT_QUEUE_SIZE,
        clock: Callable[[], float] = time.time,
        opener: Opener = open_segment,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        """Configure a writer for ``directory``; nothing touches the disk before ``start()``.

        ``clock`` gives the timestamps and segment ages (tests pass a controllable one);
        ``opener`` opens segment files (tests inject failing files); ``meta`` adds keys to
        ``bundle.json`` (e.g. ``derivedFrom``; the format keys and ``closed`` stay the writer's).
        """
        if max_segment_bytes <= 0 or max_segment_age_s <= 0 or queue_size <= 0:
            raise ValueError("segment size, segment age and queue size must be positive")
        self.directory = Path(directory)
        self._max_bytes = max_segment_bytes
        self._max_age = max_segment_age_s
        self._clock = clock
        self._opener = opener
        self._extra_meta = {k: v for k, v in (meta or {}).items() if k != "closed"}
        self._queue: queue.Queue[dict[str, Any] | _Gap | None] = queue.Queue(maxsize=queue_size)

        # Shared between submitters, close() and the writer thread.
        self._lock = threading.Lock()
        self._progress = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._closing = False
        self._stop_sent = False
        self._finished = False
        self._enqueued = 0
        self._processed = 0
        self._pending_lost = 0  # queue-full losses no gap marker carries yet
        self._lost_at_close = 0
        self._lost_log = _Every(_LOG_EVERY_S)

        self.written = 0
        self.lost = 0
        self.lost_disk = 0
        self.lost_invalid = 0
        self.bytes_written = 0
        self.segments = 0
        self.disk_errors = 0

        # Writer-thread state (touched by no other thread once started).
        self._meta: dict[str, Any] = {}
        self._seq = 0
        self._prev = ""
        self._next_segment = 1
        self._segment: _OpenSegment | None = None
        self._unrecorded: dict[str, int] = {}  # reason -> losses without a gap record on disk
        self._last_disk_error = ""
        self._disk_log = _Every(_LOG_EVERY_S)

    # -- caller side ---------------------------------------------------------------------

    def start(self) -> None:
        """Create the bundle directory and ``bundle.json``, and start the writer thread.

        Raises :class:`InputError` if the directory cannot be created or already holds a
        bundle (each run gets its own directory, so a chain never has two writers).
        """
        if self._thread is not None:
            raise RuntimeError("the evidence writer is already started")
        self._create_bundle()
        self._thread = threading.Thread(target=self._run, name="mcp-tap-evidence", daemon=True)
        self._thread.start()

    def submit(self, record: dict[str, Any]) -> bool:
        """Queue a redacted record without blocking; return False if it was lost (counted).

        ``record`` needs a string ``kind``; ``seq``, ``prev`` and ``digest`` are the
        writer's and are replaced.
        """
        kind = record.get("kind")
        if not isinstance(kind, str) or not kind:
            raise ValueError("an evidence record needs a non-empty string 'kind'")
        with self._lock:
            if self._closing:
                self.lost += 1
                reason = REASON_CLOSED
            else:
                try:
                    if self._pending_lost:
                        self._queue.put_nowait(_Gap(self._pending_lost, REASON_QUEUE_FULL))
                        self._pending_lost = 0
                        self._enqueued += 1
                    self._queue.put_nowait(record)
                    self._enqueued += 1
                    return True
                except queue.Full:
                    self.lost += 1
                    self._pending_lost += 1
                    reason = REASON_QUEUE_FULL
        if self._lost_log.due():
            log.warning(
                "evidence.lost",
                reason=reason,
                lost=self.lost,
                suppressed=self._lost_log.take_suppressed(),
            )
        return False

    def report_lost(self, lost: int, reason: str) -> None:
        """Count ``lost`` records that were lost before they reached the writer, and mark
        the gap in the chain (e.g. records the proxy could not hand to a recording process).
        """
        if lost <= 0:
            return
        with self._lock:
            self.lost += lost
            if self._closing:
                return
            try:
                self._queue.put_nowait(_Gap(lost, reason))
                self._enqueued += 1
            except queue.Full:
                self._pending_lost += lost

    def flush(self, timeout: float | None = None) -> bool:
        """Block until every record submitted so far is written or counted lost.

        Returns False on timeout or if the writer was never started. Not for the event
        loop: call it from a thread or from sync code.
        """
        with self._progress:
            if self._thread is None:
                return self._enqueued == 0
            target = self._enqueued
            return self._progress.wait_for(
                lambda: self._processed >= target or self._finished, timeout
            )

    def close(self, timeout: float | None = DEFAULT_CLOSE_TIMEOUT_S) -> bool:
        """Stop accepting records, drain the queue, close the segment and the bundle.

        Returns False (and logs ``evidence.close_timeout``) if the writer did not finish
        within ``timeout``; it keeps finishing in the background. Safe to call twice.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            if not self._closing:
                self._closing = True
                self._lost_at_close = self.lost
        thread = self._thread
        if thread is None:
            self._drop_unstarted()
            return True
        if not self._stop_sent:
            try:
                self._queue.put(None, timeout=timeout)
            except queue.Full:
                log.error("evidence.close_timeout", queued=self._queue.qsize())
                return False
            self._stop_sent = True
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        thread.join(remaining)
        if thread.is_alive():
            log.error("evidence.close_timeout", queued=self._queue.qsize())
            return False
        return True

    async def aclose(self, timeout: float | None = DEFAULT_CLOSE_TIMEOUT_S) -> bool:
        """:meth:`close` on a worker thread, so awaiting it never blocks the event loop."""
        return await asyncio.to_thread(self.close, timeout)

    def counters(self) -> dict[str, int]:
        """Return the counters for metrics, as one snapshot dict."""
        return {
            "written": self.written,
            "lost": self.lost,
            "lost_disk": self.lost_disk,
            "lost_invalid": self.lost_invalid,
            "bytes_written": self.bytes_written,
            "segments": self.segments,
            "disk_errors": self.disk_errors,
        }

    def __enter__(self) -> EvidenceWriter:
        """Start the writer."""
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the writer (drain and flush)."""
        self.close()

    async def __aenter__(self) -> EvidenceWriter:
        """Start the writer; creating the bundle runs on a worker thread."""
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the writer without blocking the event loop."""
        await self.aclose()

    def _drop_unstarted(self) -> None:
        # Nothing was ever written and nothing will be: what waits in the queue is lost.
        dropped = 0
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if isinstance(item, dict):
                dropped += 1
        if dropped:
            self.lost += dropped
            log.warning("evidence.lost", reason=REASON_CLOSED, lost=self.lost, suppressed=0)

    def _create_bundle(self) -> None:
        meta_path = self.directory / BUNDLE_FILE
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
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
            self._meta = {
                **self._extra_meta,
                "format": FORMAT_VERSION,
                "createdAt": self._clock(),
                "tool": TOOL_NAME,
                "toolVersion": __version__,
            }
            _write_json_atomically(meta_path, self._meta)
        except OSError as exc:
            raise InputError(
                f"{self.directory}: cannot create the evidence bundle: {exc.strerror or exc}"
            ) from exc

    # -- writer thread -------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            try:
                item = self._queue.get(timeout=_POLL_S)
            except queue.Empty:
                self._guarded(self._idle)
                continue
            if item is None:
                break
            self._guarded(self._handle, item)
            with self._progress:
                self._processed += 1
                self._progress.notify_all()
        self._guarded(self._finish)
        with self._progress:
            self._finished = True
            self._progress.notify_all()

    def _guarded(self, step: Callable[..., None], *args: Any) -> None:
        # A bug here must not kill the thread: the queue would fill and every record after
        # it would be lost. Log it loudly and go on with the next record.
        try:
            step(*args)
        except Exception:
            log.exception("evidence.internal_error")

    def _handle(self, item: dict[str, Any] | _Gap) -> None:
        if isinstance(item, _Gap):
            self._unrecorded[item.reason] = self._unrecorded.get(item.reason, 0) + item.lost
            self._record_gaps()
            return
        if self._segment_expired():
            self._close_segment()
        # Keep the order: a gap must reach the disk before anything written after the loss.
        if not self._record_gaps():
            self._lose(REASON_DISK)
            return
        failure = self._append(item)
        if failure is not None:
            self._lose(failure)
            if failure == REASON_INVALID:
                self._record_gaps()

    def _idle(self) -> None:
        with self._lock:
            pending, self._pending_lost = self._pending_lost, 0
        if pending:
            self._unrecorded[REASON_QUEUE_FULL] = (
                self._unrecorded.get(REASON_QUEUE_FULL, 0) + pending
            )
        if self._unrecorded:
            self._record_gaps()
        if self._segment_expired():
            self._close_segment()

    def _finish(self) -> None:
        # close() set _closing before queueing the stop marker, so nothing follows it.
        self._idle()
        self._close_segment()
        self._write_closed_summary()

    def _lose(self, reason: str) -> None:
        if reason == REASON_INVALID:
            self.lost_invalid += 1
        else:
            self.lost_disk += 1
        self._unrecorded[reason] = self._unrecorded.get(reason, 0) + 1

    def _record_gaps(self) -> bool:
        """Write a gap record per reason with unrecorded losses; False if the disk refused."""
        for reason in list(self._unrecorded):
            lost = self._unrecorded[reason]
            gap: dict[str, Any] = {"kind": "gap", "lost": lost, "reason": reason}
            if reason == REASON_DISK and self._last_disk_error:
                gap["error"] = self._last_disk_error
            if self._append(gap) is not None:
                # The losses stay unrecorded and are retried with the next write.
                return False
            del self._unrecorded[reason]
        return True

    def _segment_expired(self) -> bool:
        segment = self._segment
        return (
            segment is not None
            and segment.count > 0
            and self._clock() - segment.created_at >= self._max_age
        )

    def _append(self, record: dict[str, Any]) -> str | None:
        """Chain, encode and write one record; return None, or the reason it was lost."""
        full = {**record, "seq": self._seq, "prev": self._prev}
        full.pop("digest", None)
        try:
            record_hash = record_digest(full)
            full["digest"] = record_hash
            line = orjson.dumps(full, option=_LINE_OPTIONS) + b"\n"
        except TypeError as exc:  # orjson.JSONEncodeError is a TypeError
            log.error("evidence.invalid_record", kind=record.get("kind"), error=str(exc))
            return REASON_INVALID
        segment = self._segment or self._open_segment()
        if segment is None:
            return REASON_DISK
        try:
            _write_all(segment.file, line)
        except OSError as exc:
            self._disk_failed("write", exc)
            self._repair(segment)
            return REASON_DISK
        self._seq += 1
        self._prev = record_hash
        segment.offset += len(line)
        segment.count += 1
        self.written += 1
        self.bytes_written += len(line)
        if segment.offset >= self._max_bytes:
            self._close_segment()
        return None

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
        )
        return self._segment

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

    def _close_segment(self) -> None:
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
            data = segment.path.read_bytes()
            if len(data) != segment.offset:
                # Someone else wrote to, or cut, the open segment; the manifest attests the
                # file as it is and verify's record checks will show the damage.
                log.error(
                    "evidence.segment_changed",
                    segment=segment.path.name,
                    expected=segment.offset,
                    found=len(data),
                )
            manifest = {
                "format": FORMAT_VERSION,
                "segment": segment.number,
                "firstSeq": segment.first_seq,
                "lastSeq": segment.first_seq + segment.count - 1,
                "count": segment.count,
                "bytes": len(data),
                "fileSha256": sha256_hex(data),
                "chainHead": self._prev,
                "prevSegmentChainHead": segment.prev_head,
                "createdAt": segment.created_at,
                "closedAt": self._clock(),
            }
            _write_json_atomically(self.directory / manifest_name(segment.number), manifest)
        except OSError as exc:
            self._disk_failed("manifest", exc)
            log.error("evidence.manifest_failed", segment=segment.path.name)

    def _write_closed_summary(self) -> None:
        closed = {
            "at": self._clock(),
            "segments": self.segments,
            "records": self.written,
            "lastSeq": self._seq - 1,
            "chainHead": self._prev,
            "lost": self._lost_at_close + self.lost_disk + self.lost_invalid,
        }
        try:
            _write_json_atomically(self.directory / BUNDLE_FILE, {**self._meta, "closed": closed})
        except OSError as exc:
            self._disk_failed("bundle.json", exc)

    def _disk_failed(self, operation: str, exc: OSError) -> None:
        self.disk_errors += 1
        self._last_disk_error = f"{operation}: {exc.strerror or exc}"
        if self._disk_log.due():
            log.error(
                "evidence.disk_error",
                operation=operation,
                error=str(exc),
                lost_disk=self.lost_disk,
                suppressed=self._disk_log.take_suppressed(),
            )
