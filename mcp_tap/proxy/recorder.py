"""Turn a finished exchange into judged, redacted evidence.

The recorder owns the proxy's per-hop knowledge (legacy sessions and their negotiated
version, tools' input schemas, advertised extensions, one era-selection tracker per client)
and feeds it to the core's :func:`judge`. A check that raises never reaches forwarding: it
becomes a ``tap.internal-error`` finding and a counter.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from mcp_tap.core.catalog import finding
from mcp_tap.core.eras import HEADER_SESSION_ID, Era
from mcp_tap.core.exchange import Judgement, judge, make_exchange
from mcp_tap.core.findings import Finding
from mcp_tap.core.hashing import DigestKey
from mcp_tap.core.hops import BOX_HTTP, HopView
from mcp_tap.core.jsonrpc import KIND_NOTIFICATION, KIND_REQUEST, Kind, first_error_code
from mcp_tap.core.redaction import Redactor
from mcp_tap.core.resume import Parked, ResumeTracker, last_event_id, resumable
from mcp_tap.core.selection import ClientTracker
from mcp_tap.evidence import EvidenceWriter
from mcp_tap.logs import LineBatch
from mcp_tap.proxy.capture import RawExchange
from mcp_tap.proxy.captured import Captured, materialize
from mcp_tap.proxy.correlate import Correlator, Pending
from mcp_tap.proxy.hoprecord import (
    ChangeRenderer,
    comparison_record,
    pair_secrets,
    redacted_sides,
)
from mcp_tap.proxy.metrics import ExchangeTally, Metrics
from mcp_tap.proxy.options import TapOptions
from mcp_tap.proxy.records import RecordBuilder, request_parts
from mcp_tap.proxy.splice.answers import tap_error_rule
from mcp_tap.proxy.tracing import tracing_for

log = structlog.get_logger("mcp_tap.proxy")

_MAX_STATE = 10000  # sessions, tools, clients remembered per hop
# Fields of the exchange line this code makes (names of the configuration's hops, eras, rule
# ids, numbers, the tap's phases and exchange ids): nothing from the wire to redact there.
_VOUCHED = frozenset({"hop", "era", "status", "ms", "findings", "hop_findings", "tap_error",
                      "exchange_id"})
_ERA_TEXT = {era: str(era) for era in Era}
_NO_PARTS = (None, None, None)  # request_parts of a judgement without a request
_SESSION_KEY = HEADER_SESSION_ID.lower()  # the header index's keys are lower-case
_TRACEPARENT = "traceparent"


class RecordSink(Protocol):
    """Where records go (the evidence writer)."""

    def submit(self, record: dict[str, Any]) -> bool:
        """Queue one redacted record; False when it was lost (and counted)."""
        ...


class BatchSink:
    """A :class:`RecordSink` that keeps records for one :meth:`EvidenceWriter.submit_many`
    (one disk write) per batch: a read of the hand-off pipe in the recording process, a loop
    iteration inline."""

    def __init__(self, writer: EvidenceWriter) -> None:
        """Records for ``writer``, handed over by :meth:`flush`."""
        self.writer = writer
        self.records: list[dict[str, Any]] = []

    def submit(self, record: dict[str, Any]) -> bool:
        """Keep ``record`` for the batch (the writer counts it if the batch is lost)."""
        self.records.append(record)
        return True

    def flush(self) -> None:
        """Hand the batch's records to the writer in one call."""
        if self.records:
            records, self.records = self.records, []
            # Handed over: the recorder never reads a record again once it is submitted.
            self.writer.submit_many(records, owned=True)


class ExchangeRecorder(Protocol):
    """What the forwarder hands exchanges to: :class:`Recorder` or the recording process."""

    def begin(self, cap: RawExchange) -> None:
        """Called at ingress, before the request is forwarded."""
        ...

    def record(self, cap: RawExchange) -> object:
        """Called once the exchange is over (answered, failed or abandoned)."""
        ...


class _Bounded(OrderedDict[str, Any]):
    """An LRU dict: old entries fall out so hostile traffic cannot grow memory."""

    def remember(self, key: str, value: Any) -> None:
        self[key] = value
        self.move_to_end(key)
        if len(self) > _MAX_STATE:
            self.popitem(last=False)


@dataclass
class _HopState:
    sessions: _Bounded = field(default_factory=_Bounded)  # session id -> negotiated version
    tools: _Bounded = field(default_factory=_Bounded)  # tool name -> inputSchema
    outputs: _Bounded = field(default_factory=_Bounded)  # tool name -> outputSchema
    declared: _Bounded = field(default_factory=_Bounded)  # session id -> client capabilities
    capabilities: set[str] = field(default_factory=set)
    frozen_capabilities: frozenset[str] = frozenset()  # the same, as the judge takes it
    clients: _Bounded = field(default_factory=_Bounded)  # client key -> ClientTracker
    streams: ResumeTracker | None = None  # legacy streams awaiting their resumption


class Recorder:
    """Judges captured exchanges, keeps per-hop state, writes redacted records."""

    def __init__(
        self, options: TapOptions, sink: RecordSink, metrics: Metrics, clock: Callable[[], float]
    ) -> None:
        self.options = options
        self._supported_versions = options.eras.supported_versions
        self.sink = sink
        self.metrics = metrics
        self.clock = clock
        # One key per bundle (this recorder writes one), in memory only, unless the operator
        # gave one: body digests and session pseudonyms are keyed with it.
        self.digest_key = options.digest_key or DigestKey.random()
        self.redactor = Redactor(options.redaction, pseudonym_key=self.digest_key.secret)
        self.records = RecordBuilder(self.redactor, self.digest_key)
        self.tracing = tracing_for(options)
        self._correlating = len(options.hops) >= 2  # (_correlate: nothing for one hop)
        self._hops: dict[str, _HopState] = {h.name: _HopState() for h in options.hops}
        self.lines = LineBatch("mcp_tap.proxy")  # the exchange lines
        self._tallies: list[ExchangeTally] | None = None  # metrics held for a batch
        self.correlator = Correlator(
            options.hop_comparison.thresholds(), window_s=options.hop_comparison.window_s,
            params_window_s=options.hop_comparison.params_window_s, key=self.digest_key,
        )
        self._boxes = {h.name: h.box for h in options.hops}  # hop -> its upstream's kind
        self._changes = ChangeRenderer(self.redactor)

    # -- batches ------------------------------------------------------------------------

    def hold(self) -> None:
        """Keep the exchange lines and metrics of what is recorded until :meth:`release`
        (the recording process: one write of lines and one metrics update per batch)."""
        self.lines.hold()
        if self._tallies is None:
            self._tallies = []

    def release(self) -> None:
        """Count and write what was held since :meth:`hold`, and stop holding."""
        tallies, self._tallies = self._tallies, None
        if tallies:
            self.metrics.add_exchanges(tallies)
        self.lines.release()

    # -- state lookups the forwarder and the judge need -----------------------------------

    def _state(self, hop: str) -> _HopState:
        # Not setdefault(hop, _HopState()): that builds a state (three maps and a set) on
        # every call, to throw it away for every hop but a new one.
        state = self._hops.get(hop)
        if state is None:
            state = self._hops[hop] = _HopState()
        return state

    def begin(self, cap: RawExchange) -> None:
        """Snapshot, at ingress, the per-hop state the judgement depends on (its session).

        A legacy GET stream ends after the DELETE that closes its session; judged only at its
        end it would lose its era.
        """
        session = cap.session
        if session:
            cap.session_version = self.session_version(cap.hop, session)

    def session_version(self, hop: str, session: str) -> str | None:
        """The protocol version a legacy session negotiated on ``hop`` (None when unknown)."""
        version: str | None = self._state(hop).sessions.get(session)
        return version

    def record(self, raw: RawExchange | Captured) -> dict[str, Any]:
        """Judge, redact and submit one exchange; returns the record (for tests and logs)."""
        cap = (
            materialize(raw, self.options.capture.max_sse_events)
            if isinstance(raw, RawExchange)
            else raw
        )
        state = self._hops.get(cap.hop) or self._state(cap.hop)
        parts: tuple[Any, str | None, Any] = _NO_PARTS  # the judged request's kind, method, id
        try:
            if cap.tap_error is not None and cap.tap_error["status"] in (400, 431):
                raise _Unparsed  # nothing was parsed, so nothing is judged
            # The session header, looked up once for the judge, the streams and the learning.
            sessions = cap.request_headers.by_name().get(_SESSION_KEY)
            session = sessions[0] if sessions else None
            judgement = self._judge(cap, state, session)
            found = self._follow(cap, judgement, list(judgement.findings), state, session or "")
            result = None  # _result(judgement.response_messages), its usual case inline
            for m in judgement.response_messages:
                if isinstance(m, dict) and "result" in m and "method" not in m:
                    result = m["result"]
                    if not isinstance(result, dict):
                        result = None
                    break
            # The request's kind, method and id, read once (each is a chain of properties).
            parts = request_parts(judgement)
            kind, method, _ = parts
            self._learn(cap, kind, method, state, result, session, judgement.request_message)
            if kind is KIND_REQUEST or kind is KIND_NOTIFICATION:
                client = self._client(cap, judgement, method, state, result)
                if client:
                    found += client
        except _Unparsed:
            judgement = Judgement(Era.UNKNOWN, None, (), None, ())
            found = []
            parts = _NO_PARTS
        except Exception as exc:  # noqa: BLE001 - a check must never break the proxy
            parts = _NO_PARTS
            self.metrics.check_errors.inc(hop=cap.hop)
            log.warning("check.failed", hop=cap.hop, error=type(exc).__name__)
            judgement = Judgement(Era.UNKNOWN, None, (), None, ())
            found = [
                finding(
                    "tap.internal-error",
                    f"a check raised {type(exc).__name__}; forwarding was not affected",
                    "tap",
                )
            ]
        if cap.client_gone:
            # The tap cut the stream because the client left: the origin did not leave it
            # unterminated, so that is no finding against it.
            found = [f for f in found if f.rule != "sse.unterminated"]
        found += self._tap_findings(cap)
        record = self.records.build(cap, judgement, found, parts)
        ids = self.tracing.export(cap, judgement, record)
        pair = self._compared(cap, judgement, record) if self._correlating else None
        self.sink.submit(record)
        if pair is not None:
            self.sink.submit(pair)
        self._account(cap, judgement, parts[1], found, pair, ids)
        return record

    # -- judging ------------------------------------------------------------------------

    def _judge(self, cap: Captured, state: _HopState, session: str | None) -> Judgement:
        negotiated = cap.session_version or (state.sessions.get(session) if session else None)
        response = cap.response
        request = cap.request
        # Exchange(...) by position, typed (make_exchange), without type.__call__ (per exchange).
        exchange = make_exchange(
            cap.request_headers,  # request_headers
            request.body,  # request_body
            cap.status if cap.tap_error is None else None,  # response_status
            cap.response_headers,  # response_headers
            response.body if response else b"",  # response_body
            cap.http_method,  # http_method
            None,  # era
            state.frozen_capabilities,  # capabilities
            state.tools,  # tool_schemas (read only while judging: no copy)
            negotiated is not None,  # legacy_session
            negotiated,  # negotiated_version
            self._supported_versions,  # supported_versions
            not (request.ended and not request.truncated and not request.decode_failed),
            # response_truncated: the origin's answer was seen too partially for the response
            # rules. A body cut short (the client left, the upstream broke) is not the
            # origin's answer; an SSE stream cut short still has whole events, judged.
            response is None or response.truncated or response.decode_failed
            or bool(cap.sse_dropped) or (not response.ended and not cap.sse),
            [t.event for t in cap.sse] if cap.sse and not cap.sse_incomplete else None,
            None,  # allowed_origins
            state.outputs,  # output_schemas (read only while judging: no copy)
            state.declared.get(session) if session else None,  # session_capabilities
        )
        return judge(exchange)

    def _follow(
        self, cap: Captured, j: Judgement, found: list[Finding], state: _HopState, session: str
    ) -> list[Finding]:
        """Follow resumable legacy streams across connections (see core/resume.py);
        ``found`` is the caller's to give up (returned, extended, when nothing else ends)."""
        if state.streams is None:
            state.streams = ResumeTracker(self.options.upstream.idle_timeout_s)
        tracker, now = state.streams, cap.end_at or self.clock()
        ended = tracker.expire(now) if tracker.parked else []
        if session and (cap.http_method == "DELETE" or cap.status == 404):
            return found + ended + tracker.end_session(session)
        if cap.http_method == "GET":  # only a GET resumes (by its Last-Event-ID)
            cursor = cap.request_headers.get("last-event-id")
            stream = tracker.resume(session, cursor) if cursor else None
            if stream is not None and cap.status is not None:
                events = [t.event for t in cap.sse]
                return found + ended + tracker.judge_resumed(stream, cap.status, events, now)
        if cap.sse:
            cursor = last_event_id(t.event for t in cap.sse)
            if j.request and j.context and cursor and not cap.client_gone and resumable(
                    j.request, found):
                ended += tracker.park(Parked(session, cursor, j.request, j.context, now, "origin"))
                found = [f for f in found if f.rule != "sse.unterminated"]
        if ended:
            found += ended
        return found

    def _learn(
        self,
        cap: Captured,
        kind: Kind | None,
        method: str | None,
        state: _HopState,
        result: dict[str, Any] | None,
        session: str | None,
        request: Any = None,
    ) -> None:
        """Remember sessions (with what an ``initialize`` ``request`` declared), tools and
        advertised extensions from successful answers
        (``kind`` and ``method``: the judged request's, None without one; ``session``: the
        request's session header)."""
        if kind is not KIND_REQUEST:
            if cap.http_method == "DELETE" and session:
                state.sessions.pop(session, None)
                state.declared.pop(session, None)
            return
        if result is None:
            return
        if method == "initialize":
            session = cap.response_headers.get(HEADER_SESSION_ID)
            version = result.get("protocolVersion")
            if session and isinstance(version, str):
                state.sessions.remember(session, version)
                params = request.get("params") if isinstance(request, dict) else None
                caps = params.get("capabilities") if isinstance(params, dict) else None
                if isinstance(caps, dict):
                    state.declared.remember(session, caps)
        if method in ("initialize", "server/discover"):
            caps = result.get("capabilities")
            ext = caps.get("extensions") if isinstance(caps, dict) else None
            if isinstance(ext, dict):
                state.capabilities.update(k for k in ext if isinstance(k, str))
                state.frozen_capabilities = frozenset(state.capabilities)
        if method == "tools/list" and isinstance(result.get("tools"), list):
            # remember() inlined: a tools/list answer names every tool again each time.
            tools = state.tools
            to_end = tools.move_to_end
            for tool in result["tools"]:
                # (the exact types first: a JSON parse makes no subclasses)
                if type(tool) is dict or isinstance(tool, dict):
                    name = tool.get("name")
                    if type(name) is str or isinstance(name, str):
                        tools[name] = tool.get("inputSchema")
                        to_end(name)
                        if "outputSchema" in tool:
                            state.outputs.remember(name, tool["outputSchema"])
                        elif name in state.outputs:
                            del state.outputs[name]  # the tool no longer declares one
            while len(tools) > _MAX_STATE:
                tools.popitem(last=False)

    def _client(
        self,
        cap: Captured,
        j: Judgement,
        method: str | None,
        state: _HopState,
        result: dict[str, Any] | None,
    ) -> list[Finding]:
        """The client's era choices (a request's or notification's exchange)."""
        key = f"{cap.client}|{cap.user_agent}"
        tracker = state.clients.get(key)
        if tracker is None:
            tracker = ClientTracker(legacy_allowed=self.options.eras.legacy_allowed)
            state.clients.remember(key, tracker)
        messages = j.response_messages
        return tracker.see(method, j.era, first_error_code(messages) if messages else None, result)

    def _tap_findings(self, cap: Captured) -> list[Finding]:
        found: list[Finding] = []
        if cap.tap_error is not None:
            reason = self.redactor.redact_reason(str(cap.tap_error["reason"]))
        if cap.tap_error is not None:
            phase = cap.tap_error["phase"]
            rule = tap_error_rule(cap.tap_error["status"], phase)
            found.append(finding(rule, f"{phase}: {reason}", "tap"))
        for name, capture in (("ingress", cap.request), ("origin", cap.response)):
            if capture is not None and capture.truncated:
                found.append(
                    finding(
                        "tap.capture-truncated",
                        f"{name} body of {capture.size} bytes exceeds the "
                        f"{capture.cap}-byte capture cap",
                        name,
                    )
                )
        if cap.sse_dropped:
            found.append(
                finding(
                    "tap.capture-truncated",
                    f"{cap.sse_dropped} SSE events past the capture cap were not kept",
                    "origin",
                )
            )
        return found

    def _compared(
        self, cap: Captured, j: Judgement, record: dict[str, Any]
    ) -> dict[str, Any] | None:
        """:meth:`_correlate`, whose failure never reaches forwarding or the exchange's own
        record: it is counted and logged (the pair is lost)."""
        try:
            return self._correlate(cap, j, record)
        except Exception as exc:  # noqa: BLE001 - a check must never break the proxy
            self.metrics.check_errors.inc(hop=cap.hop)
            log.warning("hop-comparison.failed", hop=cap.hop, error=type(exc).__name__)
            return None

    def _correlate(
        self, cap: Captured, j: Judgement, record: dict[str, Any]
    ) -> dict[str, Any] | None:
        """Offer this exchange to the correlator; the hop-comparison record of the pair it
        completes, if it does (POSTs of two hops or more only)."""
        if len(self.options.hops) < 2 or not cap.trace_id or cap.http_method != "POST":
            return None
        view = HopView(
            hop=cap.hop,
            request_headers=cap.request_headers,
            request_message=j.request_message,
            status=cap.status,
            response_messages=j.response_messages,
            sse_times=tuple(t.at for t in cap.sse),
            first_byte_at=cap.first_byte_at,
            forwarded_headers=cap.forwarded_headers,
            response_headers=cap.response_headers,
        )
        pending = Pending(
            record["exchangeId"], view, cap.received_at, cap.upstream,
            self._boxes.get(cap.hop, BOX_HTTP), cap.trace_id,
            _TRACEPARENT not in cap.request_headers, cap.end_at, redacted_sides(record))
        pair = self.correlator.offer(pending, self.clock())
        if pair is None:
            return None
        found = pair.comparison.findings
        findings = (self.records.findings_json(found, pair_secrets(self.redactor, pair))
                    if found else [])
        trace = pair.outer.trace_id if pair.outer is not None else cap.trace_id
        return comparison_record(pair, trace, self._changes, findings)

    def _account(
        self,
        cap: Captured,
        j: Judgement,
        method: str | None,
        found: list[Finding],
        pair: dict[str, Any] | None,
        ids: dict[str, str],
    ) -> None:
        at = cap.received_at
        end, tap_error = cap.end_at, cap.tap_error  # (each read twice)
        rules = [f.rule for f in found] if found else []
        hop_rules = [f["rule"] for f in pair["findings"]] if pair is not None else []
        era = _ERA_TEXT.get(j.era) or str(j.era)  # str() of a StrEnum member, looked up
        tally = ExchangeTally(
            cap.hop,
            era,
            rules + hop_rules if hop_rules else rules,
            None if tap_error is None else str(tap_error["phase"]),
            None if end is None else end - at,
            None if cap.first_byte_at is None else cap.first_byte_at - at,
            cap.sse[0].at - at if cap.sse else None,
            None if cap.forwarded_at is None else cap.forwarded_at - at,
        )
        if self._tallies is not None:
            self._tallies.append(tally)
        else:
            self.metrics.add_exchanges((tally,))
        self.lines.info("exchange", {
            "hop": cap.hop,
            "era": era,
            "method": method,
            "http_method": cap.http_method,
            "status": cap.egress_status,
            "ms": round(((cap.egress_end_at or end or at) - at) * 1000, 3),
            "findings": sorted(set(rules)) if rules else [],
            "hop_findings": sorted(set(hop_rules)) if hop_rules else [],
            "tap_error": tap_error["phase"] if tap_error else None,
        }, ids, _VOUCHED)


class _Unparsed(Exception):
    """The request never parsed (the tap answered 400/431): there is nothing to judge."""
