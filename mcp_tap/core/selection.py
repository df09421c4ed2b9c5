"""Era selection as a pure policy, and a tracker that audits one client's choices.

Modern is proven by a successful ``server/discover`` or a recognised modern JSON-RPC error
(-32020, -32021, -32022). Silence is never legacy evidence: timeouts, empty replies, closed
connections and unrecognised answers are inconclusive. Only an allowlisted endpoint may get
a legacy probe, and legacy is selected only after a valid ``initialize`` result with the
pinned legacy revision.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from mcp_tap.core.catalog import (
    HEADER_MISMATCH,
    MISSING_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
    finding,
)
from mcp_tap.core.eras import ERA_LEGACY, ERA_MODERN, LEGACY_VERSIONS, PINNED_LEGACY_VERSION, Era
from mcp_tap.core.findings import Finding

RECOGNISED_MODERN_ERRORS = frozenset(
    {HEADER_MISMATCH, MISSING_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION}
)


class SelectionPolicy(StrEnum):
    """How a client may choose an era."""

    STRICT = "strict"
    FALLBACK = "fallback"


class ObservationKind(StrEnum):
    """What a probe saw."""

    DISCOVER_SUCCESS = "discover_success"
    JSONRPC_ERROR = "jsonrpc_error"
    TIMEOUT = "timeout"
    EMPTY = "empty"
    CLOSED = "closed"
    UNRECOGNISED = "unrecognised"
    INITIALIZE_SUCCESS = "initialize_success"


@dataclass(frozen=True, slots=True)
class Observation:
    """One probe outcome: its kind, the JSON-RPC code of an error, the version of a result."""

    kind: ObservationKind
    code: int | None = None
    protocol_version: str | None = None


@dataclass(frozen=True, slots=True)
class Selection:
    """The era a policy selects (``None``: no traffic) and why."""

    era: Era | None
    reason: str


def proves_modern(obs: Observation) -> bool:
    """Whether an observation is positive modern evidence."""
    if obs.kind is ObservationKind.DISCOVER_SUCCESS:
        return True
    return obs.kind is ObservationKind.JSONRPC_ERROR and obs.code in RECOGNISED_MODERN_ERRORS


def select_era(
    modern_probe: Observation,
    policy: SelectionPolicy,
    *,
    legacy_allowed: bool = False,
    legacy_evidence: Observation | None = None,
    pinned_legacy_version: str = PINNED_LEGACY_VERSION,
) -> Selection:
    """Select an era from one bounded modern probe and, maybe, legacy evidence."""
    if proves_modern(modern_probe):
        return Selection(
            Era.MODERN,
            f"modern proven by {modern_probe.kind}"
            + (f" {modern_probe.code}" if modern_probe.code is not None else ""),
        )
    if policy is SelectionPolicy.STRICT:
        return Selection(None, f"strict policy: {modern_probe.kind} is not modern proof")
    if not legacy_allowed:
        return Selection(
            None,
            f"{modern_probe.kind} is inconclusive and the endpoint is not allowlisted for legacy",
        )
    if (
        legacy_evidence is not None
        and legacy_evidence.kind is ObservationKind.INITIALIZE_SUCCESS
        and legacy_evidence.protocol_version == pinned_legacy_version
    ):
        return Selection(
            Era.LEGACY, f"allowlisted endpoint answered initialize with {pinned_legacy_version}"
        )
    return Selection(None, "no valid initialize result with the pinned legacy revision")


@dataclass(frozen=True, slots=True)
class ClientEvent:
    """One exchange of one client, as the tracker needs it."""

    method: str | None
    era: Era
    error_code: int | None = None
    result: Any = None


class ClientTracker:
    """Fed one client's exchanges in order, reports forbidden era choices.

    ``client.downgrade``: an ``initialize`` after a recognised modern error.
    ``client.fallback-unproven``: the legacy era used without an allowlisted endpoint and a
    valid ``initialize`` result with a legacy revision (reported once per client).
    """

    def __init__(self, *, legacy_allowed: bool = False) -> None:
        self.legacy_allowed = legacy_allowed
        self.modern_error: int | None = None
        self.legacy_proven = False
        self._unproven_reported = False
        self._downgrade_reported = False

    def observe(self, event: ClientEvent) -> list[Finding]:
        """Record one exchange and return the client findings it causes."""
        return self.see(event.method, event.era, event.error_code, event.result)

    def see(
        self, method: str | None, era: Era, error_code: int | None, result: Any
    ) -> list[Finding]:
        """:meth:`observe` of ``ClientEvent(method, era, error_code, result)``, without the
        event (the recorder's call, once per exchange)."""
        if era is ERA_MODERN:  # the usual exchange: only a recognised error is remembered
            if error_code in RECOGNISED_MODERN_ERRORS:
                self.modern_error = error_code
            return []
        found: list[Finding] = []
        if method == "initialize":
            # A modern-shaped initialize is a removed method (request.method.removed), not
            # a fall back to the legacy era.
            if self.modern_error is not None and not self._downgrade_reported:
                self._downgrade_reported = True
                found.append(
                    finding(
                        "client.downgrade",
                        f"initialize after the recognised modern error {self.modern_error}: "
                        "the client must correct the request or stop",
                        "client",
                    )
                )
            if not self.legacy_allowed and not self._unproven_reported:
                self._unproven_reported = True
                found.append(
                    finding(
                        "client.fallback-unproven",
                        "legacy initialize sent to an endpoint that is not allowlisted for legacy",
                        "client",
                    )
                )
            version = result.get("protocolVersion") if isinstance(result, dict) else None
            if error_code is None and isinstance(version, str) and version in LEGACY_VERSIONS:
                self.legacy_proven = True
            return found
        if (
            era is ERA_LEGACY
            and method != "notifications/initialized"
            and not self.legacy_proven
            and not self._unproven_reported
        ):
                self._unproven_reported = True
                found.append(
                    finding(
                        "client.fallback-unproven",
                        f"legacy {method} without a valid initialize result first",
                        "client",
                    )
                )
        return found
