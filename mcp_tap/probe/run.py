"""Running the probe: per era, learn the inventory, plan the cases, send each and judge it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any, Final

import httpx
import orjson

from mcp_tap.core.eras import (
    HEADER_PROTOCOL_VERSION,
    HEADER_SESSION_ID,
    LEGACY_VERSIONS,
    PINNED_LEGACY_VERSION,
    Era,
)
from mcp_tap.core.exchange import Exchange, Judgement, judge
from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.redaction import Redactor
from mcp_tap.errors import InputError, UpstreamError
from mcp_tap.header_options import check_header
from mcp_tap.probe.answers import (
    answer_messages,
    final_response,
    shown_body,
)
from mcp_tap.probe.client import (
    DEFAULT_TIMEOUT,
    Answer,
    HttpClient,
    check_timeout,
)
from mcp_tap.probe.inventory import (
    Session,
    extensions_of,
    learn_inventory,
    modern_extensions,
)
from mcp_tap.probe.model import Expect, ProbeCase
from mcp_tap.probe.plan import (
    body_bytes,
    is_handshake,
    legacy_extra_cases,
    legacy_headers,
    plan_cases,
)
from mcp_tap.probe.report import ProbeReport, ProbeResult
from mcp_tap.probe.verdict import headerless_case, skipped_result, verdict
from mcp_tap.transcripts import Case, load_corpus
from mcp_tap.urls import check_http_url, shown_url

HEADERLESS_LEGACY_VERSION: Final = "2025-03-26"
"""The revision a server that supports pre-2025-06-18 clients MAY assume for a request that
carries no ``MCP-Protocol-Version`` header (2026-07-28, Streamable HTTP, Protocol Version
Header)."""


def _check_target(target: str) -> str:
    return check_http_url(target, "--target")


class _Run:
    """One probe run: the transport, the redactor for the report, facts learned on the way."""

    def __init__(self, http: HttpClient) -> None:
        self.http = http
        # Operator headers may carry credentials: the report shows what was sent, redacted.
        self.redactor = Redactor()
        self.notes: list[str] = []
        self._headerless_legacy: bool | None = None

    def learned(self, state: Session) -> None:
        """Record what the era's inventory could not list (it explains skips)."""
        self.notes += [f"{state.era} inventory: {p}" for p in state.inventory.problems]

    def headerless_legacy(self) -> bool:
        """Whether the server supports pre-2025-06-18 clients (asked once, when needed).

        Such a server MAY treat a request without ``MCP-Protocol-Version`` as 2025-03-26
        instead of rejecting it with -32020. The evidence: an ``initialize`` offering
        2025-03-26, sent without the header, gets a result agreeing on 2025-03-26.
        """
        if self._headerless_legacy is None:
            body = dict(_DEFAULT_INITIALIZE)
            body["params"] = {**_DEFAULT_INITIALIZE["params"],
                              "protocolVersion": HEADERLESS_LEGACY_VERSION}
            body["id"] = "probe-headerless-initialize"
            try:
                answer = self.http.post(HeaderMap(), orjson.dumps(body))
            except UpstreamError:
                self._headerless_legacy = False
                return False
            final = final_response(answer_messages(answer))
            result = final.get("result") if final else None
            version = result.get("protocolVersion") if isinstance(result, dict) else None
            self._headerless_legacy = version == HEADERLESS_LEGACY_VERSION
            self.close_session(answer.headers.get(HEADER_SESSION_ID), HEADERLESS_LEGACY_VERSION)
        return self._headerless_legacy

    def close_session(self, session_id: str | None, version: str) -> None:
        """DELETE a legacy session the probe opened (best effort, not judged)."""
        if session_id is None:
            return
        headers = HeaderMap(((HEADER_PROTOCOL_VERSION, version),))
        with contextlib.suppress(UpstreamError):
            self.http.send("DELETE", self.http.wire_headers(headers, session=session_id))


def _excused(run: _Run, pc: ProbeCase, outcome: ProbeResult) -> ProbeResult:
    """A failed missing-version-header case, excused when the specification allows the answer."""
    if outcome.passed or not headerless_case(pc) or outcome.http_status is None:
        return outcome
    if not run.headerless_legacy():
        return outcome
    return ProbeResult(
        outcome.name, outcome.era, True, False, pc.expected_rule, pc.expected_code,
        outcome.http_status, outcome.body,
        "allowed: the server supports pre-2025-06-18 clients (initialize offering "
        f"{HEADERLESS_LEGACY_VERSION} without the header succeeded), so it MAY treat a request "
        f"without {HEADER_PROTOCOL_VERSION} as {HEADERLESS_LEGACY_VERSION} instead of "
        f"answering -32020; it answered: {outcome.detail}",
        outcome.findings, outcome.request_headers, outcome.request_body)


def _run_case(run: _Run, pc: ProbeCase, state: Session
              ) -> tuple[ProbeResult, Answer | None, Judgement | None]:
    """Send one planned case and judge the real answer."""
    if pc.skip is not None:
        return skipped_result(pc), None, None
    http = run.http
    wire = http.wire_headers(pc.headers, session=state.session_id)
    sent = tuple(run.redactor.redact_headers(wire.pairs))
    try:
        answer = http.send("POST", wire, pc.body)
    except UpstreamError as exc:
        if not http.reached:
            raise
        return ProbeResult(pc.name, pc.era, False, False, None, None, None, None,
                           f"no answer: {exc}", (), sent, shown_body(pc.body)), None, None
    exchange = Exchange(
        request_headers=wire,
        request_body=pc.body,
        response_status=answer.status,
        response_headers=answer.headers,
        response_body=answer.body,
        era=pc.era,
        capabilities=state.inventory.extensions,
        tool_schemas=state.inventory.tool_schemas,
        legacy_session=pc.era is Era.LEGACY,
        negotiated_version=state.negotiated,
        output_schemas=state.inventory.output_schemas,
    )
    judgement = judge(exchange)
    outcome = _excused(run, pc, verdict(pc, answer, judgement, sent))
    secrets = run.redactor.removed_values(
        (wire.pairs, answer.headers.pairs),
        (judgement.request_message, *judgement.response_messages))
    return _scrubbed(run.redactor, outcome, secrets), answer, judgement


def _scrubbed(redactor: Redactor, r: ProbeResult, secrets: Sequence[str]) -> ProbeResult:
    """``r`` with secrets (operator credentials, cookies the server set) out of its text.

    Finding messages and the detail quote wire values, and the body is shown as received;
    the report is printed and kept by CI, so it gets the evidence's redaction.
    """
    return replace(
        r,
        detail=redactor.scrub(r.detail, secrets),
        body=None if r.body is None else redactor.scrub(r.body, secrets),
        findings=tuple(replace(f, message=redactor.scrub(f.message, secrets))
                       for f in r.findings),
    )


def _run_planned(run: _Run, planned: Iterable[ProbeCase], state: Session
                 ) -> list[ProbeResult]:
    return [_run_case(run, pc, state)[0] for pc in planned]


def _run_modern(run: _Run, cases: Sequence[Case]) -> tuple[list[ProbeResult], list[str]]:
    state = Session(Era.MODERN)
    state.inventory = learn_inventory(run.http, state, modern_extensions(run.http))
    run.learned(state)
    planned, unprobeable = plan_cases(cases, Era.MODERN, state.inventory)
    return _run_planned(run, planned, state), unprobeable


_DEFAULT_INITIALIZE: Final[dict[str, Any]] = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": PINNED_LEGACY_VERSION, "capabilities": {},
               "clientInfo": {"name": "mcp-tap-probe", "version": "1"}},
}


def _handshake_case(cases: Sequence[Case], method: str) -> ProbeCase:
    """The corpus's own handshake message for ``method`` (or a built-in one)."""
    for case in cases:
        if is_handshake(case) and case.request.get("method") == method:
            expect = Expect.ACCEPTED if method.startswith("notifications/") else Expect.RESULT
            return ProbeCase(case.name, Era.LEGACY, legacy_headers(case.headers, None),
                             body_bytes(case.request), expect)
    if method == "initialize":
        return ProbeCase("probe-legacy-initialize", Era.LEGACY, HeaderMap(),
                         orjson.dumps(_DEFAULT_INITIALIZE), Expect.RESULT)
    return ProbeCase("probe-legacy-initialized", Era.LEGACY,
                     HeaderMap(((HEADER_PROTOCOL_VERSION, PINNED_LEGACY_VERSION),)),
                     orjson.dumps({"jsonrpc": "2.0", "method": method}), Expect.ACCEPTED)


def _run_legacy(run: _Run, cases: Sequence[Case]) -> tuple[list[ProbeResult], list[str]]:
    state = Session(Era.LEGACY)
    init_result, answer, judgement = _run_case(run, _handshake_case(cases, "initialize"), state)
    results = [init_result]
    final = final_response(judgement.response_messages) if judgement else None
    result = final.get("result") if final else None
    result = result if isinstance(result, dict) else {}
    version = result.get("protocolVersion")
    failure = None
    if not init_result.passed:
        failure = f"legacy handshake failed: {init_result.detail}"
    elif version not in LEGACY_VERSIONS:
        failure = f"legacy handshake failed: initialize answered protocolVersion {version!r}"
    if failure is None and answer is not None and isinstance(version, str):
        state.session_id = answer.headers.get(HEADER_SESSION_ID)
        state.negotiated = version
        notified = _handshake_case(cases, "notifications/initialized")
        notified = ProbeCase(notified.name, notified.era,
                             legacy_headers(notified.headers, version),
                             notified.body, notified.expect)
        results.append(_run_case(run, notified, state)[0])
        state.inventory = learn_inventory(run.http, state,
                                          extensions_of(result.get("capabilities")))
        run.learned(state)
    planned, unprobeable = plan_cases([*cases, *legacy_extra_cases()], Era.LEGACY,
                                      state.inventory, negotiated=state.negotiated)
    if failure is not None:
        return results + [skipped_result(pc, failure) for pc in planned], unprobeable
    results += _run_planned(run, planned, state)
    run.close_session(state.session_id, state.negotiated or PINNED_LEGACY_VERSION)
    return results, unprobeable


def run_probe(
    target: str,
    *,
    eras: Sequence[Era] = (Era.MODERN, Era.LEGACY),
    headers: Sequence[tuple[str, str]] = (),
    timeout: float = DEFAULT_TIMEOUT,
    cases: Sequence[Case] | None = None,
    transport: httpx.BaseTransport | None = None,
) -> ProbeReport:
    """Probe ``target`` in each of ``eras`` with ``cases`` (default: the shipped corpus).

    ``headers`` are sent on every request (authentication); ``transport`` replaces httpx's
    network transport (tests). Raises :class:`InputError` for a bad target, header, era or
    timeout and :class:`UpstreamError` when the target cannot be reached at all.
    """
    _check_target(target)
    for name, value in headers:
        check_header(name, value, f"header {name}")
    check_timeout(timeout)
    for era in eras:
        if era not in (Era.MODERN, Era.LEGACY):
            raise InputError(f"--era must be modern or legacy, got {era!r}")
    corpus = load_corpus() if cases is None else list(cases)
    results: list[ProbeResult] = []
    unprobeable: list[str] = []
    with HttpClient(target, headers=headers, timeout=timeout, transport=transport) as http:
        run = _Run(http)
        for era in eras:
            runner = _run_modern if era is Era.MODERN else _run_legacy
            era_results, era_unprobeable = runner(run, corpus)
            results += era_results
            unprobeable += era_unprobeable
    return ProbeReport(shown_url(target), tuple(eras), tuple(results), tuple(unprobeable),
                       tuple(run.notes))
