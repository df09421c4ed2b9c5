"""The SDK differential over evidence records: one entry per exchange, the report (see
:mod:`mcp_tap.sdkdiff`)."""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp_tap.core.catalog import finding
from mcp_tap.core.findings import Finding
from mcp_tap.evidence import answer_is_whole
from mcp_tap.sdkdiff.compare import (
    _remembered_differences,
    _split,
)
from mcp_tap.sdkdiff.sdk import (
    _PRE_HANDSHAKE_VERSION,
    _PROTOCOL_VERSION_META_KEY,
    DEFAULT_ALLOWLIST,
    ERAS,
    TYPED_METHODS,
    SdkParseError,
    sdk_provenance,
    sdk_version,
)

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


@dataclass(frozen=True, slots=True)
class SdkDiffReport:
    """The SDK differential over a set of exchange records.

    ``compared`` counts exchanges whose result went through the SDK path (one entry each,
    an SDK rejection included); ``skipped`` counts the other exchange records, with the
    reasons in ``skip_reasons``.
    """

    compared: int
    skipped: int
    entries: list[SdkDiffEntry]
    allowlist: frozenset[str] = DEFAULT_ALLOWLIST
    skip_reasons: dict[str, int] = field(default_factory=dict)
    sdk: dict[str, Any] = field(default_factory=dict)

    @property
    def findings(self) -> list[Finding]:
        """Every non-allowlisted finding of every entry, in record order."""
        return [f for entry in self.entries for f in entry.findings]

    @property
    def errors(self) -> list[SdkDiffEntry]:
        """The entries whose result the SDK client rejected."""
        return [entry for entry in self.entries if entry.error is not None]

    @property
    def ok(self) -> bool:
        """True when no non-allowlisted difference and no SDK rejection was found."""
        return not self.findings and not self.errors

    def to_json(self) -> dict[str, Any]:
        """Return the report as a plain JSON object (the ``sdk-diff --json`` output)."""
        return {
            "ok": self.ok,
            "compared": self.compared,
            "skipped": self.skipped,
            "skipReasons": dict(sorted(self.skip_reasons.items())),
            "allowlist": sorted(self.allowlist),
            "sdk": self.sdk,
            "findings": len(self.findings),
            "rejected": len(self.errors),
            "entries": [entry.to_json() for entry in self.entries],
        }


def _response(origin: Mapping[str, Any], rpc_id: Any) -> Any:
    """The JSON-RPC response object of an origin view, from its JSON body or its SSE events."""
    body = origin.get("body")
    if isinstance(body, dict) and ("result" in body or "error" in body):
        return body
    events = origin.get("sse")
    if isinstance(events, list):
        for event in reversed(events):
            data = event.get("data") if isinstance(event, dict) else None
            if not isinstance(data, dict) or ("result" not in data and "error" not in data):
                continue
            found = data.get("id")
            if rpc_id is None or (type(found) is type(rpc_id) and found == rpc_id):
                return data
    return None


def _request_version(record: Mapping[str, Any]) -> str | None:
    """The protocol revision the request named: modern ``_meta`` first, then the header."""
    ingress = record.get("ingress")
    if not isinstance(ingress, dict):
        return None
    body = ingress.get("body")
    params = body.get("params") if isinstance(body, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    if isinstance(meta, dict) and isinstance(meta.get(_PROTOCOL_VERSION_META_KEY), str):
        named: str = meta[_PROTOCOL_VERSION_META_KEY]
        return named
    headers = ingress.get("headers")
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


def _diff_record(record: Mapping[str, Any], allowlist: frozenset[str]) -> SdkDiffEntry | str:
    """Return the entry of one exchange record, or the reason it was skipped."""
    method = record.get("method")
    era = record.get("era")
    origin = record.get("origin")
    if not isinstance(method, str) or method not in TYPED_METHODS:
        return "method not typed by the SDK"
    if not isinstance(era, str) or era not in ERAS:
        return "era unknown"
    if not isinstance(origin, dict):
        return "no origin response"
    if not answer_is_whole(origin):
        return "origin body truncated"
    response = _response(origin, record.get("rpcId"))
    if response is None:
        return "no JSON-RPC response"
    if "result" not in response:
        return "error response"
    if method == "initialize":
        version = _PRE_HANDSHAKE_VERSION
    else:
        version = sdk_version(era, _request_version(record))
    error: str | None = None
    reported: list[Finding] = []
    allowed: list[Finding] = []
    try:
        reported, allowed = _split(
            _remembered_differences(method, version, response["result"]), allowlist)
    except SdkParseError as exc:
        error = str(exc)
    except RecursionError:
        error = "the result is nested too deeply to compare"
    if error is not None:
        reported = [finding("sdk.rejected", error, where="result")]
    return SdkDiffEntry(
        exchangeId=str(record.get("exchangeId", "")),
        method=method,
        era=era,
        findings=reported,
        error=error,
        version=version,
        hop=str(record.get("hop", "")),
        allowed=allowed,
    )


def diff_records(
    records: Iterable[dict[str, Any]], allowlist: frozenset[str] = DEFAULT_ALLOWLIST
) -> SdkDiffReport:
    """Run the SDK differential over evidence records (non-exchange records are ignored).

    ``records`` is read once, in order: a stream such as
    :func:`mcp_tap.evidence.iter_records` is enough.

    An exchange is compared when its method is in :data:`TYPED_METHODS`, its era is known,
    its origin view is complete and it carries a JSON-RPC ``result``; everything else is
    counted as skipped, by reason. An SDK rejection becomes an entry with ``error`` set.
    """
    entries: list[SdkDiffEntry] = []
    reasons: dict[str, int] = {}
    for record in records:
        if not isinstance(record, dict) or record.get("kind", "exchange") != "exchange":
            continue
        outcome = _diff_record(record, allowlist)
        if isinstance(outcome, str):
            reasons[outcome] = reasons.get(outcome, 0) + 1
        else:
            entries.append(outcome)
    return SdkDiffReport(
        compared=len(entries),
        skipped=sum(reasons.values()),
        entries=entries,
        allowlist=allowlist,
        skip_reasons=reasons,
        sdk=sdk_provenance(),
    )


def _diff_bundle(args: tuple[Path, frozenset[str]]) -> SdkDiffReport:
    from mcp_tap.evidence import iter_records

    path, allowlist = args
    return diff_records((r for r in iter_records(path) if r.get("kind") == "exchange"),
                        allowlist)


def diff_bundles(
    paths: Sequence[Path], allowlist: frozenset[str] = DEFAULT_ALLOWLIST, *,
    jobs: int | None = None,
) -> SdkDiffReport:
    """:func:`diff_records` over every bundle, streamed, one process per bundle in parallel.

    The reports are merged in bundle order, so the result is the one a sequential run over
    the bundles' records gives. ``jobs`` defaults to the usable cores; one bundle (or
    ``jobs=1``) runs here. Raises what :func:`mcp_tap.evidence.iter_records` raises.
    """
    work = [(Path(p), allowlist) for p in paths]
    workers = min(len(work), jobs or len(os.sched_getaffinity(0)))
    if workers <= 1:
        reports = [_diff_bundle(item) for item in work]
    else:
        # Forking a process that runs threads can copy a held lock; spawn is safe there.
        method = "fork" if threading.active_count() == 1 else "spawn"
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method)) as pool:
            reports = list(pool.map(_diff_bundle, work))
    reasons: dict[str, int] = {}
    for report in reports:
        for reason, count in report.skip_reasons.items():
            reasons[reason] = reasons.get(reason, 0) + count
    return SdkDiffReport(
        compared=sum(r.compared for r in reports),
        skipped=sum(r.skipped for r in reports),
        entries=[entry for r in reports for entry in r.entries],
        allowlist=allowlist,
        skip_reasons=reasons,
        sdk=sdk_provenance(),
    )
