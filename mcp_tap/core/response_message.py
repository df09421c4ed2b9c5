"""Rules on one JSON-RPC response message: envelope, id, exclusivity, error shape and codes,
the error's HTTP status, and the answer a rejected request is owed.

:func:`check_message` judges a response message wherever it came from: a JSON body
(:mod:`mcp_tap.core.responses`) or an SSE event (:mod:`mcp_tap.core.response_stream`).
:func:`owed_answer` enforces that a request the ladder rejected got the error it is owed
(400/-32020 for a header mismatch, the ladder's code otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mcp_tap.core.catalog import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
    finding,
)
from mcp_tap.core.deepjson import WrittenJson
from mcp_tap.core.eras import ERA_MODERN, HEADER_PROTOCOL_VERSION, TASKS_EXTENSION, Era
from mcp_tap.core.fastinit import fast_init, new_twin
from mcp_tap.core.findings import Finding
from mcp_tap.core.jsonrpc import KIND_REQUEST, json_type, same_id
from mcp_tap.core.mirrored import MISSING
from mcp_tap.core.requests import RequestVerdict
from mcp_tap.core.results import result_findings, task_input_capabilities
from mcp_tap.core.structured import check_structured
from mcp_tap.core.transport import PRE_BODY_STATUSES

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
    "request.capability.missing",
}
VERSION_HEADER_MISSING = HEADER_PROTOCOL_VERSION + MISSING
"""The message of the finding for a request without ``MCP-Protocol-Version``."""
_JSONRPC_OWED = frozenset({"request.parse", "request.envelope", "request.schema"})


_NO_CAPABILITIES: frozenset[str] = frozenset()


class _ResponseContextTwin:
    """ResponseContext's layout (fast_init checks it): make_response_context builds it."""

    __slots__ = ("capabilities", "client_capabilities", "client_extensions", "era",
                 "output_schema", "version", "written")


def make_response_context(
    era: Era, capabilities: frozenset[str] = _NO_CAPABILITIES,
    client_extensions: frozenset[str] | None = None, version: str | None = None,
    client_capabilities: dict[str, Any] | None = None, output_schema: Any = None,
    written: WrittenJson | None = None,
) -> ResponseContext:
    """``ResponseContext(...)`` without ``type.__call__``."""
    made = new_twin(_ResponseContextTwin)
    made.era = era
    made.capabilities = capabilities
    made.client_extensions = client_extensions
    made.version = version
    made.client_capabilities = client_capabilities
    made.output_schema = output_schema
    made.written = written
    made.__class__ = ResponseContext
    built: ResponseContext = made
    return built


@fast_init(make_response_context)  # made per exchange: see core/fastinit.py
@dataclass(frozen=True, slots=True)
class ResponseContext:
    """What response rules need besides the response: era, advertised capabilities, ..."""

    era: Era
    capabilities: frozenset[str] = frozenset()
    client_extensions: frozenset[str] | None = None
    version: str | None = None
    client_capabilities: dict[str, Any] | None = None
    output_schema: Any = None  # the called tool's outputSchema, learnt from tools/list
    # Receives the result the judge writes as JSON, and its JSON (None: not kept). Not part
    # of the context's value: what the judgement wrote, handed on to the recorder.
    written: WrittenJson | None = field(default=None, compare=False, repr=False)


def id_key(value: Any) -> object:
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
        owed = owed_answer(verdict, None, status, where)
        return [finding("response.envelope", envelope, where), *owed]
    found: list[Finding] = []
    classified = verdict.classified
    request = classified.kind is KIND_REQUEST
    # A request's message is an object with an id (classify made sure of it).
    expected_id = classified.message["id"] if request else None
    # Most requests were not rejected (no finding at all): then no answer is owed and
    # owed_answer is skipped.
    rejected = bool(verdict.findings) and verdict.rejection is not None
    id_ok = expected_id is None or ("id" in message and same_id(message["id"], expected_id))
    if not id_ok and not in_stream and _idless_allowed(verdict, message, ctx, status, rejected):
        id_ok = True
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
        if rejected:
            found += owed_answer(verdict, None, status, where, id_ok=id_ok)
        return found
    if has_error:
        error = message["error"]
        # An error keeps its status rule inside a stream: the stream's 200 is then wrong.
        found += _error(error, status, verdict, ctx, where, in_stream=in_stream)
        code = error.get("code") if isinstance(error, dict) else None
        code = code if isinstance(code, int) and not isinstance(code, bool) else None
        if rejected:
            found += owed_answer(verdict, code, status, where, id_ok=id_ok)
            if code == MISSING_CLIENT_CAPABILITY and not found:
                found += _names_extension(verdict, error, where)
        return found
    if status != 200 and not in_stream:
        # In a stream the status belongs to the stream, judged once by check_sse_stream.
        found.append(
            finding(
                "response.http-status", f"a success result must be HTTP 200, got {status}", where
            )
        )
    if rejected:
        result = message["result"]
        modern = isinstance(result, dict) and "resultType" in result
        return found + owed_answer(verdict, None, status, where, id_ok=id_ok,
                                   modern_result=modern)
    result_found = result_findings(
        classified.message["method"] if request else classified.method,
        message["result"],
        ctx.era,
        ctx.capabilities,
        ctx.client_extensions,
        ctx.version or verdict.version,
        where,
        ctx.client_capabilities,
        ctx.written,
    )
    if not result_found and (
        ctx.output_schema is not None
        or (request and classified.message["method"] == "tasks/get")
    ):
        result_found = _learnt_rules(verdict, message["result"], ctx, where)
    if found:
        found += result_found
        return found
    return result_found


def _idless_allowed(
    verdict: RequestVerdict, message: dict[str, Any], ctx: ResponseContext, status: int,
    rejected: bool,
) -> bool:
    """Whether an error without an id may answer this request (a JSON body, not an event).

    The answer to a refused Origin MAY be a JSON-RPC error with no id (streamable-http
    "Security & Endpoint", every revision); which origins a server refuses is its own policy,
    so any 403 may be that answer. So may any answer given before the body was read (401,
    405, 413, ...): its id "could not be read" (basic "Error Responses"). A legacy 404 is the
    ended session's answer and a legacy 400 the missing session's (transports "Session
    Management" 2 and 3), not responses to this request; so is a 2025-03-26 server's refusal
    of a request without MCP-Protocol-Version (a session it lacks, say: see
    :func:`owed_answer`).
    """
    if message.get("id") is not None or "error" not in message:
        return False
    return (
        status in PRE_BODY_STATUSES
        or (status in (400, 404) and ctx.era is not ERA_MODERN)
        or (rejected and _served_as_2025_03_26(verdict, message["error"]))
    )


def _served_as_2025_03_26(verdict: RequestVerdict, error: Any) -> bool:
    """Whether a request without ``MCP-Protocol-Version`` got an error other than -32020: a
    server MAY treat it as 2025-03-26 (streamable-http "Protocol Version Header")."""
    rejection = verdict.rejection
    code = error.get("code") if isinstance(error, dict) else None
    return (
        rejection is not None
        and rejection.rule == "request.header.missing"
        and rejection.message == VERSION_HEADER_MISSING
        and code != HEADER_MISMATCH
    )


def _learnt_rules(
    verdict: RequestVerdict, result: Any, ctx: ResponseContext, where: str
) -> list[Finding]:
    """The rules on a success result that need what the tap learnt or the request declared:
    an ``input_required`` task's inputRequests against the polling request's capabilities
    (ext-tasks-draft "Task Update Requests": the same rules as a direct input request), and
    ``structuredContent`` against the called tool's learnt ``outputSchema``."""
    if ctx.client_capabilities is not None and verdict.method == "tasks/get":
        found = task_input_capabilities(result, ctx.client_capabilities, where)
        if found:
            return found
    if (
        ctx.output_schema is not None
        and isinstance(result, dict)
        and result.get("resultType", "complete") == "complete"
    ):
        return check_structured(ctx.output_schema, result, where)
    return []


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


def _names_extension(verdict: RequestVerdict, error: dict[str, Any], where: str) -> list[Finding]:
    """The -32021 a tasks-extension request is owed names the extension it needs
    (ext-tasks-draft "Capability Negotiation": "indicating the required extension")."""
    rejection = verdict.rejection
    if rejection is None or rejection.rule != "request.capability.missing":
        return []
    data = error.get("data")
    caps = data.get("requiredCapabilities") if isinstance(data, dict) else None
    ext = caps.get("extensions") if isinstance(caps, dict) else None
    if isinstance(ext, dict) and TASKS_EXTENSION in ext:
        return []
    return [finding("response.error.data",
                    f"error -32021 data.requiredCapabilities must name the extension "
                    f"({{'extensions': {{'{TASKS_EXTENSION}': {{}}}}}})", where)]


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


def owed_answer(
    verdict: RequestVerdict,
    code: int | None,
    status: int,
    where: str,
    *,
    id_ok: bool = True,
    modern_result: bool = False,
) -> list[Finding]:
    """The answer a rejected request is owed: 400/-32020 for a mismatch, the code otherwise.

    A request without ``MCP-Protocol-Version`` MAY be treated as 2025-03-26 (streamable-http
    "Protocol Version Header"): any answer such a server gives is allowed, unless the server
    rejected it with -32020 (then judged as that rejection) or answered with a modern result
    (``modern_result``: it served the request as modern without the header it must reject).
    """
    rejection = verdict.rejection
    if rejection is None or status in PRE_BODY_STATUSES:
        return []  # (an answer given before the body was read owes nothing about the body)
    if (
        rejection.rule == "request.header.missing"
        and rejection.message == VERSION_HEADER_MISSING
        and code != HEADER_MISMATCH
        and not modern_result
    ):
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
