"""The probe plan: which corpus cases are probeable, what each needs to pass, and each
case adapted to the live server (see :mod:`mcp_tap.probe.adapt`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from mcp_tap.core.catalog import (
    CATALOG,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
)
from mcp_tap.core.eras import (
    HEADER_PROTOCOL_VERSION,
    HEADER_SESSION_ID,
    LEGACY_VERSIONS,
    PINNED_LEGACY_VERSION,
    Era,
)
from mcp_tap.core.findings import Boundary
from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.jsonrpc import Kind, classify
from mcp_tap.core.transport import jsonrpc_shaped
from mcp_tap.probe.adapt import ADAPTERS, Draft
from mcp_tap.probe.answers import (
    error_code,
    final_response,
)
from mcp_tap.probe.inventory import (
    Inventory,
)
from mcp_tap.probe.model import Expect, ProbeCase
from mcp_tap.transcripts import Case


def is_probeable(case: Case) -> bool:
    """Whether a case's point is its request (golden, or a negative with a request rule).

    A case that describes an answer no request can provoke is not: a GET, DELETE or OPTIONS
    exchange, a plain HTTP error (401, 429, 5xx...), an ``Origin`` refusal, a client's
    JSON-RPC response, or one the corpus marks ``"probe": false``.
    """
    if not case.probe or case.http_method != "POST" or "origin" in case.headers:
        return False
    if classify(case.request).kind is Kind.RESPONSE:
        return False
    status = case.response_status
    body = b"" if case.response_body is None else body_bytes(case.response_body)
    if status is not None and status >= 400 and not jsonrpc_shaped(body):
        return False
    if case.golden:
        return True
    rule = CATALOG.get(case.expected_rule) if case.expected_rule else None
    return rule is not None and rule.boundary is Boundary.REQUEST


def body_bytes(value: Any) -> bytes:
    """A corpus request as the bytes to send."""
    # A string request is raw bytes on purpose (the not-JSON negative case).
    return value.encode("utf-8") if isinstance(value, str) else orjson.dumps(value)


def _expectation(case: Case) -> tuple[Expect, int | None]:
    """What a probed case needs, read from the corpus: its rejection, or its answer's kind."""
    if not case.golden:
        return Expect.REJECTED, case.expected_code
    if classify(case.request).kind is Kind.NOTIFICATION:
        return Expect.ACCEPTED, None
    body = case.response_body
    if isinstance(body, dict) and isinstance(body.get("sse"), list):
        final = final_response(body["sse"])
    else:
        final = body if isinstance(body, dict) else None
    if final is not None and "error" in final:
        return Expect.ERROR, error_code(final)
    names = [name.lower() for name, _ in case.headers]
    if len(names) != len(set(names)):
        return Expect.RESULT_OR_MISMATCH, None
    return Expect.RESULT, None


def _unsendable(headers: HeaderMap) -> str | None:
    """Why a header cannot cross HTTP/1.1 as written (its edges are stripped or refused)."""
    for name, value in headers:
        if value != value.strip(" \t"):
            return (f"{name}: {value!r} has raw surrounding whitespace, which HTTP/1.1 strips "
                    "before any server sees it; only an in-process judge can test it")
        if any(ch in value for ch in "\r\n\0"):
            return f"{name}: {value!r} contains a line break or NUL, which HTTP/1.1 refuses"
    return None


def legacy_headers(headers: HeaderMap, negotiated: str | None) -> HeaderMap:
    """Drop the corpus's session id (the real one is added when sending) and pin the version."""
    pairs: list[tuple[str, str]] = []
    for name, value in headers:
        low = name.lower()
        if low == HEADER_SESSION_ID.lower():
            continue
        if low == HEADER_PROTOCOL_VERSION.lower() and negotiated and value in LEGACY_VERSIONS:
            value = negotiated
        pairs.append((name, value))
    return HeaderMap(tuple(pairs))


def _plan_one(case: Case, inv: Inventory, negotiated: str | None) -> ProbeCase:
    expect, code = _expectation(case)
    headers = case.headers
    if case.era is Era.LEGACY:
        headers = legacy_headers(headers, negotiated)
    message = case.request
    unsendable = _unsendable(case.headers)
    method = message.get("method") if isinstance(message, dict) else None
    adapter = ADAPTERS.get(method) if isinstance(method, str) else None
    if unsendable or adapter is None or not isinstance(message, dict):
        skip = f"cannot be sent: {unsendable}" if unsendable else None
        return ProbeCase(case.name, case.era, headers, body_bytes(message), expect,
                         case.expected_rule, code, (), skip)
    # Work on a copy: the corpus case stays as shipped.
    draft = Draft(case, headers, orjson.loads(orjson.dumps(message)), expect, code)
    adapter(draft, inv)
    return ProbeCase(case.name, case.era, draft.headers, orjson.dumps(draft.message),
                     draft.expect, case.expected_rule, code, tuple(draft.notes), draft.skip)


def is_handshake(case: Case) -> bool:
    """Whether a case is the legacy handshake (golden ``initialize`` or ``initialized``)."""
    method = case.request.get("method") if isinstance(case.request, dict) else None
    return case.era is Era.LEGACY and case.golden and method in (
        "initialize", "notifications/initialized")


def plan_cases(
    cases: Sequence[Case],
    era: Era,
    inventory: Inventory,
    *,
    negotiated: str | None = None,
) -> tuple[list[ProbeCase], list[str]]:
    """The probe plan for ``era``: its probeable cases adapted to ``inventory``.

    Returns the planned cases (skipped ones included, with their reason) and the names of
    the era's cases that are not probeable (response-side negatives). Legacy handshake cases
    (golden ``initialize`` / ``notifications/initialized``) are not planned here: the
    handshake itself sends them.
    """
    planned: list[ProbeCase] = []
    unprobeable: list[str] = []
    for case in cases:
        if case.era is not era or is_handshake(case):
            continue
        if not is_probeable(case):
            unprobeable.append(case.name)
            continue
        planned.append(_plan_one(case, inventory, negotiated))
    return planned, unprobeable


def legacy_extra_cases() -> list[Case]:
    """Legacy cases the corpus lacks, sent in the live session after the corpus's own.

    An unknown method must get -32601; a ``jsonrpc: "1.0"`` envelope is not a JSON-RPC 2.0
    request and must get -32600 (Invalid Request), as in the modern era.
    """
    return [
        Case(
            name="probe-legacy-method-not-found",
            era=Era.LEGACY,
            headers=HeaderMap(((HEADER_PROTOCOL_VERSION, PINNED_LEGACY_VERSION),)),
            request={"jsonrpc": "2.0", "id": 1, "method": "tools/frobnicate"},
            response_status=None,
            response_headers=HeaderMap(),
            response_body={"jsonrpc": "2.0", "id": 1,
                           "error": {"code": METHOD_NOT_FOUND, "message": "Method not found"}},
            expected_code=None,
            expected_rule=None,
            source="mcp_tap.probe",
        ),
        Case(
            name="probe-legacy-jsonrpc-version",
            era=Era.LEGACY,
            headers=HeaderMap(((HEADER_PROTOCOL_VERSION, PINNED_LEGACY_VERSION),)),
            request={"jsonrpc": "1.0", "id": 1, "method": "tools/list"},
            response_status=None,
            response_headers=HeaderMap(),
            response_body=None,
            expected_code=INVALID_REQUEST,
            expected_rule="request.envelope",
            source="mcp_tap.probe",
        ),
    ]
