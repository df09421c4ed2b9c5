"""Rules on an SSE answer to one request: valid messages, related notifications first, the
response last; progress order; a listen stream's acknowledgement, subscription id and filter.

:func:`check_sse_stream` judges the decoded events of a request's stream (a POST answered
with ``text/event-stream``, or its legacy resumption on a GET); each response message in it
is judged by :func:`mcp_tap.core.response_message.check_message`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from mcp_tap.core import schema
from mcp_tap.core.catalog import finding
from mcp_tap.core.eras import (
    BATCH_VERSIONS,
    ERA_MODERN,
    LEGACY_VERSIONS,
    META_LOG_LEVEL,
    META_SUBSCRIPTION_ID,
)
from mcp_tap.core.findings import Finding
from mcp_tap.core.jsonrpc import (
    KIND_INVALID,
    KIND_NOTIFICATION,
    KIND_REQUEST,
    KIND_RESPONSE,
    Kind,
    kind_of,
    same_id,
)
from mcp_tap.core.requests import RequestVerdict
from mcp_tap.core.response_message import ResponseContext, check_message, id_key, owed_answer
from mcp_tap.core.results import server_request_problem, task_answer_problem
from mcp_tap.core.sse import SSEEvent, unbatched


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
    modern = ctx.era is ERA_MODERN
    classified = verdict.classified
    # verdict.method without the property calls (a request's method is a string).
    method = classified.message["method"] if classified.kind is KIND_REQUEST else (
        classified.method)
    listen = modern and method == "subscriptions/listen"
    # (A comprehension is a function call on Python 3.11: skipped when there is no batch.)
    pending = (
        {id_key(v.id): v for v in verdict.batch if v.id is not None} if verdict.batch else {}
    )
    answered = False
    seen = 0
    progress: dict[object, float] = {}
    # The request's _meta, looked up once for every notification _related judges.
    request_meta = _request_meta(classified.message) if modern and not listen else {}
    # The revision whose schema judges the stream's notifications (None: not judged).
    schema_version = ctx.version or verdict.version or (None if modern else LEGACY_VERSIONS[0])
    if not modern and schema_version in BATCH_VERSIONS:
        events = unbatched(events)  # 2025-03-26: a server's messages MAY be batched
    for index, event in enumerate(events):
        data = event.data
        if data == "" or data.isspace():
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
            found.append(_after_response(message, _at(where, index)))
            continue
        kind, problem = _event_kind(message)
        if kind is KIND_INVALID:
            at = _at(where, index)
            found.append(finding("sse.event", f"not a JSON-RPC message: {problem}", at))
        elif kind is KIND_REQUEST:
            found += _request_event(message, ctx, _at(where, index))
        elif kind is KIND_NOTIFICATION:
            # The place is formatted only for a finding: most notifications pass.
            note = message["method"]  # kind_of made sure of a string
            if schema_version is not None:
                found += _notification_schema(schema_version, message, where, index)
            if note == "notifications/progress":
                # The usual notification: its order and, on a modern request stream, its
                # relatedness in one call.
                progress_found = _progress(
                    message, progress, request_meta if modern and not listen else None,
                    where, index,
                )
                if progress_found:
                    found += progress_found
                if not listen:
                    continue
            if listen:
                found += _listen(verdict, message, seen == 1, _at(where, index))
            elif modern:
                unrelated = _related(request_meta, note, where, index)
                if unrelated is not None:
                    found.append(unrelated)
        elif pending:
            found += _batch_response(pending, message, ctx, status, _at(where, index))
            answered = not pending
        else:
            answered = True
            at = _at(where, index)
            response_found = check_message(
                verdict, message, ctx, status=status, where=at, in_stream=True
            )
            if response_found:
                found += response_found
    if not answered and not listen:
        found += _unterminated(verdict, status, ctx, where)
    elif listen and verdict.findings:
        # A listen request the ladder rejected (e.g. taskIds without the tasks extension)
        # is owed its error, not a stream.
        found += owed_answer(verdict, None, status, where)
    return found, messages


def _request_meta(request: Any) -> dict[str, Any]:
    """The request's ``params._meta`` object (empty when it has none)."""
    params = request.get("params") if isinstance(request, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta if isinstance(meta, dict) else {}


def _after_response(message: Any, at: str) -> Finding:
    """A message after the stream's final response."""
    if type(message) is dict and message.get("method") == "notifications/progress":
        # progress.mdx "Behavior Requirements": progress MUST stop after completion.
        return finding("sse.progress.after-completion",
                       "a progress notification after the final response", at)
    return finding("sse.after-response", "a message after the final response", at)


def _event_kind(message: Any) -> tuple[Kind, str]:
    """An event's JSON-RPC kind and, for an invalid one, why: :func:`kind_of`, with its two
    usual answers (a notification, a response) decided here first, as this runs for every
    event of every stream."""
    if type(message) is dict and message.get("jsonrpc") == "2.0":
        if "method" in message:
            method_sent = message["method"]
            if (
                type(method_sent) is str
                and method_sent
                and "id" not in message
                and "result" not in message
                and "error" not in message
                and ("params" not in message or isinstance(message["params"], dict))
            ):
                return KIND_NOTIFICATION, ""
        elif "result" in message or "error" in message or "id" in message:
            return KIND_RESPONSE, ""
    return kind_of(message)


def _request_event(message: dict[str, Any], ctx: ResponseContext, at: str) -> list[Finding]:
    """A server-to-client request on a request's stream: none exist in the modern era; a
    legacy one is judged against the capabilities the client declared at initialize."""
    if ctx.era is ERA_MODERN:
        return [finding(
            "sse.event",
            f"server request {message['method']} on a modern stream "
            "(2026-07-28 has no server-to-client requests)",
            at,
        )]
    if ctx.client_capabilities is not None:  # declared at the session's initialize
        return _server_request(message, ctx.client_capabilities, at)
    return []


def _unterminated(
    verdict: RequestVerdict, status: int, ctx: ResponseContext, where: str
) -> list[Finding]:
    """A stream that ended before its final response."""
    found = [finding("sse.unterminated", "the stream ended before the final response", where,
                     era=ctx.era)]
    # A stream that never carried the response did not give a rejected request the
    # answer it is owed (400/-32020 for a header mismatch, the ladder's code otherwise).
    return found + owed_answer(verdict, None, status, where)


def _batch_response(
    pending: dict[Any, RequestVerdict], message: Any, ctx: ResponseContext, status: int, at: str
) -> list[Finding]:
    """A response on a legacy batch's stream, matched to (and taken from) ``pending``."""
    item = pending.pop(id_key(message.get("id")), None)
    if item is None:
        return [finding("sse.id", "a batch response for no request of it", at)]
    return check_message(item, message, ctx, status=status, where=at, in_stream=True)


def _notification_schema(
    version: str, message: dict[str, Any], where: str, index: int
) -> list[Finding]:
    """A server notification against its revision's published schema."""
    problem = schema.notification_problem(version, message)
    return [finding("wire.schema.notification", problem, _at(where, index))] if problem else []


def _server_request(
    message: dict[str, Any], capabilities: dict[str, Any], at: str
) -> list[Finding]:
    """A legacy server request against what the client declared at ``initialize``."""
    bad = server_request_problem(message["method"], message.get("params"), capabilities)
    return [finding(bad[0], bad[1], at)] if bad is not None else []


def _at(where: str, index: int) -> str:
    """Where an SSE event's finding points (formatted only for a finding: most events pass)."""
    return f"{where} sse[{index}]"


_NUMBER = (int, float)  # a tuple: isinstance with int | float builds the union every call


def _progress(
    message: dict[str, Any],
    last: dict[object, float],
    meta: dict[str, Any] | None,
    where: str,
    index: int,
) -> list[Finding] | None:
    """A notifications/progress: its ``progress`` value MUST increase with each notification
    of one token; on a modern request stream (``meta``, its request's ``_meta``, not
    ``None``) its token must be the request's (the progress case of :func:`_related`)."""
    found: list[Finding] | None = None
    params = message.get("params")
    sent = None  # the notification's progressToken
    # Without a numeric progress value the schema rules judge the shape.
    if isinstance(params, dict):
        sent = params.get("progressToken")
        value = params.get("progress")
        if isinstance(value, _NUMBER) and not isinstance(value, bool):
            kind = type(sent)
            # id_key(sent), its usual case inline: this runs for every progress notification.
            key = (kind, sent) if kind is str or kind is int else id_key(sent)
            before = last.get(key)
            last[key] = value
            if before is not None and value <= before:
                found = [finding("sse.progress",
                                 f"progress {value} after {before}: it must increase",
                                 _at(where, index))]
    if meta is None:
        return found
    token = meta.get("progressToken")
    if token is None:
        problem = "progress on a request that gave no progressToken"
    elif not same_id(sent, token):
        problem = f"progress for token {sent!r}, not this request's {token!r}"
    else:
        return found
    unrelated = finding("sse.unrelated", problem, _at(where, index))
    return [unrelated] if found is None else [*found, unrelated]


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


def _related(meta: dict[str, Any], method: str, where: str, index: int) -> Finding | None:
    """A modern request stream carries only notifications that relate to its request (whose
    ``params._meta`` is ``meta``, ``{}`` when it has none); ``method`` is the notification's
    (a notifications/progress is judged by :func:`_progress`)."""
    problem = ""
    if method == "notifications/message" and META_LOG_LEVEL not in meta:
        problem = f"notifications/message on a request that set no {META_LOG_LEVEL}"
    elif method in _LISTEN_ONLY:
        problem = f"{method} on a request stream (it belongs on a subscriptions/listen stream)"
    elif method == "notifications/cancelled":
        problem = "server-sent notifications/cancelled on a request stream"
    return finding("sse.unrelated", problem, _at(where, index)) if problem else None


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
    task_ids = wanted.get("taskIds")  # the tasks extension's filter field
    if (
        method == TASK_STATUS_NOTIFICATION
        and isinstance(task_ids, list)
        and params.get("taskId") in task_ids
    ):
        # Each carries the whole Task, as tasks/get would answer it (the extension's
        # TaskStatusNotificationParams = NotificationParams & Task).
        problem = task_answer_problem(params)
        if problem:
            return [finding("response.payload.task", f"{method}: {problem}", at)]
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
TASK_STATUS_NOTIFICATION = "notifications/tasks"
"""The tasks extension's status notification (ext-tasks-draft "Task Status Notifications")."""
