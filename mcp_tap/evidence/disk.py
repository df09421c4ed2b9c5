"""The evidence writer's disk primitives: segment files, atomic JSON files, a log rate limit.

Kept apart from :mod:`mcp_tap.evidence.bundlefiles` so that holds only the chain, the
segments and their manifests. A space reserve (:func:`make_reserve`) is a file of zeros
written when the bundle opens and removed when the disk is full at close, so the gap
records and the closing summary that state the losses still fit on a disk that never frees
up.
"""

from __future__ import annotations

import contextlib
import errno
import io
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, Protocol

import orjson

RESERVE_FILE: Final = ".reserve"
RESERVE_BYTES: Final = 256 * 1024
# Evidence holds redacted traffic, still nothing for other users of the machine: every file
# the writer creates is the owner's only, as the report and the signing key files are.
PRIVATE_FILE: Final = 0o600
PRIVATE_DIR: Final = 0o700


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
    """Open a new segment file unbuffered for appending: a record is in the OS once written
    (created :data:`PRIVATE_FILE`)."""
    return io.FileIO(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, PRIVATE_FILE), "ab")


def open_private(path: Path) -> io.BufferedWriter:
    """Create (or truncate) ``path`` for writing bytes, :data:`PRIVATE_FILE` when created."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
    return os.fdopen(fd, "wb")


def make_private_dirs(path: Path) -> None:
    """``mkdir -p path`` with every directory it creates :data:`PRIVATE_DIR` (``Path.mkdir``
    gives the parents it creates the default mode)."""
    missing: list[Path] = []
    for level in (path, *path.parents):
        if level.exists():
            break
        missing.append(level)
    for level in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another writer made it meanwhile
            level.mkdir(PRIVATE_DIR)


def fsync_dir(directory: Path) -> None:
    # Makes the rename of a manifest durable; not every platform can open a directory.
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_json_atomically(path: Path, value: dict[str, Any]) -> None:
    """Write ``value`` to ``path`` via a fsynced temporary file and a rename."""
    tmp = path.with_name(path.name + ".tmp")
    with open_private(tmp) as handle:
        handle.write(orjson.dumps(value, option=orjson.OPT_INDENT_2) + b"\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def write_all(file: SegmentFile, data: bytes) -> None:
    while data:
        written = file.write(data)
        if not written:
            # A regular file that accepts nothing would loop forever; call it an I/O error.
            raise OSError(errno.EIO, "short write")
        data = data[written:]


class Every:
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




def make_reserve(directory: Path) -> None:
    """Write the space reserve (best effort: a disk already full simply has none)."""
    with contextlib.suppress(OSError), open_private(directory / RESERVE_FILE) as handle:
        handle.write(bytes(RESERVE_BYTES))
        handle.flush()
        os.fsync(handle.fileno())


def release_reserve(directory: Path) -> bool:
    """Remove the space reserve; whether there was one to remove."""
    try:
        os.unlink(directory / RESERVE_FILE)
    except OSError:
        return False
    return True
