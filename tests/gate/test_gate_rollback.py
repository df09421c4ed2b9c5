"""Tests of rollback evidence: exact-type fields, HMAC and Ed25519 attestations, trust, attest."""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)
from releases import rollback_payload as payload

from mcp_tap.core.hashing import digest
from mcp_tap.errors import InputError
from mcp_tap.gate.attest import attest_ed25519, attest_hmac
from mcp_tap.gate.policy import RollbackPolicy, parse_policy
from mcp_tap.gate.rollback import (
    Trust,
    canonical_payload,
    check_rollback,
    hmac_signature,
    missing_rollback,
    resolve_trust,
    validate_fields,
    verify_attestation,
)
from mcp_tap.keys import ed25519_public_hex, generate_ed25519_key, load_ed25519_private_key

# A deterministic, non-secret test fixture key (32+ bytes, like a real one must be).
KEY = b"mcp-tap test rollback key, not a secret"
OTHER_KEY = b"a different key of at least 32 bytes!!"
SIGNER = "release-controller@prod"
ED_SEED = bytes(range(32))
OTHER_SEED = bytes(range(1, 33))


def ed_public(seed: bytes) -> bytes:
    """Return the raw public key of a raw Ed25519 private key."""
    key = Ed25519PrivateKey.from_private_bytes(seed).public_key()
    return key.public_bytes(Encoding.Raw, PublicFormat.Raw)


def trust(**changes: Any) -> Trust:
    """Return trust material that accepts SIGNER by HMAC (KEY) and Ed25519 (ED_SEED)."""
    values: dict[str, Any] = {
        "trusted_signers": (SIGNER,),
        "hmac_key": KEY,
        "ed25519_keys": {SIGNER: ed_public(ED_SEED)},
    }
    values.update(changes)
    return Trust(**values)


def hmac_signed(body: dict[str, Any], key: bytes = KEY, signer: str = SIGNER) -> dict[str, Any]:
    """Sign ``body`` with HMAC without validating it (to build deliberately bad evidence)."""
    return {**body, "attestation": {"signer": signer, "algorithm": "hmac-sha256",
                                    "signature": hmac_signature(key, body)}}


def rules(result: Any) -> list[str]:
    """Return the rule ids of a result's reasons, in order."""
    return [r.rule for r in result.reasons]


class TestValidateFields:
    """Every rollback field must have its exact type and value."""

    def test_valid_payload_has_no_problems(self) -> None:
        """A complete, exactly typed payload passes field validation."""
        assert validate_fields(payload()) == []

    @pytest.mark.parametrize(
        ("field", "value"),
        [
            ("healthy", "yes"),
            ("healthy", "true"),
            ("healthy", "truthy"),
            ("healthy", 1),
            ("healthy", False),
            ("registryStatus", "ACTIVE"),
            ("registryStatus", "Active"),
            ("registryStatus", "ok"),
            ("registryStatus", True),
            ("previousVersion", "latest"),
            ("previousVersion", "previous"),
            ("previousVersion", "^1.4"),
            ("previousVersion", "1.x"),
            ("previousVersion", ""),
            ("previousVersion", 142),
            ("artifactSha256", "B" * 64),
            ("artifactSha256", "sha256:" + "b" * 64),
            ("artifactSha256", "b" * 63),
            ("descriptorSha256", "yes"),
            ("admissionEvidenceDigest", None),
            ("routeRestoration", []),
            ("routeRestoration", "restore the route"),
            ("routeRestoration", ["  "]),
            ("routeRestoration", [1]),
        ],
    )
    def test_inexact_value_fails(self, field: str, value: Any) -> None:
        """A truthy string, number, wrong case or loose value fails with gate.rollback.field."""
        reasons = validate_fields(payload(**{field: value}))
        assert [r.rule for r in reasons] == ["gate.rollback.field"]
        assert reasons[0].details["field"] == field

    def test_missing_fields_each_fail(self) -> None:
        """An empty object yields one gate.rollback.field reason per required field."""
        reasons = validate_fields({})
        assert [r.rule for r in reasons] == ["gate.rollback.field"] * 7
        assert [r.details["got"] for r in reasons] == ["missing"] * 7

    def test_prerelease_version_is_exact(self) -> None:
        """A pinned pre-release version with build metadata is an exact version."""
        assert validate_fields(payload(previousVersion="v2.0.0-rc.1+build.7")) == []


class TestHmacAttestation:
    """HMAC-SHA-256 attestations over the canonical payload."""

    def test_valid_attestation_verifies(self) -> None:
        """A payload signed with the configured key by a trusted signer is ready."""
        result = check_rollback(hmac_signed(payload()), trust())
        assert rules(result) == []
        assert result.ready
        assert result.summary["signer"] == SIGNER

    def test_changed_field_after_signing_fails(self) -> None:
        """Changing any field after signing breaks the attestation."""
        signed = hmac_signed(payload())
        signed["previousVersion"] = "1.4.3"
        assert rules(check_rollback(signed, trust())) == ["gate.rollback.attestation"]

    def test_added_field_after_signing_fails(self) -> None:
        """The attestation covers the whole payload, extra fields included."""
        signed = hmac_signed(payload())
        signed["note"] = "added later"
        assert rules(check_rollback(signed, trust())) == ["gate.rollback.attestation"]

    def test_wrong_key_fails(self) -> None:
        """A signature made with another key does not verify."""
        signed = hmac_signed(payload(), key=OTHER_KEY)
        assert rules(check_rollback(signed, trust())) == ["gate.rollback.attestation"]

    def test_untrusted_signer_fails(self) -> None:
        """A correct signature by an identity the policy does not trust fails."""
        signed = hmac_signed(payload(), signer="intern@laptop")
        result = check_rollback(signed, trust())
        assert rules(result) == ["gate.rollback.attestation"]
        assert "not a trusted" in result.reasons[0].message

    def test_no_key_configured_fails(self) -> None:
        """Without an HMAC key the attestation cannot verify, so it fails."""
        result = check_rollback(hmac_signed(payload()), trust(hmac_key=None))
        assert rules(result) == ["gate.rollback.attestation"]

    def test_algorithm_not_allowed_fails(self) -> None:
        """An algorithm the policy does not allow fails even with a correct signature."""
        result = check_rollback(hmac_signed(payload()), trust(algorithms=frozenset({"ed25519"})))
        assert rules(result) == ["gate.rollback.attestation"]

    def test_missing_attestation_fails(self) -> None:
        """Unattested evidence is not ready."""
        assert rules(check_rollback(payload(), trust())) == ["gate.rollback.attestation"]

    def test_extra_attestation_key_fails(self) -> None:
        """The attestation object has exactly signer, algorithm and signature."""
        signed = hmac_signed(payload())
        signed["attestation"]["keyId"] = "k1"
        assert rules(check_rollback(signed, trust())) == ["gate.rollback.attestation"]

    def test_uppercase_signature_fails(self) -> None:
        """Only the lowercase hex spelling of the HMAC is accepted."""
        signed = hmac_signed(payload())
        signed["attestation"]["signature"] = signed["attestation"]["signature"].upper()
        assert rules(check_rollback(signed, trust())) == ["gate.rollback.attestation"]

    def test_signed_truthy_string_still_fails(self) -> None:
        """A validly signed payload with healthy "yes" fails on the field, not the signature."""
        result = check_rollback(hmac_signed(payload(healthy="yes")), trust())
        assert rules(result) == ["gate.rollback.field"]

    def test_signature_is_over_canonical_payload(self) -> None:
        """The signed bytes ignore key order and the attestation field itself."""
        body = payload()
        reordered = dict(reversed(list(body.items())))
        assert canonical_payload(hmac_signed(body)) == canonical_payload(reordered)


class TestEd25519Attestation:
    """Ed25519 public-key attestations, the production option."""

    def test_valid_signature_verifies(self) -> None:
        """A signature by the signer's configured key verifies."""
        signed = attest_ed25519(payload(), SIGNER, ED_SEED)
        result = check_rollback(signed, trust())
        assert rules(result) == []
        assert result.summary["algorithm"] == "ed25519"

    def test_signature_by_other_key_fails(self) -> None:
        """A well-formed signature by a key the policy does not pin does not verify."""
        signed = attest_ed25519(payload(), SIGNER, OTHER_SEED)
        assert rules(check_rollback(signed, trust())) == ["gate.rollback.attestation"]

    def test_tampered_payload_fails(self) -> None:
        """A registry status changed after signing breaks the Ed25519 signature."""
        signed = attest_ed25519(payload(), SIGNER, ED_SEED)
        signed["artifactSha256"] = "d" * 64
        assert rules(check_rollback(signed, trust())) == ["gate.rollback.attestation"]

    def test_signer_without_key_fails(self) -> None:
        """A trusted signer with no configured public key cannot be verified."""
        signed = attest_ed25519(payload(), SIGNER, ED_SEED)
        assert rules(check_rollback(signed, trust(ed25519_keys={}))) == [
            "gate.rollback.attestation"
        ]

    def test_malformed_signature_fails(self) -> None:
        """A signature that is not Base64 of 64 bytes fails."""
        signed = attest_ed25519(payload(), SIGNER, ED_SEED)
        signed["attestation"]["signature"] = base64.b64encode(b"short").decode()
        assert [r.rule for r in verify_attestation(signed, trust())] == [
            "gate.rollback.attestation"
        ]

    def test_unpadded_base64_fails(self) -> None:
        """Only the canonical padded Base64 spelling is accepted."""
        signed = attest_ed25519(payload(), SIGNER, ED_SEED)
        signed["attestation"]["signature"] = signed["attestation"]["signature"].rstrip("=")
        assert rules(check_rollback(signed, trust())) == ["gate.rollback.attestation"]


class TestCheckRollback:
    """The combined readiness check."""

    def test_non_object_fails(self) -> None:
        """Evidence that is not a JSON object fails with gate.rollback.field."""
        assert rules(check_rollback(["active", True], trust())) == ["gate.rollback.field"]

    def test_missing_evidence(self) -> None:
        """No evidence at all is gate.rollback.missing."""
        result = missing_rollback()
        assert rules(result) == ["gate.rollback.missing"]
        assert not result.ready

    def test_summary_digest_covers_payload(self) -> None:
        """The summary carries the digest of the whole attested payload."""
        signed = hmac_signed(payload())
        assert check_rollback(signed, trust()).summary["payloadDigest"] == digest(signed)

    def test_field_and_attestation_reasons_both_reported(self) -> None:
        """A bad field and a bad signature are both reported."""
        signed = hmac_signed(payload(), key=OTHER_KEY)
        signed["healthy"] = 1
        assert rules(check_rollback(signed, trust())) == [
            "gate.rollback.field", "gate.rollback.attestation",
        ]


class TestResolveTrust:
    """Trust material comes from the policy, the environment or a key file."""

    def test_environment_key(self) -> None:
        """The key comes from the environment variable the policy names."""
        resolved = resolve_trust(RollbackPolicy(hmac_key_env="K"), {"K": KEY.decode()})
        assert resolved.hmac_key == KEY

    def test_unset_environment_leaves_no_key(self) -> None:
        """An unset variable and no key file leave HMAC unverifiable."""
        assert resolve_trust(RollbackPolicy(hmac_key_env="K"), {}).hmac_key is None

    def test_key_file_strips_one_newline(self, tmp_path: Path) -> None:
        """A key file's single trailing newline is not part of the key."""
        path = tmp_path / "key"
        path.write_bytes(KEY + b"\n")
        resolved = resolve_trust(RollbackPolicy(hmac_key_env=None, hmac_key_file=path), {})
        assert resolved.hmac_key == KEY

    def test_environment_wins_over_file(self, tmp_path: Path) -> None:
        """A set environment variable takes precedence over the key file."""
        path = tmp_path / "key"
        path.write_bytes(OTHER_KEY)
        policy = RollbackPolicy(hmac_key_env="K", hmac_key_file=path)
        assert resolve_trust(policy, {"K": KEY.decode()}).hmac_key == KEY

    def test_short_key_is_input_error(self) -> None:
        """A key shorter than 32 bytes is refused."""
        with pytest.raises(InputError, match="shorter than 32 bytes"):
            resolve_trust(RollbackPolicy(hmac_key_env="K"), {"K": "short"})

    def test_unreadable_key_file_is_input_error(self, tmp_path: Path) -> None:
        """A key file that cannot be read is bad input."""
        policy = RollbackPolicy(hmac_key_env=None, hmac_key_file=tmp_path / "absent")
        with pytest.raises(InputError, match="cannot read HMAC key file"):
            resolve_trust(policy, {})

    def test_policy_public_key_hex_and_pem(self, tmp_path: Path) -> None:
        """Policy Ed25519 keys load from 64 hex digits or a PEM file next to the policy."""
        pem = Ed25519PrivateKey.from_private_bytes(OTHER_SEED).public_key().public_bytes(
            Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
        (tmp_path / "other.pem").write_bytes(pem)
        raw = (
            '[rollback]\ntrusted_signers = ["a", "b"]\n'
            f'[rollback.ed25519_keys]\na = "{ed_public(ED_SEED).hex()}"\nb = "other.pem"\n'
        ).encode()
        keys = parse_policy(raw, base_dir=tmp_path).rollback.ed25519_keys
        assert keys == {"a": ed_public(ED_SEED), "b": ed_public(OTHER_SEED)}

    def test_policy_key_for_untrusted_signer_is_input_error(self, tmp_path: Path) -> None:
        """A public key for a signer missing from trusted_signers is a policy error."""
        raw = f'[rollback.ed25519_keys]\na = "{"0" * 64}"\n'.encode()
        with pytest.raises(InputError, match=r"rollback\.ed25519_keys\.a"):
            parse_policy(raw, base_dir=tmp_path)


class TestAttest:
    """Producing attestations with mcp_tap.gate.attest."""

    def test_hmac_attestation_verifies(self) -> None:
        """attest_hmac output passes the gate's verification."""
        result = check_rollback(attest_hmac(payload(), SIGNER, KEY), trust())
        assert rules(result) == []

    def test_existing_attestation_is_replaced(self) -> None:
        """Re-attesting replaces the old attestation instead of signing over it."""
        first = attest_hmac(payload(), SIGNER, OTHER_KEY)
        second = attest_hmac(copy.deepcopy(first), SIGNER, KEY)
        assert rules(check_rollback(second, trust())) == []

    def test_refuses_invalid_payload(self) -> None:
        """A payload the gate would reject is not attested."""
        with pytest.raises(InputError, match="healthy must be exactly true"):
            attest_hmac(payload(healthy="yes"), SIGNER, KEY)

    def test_refuses_short_key(self) -> None:
        """A short HMAC key is refused when attesting too."""
        with pytest.raises(InputError, match="shorter than 32 bytes"):
            attest_hmac(payload(), SIGNER, b"short")

    def test_private_key_files(self, tmp_path: Path) -> None:
        """Private keys load from PKCS#8 PEM and from 64 hex digits."""
        pem = Ed25519PrivateKey.from_private_bytes(ED_SEED).private_bytes(
            Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
        (tmp_path / "k.pem").write_bytes(pem)
        (tmp_path / "k.hex").write_text(ED_SEED.hex() + "\n")
        assert load_ed25519_private_key(tmp_path / "k.pem") == ED_SEED
        assert load_ed25519_private_key(tmp_path / "k.hex") == ED_SEED

    @pytest.mark.parametrize("text", ["not a key", "ab" * 31, "zz" * 32])
    def test_not_a_key_file_is_input_error(self, text: str, tmp_path: Path) -> None:
        """A file that holds no private key (nor 64 hex digits) is bad input naming both forms."""
        (tmp_path / "k.pem").write_text(text)
        with pytest.raises(InputError, match="neither an unencrypted PEM private key nor 64 hex"):
            load_ed25519_private_key(tmp_path / "k.pem")

    def test_generated_key_pair_round_trips(self, tmp_path: Path) -> None:
        """A generated key signs evidence that its printed public key verifies."""
        pem, public = generate_ed25519_key()
        (tmp_path / "new.pem").write_bytes(pem)
        private = load_ed25519_private_key(tmp_path / "new.pem")
        assert ed25519_public_hex(private) == public
        signed = attest_ed25519(payload(), SIGNER, private)
        result = check_rollback(signed, trust(ed25519_keys={SIGNER: bytes.fromhex(public)}))
        assert rules(result) == []
