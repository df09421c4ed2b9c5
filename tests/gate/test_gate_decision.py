"""Tests of the gate's pure core: source builders, the decision table, the policy parser."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from mcp_tap.core.catalog import CATALOG
from mcp_tap.core.catalog import finding as catalog_finding
from mcp_tap.core.eras import Era
from mcp_tap.core.findings import Finding
from mcp_tap.core.hashing import digest
from mcp_tap.core.rulecounts import RuleCount
from mcp_tap.drift import Area, CaptureDiff, CaptureSide, Change, Severity
from mcp_tap.errors import InputError
from mcp_tap.gate.decision import (
    SOURCES,
    Action,
    BundleCheck,
    GateInputs,
    Reason,
    Report,
    ReportCase,
    RollbackResult,
    SourceResult,
    choose,
    conformance_source,
    decide,
    gaps_of,
    hop_source,
    integrity_source,
    record_digest,
    sdk_source,
)
from mcp_tap.gate.drift import drift_source
from mcp_tap.gate.health import Percentiles, compute_window, evaluate_health
from mcp_tap.gate.policy import (
    BaselinePolicy,
    ConformancePolicy,
    DriftPolicy,
    ErrorCounting,
    HealthPolicy,
    HopPolicy,
    parse_policy,
)
from mcp_tap.gate.rollback import Trust, check_rollback, hmac_signature, missing_rollback


def finding(rule_id: str, where: str = "origin") -> dict[str, Any]:
    """Return the JSON of a catalog finding."""
    entry = CATALOG[rule_id]
    return Finding(rule_id, entry.code, entry.boundary, "m", where).to_json()


def record(
    n: int, *findings: dict[str, Any], kind: str = "exchange", **extra: Any
) -> dict[str, Any]:
    """Return an evidence record with ``findings`` and a writer-style digest."""
    body: dict[str, Any] = {"kind": kind, "seq": n, "hop": "edge", "exchangeId": f"x{n}",
                            "findings": list(findings), **extra}
    return {**body, "digest": digest(body)}


def rules(result: Any) -> list[str]:
    """Return the rule ids of a result's reasons, in order."""
    return [r.rule for r in result.reasons]


def passing(name: str) -> SourceResult:
    """Return a passing source result."""
    return SourceResult(name)


def failing(name: str) -> SourceResult:
    """Return a source result failing with a reason of the source's own rule."""
    return SourceResult(name, (Reason(f"gate.{name}", f"{name} failed"),))


READY = RollbackResult(summary={"previousVersion": "1.4.2"})
NOT_READY = missing_rollback()


def inputs(
    failing_sources: frozenset[str] = frozenset(), rollback: RollbackResult = READY
) -> GateInputs:
    """Return gate inputs where exactly ``failing_sources`` fail."""
    results = {n: failing(n) if n in failing_sources else passing(n) for n in SOURCES}
    return GateInputs(rollback=rollback, policy_digest="p" * 64, **results)


@dataclass(frozen=True)
class FakeSdkReport:
    """A stand-in for sdkdiff's report, with the counts the gate reads made from findings."""

    compared: int
    findings: list[Finding] = field(default_factory=list)
    errors: list[object] = field(default_factory=list)

    @property
    def rejected(self) -> int:
        return len(self.errors)

    @property
    def by_rule(self) -> dict[str, RuleCount]:
        counts: dict[str, RuleCount] = {}
        for found in self.findings:
            counted = counts.setdefault(found.rule, RuleCount())
            counted.count += 1
            counted.add_where(found.where)
        return counts


class TestDecisionTable:
    """promote / rollback / hold over every combination of source and rollback outcomes."""

    @pytest.mark.parametrize(
        "outcome", list(itertools.product([True, False], repeat=len(SOURCES) + 1))
    )
    def test_exhaustive(self, outcome: tuple[bool, ...]) -> None:
        """Promote iff all pass and rollback ready; rollback iff some fail and ready; else hold."""
        *passes, ready = outcome
        failed = frozenset(n for n, ok in zip(SOURCES, passes, strict=True) if not ok)
        decision = decide(inputs(failed, READY if ready else NOT_READY))
        if all(passes) and ready:
            expected = Action.PROMOTE
        elif ready:
            expected = Action.ROLLBACK
        else:
            expected = Action.HOLD
        assert decision.action is expected
        expected_rules = [f"gate.{n}" for n in SOURCES if n in failed]
        if not ready:
            expected_rules.append("gate.rollback.missing")
        assert [r.rule for r in decision.reasons] == expected_rules

    def test_choose(self) -> None:
        """The table's two facts map to the three actions."""
        assert [choose(c, r) for c, r in itertools.product([True, False], repeat=2)] == [
            Action.PROMOTE, Action.HOLD, Action.ROLLBACK, Action.HOLD,
        ]


class TestEvidenceDigest:
    """The digest of the redacted decision evidence."""

    def test_digest_covers_evidence(self) -> None:
        """The digest is the canonical SHA-256 of the decision evidence."""
        decision = decide(inputs())
        assert decision.evidence_digest == digest(decision.evidence())
        assert decision.to_json()["evidenceDigest"] == decision.evidence_digest

    def test_digest_is_deterministic(self) -> None:
        """The same inputs give the same digest."""
        assert decide(inputs()).evidence_digest == decide(inputs()).evidence_digest

    def test_digest_changes_with_reasons_and_policy(self) -> None:
        """A different outcome or policy gives a different digest."""
        base = decide(inputs()).evidence_digest
        assert decide(inputs(frozenset({"hop"}))).evidence_digest != base
        assert decide(replace(inputs(), policy_digest="q" * 64)).evidence_digest != base

    def test_json_shape(self) -> None:
        """The JSON has the action, reasons, per-source summaries, rollback and digest."""
        result = decide(inputs(frozenset({"sdk"}))).to_json()
        assert set(result) == {"action", "reasons", "sources", "rollback", "policyDigest",
                               "evidenceDigest"}
        assert result["action"] == "rollback"
        assert list(result["sources"]) == list(SOURCES)
        assert result["sources"]["sdk"]["passed"] is False
        assert result["reasons"] == [{"rule": "gate.sdk", "findings": [],
                                      "message": "sdk failed", "details": {}}]


class TestConformanceSource:
    """Conformance findings from exchange records and reports."""

    def test_clean_exchanges_pass(self) -> None:
        """Exchanges without findings pass."""
        result = conformance_source([record(0), record(1)], ConformancePolicy())
        assert rules(result) == []
        assert result.summary["exchanges"] == 2

    def test_no_exchanges_is_empty(self) -> None:
        """No exchange records fail with gate.conformance.empty."""
        gap = record(0, kind="gap", lost=1)
        assert rules(conformance_source([gap], ConformancePolicy())) == ["gate.conformance.empty"]

    def test_failing_rule_with_count_boundary_examples(self) -> None:
        """One reason per rule, with its count, boundary and example exchange digests."""
        records = [record(i, finding("response.id")) for i in range(5)]
        records.append(record(5, finding("request.header.mismatch", "ingress")))
        result = conformance_source(records, ConformancePolicy(examples=2))
        assert rules(result) == ["gate.conformance", "gate.conformance"]
        by_rule = {r.findings: r.details for r in result.reasons}
        assert by_rule[("response.id",)] == {
            "count": 5, "boundaries": ["response"],
            "examples": [record_digest(records[0]), record_digest(records[1])],
        }
        assert by_rule[("request.header.mismatch",)]["boundaries"] == ["request"]

    def test_should_findings_warn_by_default(self) -> None:
        """A should finding is counted and listed as allowed, but does not block by default."""
        warn = catalog_finding("response.payload.tool-names-unique", "m", "origin").to_json()
        result = conformance_source([record(0, warn)], ConformancePolicy())
        assert rules(result) == []
        assert result.summary["rules"] == {"response.payload.tool-names-unique": 1}
        assert result.summary["allowed"] == ["response.payload.tool-names-unique"]

    def test_should_blocks_when_the_policy_says_so(self) -> None:
        """strengths = ["must", "should"] makes warnings block too."""
        warn = catalog_finding("response.payload.tool-names-unique", "m", "origin").to_json()
        policy = ConformancePolicy(strengths=("must", "should"))
        assert rules(conformance_source([record(0, warn)], policy)) == ["gate.conformance"]

    def test_legacy_strength_is_the_findings(self) -> None:
        """The recorded strength decides: a legacy sse.unterminated (should) does not block."""
        legacy = catalog_finding("sse.unterminated", "m", "origin", era=Era.LEGACY).to_json()
        modern = catalog_finding("sse.unterminated", "m", "origin", era=Era.MODERN).to_json()
        assert rules(conformance_source([record(0, legacy)], ConformancePolicy())) == []
        assert rules(conformance_source([record(0, modern)], ConformancePolicy())) == [
            "gate.conformance"]

    def test_old_evidence_uses_the_catalog_strength(self) -> None:
        """A finding recorded without a strength gets its rule's (a should rule: no block)."""
        warn = catalog_finding("response.payload.tool-names-unique", "m", "origin").to_json()
        del warn["strength"]
        assert rules(conformance_source([record(0, warn)], ConformancePolicy())) == []

    def test_policy_strengths_parsed(self, tmp_path: Path) -> None:
        """conformance.strengths is read from the policy file; a bad value is an input error."""
        policy = parse_policy(b'[conformance]\nstrengths = ["must", "should"]\n',
                              base_dir=tmp_path)
        assert policy.conformance.strengths == ("must", "should")
        with pytest.raises(InputError):
            parse_policy(b'[conformance]\nstrengths = ["may"]\n', base_dir=tmp_path)

    def test_two_hop_capture_counts_per_hop(self) -> None:
        """With several hops recorded, a rule's count is split by the hop that saw it."""
        records = [record(0, finding("request.header.mismatch", "ingress"), hop="edge"),
                   record(1, finding("request.header.mismatch", "ingress"), hop="origin"),
                   record(2, finding("request.header.mismatch", "ingress"), hop="origin"),
                   record(3, hop="edge")]
        result = conformance_source(records, ConformancePolicy())
        (reason,) = result.reasons
        assert reason.message == "request.header.mismatch: 3 finding(s) (edge 1, origin 2)"
        assert reason.details["hops"] == {"edge": 1, "origin": 2}
        assert result.summary["hops"] == ["edge", "origin"]

    def test_one_hop_capture_has_no_split(self) -> None:
        """A single-hop capture keeps the plain count and message."""
        records = [record(i, finding("response.id"), hop="tap") for i in range(2)]
        (reason,) = conformance_source(records, ConformancePolicy()).reasons
        assert reason.message == "response.id: 2 finding(s)" and "hops" not in reason.details

    def test_hop_findings_are_not_conformance(self) -> None:
        """hop.* findings belong to the hop source."""
        result = conformance_source([record(0, finding("hop.body-changed"))], ConformancePolicy())
        assert rules(result) == []

    def test_policy_allows_a_rule(self) -> None:
        """An allowed rule is summarised but does not block."""
        policy = ConformancePolicy(allow=("client.*",))
        result = conformance_source([record(0, finding("client.downgrade"))], policy)
        assert rules(result) == []
        assert result.summary["allowed"] == ["client.downgrade"]

    def test_policy_blocks_only_listed(self) -> None:
        """With an explicit block list, other rules do not block."""
        policy = ConformancePolicy(block=("response.*",))
        records = [record(0, finding("response.id")), record(1, finding("client.downgrade"))]
        result = conformance_source(records, policy)
        assert [r.findings for r in result.reasons] == [("response.id",)]

    def test_failed_report_case(self) -> None:
        """A failed transcript case blocks with its rule."""
        report = Report("d" * 64, (ReportCase("golden-ok", True),
                                   ReportCase("negative-header-body-mismatch", False,
                                              "response.header-mismatch-unanswered", "e" * 64)))
        result = conformance_source([record(0)], ConformancePolicy(), [report])
        assert rules(result) == ["gate.conformance"]
        assert result.reasons[0].findings == ("response.header-mismatch-unanswered",)
        assert result.reasons[0].details["case"] == "negative-header-body-mismatch"

    def test_failed_case_without_rule_blocks(self) -> None:
        """A negative case that was wrongly accepted has no rule and still blocks."""
        report = Report("d" * 64, (ReportCase("negative-x", False),))
        result = conformance_source([record(0)], ConformancePolicy(allow=("response.*",)),
                                    [report])
        assert rules(result) == ["gate.conformance"]

    def test_empty_report(self) -> None:
        """A report with no cases is empty evidence."""
        result = conformance_source([record(0)], ConformancePolicy(), [Report("d" * 64, ())])
        assert rules(result) == ["gate.conformance.empty"]


class TestHopSource:
    """Hop findings block and name the box."""

    def test_no_hop_findings_pass(self) -> None:
        """Exchanges without hop findings pass."""
        assert rules(hop_source([record(0)], HopPolicy())) == []

    def test_single_hop_finding_names_hop(self) -> None:
        """A hop finding in an exchange record names the hop and view."""
        result = hop_source([record(0, finding("hop.status-changed", "egress"))], HopPolicy())
        assert rules(result) == ["gate.hop"]
        assert result.reasons[0].findings == ("hop.status-changed",)
        assert result.reasons[0].details["box"] == "hop edge egress"

    def test_comparison_between_names_box(self) -> None:
        """A hop-comparison record's `between` names the box."""
        comp = record(0, finding("hop.error-collapse"), kind="hop-comparison",
                      between="edge and origin")
        result = hop_source([comp], HopPolicy())
        assert rules(result) == ["gate.hop"]
        assert result.reasons[0].details["box"] == "between edge and origin"

    def test_comparison_boxes_names_box(self) -> None:
        """A hop-comparison record's `boxes` pair names the box."""
        comp = record(0, finding("hop.header-changed"), finding("hop.header-changed"),
                      kind="hop-comparison", boxes=["edge", "origin"])
        result = hop_source([comp], HopPolicy())
        assert [(r.rule, r.details["box"], r.details["count"]) for r in result.reasons] == [
            ("gate.hop", "between edge and origin", 2)
        ]

    def test_gateway_changes_are_summarised_and_paths_named(self) -> None:
        """The changes per box, most important first; a finding's reason names its paths."""
        caps = "/params/_meta/io.modelcontextprotocol~1clientCapabilities"
        changes = [
            {"meaning": "expected", "class": "jsonrpc-id", "direction": "request",
             "kind": "changed", "path": "/id"},
            {"meaning": "recorded", "class": "tool-metadata", "direction": "response",
             "kind": "added", "path": "/result/tools/0/title"},
            {"meaning": "recorded", "class": "tool-metadata", "direction": "response",
             "kind": "added", "path": "/result/tools/1/title"},
            {"meaning": "hop.gateway.capability-widened", "class": "capability-widened",
             "direction": "request", "kind": "added", "path": f"{caps}/sampling"},
        ]
        comp = record(0, finding("hop.gateway.capability-widened"), kind="hop-comparison",
                      box="gw", boxKind="mcp-gateway", changes=changes)
        result = hop_source([comp], HopPolicy())
        assert [(r.rule, r.findings, r.details["paths"]) for r in result.reasons] == [
            ("gate.hop", ("hop.gateway.capability-widened",), [f"{caps}/sampling"])]
        assert result.reasons[0].message == (
            f"hop.gateway.capability-widened gw: 1 finding(s) at {caps}/sampling")
        rows = result.summary["changes"]["gw"]
        assert (rows["kind"], rows["pairs"]) == ("mcp-gateway", 1)
        assert [(c["meaning"], c["path"], c["count"]) for c in rows["changes"]] == [
            ("hop.gateway.capability-widened", f"{caps}/sampling", 1),
            ("recorded", "/result/tools/*/title", 2),
            ("expected", "/id", 1),
        ]
        allowed = hop_source([comp], HopPolicy(allow=("hop.gateway.*",)))
        assert rules(allowed) == []
        assert allowed.summary["allowed"] == ["hop.gateway.capability-widened"]
        blocked = hop_source([comp], HopPolicy(allow=("hop.gateway.*",),
                                               block=("tool-metadata", "jsonrpc-id")))
        assert [(r.rule, r.details["class"], r.details["count"], r.details["paths"])
                for r in blocked.reasons] == [
            ("gate.hop.change", "tool-metadata", 2, ["/result/tools/*/title"]),
            ("gate.hop.change", "jsonrpc-id", 1, ["/id"]),
        ]

    def test_two_hop_required(self) -> None:
        """Without a hop comparison, a policy requiring two hops fails with gate.hop.empty."""
        assert rules(hop_source([record(0)], HopPolicy(require_two_hop=True))) == [
            "gate.hop.empty"
        ]
        comp = record(1, kind="hop-comparison", between="edge and origin")
        assert rules(hop_source([record(0), comp], HopPolicy(require_two_hop=True))) == []


class TestSdkSource:
    """The SDK differential source."""

    def test_not_computed_is_empty(self) -> None:
        """A differential that could not run fails with gate.sdk.empty."""
        assert rules(sdk_source(None, [], "no SDK")) == ["gate.sdk.empty"]

    def test_nothing_compared_is_empty(self) -> None:
        """Zero compared exchanges fail with gate.sdk.empty."""
        assert rules(sdk_source(FakeSdkReport(0), [])) == ["gate.sdk.empty"]

    def test_differences_block(self) -> None:
        """Each remaining difference rule blocks with its underlying rule id."""
        found = [Finding.from_json(finding("sdk.dropped", "result.futureHint")),
                 Finding.from_json(finding("sdk.changed", "result.x"))]
        result = sdk_source(FakeSdkReport(3, found), ["resultType"])
        assert rules(result) == ["gate.sdk", "gate.sdk"]
        assert [r.findings for r in result.reasons] == [("sdk.changed",), ("sdk.dropped",)]

    def test_rejections_block(self) -> None:
        """A result the SDK client rejected blocks."""
        assert rules(sdk_source(FakeSdkReport(2, errors=[object()]), [])) == ["gate.sdk"]

    def test_clean_differential_passes(self) -> None:
        """Compared results without differences pass."""
        result = sdk_source(FakeSdkReport(4), ["futureHint"])
        assert rules(result) == []
        assert result.summary == {"compared": 4, "differences": 0, "rejected": 0,
                                  "allowFields": ["futureHint"]}


class TestIntegritySource:
    """Verification outcomes of the bundles."""

    def test_verified_bundle_passes(self) -> None:
        """A verified bundle passes, warnings included."""
        notes = (("unclosed", "warning", "writer still running"),)
        assert rules(integrity_source([BundleCheck("candidate", True, notes)])) == []

    def test_each_problem_is_a_reason(self) -> None:
        """Every problem of a failed bundle is a gate.integrity reason."""
        problems = (("digest", "error", "seq 3"), ("truncated", "error", "last line"))
        result = integrity_source([BundleCheck("candidate", False, problems)])
        assert rules(result) == ["gate.integrity", "gate.integrity"]
        assert [r.details["kind"] for r in result.reasons] == ["digest", "truncated"]

    def test_gap_records_fail(self) -> None:
        """Gap records the verifier did not report still fail integrity."""
        gaps = gaps_of([record(0, kind="gap", lost=4, reason="queue full")])
        result = integrity_source([BundleCheck("candidate", True, gaps=gaps)])
        assert rules(result) == ["gate.integrity"]
        assert result.reasons[0].details["lost"] == 4

    def test_reported_gap_counted_once(self) -> None:
        """A gap the verifier reported gives one reason, not two."""
        check = BundleCheck("candidate", False, (("gap", "error", "4 lost"),),
                            gaps=((4, "queue full"),))
        assert rules(integrity_source([check])) == ["gate.integrity"]

    def test_no_bundles(self) -> None:
        """No evidence at all fails integrity."""
        assert rules(integrity_source([])) == ["gate.integrity"]


# --- every gate reason, each from constructed evidence ---------------------------------

HEALTHY = compute_window([], ErrorCounting())
KEY = b"mcp-tap test rollback key, not a secret"


def _health(**window: Any) -> list[str]:
    values: dict[str, Any] = {"samples": 200, "latency_ms": Percentiles(10.0, 20.0, 30.0),
                              "observation_seconds": 900.0, **window}
    policy = HealthPolicy(max_sse_first_event_ms=100.0, baseline=BaselinePolicy(required=True))
    base = replace(HEALTHY, **values)
    return rules(evaluate_health(replace(HEALTHY, **values), policy, base))


VALID_ROLLBACK: dict[str, Any] = {
    "previousVersion": "1.0.0", "admissionEvidenceDigest": "a" * 64,
    "artifactSha256": "b" * 64, "descriptorSha256": "c" * 64, "registryStatus": "active",
    "healthy": True, "routeRestoration": ["restore"],
}


def _rollback(payload: dict[str, Any], *, sign: bool) -> list[str]:
    if sign:
        signature = hmac_signature(KEY, payload)
        payload = {**payload, "attestation": {"signer": "rc@prod", "algorithm": "hmac-sha256",
                                              "signature": signature}}
    return rules(check_rollback(payload, Trust(("rc@prod",), hmac_key=KEY)))


SCENARIOS: dict[str, Callable[[], list[str]]] = {
    "gate.conformance": lambda: rules(conformance_source(
        [record(0, finding("response.exclusivity"))], ConformancePolicy())),
    "gate.conformance.empty": lambda: rules(conformance_source([], ConformancePolicy())),
    "gate.sdk": lambda: rules(sdk_source(
        FakeSdkReport(1, [Finding.from_json(finding("sdk.synthesized"))]), [])),
    "gate.sdk.empty": lambda: rules(sdk_source(FakeSdkReport(0), [])),
    "gate.hop": lambda: rules(hop_source([record(0, finding("hop.sse-buffered"))], HopPolicy())),
    "gate.hop.empty": lambda: rules(hop_source([record(0)], HopPolicy(require_two_hop=True))),
    "gate.hop.change": lambda: rules(hop_source(
        [record(0, kind="hop-comparison", box="gw", boxKind="mcp-gateway", changes=[
            {"meaning": "recorded", "class": "tools", "direction": "response",
             "kind": "removed", "path": "/result/tools/3"}])],
        HopPolicy(block=("tools",)))),
    "gate.integrity": lambda: rules(integrity_source(
        [BundleCheck("candidate", False, (("chain", "error", "seq 2"),))])),
    "gate.health.samples": lambda: _health(samples=0),
    "gate.health.error-rate": lambda: rules(evaluate_health(
        replace(HEALTHY, samples=200, errors=100, latency_ms=Percentiles(1.0, 1.0, 1.0),
                observation_seconds=900.0), HealthPolicy())),
    "gate.health.latency": lambda: rules(evaluate_health(
        replace(HEALTHY, samples=200, latency_ms=Percentiles(1.0, 5000.0, 6000.0),
                observation_seconds=900.0), HealthPolicy())),
    "gate.health.sse-first-event": lambda: _health(
        sse_first_event_ms=Percentiles(500.0, 500.0, 500.0)),
    "gate.health.duration": lambda: rules(evaluate_health(
        replace(HEALTHY, samples=200, latency_ms=Percentiles(1.0, 1.0, 1.0),
                observation_seconds=1.0), HealthPolicy())),
    "gate.health.baseline": lambda: rules(evaluate_health(
        replace(HEALTHY, samples=200, latency_ms=Percentiles(1.0, 1.0, 1.0),
                observation_seconds=900.0), HealthPolicy(baseline=BaselinePolicy(required=True)))),
    "gate.drift": lambda: rules(drift_source(CaptureDiff(
        CaptureSide((), (), 1, 1), CaptureSide((), (), 1, 1),
        (Change(Area.INVENTORY, Severity.BREAKING, "tool echo", "removed", "tool echo removed"),
         Change(Area.BEHAVIOUR, Severity.BREAKING, "tools/call echo", "outcome", "error")),
        compared=1), DriftPolicy(), 1)),
    "gate.drift.empty": lambda: rules(drift_source("the baseline holds no exchange",
                                                   DriftPolicy(), 1)),
    "gate.rollback.missing": lambda: rules(missing_rollback()),
    "gate.rollback.field": lambda: _rollback({**VALID_ROLLBACK, "healthy": "yes"}, sign=True),
    "gate.rollback.attestation": lambda: _rollback(VALID_ROLLBACK, sign=False),
}


class TestEveryGateReason:
    """Each gate.* catalog rule is produced by constructed evidence."""

    def test_scenarios_cover_catalog(self) -> None:
        """There is one scenario per gate.* rule in the catalog."""
        assert set(SCENARIOS) == {r for r in CATALOG if r.startswith("gate.")}

    @pytest.mark.parametrize("rule_id", sorted(SCENARIOS))
    def test_reason(self, rule_id: str) -> None:
        """The scenario yields exactly that reason."""
        assert SCENARIOS[rule_id]() == [rule_id]


# --- the policy file ------------------------------------------------------------------


def policy_of(text: str, tmp_path: Path) -> Any:
    """Parse policy TOML text relative to ``tmp_path``."""
    return parse_policy(text.encode(), base_dir=tmp_path, source="policy.toml")


class TestParsePolicy:
    """The TOML policy: defaults, the shipped example, and one-line errors naming the key."""

    def test_empty_policy_defaults(self, tmp_path: Path) -> None:
        """An empty file is the strict default policy."""
        policy = policy_of("", tmp_path)
        assert policy.conformance.block == ("*",)
        assert policy.health.min_samples == 100
        assert policy.rollback.trusted_signers == ()
        assert len(policy.digest) == 64

    def test_shipped_example_loads(self) -> None:
        """config/policy.toml is a valid policy."""
        example = Path(__file__).resolve().parents[2] / "config" / "policy.toml"
        policy = parse_policy(example.read_bytes(), base_dir=example.parent)
        assert policy.rollback.trusted_signers == ("release-controller@prod",)
        assert policy.health.baseline.max_latency_increase == 0.20

    def test_values_are_read(self, tmp_path: Path) -> None:
        """Every section's values reach the dataclasses."""
        policy = policy_of(
            '[conformance]\nblock = ["response.*"]\nallow = ["response.id"]\n'
            '[sdk]\nallow_fields = ["futureHint"]\n[hop]\nrequire_two_hop = true\n'
            '[health]\nhop = "edge"\nmin_samples = 5\nlatency_percentile = "p99"\n'
            "max_sse_first_event_ms = 250\ncount_http_4xx = true\n"
            "[health.baseline]\nrequired = true\n"
            '[rollback]\nalgorithms = ["ed25519"]\nhmac_key_file = "k"\n', tmp_path)
        assert policy.conformance.blocks("response.envelope")
        assert not policy.conformance.blocks("response.id")
        assert not policy.conformance.blocks("client.downgrade")
        assert policy.sdk.allow_fields == frozenset({"futureHint"})
        assert policy.hop.require_two_hop
        assert (policy.health.hop, policy.health.min_samples, policy.health.latency_percentile,
                policy.health.max_sse_first_event_ms) == ("edge", 5, "p99", 250.0)
        assert policy.health.counting.http_4xx and policy.health.baseline.required
        assert policy.rollback.algorithms == frozenset({"ed25519"})
        assert policy.rollback.hmac_key_file == tmp_path / "k"

    @pytest.mark.parametrize(
        ("text", "key"),
        [
            ("[health]\nmin_samples = 0\n", "health.min_samples"),
            ("[health]\nmin_samples = true\n", "health.min_samples"),
            ("[health]\nmin_samples = 1.5\n", "health.min_samples"),
            ('[health]\nmax_error_rate = "1%"\n', "health.max_error_rate"),
            ("[health]\nmax_error_rate = 1.5\n", "health.max_error_rate"),
            ("[health]\nmax_latency_ms = -1\n", "health.max_latency_ms"),
            ("[health]\nmax_latency_ms = inf\n", "health.max_latency_ms"),
            ("[health]\nmax_latency_ms = 1e400\n", "health.max_latency_ms"),
            ("[health]\nmin_observation_seconds = nan\n", "health.min_observation_seconds"),
            ("[health]\nmin_samples = 99999999999999999999999999999\n", "health.min_samples"),
            ("[health.baseline]\nmax_latency_increase = 18446744073709551616\n",
             "health.baseline.max_latency_increase"),
            ('[health]\nlatency_percentile = "p90"\n', "health.latency_percentile"),
            ('[health]\ncount_http_5xx = "yes"\n', "health.count_http_5xx"),
            ('[health]\nhop = ""\n', "health.hop"),
            ("[health.baseline]\nmax_latency_increase = false\n",
             "health.baseline.max_latency_increase"),
            ("[health]\nbaseline = 3\n", "health.baseline"),
            ('[conformance]\nblock = "*"\n', "conformance.block"),
            ('[conformance]\nblock = ["respnse.id"]\n', "conformance.block"),
            ('[conformance]\nallow = ["nothing.*"]\n', "conformance.allow"),
            ("[conformance]\nexamples = -1\n", "conformance.examples"),
            ("[sdk]\nallow_fields = [1]\n", "sdk.allow_fields"),
            ('[sdk]\nallow_fields = ["result..x"]\n', "sdk.allow_fields"),
            ('[sdk]\nallow_fields = [""]\n', "sdk.allow_fields"),
            ("[hop]\nrequire_two_hop = 1\n", "hop.require_two_hop"),
            ('[rollback]\ntrusted_signers = "rc"\n', "rollback.trusted_signers"),
            ('[rollback]\nalgorithms = ["rsa"]\n', "rollback.algorithms"),
            ('[rollback]\nhmac_key_env = "NOT-A-NAME"\n', "rollback.hmac_key_env"),
            ('[rollback]\ntrusted_signers = ["a"]\n[rollback.ed25519_keys]\na = 5\n',
             "rollback.ed25519_keys.a"),
            ("[health]\nmin_sample = 5\n", "health.min_sample"),
            ("[gate]\nx = 1\n", "gate"),
            ("conformance = 1\n", "conformance"),
        ],
    )
    def test_malformed_value_names_key(self, text: str, key: str, tmp_path: Path) -> None:
        """A malformed value is one InputError line naming its key."""
        with pytest.raises(InputError) as caught:
            policy_of(text, tmp_path)
        message = str(caught.value)
        assert key in message
        assert "\n" not in message
        assert message.startswith("policy.toml: ")

    def test_invalid_toml(self, tmp_path: Path) -> None:
        """A file that is not TOML is one InputError line."""
        with pytest.raises(InputError, match="not valid TOML"):
            policy_of("[health\n", tmp_path)

    def test_missing_pem_key_file(self, tmp_path: Path) -> None:
        """A public-key path that cannot be read is an InputError naming the key."""
        with pytest.raises(InputError, match=r"rollback\.ed25519_keys\.a: cannot read"):
            policy_of('[rollback]\ntrusted_signers = ["a"]\n[rollback.ed25519_keys]\n'
                      'a = "absent.pem"\n', tmp_path)
