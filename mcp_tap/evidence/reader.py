"""Reading evidence bundles: ``bundle.json``, then segments in order, records upgraded.

:func:`read_bundle` and :func:`iter_records` are for consumers (report, gate, replay): they
reject unknown format versions, raise :class:`~mcp_tap.errors.BundleFormatError` naming the
file and line of a malformed record (unless ``lenient``, which skips it), and apply
:data:`~mcp_tap.evidence.format.MIGRATIONS`. They do not check integrity; that is
:func:`mcp_tap.evidence.verify.verify_bundle`, which builds on the lower-level helpers here
(:func:`read_bundle_meta`, :func:`list_segments`, :func:`parse_lines`, :func:`read_manifest`).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson

from mcp_tap.errors import BundleFormatError, EvidenceLimitError, InputError
from mcp_tap.evidence.format import (
    BUNDLE_FILE,
    FORMAT_VERSION,
    check_format,
    manifest_number,
    segment_name,
    segment_number,
    upgrade_manifest,
    upgrade_record,
)
from mcp_tap.evidence.schema import manifest_problem, meta_problem, record_problem
from mcp_tap.evidence.store import is_store_url
from mcp_tap.evidence.storepath import StorePath, store_bundles
from mcp_tap.files import open_regular, read_file

_CHUNK: Final = 1 << 20  # segments are read in pieces this big: memory is flat in their size
MAX_RECORD_BYTES: Final = 256 * 1024 * 1024
"""The longest segment line a reader accepts by default: the proxy caps every captured body
far below this (1 MiB a view by default), so a longer line (a sparse file, ``/dev/zero``)
is hostile; the read stops there. :data:`RECORD_LIMIT_ENV` sets another (a capture with
larger ``capture.max_body_bytes`` needs it)."""
RECORD_LIMIT_ENV: Final = "MCP_TAP_MAX_RECORD_BYTES"


def max_record_bytes() -> int:
    """The record limit: :data:`RECORD_LIMIT_ENV` if set (bytes, at least 1 KiB), else
    :data:`MAX_RECORD_BYTES`; :class:`InputError` for a value that is no such number."""
    text = os.environ.get(RECORD_LIMIT_ENV)
    if text is None:
        return MAX_RECORD_BYTES
    value = text.strip()
    if not value.isdigit() or len(value) > 15 or int(value) < 1024:
        raise InputError(f"{RECORD_LIMIT_ENV} must be a number of bytes of at least 1024, "
                         f"got {text[:40]!r}")
    return int(value)
MAX_META_BYTES: Final = 16 * 1024 * 1024
"""The largest ``bundle.json`` or manifest a reader accepts (the writer's are under 2 KB)."""


@dataclass(frozen=True, slots=True)
class SegmentFiles:
    """The files of one segment number; either may be missing from a damaged bundle."""

    number: int
    path: Path | None
    manifest_path: Path | None

    @property
    def name(self) -> str:
        """The segment's file name, whether or not the file exists."""
        return segment_name(self.number)


@dataclass(frozen=True, slots=True)
class Line:
    """One line of a segment file: its 1-based number, and its record or why it has none.

    ``complete`` is False for a last line without its trailing newline (a cut-short segment).
    """

    number: int
    record: dict[str, Any] | None
    error: str | None
    complete: bool


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """A segment as read: its number, path and (upgraded) manifest, if it has one."""

    number: int
    path: Path
    manifest: dict[str, Any] | None


@dataclass(slots=True)
class Bundle:
    """A whole bundle in memory: ``bundle.json``, its segments and every record in order."""

    path: Path
    format: int
    meta: dict[str, Any]
    segments: list[SegmentInfo] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)

    def exchanges(self) -> list[dict[str, Any]]:
        """Return the records of kind ``exchange``, in bundle order."""
        return [record for record in self.records if record.get("kind") == "exchange"]


def bundle_path(path: str | Path) -> Path:
    """``path`` as a path: an ``s3://`` location is a :class:`StorePath` (read from the
    store), a path stays what it is (a ``StorePath`` stays one), anything else is a
    local :class:`~pathlib.Path`."""
    if isinstance(path, Path):
        return path
    if is_store_url(path):
        return StorePath(path)
    return Path(path)


def read_bundle_meta(path: str | Path) -> tuple[int, dict[str, Any]]:
    """Return ``(format, bundle.json)`` of the bundle at ``path``.

    Raises :class:`InputError` if ``path`` is not a readable bundle directory and
    :class:`BundleFormatError` if ``bundle.json`` is malformed or of an unknown format.
    """
    root = bundle_path(path)
    if not _stat(root, "evidence bundle").is_dir():
        raise InputError(f"{root}: not a directory")
    meta_path = root / BUNDLE_FILE
    if not _stat(meta_path, "evidence file").exists():
        raise InputError(f"{root}: not an evidence bundle (no {BUNDLE_FILE})")
    data = read_file(meta_path, "evidence file", limit=MAX_META_BYTES, within=root)
    try:
        meta = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise BundleFormatError(f"{meta_path}: not valid JSON ({exc})") from exc
    if not isinstance(meta, dict):
        raise BundleFormatError(f"{meta_path}: not a JSON object")
    bundle_format = check_format(meta.get("format"), str(meta_path))
    problem = meta_problem(meta)
    if problem is not None:
        raise BundleFormatError(f"{meta_path}: {problem}")
    return bundle_format, meta


def list_segments(path: str | Path) -> list[SegmentFiles]:
    """Return every segment number that has a segment file or a manifest, in order."""
    root = bundle_path(path)
    segments: dict[int, Path] = {}
    manifests: dict[int, Path] = {}
    try:
        entries = list(root.iterdir())
    except OSError as exc:
        raise InputError(f"{root}: cannot list: {exc.strerror or exc}") from exc
    for entry in entries:
        number = segment_number(entry.name)
        if number is not None:
            segments[number] = entry
            continue
        number = manifest_number(entry.name)
        if number is not None:
            manifests[number] = entry
    return [
        SegmentFiles(number, segments.get(number), manifests.get(number))
        for number in sorted(segments.keys() | manifests.keys())
    ]


class SegmentScan:
    """One chunked pass over a segment file: its lines, and (afterwards) its size and SHA-256.

    :meth:`spans` yields the file as spans of whole lines in its reads, and :meth:`lines`
    yields ``(number, line, complete)`` (the line without its newline; ``complete`` is False
    for a last line without one); both hash the bytes as they are read, so a segment is read
    once, in :data:`_CHUNK` pieces, whatever its size. An unreadable file, or one that is
    not a regular file inside the bundle, is an :class:`InputError` naming it.

    Every read is bounded: a line longer than ``max_line`` bytes, or more than
    ``max_bytes`` bytes in all (a manifest's size), stops the read with an
    :class:`~mcp_tap.errors.EvidenceLimitError` naming the place; nothing past it is read.
    """

    def __init__(self, path: Path, *, max_line: int | None = None,
                 max_bytes: int | None = None, defer: bool = False) -> None:
        """Prepare to read ``path``; nothing is read before :meth:`spans` or :meth:`lines`.
        ``max_line`` defaults to :func:`max_record_bytes`. ``defer``: a read stopped at its
        bound ends the iteration quietly and leaves the error in :attr:`stopped` (for a
        caller that keeps running counts in the loop: verify)."""
        self.path = path
        self.defer = defer
        self.stopped: EvidenceLimitError | None = None
        self.size = 0
        self._hash = hashlib.sha256()
        self.max_line = max_record_bytes() if max_line is None else max_line
        self.max_bytes = max_bytes
        # Set when the file turns out larger than max_bytes: its size, if stat tells it.
        self.grown = False
        self.found: int | None = None

    def _found_size(self) -> int | None:
        """The file's whole size (a store object's from its listing), for the message of
        a file larger than its manifest states; None if ``stat`` does not tell."""
        try:
            return self.path.stat().st_size
        except OSError:
            return None

    def _over(self, pending: list[bytes], end: int | None = None, newline: int = 0) -> None:
        """Stop the read if the line in progress is past its bound: ``pending`` are its
        pieces, ending at byte ``end`` of the file (default: all read so far), the last
        ``newline`` bytes of them its newline."""
        held = sum(map(len, pending))
        if held - newline > self.max_line:
            start = (self.size if end is None else end) - held
            raise EvidenceLimitError(
                f"{self.path}: the line at byte {start} is longer than {self.max_line} "
                "bytes (the record limit); read no further")

    @property
    def sha256(self) -> str:
        """The lowercase hex SHA-256 of the bytes read so far (the whole file after lines())."""
        return self._hash.hexdigest()

    def spans(self) -> Iterator[tuple[bytes, int, int]]:
        """:meth:`_spans`, a stop at a bound left in :attr:`stopped` when deferred."""
        try:
            yield from self._spans()
        except EvidenceLimitError as exc:
            if not self.defer:
                raise
            self.stopped = exc

    def _spans(self) -> Iterator[tuple[bytes, int, int]]:
        """Yield the file in order as ``(buffer, start, stop)``: ``buffer[start:stop]`` is
        whole lines, each ending in a newline, except a last span that is a line without
        one (a cut-short segment).

        A span is a read of about :data:`_CHUNK` bytes, used where it lies: a caller finds
        its lines with ``bytes.find`` and slices them as memoryviews, so nothing is copied
        (a copy of each read would cost more than the read: a fresh megabyte is a fresh
        mapping, page faults and all). Only a line that crosses two reads is joined, as a
        span of its own; the file's SHA-256 is fed from the same reads.
        """
        handle = open_regular(self.path, "evidence file", within=self.path.parent)
        pending: list[bytes] = []  # the start of a line that crosses reads
        limit = self.max_bytes
        grown = False  # the file goes on past the size its manifest states
        # A read no longer than the record limit (and its newline): a line past the limit
        # always crosses reads, where _over measures it.
        chunk_size = min(_CHUNK, self.max_line + 1)
        try:
            while not grown:
                # With a stated size, one byte past it is read (to tell that it goes on).
                want = chunk_size if limit is None else min(chunk_size, limit - self.size + 1)
                try:
                    chunk = handle.read(want)
                except OSError as exc:
                    raise InputError(f"cannot read evidence file {self.path}: "
                                     f"{exc.strerror or exc}") from None
                if limit is not None and self.size + len(chunk) > limit:
                    grown = True
                    chunk = chunk[: limit - self.size]  # its lines up to the bound are read
                if not chunk:
                    break
                self.size += len(chunk)
                self._hash.update(chunk)
                start = 0
                if pending:
                    start = chunk.find(b"\n") + 1
                    if not start:
                        pending.append(chunk)
                        self._over(pending)
                        continue
                    pending.append(chunk[:start])
                    self._over(pending, self.size - len(chunk) + start, 1)
                    joined = b"".join(pending)
                    pending = []
                    yield joined, 0, len(joined)
                cut = chunk.rfind(b"\n") + 1
                if cut > start:
                    yield chunk, start, cut
                if cut < len(chunk):
                    pending.append(chunk[max(cut, start):])
                    self._over(pending)
        finally:
            handle.close()
        if grown:
            assert limit is not None  # only a stated size can be outgrown
            self.grown = True
            size = self._found_size()
            self.found = size if size is not None and size > limit else None
            found = f"{self.found} found" if self.found is not None else "more found"
            raise EvidenceLimitError(
                f"{self.path}: larger than its manifest states ({limit} bytes expected, "
                f"{found}); nothing past byte {limit} is read")
        if pending:
            joined = b"".join(pending)
            yield joined, 0, len(joined)

    def lines(self) -> Iterator[tuple[int, bytes, bool]]:
        """Yield every line of the file in order (see the class docstring)."""
        number = 0
        for buffer, start, stop in self.spans():
            pieces = buffer[start:stop].split(b"\n")
            last = pieces.pop()  # b"" after a final newline, else a line without one
            for piece in pieces:
                number += 1
                yield number, piece, True
            if last:
                yield number + 1, last, False


def parse_lines(data: bytes) -> list[Line]:
    """Split a segment file into lines and parse each as a JSON object."""
    if not data:
        return []
    pieces = data.split(b"\n")
    # A well-formed segment ends in "\n", leaving an empty last piece; anything else there
    # is a record that was cut short.
    last_complete = pieces[-1] == b""
    if last_complete:
        pieces.pop()
    return [parse_line(index + 1, piece, last_complete or index < len(pieces) - 1)
            for index, piece in enumerate(pieces)]


def parse_line(number: int, piece: bytes, complete: bool) -> Line:
    """Parse one segment line (without its newline) as a JSON object."""
    if not piece:
        return Line(number, None, "empty line", complete)
    try:
        value = orjson.loads(piece)
    except orjson.JSONDecodeError:
        return Line(number, None, "not valid JSON", complete)
    if not isinstance(value, dict):
        return Line(number, None, "not a JSON object", complete)
    return Line(number, value, None, complete)


def read_manifest(path: Path) -> dict[str, Any]:
    """Return the raw (not upgraded) manifest at ``path``; BundleFormatError if malformed."""
    data = read_file(path, "evidence file", limit=MAX_META_BYTES, within=path.parent)
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise BundleFormatError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise BundleFormatError(f"{path}: not a JSON object")
    return value


def check_manifest_format(manifest: dict[str, Any], path: Path, bundle_format: int) -> None:
    """Raise :class:`BundleFormatError` unless the manifest's format is the bundle's."""
    manifest_format = check_format(manifest.get("format"), str(path))
    if manifest_format != bundle_format:
        raise BundleFormatError(
            f"{path}: format {manifest_format} does not match the bundle's format {bundle_format}"
        )


def _segment_records(
    info: SegmentInfo, bundle_format: int, *, lenient: bool
) -> Iterator[dict[str, Any]]:
    upgrade = bundle_format != FORMAT_VERSION
    path = info.path
    size = info.manifest.get("bytes") if info.manifest is not None else None
    scan = SegmentScan(path, max_bytes=size if type(size) is int else None)
    try:
        for number, piece, complete in scan.lines():
            line = parse_line(number, piece, complete)
            record = line.record
            if record is not None and complete:
                if upgrade:
                    record = upgrade_record(record, bundle_format)
                problem = record_problem(record)
                if problem is None:
                    yield record
                    continue
            else:
                problem = line.error if complete else "incomplete last line (truncated segment)"
            if not lenient:
                raise BundleFormatError(f"{path} line {number}: {problem}")
    except EvidenceLimitError:
        if not lenient:
            raise  # lenient: the rest of this segment is unreadable, the next may not be


def _segment_info(files: SegmentFiles, bundle_format: int, *, lenient: bool) -> SegmentInfo | None:
    if files.path is None:
        if lenient:
            return None
        where = files.manifest_path.with_name(files.name) if files.manifest_path else files.name
        raise BundleFormatError(f"{where}: missing (its manifest exists)")
    manifest: dict[str, Any] | None = None
    if files.manifest_path is not None:
        try:
            raw = read_manifest(files.manifest_path)
            check_manifest_format(raw, files.manifest_path, bundle_format)
        except BundleFormatError:
            if not lenient:
                raise
        else:
            manifest = upgrade_manifest(raw, bundle_format)
            problem = manifest_problem(manifest)
            if problem is not None:
                if not lenient:
                    raise BundleFormatError(f"{files.manifest_path}: {problem}")
                manifest = None
    return SegmentInfo(files.number, files.path, manifest)


def iter_records(path: str | Path, *, lenient: bool = False) -> Iterator[dict[str, Any]]:
    """Yield every record of the bundle at ``path`` in order, upgraded to the current format.

    Streams: one record at a time from a chunked read, so memory is flat in the bundle's
    size; this is what the offline commands should read with. ``lenient`` skips malformed
    lines and missing segment files instead of raising :class:`BundleFormatError`.
    """
    bundle_format, _meta = read_bundle_meta(path)
    for files in list_segments(path):
        info = _segment_info(files, bundle_format, lenient=lenient)
        if info is not None:
            yield from _segment_records(info, bundle_format, lenient=lenient)


def read_bundle(path: str | Path, *, lenient: bool = False) -> Bundle:
    """Read the whole bundle at ``path``: metadata, segments with manifests, records.

    Raises :class:`InputError` for a missing or unreadable directory and
    :class:`BundleFormatError` for an unknown format version or (unless ``lenient``) a
    malformed record, manifest or missing segment file.
    """
    root = bundle_path(path)
    bundle_format, meta = read_bundle_meta(root)
    bundle = Bundle(path=root, format=bundle_format, meta=meta)
    for files in list_segments(root):
        info = _segment_info(files, bundle_format, lenient=lenient)
        if info is None:
            continue
        bundle.segments.append(info)
        bundle.records.extend(_segment_records(info, bundle_format, lenient=lenient))
    return bundle


__all__ = [
    "MAX_META_BYTES",
    "MAX_RECORD_BYTES",
    "RECORD_LIMIT_ENV",
    "Bundle",
    "Line",
    "SegmentFiles",
    "SegmentInfo",
    "SegmentScan",
    "bundle_path",
    "check_manifest_format",
    "iter_records",
    "list_segments",
    "max_record_bytes",
    "parse_line",
    "parse_lines",
    "read_bundle",
    "read_bundle_meta",
    "read_manifest",
]


@dataclass(frozen=True, slots=True)
class _Stat:
    """What one ``stat`` found: a file, a directory, or nothing."""

    path: Path
    mode: int | None  # None: nothing there

    def exists(self) -> bool:
        return self.mode is not None

    def is_file(self) -> bool:
        return self.mode is not None and stat.S_ISREG(self.mode)

    def is_dir(self) -> bool:
        return self.mode is not None and stat.S_ISDIR(self.mode)


def _stat(path: Path, what: str) -> _Stat:
    """``stat`` ``path`` (following symlinks): nothing there is no error, anything else that
    stops it (no permission to search the directory) is an :class:`InputError` naming it.
    ``Path.exists`` and ``Path.is_file`` raise PermissionError for that, a traceback."""
    try:
        return _Stat(path, path.stat().st_mode)  # a StorePath answers from the store
    except (FileNotFoundError, NotADirectoryError):
        return _Stat(path, None)
    except OSError as exc:
        raise InputError(f"cannot read {what} {path}: {exc.strerror or exc}") from None


def find_bundles(path: str | Path) -> list[Path]:
    """The bundles ``path`` names: itself if it is one, else the bundles directly inside it.

    The proxy writes one bundle per run under its evidence directory, so commands accept
    either a bundle or that directory. Raises :class:`InputError` when there is none.
    """
    if isinstance(path, str) and not path.strip():
        raise InputError("an empty path names no evidence")
    if isinstance(path, str) and is_store_url(path):
        return store_bundles(path)
    root = bundle_path(path)
    meta = _stat(root / BUNDLE_FILE, "evidence file")
    if meta.is_file():
        return [root]
    if meta.exists():
        raise InputError(f"{meta.path}: not a file")
    if not _stat(root, "evidence").is_dir():
        raise InputError(f"{root}: not a directory")
    try:
        entries = sorted(root.iterdir())
    except OSError as exc:
        raise InputError(f"cannot read evidence {root}: {exc.strerror or exc}") from None
    # A subdirectory that cannot be read may be a bundle: an error, never silently skipped.
    found = [p for p in entries if _stat(p / BUNDLE_FILE, "evidence file").is_file()]
    if not found:
        raise InputError(f"{root}: not an evidence bundle and holds none (no {BUNDLE_FILE})")
    return found


def find_all_bundles(paths: Iterable[str | Path]) -> list[Path]:
    """The bundles all of ``paths`` name (:func:`find_bundles` each), in order.

    A bundle named twice (the same path given twice, a bundle and its evidence directory,
    a symlink) would count its exchanges twice and could make a thin health window look
    sufficient, so it is an :class:`InputError` naming both arguments.
    """
    seen: dict[Path, str | Path] = {}
    found: list[Path] = []
    for given in paths:
        for bundle in find_bundles(given):
            key = bundle.resolve()
            if key in seen:
                raise InputError(
                    f"{given}: bundle {key.name} is already given (by {seen[key]}); "
                    "each bundle may be named once")
            seen[key] = given
            found.append(bundle)
    return found
