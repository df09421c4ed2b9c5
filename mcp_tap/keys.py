"""Ed25519 key files and values: private keys (unencrypted PKCS#8 PEM or a 64-hex-digit
seed), public keys (64 hex digits or a PEM file), and a new key pair.

Both the evidence (signing bundles, trusting their signers) and the gate (attestations, the
policy's trusted keys) read keys, so they live below both.
"""

from __future__ import annotations

import re
from pathlib import Path

from mcp_tap.errors import InputError
from mcp_tap.files import read_file

_HEX64_ANY_CASE = re.compile(r"[0-9a-fA-F]{64}")  # a private seed: either case
_HEX64 = re.compile(r"[0-9a-f]{64}")  # a public key as the policy file writes it


def load_ed25519_private_key(path: Path) -> bytes:
    """Read an Ed25519 private key file (unencrypted PKCS#8 PEM, or 64 hex digits) as raw bytes."""
    return parse_ed25519_private_key(read_file(path, "Ed25519 key"), str(path))


def parse_ed25519_private_key(data: bytes, where: str) -> bytes:
    """Parse an Ed25519 private key (unencrypted PKCS#8 PEM, or 64 hex digits) as raw bytes.

    ``where`` names the key's source (a path, an environment variable) in the error.
    """
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
        load_pem_private_key,
    )

    text = data.strip()
    if _HEX64_ANY_CASE.fullmatch(text.decode("ascii", "replace")):
        return bytes.fromhex(text.decode("ascii"))
    try:
        key = load_pem_private_key(data, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise InputError(f"{where} is neither an unencrypted PEM private key nor 64 hex "
                         "digits (a raw Ed25519 seed)") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise InputError(f"{where} is not an Ed25519 private key")
    return key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())


def generate_ed25519_key() -> tuple[bytes, str]:
    """Return a new Ed25519 key pair: the private key as PKCS#8 PEM and the public key as hex."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
        PublicFormat,
    )

    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    public = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()
    return pem, public


def ed25519_public_hex(private_key: bytes) -> str:
    """Return the hex public key of a raw 32-byte Ed25519 private key (for the policy file)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    public = Ed25519PrivateKey.from_private_bytes(private_key).public_key()
    return public.public_bytes(Encoding.Raw, PublicFormat.Raw).hex()


def ed25519_public_key(value: str, base_dir: Path, source: str, name: str) -> bytes:
    """Return a raw 32-byte Ed25519 public key from 64 hex digits or a PEM file."""
    if _HEX64.fullmatch(value):
        return bytes.fromhex(value)
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        PublicFormat,
        load_pem_public_key,
    )

    path = base_dir / value
    try:
        pem = read_file(path, "public key")
    except InputError as exc:
        raise InputError(f"{source}: {name}: {exc}") from None
    try:
        key = load_pem_public_key(pem)
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise InputError(f"{source}: {name}: {path} is not a PEM public key") from exc
    if not isinstance(key, Ed25519PublicKey):
        raise InputError(f"{source}: {name}: {path} is not an Ed25519 public key")
    return key.public_bytes(Encoding.Raw, PublicFormat.Raw)
