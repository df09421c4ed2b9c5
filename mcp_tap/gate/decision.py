"""The gate's pure core: per-source results in, promote / rollback / hold out.

The command does the I/O (verify and read bundles, run the SDK differential, load the
rollback payload) and hands :func:`decide` already-computed :class:`SourceResult` values; the
builders here turn records and reports into those results without reading files or clocks.

Decision table, applied exactly:

* **promote**: every source passes and the rollback target is verified;
* **rollback**: some source fails and the rollback target is verified;
* **hold**: the rollback target is not verified (pause traffic; do not guess).

Evidence that failed verification counts as a failing source like any other: the gate
cannot promote on it, and returning to a verified, attested target is not a guess.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from mcp_tap.core.hashing import digest
from mcp_tap.gate.policy import ConformancePolicy, EvidencePolicy, HopPolicy
from mcp_tap.gate.tally import ConformanceTally, HopTally
from mcp_tap.gate.tally import record_digest as record_digest  # re-exported: moved to tally
from mcp_tap.gate.tally import rule_strength as rule_strength  # re-exported: moved to tally

SOURCES: tuple[str, ...] = ("conformance", "sdk", "hop", "integrity", "health")
"""The sources of every decision; ``drift`` follows them when a baseline was given."""


class Action(StrEnum):
    """What the gate tells the release system to do."""

    PROMOTE = "promote"
    ROLLBACK = "rollback"
    HOLD = "hold"


@dataclass(frozen=True, slots=True)
class Reason:
    """One reason the gate did not promote.

    ``rule`` is a ``gate.*`` catalog id; ``findings`` are the underlying finding rule ids
    (``response.id``, ``hop.body-changed``, ...) where there are any.
    """

    rule: str
    message: str
    findings: tuple[str, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Return the reason as a plain JSON object."""
        return {
            "rule": self.rule,
            "findings": list(self.findings),
            "message": self.message,
            "details": dict(self.details),
        }


@dataclass(frozen=True, slots=True)
class SourceResult:
    """One evidence source's verdict: it passes exactly when it has no reasons."""

    name: str
    reasons: tuple[Reason, ...] = ()
    summary: Mapping[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """Whether this source lets the candidate be promoted."""
        return not self.reasons

    def to_json(self) -> dict[str, Any]:
        """Return the source summary with its verdict."""
        return {"passed": self.passed, **dict(self.summary)}


@dataclass(frozen=True, slots=True)
class RollbackResult:
    """Whether the rollback target is verified: ready exactly when there are no reasons."""

    reasons: tuple[Reason, ...] = ()
    summary: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ready(self) -> bool:
        """Whether the gate may rely on this rollback target."""
        return not self.reasons

    def to_json(self) -> dict[str, Any]:
        """Return the rollback summary with its verdict."""
        return {"ready": self.ready, **dict(self.summary)}


@dataclass(frozen=True, slots=True)
class GateInputs:
    """Everything the decision weighs, already computed."""

    conformance: SourceResult
    sdk: SourceResult
    hop: SourceResult
    integrity: SourceResult
    health: SourceResult
    rollback: RollbackResult
    policy_digest: str = ""
    drift: SourceResult | None = None  # only with a --baseline

    def sources(self) -> tuple[SourceResult, ...]:
        """Return the candidate sources in report order (``drift`` last, when present)."""
        five = (self.conformance, self.sdk, self.hop, self.integrity, self.health)
        return five if self.drift is None else (*five, self.drift)


@dataclass(frozen=True, slots=True)
class Decision:
    """The gate's answer with its reasons, per-source summaries and evidence digest."""

    action: Action
    reasons: tuple[Reason, ...]
    sources: tuple[SourceResult, ...]
    rollback: RollbackResult
    policy_digest: str
    evidence_digest: str
    # How the evidence was read (mcp_tap.gate.merging.Reading): said in the output, not
    # part of the decision evidence (the same evidence gives the same digest either way).
    reading: Any = field(default=None, compare=False)

    def evidence(self) -> dict[str, Any]:
        """Return the redacted decision evidence that :attr:`evidence_digest` covers."""
        return _evidence(self.action, self.reasons, self.sources, self.rollback,
                         self.policy_digest)

    def to_json(self) -> dict[str, Any]:
        """Return the decision as one JSON object (the ``--json`` output)."""
        return {**self.evidence(), "evidenceDigest": self.evidence_digest}


def _evidence(
    action: Action,
    reasons: Sequence[Reason],
    sources: Sequence[SourceResult],
    rollback: RollbackResult,
    policy_digest: str,
) -> dict[str, Any]:
    # Only rule ids, counts, thresholds, measurements and digests reach this object: no
    # bodies, headers, file paths, keys or signatures, so it is safe to store and its digest
    # does not depend on the machine the gate ran on.
    return {
        "action": str(action),
        "reasons": [r.to_json() for r in reasons],
        "sources": {s.name: s.to_json() for s in sources},
        "rollback": rollback.to_json(),
        "policyDigest": policy_digest,
    }


def choose(candidate_passes: bool, rollback_ready: bool) -> Action:
    """Apply the decision table to the two facts it depends on."""
    if not rollback_ready:
        return Action.HOLD
    return Action.PROMOTE if candidate_passes else Action.ROLLBACK


def decide(inputs: GateInputs) -> Decision:
    """Weigh every source and the rollback target and return the decision."""
    sources = inputs.sources()
    action = choose(all(s.passed for s in sources), inputs.rollback.ready)
    reasons = tuple(r for s in sources for r in s.reasons) + inputs.rollback.reasons
    evidence_digest = digest(
        _evidence(action, reasons, sources, inputs.rollback, inputs.policy_digest)
    )
    return Decision(
        action=action,
        reasons=reasons,
        sources=sources,
        rollback=inputs.rollback,
        policy_digest=inputs.policy_digest,
        evidence_digest=evidence_digest,
    )


# --- source builders ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReportCase:
    """One case of a transcript or probe report (``mcp-tap transcripts --json`` shape).

    ``rule`` is the finding rule the case reported, if any; ``evidence_digest`` its evidence.
    """

    name: str
    passed: bool
    rule: str | None = None
    evidence_digest: str = ""


@dataclass(frozen=True, slots=True)
class Report:
    """A transcript or probe report given to the gate; ``digest`` is of the file bytes."""

    digest: str
    cases: tuple[ReportCase, ...]


def conformance_source(
    records: Iterable[Mapping[str, Any]],
    policy: ConformancePolicy,
    reports: Sequence[Report] = (),
) -> SourceResult:
    """Judge the findings of exchange records (and reports); ``hop.*`` findings are excluded.

    One ``gate.conformance`` reason per blocking rule, with its count, boundaries and example
    exchange digests (and, when the evidence holds several hops, the count per hop);
    ``gate.conformance.empty`` when no exchange (or a report without cases) was given.
    """
    return judge_conformance(ConformanceTally(policy.examples).add_all(records), policy, reports)


def judge_conformance(
    counted: ConformanceTally, policy: ConformancePolicy, reports: Sequence[Report] = ()
) -> SourceResult:
    """Judge a finished :class:`ConformanceTally` (and reports) as :func:`conformance_source`."""
    exchanges, tallies, hops = counted.exchanges, counted.rules, counted.hops
    reasons: list[Reason] = []
    if exchanges == 0:
        reasons.append(Reason("gate.conformance.empty", "no exchanges were recorded"))
    blocking = {rule: t for rule, t in sorted(tallies.items())
                if any(policy.blocks(rule, s) for s in t.strengths)}
    for rule_id, tally in blocking.items():
        details: dict[str, Any] = {"count": tally.count, "boundaries": sorted(tally.boundaries),
                                   "examples": tally.examples}
        message = f"{rule_id}: {tally.count} finding(s)"
        if len(hops) > 1:
            # In a two-hop capture one request is recorded at each hop, so a fault the box
            # between passed on is seen twice: the split says where it was seen.
            details["hops"] = dict(sorted(tally.by_hop.items()))
            message += " (" + ", ".join(f"{h or '?'} {n}" for h, n in sorted(
                tally.by_hop.items())) + ")"
        reasons.append(Reason("gate.conformance", message, (rule_id,), details))
    report_summaries: list[dict[str, Any]] = []
    for index, report in enumerate(reports):
        failed = [c for c in report.cases if not c.passed]
        report_summaries.append({"digest": report.digest, "cases": len(report.cases),
                                 "failed": len(failed)})
        if not report.cases:
            reasons.append(Reason("gate.conformance.empty", f"report {index} has no cases",
                                  details={"report": index, "reportDigest": report.digest}))
        for case in failed:
            # A failed case without a rule (a rejection that never came) always blocks.
            if case.rule is not None and not policy.blocks(case.rule,
                                                           str(rule_strength(case.rule))):
                continue
            reasons.append(Reason(
                "gate.conformance",
                f"report {index} case {case.name} failed",
                () if case.rule is None else (case.rule,),
                {"report": index, "reportDigest": report.digest, "case": case.name,
                 "examples": [case.evidence_digest] if case.evidence_digest else []},
            ))
    summary = {
        "exchanges": exchanges,
        "findings": sum(t.count for t in tallies.values()),
        "rules": {rule: t.count for rule, t in sorted(tallies.items())},
        "hops": sorted(hops),
        "allowed": sorted(set(tallies) - set(blocking)),
        "reports": report_summaries,
    }
    return SourceResult("conformance", tuple(reasons), summary)


def hop_source(
    records: Iterable[Mapping[str, Any]], policy: HopPolicy, examples: int = 3
) -> SourceResult:
    """Every ``hop.*`` finding blocks, one ``gate.hop`` reason per (rule, box).

    Hop findings come from hop-comparison records and from exchange records (origin vs
    egress inside one hop). ``gate.hop.empty`` when the policy requires a two-hop capture
    and no hop-comparison record exists.
    """
    return judge_hop(HopTally(examples).add_all(records), policy)


def judge_hop(counted: HopTally, policy: HopPolicy) -> SourceResult:
    """Judge a finished :class:`HopTally` as :func:`hop_source` does."""
    comparisons, tallies, changes = counted.comparisons, counted.boxes, counted.changes
    reasons: list[Reason] = []
    if policy.require_two_hop and comparisons == 0:
        reasons.append(Reason("gate.hop.empty",
                              "the policy requires a two-hop capture and none was recorded"))
    for (rule_id, box), tally in sorted(tallies.items()):
        if not policy.blocks(rule_id):
            continue
        paths = changes.paths_of(box, rule_id)
        reasons.append(Reason(
            "gate.hop",
            f"{rule_id} {box}: {tally.count} finding(s)"
            + (f" at {', '.join(paths[:3])}" + (", ..." if len(paths) > 3 else "")
               if paths else ""),
            (rule_id,),
            {"box": box, "count": tally.count, "examples": tally.examples,
             **({"paths": paths} if paths else {})},
        ))
    for box, cls, count, paths in changes.blocked(policy.block):
        reasons.append(Reason(
            "gate.hop.change",
            f"{cls} {box}: {count} change(s) the policy blocks at {', '.join(paths[:3])}"
            + (", ..." if len(paths) > 3 else ""),
            details={"box": box, "class": cls, "count": count, "paths": paths},
        ))
    summary = {
        "comparisons": comparisons,
        "findings": sum(t.count for t in tallies.values()),
        "boxes": sorted({box for _, box in tallies} | set(changes.boxes)),
    }
    allowed = sorted({r for r, _ in tallies if not policy.blocks(r)})
    if allowed:
        summary["allowed"] = allowed
    if changes.boxes:
        summary["changes"] = changes.to_json()
    return SourceResult("hop", tuple(reasons), summary)


class RuleCounts(Protocol):
    """One rule's counts in an SDK report (:class:`mcp_tap.core.rulecounts.RuleCount`)."""

    @property
    def count(self) -> int: ...

    @property
    def where(self) -> Sequence[str]: ...

    @property
    def more_where(self) -> bool: ...


class SdkReport(Protocol):
    """What the gate needs of the SDK differential's outcome: exact counts per rule."""

    @property
    def compared(self) -> int: ...

    @property
    def rejected(self) -> int: ...

    @property
    def by_rule(self) -> Mapping[str, RuleCounts]: ...


def sdk_source(
    report: SdkReport | None, allow_fields: Iterable[str], unavailable: str = ""
) -> SourceResult:
    """Judge the SDK differential: any remaining difference blocks, nothing compared is empty.

    ``report`` is ``None`` when the differential could not run; ``unavailable`` says why.
    """
    allowlist = sorted(allow_fields)
    if report is None:
        return SourceResult(
            "sdk",
            (Reason("gate.sdk.empty", f"no SDK differential: {unavailable or 'not computed'}"),),
            {"compared": 0, "differences": 0, "allowFields": allowlist},
        )
    reasons: list[Reason] = []
    if report.compared == 0:
        reasons.append(Reason("gate.sdk.empty", "no exchange had a typed result to compare"))
    if report.rejected:
        reasons.append(Reason(
            "gate.sdk",
            f"the SDK client rejected {report.rejected} result(s)",
            details={"rejected": report.rejected},
        ))
    for rule_id, counted in sorted(report.by_rule.items()):
        details: dict[str, Any] = {"count": counted.count, "where": sorted(counted.where)}
        if counted.more_where:
            details["moreWhere"] = True
        reasons.append(Reason(
            "gate.sdk",
            f"{rule_id}: {counted.count} difference(s) the policy does not allow",
            (rule_id,),
            details,
        ))
    summary = {
        "compared": report.compared,
        "differences": sum(counted.count for counted in report.by_rule.values()),
        "rejected": report.rejected,
        "allowFields": allowlist,
    }
    return SourceResult("sdk", tuple(reasons), summary)


@dataclass(frozen=True, slots=True)
class BundleCheck:
    """One bundle's verification outcome, reduced to what the decision needs.

    ``role`` is ``candidate`` or ``baseline``; ``problems`` are ``(kind, severity, message)``;
    ``head`` is the bundle's chain head (the digest of its last record, "" when unknown:
    :attr:`~mcp_tap.evidence.VerifyReport.chain_head`); ``signer`` the hex Ed25519 key whose
    signatures all verified (None: unsigned or forged); ``lost`` the records it states lost
    and ``exchanges`` the exchange records it holds; ``end`` ``"closed"``, ``"abrupt"``,
    ``"open"`` (still being written: judged on what is complete so far) or None (no closing
    summary).
    """

    role: str
    ok: bool
    problems: tuple[tuple[str, str, str], ...] = ()
    records: int = 0
    head: str = ""
    gaps: tuple[tuple[int, str], ...] = ()
    signer: str | None = None
    lost: int = 0
    exchanges: int = 0
    end: str | None = "closed"
    # The pod and release its bundle.json names (a fleet's shipped bundle), else None.
    pod: str | None = None
    release: str | None = None

    def place(self, index: int) -> str:
        """``"bundle I"``, with the pod (and release) it names: ``"bundle I (pod P, release
        R)"``, how a reason about this bundle starts."""
        if self.pod is None:
            return f"bundle {index}"
        release = f", release {self.release}" if self.release is not None else ""
        return f"bundle {index} (pod {self.pod}{release})"

    def where(self, index: int) -> dict[str, Any]:
        """The ``details`` a reason about this bundle carries: its index and role, and the
        pod and release it names (only when it names a pod)."""
        where: dict[str, Any] = {"bundle": index, "role": self.role}
        if self.pod is not None:
            where.update(pod=self.pod, release=self.release)
        return where

    @property
    def lost_records(self) -> int:
        """What the bundle states lost: the verifier's count or the gap records', if larger."""
        return max(self.lost, sum(lost for lost, _ in self.gaps))

    @property
    def loss_ratio(self) -> float:
        """The share of the bundle's exchanges stated lost."""
        lost = self.lost_records
        return lost / (self.exchanges + lost) if lost else 0.0


# Problem kinds that state lost evidence; a policy may allow a bounded share of it.
_LOSS_KINDS = frozenset({"gap", "abrupt"})


def integrity_source(
    bundles: Sequence[BundleCheck], policy: EvidencePolicy | None = None
) -> SourceResult:
    """Verification first: any problem, failed bundle, stated loss above the policy's
    ``max_loss_ratio``, or (when the policy demands it) a bundle not signed by a trusted key
    means incomplete or unproven evidence.
    """
    policy = policy or EvidencePolicy()
    trusted = {key.hex() for key in policy.trusted_keys}
    reasons: list[Reason] = []
    if not bundles:
        reasons.append(Reason("gate.integrity", "no evidence bundle was given"))
    for index, bundle in enumerate(bundles):
        where = bundle.where(index)
        place = bundle.place(index)
        losing = bundle.loss_ratio > policy.max_loss_ratio
        # `ok` is the verifier's verdict; the problems of a bundle it passed are notes. A
        # stated loss within the policy's ratio is not a reason on its own.
        counted = [p for p in bundle.problems if not (p[0] in _LOSS_KINDS and not losing)]
        failing = not bundle.ok and any(severity == "error" for _, severity, _ in counted)
        for kind, severity, message in counted if failing else ():
            reasons.append(Reason(
                "gate.integrity", f"{place}: {kind}: {message}",
                details={**where, "kind": kind, "severity": severity},
            ))
        if not bundle.ok and not bundle.problems:
            reasons.append(Reason("gate.integrity", f"{place} failed verification",
                                  details=where))
        # The verifier reports gap records itself; these are only counted again when it
        # did not, so one lost stretch gives one reason.
        reported_gaps = any(kind == "gap" for kind, _, _ in bundle.problems)
        for lost, why in () if reported_gaps or not losing else bundle.gaps:
            reasons.append(Reason(
                "gate.integrity", f"{place}: {lost} record(s) lost ({why})",
                details={**where, "kind": "gap", "lost": lost},
            ))
        if losing and policy.max_loss_ratio:
            reasons.append(Reason(
                "gate.integrity",
                f"{place}: {bundle.lost_records} record(s) lost, "
                f"{bundle.loss_ratio:.4%} of its exchanges, above evidence.max_loss_ratio "
                f"{policy.max_loss_ratio:g}",
                details={**where, "kind": "loss", "lost": bundle.lost_records},
            ))
        reasons += _signature_reasons(place, bundle, policy, trusted, where)
    summary = {
        "bundles": [
            {"role": b.role, "ok": b.ok, "records": b.records, "head": b.head,
             "problems": len(b.problems), "lost": b.lost_records, "signer": b.signer,
             "end": b.end, **({"pod": b.pod, "release": b.release} if b.pod else {})}
            for b in bundles
        ],
        "maxLossRatio": policy.max_loss_ratio,
        "requireSigned": policy.require_signed,
    }
    return SourceResult("integrity", tuple(reasons), summary)


def _signature_reasons(
    place: str, bundle: BundleCheck, policy: EvidencePolicy, trusted: set[str],
    where: dict[str, Any],
) -> list[Reason]:
    reasons: list[Reason] = []
    if (policy.require_signed or trusted) and bundle.signer is None:
        reasons.append(Reason(
            "gate.integrity", f"{place}: not signed (or a signature does not verify); "
            "the policy requires signed evidence", details={**where, "kind": "signature"}))
    elif trusted and bundle.signer not in trusted:
        reasons.append(Reason(
            "gate.integrity", f"{place}: signed by key {bundle.signer}, which is not "
            "in evidence.trusted_keys", details={**where, "kind": "signature"}))
    if (policy.require_signed or trusted) and bundle.end is None:
        reasons.append(Reason(
            "gate.integrity", f"{place}: no closing summary, so nothing proves the "
            "bundle is complete", details={**where, "kind": "unclosed"}))
    return reasons


def gaps_of(records: Iterable[Mapping[str, Any]]) -> tuple[tuple[int, str], ...]:
    """Return ``(lost, reason)`` for every gap record among ``records``."""
    gaps: list[tuple[int, str]] = []
    for record in records:
        if record.get("kind") != "gap":
            continue
        lost = record.get("lost")
        # A gap whose count is unreadable still lost something; never count it as zero.
        count = lost if type(lost) is int and lost > 0 else 1
        why = record.get("reason")
        gaps.append((count, why if isinstance(why, str) else "unknown"))
    return tuple(gaps)
