"""One HTTP exchange as the core sees it, and ``judge``: exchange in, findings out.

The proxy, the transcript runner, ``probe`` and the gate all call :func:`judge`; none of
them re-implements a rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from mcp_tap.core.deepjson import WrittenJson
from mcp_tap.core.eras import (
    ERA_LEGACY,
    ERA_MODERN,
    ERA_UNKNOWN,
    HEADER_PROTOCOL_VERSION,
    META_CLIENT_CAPABILITIES,
    MODERN_VERSIONS,
    Era,
    body_meta,
    era_of,
    is_modern_version,
)
from mcp_tap.core.fastinit import FACTORY, fast_init, new_twin
from mcp_tap.core.findings import Finding
from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.jsonrpc import Kind
from mcp_tap.core.requests import RequestVerdict, request_verdict
from mcp_tap.core.response_message import ResponseContext, make_response_context
from mcp_tap.core.responses import check_response, decode_sse
from mcp_tap.core.sse import SSEEvent
from mcp_tap.core.transport import (
    accept_problem,
    check_non_post,
    check_origin,
)

_NONE: frozenset[str] = frozenset()


class _ExchangeTwin:
    """Exchange's layout (fast_init checks it): make_exchange builds one, then retypes it."""

    __slots__ = (
        "allowed_origins", "capabilities", "era", "http_method", "legacy_session",
        "negotiated_version", "output_schemas", "request_body", "request_headers",
        "request_truncated", "response_body", "response_headers", "response_status",
        "response_truncated", "session_capabilities", "sse_events", "supported_versions",
        "tool_schemas",
    )


def make_exchange(
    request_headers: HeaderMap,
    request_body: bytes,
    response_status: int | None = None,
    response_headers: HeaderMap = FACTORY,
    response_body: bytes = b"",
    http_method: str = "POST",
    era: Era | None = None,
    capabilities: frozenset[str] = _NONE,
    tool_schemas: Mapping[str, Any] = FACTORY,
    legacy_session: bool = False,
    negotiated_version: str | None = None,
    supported_versions: tuple[str, ...] = MODERN_VERSIONS,
    request_truncated: bool = False,
    response_truncated: bool = False,
    sse_events: Sequence[SSEEvent] | None = None,
    allowed_origins: tuple[str, ...] | None = None,
    output_schemas: Mapping[str, Any] = FACTORY,
    session_capabilities: dict[str, Any] | None = None,
) -> Exchange:
    """``Exchange(...)`` without ``type.__call__``: the recorder makes one per exchange."""
    made = new_twin(_ExchangeTwin)
    made.request_headers = request_headers
    made.request_body = request_body
    made.response_status = response_status
    made.response_headers = HeaderMap() if response_headers is FACTORY else response_headers
    made.response_body = response_body
    made.http_method = http_method
    made.era = era
    made.capabilities = capabilities
    made.tool_schemas = {} if tool_schemas is FACTORY else tool_schemas
    made.legacy_session = legacy_session
    made.negotiated_version = negotiated_version
    made.supported_versions = supported_versions
    made.request_truncated = request_truncated
    made.response_truncated = response_truncated
    made.sse_events = sse_events
    made.allowed_origins = allowed_origins
    made.output_schemas = {} if output_schemas is FACTORY else output_schemas
    made.session_capabilities = session_capabilities
    made.__class__ = Exchange
    built: Exchange = made
    return built


@fast_init(make_exchange)  # made per exchange: see core/fastinit.py
@dataclass(frozen=True, slots=True)
class Exchange:
    """What crossed one boundary: the request and the answer, as bytes and headers.

    ``era`` ``None`` means "infer it from the request" (see :func:`eras.infer_era`).
    ``response_status`` ``None`` means no answer was seen (the exchange is judged on its
    request only). ``allowed_origins`` lists the origins the server accepts, when known;
    without it only a non-loopback ``Origin`` on a loopback ``Host`` is known invalid.
    Truncated bodies (past a capture cap) are judged incompletely: rules that need the
    whole body are skipped rather than reported falsely.
    """

    request_headers: HeaderMap
    request_body: bytes
    response_status: int | None = None
    response_headers: HeaderMap = field(default_factory=HeaderMap)
    response_body: bytes = b""
    http_method: str = "POST"
    era: Era | None = None
    capabilities: frozenset[str] = frozenset()
    tool_schemas: Mapping[str, Any] = field(default_factory=dict)
    legacy_session: bool = False
    negotiated_version: str | None = None
    supported_versions: tuple[str, ...] = MODERN_VERSIONS
    request_truncated: bool = False
    response_truncated: bool = False
    sse_events: Sequence[SSEEvent] | None = None
    allowed_origins: tuple[str, ...] | None = None
    output_schemas: Mapping[str, Any] = field(default_factory=dict)
    session_capabilities: dict[str, Any] | None = None


class _JudgementTwin:
    """Judgement's layout (fast_init checks it): make_judgement builds one, then retypes it."""

    __slots__ = ("context", "era", "findings", "request", "request_message", "response_messages")


def make_judgement(
    era: Era, request: RequestVerdict | None, findings: tuple[Finding, ...],
    request_message: Any, response_messages: tuple[Any, ...],
    context: ResponseContext | None = None,
) -> Judgement:
    """``Judgement(...)`` without ``type.__call__``."""
    made = new_twin(_JudgementTwin)
    made.era = era
    made.request = request
    made.findings = findings
    made.request_message = request_message
    made.response_messages = response_messages
    made.context = context
    made.__class__ = Judgement
    built: Judgement = made
    return built


@fast_init(make_judgement)  # made per exchange: see core/fastinit.py
@dataclass(frozen=True, slots=True)
class Judgement:
    """The core's verdict on one exchange."""

    era: Era
    request: RequestVerdict | None
    findings: tuple[Finding, ...]
    request_message: Any
    response_messages: tuple[Any, ...]
    context: ResponseContext | None = None  # what the response was judged with (resumption)

    @property
    def method(self) -> str | None:
        """The JSON-RPC method of the request, if any."""
        return self.request.method if self.request else None

    @property
    def rpc_id(self) -> Any:
        """The JSON-RPC id of the request, if any."""
        return self.request.id if self.request else None

    @property
    def kind(self) -> Kind | None:
        """The request's message kind."""
        return self.request.kind if self.request else None




def decode_body(body: bytes) -> tuple[Any, str | None]:
    """Decode a request body as JSON: ``(message, None)`` or ``(None, why it is not JSON)``."""
    if not body or body.isspace():  # not body.strip(), without the copy
        return None, "the request body is empty"
    try:
        return orjson.loads(body), None  # parse_json, one call less
    except ValueError as exc:
        return None, f"the request body is not valid JSON ({exc})"


def client_extensions(message: Any) -> frozenset[str] | None:
    """The extension ids a modern request's clientCapabilities declare (``None`` if unknown)."""
    meta = body_meta(message)
    caps = meta.get(META_CLIENT_CAPABILITIES) if meta else None
    if not isinstance(caps, dict):
        return None
    ext = caps.get("extensions")
    return frozenset(ext) if isinstance(ext, dict) else frozenset()


def client_capabilities(message: Any) -> dict[str, Any] | None:
    """The capabilities a modern request declares (``None`` when unknown)."""
    meta = body_meta(message)
    caps = meta.get(META_CLIENT_CAPABILITIES) if meta else None
    return caps if isinstance(caps, dict) else None


def judge(exchange: Exchange, *, where: str = "origin") -> Judgement:
    """Judge one exchange: request rules on ingress, response rules at ``where``."""
    headers = exchange.request_headers
    origin_found, refused = check_origin(headers, exchange.response_status, where,
                                         exchange.allowed_origins, exchange.negotiated_version)
    if exchange.http_method != "POST" and exchange.http_method.upper() != "POST":
        return _judge_non_post(exchange, where, origin_found, refused)
    message: Any = None
    parse_error: str | None = None
    meta: dict[str, Any] | None = None
    if not exchange.request_truncated:
        message, parse_error = decode_body(exchange.request_body)
        meta = body_meta(message)  # once for the era, the request ladder and capabilities
    given = exchange.era
    if given is None:
        era = era_of(message, meta, headers.get(HEADER_PROTOCOL_VERSION),
                     exchange.legacy_session)
    else:
        era = given
    if exchange.request_truncated:
        return make_judgement(era, None, (), None, ())
    verdict = request_verdict(
        headers,
        message,
        era,
        exchange.supported_versions,
        exchange.tool_schemas,
        exchange.negotiated_version,
        parse_error,
        meta,
    )
    found = list(verdict.findings)
    accept = accept_problem(headers, "POST", era)
    if accept is not None:
        found.append(accept)
    if origin_found:
        found += origin_found
    messages: list[Any] = []
    rctx = _response_context(exchange, message, meta, era, verdict)
    if exchange.response_status is not None and not exchange.response_truncated and not refused:
        response_found, messages = check_response(
            verdict,
            exchange.response_status,
            exchange.response_headers,
            exchange.response_body,
            rctx,
            where=where,
            sse_events=exchange.sse_events,
        )
        if response_found:
            found += response_found
    return make_judgement(era, verdict, tuple(found), message, tuple(messages), rctx)


def _judge_non_post(exchange: Exchange, where: str, origin_found: Sequence[Finding],
                    refused: bool) -> Judgement:
    """Judge a GET or DELETE (or another method): no request body, legacy streams."""
    # GET streams and DELETE exist only in the legacy era and carry no request body. An
    # unknown era (no session, no modern version header, no era given) is not judged for
    # the modern SHOULD-405: a server speaking both eras answers a legacy client's GET
    # with a stream.
    era = exchange.era or (
        ERA_LEGACY
        if exchange.legacy_session
        else ERA_MODERN
        if is_modern_version(exchange.request_headers.get(HEADER_PROTOCOL_VERSION))
        else ERA_UNKNOWN
    )
    found = list(origin_found)
    accept = accept_problem(exchange.request_headers, exchange.http_method, era)
    if accept is not None:
        found.append(accept)
    if not refused and not exchange.response_truncated:
        found += check_non_post(
            exchange.http_method,
            era,
            exchange.request_headers,
            exchange.response_status,
            exchange.response_headers,
            _events(exchange),
            where,
            exchange.negotiated_version,
            exchange.session_capabilities,
        )
    return Judgement(era, None, tuple(found), None, ())


def _response_context(exchange: Exchange, message: Any, meta: dict[str, Any] | None,
                      era: Any, verdict: RequestVerdict) -> ResponseContext:
    """What the response rules need to know of the request and the session."""
    # client_extensions and client_capabilities of the message, from one look-up of _meta.
    caps = meta.get(META_CLIENT_CAPABILITIES) if meta else None
    if isinstance(caps, dict):
        ext = caps.get("extensions")
        extensions: frozenset[str] | None = frozenset(ext) if isinstance(ext, dict) else _NONE
        declared: dict[str, Any] | None = caps
    else:
        extensions = declared = None
        if era is ERA_LEGACY:
            declared = exchange.session_capabilities  # a legacy client declares them once
    output_schema = None
    if exchange.output_schemas and verdict.method == "tools/call":
        params = message.get("params") if isinstance(message, dict) else None
        name = params.get("name") if isinstance(params, dict) else None
        output_schema = exchange.output_schemas.get(name) if isinstance(name, str) else None
    return make_response_context(
        era, exchange.capabilities, extensions, verdict.version, declared, output_schema,
        WrittenJson(),  # what the result rules write as JSON, for the recorder's redaction
    )


def _events(exchange: Exchange) -> list[SSEEvent]:
    if exchange.sse_events is not None:
        return list(exchange.sse_events)
    if exchange.response_headers.content_type() != "text/event-stream":
        return []
    events, _ = decode_sse(exchange.response_body)
    return events
