"""OpenTelemetry spans for exchanges, exported with OTLP/HTTP (the optional ``[otel]`` extra).

One ``SERVER`` span per exchange and hop, made once the exchange is over (from the times the
forwarder captured), so nothing on the forwarding path waits for it. Its parent is the trace
context the exchange carried: the request's ``params._meta.traceparent`` (MCP's trace
context, basic/index "OpenTelemetry trace context") when valid, else the HTTP
``traceparent``; when both are present and differ, the HTTP one becomes a span link. A trace
the tap starts itself (it added the ``traceparent``) keeps the ids of the header it sent, so
the origin's spans are children of the tap's span.

Sampling is parent-based: a parent's sampled flag decides, and the tap never turns it on.
A trace the tap starts is sampled by ``[tracing] sample_ratio`` with the trace-id ratio rule
of the OpenTelemetry SDK, and :func:`root_flags` gives the flag the tap puts in the header it
adds by that same rule (``00`` when no spans are exported), so a parent-based sampler
downstream agrees with the tap.

Attributes follow the OpenTelemetry semantic conventions: HTTP server (``http.request.method``,
``http.response.status_code``, ``url.path``, ``client.address``, ``error.type``), JSON-RPC
(``rpc.system``, ``rpc.method``, ``rpc.jsonrpc.*``) and MCP (``mcp.method.name``,
``mcp.protocol.version``, ``gen_ai.tool.name``); the tap's own are under ``mcp_tap.*``
(hop, exchange id, era, finding rule ids), and each finding is a span event. Values come from
the redacted evidence record, never from raw request data.
"""

from __future__ import annotations

import atexit
import contextvars
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import structlog

from mcp_tap.core.jsonrpc import first_error_code

if TYPE_CHECKING:
    from mcp_tap.core.exchange import Judgement
    from mcp_tap.proxy.captured import Captured
    from mcp_tap.proxy.options import TapOptions, TracingOptions

_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")
_TRACE_ID_LIMIT = (1 << 64) - 1  # the SDK's TraceIdRatioBased looks at the low 64 bits

# The ids of the traceparent the tap added, for the span that stands for it (see _PresetIds).
_PRESET: contextvars.ContextVar[tuple[int, int] | None] = contextvars.ContextVar(
    "mcp_tap_preset_ids", default=None
)


def parse_traceparent(value: Any) -> tuple[str, str, bool] | None:
    """``(trace_id, parent_id, sampled)`` of a W3C-valid ``traceparent``, else None."""
    if not isinstance(value, str):
        return None
    m = _TRACEPARENT.fullmatch(value.strip())
    if m is None or m.group(1) == "ff" or m.group(2) == "0" * 32 or m.group(3) == "0" * 16:
        return None
    return m.group(2), m.group(3), bool(int(m.group(4), 16) & 1)


def root_flags(options: TracingOptions, trace_id: str) -> str:
    """The trace flags for a ``traceparent`` the tap adds for ``trace_id``.

    ``01`` only when the tap itself records the trace (spans are exported and the trace-id
    ratio rule of ``sample_ratio`` keeps it, as the SDK's sampler decides); ``00`` otherwise.
    """
    if not options.otlp_endpoint:
        return "00"
    bound = round(options.sample_ratio * (_TRACE_ID_LIMIT + 1))
    return "01" if int(trace_id, 16) & _TRACE_ID_LIMIT < bound else "00"


def _meta_traceparent(message: Any) -> Any:
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta.get("traceparent") if isinstance(meta, dict) else None


def _header(pairs: Any, name: str) -> str | None:
    values = [v for k, v in pairs if k.lower() == name]
    return values[0] if len(values) == 1 else None


class ExchangeTracing:
    """No spans (``[tracing] otlp_endpoint`` is empty): only the log fields of an exchange."""

    def export(self, cap: Captured, judgement: Judgement, record: dict[str, Any]) -> dict[str, str]:
        """Make the exchange's span (none here); returns the ids for its log lines."""
        return {"exchange_id": str(record.get("exchangeId", "")), "trace_id": cap.trace_id}

    def flush(self) -> None:
        """Send every finished span now (nothing to send here)."""


class OtlpTracing(ExchangeTracing):
    """Spans exported to an OTLP/HTTP receiver by the SDK's batch processor (own thread)."""

    def __init__(self, options: TracingOptions) -> None:
        """Set up a private tracer provider (the global one is left to the embedding app)."""
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
        from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

        from mcp_tap.version import __version__

        class _PresetIds(RandomIdGenerator):
            """Random ids, except the ones of a traceparent the tap already sent."""

            def generate_span_id(self) -> int:
                preset = _PRESET.get()
                return preset[1] if preset else super().generate_span_id()

            def generate_trace_id(self) -> int:
                preset = _PRESET.get()
                return preset[0] if preset else super().generate_trace_id()

        resource = Resource.create(
            {"service.name": options.service_name, "service.version": __version__}
        )
        self._provider = TracerProvider(
            resource=resource,
            sampler=ParentBased(TraceIdRatioBased(options.sample_ratio)),
            id_generator=_PresetIds(),
            shutdown_on_exit=False,  # shut down below, once, with the batch flushed
        )
        self._provider.add_span_processor(
            BatchSpanProcessor(
                OTLPSpanExporter(endpoint=options.otlp_endpoint, timeout=10),
                schedule_delay_millis=options.export_delay_s * 1000,
            )
        )
        self._tracer = self._provider.get_tracer("mcp_tap.proxy", __version__)
        atexit.register(self._provider.shutdown)

    def export(self, cap: Captured, judgement: Judgement, record: dict[str, Any]) -> dict[str, str]:
        """Make, end and queue the exchange's span; add its ids to ``record`` as ``span``.

        A span that cannot be made is logged and skipped: tracing never costs a record.
        """
        try:
            return self._export(cap, judgement, record)
        except Exception as exc:  # noqa: BLE001 - a span must never cost the evidence
            structlog.get_logger("mcp_tap.proxy").warning(
                "tracing.failed", hop=cap.hop, error=type(exc).__name__
            )
            return super().export(cap, judgement, record)

    def _export(
        self, cap: Captured, judgement: Judgement, record: dict[str, Any]
    ) -> dict[str, str]:
        from opentelemetry import trace
        from opentelemetry.trace import (
            Link,
            NonRecordingSpan,
            SpanContext,
            SpanKind,
            Status,
            StatusCode,
            TraceFlags,
        )

        def context_of(parsed: tuple[str, str, bool]) -> SpanContext:
            trace_id, parent_id, sampled = parsed
            flags = TraceFlags(TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT)
            return SpanContext(int(trace_id, 16), int(parent_id, 16), True, flags)

        header = parse_traceparent(_header(cap.request_headers.pairs, "traceparent"))
        meta = parse_traceparent(_meta_traceparent(judgement.request_message))
        added = parse_traceparent(
            _header(cap.forwarded_headers.pairs, "traceparent") if header is None else None
        )
        parent = meta or header
        links = []
        if meta and header and meta[:2] != header[:2]:
            links.append(Link(context_of(header), {"mcp_tap.link": "http.traceparent"}))
        context = None
        if parent is not None:
            context = trace.set_span_in_context(NonRecordingSpan(context_of(parent)))
        attributes = _attributes(cap, judgement, record)
        end = cap.egress_end_at or cap.end_at or cap.sent_at or cap.received_at
        preset = None
        if parent is None and added is not None:
            preset = (int(added[0], 16), int(added[1], 16))
        token = _PRESET.set(preset)
        try:
            span = self._tracer.start_span(
                _span_name(judgement, record, cap),
                context=context,
                kind=SpanKind.SERVER,
                attributes=attributes,
                links=links,
                start_time=int(cap.received_at * 1e9),
            )
        finally:
            _PRESET.reset(token)
        for item in record.get("findings") or []:
            event = {
                "mcp_tap.finding.rule": str(item.get("rule", "")),
                "mcp_tap.finding.boundary": str(item.get("boundary", "")),
            }
            if isinstance(item.get("code"), int):
                event["mcp_tap.finding.code"] = item["code"]
            span.add_event("mcp_tap.finding", event, timestamp=int(end * 1e9))
        error = attributes.get("error.type")
        if error is not None:
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=int(end * 1e9))
        ctx = span.get_span_context()
        trace_id, span_id = f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}"
        sampled = ctx.trace_flags.sampled
        record["span"] = {"traceId": trace_id, "spanId": span_id, "sampled": sampled}
        return {"exchange_id": str(record.get("exchangeId", "")), "trace_id": trace_id}

    def flush(self) -> None:
        """Send every finished span now (tests; shutdown flushes too)."""
        self._provider.force_flush()


def _span_name(judgement: Judgement, record: Mapping[str, Any], cap: Captured) -> str:
    method = record.get("method")
    if not isinstance(method, str):
        return cap.http_method  # HTTP semconv: "{method}" when there is no better name
    tool = _tool_name(judgement)
    return f"{method} {tool}" if tool else method


def _tool_name(judgement: Judgement) -> str | None:
    message = judgement.request_message
    params = message.get("params") if isinstance(message, dict) else None
    if isinstance(message, dict) and message.get("method") == "tools/call":
        name = params.get("name") if isinstance(params, dict) else None
        return name if isinstance(name, str) else None
    return None


def _attributes(cap: Captured, judgement: Judgement, record: Mapping[str, Any]) -> dict[str, Any]:
    ingress = record.get("ingress") or {}
    path = str(ingress.get("path", ""))  # redacted when it has a query
    attrs: dict[str, Any] = {
        "http.request.method": cap.http_method,
        "url.path": path.partition("?")[0],
        "url.scheme": "http",
        "network.protocol.name": "http",
        "mcp_tap.hop": cap.hop,
        "mcp_tap.exchange_id": str(record.get("exchangeId", "")),
        "mcp_tap.era": str(record.get("era", "")),
    }
    if cap.client:
        attrs["client.address"] = cap.client
    status = cap.egress_status
    if status is not None:
        attrs["http.response.status_code"] = status
    method = record.get("method")
    if isinstance(method, str):
        attrs["rpc.system"] = "jsonrpc"
        attrs["rpc.method"] = method
        attrs["rpc.jsonrpc.version"] = "2.0"
        attrs["mcp.method.name"] = method
        rpc_id = record.get("rpcId")
        if rpc_id is not None:
            attrs["rpc.jsonrpc.request_id"] = str(rpc_id)
            attrs["jsonrpc.request.id"] = str(rpc_id)
        tool = _tool_name(judgement)
        if tool:
            attrs["gen_ai.tool.name"] = tool
    version = _header(cap.request_headers.pairs, "mcp-protocol-version")
    if version:
        attrs["mcp.protocol.version"] = version
    code = first_error_code(judgement.response_messages)
    if code is not None:
        attrs["rpc.jsonrpc.error_code"] = code
        attrs["rpc.response.status_code"] = str(code)
    rules = sorted({str(f.get("rule", "")) for f in record.get("findings") or []})
    if rules:
        attrs["mcp_tap.finding.rules"] = rules
    tap_error = record.get("tapError")
    if isinstance(tap_error, dict):
        attrs["error.type"] = str(tap_error.get("phase", "tap-error"))
    elif status is not None and status >= 500:
        attrs["error.type"] = str(status)  # server spans: only 5xx is an error
    elif status is None and cap.client_gone:
        attrs["error.type"] = "client-gone"
    return attrs


def tracing_for(options: TapOptions) -> ExchangeTracing:
    """The span maker ``options`` ask for (spans only when an OTLP endpoint is set)."""
    if not options.tracing.otlp_endpoint:
        return ExchangeTracing()
    return OtlpTracing(options.tracing)
