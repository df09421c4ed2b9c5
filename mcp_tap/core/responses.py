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

import orjson

from mcp_tap.core.catalog import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
    finding,
)
from mcp_tap.core.eras import (
    ERA_LEGACY,
    ERA_MODERN,
    META_LOG_LEVEL,
    META_SUBSCRIPTION_ID,
    Era,
    body_meta,
)
from mcp_tap.core.fastinit import fast_init
from mcp_tap.core.findings import Finding
from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.jsonrpc import (
    KIND_INVALID,
    KIND_NOTIFICATION,
    KIND_REQUEST,
    KIND_RESPONSE,
    json_type,
    kind_of,
    parse_json,
    same_id,
)
from mcp_tap.core.requests import RequestVerdict
from mcp_tap.core.results import result_findings
from mcp_tap.core.sse import SSEDecoder, SSEEvent
from mcp_tap.core.transport import PRE_BODY_STATUSES, challenge, http_only, session_id_problem

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
_JSONRPC_OWED = frozenset({"request.parse", "request.envelope", "request.schema"})


@fast_init  # made per exchange: see core/fastinit.py
@dataclass(frozen=True, slots=True)
class ResponseContext:
    """What response rules need besides the response: era, advertised capabilities, ..."""

    era: Era
    capabilities: frozenset[str] = frozenset()
    client_extensions: frozenset[str] | None = None
    version: str | None = None
    client_capabilities: dict[str, Any] | None = None


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
    if kind is KIND_NOTIFICATION or (kind is KIND_RESPONSE and verdict.era is ERA_LEGACY):
        # A legacy client's answer to a server request is owed what a notification is.
        return _notification(status, body, where), []
    if kind is KIND_RESPONSE:
        return [], []  # request.envelope already: the modern spec names no answer to it.
    invalid_version = (
        next((f for f in verdict.findings if f.rule == "request.version.invalid"), None)
        if verdict.findings
        else None
    )
    if invalid_version is not None:
        if status == 400:
            return [], []
        return [
            finding(
                "response.legacy-version-status",
                f"{invalid_version.message}, answered HTTP {status} (owed 400)",
                where,
            )
        ], []
    ctype = headers.content_type()
    found: list[Finding] = []
    if verdict.era is ERA_LEGACY and verdict.method == "initialize":
        found += session_id_problem(headers, where)
    if http_only(status, body) and ctype != "text/event-stream":
        # A plain HTTP error (auth, rate limit, server error) is judged by its own rules,
        # never as malformed JSON-RPC; a rejection the server owed an answer to is still owed
        # one unless it was refused before its body was read.
        found += challenge(status, headers, where)
        if status not in PRE_BODY_STATUSES:
            found += _owed(verdict, None, status, where)
        return found, []
    if ctype == "text/event-stream":
        if sse_events is None:
            events, _ = decode_sse(body)
        else:
            events = list(sse_events)
        sse_found, messages = check_sse_stream(verdict, status, events, ctx, where=where)
        return found + sse_found, messages
    if not body.strip():
        return found + _unanswered(verdict, status, f"HTTP {status} with an empty body", where), []
    try:
        message = orjson.loads(body)  # parse_json, one call less
    except ValueError:
        problem = [finding("response.parse", f"HTTP {status} {ctype or 'body'} is not JSON", where)]
        return found + problem + _owed(verdict, None, status, where), []
    if ctype != "application/json":
        found.append(
            finding(
                "response.content-type",
                f"a JSON-RPC answer with Content-Type {ctype or '(none)'!r}",
                where,
            )
        )
    if verdict.batch and isinstance(message, list):
        found += _batch_body(verdict, message, ctx, status, where)
    else:
        found += check_message(verdict, message, ctx, status=status, where=where)
    return found, [message]


def _batch_body(
    verdict: RequestVerdict, messages: list[Any], ctx: ResponseContext, status: int, where: str
) -> list[Finding]:
    """A 2025-03-26 batch answered with a JSON array: one response per request, by id."""
    found: list[Finding] = []
    pending = {_id_key(v.id): v for v in verdict.batch if v.id is not None}
    for index, message in enumerate(messages):
        item = pending.pop(_id_key(message.get("id")) if isinstance(message, dict) else "", None)
        at = f"{where}[{index}]"
        if item is None:
            found.append(finding("response.id", "a batch response for no request of it", at))
            continue
        found += check_message(item, message, ctx, status=status, where=at)
    if pending:
        found.append(
            finding(
                "sse.unterminated",
                f"{len(pending)} request(s) of the batch got no response",
                where,
                era=ctx.era,
            )
        )
    return found


def _id_key(value: Any) -> object:
    """An id as a key that keeps its JSON type ("1" and 1 differ)."""
    kind = type(value)
    if kind is str or kind is int:
        # The usual ids and tokens: a pair, no repr (a pair never equals the strings below).
        return (kind, value)
    return f"{kind.__name__}:{value!r}"


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

    ``in_stream`` marks a response delivered as an SSE event. A success result there needs
    no status of its own (the stream's status is judged once); an error keeps its status
    rule (-32601 owes 404, -32020..-32022 owe 400), so a 200 stream carrying one is wrong.
    """
    envelope = ""
    if not isinstance(message, dict):
        envelope = f"a JSON-RPC response must be an object, got {json_type(message)}"
    elif message.get("jsonrpc") != "2.0":
        envelope = f'jsonrpc must be "2.0", got {message.get("jsonrpc")!r}'
    if envelope:
        return [finding("response.envelope", envelope, where), *_owed(verdict, None, status, where)]
    found: list[Finding] = []
    classified = verdict.classified
    expected_id = classified.id if classified.kind is KIND_REQUEST else None  # verdict.id
    # Most requests were not rejected (no finding at all): then no answer is owed and _owed
    # is skipped.
    rejected = bool(verdict.findings) and verdict.rejection is not None
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
        return (found + _owed(verdict, None, status, where, id_ok=id_ok)) if rejected else found
    if has_error:
        error = message["error"]
        # An error keeps its status rule inside a stream: the stream's 200 is then wrong.
        found += _error(error, status, verdict, ctx, where, in_stream=in_stream)
        code = error.get("code") if isinstance(error, dict) else None
        code = code if isinstance(code, int) and not isinstance(code, bool) else None
        return (found + _owed(verdict, code, status, where, id_ok=id_ok)) if rejected else found
    if status != 200 and not in_stream:
        # In a stream the status belongs to the stream, judged once by check_sse_stream.
        found.append(
            finding(
                "response.http-status", f"a success result must be HTTP 200, got {status}", where
            )
        )
    if rejected:
        return found + _owed(verdict, None, status, where, id_ok=id_ok)
    found += result_findings(
        classified.method,
        message["result"],
        ctx.era,
        ctx.capabilities,
        ctx.client_extensions,
        ctx.version or verdict.version,
        where,
        ctx.client_capabilities,
    )
    return found


def _error(
    error: Any,
    status: int | None,
    verdict: RequestVerdict,
    ctx: ResponseContext,
    where: str,
    *,
    in_stream: bool = False,
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
    modern = ctx.era is ERA_MODERN
    # The -32020..-32099 reservation exists from 2026-07-28 on: a legacy exchange may use them.
    if modern and -32099 <= code <= -32020 and code not in DEFINED_RESERVED_CODES:
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
    if not modern:
        return []
    data_problem = _error_data(code, error.get("data"))
    if data_problem:
        return [finding("response.error.data", data_problem, where)]
    if status is None:
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
                f"JSON-RPC error {code} must be HTTP {want}, got {status}"
                + (" (delivered inside the SSE stream)" if in_stream else ""),
                where,
            )
        ]
    return []


def _error_data(code: int, data: Any) -> str:
    """The schema's required ``data`` shape for -32022 and -32021 (2026-07-28)."""
    if code == UNSUPPORTED_PROTOCOL_VERSION:
        if not isinstance(data, dict):
            return f"error -32022 needs data {{supported, requested}}, got {json_type(data)}"
        supported = data.get("supported")
        if not isinstance(supported, list) or not all(isinstance(v, str) for v in supported):
            return "error -32022 data.supported must be an array of strings"
        if not isinstance(data.get("requested"), str):
            return "error -32022 data.requested must be a string"
    if code == MISSING_CLIENT_CAPABILITY:
        caps = data.get("requiredCapabilities") if isinstance(data, dict) else None
        if not isinstance(caps, dict):
            return "error -32021 data.requiredCapabilities must be an object"
    return ""


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
        # The MCP pages name the answer to missing metadata, an unsupported version and a
        # removed method (MUST); the standard codes for parse, envelope and params errors
        # are JSON-RPC's, which MCP asks for with a SHOULD (mrtr "Error Handling").
        rule_id = (
            "response.expected-error.jsonrpc"
            if rejection.rule in _JSONRPC_OWED
            else "response.expected-error"
        )
        return [
            finding(
                rule_id,
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


def check_sse_stream(
    verdict: RequestVerdict,
    status: int,
    events: Iterable[SSEEvent],
    ctx: ResponseContext,
    *,
    where: str = "origin",
    resumed: bool = False,
) -> tuple[list[Finding], list[Any]]:
    """Judge an SSE answer: valid messages, related notifications first, the response last.

    ``resumed`` marks the continuation of a request stream on a legacy GET with
    ``Last-Event-ID``; its status is the GET's and needs no separate judgement here.
    """
    found: list[Finding] = []
    messages: list[Any] = []
    if status != 200 and not resumed:
        found.append(
            finding("response.http-status", f"an SSE stream must be HTTP 200, got {status}", where)
        )
    listen = ctx.era is ERA_MODERN and verdict.method == "subscriptions/listen"
    # (A comprehension is a function call on Python 3.11: skipped when there is no batch.)
    pending = (
        {_id_key(v.id): v for v in verdict.batch if v.id is not None} if verdict.batch else {}
    )
    answered = False
    seen = 0
    progress: dict[object, float] = {}
    modern = ctx.era is ERA_MODERN
    # The request's _meta, looked up once for every notification _related judges.
    request_meta = (body_meta(verdict.classified.message) or {}) if modern and not listen else {}
    for index, event in enumerate(events):
        data = event.data
        if data == "":
            continue  # Priming events (id, empty data) and empty keep-alives carry no message.
        try:
            message = orjson.loads(data)  # parse_json, one call less
        except ValueError:
            at = _at(where, index)
            found.append(finding("sse.event", f"event data is not JSON: {data[:60]!r}", at))
            continue
        messages.append(message)
        seen += 1
        if answered:
            at = _at(where, index)
            found.append(finding("sse.after-response", "a message after the final response", at))
            continue
        # The kind only (no Classified): this runs for every event of every stream.
        kind, problem = kind_of(message)
        if kind is KIND_INVALID:
            at = _at(where, index)
            found.append(finding("sse.event", f"not a JSON-RPC message: {problem}", at))
        elif kind is KIND_REQUEST:
            if modern:
                found.append(
                    finding(
                        "sse.event",
                        f"server request {message['method']} on a modern stream "
                        "(2026-07-28 has no server-to-client requests)",
                        _at(where, index),
                    )
                )
        elif kind is KIND_NOTIFICATION:
            # The place is formatted only for a finding: most notifications pass.
            found += _progress_order(message, progress, where, index)
            if listen:
                found += _listen(verdict, message, seen == 1, _at(where, index))
            elif modern:
                found += _related(request_meta, message, where, index)
        elif pending:
            at = _at(where, index)
            item = pending.pop(_id_key(message.get("id")), None)
            if item is None:
                found.append(finding("sse.id", "a batch response for no request of it", at))
            else:
                found += check_message(item, message, ctx, status=status, where=at, in_stream=True)
            answered = not pending
        else:
            answered = True
            at = _at(where, index)
            found += check_message(verdict, message, ctx, status=status, where=at, in_stream=True)
    if not answered and not listen:
        found.append(
            finding(
                "sse.unterminated", "the stream ended before the final response", where,
                era=ctx.era,
            )
        )
        # A stream that never carried the response did not give a rejected request the
        # answer it is owed (400/-32020 for a header mismatch, the ladder's code otherwise).
        found += _owed(verdict, None, status, where)
    return found, messages


def _at(where: str, index: int) -> str:
    """Where an SSE event's finding points (formatted only for a finding: most events pass)."""
    return f"{where} sse[{index}]"


_NUMBER = (int, float)  # a tuple: isinstance with int | float builds the union every call


def _progress_order(
    message: dict[str, Any], last: dict[object, float], where: str, index: int
) -> list[Finding]:
    """The ``progress`` value MUST increase with each notification of one token."""
    if message.get("method") != "notifications/progress":
        return []
    params = message.get("params")
    if not isinstance(params, dict):
        return []  # no progress value (the schema rules judge the shape)
    value = params.get("progress")
    if not isinstance(value, _NUMBER) or isinstance(value, bool):
        return []  # the schema rules judge the type
    token = params.get("progressToken")
    kind = type(token)
    # _id_key(token), its usual case inline: this runs for every progress notification.
    key = (kind, token) if kind is str or kind is int else _id_key(token)
    before = last.get(key)
    last[key] = value
    if before is not None and value <= before:
        return [finding("sse.progress", f"progress {value} after {before}: it must increase",
                        _at(where, index))]
    return []


# Change notifications belong on a listen stream, never on a request's stream.
_LISTEN_ONLY = frozenset(
    {
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
        "notifications/resources/list_changed",
        "notifications/resources/updated",
        "notifications/subscriptions/acknowledged",
    }
)
_FILTER_METHODS = {
    "toolsListChanged": "notifications/tools/list_changed",
    "promptsListChanged": "notifications/prompts/list_changed",
    "resourcesListChanged": "notifications/resources/list_changed",
}


def _related(
    meta: dict[str, Any], message: dict[str, Any], where: str, index: int
) -> list[Finding]:
    """A modern request stream carries only notifications that relate to its request (whose
    ``params._meta`` is ``meta``, ``{}`` when it has none)."""
    method = message.get("method")
    params = message.get("params")
    params = params if isinstance(params, dict) else {}
    problem = ""
    if method == "notifications/progress":
        token = meta.get("progressToken")
        if token is None:
            problem = "progress on a request that gave no progressToken"
        elif not same_id(params.get("progressToken"), token):
            problem = (
                f"progress for token {params.get('progressToken')!r}, not this request's "
                f"{token!r}"
            )
    elif method == "notifications/message" and META_LOG_LEVEL not in meta:
        problem = f"notifications/message on a request that set no {META_LOG_LEVEL}"
    elif method in _LISTEN_ONLY:
        problem = f"{method} on a request stream (it belongs on a subscriptions/listen stream)"
    elif method == "notifications/cancelled":
        problem = "server-sent notifications/cancelled on a request stream"
    return [finding("sse.unrelated", problem, _at(where, index))] if problem else []


def _listen(
    verdict: RequestVerdict, message: dict[str, Any], first: bool, at: str
) -> list[Finding]:
    """A listen stream: the acknowledgement first, the subscription id, only opted-in types."""
    method = message.get("method")
    params = message.get("params")
    params = params if isinstance(params, dict) else {}
    meta = params.get("_meta")
    sub_id = meta.get(META_SUBSCRIPTION_ID, _ABSENT) if isinstance(meta, dict) else _ABSENT
    ack = method == "notifications/subscriptions/acknowledged"
    if first and not ack:
        return [
            finding(
                "sse.listen",
                f"a listen stream must open with notifications/subscriptions/acknowledged, "
                f"not {method}",
                at,
            )
        ]
    if not same_id(sub_id, verdict.id):
        shown = "none" if sub_id is _ABSENT else repr(sub_id)
        return [
            finding(
                "sse.listen",
                f"{method} carries subscriptionId {shown}, not the listen request's "
                f"{verdict.id!r}",
                at,
            )
        ]
    if ack or method == "notifications/cancelled":
        return []
    request_params = verdict.classified.message.get("params") or {}
    wanted = request_params.get("notifications") if isinstance(request_params, dict) else None
    wanted = wanted if isinstance(wanted, dict) else {}
    opted = {m for key, m in _FILTER_METHODS.items() if wanted.get(key) is True}
    uris = wanted.get("resourceSubscriptions")
    uris = uris if isinstance(uris, list) else []
    if method == "notifications/resources/updated" and params.get("uri") in uris:
        return []
    if method in opted:
        return []
    return [
        finding(
            "sse.listen",
            f"{method} was not opted in to by the listen request's notification filter",
            at,
        )
    ]


_ABSENT = object()
