"""Tests for era selection and the per-client audit (mcp_tap.core.selection)."""

from __future__ import annotations

import pytest

from mcp_tap.core.eras import Era
from mcp_tap.core.findings import Boundary, Finding
from mcp_tap.core.selection import (
    ClientEvent,
    ClientTracker,
    Observation,
    ObservationKind,
    SelectionPolicy,
    proves_modern,
    select_era,
)

K = ObservationKind
STRICT = SelectionPolicy.STRICT
FALLBACK = SelectionPolicy.FALLBACK
INCONCLUSIVE = [
    Observation(K.TIMEOUT),
    Observation(K.EMPTY),
    Observation(K.CLOSED),
    Observation(K.UNRECOGNISED),
    Observation(K.JSONRPC_ERROR, code=-32601),
    Observation(K.JSONRPC_ERROR, code=-32600),
    Observation(K.JSONRPC_ERROR),
]
MODERN_PROOF = [
    Observation(K.DISCOVER_SUCCESS),
    Observation(K.JSONRPC_ERROR, code=-32020),
    Observation(K.JSONRPC_ERROR, code=-32021),
    Observation(K.JSONRPC_ERROR, code=-32022),
]
PINNED_INIT = Observation(K.INITIALIZE_SUCCESS, protocol_version="2025-11-25")


def rules(found: list[Finding]) -> list[str]:
    """Rule ids of findings."""
    return [f.rule for f in found]


class TestProvesModern:
    """proves_modern: only discover success and recognised modern errors prove modern."""

    @pytest.mark.parametrize("obs", MODERN_PROOF)
    def test_proof(self, obs: Observation) -> None:
        """server/discover success and -32020/-32021/-32022 prove modern."""
        assert proves_modern(obs)

    @pytest.mark.parametrize("obs", [*INCONCLUSIVE, PINNED_INIT])
    def test_not_proof(self, obs: Observation) -> None:
        """Silence, unrecognised answers, other codes and initialize are no modern proof."""
        assert not proves_modern(obs)


class TestSelectEra:
    """select_era: the strict/fallback selection table."""

    @pytest.mark.parametrize("policy", [STRICT, FALLBACK])
    @pytest.mark.parametrize("obs", MODERN_PROOF)
    def test_modern_proof_selects_modern(self, obs: Observation, policy: SelectionPolicy) -> None:
        """Modern proof selects modern under either policy, even with legacy evidence."""
        s = select_era(obs, policy, legacy_allowed=True, legacy_evidence=PINNED_INIT)
        assert s.era is Era.MODERN

    def test_32021_modern_in_fallback(self) -> None:
        """-32021 selects modern in fallback, never legacy."""
        s = select_era(
            Observation(K.JSONRPC_ERROR, code=-32021),
            FALLBACK,
            legacy_allowed=True,
            legacy_evidence=PINNED_INIT,
        )
        assert s.era is Era.MODERN
        assert "-32021" in s.reason

    @pytest.mark.parametrize("obs", INCONCLUSIVE)
    def test_strict_without_proof_no_traffic(self, obs: Observation) -> None:
        """Strict without modern proof selects nothing, even allowlisted with legacy proof."""
        s = select_era(obs, STRICT, legacy_allowed=True, legacy_evidence=PINNED_INIT)
        assert s.era is None

    @pytest.mark.parametrize("obs", INCONCLUSIVE)
    def test_fallback_not_allowlisted(self, obs: Observation) -> None:
        """Fallback without an allowlist selects nothing (timeout is not legacy evidence)."""
        s = select_era(obs, FALLBACK, legacy_evidence=PINNED_INIT)
        assert s.era is None
        assert "allowlisted" in s.reason

    def test_fallback_timeout_no_allowlist(self) -> None:
        """A timeout in fallback mode without allowlist selects no era."""
        assert select_era(Observation(K.TIMEOUT), FALLBACK).era is None

    @pytest.mark.parametrize("obs", INCONCLUSIVE)
    def test_fallback_allowlisted_with_pinned_initialize(self, obs: Observation) -> None:
        """Allowlisted plus a valid initialize with the pinned revision selects legacy."""
        s = select_era(obs, FALLBACK, legacy_allowed=True, legacy_evidence=PINNED_INIT)
        assert s.era is Era.LEGACY

    @pytest.mark.parametrize(
        "evidence",
        [
            None,
            Observation(K.INITIALIZE_SUCCESS, protocol_version="2025-06-18"),
            Observation(K.INITIALIZE_SUCCESS),
            Observation(K.TIMEOUT),
            Observation(K.JSONRPC_ERROR, code=-32600, protocol_version="2025-11-25"),
        ],
    )
    def test_fallback_allowlisted_without_pinned_proof(self, evidence: Observation | None) -> None:
        """Allowlisted without a pinned-version initialize result selects nothing."""
        s = select_era(
            Observation(K.TIMEOUT), FALLBACK, legacy_allowed=True, legacy_evidence=evidence
        )
        assert s.era is None

    def test_other_pinned_version(self) -> None:
        """The pinned revision is configurable."""
        evidence = Observation(K.INITIALIZE_SUCCESS, protocol_version="2025-06-18")
        s = select_era(
            Observation(K.EMPTY),
            FALLBACK,
            legacy_allowed=True,
            legacy_evidence=evidence,
            pinned_legacy_version="2025-06-18",
        )
        assert s.era is Era.LEGACY


class TestClientTracker:
    """ClientTracker: client.downgrade and client.fallback-unproven over one client."""

    INIT = ClientEvent("initialize", Era.LEGACY, result={"protocolVersion": "2025-11-25"})

    def test_modern_shaped_initialize_is_no_downgrade(self) -> None:
        """A modern-shaped initialize (request.method.removed, answered -32601) after a modern
        error is neither a downgrade nor an unproven fallback."""
        t = ClientTracker()
        t.observe(ClientEvent("tools/list", Era.MODERN, error_code=-32022))
        assert t.observe(ClientEvent("initialize", Era.MODERN, error_code=-32601)) == []

    def test_downgrade_is_a_warning(self) -> None:
        """client.downgrade is a SHOULD (streamable-http "Backward Compatibility")."""
        t = ClientTracker(legacy_allowed=True)
        t.observe(ClientEvent("tools/list", Era.MODERN, error_code=-32020))
        (f,) = t.observe(self.INIT)
        assert (f.rule, f.code, str(f.strength)) == ("client.downgrade", None, "should")

    @pytest.mark.parametrize("code", [-32020, -32021, -32022])
    def test_downgrade_after_recognised_error(self, code: int) -> None:
        """initialize after a recognised modern error is client.downgrade."""
        t = ClientTracker(legacy_allowed=True)
        assert t.observe(ClientEvent("tools/list", Era.MODERN, error_code=code)) == []
        found = t.observe(self.INIT)
        assert rules(found) == ["client.downgrade"]
        assert found[0].code is None
        assert found[0].boundary is Boundary.CLIENT
        assert str(code) in found[0].message

    @pytest.mark.parametrize("code", [-32601, -32600, -32602, None])
    def test_no_downgrade_after_other_outcomes(self, code: int | None) -> None:
        """initialize after -32601, another error or success is no downgrade."""
        t = ClientTracker(legacy_allowed=True)
        t.observe(ClientEvent("server/discover", Era.MODERN, error_code=code))
        assert t.observe(self.INIT) == []

    def test_downgrade_reported_once(self) -> None:
        """A second initialize does not repeat the downgrade finding."""
        t = ClientTracker(legacy_allowed=True)
        t.observe(ClientEvent("tools/list", Era.MODERN, error_code=-32022))
        assert rules(t.observe(self.INIT)) == ["client.downgrade"]
        assert t.observe(self.INIT) == []

    def test_legacy_era_error_not_modern_proof(self) -> None:
        """A -32020-looking error in the legacy era is not a recognised modern error."""
        t = ClientTracker(legacy_allowed=True)
        t.observe(self.INIT)
        t.observe(ClientEvent("tools/list", Era.LEGACY, error_code=-32020))
        assert t.observe(self.INIT) == []

    def test_not_allowlisted_initialize(self) -> None:
        """initialize to an endpoint not allowlisted is client.fallback-unproven."""
        t = ClientTracker()
        found = t.observe(self.INIT)
        assert rules(found) == ["client.fallback-unproven"]
        assert found[0].code is None

    def test_downgrade_and_unproven_together(self) -> None:
        """A downgrade to an endpoint not allowlisted reports both rules."""
        t = ClientTracker()
        t.observe(ClientEvent("tools/call", Era.MODERN, error_code=-32020))
        assert rules(t.observe(self.INIT)) == ["client.downgrade", "client.fallback-unproven"]

    def test_legacy_without_initialize(self) -> None:
        """Legacy traffic with no initialize proof is client.fallback-unproven."""
        t = ClientTracker(legacy_allowed=True)
        assert rules(t.observe(ClientEvent("tools/list", Era.LEGACY))) == [
            "client.fallback-unproven"
        ]

    @pytest.mark.parametrize(
        "init",
        [
            ClientEvent("initialize", Era.LEGACY, error_code=-32603),
            ClientEvent("initialize", Era.LEGACY, result={"protocolVersion": "2026-07-28"}),
            ClientEvent("initialize", Era.LEGACY, result={"protocolVersion": 20251125}),
            ClientEvent("initialize", Era.LEGACY, result=None),
        ],
    )
    def test_legacy_after_failed_initialize(self, init: ClientEvent) -> None:
        """An initialize without a valid legacy result is no proof for later legacy traffic."""
        t = ClientTracker(legacy_allowed=True)
        assert t.observe(init) == []
        assert rules(t.observe(ClientEvent("tools/list", Era.LEGACY))) == [
            "client.fallback-unproven"
        ]

    def test_legacy_after_valid_initialize(self) -> None:
        """Allowlisted, after a valid initialize result, legacy traffic is fine."""
        t = ClientTracker(legacy_allowed=True)
        assert t.observe(self.INIT) == []
        assert t.observe(ClientEvent("notifications/initialized", Era.LEGACY)) == []
        assert t.observe(ClientEvent("tools/list", Era.LEGACY)) == []

    def test_unproven_reported_once(self) -> None:
        """client.fallback-unproven is reported once per client."""
        t = ClientTracker()
        assert rules(t.observe(self.INIT)) == ["client.fallback-unproven"]
        assert t.observe(ClientEvent("tools/list", Era.LEGACY)) == []

    def test_modern_traffic_is_fine(self) -> None:
        """Modern requests alone cause no client finding."""
        t = ClientTracker()
        assert t.observe(ClientEvent("server/discover", Era.MODERN)) == []
        assert t.observe(ClientEvent("tools/list", Era.MODERN)) == []
