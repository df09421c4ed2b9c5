"""The gate as a library: evidence bundles, a policy and rollback evidence in, a Decision out.

:func:`evaluate` takes a frozen :class:`GateRequest` (already-parsed policy, rollback
payload and reports; bundle paths) and returns the :class:`~mcp_tap.gate.decision.Decision`
that ``mcp-tap gate`` prints, the report page shows and the admin listener's ``/gate``
answers. :func:`load_request` reads a request from files, raising
:class:`~mcp_tap.errors.InputError` for bad input.

Each bundle is verified, then its records are read one at a time into streaming tallies
(:mod:`mcp_tap.gate.tally`, :class:`~mcp_tap.gate.health.WindowTally`); nothing holds a
bundle's records. With several bundles the per-bundle work runs in parallel processes and
the tallies are merged in bundle order, so the decision is the same as a sequential run.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from itertools import compress
from operator import attrgetter
from pathlib import Path
from typing import Any, Final

import orjson

from mcp_tap.core.hashing import sha256_hex
from mcp_tap.errors import BundleFormatError, InputError
from mcp_tap.evidence.reader import bundle_path
from mcp_tap.evidence.sealed import SealedConsumer
from mcp_tap.evidence.view import RecordView, evidence_digest, view_of
from mcp_tap.files import read_file
from mcp_tap.gate.decision import (
    BundleCheck,
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
from mcp_tap.gate.fields import decode_checked
from mcp_tap.gate.health import HealthWindow, WindowTally, evaluate_health
from mcp_tap.gate.merging import Reading, SdkRuns, SealedFeed, undecided
from mcp_tap.gate.pods import PlacedCounts, fleet_of, name_pods
from mcp_tap.gate.policy import Policy, load_policy
from mcp_tap.gate.rollback import check_rollback, missing_rollback, resolve_trust
from mcp_tap.gate.segments import MergedTallies, sealed_sdk
from mcp_tap.gate.tally import ConformanceTally, HopTally, SdkTally
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


@dataclass(slots=True)
class BundleScan:
    """One bundle's verification outcome and tallies, ready to merge."""

    check: BundleCheck
    window: WindowTally
    conformance: ConformanceTally | None = None
    hop: HopTally | None = None
    sdk: SdkTally | None = None
    # Read from signed manifests' tallies (mcp_tap.gate.merging): everything merged (the
    # tallies above are then empty), how many segments, why others were read.
    merged: MergedTallies | None = None
    sealed_segments: int = 0
    read_because: dict[str, int] = field(default_factory=dict)
    records_read: int = 0
    sdk_runs: SdkRuns = field(default_factory=SdkRuns)  # of the records read


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


# Problems of a bundle whose records verify still handed on whole: stated losses and how
# the bundle ended, nothing found in a record.
_STATED: Final = frozenset({"gap", "abrupt", "unclosed"})
_BATCH = 256  # records read again after a failed check, fed to the tallies at a time
_kind: Final = attrgetter("kind")
_findings: Final = attrgetter("findings")


class _Feed:
    """One bundle's records, one at a time, into the tallies its role needs."""

    def __init__(self, scan: BundleScan, policy: Policy) -> None:
        self.scan = scan
        self.policy = policy
        self.records = 0
        self.last: RecordView | None = None
        self.gaps: list[tuple[int, str]] = []
        self.sdk: Any = None  # the bundle's SdkDiffTally, made at the first exchange
        self.unreadable = False
        # A candidate feeds every tally; a baseline only the health window.
        self.candidate = scan.conformance is not None and scan.hop is not None
        # Records still to come whose SDK differential a signed manifest gave (take_sdk).
        self.sdk_covered = 0
        self.sdk_runs = SdkRuns()

    def take_sdk(self, _name: str, tallies: Mapping[str, Any] | None) -> bool:
        """verify's sealed consumer for a segment whose records are read: they are handed
        on all the same (False), but when its signed manifest's tallies carry an SDK
        differential this policy can read, that stands for running the SDK on them.

        The recording process ran the same SDK (same provenance) on the same records (the
        manifest's signature covers the tallies with the chain head of those records), as it
        judged their conformance findings, which the gate also reads and does not recompute.
        """
        part = sealed_sdk(tallies, self.policy)
        if isinstance(part, str):
            self.sdk_runs.refused(part)
            return False
        assert tallies is not None and self.scan.sdk is not None  # a candidate's feed
        self.flush_sdk()  # the records read before this segment go first
        self.scan.sdk.merge(part)
        self.sdk_covered = tallies["records"]  # take_sealed checked: the manifest's count
        self.sdk_runs.segments += 1
        return False

    def flush_sdk(self) -> None:
        """Fold the SDK differential of the records read so far into the scan's tally."""
        if self.sdk and self.scan.sdk is not None:
            self.scan.sdk.add_report(self.sdk.report())
        self.sdk = None

    def batch(self, views: list[RecordView]) -> None:
        """Count records' views, in order: verify's consumer (the stored records of a
        current-format bundle, no migration needed: the views the gate's parse decoded, or
        of records parsed fully), or records read again after a failed check.

        Each tally gets only what it counts, all of a batch in one call (the health window
        and the conformance and SDK tallies count exchanges; the hop tally, an exchange's
        findings and hop-comparison records).
        """
        if not views:
            return
        self.records += len(views)
        self.last = views[-1]
        scan = self.scan
        # The batch is sorted out in C (map, compress): the common one is all exchanges.
        kinds = list(map(_kind, views))
        every = kinds.count("exchange") == len(kinds)
        if not every and "gap" in kinds:
            self.gaps.extend(_gap(v) for v in views if v.kind == "gap")
        picked = views if every else list(compress(views, [k == "exchange" for k in kinds]))
        if picked:
            scan.window.add_views(picked)
        if not self.candidate:
            return
        assert scan.conformance is not None and scan.hop is not None
        if picked:
            scan.conformance.add_views(picked)
        scan.hop.add_views(list(compress(views, map(_findings, views))) if every
                           else [v for v in views if v.findings or v.kind != "exchange"])
        covered = self.sdk_covered
        if covered:
            # A batch holds one read of one segment; a verified bundle hands on each of a
            # covered segment's records, so the count ends with the segment.
            self.sdk_covered = max(0, covered - len(views))
            if covered >= len(views):
                return
            picked = [v for v in views[covered:] if v.kind == "exchange"]
        if picked:
            sdk = self.sdk
            if sdk is None:
                sdk = self.sdk = _sdk_tally(scan, self.policy)
            if sdk is not False:
                sdk.add_views(picked)
                self.sdk_runs.exchanges += len(picked)

    def finish(self, report: Any, role: str, ok: bool, problems: tuple[tuple[str, str, str], ...],
               stated: Mapping[str, Any]) -> BundleScan:
        """Fold in the SDK differential and return the scan with its integrity check."""
        self.flush_sdk()
        self.scan.sdk_runs = self.sdk_runs
        last = self.last
        head = report.chain_head or (evidence_digest(last) if last is not None else "")
        self.scan.check = BundleCheck(role=role, ok=ok, problems=problems, records=self.records,
                                      head=head, gaps=tuple(self.gaps), **stated)
        return self.scan


def _gap(view: RecordView) -> tuple[int, str]:
    """``(lost, reason)`` of a gap record, as :func:`~mcp_tap.gate.decision.gaps_of` reads
    it."""
    lost, why = view.lost, view.reason
    # A gap whose count is unreadable still lost something; never count it as zero.
    return (lost if type(lost) is int and lost > 0 else 1,
            why if isinstance(why, str) else "unknown")


def scan_bundle(path: Path, role: str, policy: Policy, open_bundle: bool = False,
                full: bool = False, rerun_sdk: bool = False) -> BundleScan:
    """Verify one bundle and stream its records into the tallies its role needs (see
    :func:`_scan_bundle`), with the cyclic garbage collector paused. ``open_bundle``: its
    writer is still writing it (see :class:`GateRequest`); ``full``: read every record, even
    of segments whose signed manifests carry tallies; ``rerun_sdk``: run the SDK on every
    exchange read, even where a signed manifest's tallies give its outcome.

    Records are acyclic JSON trees, freed by reference counting as soon as the tallies drop
    them; each parsed record is hundreds of containers that would trigger and be walked by
    collections for nothing.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _scan_bundle(path, role, policy, open_bundle, full, rerun_sdk)
    finally:
        if was_enabled:
            gc.enable()


def _scan_bundle(path: Path, role: str, policy: Policy, open_bundle: bool, full: bool = False,
                 rerun_sdk: bool = False) -> BundleScan:
    """Verify one bundle and stream its records into the tallies its role needs.

    A ``candidate`` feeds every source; a ``baseline`` only the health window and the
    integrity check. A bundle of the current format is read once: verify hands each record
    it parsed to the tallies, and (unless ``full``) the tallies of each segment whose signed
    manifest carries them (:mod:`mcp_tap.gate.merging`); of the segments whose records are
    read, the SDK differential their signed tallies carry (:meth:`_Feed.take_sdk`, unless
    ``rerun_sdk``). If it fails verification (or is of
    an older format) its records are read again, leniently, after the check; a bundle that
    cannot be read at all counts no record and says why in its problems.
    """
    from mcp_tap.evidence import iter_records, verify_bundle
    from mcp_tap.evidence.format import FORMAT_VERSION
    from mcp_tap.evidence.reader import read_bundle_meta

    candidate = role == "candidate"
    # An unknown format version raises BundleFormatError here: bad input, exit 2.
    bundle_format, meta = read_bundle_meta(path)
    feed: _Feed | None = None
    sealed: SealedFeed | None = None
    if bundle_format == FORMAT_VERSION:
        feed = _Feed(_empty_scan(role, True, (), policy, candidate, {}), policy)
        sealed = None if full else SealedFeed(policy, candidate, _drain(feed, role, policy))
        take = _sealed_consumer(sealed, None if rerun_sdk or not candidate else feed)
        # Lines are read with the gate's cheaper parse (mcp_tap.gate.fields), after verify's
        # number screen unless the bundle is signed by a key the policy trusts; whether its
        # signer is acceptable is judged later, by the integrity source, exactly as for any
        # other bundle.
        report = verify_bundle(path, consumer=feed.batch, prepare=view_of,
                               fast_keys=policy.evidence.trusted_keys, decode=decode_checked,
                               open_bundle=open_bundle,
                               sealed=take)
    else:
        report = verify_bundle(path, open_bundle=open_bundle)
    problems = tuple((str(p.kind), str(p.severity), str(p.message)) for p in report.problems)
    ok = bool(report.ok)
    # What verification established about the whole bundle (signature, loss, end), carried
    # into the check whether or not its records can be read.
    pod, release = fleet_of(meta)
    stated: dict[str, Any] = {"signer": report.signer, "lost": report.lost,
                              "exchanges": report.exchanges, "end": report.end,
                              "pod": pod, "release": release}
    if feed is not None and (ok or {p[0] for p in problems} <= _STATED):
        # Verified, or only losses the evidence states (or its end): every record was
        # handed on.
        scan = feed.finish(report, role, ok, problems, stated)
        return _sealed_scan(scan, feed, sealed, report) if sealed is not None else scan
    if sealed is not None and sealed.segments:
        # Failed verification: its problems, and the records, as the full read finds them.
        return _scan_bundle(path, role, policy, open_bundle, True, rerun_sdk)
    feed = _Feed(_empty_scan(role, ok, problems, policy, candidate, stated), policy)
    try:
        pending: list[RecordView] = []
        for record in iter_records(path, lenient=not ok):
            pending.append(view_of(record))
            if len(pending) >= _BATCH:
                feed.batch(pending)
                pending = []
        feed.batch(pending)
    except BundleFormatError as exc:
        if ok:
            raise
        # Damaged evidence is a reason not to promote, not a reason to print no decision;
        # what was counted before the damage is dropped, so the bundle counts no record.
        # The decision evidence must not depend on where the bundle sits on this machine.
        problem = ("unreadable", "error", str(exc).replace(str(path), path.name))
        return _empty_scan(role, ok, (*problems, problem), policy, candidate, stated)
    scan = feed.finish(report, role, ok, problems, stated)
    if sealed is not None:  # why segments with tallies were read (their records were)
        scan.read_because = dict(sealed.unusable)
        scan.records_read = feed.records
    return scan


def _sealed_consumer(sealed: SealedFeed | None, feed: _Feed | None) -> SealedConsumer | None:
    """verify's sealed consumer: the sealed segments' tallies (unless a full read), else the
    SDK differential of those read (unless the SDK is to run on every exchange)."""
    if feed is None:
        return sealed.take if sealed is not None else None
    if sealed is None:
        return feed.take_sdk
    take, take_sdk = sealed.take, feed.take_sdk

    def either(name: str, tallies: Mapping[str, Any] | None) -> bool:
        return take(name, tallies) or take_sdk(name, tallies)

    return either


def _drain(feed: _Feed, role: str, policy: Policy) -> Callable[[MergedTallies, list[Any]], None]:
    """What a :class:`SealedFeed` calls before it merges a sealed segment: the records read
    so far (their tallies and gaps) go first, and the feed starts afresh."""
    drained = [0]

    def drain(merged: MergedTallies, gaps: list[Any]) -> None:
        if feed.records == drained[0]:
            return
        drained[0] = feed.records
        feed.flush_sdk()
        scan = feed.scan
        merged.add_counted(scan.window, scan.conformance, scan.hop, scan.sdk)
        gaps.extend(feed.gaps)
        feed.gaps.clear()
        feed.scan = _empty_scan(role, True, (), policy, scan.conformance is not None, {})

    return drain


def _sealed_scan(scan: BundleScan, feed: _Feed, sealed: SealedFeed, report: Any
                 ) -> BundleScan:
    """A verified bundle's scan with what its sealed segments' tallies said merged in."""
    scan.read_because = dict(sealed.unusable)
    scan.records_read = feed.records
    if not sealed.segments:
        return scan
    sealed.drain(sealed.merged, sealed.gaps)
    check = scan.check
    empty = _empty_scan(check.role, True, (), sealed.policy, scan.conformance is not None, {})
    return replace(empty, check=replace(check, records=report.records, gaps=tuple(sealed.gaps)),
                   merged=sealed.merged, sealed_segments=sealed.segments,
                   read_because=scan.read_because, records_read=feed.records,
                   sdk_runs=scan.sdk_runs)


def _empty_scan(
    role: str, ok: bool, problems: tuple[tuple[str, str, str], ...], policy: Policy,
    candidate: bool, stated: Mapping[str, Any],
) -> BundleScan:
    examples = policy.conformance.examples
    return BundleScan(
        check=BundleCheck(role=role, ok=ok, problems=problems, **stated),
        window=WindowTally(policy.health.counting, policy.health.hop),
        conformance=ConformanceTally(examples) if candidate else None,
        hop=HopTally(examples) if candidate else None,
        sdk=SdkTally() if candidate else None,
    )


def _sdk_tally(scan: BundleScan, policy: Policy) -> Any:
    """A streaming SDK differential for one bundle, or False when the SDK cannot be loaded."""
    assert scan.sdk is not None
    try:
        from mcp_tap.sdkdiff import DEFAULT_ALLOWLIST, SdkDiffTally
    except ImportError as exc:
        scan.sdk.unavailable = str(exc)
        return False
    return SdkDiffTally(DEFAULT_ALLOWLIST | policy.sdk.allow_fields)


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
