"""The release-gate policy: a TOML file read into frozen dataclasses.

Every key has a default, so an empty file is a valid (strict) policy. Unknown sections or
keys and values of the wrong type are :class:`~mcp_tap.errors.InputError` with one line that
names the key: a typo in a release policy must never silently loosen the gate.

The policy names *where* the rollback HMAC key lives (an environment variable or a file),
never the key itself; Ed25519 entries are public keys, which may live in the repository.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, cast

from mcp_tap.core.catalog import CATALOG
from mcp_tap.core.hashing import sha256_hex
from mcp_tap.core.hopdiff import CLASSES
from mcp_tap.errors import InputError
from mcp_tap.files import read_file
from mcp_tap.keys import ed25519_public_key
from mcp_tap.tables import TableKeys, check_tables

Percentile = Literal["p50", "p95", "p99"]
PERCENTILES: tuple[Percentile, ...] = ("p50", "p95", "p99")

HMAC_SHA256 = "hmac-sha256"
ED25519 = "ed25519"
ALGORITHMS: frozenset[str] = frozenset({HMAC_SHA256, ED25519})

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True, slots=True)
class ConformancePolicy:
    """Which finding rules block promotion, and how many example digests to report.

    ``strengths`` are the rule strengths that block (default: only ``must``; a ``should``
    finding is a warning, reported in the summary but not blocking).
    """

    block: tuple[str, ...] = ("*",)
    allow: tuple[str, ...] = ()
    examples: int = 3
    strengths: tuple[str, ...] = ("must",)

    def blocks(self, rule_id: str, strength: str = "must") -> bool:
        """Return whether a finding of ``rule_id`` with ``strength`` blocks promotion."""
        if strength not in self.strengths:
            return False
        return _matches_any(rule_id, self.block) and not _matches_any(rule_id, self.allow)


@dataclass(frozen=True, slots=True)
class SdkPolicy:
    """SDK differential: result fields the typed SDK view may drop, change or synthesize.

    These come on top of the differential's bookkeeping defaults (``resultType``, ``_meta``,
    ``ttlMs``, ``cacheScope``), exactly like ``mcp-tap sdk-diff --allow``.
    """

    allow_fields: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class HopPolicy:
    """Hop evidence: whether a two-hop capture (hop-comparison records) is required, the
    change classes that block although no rule forbids them (``block``: a box's recorded
    or expected changes of these classes; see docs/rules.md § Changes between hops), and
    the ``hop.*`` rules whose findings do not block (``allow``, rule patterns)."""

    require_two_hop: bool = False
    block: tuple[str, ...] = ()
    allow: tuple[str, ...] = ()

    def blocks(self, rule_id: str) -> bool:
        """Whether a ``hop.*`` finding of ``rule_id`` blocks promotion."""
        return not _matches_any(rule_id, self.allow)


@dataclass(frozen=True, slots=True)
class ErrorCounting:
    """Which failures the health window counts as errors (tap 502/504s always count)."""

    jsonrpc_errors: bool = True
    http_5xx: bool = True
    http_4xx: bool = False


@dataclass(frozen=True, slots=True)
class BaselinePolicy:
    """How much worse than the admitted baseline window the candidate may be."""

    required: bool = False
    # A ratio: 0.20 allows the candidate's percentile to be at most 20% above the baseline's.
    max_latency_increase: float = 0.20
    # A fraction of requests: 0.005 is half a percentage point.
    max_error_rate_increase: float = 0.005


@dataclass(frozen=True, slots=True)
class HealthPolicy:
    """Health-window thresholds, computed over the recorded exchanges."""

    hop: str | None = None
    min_samples: int = 100
    max_error_rate: float = 0.01
    latency_percentile: Percentile = "p95"
    max_latency_ms: float = 1000.0
    max_sse_first_event_ms: float | None = None
    min_observation_seconds: float = 300.0
    counting: ErrorCounting = field(default_factory=ErrorCounting)
    baseline: BaselinePolicy = field(default_factory=BaselinePolicy)


@dataclass(frozen=True, slots=True)
class RollbackPolicy:
    """Who may attest rollback evidence, with which algorithms, and where the keys are.

    ``ed25519_keys`` maps a trusted signer to its raw 32-byte public key.
    """

    trusted_signers: tuple[str, ...] = ()
    algorithms: frozenset[str] = ALGORITHMS
    hmac_key_env: str | None = "MCP_TAP_ROLLBACK_KEY"
    hmac_key_file: Path | None = None
    ed25519_keys: Mapping[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class EvidencePolicy:
    """What the integrity source demands of evidence bundles (the ``[evidence]`` section).

    ``trusted_keys`` are raw 32-byte Ed25519 public keys; a bundle signed by any other key
    fails. ``require_signed`` (default: true when ``trusted_keys`` is set) fails unsigned
    bundles. ``max_loss_ratio`` is the share of a bundle's exchanges that may be stated lost
    (gap records, an abrupt end's in-flight count) before integrity fails; 0 by default.
    """

    trusted_keys: tuple[bytes, ...] = ()
    require_signed: bool = False
    max_loss_ratio: float = 0.0


DRIFT_AREAS: Final = ("inventory", "behaviour", "conformance", "health")
DRIFT_SEVERITIES: Final = ("breaking", "compatible", "changed")


@dataclass(frozen=True, slots=True)
class DriftPolicy:
    """Which drift from the ``--baseline`` capture blocks promotion.

    ``block`` holds ``AREA.SEVERITY`` pairs (either part may be ``*``); a change matching
    none is reported in the drift summary and does not block. Default: breaking inventory
    drift (a removed tool, a new required argument, ...) blocks.
    """

    block: tuple[str, ...] = ("inventory.breaking",)

    def blocks(self, area: str, severity: str) -> bool:
        """Return whether a change of ``area`` and ``severity`` blocks promotion."""
        return any(pattern in (f"{area}.{severity}", f"{area}.*", f"*.{severity}", "*.*")
                   for pattern in self.block)


@dataclass(frozen=True, slots=True)
class Policy:
    """A whole gate policy; ``digest`` is the SHA-256 of the policy file's bytes."""

    conformance: ConformancePolicy = field(default_factory=ConformancePolicy)
    sdk: SdkPolicy = field(default_factory=SdkPolicy)
    hop: HopPolicy = field(default_factory=HopPolicy)
    health: HealthPolicy = field(default_factory=HealthPolicy)
    rollback: RollbackPolicy = field(default_factory=RollbackPolicy)
    digest: str = ""
    evidence: EvidencePolicy = field(default_factory=EvidencePolicy)
    drift: DriftPolicy = field(default_factory=DriftPolicy)


def _matches_any(rule_id: str, patterns: tuple[str, ...]) -> bool:
    for pattern in patterns:
        if pattern == "*" or pattern == rule_id:
            return True
        if pattern.endswith(".*") and rule_id.startswith(pattern[:-1]):
            return True
    return False


def load_policy(path: Path) -> Policy:
    """Read and validate the TOML policy at ``path``; raise :class:`InputError` if malformed."""
    raw = read_file(path, "policy")
    return parse_policy(raw, base_dir=path.parent, source=str(path))


def parse_policy(raw: bytes, *, base_dir: Path, source: str = "policy") -> Policy:
    """Parse policy TOML bytes; relative key paths resolve against ``base_dir``."""
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"{source}: not valid TOML: {exc}") from exc
    reader = _Reader(source)
    check_tables(data, POLICY_TABLES, source)
    policy = Policy(
        conformance=_conformance(reader, reader.table(data, "conformance")),
        sdk=_sdk(reader, reader.table(data, "sdk")),
        hop=_hop(reader, reader.table(data, "hop")),
        health=_health(reader, reader.table(data, "health")),
        rollback=_rollback(reader, reader.table(data, "rollback"), base_dir),
        digest=sha256_hex(raw),
        evidence=_evidence(reader, reader.table(data, "evidence"), base_dir),
        drift=_drift(reader, reader.table(data, "drift")),
    )
    return policy


POLICY_TABLES: TableKeys = {
    "": frozenset({"conformance", "sdk", "hop", "health", "rollback", "evidence", "drift"}),
    "conformance": frozenset({"block", "allow", "examples", "strengths"}),
    "sdk": frozenset({"allow_fields"}),
    "drift": frozenset({"block"}),
    "hop": frozenset({"require_two_hop", "block", "allow"}),
    "health": frozenset({
        "hop", "min_samples", "max_error_rate", "latency_percentile", "max_latency_ms",
        "max_sse_first_event_ms", "min_observation_seconds", "count_jsonrpc_errors",
        "count_http_5xx", "count_http_4xx", "baseline",
    }),
    "health.baseline": frozenset({"required", "max_latency_increase",
                                  "max_error_rate_increase"}),
    "rollback": frozenset({"trusted_signers", "algorithms", "hmac_key_env", "hmac_key_file",
                           "ed25519_keys"}),
    "rollback.ed25519_keys": None,  # signer name -> key: names of the user's choosing
    "evidence": frozenset({"trusted_keys", "require_signed", "max_loss_ratio"}),
}
"""Every table of the gate policy and its allowed keys (see :mod:`mcp_tap.tables`); the
readers below check against the same sets."""


def _keys(table: str) -> frozenset[str]:
    """The allowed keys of a policy table that :data:`POLICY_TABLES` restricts."""
    keys = POLICY_TABLES[table]
    assert keys is not None  # only the key ring is free-form, and it is not read this way
    return keys


# The largest number a policy may hold: exact in JSON everywhere (2**53 - 1), so the
# decision evidence, which quotes the policy, can always be hashed canonically.
_LARGEST: Final = 2**53 - 1


class _Reader:
    """Typed accessors that turn every bad value into a one-line error naming its key."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, key: str, expected: str, value: Any) -> InputError:
        return InputError(f"{self.source}: {key} must be {expected}, got {value!r}")

    def no_unknown(self, table: Mapping[str, Any], known: frozenset[str], prefix: str) -> None:
        for key in table:
            if key not in known:
                name = f"{prefix}.{key}" if prefix else key
                raise InputError(f"{self.source}: unknown key {name}")

    def table(self, parent: Mapping[str, Any], key: str, prefix: str = "") -> dict[str, Any]:
        name = f"{prefix}.{key}" if prefix else key
        value = parent.get(key, {})
        if not isinstance(value, dict):
            raise self.fail(name, "a table", value)
        return value

    def boolean(self, table: Mapping[str, Any], key: str, name: str, default: bool) -> bool:
        value = table.get(key, default)
        if type(value) is not bool:
            raise self.fail(name, "true or false", value)
        return value

    def number(
        self,
        table: Mapping[str, Any],
        key: str,
        name: str,
        default: float,
        *,
        low: float = 0.0,
        high: float | None = None,
    ) -> float:
        value = table.get(key, default)
        # bool is an int subclass in Python; `true` is not a threshold. An infinite or huge
        # threshold would switch its check off (and cannot be hashed into the decision).
        if (type(value) not in (int, float) or value != value
                or abs(value) > _LARGEST or not math.isfinite(value)):
            raise self.fail(name, f"a finite number of at most {_LARGEST}", value)
        number = float(value)
        if number < low or (high is not None and number > high):
            bounds = f"between {low:g} and {high:g}" if high is not None else f">= {low:g}"
            raise self.fail(name, f"a number {bounds}", value)
        return number

    def integer(
        self, table: Mapping[str, Any], key: str, name: str, default: int, *, low: int
    ) -> int:
        value = table.get(key, default)
        if type(value) is not int or not low <= value <= _LARGEST:
            raise self.fail(name, f"an integer between {low} and {_LARGEST}", value)
        return value

    def string(self, table: Mapping[str, Any], key: str, name: str) -> str | None:
        if key not in table:
            return None
        value = table[key]
        if not isinstance(value, str) or not value:
            raise self.fail(name, "a non-empty string", value)
        return value

    def strings(
        self, table: Mapping[str, Any], key: str, name: str, default: tuple[str, ...]
    ) -> tuple[str, ...]:
        value = table.get(key, list(default))
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.fail(name, "a list of non-empty strings", value)
        return tuple(value)


def _rule_patterns(reader: _Reader, patterns: tuple[str, ...], name: str) -> tuple[str, ...]:
    # A pattern that matches no catalog rule is almost always a typo that would silently
    # stop a rule from blocking (or from being allowed), so it is an error.
    for pattern in patterns:
        if pattern == "*":
            continue
        if pattern.endswith(".*"):
            prefix = pattern[:-1]
            if any(rule_id.startswith(prefix) for rule_id in CATALOG):
                continue
        elif pattern in CATALOG:
            continue
        raise reader.fail(name, "catalog rule ids or `prefix.*` patterns", pattern)
    return patterns


def _conformance(reader: _Reader, table: dict[str, Any]) -> ConformancePolicy:
    reader.no_unknown(table, _keys("conformance"), "conformance")
    strengths = reader.strings(table, "strengths", "conformance.strengths", ("must",))
    if not set(strengths) <= {"must", "should"}:
        raise reader.fail("conformance.strengths", 'a list of "must" and "should"', strengths)
    block = reader.strings(table, "block", "conformance.block", ("*",))
    allow = reader.strings(table, "allow", "conformance.allow", ())
    return ConformancePolicy(
        block=_rule_patterns(reader, block, "conformance.block"),
        allow=_rule_patterns(reader, allow, "conformance.allow"),
        examples=reader.integer(table, "examples", "conformance.examples", 3, low=0),
        strengths=strengths,
    )


# A full allowlist path as the SDK differential writes one: ``result``, then ``.plainKey``,
# ``[3]``, ``[]`` or ``["any key"]`` steps.
_FULL_PATH: Final = re.compile(
    r'result(?:\.[A-Za-z_$][A-Za-z0-9_$-]*|\[\d*\]|\["(?:[^"\\]|\\.)*"\])*')


def check_allow_fields(names: Any, what: str) -> frozenset[str]:
    """Check SDK-differential allowlist entries (``sdk.allow_fields``, ``sdk-diff --allow``).

    Each is a non-empty string: a last key (``nextCursor``, any string) or a full path
    (``result.tools[].futureHint``). A malformed full path (``result..x``) could never match
    a difference and would silently allow nothing, so it is an :class:`InputError` naming
    ``what``, as is anything but a list of non-empty strings.
    """
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        raise InputError(f"{what} must be a list of non-empty strings, got {names!r}")
    for name in names:
        if name.startswith(("result.", "result[")) and not _FULL_PATH.fullmatch(name):
            raise InputError(
                f"{what} {name!r}: not a path like result.tools[].futureHint "
                '(steps .key, [], [N] or ["key"])')
    return frozenset(names)


def _sdk(reader: _Reader, table: dict[str, Any]) -> SdkPolicy:
    reader.no_unknown(table, _keys("sdk"), "sdk")
    names = table.get("allow_fields", [])
    return SdkPolicy(check_allow_fields(names, f"{reader.source}: sdk.allow_fields"))


def _drift(reader: _Reader, table: dict[str, Any]) -> DriftPolicy:
    reader.no_unknown(table, _keys("drift"), "drift")
    block = reader.strings(table, "block", "drift.block", DriftPolicy().block)
    for pattern in block:
        area, _, severity = pattern.partition(".")
        if area not in (*DRIFT_AREAS, "*") or severity not in (*DRIFT_SEVERITIES, "*"):
            raise reader.fail("drift.block", "AREA.SEVERITY pairs like \"inventory.breaking\" "
                              f"(areas {', '.join(DRIFT_AREAS)}; severities "
                              f"{', '.join(DRIFT_SEVERITIES)}; either may be *)", pattern)
    return DriftPolicy(block)


def _hop(reader: _Reader, table: dict[str, Any]) -> HopPolicy:
    reader.no_unknown(table, _keys("hop"), "hop")
    block = reader.strings(table, "block", "hop.block", ())
    for cls in block:
        if cls not in CLASSES:
            raise reader.fail("hop.block", f"change classes ({', '.join(CLASSES)})", cls)
    allow = _rule_patterns(reader, reader.strings(table, "allow", "hop.allow", ()), "hop.allow")
    return HopPolicy(reader.boolean(table, "require_two_hop", "hop.require_two_hop", False),
                     block, allow)


def _health(reader: _Reader, table: dict[str, Any]) -> HealthPolicy:
    reader.no_unknown(table, _keys("health"), "health")
    d = HealthPolicy()
    percentile = table.get("latency_percentile", d.latency_percentile)
    if percentile not in PERCENTILES:
        raise reader.fail("health.latency_percentile", '"p50", "p95" or "p99"', percentile)
    sse_max: float | None = None
    if "max_sse_first_event_ms" in table:
        sse_max = reader.number(table, "max_sse_first_event_ms", "health.max_sse_first_event_ms",
                                0.0)
    counting = ErrorCounting(
        jsonrpc_errors=reader.boolean(table, "count_jsonrpc_errors",
                                      "health.count_jsonrpc_errors", True),
        http_5xx=reader.boolean(table, "count_http_5xx", "health.count_http_5xx", True),
        http_4xx=reader.boolean(table, "count_http_4xx", "health.count_http_4xx", False),
    )
    base = reader.table(table, "baseline", "health")
    reader.no_unknown(base, _keys("health.baseline"), "health.baseline")
    bd = BaselinePolicy()
    baseline = BaselinePolicy(
        required=reader.boolean(base, "required", "health.baseline.required", bd.required),
        max_latency_increase=reader.number(
            base, "max_latency_increase", "health.baseline.max_latency_increase",
            bd.max_latency_increase),
        max_error_rate_increase=reader.number(
            base, "max_error_rate_increase", "health.baseline.max_error_rate_increase",
            bd.max_error_rate_increase, high=1.0),
    )
    return HealthPolicy(
        hop=reader.string(table, "hop", "health.hop"),
        # Zero samples is never healthy, so a minimum below one is not a real policy.
        min_samples=reader.integer(table, "min_samples", "health.min_samples", d.min_samples,
                                   low=1),
        max_error_rate=reader.number(table, "max_error_rate", "health.max_error_rate",
                                     d.max_error_rate, high=1.0),
        latency_percentile=cast(Percentile, percentile),
        max_latency_ms=reader.number(table, "max_latency_ms", "health.max_latency_ms",
                                     d.max_latency_ms),
        max_sse_first_event_ms=sse_max,
        min_observation_seconds=reader.number(
            table, "min_observation_seconds", "health.min_observation_seconds",
            d.min_observation_seconds),
        counting=counting,
        baseline=baseline,
    )


def _rollback(reader: _Reader, table: dict[str, Any], base_dir: Path) -> RollbackPolicy:
    reader.no_unknown(table, _keys("rollback"), "rollback")
    signers = reader.strings(table, "trusted_signers", "rollback.trusted_signers", ())
    algorithms = reader.strings(table, "algorithms", "rollback.algorithms",
                                tuple(sorted(ALGORITHMS)))
    for algorithm in algorithms:
        if algorithm not in ALGORITHMS:
            raise reader.fail("rollback.algorithms", '"hmac-sha256" and/or "ed25519"', algorithm)
    if "hmac_key_env" in table:
        env = reader.string(table, "hmac_key_env", "rollback.hmac_key_env")
    else:
        env = RollbackPolicy().hmac_key_env
    if env is not None and not _ENV_NAME.fullmatch(env):
        raise reader.fail("rollback.hmac_key_env", "an environment variable name", env)
    key_file = reader.string(table, "hmac_key_file", "rollback.hmac_key_file")
    keys_table = reader.table(table, "ed25519_keys", "rollback")
    keys: dict[str, bytes] = {}
    for signer, value in keys_table.items():
        name = f"rollback.ed25519_keys.{signer}"
        if signer not in signers:
            raise InputError(f"{reader.source}: {name} names a signer that is not in "
                             "rollback.trusted_signers")
        if not isinstance(value, str) or not value:
            raise reader.fail(name, "64 hex digits or a PEM file path", value)
        keys[signer] = ed25519_public_key(value, base_dir, reader.source, name)
    return RollbackPolicy(
        trusted_signers=signers,
        algorithms=frozenset(algorithms),
        hmac_key_env=env,
        hmac_key_file=None if key_file is None else base_dir / key_file,
        ed25519_keys=keys,
    )


def _evidence(reader: _Reader, table: dict[str, Any], base_dir: Path) -> EvidencePolicy:
    reader.no_unknown(table, _keys("evidence"), "evidence")
    values = reader.strings(table, "trusted_keys", "evidence.trusted_keys", ())
    keys = tuple(ed25519_public_key(value, base_dir, reader.source, "evidence.trusted_keys")
                 for value in values)
    return EvidencePolicy(
        trusted_keys=keys,
        require_signed=reader.boolean(table, "require_signed", "evidence.require_signed",
                                      bool(keys)),
        max_loss_ratio=reader.number(table, "max_loss_ratio", "evidence.max_loss_ratio", 0.0,
                                     high=1.0),
    )
