"""Response rules: envelope, id, exclusivity, error shape and codes, HTTP status, SSE streams.

``check_response`` judges what a server (or an intermediary) answered to one request as
seen at one view (``origin`` or ``egress``). It consumes the request ladder's verdict so the
"a header mismatch must be answered with 400/-32020 and its id" rule is enforced whenever the
ladder saw a mismatch, never as an optional flag.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from mcp_tap.core.catalog import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
    finding,
)
from mcp_tap.core.eras import Era, body_meta
from mcp_tap.core.findings import Finding
from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.jsonrpc import Kind, classify, json_type, parse_json, same_id
from mcp_tap.core.requests import RequestVerdict
from mcp_tap.core.results import check_result
from mcp_tap.core.sse import SSEDecoder, SSEEvent

DEFINED_RESERVED_CODES = frozenset(
    {HEADER_MISMATCH, MISSING_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION}
)
LEGACY_DEFINED_RESERVED_CODES = frozenset({-32042})  # URL elicitation required (2025-11-25)
STATUS_FOR_CODE = {
    HEADER_MISMATCH: 400,
    MISSING_CLIENT_CAPABILITY: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    METHOD_NOT_FOUND: 404,
}
"""The 2026-07-28 HTTP status mapping for JSON-RPC error codes."""

# Request rules whose rejection a server owes the client, with the code it must carry.
_OWED_ERRORS = {
    "request.parse",
    "request.envelope",
    "request.meta.missing",
    "request.version.unsupported",
    "request.method.removed",
    "request.schema",
}


@dataclass(frozen=True, slots=True)
class ResponseContext:
    """What response rules need besides the response: era, advertised capabilities, ..."""

    era: Era
    capabilities: frozenset[str] = frozenset()
    client_extensions: frozenset[str] | None = None
    version: str | None = None


def decode_sse(body: bytes) -> tuple[list[SSEEvent], bool]:
    """Decode a whole SSE body; returns the events and whether a partial event was cut off."""
    decoder = SSEDecoder()
    events = decoder.feed(body)
    events += decoder.close()
    return events, decoder.pending_incomplete


def check_response(
    verdict: RequestVerdict,
    status: int,
    headers: HeaderMap,
    body: bytes,
    ctx: ResponseContext,
    *,
    where: str = "origin",
    sse_events: Sequence[SSEEvent] | None = None,
) -> tuple[list[Finding], list[Any]]:
    """Judge one HTTP answer to the request ``verdict`` describes.

    Returns the findings and the decoded JSON-RPC messages (the JSON body, or each SSE
    event's data). ``sse_events`` may carry events already decoded while streaming.
    """
    if verdict.kind is Kind.NOTIFICATION:
        return _notification(status, body, where), []
    if verdict.kind is Kind.RESPONSE:
        return [], []  # A legacy client's answer to a server request: 202 is all that is owed.
    ctype = headers.content_type()
    if ctype == "text/event-stream":
        if sse_events is None:
            events, _ = decode_sse(body)
        else:
            events = list(sse_events)
        return check_sse_stream(verdict, status, events, ctx, where=where)
    if not body.strip():
        return _unanswered(verdict, status, f"HTTP {status} with an empty body", where), []
    try:
        message = parse_json(body)
    except ValueError:
        problem = [finding("response.parse", f"HTTP {status} {ctype or 'body'} is not JSON", where)]
        return problem + _unanswered(verdict, status, f"HTTP {status} body is not JSON", where), []
    found: list[Finding] = []
    if ctype != "application/json":
        found.append(
            finding(
                "response.content-type",
                f"a JSON-RPC answer with Content-Type {ctype or '(none)'!r}",
                where,
            )
        )
    found += check_message(verdict, message, ctx, status=status, where=where)
    return found, [message]


def check_message(
    verdict: RequestVerdict,
    message: Any,
    ctx: ResponseContext,
    *,
    status: int,
    where: str,
    in_stream: bool = False,
) -> list[Finding]:
    """Judge one JSON-RPC response message to ``verdict``'s request (JSON body or SSE event).

    ``in_stream`` marks a response delivered as an SSE event: its HTTP status was committed
    (200) before the message existed, so the per-code status mapping does not apply to it.
    """
    envelope = ""
    if not isinstance(message, dict):
        envelope = f"a JSON-RPC response must be an object, got {json_type(message)}"
    elif message.get("jsonrpc") != "2.0":
        envelope = f'jsonrpc must be "2.0", got {message.get("jsonrpc")!r}'
    if envelope:
        return [finding("response.envelope", envelope, where), *_owed(verdict, None, status, where)]
    found: list[Finding] = []
    expected_id = verdict.id
    id_ok = expected_id is None or ("id" in message and same_id(message["id"], expected_id))
    if not id_ok:
        got = message.get("id", "<absent>")
        found.append(
            finding(
                "sse.id" if in_stream else "response.id",
                f"response id {got!r} ({json_type(got)}) differs from request id "
                f"{expected_id!r} ({json_type(expected_id)})",
                where,
            )
        )
    has_result, has_error = "result" in message, "error" in message
    if has_result == has_error:
        what = "both result and error" if has_result else "neither result nor error"
        found.append(finding("response.exclusivity", f"response carries {what}", where))
        return found + _owed(verdict, None, status, where, id_ok=id_ok)
    if has_error:
        error = message["error"]
        found += _error(error, None if in_stream else status, verdict, ctx, where)
        code = error.get("code") if isinstance(error, dict) else None
        code = code if isinstance(code, int) and not isinstance(code, bool) else None
        return found + _owed(verdict, code, status, where, id_ok=id_ok)
    if status != 200 and not in_stream:
        # In a stream the status belongs to the stream, judged once by check_sse_stream.
        found.append(
            finding(
                "response.http-status", f"a success result must be HTTP 200, got {status}", where
            )
        )
    found += _owed(verdict, None, status, where, id_ok=id_ok)
    if verdict.rejection is None:
        found += check_result(
            verdict.method,
            message["result"],
            ctx.era,
            capabilities=ctx.capabilities,
            client_extensions=ctx.client_extensions,
            version=ctx.version or verdict.version,
            where=where,
        )
    return found


def _error(
    error: Any,
    status: int | None,
    verdict: RequestVerdict,
    ctx: ResponseContext,
    where: str,
) -> list[Finding]:
    if not isinstance(error, dict):
        return [
            finding(
                "response.error.shape", f"error must be an object, got {json_type(error)}", where
            )
        ]
    code, msg = error.get("code"), error.get("message")
    if not isinstance(code, int) or isinstance(code, bool):
        return [
            finding(
                "response.error.shape",
                f"error.code must be an integer, got {json_type(code)}",
                where,
            )
        ]
    if not isinstance(msg, str):
        return [
            finding(
                "response.error.shape",
                f"error.message must be a string, got {json_type(msg)}",
                where,
            )
        ]
    modern = ctx.era is Era.MODERN
    defined = DEFINED_RESERVED_CODES | (frozenset() if modern else LEGACY_DEFINED_RESERVED_CODES)
    if -32099 <= code <= -32020 and code not in defined:
        return [
            finding(
                "response.error.reserved",
                f"error code {code} is reserved for the specification and undefined",
                where,
            )
        ]
    if modern and code == -32002:
        return [
            finding(
                "response.error.reserved",
                "error code -32002 (old resource-not-found) from a modern server",
                where,
            )
        ]
    if status is None or not modern:
        return []
    want = STATUS_FOR_CODE.get(code)
    rejection = verdict.rejection
    if (
        code == INVALID_PARAMS
        and rejection is not None
        and rejection.rule == "request.meta.missing"
    ):
        want = 400
    if want is not None and status != want:
        return [
            finding(
                "response.http-status",
                f"JSON-RPC error {code} must be HTTP {want}, got {status}",
                where,
            )
        ]
    return []


def _owed(
    verdict: RequestVerdict,
    code: int | None,
    status: int,
    where: str,
    *,
    id_ok: bool = True,
) -> list[Finding]:
    """The answer a rejected request is owed: 400/-32020 for a mismatch, the code otherwise."""
    rejection = verdict.rejection
    if rejection is None:
        return []
    if rejection.code == HEADER_MISMATCH and rejection.rule != "request.legacy-leak":
        if code != HEADER_MISMATCH or status != 400 or not id_ok:
            got = f"HTTP {status}"
            got += f" and JSON-RPC error {code}" if code is not None else " without JSON-RPC error"
            got += "" if id_ok else " under another id"
            return [
                finding(
                    "response.header-mismatch-unanswered",
                    f"{rejection.rule} ({rejection.message}) was answered with {got}",
                    where,
                )
            ]
        return []
    if rejection.rule in _OWED_ERRORS and code != rejection.code:
        got = f"error {code}" if code is not None else "no error"
        return [
            finding(
                "response.expected-error",
                f"{rejection.rule} is owed JSON-RPC error {rejection.code}, got {got}",
                where,
                code=rejection.code,
            )
        ]
    return []


def _unanswered(verdict: RequestVerdict, status: int, what: str, where: str) -> list[Finding]:
    """A request answered without a JSON-RPC body: intermediary-style failure."""
    owed = _owed(verdict, None, status, where)
    if owed:
        return owed
    return [finding("response.envelope", f"a request got no JSON-RPC response ({what})", where)]


def _notification(status: int, body: bytes, where: str) -> list[Finding]:
    if status == 202 and not body:
        return []
    shown = body[:80].decode("utf-8", "replace")
    detail = f"HTTP {status}" + (f" with body {shown!r}" if body else " with an empty body")
    return [
        finding(
            "notification.response",
            f"a notification must get HTTP 202 and an empty body, got {detail}",
            where,
        )
    ]


def check_sse_stream(
    verdict: RequestVerdict,
    status: int,
    events: Iterable[SSEEvent],
    ctx: ResponseContext,
    *,
    where: str = "origin",
) -> tuple[list[Finding], list[Any]]:
    """Judge an SSE answer: valid messages, related notifications first, the response last."""
    found: list[Finding] = []
    messages: list[Any] = []
    if status != 200:
        found.append(
            finding("response.http-status", f"an SSE stream must be HTTP 200, got {status}", where)
        )
    listen = verdict.method == "subscriptions/listen"
    answered = False
    index = -1
    for event in events:
        index += 1
        at = f"{where} sse[{index}]"
        if event.data == "":
            continue  # Priming events (id, empty data) and empty keep-alives carry no message.
        try:
            message = parse_json(event.data)
        except ValueError:
            found.append(finding("sse.event", f"event data is not JSON: {event.data[:60]!r}", at))
            continue
        messages.append(message)
        c = classify(message)
        if answered:
            found.append(finding("sse.event", "an event after the final response", at))
            continue
        if c.kind is Kind.INVALID:
            found.append(finding("sse.event", f"not a JSON-RPC message: {c.problem}", at))
        elif c.kind is Kind.REQUEST:
            if ctx.era is Era.MODERN:
                found.append(
                    finding(
                        "sse.event",
                        f"server request {c.method} on a modern stream "
                        "(2026-07-28 has no server-to-client requests)",
                        at,
                    )
                )
        elif c.kind is Kind.NOTIFICATION:
            found += _related(verdict, message, listen, index, at)
        else:
            answered = True
            found += check_message(verdict, message, ctx, status=status, where=at, in_stream=True)
    if not answered and not listen:
        found.append(
            finding("sse.unterminated", "the stream ended before the final response", where)
        )
        # A stream that never carried the response did not give a rejected request the
        # answer it is owed (400/-32020 for a header mismatch, the ladder's code otherwise).
        found += _owed(verdict, None, status, where)
    return found, messages


def _related(
    verdict: RequestVerdict, message: dict[str, Any], listen: bool, index: int, at: str
) -> list[Finding]:
    """Only notifications related to the request may precede the response."""
    method = message.get("method")
    params = message.get("params")
    params = params if isinstance(params, dict) else {}
    if listen:
        if index == 0 and method != "notifications/subscriptions/acknowledged":
            return [
                finding(
                    "sse.event",
                    "a listen stream must open with notifications/subscriptions/acknowledged",
                    at,
                )
            ]
        return []
    if method == "notifications/progress":
        meta = body_meta(verdict.classified.message) or {}
        token = meta.get("progressToken")
        if token is not None and params.get("progressToken") != token:
            return [
                finding(
                    "sse.event",
                    f"progress for token {params.get('progressToken')!r}, not this "
                    f"request's {token!r}",
                    at,
                )
            ]
    return []
