"""One bundle's scan for the gate: verify it and stream its records into the tallies its
role needs (:func:`scan_bundle`), taking what signed manifests' tallies can stand for
(:mod:`mcp_tap.gate.merging`). :func:`mcp_tap.gate.evaluation.evaluate` merges the
:class:`BundleScan` of every bundle.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from itertools import compress
from operator import attrgetter
from pathlib import Path
from typing import Any, Final

from mcp_tap.errors import BundleFormatError
from mcp_tap.evidence.sealed import SealedConsumer
from mcp_tap.evidence.view import RecordView, evidence_digest, view_of
from mcp_tap.gate.decision import BundleCheck
from mcp_tap.gate.fields import decode_checked
from mcp_tap.gate.health import WindowTally
from mcp_tap.gate.merging import SdkRuns, SealedFeed
from mcp_tap.gate.pods import fleet_of
from mcp_tap.gate.policy import Policy
from mcp_tap.gate.segments import MergedTallies, sealed_sdk
from mcp_tap.gate.tally import ConformanceTally, HopTally, SdkTally


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


__all__ = ["BundleScan", "scan_bundle"]
