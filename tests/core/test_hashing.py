"""Tests for digests: plain SHA-256 for redacted data, keyed digests for wire bytes."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from mcp_tap.core.hashing import (
    BODY_DIGEST_ALG,
    BodyDigest,
    DigestKey,
    body_digest,
    hmac_sha256,
    seal_hex,
    sha256_hex,
)

KEY = DigestKey(b"k" * 32, "operator")


class TestBodyDigest:
    """body_digest / BodyDigest / seal: one keyed digest, three ways to reach it."""

    def test_is_hmac_sha256_of_the_sha256(self) -> None:
        """The digest is HMAC-SHA-256 under the key over the body's raw SHA-256."""
        data = b'{"jsonrpc":"2.0"}'
        expected = hmac.new(KEY.secret, hashlib.sha256(data).digest(), hashlib.sha256).hexdigest()
        assert body_digest(KEY, data) == expected

    def test_incremental_equals_whole(self) -> None:
        """Chunks fed to BodyDigest give the digest of their concatenation."""
        digest = BodyDigest(KEY)
        for chunk in (b"ab", b"", b"cd" * 1000):
            digest.update(chunk)
        assert digest.hexdigest() == body_digest(KEY, b"ab" + b"cd" * 1000)

    def test_seal_of_a_plain_sha256_equals_body_digest(self) -> None:
        """A process without the key hashes; sealing that hash gives the same digest."""
        assert seal_hex(KEY, sha256_hex(b"body")) == body_digest(KEY, b"body")
        assert seal_hex(KEY, "") == ""

    def test_depends_on_the_key(self) -> None:
        """Another key gives another digest, and neither is the unkeyed SHA-256."""
        other = DigestKey(b"o" * 32)
        assert body_digest(KEY, b"1234") != body_digest(other, b"1234")
        assert sha256_hex(b"1234") not in (body_digest(KEY, b"1234"), body_digest(other, b"1234"))

    def test_a_short_secret_cannot_be_brute_forced_without_the_key(self) -> None:
        """Every 4-digit PIN's unkeyed hash misses the recorded digest."""
        recorded = body_digest(DigestKey.random(), b'{"pin":"4711"}')
        guesses = {sha256_hex(f'{{"pin":"{n:04d}"}}'.encode()) for n in range(10000)}
        assert recorded not in guesses


class TestDigestKey:
    """DigestKey: random per bundle or the operator's, never shown."""

    def test_random_keys_differ_and_are_bundle_keys(self) -> None:
        """Two bundles draw two keys."""
        first, second = DigestKey.random(), DigestKey.random()
        assert first.secret != second.secret and first.source == "bundle"

    def test_repr_and_description_never_hold_the_key(self) -> None:
        """The repr and the record's description name the key by a keyed fingerprint only."""
        key = DigestKey(b"s3cr3t-digest-key-material", "operator")
        shown = repr(key) + str(key.describe())
        assert "s3cr3t" not in shown and key.secret.hex() not in shown
        assert key.describe() == {"alg": BODY_DIGEST_ALG, "keyId": key.key_id,
                                  "keySource": "operator"}
        assert len(key.key_id) == 16 and key.key_id != DigestKey(b"x" * 26).key_id

    def test_short_key_is_refused(self) -> None:
        """A key under 16 bytes is a configuration error."""
        with pytest.raises(ValueError, match="at least 16 bytes"):
            DigestKey(b"short")


class TestHmacSha256:
    """The precomputed-pad HMAC is the standard library's HMAC."""

    @pytest.mark.parametrize("key_len", [16, 32, 63, 64, 65, 200])
    @pytest.mark.parametrize("message", [b"", b"x", bytes(range(256)) * 3])
    def test_it_equals_hmac_new(self, key_len: int, message: bytes) -> None:
        """Every key length (shorter, equal to and longer than the block) gives hmac.new's bytes."""
        key = bytes((7 * i + key_len) % 256 for i in range(key_len))
        assert hmac_sha256(key, message) == hmac.new(key, message, hashlib.sha256).digest()

    def test_two_keys_do_not_share_state(self) -> None:
        """Interleaved keys each get their own digest (the pads are per key)."""
        a, b = b"a" * 32, b"b" * 32
        first = hmac_sha256(a, b"m")
        hmac_sha256(b, b"m")
        assert hmac_sha256(a, b"m") == first != hmac_sha256(b, b"m")
