"""Produce rollback attestations, so operators need no tool besides mcp-tap.

The signed bytes are :func:`mcp_tap.gate.rollback.canonical_payload`: the canonical JSON of
the payload without its ``attestation``. The result is the payload with a fresh
``attestation`` object; a previous attestation is replaced, never signed over.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mcp_tap.errors import InputError
from mcp_tap.files import read_file
from mcp_tap.gate.policy import ED25519, HMAC_SHA256
from mcp_tap.gate.rollback import (
    ATTESTATION,
    MIN_HMAC_KEY_BYTES,
    canonical_payload,
    hmac_signature,
    validate_fields,
)

_HEX64 = re.compile(r"[0-9a-fA-F]{64}")


def _checked(payload: Mapping[str, Any]) -> dict[str, Any]:
    # Attesting a payload the gate would reject only produces a convincing-looking dud.
    problems = validate_fields(payload)
    if problems:
        raise InputError(f"refusing to attest: {problems[0].message}")
    return {k: v for k, v in payload.items() if k != ATTESTATION}


def _with_attestation(
    payload: dict[str, Any], signer: str, algorithm: str, signature: str
) -> dict[str, Any]:
    return {**payload, ATTESTATION: {"signer": signer, "algorithm": algorithm,
                                     "signature": signature}}


def attest_hmac(payload: Mapping[str, Any], signer: str, key: bytes) -> dict[str, Any]:
    """Return ``payload`` attested by ``signer`` with HMAC-SHA-256 under ``key`` (hex)."""
    if not signer:
        raise InputError("the signer must be a non-empty identity")
    if len(key) < MIN_HMAC_KEY_BYTES:
        raise InputError(f"the HMAC key is shorter than {MIN_HMAC_KEY_BYTES} bytes")
    body = _checked(payload)
    return _with_attestation(body, signer, HMAC_SHA256, hmac_signature(key, body))


def attest_ed25519(
    payload: Mapping[str, Any], signer: str, private_key: bytes
) -> dict[str, Any]:
    """Return ``payload`` attested by ``signer`` with Ed25519 (raw 32-byte private key, Base64)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    if not signer:
        raise InputError("the signer must be a non-empty identity")
    if len(private_key) != 32:
        raise InputError("an Ed25519 private key is 32 bytes")
    body = _checked(payload)
    signature = Ed25519PrivateKey.from_private_bytes(private_key).sign(canonical_payload(body))
    return _with_attestation(body, signer, ED25519, base64.b64encode(signature).decode("ascii"))


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
    if _HEX64.fullmatch(text.decode("ascii", "replace")):
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
