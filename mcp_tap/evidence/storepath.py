"""Bundles in an S3-compatible object store, read exactly as bundle directories are.

A :class:`StorePath` is a :class:`pathlib.PosixPath` whose text is ``s3://BUCKET/KEY``: a
"directory" is a key prefix, a file is an object. It answers the few file-system calls the
evidence readers make (``stat``, ``iterdir``, ``exists``, ``open`` for reading,
``resolve``) from the store, so :mod:`mcp_tap.evidence.reader`, ``verify``, the gate and
every command that reads a bundle take an ``s3://`` location with the same integrity
checks, bounds and error messages as a directory. Any call it does not answer falls through
to the local file system with the text ``s3://...``, which names nothing there: an error,
never another file.

Objects are streamed as they are read (a segment is never downloaded first). Listing a
bundle (``iterdir``) or a prefix of bundles (:func:`store_bundles`) learns every object's
size from the listing and fetches the small files (``bundle.json`` and every manifest) in
parallel, so the gate from tallies, which reads nothing else, waits for the store once per
batch of objects rather than once per object.

Store errors become ``OSError`` (``FileNotFoundError`` for a missing key) inside a read,
where the readers already turn them into one-line :class:`~mcp_tap.errors.InputError`;
listing and finding bundles raise :class:`~mcp_tap.errors.StoreError` from
:func:`~mcp_tap.evidence.store.translated`.
"""

from __future__ import annotations

import errno
import io
import os
import stat
import threading
from collections.abc import Generator, Iterable
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path, PosixPath
from typing import Any, BinaryIO, Final

from mcp_tap.errors import InputError
from mcp_tap.evidence.format import BUNDLE_FILE, manifest_number
from mcp_tap.evidence.store import SCHEME, StoreLocation, client_from_env, translated

# Small files fetched ahead in parallel: bundle.json and manifests (each far below this).
PREFETCH_MAX_BYTES: Final = 1 << 20
PREFETCH_THREADS: Final = 16
_FILE_MODE: Final = stat.S_IFREG | 0o444
_DIR_MODE: Final = stat.S_IFDIR | 0o555


_ENVIRONMENT: Final = ("AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION",
                       "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                       "AWS_PROFILE")


def _client() -> Any:
    """The S3 client of this process for the current AWS environment, made once per
    process and distinct environment. boto3 clients are thread-safe, but their pooled
    keep-alive connections must not cross a fork: a worker forked by ``verify`` or the gate
    would read its answers off the parent's sockets, mixing objects' bytes. A process that
    changes its environment (a test) gets a client for the new one."""
    return _client_for(os.getpid(), tuple(os.environ.get(name) for name in _ENVIRONMENT))


@lru_cache(maxsize=4)
def _client_for(pid: int, environment: tuple[str | None, ...]) -> Any:
    return client_from_env()


class _Known:
    """What listings have told this process: object sizes, and small objects fetched ahead.

    A fetched object is handed out once (the next open reads the store again), so a
    ``bundle.json`` rewritten at close is never served stale to a later read.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.sizes: dict[tuple[str, str], int] = {}
        self._ahead: dict[tuple[str, str], bytes] = {}

    def note_sizes(self, bucket: str, items: Iterable[tuple[str, int]]) -> None:
        with self._lock:
            for key, size in items:
                self.sizes[(bucket, key)] = size

    def put_ahead(self, bucket: str, key: str, data: bytes) -> None:
        with self._lock:
            self._ahead[(bucket, key)] = data

    def has_ahead(self, bucket: str, key: str) -> bool:
        with self._lock:
            return (bucket, key) in self._ahead

    def take_ahead(self, bucket: str, key: str) -> bytes | None:
        with self._lock:
            return self._ahead.pop((bucket, key), None)


_KNOWN: Final = _Known()


class _ObjectStream(io.RawIOBase):
    """A store object read as it arrives (botocore's streaming body), store errors as
    ``OSError`` naming the object."""

    def __init__(self, path: StorePath, body: Any) -> None:
        super().__init__()
        self._path = path
        self._body = body

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        from botocore.exceptions import BotoCoreError

        try:
            data = self._body.read(len(buffer))
        except BotoCoreError as exc:
            raise OSError(errno.EIO, f"the store stopped the read ({type(exc).__name__})",
                          str(self._path)) from None
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            self._body.close()
        super().close()


class StorePath(PosixPath):
    """``s3://BUCKET/KEY`` as a path: a key prefix is a directory, an object a file."""

    @classmethod
    def of(cls, location: StoreLocation) -> StorePath:
        """The path of ``location`` (its prefix as a directory)."""
        return cls(str(location))

    # -- what it names -------------------------------------------------------------------

    @property
    def bucket(self) -> str:
        """The bucket."""
        return self.parts[1]

    @property
    def key(self) -> str:
        """The object key (or key prefix, for a directory); ``""`` for the whole bucket."""
        return "/".join(self.parts[2:])

    def __str__(self) -> str:
        return SCHEME + "/".join(self.parts[1:])

    def __fspath__(self) -> str:
        return str(self)

    def __repr__(self) -> str:
        return f"StorePath({str(self)!r})"

    # -- the file-system calls the evidence readers make ---------------------------------

    def resolve(self, strict: bool = False) -> StorePath:
        """Itself: a store has no symlinks and no relative keys."""
        return self

    def stat(self, *, follow_symlinks: bool = True) -> os.stat_result:
        """A regular file of the object's size, or a directory for a key prefix;
        ``FileNotFoundError`` when neither exists."""
        size = _KNOWN.sizes.get((self.bucket, self.key))
        if size is not None:
            return os.stat_result((_FILE_MODE, 0, 0, 1, 0, 0, size, 0, 0, 0))
        # A prefix with keys under it is a directory, whatever a HEAD of its name says
        # (some stores answer a HEAD of a "folder" with an empty object).
        if self._has_children():
            return os.stat_result((_DIR_MODE, 0, 0, 1, 0, 0, 0, 0, 0, 0))
        size = self._head()
        if size is not None:
            return os.stat_result((_FILE_MODE, 0, 0, 1, 0, 0, size, 0, 0, 0))
        raise FileNotFoundError(errno.ENOENT, "no such object or prefix", str(self))

    def iterdir(self) -> Generator[StorePath, None, None]:
        """The objects and sub-prefixes directly under this prefix; the small evidence
        files among them are fetched ahead in parallel."""
        prefix = f"{self.key}/" if self.key else ""
        names: list[str] = []
        sizes: list[tuple[str, int]] = []
        pages = _client().get_paginator("list_objects_v2")
        with translated("list", self):
            for page in pages.paginate(Bucket=self.bucket, Prefix=prefix, Delimiter="/"):
                for item in page.get("CommonPrefixes", []):
                    names.append(item["Prefix"][len(prefix):].rstrip("/"))
                for item in page.get("Contents", []):
                    sizes.append((item["Key"], int(item["Size"])))
                    names.append(item["Key"][len(prefix):])
        _KNOWN.note_sizes(self.bucket, sizes)
        children = [self / name for name in names if name]
        fetch_ahead([c for c in children if _small_evidence(c.name)])
        yield from children

    def open(self, mode: str = "r", buffering: int = -1, encoding: str | None = None,
             errors: str | None = None, newline: str | None = None) -> Any:
        """Open the object for binary reading (``"rb"`` only: evidence is read, never
        written through a path)."""
        if mode != "rb":
            raise OSError(errno.EROFS, "store objects are opened for reading only", str(self))
        return self.open_object()

    def open_object(self) -> BinaryIO:
        """A buffered reader over the object, streamed as it is read."""
        ahead = _KNOWN.take_ahead(self.bucket, self.key)
        if ahead is not None:
            return io.BytesIO(ahead)
        body = self._get()
        return io.BufferedReader(_ObjectStream(self, body), buffer_size=1 << 20)

    # -- the store requests behind them ----------------------------------------------------

    def _get(self) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return _client().get_object(Bucket=self.bucket, Key=self.key)["Body"]
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "error")
            if code in ("NoSuchKey", "404", "NotFound"):
                # A key prefix in an object's place (a "directory" named like a segment):
                # the words a directory in a bundle on disk gives.
                if self._has_children():
                    raise IsADirectoryError(errno.EISDIR, "Is a directory", str(self)) from None
                raise FileNotFoundError(errno.ENOENT, "no such object", str(self)) from None
            raise OSError(errno.EIO, f"the store answered {code}", str(self)) from None
        except BotoCoreError as exc:
            raise OSError(errno.EIO, f"the store is unreachable ({type(exc).__name__})",
                          str(self)) from None

    def _head(self) -> int | None:
        """The object's size; ``None`` when there is no such object (a prefix, or nothing)."""
        from botocore.exceptions import BotoCoreError, ClientError

        if not self.key:
            return None
        try:
            answer = _client().head_object(Bucket=self.bucket, Key=self.key)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "error")
            if code in ("NoSuchKey", "404", "NotFound"):
                return None
            raise OSError(errno.EIO, f"the store answered {code}", str(self)) from None
        except BotoCoreError as exc:
            raise OSError(errno.EIO, f"the store is unreachable ({type(exc).__name__})",
                          str(self)) from None
        return int(answer["ContentLength"])

    def _has_children(self) -> bool:
        prefix = f"{self.key}/" if self.key else ""
        with translated("list", self):
            page = _client().list_objects_v2(Bucket=self.bucket, Prefix=prefix, MaxKeys=1)
        return bool(page.get("KeyCount") or page.get("Contents"))


def _small_evidence(name: str) -> bool:
    return name == BUNDLE_FILE or manifest_number(name) is not None


def fetch_ahead(paths: list[StorePath]) -> None:
    """Fetch ``paths`` (small objects) in parallel, for the reads that follow. A failure
    here is no error: the read that needs the object meets it again and says so."""

    def fetch(path: StorePath) -> None:
        size = _KNOWN.sizes.get((path.bucket, path.key))
        if size is None or size > PREFETCH_MAX_BYTES or _KNOWN.has_ahead(path.bucket, path.key):
            return
        try:
            with path._get() as body:
                data = body.read(PREFETCH_MAX_BYTES + 1)
        except OSError:
            return
        if len(data) <= PREFETCH_MAX_BYTES:
            _KNOWN.put_ahead(path.bucket, path.key, data)

    if len(paths) == 1:
        fetch(paths[0])
    elif paths:
        with ThreadPoolExecutor(min(PREFETCH_THREADS, len(paths))) as pool:
            list(pool.map(fetch, paths))


def store_bundles(url: str) -> list[Path]:
    """Every bundle under the store location ``url`` (each key prefix holding a
    ``bundle.json``), in key order; :class:`InputError` when there is none."""
    location = StoreLocation.parse(url)
    prefix = f"{location.prefix}/" if location.prefix else ""
    found: list[Path] = []
    sizes: list[tuple[str, int]] = []
    pages = _client().get_paginator("list_objects_v2")
    with translated("list", location):
        for page in pages.paginate(Bucket=location.bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                key = item["Key"]
                sizes.append((key, int(item["Size"])))
                if key == f"{prefix}{BUNDLE_FILE}" or key.endswith(f"/{BUNDLE_FILE}"):
                    found.append(StorePath(SCHEME + location.bucket + "/" + key).parent)
    if not found:
        raise InputError(f"{location}: holds no evidence bundle (no {BUNDLE_FILE} under it)")
    # One listing told every size: the bundles' small files are fetched at once, in parallel
    # (what the gate from tallies reads of every pod's bundle).
    _KNOWN.note_sizes(location.bucket, sizes)
    fetch_ahead([StorePath(SCHEME + location.bucket + "/" + key) for key, _ in sizes
                 if _small_evidence(key.rpartition("/")[2])])
    return sorted(found, key=str)

def store_problem(url: str) -> str | None:
    """Why the store location ``url`` cannot be read now (one line, no credential), or
    ``None`` when its bucket answers."""
    from mcp_tap.errors import TapError

    try:
        location = StoreLocation.parse(url)
        with translated("reach", location):
            _client().head_bucket(Bucket=location.bucket)
    except TapError as exc:
        return str(exc)
    return None


__all__ = ["PREFETCH_MAX_BYTES", "StorePath", "fetch_ahead", "store_bundles", "store_problem"]
