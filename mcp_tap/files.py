"""Reading the files an operator names: the one place an OSError becomes an InputError.

Every command reads a few files (a policy, rollback evidence, keys, fixtures, a config).
Reading them here gives every unreadable file the same one-line error naming what it was
for, and turns an empty path into an error instead of silently meaning the current
directory (``Path("")`` is ``Path(".")``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mcp_tap.errors import InputError

__all__ = ["file_argument", "read_file"]


def file_argument(text: str) -> Path:
    """An argparse ``type`` for a file path: refuses an empty path before it becomes ``.``."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path names no file")
    return Path(text)


def read_file(path: str | Path, what: str) -> bytes:
    """The bytes of ``path``; :class:`InputError` ``cannot read WHAT PATH: reason`` otherwise."""
    if isinstance(path, str) and not path.strip():
        raise InputError(f"{what}: an empty path names no file")
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
