"""The gate as a library: evidence bundles, a policy and rollback evidence in, a Decision out.

:func:`evaluate` takes a frozen :class:`GateRequest` (already-parsed policy, rollback
payload and reports; bundle paths) and returns the :class:`~mcp_tap.gate.decision.Decision`
that ``mcp-tap gate`` prints, the report page shows and the admin listener's ``/gate``
answers. :func:`load_request` reads a request from files, raising
:class:`~mcp_tap.errors.InputError` for bad input.

Each bundle is verified, then its records are read one at a time into streaming tallies
(:mod:`mcp_tap.gate.scan`, :mod:`mcp_tap.gate.tally`,
:class:`~mcp_tap.gate.health.WindowTally`); nothing holds a
bundle's records. With several bundles the per-bundle work runs in parallel processes and
the tallies are merged in bundle order, so the decision is the same as a sequential run.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

import orjson

from mcp_tap.core.hashing import sha256_hex
from mcp_tap.errors import InputError
from mcp_tap.evidence.reader import bundle_path
from mcp_tap.files import read_file
from mcp_tap.gate.decision import (
    Decision,
    GateInputs,
    Report,
    ReportCase,
    RollbackResult,
    SourceResult,
    decide,
    integrity_source,
    judge_conformance,
    judge_hop,
    sdk_source,
)
from mcp_tap.gate.health import HealthWindow, evaluate_health
from mcp_tap.gate.merging import Reading, undecided
from mcp_tap.gate.pods import PlacedCounts, name_pods
from mcp_tap.gate.policy import Policy, load_policy
from mcp_tap.gate.rollback import check_rollback, missing_rollback, resolve_trust
from mcp_tap.gate.scan import BundleScan, scan_bundle
from mcp_tap.gate.segments import MergedTallies
from mcp_tap.sdkversion import DEFAULT_ALLOWLIST


@dataclass(frozen=True, slots=True)
class GateRequest:
    """Everything the gate weighs, with its files already read and checked.

    ``rollback`` is the parsed rollback-evidence JSON (``None``: there is none, the gate
    holds); ``environ`` is where the policy's HMAC key variable is looked up (``None``:
    this process's environment). ``open_bundles`` are bundles (of ``evidence`` or
    ``baseline``) whose writer is still writing them: a running tap's own bundle for its
    live ``/gate``, a fleet's bundles for a gate service. While one has no closing summary
    it is judged on what is complete so far (``open_bundle`` of
    :func:`~mcp_tap.evidence.verify_bundle`): a missing summary, the open segment's missing
    manifest and its unfinished last line are not reasons to roll back.
    """

    evidence: tuple[Path, ...]
    policy: Policy
    rollback: object | None = None
    baseline: tuple[Path, ...] = ()
    reports: tuple[Report, ...] = ()
    environ: Mapping[str, str] | None = field(default=None, compare=False)
    open_bundles: tuple[Path, ...] = ()

    def is_open(self, path: Path) -> bool:
        """Whether ``path`` names one of :attr:`open_bundles` (symlinks and all)."""
        if not self.open_bundles:
            return False
        resolved = path.resolve()
        return any(resolved == p.resolve() for p in self.open_bundles)


def parse_report(raw: bytes, source: str) -> Report:
    """Parse a ``transcripts --json`` / ``probe --json`` report into a :class:`Report`."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"report {source} is not valid JSON: {exc}") from exc
    cases = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(cases, list):
        raise InputError(f"report {source} must be an object with a `cases` array")
    parsed: list[ReportCase] = []
    for index, case in enumerate(cases):
        if (not isinstance(case, dict) or not isinstance(case.get("name"), str)
                or type(case.get("passed")) is not bool):
            raise InputError(f"report {source}: case {index} needs a string `name` and a "
                             "boolean `passed`")
        rule = case.get("rule")
        ev = case.get("evidenceDigest")
        parsed.append(ReportCase(
            name=case["name"],
            passed=case["passed"],
            rule=rule if isinstance(rule, str) else None,
            evidence_digest=ev if isinstance(ev, str) else "",
        ))
    return Report(digest=sha256_hex(raw), cases=tuple(parsed))


def load_rollback(path: Path) -> object:
    """Read the rollback evidence JSON at ``path`` (InputError when unreadable or not JSON)."""
    raw = read_file(path, "rollback evidence")
    try:
        value: object = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"rollback evidence {path} is not valid JSON: {exc}") from exc
    return value


def check_decision_files(policy: Path, rollback: Path | None = None) -> None:
    """Read the policy and the rollback evidence once, as a service that decides on request
    starts (InputError: one line, before it answers anything). Each evaluation reads them
    again, so a renewed attestation counts."""
    load_policy(policy)
    if rollback is not None:
        load_rollback(rollback)


def load_request(
    evidence: Iterable[str | Path],
    policy: Path,
    rollback: Path | None = None,
    *,
    baseline: Iterable[str | Path] = (),
    reports: Iterable[Path] = (),
    environ: Mapping[str, str] | None = None,
    open_bundles: Iterable[str | Path] = (),
) -> GateRequest:
    """Read the policy, rollback evidence and reports and find the bundles (InputError);
    ``open_bundles`` name bundles still being written (see :class:`GateRequest`)."""
    from mcp_tap.evidence import find_all_bundles

    loaded_policy = load_policy(policy)
    parsed = tuple(parse_report(read_file(p, "report"), str(p)) for p in reports)
    payload = None if rollback is None else load_rollback(rollback)
    baselines = list(baseline)
    return GateRequest(
        evidence=tuple(find_all_bundles(evidence)),
        policy=loaded_policy,
        rollback=payload,
        baseline=tuple(find_all_bundles(baselines)) if baselines else (),
        reports=parsed,
        environ=environ,
        open_bundles=tuple(bundle_path(p) for p in open_bundles),
    )


def _scan_all(jobs: Sequence[tuple[Path, str, bool]], policy: Policy, workers: int | None,
              full: bool = False, rerun_sdk: bool = False) -> list[BundleScan]:
    count = min(len(jobs), workers if workers is not None else (os.cpu_count() or 1))
    if count <= 1:
        return [scan_bundle(path, role, policy, live, full, rerun_sdk)
                for path, role, live in jobs]
    # Forking a process that runs threads can copy a held lock; spawn is safe there.
    method = "fork" if threading.active_count() == 1 else "spawn"
    with ProcessPoolExecutor(count, mp_context=multiprocessing.get_context(method)) as pool:
        paths, roles, live = zip(*jobs, strict=True)
        return list(pool.map(scan_bundle, paths, roles, [policy] * len(jobs), live,
                             [full] * len(jobs), [rerun_sdk] * len(jobs)))


def _rollback(request: GateRequest) -> RollbackResult:
    if request.rollback is None:
        return missing_rollback()
    environ = os.environ if request.environ is None else request.environ
    return check_rollback(request.rollback, resolve_trust(request.policy.rollback, environ))


def evaluate(request: GateRequest, *, workers: int | None = None, full: bool = False,
             rerun_sdk: bool = False) -> Decision:
    """Evaluate ``request`` and return the gate's decision.

    ``workers`` bounds the processes that scan bundles in parallel (``None``: one per CPU;
    ``1``: everything in this process). ``full``: read every record; otherwise a signed
    segment's manifest tallies stand for its records (:mod:`mcp_tap.gate.merging`), and
    the decision is the one the full read gives (where a sketched percentile is too near a
    threshold to be sure, every record is read). Of the records read, a signed segment's
    tallies give the SDK differential the recording process found, unless ``rerun_sdk``:
    then the SDK runs on every exchange read. The decision's ``reading`` says which.
    Raises InputError for bad input found in the evidence (an unknown bundle format,
    several hops and no ``health.hop``).
    """
    policy = request.policy
    jobs = [(p, "candidate", request.is_open(p)) for p in request.evidence] + [
        (p, "baseline", request.is_open(p)) for p in request.baseline]
    scans = _scan_all(jobs, policy, workers, full, rerun_sdk)
    names = [path.name for path, _, _ in jobs]
    candidates = [s for s in scans if s.check.role == "candidate"]
    baselines = [s for s in scans if s.check.role == "baseline"]
    reading = Reading(bundles=len(scans), records_read=sum(
        s.records_read if s.merged is not None or s.read_because else s.check.records
        for s in scans))
    for scan in scans:
        for why, n in scan.read_because.items():
            reading.read_because[why] = reading.read_because.get(why, 0) + n
        reading.sdk.add(scan.sdk_runs)
    if not any(s.merged is not None for s in scans):
        tallies = _merge_scans(candidates, policy)
        window = tallies.window.window()
        baseline_window = (_merge_scans(baselines, policy).window.window()
                           if request.baseline else None)
        return _decide(request, scans, names, tallies, window, baseline_window, reading)
    tallies, base = _merge_sealed(candidates, policy), _merge_sealed(baselines, policy)
    window = tallies.health_window()
    baseline_window = base.health_window() if request.baseline else None
    reading.mode = "tallies"
    reading.sealed_segments = sum(s.sealed_segments for s in scans)
    reading.sketched = tallies.sketched()
    why = undecided(window, policy.health, baseline_window, reading.sketched, base.sketched())
    if why:
        decision = evaluate(request, workers=workers, full=True, rerun_sdk=rerun_sdk)
        assert decision.reading is not None
        return replace(decision, reading=replace(
            decision.reading, fallback=f"read every record: {why}"))
    return _decide(request, scans, names, tallies, window, baseline_window, reading)


def _placed(scans: Sequence[BundleScan], names: Sequence[str]) -> list[PlacedCounts]:
    """Each candidate bundle's findings counted by rule and by ``(rule, box)``, with the
    pod it names (:func:`~mcp_tap.gate.pods.name_pods`)."""
    placed = []
    for index, (scan, name) in enumerate(zip(scans, names, strict=True)):
        counted = scan.merged if scan.merged is not None else scan
        if scan.check.role != "candidate" or counted.conformance is None or counted.hop is None:
            continue
        placed.append(PlacedCounts(
            index, scan.check.pod, scan.check.release, name,
            {rule: t.count for rule, t in counted.conformance.rules.items()},
            {key: t.count for key, t in counted.hop.boxes.items()}))
    return placed


def _merge_scans(scans: Sequence[BundleScan], policy: Policy) -> MergedTallies:
    """The gate's own tallies of every scan, merged in order (exact measures kept as the
    window's own)."""
    merged = MergedTallies(policy, True)
    for scan in scans:
        merged.window.merge(scan.window)
        if scan.conformance is not None and scan.hop is not None and scan.sdk is not None:
            merged.conformance.merge(scan.conformance)
            merged.hop.merge(scan.hop)
            merged.sdk.merge(scan.sdk)
    return merged


def _merge_sealed(scans: Sequence[BundleScan], policy: Policy) -> MergedTallies:
    """Every scan's tallies, sealed or read, merged in order."""
    merged = MergedTallies(policy, True)
    for scan in scans:
        if scan.merged is not None:
            merged.merge(scan.merged)
        else:
            merged.add_counted(scan.window, scan.conformance, scan.hop, scan.sdk)
    return merged


def _decide(request: GateRequest, scans: Sequence[BundleScan], names: Sequence[str],
            tallies: MergedTallies, window: HealthWindow, baseline_window: HealthWindow | None,
            reading: Reading) -> Decision:
    policy = request.policy
    sdk = tallies.sdk
    allowlist = _sdk_allowlist(policy)
    placed = _placed(scans, names)
    inputs = GateInputs(
        conformance=name_pods(judge_conformance(tallies.conformance, policy.conformance,
                                                request.reports), placed),
        sdk=(sdk_source(None, allowlist, unavailable=sdk.unavailable) if sdk.unavailable
             else sdk_source(sdk, allowlist)),
        hop=name_pods(judge_hop(tallies.hop, policy.hop), placed),
        integrity=integrity_source([s.check for s in scans], policy.evidence),
        health=evaluate_health(window, policy.health, baseline_window),
        rollback=_rollback(request),
        policy_digest=policy.digest,
        drift=_drift(request),
    )
    return replace(decide(inputs), reading=reading)


def _drift(request: GateRequest) -> SourceResult | None:
    if not request.baseline:
        return None
    from mcp_tap.gate.drift import capture_drift, drift_source

    policy = request.policy
    diff = capture_drift(request.evidence, request.baseline, policy.health.hop)
    return drift_source(diff, policy.drift, len(request.baseline))


def _sdk_allowlist(policy: Policy) -> frozenset[str]:
    return DEFAULT_ALLOWLIST | policy.sdk.allow_fields


def evaluate_files(
    evidence: Iterable[str | Path],
    policy: Path,
    rollback: Path | None = None,
    *,
    baseline: Iterable[str | Path] = (),
    reports: Iterable[Path] = (),
    workers: int | None = None,
    open_bundles: Iterable[str | Path] = (),
) -> Decision:
    """Read a request from files (:func:`load_request`) and :func:`evaluate` it."""
    request = load_request(evidence, policy, rollback, baseline=baseline, reports=reports,
                           open_bundles=open_bundles)
    return evaluate(request, workers=workers)
