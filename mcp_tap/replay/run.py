"""Running a replay: cases in order, recorded legacy sessions mapped onto target sessions."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import httpx

from mcp_tap.core.eras import (
    HEADER_PROTOCOL_VERSION,
    HEADER_SESSION_ID,
    PINNED_LEGACY_VERSION,
)
from mcp_tap.core.headers import HeaderMap
from mcp_tap.errors import UpstreamError
from mcp_tap.probe.client import check_timeout
from mcp_tap.replay.compare import compare, final_response
from mcp_tap.replay.model import (
    Answer,
    Case,
    ReplayOptions,
    as_dict,
)
from mcp_tap.replay.report import CaseResult, ReplayReport, Skipped
from mcp_tap.replay.rewrite import fresh_id, replay_headers
from mcp_tap.replay.select import check_hop, iter_cases, scan
from mcp_tap.replay.target import Target
from mcp_tap.urls import check_http_url, shown_url
from mcp_tap.version import __version__

_ACCEPT: Final = "application/json, text/event-stream"


@dataclass(slots=True)
class _Session:
    """A legacy session on the target: its id, version, and whether it was initialized."""

    id: str
    version: str
    initialized: bool = False


class _Replayer:
    """Replays cases in order, mapping recorded legacy sessions onto target sessions."""

    def __init__(self, target: Target, options: ReplayOptions) -> None:
        self.target = target
        self.options = options
        self.counter = 0
        self.sessions: dict[str, _Session] = {}  # recorded session id -> target session
        self.opened: list[_Session] = []

    def next_id(self, original: Any) -> Any:
        """A fresh JSON-RPC id of the same type as ``original``."""
        self.counter += 1
        return fresh_id(original, self.counter)

    def base_headers(self, version: str | None = None) -> list[tuple[str, str]]:
        """The transport headers of every request (and the legacy version when given)."""
        headers = [("Accept", _ACCEPT), ("Content-Type", "application/json")]
        if version:
            headers.append((HEADER_PROTOCOL_VERSION, version))
        return headers

    def open_session(self, version: str) -> _Session | None:
        """Run ``initialize`` + ``notifications/initialized`` on the target."""
        body = {
            "jsonrpc": "2.0", "id": self.next_id(0), "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {},
                       "clientInfo": {"name": "mcp-tap-replay", "version": __version__}},
        }
        answer = self.target.post([*self.base_headers(), *self.options.headers], body)
        session = self.adopt(answer, version)
        if session is not None:
            self.initialized(session)
        return session

    def adopt(self, answer: Answer, version: str) -> _Session | None:
        """Take the session an ``initialize`` answer opened (``None``: it opened none)."""
        sid = answer.headers.get(HEADER_SESSION_ID)
        if not sid:
            return None
        result = as_dict(as_dict(final_response(answer.messages)).get("result"))
        negotiated = result.get("protocolVersion")
        session = _Session(sid, negotiated if isinstance(negotiated, str) else version)
        self.opened.append(session)
        return session

    def initialized(self, session: _Session) -> None:
        """Send ``notifications/initialized`` once per session."""
        if session.initialized:
            return
        body = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        headers = [*self.base_headers(session.version), (HEADER_SESSION_ID, session.id),
                   *self.options.headers]
        self.target.post(headers, body)
        session.initialized = True

    def session_for(self, case: Case) -> tuple[_Session | None, list[str]]:
        """The target session a legacy case runs in (opened on first use)."""
        if case.era != "legacy" or case.session is None:
            return None, []
        session = self.sessions.get(case.session)
        notes: list[str] = []
        if session is None:
            version = case.headers.get(HEADER_PROTOCOL_VERSION) or PINNED_LEGACY_VERSION
            session = self.open_session(version)
            if session is None:
                notes.append("the target opened no legacy session (no Mcp-Session-Id)")
                return None, notes
            self.sessions[case.session] = session
            notes.append("legacy session opened on the target with a fresh initialize")
        if case.method != "notifications/initialized":
            self.initialized(session)
        return session, notes

    def run(self, case: Case) -> CaseResult:
        """Replay one case and compare its answer with the recorded one."""
        session, notes = self.session_for(case)
        body = case.body
        if isinstance(body, dict) and "id" in body and not case.is_notification:
            body = {**body, "id": self.next_id(body["id"])}
        headers = replay_headers(case.headers)
        if session is not None:
            headers.append((HEADER_SESSION_ID, session.id))
        headers += list(self.options.headers)
        answer = self.target.post(headers, body)
        if case.method == "notifications/initialized" and session is not None:
            session.initialized = True
        if case.method == "initialize":
            proposed = as_dict(as_dict(body).get("params")).get("protocolVersion")
            adopted = self.adopt(
                answer, proposed if isinstance(proposed, str) else PINNED_LEGACY_VERSION)
            if adopted is not None and case.recorded_session:
                self.sessions[case.recorded_session] = adopted
        changes, more = compare(case, HeaderMap(tuple(headers)), body, answer,
                                self.options.ignore,
                                version=session.version if session is not None else None)
        return CaseResult(case.exchange_id, case.method, case.era, case.recorded.status,
                          answer.status, tuple(changes), tuple(notes + more))

    def close_sessions(self) -> None:
        """DELETE every session the replay opened (best effort)."""
        for session in self.opened:
            headers = [(HEADER_SESSION_ID, session.id),
                       (HEADER_PROTOCOL_VERSION, session.version), *self.options.headers]
            try:
                self.target.delete(headers)
            except UpstreamError:
                continue  # closing is a courtesy; the comparison is already complete


RecordSource = Callable[[], Iterable[Mapping[str, Any]]]
"""Reads the records from the start each time it is called (replay reads them twice)."""


def iter_replay(
    source: RecordSource,
    options: ReplayOptions,
    *,
    client: httpx.Client | None = None,
) -> Iterator[CaseResult | Skipped]:
    """Replay the recorded exchanges against ``options.target``, yielding each outcome.

    Results and skips come in evidence order as each exchange is replayed. The records are
    read twice, one at a time, and none is kept (:func:`~mcp_tap.replay.select.scan`, then
    the replay), so memory is flat in the evidence's size; what grows is the map of
    recorded legacy sessions to target sessions and the ids of two-hop pairs' outer
    exchanges. Raises as :func:`replay` does, when the iteration reaches the problem.
    """
    check_http_url(options.target, "--target")
    check_timeout(options.timeout)
    found = scan(source())
    if options.hop is not None:
        check_hop(found, options.hop)
    target = Target(options.target, timeout=options.timeout, client=client)
    replayer = _Replayer(target, options)
    try:
        for item in iter_cases(source(), found.outer, options.hop):
            yield item if isinstance(item, Skipped) else replayer.run(item)
        replayer.close_sessions()
    finally:
        target.close()


def collect(items: Iterable[CaseResult | Skipped], target: str) -> ReplayReport:
    """The report of every outcome in ``items`` (it holds one small entry per exchange)."""
    report = ReplayReport(shown_url(target))
    for item in items:
        if isinstance(item, Skipped):
            report.skipped.append(item)
        else:
            report.results.append(item)
    return report


def replay(
    records: Iterable[Mapping[str, Any]],
    options: ReplayOptions,
    *,
    client: httpx.Client | None = None,
) -> ReplayReport:
    """Replay the recorded exchanges against ``options.target``; compare every answer.

    Raises :class:`InputError` for a malformed target URL, an unusable timeout or a ``hop``
    no exchange was recorded at, and :class:`UpstreamError` when the target cannot be reached
    or stops answering. To read bundles in flat memory, use :func:`iter_replay` with
    :func:`~mcp_tap.replay.select.bundle_records`.
    """
    listed = records if isinstance(records, Sequence) else list(records)
    return collect(iter_replay(lambda: listed, options, client=client), options.target)
