"""Rules on a whole HTTP answer to one request: JSON body or SSE stream, content type,
status, empty and non-JSON bodies, plain HTTP errors, batches, notifications' 202.

``check_response`` judges what a server (or an intermediary) answered to one request as
seen at one view (``origin`` or ``egress``). It consumes the request ladder's verdict so the
"a header mismatch must be answered with 400/-32020 and its id" rule is enforced whenever the
ladder saw a mismatch, never as an optional flag. Each response message is judged by
:mod:`mcp_tap.core.response_message`, an SSE stream by :mod:`mcp_tap.core.response_stream`;
their public names are importable from here too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from mcp_tap.core.catalog import finding
from mcp_tap.core.eras import ERA_LEGACY
from mcp_tap.core.findings import Finding
from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.jsonrpc import KIND_NOTIFICATION, KIND_RESPONSE, parse_json
from mcp_tap.core.requests import RequestVerdict
from mcp_tap.core.response_message import (
    DEFINED_RESERVED_CODES,
    STATUS_FOR_CODE,
    ResponseContext,
    check_message,
    id_key,
    owed_answer,
)
from mcp_tap.core.response_stream import check_sse_stream
from mcp_tap.core.sse import SSEDecoder, SSEEvent
from mcp_tap.core.transport import (
    PRE_BODY_STATUSES,
    challenge,
    http_only,
    legacy_version_answer,
    session_id_problem,
)

__all__ = [
    "DEFINED_RESERVED_CODES",
    "STATUS_FOR_CODE",
    "ResponseContext",
    "check_message",
    "check_response",
    "check_sse_stream",
    "decode_sse",
]


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
    kind = verdict.classified.kind  # verdict.kind, without the property call
    invalid_version = (
        next((f for f in verdict.findings if f.rule == "request.version.invalid"), None)
        if verdict.findings
        else None
    )
    if invalid_version is not None:
        # Any request, notification or client response with it is owed 400 first.
        return legacy_version_answer(invalid_version, status, where), []
    if kind is KIND_NOTIFICATION or (kind is KIND_RESPONSE and verdict.era is ERA_LEGACY):
        # A legacy client's answer to a server request is owed what a notification is.
        return _notification(status, body, where), []
    if kind is KIND_RESPONSE:
        return [], []  # request.envelope already: the modern spec names no answer to it.
    ctype = headers.content_type()
    found: list[Finding] = []
    if verdict.era is ERA_LEGACY and verdict.method == "initialize":
        found += session_id_problem(headers, where)
    if status == 401:
        found += challenge(status, headers, where)  # whatever its body
    if status >= 400 and http_only(status, body) and ctype != "text/event-stream":
        # A plain HTTP error (auth, rate limit, server error) is judged by its own rules,
        # never as malformed JSON-RPC; a rejection the server owed an answer to is still owed
        # one unless it was refused before its body was read.
        # A legacy 404 is the unknown session's answer, given before the body is read.
        if status not in PRE_BODY_STATUSES and not (status == 404 and verdict.era is ERA_LEGACY):
            found += owed_answer(verdict, None, status, where)
            if verdict.batch:
                found += _batch_refused(verdict, f"HTTP {status} without a JSON-RPC body", where)
        return found, []
    if ctype == "text/event-stream":
        # Events decoded while streaming are read once, in order: no copy needed.
        events = decode_sse(body)[0] if sse_events is None else sse_events
        sse_found, messages = check_sse_stream(verdict, status, events, ctx, where=where)
        if found:
            return found + sse_found, messages
        return sse_found, messages
    if not body or body.isspace():  # not body.strip(), without the copy
        return found + _unanswered(verdict, status, f"HTTP {status} with an empty body", where), []
    try:
        message = orjson.loads(body)  # parse_json, one call less
    except ValueError:
        problem = [finding("response.parse", f"HTTP {status} {ctype or 'body'} is not JSON", where)]
        return found + problem + owed_answer(verdict, None, status, where), []
    if ctype != "application/json":
        found.append(
            finding(
                "response.content-type",
                f"a JSON-RPC answer with Content-Type {ctype or '(none)'!r}",
                where,
            )
        )
    if verdict.batch:
        found += _batch_body(verdict, message, ctx, status, where)
    elif found:
        found += check_message(verdict, message, ctx, status=status, where=where)
    else:
        found = check_message(verdict, message, ctx, status=status, where=where)
    return found, [message]


def _batch_body(
    verdict: RequestVerdict, body: Any, ctx: ResponseContext, status: int, where: str
) -> list[Finding]:
    """A 2025-03-26 batch answered with JSON: one response per request, matched by id
    (JSON-RPC 2.0 "Batch": an array of them, in any order).

    An error without an id answers an invalid item of the batch (one per ``request.envelope``
    finding); one such error alone, for a batch with no invalid item, refuses the batch.
    """
    if not isinstance(body, list):
        if isinstance(body, dict) and "error" in body and body.get("id") is None:
            refused = _batch_refused(verdict, "one error without an id", where)
            if refused or verdict.findings:
                return refused
        body = [body]  # one response object: judged as the answer to its request
    found: list[Finding] = []
    pending = {id_key(v.id): v for v in verdict.batch if v.id is not None}
    invalid_items = len(verdict.findings)
    for index, message in enumerate(body):
        at = f"{where}[{index}]"
        rpc_id = message.get("id") if isinstance(message, dict) else None
        item = pending.pop(id_key(rpc_id), None)
        if item is None:
            if rpc_id is None and invalid_items and isinstance(message, dict) \
                    and "error" in message:
                invalid_items -= 1  # the error owed to an invalid item (its id unknown)
                continue
            found.append(finding("response.id", "a batch response for no request of it", at))
            continue
        found += check_message(item, message, ctx, status=status, where=at)
    if pending:
        found.append(
            finding(
                "response.batch.incomplete",
                f"{len(pending)} request(s) of the batch got no response",
                where,
            )
        )
    return found


def _batch_refused(verdict: RequestVerdict, how: str, where: str) -> list[Finding]:
    """A valid 2025-03-26 batch of requests refused as a whole: servers MUST support
    receiving batches (2025-03-26 basic/index "Batching"). A batch with an invalid item may
    be answered by one error (JSON-RPC 2.0 "Batch"), so only a valid one is judged."""
    if not verdict.batch or verdict.findings:
        return []
    return [
        finding(
            "response.batch.refused",
            f"a batch of {len(verdict.batch)} request(s) in a 2025-03-26 session was refused "
            f"({how})",
            where,
        )
    ]


def _unanswered(verdict: RequestVerdict, status: int, what: str, where: str) -> list[Finding]:
    """A request answered without a JSON-RPC body: intermediary-style failure."""
    owed = owed_answer(verdict, None, status, where)
    if owed:
        return owed
    return [finding("response.envelope", f"a request got no JSON-RPC response ({what})", where)]


def _notification(status: int, body: bytes, where: str) -> list[Finding]:
    """A notification: 202 and no body if accepted, an HTTP error status if not.

    The refusal's body MAY be a JSON-RPC error without ``id`` ("Sending Messages" 5), so
    only a success-shaped answer or a 2xx other than 202-and-empty is a violation.
    """
    if status == 202 and not body:
        return []
    success_shaped = False
    if body.strip():
        try:
            message = parse_json(body)
        except ValueError:
            message = None
        success_shaped = isinstance(message, dict) and "result" in message
    if status >= 400 and not success_shaped:
        return []
    shown = body[:80].decode("utf-8", "replace")
    detail = f"HTTP {status}" + (f" with body {shown!r}" if body else " with an empty body")
    return [
        finding(
            "notification.response",
            f"a notification must get HTTP 202 and an empty body (or an HTTP error status "
            f"if refused), got {detail}",
            where,
        )
    ]
