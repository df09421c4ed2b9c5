"""Judging one probed case: from the core's judgement of the real exchange to pass or fail."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from mcp_tap.core.catalog import (
    HEADER_MISMATCH,
    INVALID_REQUEST,
    MISSING_CLIENT_CAPABILITY,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
)
from mcp_tap.core.eras import (
    HEADER_PROTOCOL_VERSION,
    Era,
)
from mcp_tap.core.exchange import Judgement
from mcp_tap.core.findings import Boundary, Finding
from mcp_tap.core.jsonrpc import parse_json
from mcp_tap.probe.answers import (
    answer_summary,
    error_code,
    final_response,
    shown_body,
)
from mcp_tap.probe.client import (
    Answer,
)
from mcp_tap.probe.model import Expect, ProbeCase
from mcp_tap.probe.report import ProbeResult

# JSON-RPC codes that mean "your request was refused before it was routed": a request whose
# headers are correct must never get one of these.
_REQUEST_REJECTIONS: Final = frozenset({
    PARSE_ERROR, INVALID_REQUEST, HEADER_MISMATCH, MISSING_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
})


# Golden error answers whose code the revisions disagree on: the case's code, and the
# others a server may use instead. SEP-2164 standardised resource-not-found as -32602;
# 2025-11-25 only recommended -32002 and its clients accept either.
_ALSO_ACCEPTED: Final[dict[tuple[Era, str, int], frozenset[int]]] = {
    (Era.LEGACY, "resources/read", -32002): frozenset({-32602}),
}


# Owed-answer findings first: for a rejected request they are the headline.
_HEADLINE_RULES: Final = ("response.header-mismatch-unanswered", "response.expected-error",
                          "notification.response")


def _matches(pc: ProbeCase, f: Finding) -> bool:
    if pc.expected_rule is not None and f.rule != pc.expected_rule:
        return False
    return pc.expected_code is None or f.code == pc.expected_code


def _method_of(body: bytes) -> str | None:
    try:
        message = parse_json(body)
    except ValueError:
        return None
    method = message.get("method") if isinstance(message, dict) else None
    return method if isinstance(method, str) else None


def _accepted_codes(pc: ProbeCase) -> frozenset[int]:
    """The error codes that satisfy a golden error case (the case's, plus known equivalents)."""
    if pc.expected_code is None:
        return frozenset()
    key = (pc.era, _method_of(pc.body) or "", pc.expected_code)
    return frozenset({pc.expected_code}) | _ALSO_ACCEPTED.get(key, frozenset())


def _headline(found: Sequence[Finding]) -> Finding:
    """The finding a failed case is reported under: an owed answer first, else the first."""
    for rule in _HEADLINE_RULES:
        for f in found:
            if f.rule == rule:
                return f
    return found[0]


def verdict(pc: ProbeCase, answer: Answer, judgement: Judgement,
             sent: tuple[tuple[str, str], ...]) -> ProbeResult:
    """Decide one probed case from the core's judgement of the real exchange."""
    found = judgement.findings
    request_side = [f for f in found if f.boundary is Boundary.REQUEST]
    response_side = [f for f in found if f.boundary is not Boundary.REQUEST]
    final = final_response(judgement.response_messages)
    seen = answer_summary(answer.status, final)
    notes = "".join(f"; {n}" for n in pc.notes)

    def result(passed: bool, rule: str | None, code: int | None, detail: str) -> ProbeResult:
        """The case's result with the common fields filled in."""
        return ProbeResult(pc.name, pc.era, passed, False, rule, code, answer.status,
                           shown_body(answer.body), detail + notes, found, sent,
                           shown_body(pc.body))

    # 1. Did we send what we meant? Anything else is a flaw of the plan, not of the server.
    intended = next((f for f in request_side if _matches(pc, f)), None)
    if pc.expect is Expect.REJECTED and intended is None:
        want = pc.expected_rule or pc.expected_code
        saw = "; ".join(f"{f.rule}: {f.message}" for f in request_side) or "nothing"
        return result(False, None, None,
                      f"probe plan error: the request did not carry the intended {want} "
                      f"(the ladder saw {saw})")
    if pc.expect is not Expect.REJECTED and request_side:
        first = request_side[0]
        return result(False, first.rule, first.code,
                      f"probe plan error: the golden request was judged faulty: {first.message}")
    # 2. Did the server behave? The judge's response-side findings say.
    if response_side:
        first = _headline(response_side)
        detail = "; ".join(f"{f.rule} ({f.where}): {f.message}" for f in response_side)
        return result(False, first.rule, first.code, detail)
    # 3. Did it give the kind of answer the case describes?
    code = error_code(final)
    has_result = final is not None and "result" in final
    if pc.expect is Expect.RESULT and not has_result:
        return result(False, None, code, f"expected a result, got {seen}")
    if pc.expect is Expect.ERROR and code not in _accepted_codes(pc):
        return result(False, None, code,
                      f"expected JSON-RPC error {pc.expected_code}, got {seen}")
    if pc.expect is Expect.ERROR and code != pc.expected_code:
        return result(True, None, code,
                      f"as expected: {seen} (accepted for {pc.expected_code}: the revisions "
                      "disagree on this code, see SEP-2164)")
    if pc.expect is Expect.ROUTED and (final is None or code in _REQUEST_REJECTIONS):
        return result(False, None, code,
                      f"expected the headers to be accepted (a result or a non-rejection "
                      f"error), got {seen}")
    if pc.expect is Expect.RESULT_OR_MISMATCH and not has_result:
        if code == HEADER_MISMATCH and answer.status == 400:
            return result(True, None, code,
                          f"refused the repeated header lines with {seen} (allowed: RFC 9110 "
                          "section 5.3 forbids a sender to repeat a singleton field)")
        return result(False, None, code,
                      f"expected a result or a 400/-32020 rejection, got {seen}")
    if pc.expect is Expect.REJECTED and intended is not None:
        return result(True, intended.rule, intended.code,
                      f"{intended.rule} sent on purpose; the answer is what it is owed: {seen}")
    if pc.expect is Expect.ACCEPTED:
        return result(True, None, None, f"accepted: HTTP {answer.status}, empty body")
    return result(True, None, code, f"as expected: {seen}")


def skipped_result(pc: ProbeCase, reason: str | None = None) -> ProbeResult:
    """The result of a case not sent, with the reason (the plan's, or ``reason``)."""
    return ProbeResult(pc.name, pc.era, False, True, None, None, None, None,
                       f"skipped: {reason or pc.skip}")


def headerless_case(pc: ProbeCase) -> bool:
    """Whether a modern negative case is about a missing ``MCP-Protocol-Version`` header."""
    return (pc.era is Era.MODERN and pc.expect is Expect.REJECTED
            and pc.expected_rule == "request.header.missing"
            and HEADER_PROTOCOL_VERSION not in pc.headers)
