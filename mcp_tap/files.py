"""Reading the files an operator names: the one place an OSError becomes an InputError.

Every command reads a few files (a policy, rollback evidence, keys, fixtures, a config,
evidence). Reading them here gives every unreadable file the same one-line error naming
what it was for, and turns an empty path into an error instead of silently meaning the
current directory (``Path("")`` is ``Path(".")``).

Nothing here assumes the file is what its name says: evidence may come from a shared
store anyone with write access fills. :func:`open_regular` opens only a regular file (a
FIFO would block a reader forever, ``/dev/zero`` never ends, a directory is no file), and
without following a symlink out of the directory the caller names; :func:`read_file`
reads at most ``limit`` bytes, so a 20 GB sparse file is one clear error, not a
``MemoryError`` (and, given the directory, opens only such a regular file).
"""

from __future__ import annotations

import argparse
import os
import stat
from pathlib import Path
from typing import BinaryIO, Final, Protocol, runtime_checkable

from mcp_tap.errors import InputError

__all__ = [
    "MAX_FILE_BYTES", "RemoteFile", "evidence_argument", "file_argument", "open_regular",
    "read_file",
]

MAX_FILE_BYTES: Final = 64 * 1024 * 1024
"""The most :func:`read_file` reads by default: policies, keys, configs, ``bundle.json``
and manifests are kilobytes; anything near this is not what it claims to be."""

# O_NONBLOCK: opening a FIFO with no writer would block; on a regular file it changes
# nothing. O_NOCTTY: a terminal device never becomes the controlling terminal.
_OPEN_FLAGS: Final = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
                      | getattr(os, "O_CLOEXEC", 0))


def file_argument(text: str) -> Path:
    """An argparse ``type`` for a file path: refuses an empty path before it becomes ``.``."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path names no file")
    return Path(text)


def evidence_argument(text: str) -> str | Path:
    """argparse ``type`` for a bundle or evidence location: an ``s3://`` location is kept
    as text (a path would fold its ``//``), anything else is a path (:func:`file_argument`)."""
    if text.startswith("s3://"):
        return text
    return file_argument(text)


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


@runtime_checkable
class RemoteFile(Protocol):
    """A file kept elsewhere than the local file system (an object in a store) that opens
    itself for reading (:class:`mcp_tap.evidence.storepath.StorePath`)."""

    def open_object(self) -> BinaryIO:
        """A binary reader over the file's bytes."""
        ...


def open_regular(path: str | Path, what: str, *, within: str | Path | None = None) -> BinaryIO:
    """Open ``path`` for binary reading if it is a regular file; :class:`InputError` else.

    A FIFO, a device, a socket or a directory is refused without blocking (the open does
    not wait for a FIFO's writer, and ``fstat`` on the open descriptor decides, so a swap
    after a check cannot slip one in). With ``within``, a path whose real location (its
    symlinks followed) leaves that directory is refused too: a bundle's symlink to
    ``/etc/shadow`` or ``/dev/zero`` is not evidence.
    """
    if isinstance(path, str) and not path.strip():
        raise InputError(f"{what}: an empty path names no file")
    if isinstance(path, RemoteFile):  # an object in a store: no symlinks, no FIFOs
        try:
            return path.open_object()
        except OSError as exc:
            raise InputError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    if within is not None:
        real = os.path.realpath(path)
        root = os.path.realpath(within)
        if os.path.commonpath([real, root]) != root:
            raise InputError(f"cannot read {what} {path}: a symlink out of {within}")
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        raise InputError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):  # the words of the OSError reading one would raise
            raise InputError(f"cannot read {what} {path}: Is a directory")
        if not stat.S_ISREG(mode):
            raise InputError(f"cannot read {what} {path}: {_kind(mode)}, not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_file(path: str | Path, what: str, *, limit: int = MAX_FILE_BYTES,
              within: str | Path | None = None) -> bytes:
    """The bytes of ``path``; :class:`InputError` ``cannot read WHAT PATH: reason`` otherwise.

    At most ``limit`` bytes are read: a larger file (or ``/dev/zero``) is an error naming
    the limit, read no further. With ``within`` (evidence: a file of a bundle) only a
    regular file inside that directory is read (:func:`open_regular`); an operator's own
    file (a policy, a key) may also be a pipe (``--policy <(...)``).
    """
    if within is not None:
        handle = open_regular(path, what, within=within)
    else:
        if isinstance(path, str) and not path.strip():
            raise InputError(f"{what}: an empty path names no file")
        try:
            handle = open(path, "rb")  # noqa: SIM115 - closed by the with below
        except OSError as exc:
            raise InputError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    with handle:
        try:
            data = handle.read(limit + 1)
        except OSError as exc:
            raise InputError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise InputError(f"cannot read {what} {path}: larger than {limit} bytes")
    return data
