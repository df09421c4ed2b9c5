"""Rollback evidence: the exact schema, exact-type validation and attestation verification.

A rollback payload is one JSON object::

    {
      "previousVersion": "1.4.2",                     exact version, not a tag or a range
      "admissionEvidenceDigest": "<64 lowercase hex>", the evidence that admitted it
      "artifactSha256": "<64 lowercase hex>",
      "descriptorSha256": "<64 lowercase hex>",
      "registryStatus": "active",                      exactly this string
      "healthy": true,                                 exactly the JSON boolean true
      "routeRestoration": ["step", ...],               the ordered restoration procedure
      "attestation": {"signer": "release-controller@prod",
                      "algorithm": "hmac-sha256" | "ed25519",
                      "signature": "<hex HMAC>" | "<base64 Ed25519 signature>"}
    }

The attestation covers the canonical JSON of every other field (extra fields included), so
changing anything after signing breaks it. Readiness is never a truthiness test: ``"yes"``,
``1``, ``"truthy"``, ``"ACTIVE"`` and ``"sha256:..."`` all fail.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from hashlib import sha256
from pathlib import Path
from typing import Any

import orjson

from mcp_tap.core.hashing import canonical_json, digest
from mcp_tap.errors import InputError
from mcp_tap.files import read_file
from mcp_tap.gate.decision import Reason, RollbackResult
from mcp_tap.gate.policy import ED25519, HMAC_SHA256, RollbackPolicy

ATTESTATION = "attestation"
DIGEST_FIELDS: tuple[str, ...] = ("admissionEvidenceDigest", "artifactSha256", "descriptorSha256")
FIELDS: tuple[str, ...] = (
    "previousVersion",
    *DIGEST_FIELDS,
    "registryStatus",
    "healthy",
    "routeRestoration",
)
# RFC 2104: a key shorter than the hash output weakens HMAC; refuse it rather than trust it.
MIN_HMAC_KEY_BYTES = 32

_HEX64 = re.compile(r"[0-9a-f]{64}")
# A pinned release version: digits and dots, optionally a pre-release or build suffix.
# Tags like "latest" or "previous" and ranges like "^1.2" or "1.x" do not name one artifact.
_VERSION = re.compile(r"v?[0-9]+(\.[0-9]+)*([-+][0-9A-Za-z][0-9A-Za-z.+-]*)?")


@dataclass(frozen=True, slots=True)
class Trust:
    """The verifier's trust material, resolved from the policy and the environment.

    ``hmac_key`` is ``None`` when no key was provided; ``ed25519_keys`` maps a signer to its
    raw 32-byte public key.
    """

    trusted_signers: tuple[str, ...] = ()
    algorithms: frozenset[str] = frozenset({HMAC_SHA256, ED25519})
    hmac_key: bytes | None = None
    hmac_key_source: str = ""
    ed25519_keys: Mapping[str, bytes] = field(default_factory=dict)


def resolve_trust(policy: RollbackPolicy, environ: Mapping[str, str]) -> Trust:
    """Resolve the HMAC key (environment variable first, then key file) and public keys.

    An unset environment variable with no key file leaves HMAC unverifiable (a reason, not an
    error); an unreadable key file or a too-short key is an :class:`InputError`.
    """
    key: bytes | None = None
    source = ""
    if policy.hmac_key_env and environ.get(policy.hmac_key_env):
        key = environ[policy.hmac_key_env].encode("utf-8")
        source = f"environment variable {policy.hmac_key_env}"
    elif policy.hmac_key_file is not None:
        key = read_hmac_key_file(policy.hmac_key_file)
        source = "key file"
    if key is not None and len(key) < MIN_HMAC_KEY_BYTES:
        raise InputError(f"rollback HMAC key from {source} is shorter than "
                         f"{MIN_HMAC_KEY_BYTES} bytes")
    return Trust(
        trusted_signers=policy.trusted_signers,
        algorithms=policy.algorithms,
        hmac_key=key,
        hmac_key_source=source,
        ed25519_keys=dict(policy.ed25519_keys),
    )


def read_hmac_key_file(path: Path) -> bytes:
    """Read an HMAC key file: its bytes, less one trailing newline an editor may have added."""
    data = read_file(path, "HMAC key file")
    for ending in (b"\r\n", b"\n"):
        if data.endswith(ending):
            return data[: -len(ending)]
    return data


def canonical_payload(payload: Mapping[str, Any]) -> bytes:
    """Return the bytes an attestation signs: canonical JSON of the payload less ``attestation``."""
    return canonical_json({k: v for k, v in payload.items() if k != ATTESTATION})


def hmac_signature(key: bytes, payload: Mapping[str, Any]) -> str:
    """Return the lowercase hex HMAC-SHA-256 of the canonical payload."""
    return hmac.new(key, canonical_payload(payload), sha256).hexdigest()


def _type_name(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer",
            float: "number", type(None): "null"}.get(type(value), type(value).__name__)


def _field_reason(name: str, expected: str, value: Any, *, present: bool = True) -> Reason:
    got = _type_name(value) if present else "missing"
    shown = repr(value) if present else "missing"
    if len(shown) > 40:
        shown = shown[:37] + "..."
    return Reason(
        "gate.rollback.field",
        f"{name} must be {expected}, got {shown}",
        details={"field": name, "expected": expected, "got": got},
    )


def validate_fields(payload: Mapping[str, Any]) -> list[Reason]:
    """Return a ``gate.rollback.field`` reason for every field not of its exact type and value."""
    reasons: list[Reason] = []

    def check(name: str, expected: str, ok: Any) -> None:
        if name not in payload:
            reasons.append(_field_reason(name, expected, None, present=False))
        elif not ok(payload[name]):
            reasons.append(_field_reason(name, expected, payload[name]))

    check("previousVersion", "an exact version such as \"1.4.2\"",
          lambda v: type(v) is str and _VERSION.fullmatch(v) is not None)
    for name in DIGEST_FIELDS:
        check(name, "64 lowercase hex digits (SHA-256)",
              lambda v: type(v) is str and _HEX64.fullmatch(v) is not None)
    check("registryStatus", 'exactly "active"', lambda v: type(v) is str and v == "active")
    # `is True` on a bool: 1, "true" and "yes" must not pass for the JSON boolean.
    check("healthy", "exactly true", lambda v: type(v) is bool and v is True)
    check("routeRestoration", "a non-empty array of non-empty step strings",
          lambda v: type(v) is list and bool(v)
          and all(type(s) is str and s.strip() for s in v))
    return reasons


def _attestation_reason(message: str, **details: Any) -> Reason:
    return Reason("gate.rollback.attestation", message, details=details)


def verify_attestation(payload: Mapping[str, Any], trust: Trust) -> list[Reason]:
    """Return ``gate.rollback.attestation`` reasons; an empty list means it verifies."""
    att = payload.get(ATTESTATION)
    if att is None:
        return [_attestation_reason("the rollback evidence has no attestation")]
    if type(att) is not dict or set(att) != {"signer", "algorithm", "signature"}:
        return [_attestation_reason(
            "attestation must be an object with exactly signer, algorithm and signature")]
    signer, algorithm, signature = att["signer"], att["algorithm"], att["signature"]
    if type(signer) is not str or type(algorithm) is not str or type(signature) is not str:
        return [_attestation_reason("attestation signer, algorithm and signature must be strings")]
    if signer not in trust.trusted_signers:
        return [_attestation_reason(
            f"signer {signer!r} is not a trusted release-controller identity", signer=signer)]
    if algorithm not in trust.algorithms:
        return [_attestation_reason(f"algorithm {algorithm!r} is not allowed by the policy",
                                    signer=signer, algorithm=algorithm)]
    try:
        message = canonical_payload(payload)
    except orjson.JSONEncodeError:
        return [_attestation_reason("the payload cannot be serialised canonically")]
    if algorithm == HMAC_SHA256:
        return _verify_hmac(message, signer, signature, trust)
    return _verify_ed25519(message, signer, signature, trust)


def _verify_hmac(message: bytes, signer: str, signature: str, trust: Trust) -> list[Reason]:
    if trust.hmac_key is None:
        return [_attestation_reason("no HMAC key is configured to verify the attestation",
                                    signer=signer, algorithm=HMAC_SHA256)]
    if not _HEX64.fullmatch(signature):
        return [_attestation_reason("HMAC signature must be 64 lowercase hex digits",
                                    signer=signer, algorithm=HMAC_SHA256)]
    expected = hmac.new(trust.hmac_key, message, sha256).hexdigest()
    if not hmac.compare_digest(expected, signature):
        return [_attestation_reason("HMAC signature does not match the payload and key",
                                    signer=signer, algorithm=HMAC_SHA256)]
    return []


def _verify_ed25519(message: bytes, signer: str, signature: str, trust: Trust) -> list[Reason]:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    public = trust.ed25519_keys.get(signer)
    if public is None:
        return [_attestation_reason(f"no Ed25519 public key is configured for {signer!r}",
                                    signer=signer, algorithm=ED25519)]
    try:
        raw = base64.b64decode(signature, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    # Only the one canonical Base64 spelling of a 64-byte signature is accepted.
    if len(raw) != 64 or base64.b64encode(raw).decode("ascii") != signature:
        return [_attestation_reason("Ed25519 signature must be Base64 of 64 bytes",
                                    signer=signer, algorithm=ED25519)]
    try:
        Ed25519PublicKey.from_public_bytes(public).verify(raw, message)
    except InvalidSignature:
        return [_attestation_reason("Ed25519 signature does not verify",
                                    signer=signer, algorithm=ED25519)]
    return []


def check_rollback(payload: Any, trust: Trust) -> RollbackResult:
    """Validate a parsed rollback payload and its attestation; ready only when both pass."""
    if type(payload) is not dict:
        reason = Reason("gate.rollback.field",
                        f"rollback evidence must be a JSON object, got {_type_name(payload)}",
                        details={"field": "", "expected": "object", "got": _type_name(payload)})
        return RollbackResult((reason,), {"given": True})
    reasons = validate_fields(payload) + verify_attestation(payload, trust)
    att = payload.get(ATTESTATION)
    summary: dict[str, Any] = {"given": True}
    try:
        summary["payloadDigest"] = digest(payload)
    except orjson.JSONEncodeError:
        summary["payloadDigest"] = ""
    version = payload.get("previousVersion")
    if type(version) is str and _VERSION.fullmatch(version):
        summary["previousVersion"] = version
    if type(att) is dict:
        for key in ("signer", "algorithm"):
            if type(att.get(key)) is str:
                summary[key] = att[key]
    return RollbackResult(tuple(reasons), summary)


def missing_rollback() -> RollbackResult:
    """The rollback result when no rollback evidence was given at all."""
    return RollbackResult(
        (Reason("gate.rollback.missing", "no rollback evidence was given"),),
        {"given": False},
    )
