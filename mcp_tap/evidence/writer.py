"""The evidence writer: a bounded queue in front of one background thread that owns the disk
(or, started ``inline``, no thread: the caller writes; see :meth:`EvidenceWriter.start`).
This module holds the queue and the losses before the disk; the bundle's files, chain,
manifests and the losses at the disk are :mod:`mcp_tap.evidence.bundlefiles`'s.

Why a thread and not an asyncio task: every file operation (write, fsync, the manifest) is
blocking, and one plain ``threading.Thread`` fed by
a ``queue.Queue(maxsize)`` keeps all of them off the event loop with no per-record hop
through ``asyncio.to_thread``. :meth:`EvidenceWriter.submit` is ``put_nowait`` under a short
lock, so the proxy's request path never waits for the disk; :meth:`EvidenceWriter.submit_many`
queues a whole batch as one item, which the writer thread writes with one ``write`` call.

Losses are counted, logged and written down, never silent; ``lost_total`` is every record
stated lost, and equals the sum of the bundle's gap records once they reached the disk:

* queue full -> ``lost`` + a rate-limited ``evidence.lost`` warning; the next record that
  fits is preceded by ``{"kind": "gap", "lost": n, "reason": "queue full"}`` (so the marker
  sits where the loss happened), or the writer adds it itself once it goes idle or closes;
* disk error (ENOSPC, an unwritable directory) -> ``lost_disk`` + ``evidence.disk_error``; a
  partly written line is cut off again (so the segment stays parsable), and a ``"disk
  error"`` gap record is written as soon as a write succeeds. At close the writer frees its
  space reserve (:mod:`mcp_tap.evidence.disk`) so the gap and the closing summary fit even
  on a disk that never freed up. If even the cut fails, the segment is abandoned without a
  manifest (``verify`` reports it) and the next record opens a new one;
* the evidence directory deleted (or the open segment unlinked) while running: records
  already written there are gone; the writer notices (the open segment's link count is 0),
  counts them in ``lost_deleted``, and starts a fresh bundle in the same place whose first
  record is the gap that says so (``"evidence directory deleted"``, or ``"segment file
  deleted"`` when only the segment went);
* a record orjson cannot encode -> ``lost_invalid`` + a ``"unserialisable record"`` gap.

``seq``/``prev``/``digest`` are assigned by the writer thread at the moment a record reaches
the disk, so a record lost to the disk leaves no hole in the sequence: the gap record says
what is missing. Segments rotate after a write that makes them ``max_segment_bytes`` or
larger, and when they are ``max_segment_age_s`` old (checked before each write and when the
writer is idle, so a quiet segment still gets its manifest). A segment is fsynced and
manifested when it closes, not per record. The manifest's size and SHA-256 are of the bytes
the writer wrote (hashed as each write succeeds, not read back at close: a 64 MiB segment
read back cost about 1.5 µs of CPU per record): a file someone else changed meanwhile does
not match its manifest, and ``verify`` says so. Shutdown (SIGTERM in the proxy): stop accepting,
let in-flight exchanges submit, then ``await writer.aclose()``, which drains the queue, writes
pending gap records, closes the segment and adds the ``closed`` summary to ``bundle.json``
(``end: "closed"``). A recording process whose forwarder vanished calls
``close(abrupt=True, reason=..., inflight=n)`` instead: the ``n`` exchanges it knew were in
flight become a gap record and the summary says ``end: "abrupt"``.

With a ``signing_key`` every manifest and every version of ``bundle.json`` is signed
(:mod:`mcp_tap.evidence.signing`); without one ``bundle.json`` says ``"signing": null``.

Records must already be redacted; the writer's own records (gaps) and log lines carry only
counts, reasons and OS error strings, never record content. A submitted record belongs to the
writer from then on: the caller must not mutate it.
"""

from __future__ import annotations

import asyncio
import os
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Final

import structlog

from mcp_tap.errors import InputError
from mcp_tap.evidence.bundlefiles import (
    REASON_DIR_DELETED,
    REASON_DISK,
    REASON_INVALID,
    REASON_SEGMENT_DELETED,
    BundleFiles,
    BundleHook,
    Layout,
    Owned,
    SealedHook,
    SegmentTallier,
)
from mcp_tap.evidence.disk import Every, Opener, SegmentFile, open_segment
from mcp_tap.evidence.format import END_ABRUPT
from mcp_tap.evidence.signing import Signer

DEFAULT_MAX_SEGMENT_BYTES: Final = 64 * 1024 * 1024
DEFAULT_MAX_SEGMENT_AGE_S: Final = 300.0
DEFAULT_QUEUE_SIZE: Final = 10_000
DEFAULT_CLOSE_TIMEOUT_S: Final = 30.0

REASON_QUEUE_FULL: Final = "queue full"
REASON_CLOSED: Final = "writer closed"
REASON_ABRUPT: Final = "forwarder ended abruptly"

# How long the writer thread waits for a record before doing its idle work (age rotation,
# writing gap records nobody else will trigger, noticing a deleted directory).
_POLL_S: Final = 0.25
_LOG_EVERY_S: Final = 1.0

log = structlog.get_logger("mcp_tap.evidence")

__all__ = [
    "REASON_DIR_DELETED",
    "REASON_DISK",
    "REASON_INVALID",
    "REASON_SEGMENT_DELETED",
    "BundleHook",
    "EvidenceWriter",
    "Opener",
    "SealedHook",
    "SegmentFile",
    "SegmentTallier",
    "open_segment",
]


@dataclass(frozen=True, slots=True)
class _Gap:
    """A gap marker travelling through the queue (made by the writer, not by callers)."""

    lost: int
    reason: str


_Item = dict[str, Any] | list[dict[str, Any]] | _Gap | None


class EvidenceWriter:
    """Write redacted records to an evidence bundle without ever blocking the caller.

    ``start()`` creates the bundle (the directory must not already hold one) and the writer
    thread; ``submit(record)`` / ``submit_many(records)`` queue; ``close()``/``aclose()``
    drain and finish. Also usable as a (sync or async) context manager. Counters for
    metrics, readable from any thread: ``written`` (records on disk, gap records included),
    ``lost`` (queue full, submitted after close, or reported with :meth:`report_lost`),
    ``lost_disk``, ``lost_invalid``, ``lost_deleted``, ``lost_total`` (all of them),
    ``bytes_written``, ``segments`` (segment files opened),
    ``disk_errors`` (failed disk operations) and ``failing`` (1 while the last disk
    operation failed: not ready).
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
        signing_key: bytes | None = None,
        meta: Mapping[str, Any] | None = None,
        tallies: Callable[[], SegmentTallier] | None = None,
    ) -> None:
        """Configure a writer for ``directory``; nothing touches the disk before ``start()``.

        ``clock`` gives the timestamps and segment ages (tests pass a controllable one);
        ``opener`` opens segment files (tests inject failing files); ``signing_key`` is a raw
        32-byte Ed25519 private key, or None for an unsigned bundle; ``meta`` adds keys to
        ``bundle.json`` (e.g. ``derivedFrom``; the format, signing and end keys stay the
        writer's); ``tallies`` makes the tallier of each segment, whose tallies its manifest
        then carries (a tallier that fails leaves them out: the gate reads the records).
        """
        if max_segment_bytes <= 0 or max_segment_age_s <= 0 or queue_size <= 0:
            raise ValueError("segment size, segment age and queue size must be positive")
        signer = Signer(signing_key) if signing_key is not None else None
        layout = Layout(max_segment_bytes, max_segment_age_s, clock, opener, signer, tallies)
        # The bundle's files, chain and disk-side losses: touched by the writing thread only
        # (the writer thread, or an inline writer's caller) once started.
        self.files = BundleFiles(Path(directory), layout, meta or {})
        self._signer = signer
        self._queue: queue.Queue[_Item] = queue.Queue(maxsize=queue_size)

        # Shared between submitters, close() and the writer thread.
        self._lock = threading.Lock()
        self._progress = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._inline = False  # start(inline=True): the caller's thread writes
        self._closing = False
        self._stop_sent = False
        self._finished = False
        self._enqueued = 0
        self._processed = 0
        self._pending_lost = 0  # queue-full losses no gap marker carries yet
        self._pending_reported: dict[str, int] = {}  # report_lost() that found the queue full
        self._lost_log = Every(_LOG_EVERY_S)
        self.lost = 0

    @property
    def directory(self) -> Path:
        """The bundle directory (a fresh sibling once the first one was deleted)."""
        return self.files.directory

    @property
    def written(self) -> int:
        """Records on disk, gap records included."""
        return self.files.written

    @property
    def bytes_written(self) -> int:
        """Bytes written to segment files."""
        return self.files.bytes_written

    @property
    def segments(self) -> int:
        """Segment files opened."""
        return self.files.segments

    @property
    def disk_errors(self) -> int:
        """Failed disk operations."""
        return self.files.disk_errors

    @property
    def failing(self) -> bool:
        """Whether the last disk operation failed (not ready)."""
        return self.files.failing

    @property
    def lost_disk(self) -> int:
        """Records the disk refused."""
        return self.files.lost_disk

    @property
    def lost_invalid(self) -> int:
        """Records orjson could not encode."""
        return self.files.lost_invalid

    @property
    def lost_deleted(self) -> int:
        """Records written and then deleted with their segment or directory."""
        return self.files.lost_deleted

    @property
    def lost_total(self) -> int:
        """Every record stated lost, whatever the reason."""
        return self.lost + self.lost_disk + self.lost_invalid + self.lost_deleted

    @property
    def public_key(self) -> str | None:
        """The hex Ed25519 public key bundles are signed with (None: unsigned)."""
        return self._signer.public_hex if self._signer is not None else None

    def follow(self, on_sealed: SealedHook | None, on_bundle: BundleHook | None) -> None:
        """Hooks run (on the writing thread) when a segment is sealed and when
        ``bundle.json`` is written (see :mod:`mcp_tap.evidence.bundlefiles`). Call before
        :meth:`start`."""
        self.files.on_sealed = on_sealed
        self.files.on_bundle = on_bundle

    def note_shipping(self, summary: dict[str, Any]) -> None:
        """State in the closing summary (``shipping``) what was and was not shipped."""
        self.files.shipping = dict(summary)

    # -- caller side ---------------------------------------------------------------------

    def start(self, *, inline: bool = False) -> None:
        """Create the bundle directory and ``bundle.json``, and start the writer thread.

        Raises :class:`InputError` if the directory cannot be created or already holds a
        bundle (each run gets its own directory, so a chain never has two writers).

        ``inline``: no thread; :meth:`submit` and :meth:`submit_many` write before they
        return, and the caller runs :meth:`idle` when it has nothing to submit (at least
        every few hundred milliseconds: age rotation, pending gap records, a deleted
        directory). For a caller whose only job is recording (the recording process): it
        saves a thread wake-up and a GIL hand-off per batch, and a stalled disk stalls the
        caller instead of filling the queue (the recording process's forwarder then counts
        the captures it cannot hand over, so the loss is still stated). Single-threaded:
        every call from the thread that started it.
        """
        if self._thread is not None or self._inline:
            raise RuntimeError("the evidence writer is already started")
        try:
            self.files.create_bundle()
        except OSError as exc:
            raise InputError(
                f"{self.directory}: cannot create the evidence bundle: {exc.strerror or exc}"
            ) from exc
        if inline:
            self._inline = True
            return
        self._thread = threading.Thread(target=self._run, name="mcp-tap-evidence", daemon=True)
        self._thread.start()

    def submit(self, record: dict[str, Any]) -> bool:
        """Queue a redacted record without blocking; return False if it was lost (counted).

        ``record`` needs a string ``kind``; ``seq``, ``prev`` and ``digest`` are the
        writer's and are replaced.
        """
        _check_kind(record)
        return self._put(record, 1)

    def submit_many(self, records: Sequence[dict[str, Any]], *, owned: bool = False) -> bool:
        """Queue a batch of redacted records as one item, written with one disk write.

        Returns False if the batch was lost (every record of it counted). Cheaper than a
        :meth:`submit` per record: one lock, one queue slot, one wake-up of the writer.
        ``owned``: the caller hands the record dicts over (it never reads them again), so
        the writer sets ``seq`` and ``prev`` in them rather than in a copy of each.
        """
        batch = Owned(records) if owned else list(records)
        for record in batch:
            _check_kind(record)
        if not batch:
            return True
        return self._put(batch, len(batch))

    def _put(self, item: dict[str, Any] | list[dict[str, Any]], count: int) -> bool:
        if self._inline and not self._closing:
            self._guarded(self._handle, item)
            return True
        with self._lock:
            if self._closing:
                self.lost += count
                reason = REASON_CLOSED
            else:
                try:
                    if self._pending_lost:
                        self._queue.put_nowait(_Gap(self._pending_lost, REASON_QUEUE_FULL))
                        self._pending_lost = 0
                        self._enqueued += 1
                    self._queue.put_nowait(item)
                    self._enqueued += 1
                    return True
                except queue.Full:
                    self.lost += count
                    self._pending_lost += count
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
        if self._inline and not self._finished:
            self.lost += lost
            self._guarded(self._handle, _Gap(lost, reason))
            return
        with self._lock:
            self.lost += lost
            try:
                self._queue.put_nowait(_Gap(lost, reason))
                self._enqueued += 1
            except queue.Full:
                # The writer thread picks these up when it goes idle or finishes.
                self._pending_reported[reason] = self._pending_reported.get(reason, 0) + lost

    def note_held(self, pauses: int, seconds: float) -> None:
        """State in the closing summary (``heldBack``) how often and how long the proxy held
        its clients back because recording was behind (timing only: nothing was lost)."""
        self.files.held = {"pauses": int(pauses), "seconds": round(float(seconds), 3)}

    def note_pairing(self, counts: dict[str, Any]) -> None:
        """State in the closing summary (``hopPairing``) how the exchanges of two hops were
        paired (``paired`` by way), and how many stayed ``unpaired`` (per hop) or
        ``ambiguous`` (several candidates: never guessed)."""
        self.files.pairing = dict(counts)

    def flush(self, timeout: float | None = None) -> bool:
        """Block until every record submitted so far is written or counted lost.

        Returns False on timeout or if the writer was never started. Not for the event
        loop: call it from a thread or from sync code.
        """
        if self._inline:
            return True  # written before submit returned
        with self._progress:
            if self._thread is None:
                return self._enqueued == 0
            target = self._enqueued
            return self._progress.wait_for(
                lambda: self._processed >= target or self._finished, timeout
            )

    def close(
        self,
        timeout: float | None = DEFAULT_CLOSE_TIMEOUT_S,
        *,
        abrupt: bool = False,
        reason: str = REASON_ABRUPT,
        inflight: int = 0,
    ) -> bool:
        """Stop accepting records, drain the queue, close the segment and the bundle.

        ``abrupt``: the proxy did not drain (its pipe ended early); ``inflight`` exchanges
        it knew of are written as a gap record and the closing summary says
        ``end: "abrupt"`` with ``reason``. Returns False (and logs
        ``evidence.close_timeout``) if the writer did not finish within ``timeout``; it
        keeps finishing in the background. Safe to call twice.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        if abrupt:
            self.files.end = {"end": END_ABRUPT, "reason": reason, "inflight": max(0, inflight)}
            self.report_lost(inflight, reason)
        with self._lock:
            self._closing = True
        if self._inline:
            if not self._finished:
                self._guarded(self._finish)
                self._finished = True
            return True
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
            "lost_deleted": self.lost_deleted,
            "lost_total": self.lost_total,
            "bytes_written": self.bytes_written,
            "segments": self.segments,
            "disk_errors": self.disk_errors,
            "failing": int(self.failing),
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
            elif isinstance(item, list):
                dropped += len(item)
        if dropped:
            self.lost += dropped
            log.warning("evidence.lost", reason=REASON_CLOSED, lost=self.lost, suppressed=0)

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

    def _handle(self, item: dict[str, Any] | list[dict[str, Any]] | _Gap) -> None:
        files = self.files
        if isinstance(item, _Gap):
            files.add_unrecorded(item.reason, item.lost)
            files.check_deleted()
            files.record_gaps()
            return
        records = item if isinstance(item, list) else [item]
        files.check_deleted()
        if files.segment_expired():
            files.close_segment()
        # Keep the order: a gap must reach the disk before anything written after the loss.
        if not files.record_gaps():
            files.lose(REASON_DISK, len(records))
            return
        refused = files.write(records)
        if refused:
            files.lose(REASON_DISK, refused)
        elif files.unrecorded:
            files.record_gaps()

    def idle(self) -> None:
        """An inline writer's idle work (see :meth:`start`); nothing for a threaded one."""
        if self._inline and not self._finished:
            self._guarded(self._idle)

    def _idle(self) -> None:
        with self._lock:
            pending, self._pending_lost = self._pending_lost, 0
            reported, self._pending_reported = self._pending_reported, {}
        files = self.files
        for reason, lost in reported.items():
            files.add_unrecorded(reason, lost)
        if pending:
            files.add_unrecorded(REASON_QUEUE_FULL, pending)
        files.check_deleted()
        if files.unrecorded:
            files.record_gaps()
        if files.segment_expired():
            files.close_segment()

    def _finish(self) -> None:
        # close() set _closing before queueing the stop marker, so nothing follows it.
        self._idle()
        self.files.finish()

def _check_kind(record: dict[str, Any]) -> None:
    kind = record.get("kind")
    if not isinstance(kind, str) or not kind:
        raise ValueError("an evidence record needs a non-empty string 'kind'")
