"""Produce rollback attestations, so operators need no tool besides mcp-tap.

The signed bytes are :func:`mcp_tap.gate.rollback.canonical_payload`: the canonical JSON of
the payload without its ``attestation``. The result is the payload with a fresh
``attestation`` object; a previous attestation is replaced, never signed over.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from mcp_tap.errors import InputError
from mcp_tap.gate.policy import ED25519, HMAC_SHA256
from mcp_tap.gate.rollback import (
    ATTESTATION,
    MIN_HMAC_KEY_BYTES,
    canonical_payload,
    hmac_signature,
    validate_fields,
)


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
