"""The SDK differential over evidence records: exact counts per rule, bounded example
entries, the report (see :mod:`mcp_tap.sdkdiff`)."""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

import msgspec
import orjson
from msgspec import UNSET

from mcp_tap.core.catalog import finding
from mcp_tap.core.findings import Finding
from mcp_tap.core.rulecounts import RuleCount, merge_rule_counts
from mcp_tap.evidence.reader import bundle_path
from mcp_tap.evidence.view import (
    ANSWERS,
    EVENTS,
    INGRESSES,
    ORIGINS,
    Answer,
    Meta,
    Origin,
    Params,
    RecordView,
    Request,
    answer_whole,
    view_of,
)
from mcp_tap.sdkdiff.compare import split_findings
from mcp_tap.sdkdiff.sdk import (
    _PRE_HANDSHAKE_VERSION,
    ERAS,
    TYPED_METHODS,
    SdkParseError,
    sdk_provenance,
    sdk_version,
)
from mcp_tap.sdkversion import DEFAULT_ALLOWLIST

# --- records and the report ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SdkDiffEntry:
    """The SDK differential of one recorded exchange."""

    exchangeId: str  # the evidence record's own key
    method: str
    era: str
    findings: list[Finding]
    error: str | None = None
    version: str = ""
    hop: str = ""
    allowed: list[Finding] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """Return the entry as a plain JSON object."""
        return {
            "exchangeId": self.exchangeId,
            "hop": self.hop,
            "method": self.method,
            "era": self.era,
            "version": self.version,
            "error": self.error,
            "findings": [f.to_json() for f in self.findings],
            "allowed": [f.to_json() for f in self.allowed],
        }


EXAMPLES: Final = 10
"""Entries a report keeps per rule (and of exchanges without a difference), in record order."""

_CLEAN: Final = ""  # the pseudo-rule of an entry without findings, for choosing examples


@dataclass(frozen=True, slots=True)
class SdkDiffReport:
    """The SDK differential over a set of exchange records, in memory bounded by the rules.

    ``compared`` counts exchanges whose result went through the SDK path (an SDK rejection
    included); ``skipped`` counts the other exchange records, with the reasons in
    ``skip_reasons``. The counts are exact: ``differences`` (non-allowlisted findings,
    ``sdk.rejected`` included), ``rejected``, ``allowed`` and, per rule, ``by_rule`` (its
    findings, the exchanges carrying one, its first distinct paths and example exchanges).
    ``entries`` are examples, not every compared exchange: the first :data:`EXAMPLES`
    entries of each rule and the first :data:`EXAMPLES` without a difference, in record
    order; ``entries_omitted`` counts the others.
    """

    compared: int
    skipped: int
    entries: list[SdkDiffEntry]
    allowlist: frozenset[str] = DEFAULT_ALLOWLIST
    skip_reasons: dict[str, int] = field(default_factory=dict)
    sdk: dict[str, Any] = field(default_factory=dict)
    by_rule: dict[str, RuleCount] = field(default_factory=dict)
    differences: int = 0
    rejected: int = 0
    allowed: int = 0
    entries_omitted: int = 0

    @property
    def findings(self) -> list[Finding]:
        """The non-allowlisted findings of the example entries, in record order (the exact
        counts are :attr:`differences` and :attr:`by_rule`)."""
        return [f for entry in self.entries for f in entry.findings]

    @property
    def errors(self) -> list[SdkDiffEntry]:
        """The example entries whose result the SDK client rejected (count: :attr:`rejected`)."""
        return [entry for entry in self.entries if entry.error is not None]

    @property
    def ok(self) -> bool:
        """True when no non-allowlisted difference and no SDK rejection was found."""
        return not self.differences and not self.rejected

    def to_json(self) -> dict[str, Any]:
        """Return the report as a plain JSON object (the ``sdk-diff --json`` output)."""
        return {
            "ok": self.ok,
            "compared": self.compared,
            "skipped": self.skipped,
            "skipReasons": dict(sorted(self.skip_reasons.items())),
            "allowlist": sorted(self.allowlist),
            "sdk": self.sdk,
            "findings": self.differences,
            "rejected": self.rejected,
            "allowed": self.allowed,
            "byRule": {rule: counted.to_json() for rule, counted in sorted(self.by_rule.items())},
            "entries": [entry.to_json() for entry in self.entries],
            "entriesOmitted": self.entries_omitted,
        }


class SdkDiffTally:
    """The SDK differential, one record (or one earlier report) at a time, bounded.

    :meth:`add` runs the differential of one exchange record; :meth:`merge` folds in the
    report of a later part of the stream (another bundle, in order), giving what one pass
    over both parts gives; :meth:`report` is the finished :class:`SdkDiffReport`.
    """

    def __init__(self, allowlist: frozenset[str] = DEFAULT_ALLOWLIST,
                 examples: int = EXAMPLES) -> None:
        """Start empty, judging differences against ``allowlist``."""
        self.allowlist = allowlist
        self.examples = examples
        self.compared = self.differences = self.rejected = self.allowed = 0
        self.reasons: dict[str, int] = {}
        self.entries: list[SdkDiffEntry] = []
        self.kept: dict[str, int] = {}  # entries kept per rule (and _CLEAN)
        self.by_rule: dict[str, RuleCount] = {}

    def add(self, record: Mapping[str, Any]) -> None:
        """Run the differential of one record (anything but an exchange is ignored)."""
        if not isinstance(record, dict) or record.get("kind", "exchange") != "exchange":
            return
        self.add_views((view_of(record),))

    def add_views(self, records: Iterable[RecordView]) -> None:
        """Run the differential of exchange records' views, in order (the caller checked
        their kind)."""
        allowlist, reasons, kept, limit = self.allowlist, self.reasons, self.kept, self.examples
        for record in records:
            outcome = _outcome(record, allowlist)
            if isinstance(outcome, str):
                reasons[outcome] = reasons.get(outcome, 0) + 1
                continue
            self.compared += 1
            _method, _era, _version, reported, allowed, error = outcome
            if allowed:
                self.allowed += len(allowed)
            if not reported:  # the common case: no difference
                if kept.get(_CLEAN, 0) < limit:
                    self._keep(_entry(record, outcome), [])
                continue
            rules: list[str] = []
            self.differences += len(reported)
            self.rejected += error is not None
            exchange_id = _text(record.exchangeId)
            for found in reported:
                counted = self.by_rule.get(found.rule)
                if counted is None:
                    counted = self.by_rule[found.rule] = RuleCount()
                counted.count += 1
                counted.add_where(found.where)
                if found.rule not in rules:
                    rules.append(found.rule)
                    counted.exchanges += 1
                    counted.add_example(exchange_id, limit)
            if self._keeps(rules):
                self._keep(_entry(record, outcome), rules)

    def _keeps(self, rules: list[str]) -> bool:
        """Whether an entry with findings of ``rules`` is kept as an example."""
        kept, limit = self.kept, self.examples
        if not rules:
            return kept.get(_CLEAN, 0) < limit
        return any(kept.get(rule, 0) < limit for rule in rules)

    def _keep(self, entry: SdkDiffEntry, rules: list[str]) -> None:
        kept = self.kept
        self.entries.append(entry)
        for rule in rules or (_CLEAN,):
            kept[rule] = kept.get(rule, 0) + 1

    def _choose(self, entry: SdkDiffEntry, rules: list[str]) -> None:
        """Keep ``entry`` if one of its rules has fewer than ``examples`` entries kept."""
        if self._keeps(rules):
            self._keep(entry, rules)

    def merge(self, report: SdkDiffReport) -> None:
        """Fold in the report of a later part of the stream."""
        self.compared += report.compared
        self.differences += report.differences
        self.rejected += report.rejected
        self.allowed += report.allowed
        for reason, count in report.skip_reasons.items():
            self.reasons[reason] = self.reasons.get(reason, 0) + count
        merge_rule_counts(self.by_rule, report.by_rule, self.examples)
        # The entries a part kept include every one a single pass would keep (a part keeps
        # at least as many per rule), so choosing again among them gives the same examples.
        for entry in report.entries:
            self._choose(entry, list(dict.fromkeys(f.rule for f in entry.findings)))

    def report(self) -> SdkDiffReport:
        """The report of everything added and merged so far."""
        return SdkDiffReport(
            compared=self.compared,
            skipped=sum(self.reasons.values()),
            entries=list(self.entries),
            allowlist=self.allowlist,
            skip_reasons=dict(self.reasons),
            sdk=sdk_provenance(),
            by_rule={rule: replace(c, where=list(c.where), examples=list(c.examples))
                     for rule, c in self.by_rule.items()},
            differences=self.differences,
            rejected=self.rejected,
            allowed=self.allowed,
            entries_omitted=self.compared - len(self.entries),
        )


def _text(value: Any) -> str:
    """``str(record.get(member, ""))`` of a member of a view (UNSET when absent)."""
    return "" if value is UNSET else str(value)


def _response(origin: Origin, rpc_id: Any) -> Answer | None:
    """The JSON-RPC response of an origin view, from its JSON body or its SSE events."""
    body = origin.body
    if isinstance(body, ANSWERS) and (body.result is not UNSET or body.error is not UNSET):
        return body
    events = origin.sse
    if type(events) is list:
        for event in reversed(events):
            data = event.data if isinstance(event, EVENTS) else None
            if (not isinstance(data, ANSWERS)
                    or (data.result is UNSET and data.error is UNSET)):
                continue
            found = None if data.id is UNSET else data.id
            if rpc_id is None or (type(found) is type(rpc_id) and found == rpc_id):
                return data
    return None


def _request_version(record: RecordView) -> str | None:
    """The protocol revision the request named: modern ``_meta`` first, then the header."""
    ingress = record.ingress
    if not isinstance(ingress, INGRESSES):
        return None
    body = ingress.body
    params = body.params if type(body) is Request else None
    meta = params._meta if type(params) is Params else None
    if type(meta) is Meta and isinstance(meta.version, str):
        named: str = meta.version
        return named
    headers = ingress.headers
    if type(headers) is msgspec.Raw:  # the gate's parse of a line leaves them raw
        try:
            headers = _decode_any(bytes(headers))
        except orjson.JSONDecodeError:
            headers = None
    if isinstance(headers, list):
        for pair in headers:
            if (
                isinstance(pair, list | tuple)
                and len(pair) == 2
                and isinstance(pair[0], str)
                and pair[0].lower() == "mcp-protocol-version"
                and isinstance(pair[1], str)
            ):
                return pair[1]
    return None


_decode_any: Final = orjson.loads  # the full parse's reading of the raw headers

_Outcome = tuple[str, str, str, Sequence[Finding], Sequence[Finding], str | None]

_VERSIONS_KEPT: Final = 256
_versions: dict[tuple[str, str | None], str] = {}


def _version(era: str, requested: str | None) -> str:
    """:func:`sdk_version`, remembered (a few eras and revisions, over and over)."""
    key = (era, requested)
    version = _versions.get(key)
    if version is None:
        version = sdk_version(era, requested)
        if len(_versions) < _VERSIONS_KEPT:  # requests name any string: bounded
            _versions[key] = version
    return version


def _outcome(record: RecordView, allowlist: frozenset[str]) -> _Outcome | str:
    """``(method, era, version, reported, allowed, error)`` of one exchange record, or the
    reason it was skipped (``reported`` and ``allowed`` may be shared tuples: copy to keep)."""
    method = record.method
    if method.__class__ is not str or method not in TYPED_METHODS:
        return "method not typed by the SDK"
    era = record.era
    if era.__class__ is not str or era not in ERAS:
        return "era unknown"
    origin = record.origin
    if not isinstance(origin, ORIGINS):
        return "no origin response"
    if origin.truncated and not answer_whole(origin):
        return "origin body truncated"
    body = origin.body
    response: Answer | None
    if isinstance(body, ANSWERS) and (body.result is not UNSET or body.error is not UNSET):
        response = body  # a JSON answer: what _response returns first
    else:
        response = _response(origin, record.rpcId)
    if response is None:
        return "no JSON-RPC response"
    if response.result is UNSET:
        return "error response"
    if method == "initialize":
        version = _PRE_HANDSHAKE_VERSION
    else:
        version = _version(era, _request_version(record))
    error: str | None = None
    reported: Sequence[Finding] = ()
    allowed: Sequence[Finding] = ()
    try:
        reported, allowed = split_findings(method, version, response.result, allowlist)
    except SdkParseError as exc:
        error = str(exc)
    except RecursionError:
        error = "the result is nested too deeply to compare"
    if error is not None:
        reported = [finding("sdk.rejected", error, where="result")]
    return method, era, version, reported, allowed, error


def _entry(record: RecordView, outcome: _Outcome) -> SdkDiffEntry:
    method, era, version, reported, allowed, error = outcome
    return SdkDiffEntry(
        exchangeId=_text(record.exchangeId),
        method=method,
        era=era,
        findings=list(reported),
        error=error,
        version=version,
        hop=_text(record.hop),
        allowed=list(allowed),
    )


def diff_records(
    records: Iterable[Mapping[str, Any]], allowlist: frozenset[str] = DEFAULT_ALLOWLIST
) -> SdkDiffReport:
    """Run the SDK differential over evidence records (non-exchange records are ignored).

    ``records`` is read once, in order, and not held: a stream such as
    :func:`mcp_tap.evidence.iter_records` is enough, and memory is bounded by the rules
    found (see :class:`SdkDiffReport`), not by the records.

    An exchange is compared when its method is in :data:`TYPED_METHODS`, its era is known,
    its origin view is complete and it carries a JSON-RPC ``result``; everything else is
    counted as skipped, by reason. An SDK rejection becomes an entry with ``error`` set.
    """
    tally = SdkDiffTally(allowlist)
    for record in records:
        tally.add(record)
    return tally.report()


def _diff_bundle(args: tuple[Path, frozenset[str], bool]) -> SdkDiffReport:
    from mcp_tap.evidence import iter_records

    path, allowlist, lenient = args
    return diff_records((r for r in iter_records(path, lenient=lenient)
                         if r.get("kind") == "exchange"), allowlist)


def diff_bundles(
    paths: Sequence[Path], allowlist: frozenset[str] = DEFAULT_ALLOWLIST, *,
    jobs: int | None = None, lenient: bool = False,
) -> SdkDiffReport:
    """:func:`diff_records` over every bundle, streamed, one process per bundle in parallel.

    The reports are merged in bundle order, so the result is the one a sequential run over
    the bundles' records gives. ``jobs`` defaults to the usable cores; one bundle (or
    ``jobs=1``) runs here. Raises what :func:`mcp_tap.evidence.iter_records` raises
    (``lenient``: it skips malformed lines instead).
    """
    work = [(bundle_path(p), allowlist, lenient) for p in paths]
    workers = min(len(work), jobs or len(os.sched_getaffinity(0)))
    if workers <= 1:
        reports = [_diff_bundle(item) for item in work]
    else:
        # Forking a process that runs threads can copy a held lock; spawn is safe there.
        method = "fork" if threading.active_count() == 1 else "spawn"
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method)) as pool:
            reports = list(pool.map(_diff_bundle, work))
    tally = SdkDiffTally(allowlist)
    for report in reports:
        tally.merge(report)
    return tally.report()
