"""Bounded capture of a body that streams past: digest over every byte, a capped copy.

Compressed bodies are forwarded as they are; the judge needs the decoded bytes, so a
decoded copy (also capped) is kept for ``gzip``/``deflate`` content encodings.
"""

from __future__ import annotations

import hashlib
import zlib
from dataclasses import dataclass, field


@dataclass(slots=True)
class BodyCapture:
    """Accumulates one body: SHA-256 and size of all bytes, a copy of at most ``cap`` bytes."""

    cap: int
    encoding: str = ""
    size: int = 0
    truncated: bool = False
    decode_failed: bool = False
    ended: bool = False  # the body's end was seen (not cut short by a client or upstream)
    _hash: hashlib._Hash = field(default_factory=hashlib.sha256)
    _chunks: list[bytes] = field(default_factory=list)
    _kept: int = 0
    _inflater: zlib._Decompress | None = None
    _final_digest: str = ""  # set on a copy that crossed a process boundary (no hash object)

    def __post_init__(self) -> None:
        enc = self.encoding.strip().lower()
        if enc in ("gzip", "x-gzip"):
            self._inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif enc == "deflate":
            self._inflater = zlib.decompressobj()
        elif enc not in ("", "identity"):
            self.decode_failed = True  # br, zstd: forwarded untouched, judged as unreadable

    def feed(self, chunk: bytes) -> None:
        """Account for one chunk that passed through."""
        self.size += len(chunk)
        self._hash.update(chunk)
        if self.truncated or self.decode_failed:
            return
        data = chunk
        if self._inflater is not None:
            try:
                data = self._inflater.decompress(chunk, max(0, self.cap - self._kept) + 1)
            except zlib.error:
                self.decode_failed = True
                return
        room = self.cap - self._kept
        if len(data) > room:
            data = data[:room]
            self.truncated = True
        if data:
            self._chunks.append(data)
            self._kept += len(data)

    def end(self) -> None:
        """Mark the body as read to its end (EOF seen)."""
        self.ended = True

    def __reduce__(self) -> tuple[object, ...]:
        # Hash and inflater objects do not pickle; what was captured so far does.
        state = (self.size, self.truncated, self.decode_failed, self.ended, self.body, self.digest)
        return (_restored, (self.cap, self.encoding, *state))

    @property
    def digest(self) -> str:
        """SHA-256 hex of every byte fed (the bytes on the wire, compressed or not).

        Never recorded as it is: the recorder seals it with the bundle's key
        (:func:`mcp_tap.core.hashing.seal_hex`), so evidence holds only keyed digests.
        """
        return self._final_digest or self._hash.hexdigest()

    @property
    def body(self) -> bytes:
        """The captured (decoded, capped) body."""
        if len(self._chunks) > 1:
            self._chunks = [b"".join(self._chunks)]
        return self._chunks[0] if self._chunks else b""

    @property
    def complete(self) -> bool:
        """Whether :attr:`body` holds the whole decoded body: kept in full and read to its end."""
        return self.ended and not self.truncated and not self.decode_failed


def _restored(
    cap: int,
    encoding: str,
    size: int,
    truncated: bool,
    decode_failed: bool,
    ended: bool,
    body: bytes,
    digest: str,
) -> BodyCapture:
    """A finished capture rebuilt from its pickled state (it takes no more bytes)."""
    capture = BodyCapture(cap)
    capture.encoding = encoding
    capture.size, capture.truncated, capture.decode_failed = size, truncated, decode_failed
    capture.ended, capture._final_digest = ended, digest
    capture._chunks = [body] if body else []
    capture._kept = len(body)
    return capture
