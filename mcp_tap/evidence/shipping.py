"""Shipping evidence to an S3-compatible object store while it is written (``[evidence]
ship = "s3://BUCKET/PREFIX"``).

A :class:`Shipper` follows one recording's bundles through the writer's hooks
(:meth:`~mcp_tap.evidence.EvidenceWriter.follow`): ``bundle.json`` when the bundle starts and
again with its closing summary, and each segment once it is sealed, the segment file first
and then its signed manifest, so that a manifest in the store means its segment is there
whole. Keys follow :func:`mcp_tap.evidence.store.bundle_location`:
``PREFIX/<release>/<pod>/<bundle>/<file name>``.

Off the forwarding path: the hooks only append to a list under a lock; one thread of the
recording process uploads. A store that is down, slow or frozen delays that thread only:
uploads are retried with exponential backoff (:data:`BACKOFF_S` up to :data:`MAX_BACKOFF_S`).

Sealed segments wait in a bounded spool, ``spool_max_bytes`` of segment and manifest bytes.
The segment files stay in the bundle directory after they are shipped: the pod's own
``/gate``, ``verify`` and ``report`` read that bundle, and a file removed from it reads as
evidence deleted (the writer states a deleted segment as lost). The spool bounds what is
owed to the store: past it, the oldest waiting segment is given up. A segment given up is
stated: counted (metrics, ``/readyz``), and its records are reported to the writer
(:meth:`Shipper.take_unstated`) as a gap record with reason :data:`REASON_NOT_SHIPPED` in the
next segment, which is shipped; and in the closing summary's ``shipping`` member.

A ledger (:mod:`mcp_tap.evidence.shipledger`: ``.ship.json`` in the bundle directory)
names where the bundle goes and what has reached the store (file names; for
``bundle.json``, which version). A new run finds the
ledgers of earlier runs in the same evidence directory (:meth:`Shipper.resume`) and uploads
what they still owe, so a restart ships what the spool held (sealed segments only: the open
segment of a run that was killed has no manifest and stays local).

Object Lock: with ``retention`` set, the shipper asks once whether the bucket has Object
Lock enabled; if so every put carries ``lock_mode`` (``COMPLIANCE`` by default) and a
retain-until date ``retention`` from now, so the evidence cannot be deleted before then. A
bucket without Object Lock is stated once (log line and ``/readyz``) and shipped to without.

Credentials: the client is :func:`~mcp_tap.evidence.store.upload_client_from_env` (the standard
AWS environment only); nothing here logs, counts or writes anything but key names, sizes,
counts and the store's error codes.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson
import structlog

from mcp_tap.errors import InputError, StoreError
from mcp_tap.evidence.format import BUNDLE_FILE, manifest_name, manifest_number, segment_name
from mcp_tap.evidence.shipledger import ShipLedger, save_ledger
from mcp_tap.evidence.store import (
    StoreLocation,
    bundle_location,
    translated,
    upload_client_from_env,
)

REASON_NOT_SHIPPED: Final = "segment not shipped"
BACKOFF_S: Final = 0.5
MAX_BACKOFF_S: Final = 30.0
LOCK_MODES: Final = ("COMPLIANCE", "GOVERNANCE")
# Object Lock states, as counters carry them (ship_lock).
LOCK_OFF, LOCK_ON, LOCK_ABSENT, LOCK_UNKNOWN = 0, 1, 2, 3
LOCK_STATES: Final = {LOCK_OFF: "off", LOCK_ON: "on", LOCK_ABSENT: "bucket without Object Lock",
                      LOCK_UNKNOWN: "not yet known"}
_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION_RE: Final = re.compile(r"^(\d{1,7})([smhd])$")
_CONTENT_TYPES: Final = {".jsonl": "application/x-ndjson", ".json": "application/json"}
_SHA256_RE: Final = re.compile(r"^[0-9a-f]{64}$")
# The stores' answers to a body that does not match the checksum sent with it (S3 and
# SeaweedFS say BadDigest; the others are other stores' names for it).
_DIGEST_REFUSED: Final = frozenset({"BadDigest", "InvalidDigest",
                                    "XAmzContentChecksumMismatch", "XAmzContentSHA256Mismatch"})

log = structlog.get_logger("mcp_tap.evidence")


def parse_retention(text: str, what: str = "[evidence] retention") -> float:
    """Seconds of a retention like ``7d``, ``12h``, ``30m`` or ``90s`` ("" is 0: none)."""
    if not text:
        return 0.0
    match = _DURATION_RE.match(text.strip())
    if match is None or int(match.group(1)) == 0:
        raise InputError(f"{what} must be a duration like 7d, 12h, 30m or 90s, got {text!r}")
    return float(int(match.group(1)) * _UNITS[match.group(2)])


@dataclass(frozen=True, slots=True)
class ShipOptions:
    """Where a recording's bundles go and how much may wait for the store."""

    root: StoreLocation
    release: str
    pod: str
    spool_max_bytes: int = 1 << 30
    retention_s: float = 0.0  # 0: no Object Lock retention asked for
    lock_mode: str = "COMPLIANCE"


@dataclass(eq=False, slots=True)
class _Job:
    """One upload: a sealed segment (``number``) or a bundle's ``bundle.json`` (0)."""

    directory: Path
    number: int
    size: int = 0


@dataclass(slots=True)
class _Counts:
    segments: int = 0
    bytes: int = 0
    failures: int = 0
    dropped_segments: int = 0
    dropped_bytes: int = 0
    dropped_records: int = 0
    unstated: int = 0  # dropped records not yet handed to the writer as a gap
    failing: bool = False
    lock: int = LOCK_UNKNOWN
    last_error: str = ""


class Shipper:
    """Uploads sealed segments and ``bundle.json`` versions on its own thread (see the
    module doc). The hook methods (:meth:`sealed`, :meth:`bundle_written`) never block."""

    def __init__(self, options: ShipOptions, *, client: Callable[[], Any] = upload_client_from_env,
                 clock: Callable[[], float] = time.time) -> None:
        """Ship as ``options`` say; ``client`` makes the S3 client (on the shipping thread)."""
        self.options = options
        self._make_client = client
        self._clock = clock
        self._cond = threading.Condition()
        self._jobs: list[_Job] = []
        self._inflight: _Job | None = None
        self._spool = 0  # bytes of the segment jobs waiting (the in-flight one included)
        self._stopping = False
        self._final = False  # last_words(): nothing is given up any more
        self._deadline = 0.0
        self._thread: threading.Thread | None = None
        self._ledgers: dict[Path, ShipLedger] = {}
        self.counts = _Counts(lock=LOCK_UNKNOWN if options.retention_s else LOCK_OFF)

    # -- the writer's side (never blocks) ------------------------------------------------

    def sealed(self, directory: Path, number: int) -> None:
        """Hook: segment ``number`` of the bundle in ``directory`` is sealed."""
        size = _size(directory / segment_name(number)) + _size(directory / manifest_name(number))
        with self._cond:
            self._jobs.append(_Job(directory, number, size))
            self._spool += size
            self._bound()
            self._cond.notify()

    def bundle_written(self, directory: Path, closed: bool) -> None:
        """Hook: ``bundle.json`` of ``directory`` was written (again); ship its newest form,
        after the segments sealed before it."""
        with self._cond:
            if directory not in self._ledgers:
                # A new bundle: its ledger first (once per bundle), so that a run killed
                # before any upload still tells the next run what it owes.
                self._ledger(directory)
            self._jobs = [j for j in self._jobs
                          if j.number or j.directory != directory or j is self._inflight]
            self._jobs.append(_Job(directory, 0))
            self._cond.notify()

    def take_unstated(self) -> int:
        """Records of segments given up since the last call (the caller states them as a
        gap, :data:`REASON_NOT_SHIPPED`)."""
        with self._cond:
            taken, self.counts.unstated = self.counts.unstated, 0
        return taken

    def last_words(self) -> dict[str, Any]:
        """The writer is about to close: from now on nothing is given up (a drop after the
        closing summary could be stated nowhere; the last segment may pass the bound), and
        the closing summary's ``shipping`` member is this."""
        with self._cond:
            self._final = True
        return self.summary()

    def _bound(self) -> None:
        """Give up the oldest waiting segments while the spool is over its bound."""
        while self._spool > self.options.spool_max_bytes and not self._final:
            oldest = next((j for j in self._jobs if j.number and j is not self._inflight), None)
            if oldest is None:
                return
            self._jobs.remove(oldest)
            self._spool -= oldest.size
            records = _manifest_count(oldest.directory, oldest.number)
            counts = self.counts
            counts.dropped_segments += 1
            counts.dropped_bytes += oldest.size
            counts.dropped_records += records
            counts.unstated += records
            log.error("shipping.dropped", segment=segment_name(oldest.number), records=records,
                      spool_max_bytes=self.options.spool_max_bytes)

    # -- state for metrics, /readyz and the closing summary ------------------------------

    def counters(self) -> dict[str, int]:
        """Counters for metrics and ``/readyz`` (each ``ship_*``), one snapshot."""
        with self._cond:
            c = self.counts
            segments_waiting = sum(1 for j in self._jobs if j.number)
            return {
                "ship_enabled": 1, "ship_segments": c.segments, "ship_bytes": c.bytes,
                "ship_failures": c.failures, "ship_dropped_segments": c.dropped_segments,
                "ship_dropped_bytes": c.dropped_bytes,
                "ship_dropped_records": c.dropped_records, "ship_spool_bytes": self._spool,
                "ship_spool_segments": segments_waiting, "ship_failing": int(c.failing),
                "ship_lock": c.lock,
            }

    def summary(self) -> dict[str, Any]:
        """The closing summary's ``shipping`` member: where to, what reached the store by
        now, what was given up and what still waits."""
        counters = self.counters()
        return {
            "to": str(self.options.root.child(self.options.release, self.options.pod)),
            "segmentsShipped": counters["ship_segments"],
            "segmentsNotShipped": counters["ship_dropped_segments"],
            "recordsNotShipped": counters["ship_dropped_records"],
            "segmentsWaiting": counters["ship_spool_segments"],
            "objectLock": LOCK_STATES[counters["ship_lock"]],
        }

    # -- life cycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Start the shipping thread."""
        self._thread = threading.Thread(target=self._run, name="mcp-tap-ship", daemon=True)
        self._thread.start()

    def resume(self, evidence_root: Path, current: Path) -> int:
        """Queue what the bundles of earlier runs under ``evidence_root`` still owe the
        store (their ledger is not done); how many bundles that was."""
        owed = 0
        try:
            siblings = sorted(p for p in evidence_root.iterdir() if p.is_dir() and p != current)
        except OSError:
            return 0
        for directory in siblings:
            ledger = ShipLedger.load(directory)
            if ledger is None or ledger.done:
                continue
            self._ledgers[directory] = ledger
            owed += 1
            with self._cond:
                for number in _sealed_numbers(directory):
                    # Both files: a run killed between a segment's put and its
                    # manifest's may have saved the one without the other.
                    if not {segment_name(number), manifest_name(number)} <= ledger.shipped.keys():
                        size = (_size(directory / segment_name(number))
                                + _size(directory / manifest_name(number)))
                        self._jobs.append(_Job(directory, number, size))
                        self._spool += size
                self._jobs.append(_Job(directory, 0))
                self._cond.notify()
        if owed:
            log.info("shipping.resumed", bundles=owed)
        return owed

    def close(self, timeout: float) -> bool:
        """Upload what waits for at most ``timeout`` seconds, then stop; False if some
        remains (its ledger keeps it for the next run)."""
        with self._cond:
            self._stopping = True
            self._deadline = time.monotonic() + timeout
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(timeout + 1.0)
        with self._cond:
            left = len(self._jobs)
        if left:
            log.error("shipping.unfinished", uploads_left=left)
        return not left

    # -- the shipping thread -------------------------------------------------------------

    def _run(self) -> None:
        client: Any = None
        backoff = BACKOFF_S
        while True:
            job = self._next_job()
            if job is None:
                return
            try:
                if client is None:
                    client = self._make_client()
                self._check_lock(client)
                self._upload(client, job)
            except StoreError as exc:
                self._failed(job, str(exc))
                if self._wait(backoff):
                    return
                backoff = min(backoff * 2, MAX_BACKOFF_S)
                continue
            except Exception:  # a bug must not stop shipping for good
                log.exception("shipping.internal_error")
                self._failed(job, "internal error")
                if self._wait(backoff):
                    return
                continue
            backoff = BACKOFF_S
            self._done(job)

    def _next_job(self) -> _Job | None:
        with self._cond:
            while not self._jobs:
                if self._stopping:
                    return None
                self._cond.wait()
            if self._stopping and time.monotonic() >= self._deadline:
                return None
            self._inflight = self._jobs[0]
            return self._inflight

    def _wait(self, seconds: float) -> bool:
        """Back off; True when the shipper is past its closing deadline."""
        with self._cond:
            if self._stopping:
                seconds = min(seconds, max(0.0, self._deadline - time.monotonic()))
            self._cond.wait(seconds)
            return self._stopping and time.monotonic() >= self._deadline

    def _failed(self, job: _Job, error: str) -> None:
        with self._cond:
            self._inflight = None
            counts = self.counts
            first = not counts.failing or counts.last_error != error
            counts.failures += 1
            counts.failing = True
            counts.last_error = error
        if first:  # one line per new trouble, not per retry
            log.warning("shipping.failed", error=error, file=_file_of(job))

    def _done(self, job: _Job) -> None:
        with self._cond:
            self._inflight = None
            if job in self._jobs:
                self._jobs.remove(job)
                if job.number:
                    self._spool -= job.size
                    self.counts.segments += 1
                    self.counts.bytes += job.size
            if self.counts.failing:
                log.info("shipping.recovered", failures=self.counts.failures)
            self.counts.failing = False

    def _check_lock(self, client: Any) -> None:
        """Ask once whether the bucket has Object Lock (only when a retention is set)."""
        if self.counts.lock != LOCK_UNKNOWN:
            return
        from botocore.exceptions import ClientError

        bucket = self.options.root.bucket
        with translated("read the Object Lock configuration of", f"s3://{bucket}"):
            try:
                answer = client.get_object_lock_configuration(Bucket=bucket)
            except ClientError as exc:
                # The store's ways of saying "this bucket has none" (anything else, such as
                # a store that is down, is asked again before the next upload).
                code = exc.response.get("Error", {}).get("Code", "")
                if code not in ("ObjectLockConfigurationNotFoundError", "NoSuchKey",
                                "NotImplemented", "InvalidRequest"):
                    raise
                answer = {}
        enabled = answer.get("ObjectLockConfiguration", {}).get("ObjectLockEnabled")
        self.counts.lock = LOCK_ON if enabled == "Enabled" else LOCK_ABSENT
        if self.counts.lock == LOCK_ABSENT:
            log.warning("shipping.no_object_lock", bucket=bucket,
                        detail="retention is set but the bucket has no Object Lock: "
                               "shipping without retention")

    def _upload(self, client: Any, job: _Job) -> None:
        """Put the job's files (segment, then manifest; or bundle.json) not yet shipped."""
        ledger = self._ledger(job.directory)
        where = StoreLocation.parse(ledger.location)  # an earlier run's bundle: its own place
        if job.number:
            # The manifest first: it holds the segment's SHA-256, which its put carries.
            manifest = _read(job.directory / manifest_name(job.number))
            self._put_segment(client, where, ledger, job.directory / segment_name(job.number),
                              manifest)
            if manifest is not None:
                self._put_small(client, where, ledger, manifest_name(job.number), manifest)
        else:
            data = _read(job.directory / BUNDLE_FILE)
            if data is not None and self._put_small(client, where, ledger, BUNDLE_FILE, data):
                ledger.done = _closed(data)
        save_ledger(ledger, job.directory)  # once per upload job (a segment and its manifest)

    def _put_segment(self, client: Any, where: StoreLocation, ledger: ShipLedger, path: Path,
                     manifest: bytes | None) -> None:
        """Put a sealed segment, streamed from its file, with the SHA-256 its manifest
        attests (the writer computed it as it wrote; hashing every shipped byte again cost
        the recording process ~1 us per exchange)."""
        try:
            body = path.open("rb")
        except OSError as exc:
            # Gone locally (deleted): the writer states that loss; nothing to ship.
            log.error("shipping.missing", file=path.name, error=exc.strerror or str(exc))
            return
        with body:
            # A sealed file never changes: its size says which form of it went.
            size = os.fstat(body.fileno()).st_size
            mark = f"{size} bytes"
            if ledger.shipped.get(path.name) == mark:
                return
            attested = _attested(manifest, size)
            if not self._put(client, where, path.name, body, attested or _file_sha256(body),
                             refusable=attested is not None):
                # The file no longer holds what its manifest attests (changed after it was
                # sealed): it goes as it is, as it did before the digest was taken from the
                # manifest; the readers find it does not match its signed manifest.
                log.warning("shipping.segment_changed", file=path.name)
                body.seek(0)
                self._put(client, where, path.name, body, _file_sha256(body))
            ledger.ship(path.name, mark)

    def _put_small(self, client: Any, where: StoreLocation, ledger: ShipLedger, name: str,
                   data: bytes) -> bool:
        """Put a manifest or ``bundle.json`` unless the ledger has this form of it already;
        whether it was put."""
        digest = hashlib.sha256(data).digest()  # a few kilobytes
        # bundle.json changes (its closing summary): which version went is its SHA-256. A
        # manifest never changes: its size says it.
        mark = digest.hex() if name == BUNDLE_FILE else f"{len(data)} bytes"
        if ledger.shipped.get(name) == mark:
            return False
        # A bytearray, not bytes: botocore turns a bytes body of a put into a file object,
        # which it sends behind ``Expect: 100-continue`` (a round trip and ~0.1 ms of CPU
        # per put, measured); a bytearray goes as it is, in one send.
        self._put(client, where, name, bytearray(data), digest)
        ledger.ship(name, mark)
        return True

    def _put(self, client: Any, where: StoreLocation, name: str, body: Any, sha256: bytes,
             *, refusable: bool = False) -> bool:
        """Put ``body`` as ``name`` with its SHA-256 for the store to check (the client
        hashes nothing itself: :func:`~mcp_tap.evidence.store.upload_client_from_env`) and,
        with Object Lock on, the retention; False if ``refusable`` and the store refused the
        body as not matching that digest."""
        from botocore.exceptions import ClientError

        extra: dict[str, Any] = {}
        if self.counts.lock == LOCK_ON:
            # A put with a lock must carry a checksum: every put here does.
            until = self._clock() + self.options.retention_s
            extra = {"ObjectLockMode": self.options.lock_mode,
                     "ObjectLockRetainUntilDate": datetime.datetime.fromtimestamp(
                         until, datetime.UTC)}
        key = where.key(name)
        with translated("put", f"s3://{where.bucket}/{key}"):
            try:
                client.put_object(Bucket=where.bucket, Key=key, Body=body,
                                  ContentType=_CONTENT_TYPES[os.path.splitext(name)[1]],
                                  ChecksumSHA256=base64.b64encode(sha256).decode("ascii"),
                                  **extra)
            except ClientError as exc:
                if refusable and exc.response.get("Error", {}).get("Code") in _DIGEST_REFUSED:
                    return False
                raise
        return True

    def _ledger(self, directory: Path) -> ShipLedger:
        # Under the lock or on the shipping thread; the ledger of a bundle in the hook's
        # directory exists before its first upload (bundle_written), so they never race.
        ledger = self._ledgers.get(directory)
        if ledger is None:
            where = bundle_location(self.options.root, self.options.release, self.options.pod,
                                    directory.name)
            ledger = self._ledgers[directory] = ShipLedger(str(where))
            save_ledger(ledger, directory)
        return ledger


def shipping_status(counters: dict[str, int]) -> dict[str, Any] | None:
    """What ``/readyz`` says about shipping, from the counters (None: nothing shipped).

    Shipping never makes the tap unready (a store that is down must not take the pod out
    of its Service: forwarding goes on); it is stated beside the readiness."""
    if not counters.get("ship_enabled"):
        return None
    notes = []
    if counters.get("ship_failing"):
        notes.append("the object store is not taking uploads (retrying with backoff)")
    if counters.get("ship_lock") == LOCK_ABSENT:
        notes.append("retention is set but the bucket has no Object Lock: shipped without")
    if counters.get("ship_dropped_segments"):
        notes.append(f"{counters['ship_dropped_segments']} sealed segments "
                     f"({counters.get('ship_dropped_records', 0)} records) not shipped: "
                     "the spool was full (stated as a gap)")
    return {
        "failing": bool(counters.get("ship_failing")),
        "segmentsShipped": counters.get("ship_segments", 0),
        "segmentsWaiting": counters.get("ship_spool_segments", 0),
        "spoolBytes": counters.get("ship_spool_bytes", 0),
        "segmentsNotShipped": counters.get("ship_dropped_segments", 0),
        "recordsNotShipped": counters.get("ship_dropped_records", 0),
        "objectLock": LOCK_STATES.get(counters.get("ship_lock", LOCK_UNKNOWN), "not yet known"),
        "notes": notes,
    }


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError as exc:
        # Gone locally (deleted): the writer states that loss; nothing to ship.
        log.error("shipping.missing", file=path.name, error=exc.strerror or str(exc))
        return None


def _attested(manifest: bytes | None, size: int) -> bytes | None:
    """The SHA-256 the segment's manifest attests, if it attests ``size`` bytes."""
    try:
        meta = orjson.loads(manifest) if manifest is not None else None
    except orjson.JSONDecodeError:
        return None
    if not isinstance(meta, dict) or meta.get("bytes") != size:
        return None
    digest = meta.get("fileSha256")
    if not isinstance(digest, str) or not _SHA256_RE.match(digest):
        return None
    return bytes.fromhex(digest)


def _file_sha256(body: Any) -> bytes:
    """The SHA-256 of an open file from its start, left at its start (a segment without
    a manifest that attests its size)."""
    body.seek(0)
    digest = hashlib.file_digest(body, "sha256").digest()
    body.seek(0)
    return digest


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _manifest_count(directory: Path, number: int) -> int:
    try:
        count = orjson.loads((directory / manifest_name(number)).read_bytes()).get("count", 0)
    except (OSError, orjson.JSONDecodeError, AttributeError):
        return 0
    return count if isinstance(count, int) else 0


def _sealed_numbers(directory: Path) -> list[int]:
    """Segment numbers in ``directory`` that have both a segment file and a manifest."""
    numbers = []
    for entry in directory.iterdir():
        number = manifest_number(entry.name)
        if number is not None and (directory / segment_name(number)).exists():
            numbers.append(number)
    return sorted(numbers)


def _closed(data: bytes) -> bool:
    """Whether a ``bundle.json`` holds the closing summary."""
    try:
        meta = orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    return isinstance(meta, dict) and meta.get("closed") is not None


def _file_of(job: _Job) -> str:
    return segment_name(job.number) if job.number else BUNDLE_FILE


__all__ = [
    "REASON_NOT_SHIPPED", "ShipOptions", "Shipper", "parse_retention", "shipping_status",
]
