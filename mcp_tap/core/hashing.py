"""Digests: canonical JSON and SHA-256 for redacted data, keyed digests for wire bytes.

Two kinds, for two kinds of input:

* **Redacted data** (records, segments, decisions): :func:`digest` / :func:`sha256_hex`,
  plain SHA-256. What they cover is on disk for anyone to read, so a key would hide nothing.
* **Wire bytes** (request and response bodies, which may hold secrets redaction removed):
  :func:`body_digest` / :class:`BodyDigest`, ``HMAC-SHA-256(key, SHA-256(bytes))`` under a
  :class:`DigestKey`. Without the key nobody can test a guess against a digest, so a
  redacted 4-digit password cannot be brute-forced from it. SHA-256 first, then the HMAC:
  a process that only streams bytes (the forwarder) can hash every byte with no key in
  its memory, and the recording process seals that hash with :func:`seal` -- the same
  value :func:`body_digest` gives for the same bytes.

Sans-IO: keys are passed in; :meth:`DigestKey.random` draws one, reading a key from a file or
the environment is the caller's business (``[redaction] digest_key_file`` in the proxy).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

_CANONICAL = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS

#: What a record's ``digests.alg`` says about its ``bodyDigest`` values.
BODY_DIGEST_ALG: Final = "hmac-sha256(sha256)"
#: Shortest operator key accepted (RFC 2104 recommends at least the hash output, 32 bytes).
MIN_KEY_BYTES: Final = 16
_KEY_ID_LABEL: Final = b"mcp-tap digest key id"
_KEY_ID_HEX: Final = 16
_SHA256_BLOCK: Final = 64  # bytes: the block size HMAC pads the key to


def canonical_json(value: Any) -> bytes:
    """Serialise ``value`` canonically: orjson, sorted keys, no whitespace."""
    return orjson.dumps(value, option=_CANONICAL)


def sha256_hex(data: bytes) -> str:
    """Return the lowercase hex SHA-256 of ``data`` (for data that is already redacted)."""
    return hashlib.sha256(data).hexdigest()


def digest(value: Any) -> str:
    """Return the SHA-256 hex digest of the canonical JSON of ``value`` (redacted data)."""
    return sha256_hex(canonical_json(value))


@dataclass(frozen=True, slots=True)
class DigestKey:
    """The key of a bundle's body digests: random per bundle, or the operator's.

    ``source`` is ``"bundle"`` (drawn for one bundle, kept only in memory, gone with the
    process: digests then prove equality within the bundle only) or ``"operator"`` (the
    operator's key: whoever holds it can check a body they have against the evidence).
    The repr never shows the key.
    """

    secret: bytes = field(repr=False)
    source: str = "bundle"

    def __post_init__(self) -> None:
        """Refuse a key too short to resist guessing."""
        if len(self.secret) < MIN_KEY_BYTES:
            raise ValueError(f"a digest key needs at least {MIN_KEY_BYTES} bytes")

    @classmethod
    def random(cls) -> DigestKey:
        """A fresh 32-byte key for one bundle."""
        return cls(secrets.token_bytes(32), "bundle")

    @property
    def key_id(self) -> str:
        """A keyed fingerprint naming this key in records (tells keys apart, reveals none)."""
        return hmac.new(self.secret, _KEY_ID_LABEL, hashlib.sha256).hexdigest()[:_KEY_ID_HEX]

    def describe(self) -> dict[str, str]:
        """What a record says about its body digests: algorithm, key id, key source."""
        return {"alg": BODY_DIGEST_ALG, "keyId": self.key_id, "keySource": self.source}


def hmac_sha256(secret: bytes, message: bytes) -> bytes:
    """HMAC-SHA-256 (RFC 2104) of ``message`` under ``secret``: the bytes ``hmac.new`` gives.

    The key's padded inner and outer hash states are made once per key and copied per
    call: setting up an HMAC (or ``hmac.digest``'s OpenSSL context) costs several times
    the hashing of a 32-byte message, and the recording process seals three per exchange.
    """
    inner, outer = _pads(secret)
    h = inner.copy()
    h.update(message)
    o = outer.copy()
    o.update(h.digest())
    return o.digest()


@functools.lru_cache(maxsize=16)
def _pads(secret: bytes) -> tuple[hashlib._Hash, hashlib._Hash]:
    if len(secret) > _SHA256_BLOCK:
        secret = hashlib.sha256(secret).digest()
    block = secret.ljust(_SHA256_BLOCK, b"\0")
    return (hashlib.sha256(bytes(b ^ 0x36 for b in block)),
            hashlib.sha256(bytes(b ^ 0x5C for b in block)))


def seal(key: DigestKey, sha256_digest: bytes) -> str:
    """The body digest of bytes whose plain SHA-256 (raw, 32 bytes) is ``sha256_digest``."""
    return hmac_sha256(key.secret, sha256_digest).hex()


def seal_hex(key: DigestKey, sha256_hexdigest: str) -> str:
    """:func:`seal` for a hex SHA-256; an empty string (no body seen) stays empty."""
    if not sha256_hexdigest:
        return ""
    # seal(key, bytes.fromhex(...)), hmac_sha256 inline: the recorder seals two or three
    # digests per exchange, and each call level costs about what the hashing does.
    inner, outer = _pads(key.secret)
    h = inner.copy()
    h.update(bytes.fromhex(sha256_hexdigest))
    o = outer.copy()
    o.update(h.digest())
    return o.hexdigest()


def body_digest(key: DigestKey, data: bytes) -> str:
    """The keyed digest of a whole body: ``HMAC-SHA-256(key, SHA-256(data))``, hex."""
    return seal(key, hashlib.sha256(data).digest())


class BodyDigest:
    """:func:`body_digest` over a body that arrives in chunks."""

    __slots__ = ("_hash", "_key")

    def __init__(self, key: DigestKey) -> None:
        """Start the digest of one body under ``key``."""
        self._key = key
        self._hash = hashlib.sha256()

    def update(self, chunk: bytes) -> None:
        """Take in the next chunk."""
        self._hash.update(chunk)

    def hexdigest(self) -> str:
        """The keyed digest of every chunk so far (equal to :func:`body_digest` of them)."""
        return seal(self._key, self._hash.digest())
