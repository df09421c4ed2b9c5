"""Ed25519 signatures over a bundle's manifests and ``bundle.json``.

The writer signs each segment manifest and every version of ``bundle.json`` (the opening one
and the closing summary) with the operator's Ed25519 key; the chain heads in them cover
every record, gap records included. Keys are read like ``attest`` reads them
(:func:`mcp_tap.keys.parse_ed25519_private_key`: unencrypted PKCS#8 PEM or 64 hex
digits), from a file or an environment variable. See ``docs/architecture.md`` ("Signed
evidence") for what a signature proves and what it cannot.
"""

from __future__ import annotations

import base64
import binascii
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from mcp_tap.errors import InputError
from mcp_tap.evidence.format import ED25519, SIGNATURE, signed_bytes
from mcp_tap.files import read_file
from mcp_tap.keys import ed25519_public_key, load_ed25519_private_key, parse_ed25519_private_key

DEFAULT_KEY_ENV: Final = "MCP_TAP_SIGNING_KEY"
"""The environment variable the proxy reads a signing key from when no key file is set."""


class Signer:
    """Signs bundle objects with one Ed25519 private key (raw 32 bytes)."""

    def __init__(self, private_key: bytes) -> None:
        """Keep the key; raise :class:`InputError` if it is not 32 bytes."""
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
        from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

        if len(private_key) != 32:
            raise InputError("an Ed25519 private key is 32 bytes")
        self._key = Ed25519PrivateKey.from_private_bytes(private_key)
        self.public_hex = self._key.public_key().public_bytes(
            Encoding.Raw, PublicFormat.Raw).hex()

    def signing(self) -> dict[str, str]:
        """The ``signing`` object of ``bundle.json``: algorithm and public key."""
        return {"algorithm": ED25519, "publicKey": self.public_hex}

    def sign(self, value: Mapping[str, Any]) -> dict[str, Any]:
        """Return ``value`` with a fresh ``signature`` over :func:`signed_bytes`."""
        signature = self._key.sign(signed_bytes(value))
        return {**{k: v for k, v in value.items() if k != SIGNATURE},
                SIGNATURE: base64.b64encode(signature).decode("ascii")}


def signature_valid(public_key: bytes, value: Mapping[str, Any]) -> bool:
    """Whether ``value`` carries a valid Ed25519 ``signature`` by ``public_key`` (raw bytes)."""
    signature = value.get(SIGNATURE)
    if not isinstance(signature, str) or len(public_key) != 32:
        return False
    try:
        message = signed_bytes(value)
    except TypeError:  # orjson cannot serialise the object canonically (nested too deep)
        return False
    return _verified(public_key, signature, message)


@functools.lru_cache(maxsize=1024)
def _verified(public_key: bytes, signature: str, message: bytes) -> bool:
    # Pure, so cached: verifying several bundles signed by one key, or one bundle twice
    # (with and without trust), checks each signature once.
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        raw = base64.b64decode(signature, validate=True)
        Ed25519PublicKey.from_public_bytes(public_key).verify(raw, message)
    except (binascii.Error, ValueError, InvalidSignature):
        return False
    return True


def load_signing_key(
    key_file: str | None, key_env: str | None, environ: Mapping[str, str]
) -> bytes | None:
    """The evidence signing key: ``key_file`` if set, else ``environ[key_env]``, else None.

    An unreadable or malformed key is an :class:`InputError` naming its source, never the
    key itself.
    """
    if key_file:
        return load_ed25519_private_key(Path(key_file))
    if key_env and environ.get(key_env):
        return parse_ed25519_private_key(
            environ[key_env].encode("utf-8"), f"environment variable {key_env}")
    return None


def load_trusted_key(path: Path) -> bytes:
    """Read a trusted public key file (64 hex digits, or an Ed25519 PEM public key)."""
    text = read_file(path, "trusted key").strip().decode("ascii", "replace")
    if len(text) == 64:
        return ed25519_public_key(text, path.parent, str(path), "key")
    return ed25519_public_key(path.name, path.parent, str(path), "key")
