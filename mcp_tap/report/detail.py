"""One kept record turned into what the exchange view shows, cut to the report's bounds.

Only recorded fields are shown: the ingress request line, headers and body, the origin's
status, headers and body, and its SSE events. The proxy redacted them before they reached
the disk; nothing here adds, decodes or reconstructs anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from mcp_tap.report import records as rec
from mcp_tap.report.bounds import Bounds
from mcp_tap.report.model import ExchangeDetail, ExchangeRef, SseEvent


def _json_text(value: Any) -> str:
    """Pretty JSON of a recorded body (a string body is shown as recorded)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
    except (TypeError, orjson.JSONEncodeError):
        return repr(value)


def _cut(value: str, limit: int, what: str, cut: list[str]) -> str:
    if len(value) <= limit:
        return value
    cut.append(f"{what} cut at {limit} of {len(value)} characters")
    return value[:limit] + "\n\u2026"


def _headers(raw: Any, limit: int, what: str, cut: list[str]) -> tuple[tuple[str, str], ...]:
    pairs = [(rec.text(p[0]), rec.text(p[1])) for p in raw or []
             if isinstance(p, list) and len(p) == 2] if isinstance(raw, list) else []
    if len(pairs) > limit:
        cut.append(f"{what}: {limit} of {len(pairs)} headers shown")
    return tuple(pairs[:limit])


def _body(section: Mapping[str, Any], what: str, cut: list[str]) -> str:
    note = section.get("bodyNote")
    if note:
        cut.append(f"{what}: {rec.text(note)}")
    return _json_text(section.get("body"))


def build_detail(record: Mapping[str, Any], ref: ExchangeRef, bounds: Bounds) -> ExchangeDetail:
    """The exchange view of ``record`` (bodies, headers and events cut at ``bounds``)."""
    ingress, origin = rec.obj(record.get("ingress")), rec.obj(record.get("origin"))
    cut: list[str] = []
    received = rec.number(ingress.get("receivedAt"))
    raw_events = rec.events(record)
    shown: list[SseEvent] = []
    for raw in raw_events[: bounds.events]:
        event = rec.obj(raw)
        at = rec.number(event.get("at"))
        offset = (at - received) * 1000.0 if at is not None and received is not None else None
        shown.append(SseEvent(
            offset_ms=offset,
            event=rec.text(event.get("event")),
            event_id=rec.text(event.get("id")),
            data=_cut(_json_text(event.get("data")), bounds.event_chars, "an event", cut),
        ))
    if len(raw_events) > bounds.events:
        cut.append(f"{bounds.events} of {len(raw_events)} events shown")
    path = rec.text(ingress.get("path"))
    line = f"{rec.text(ingress.get('httpMethod')) or '?'} {path}".strip()
    tap_error = record.get("tapError")
    rpc_id = record.get("rpcId")
    return ExchangeDetail(
        ref=ref,
        era=rec.text(record.get("era")) or "unknown",
        method=rec.method(record),
        name=rec.target_name(record),
        rpc_id="" if rpc_id is None else rec.text(rpc_id),
        status=rec.status(record),
        latency_ms=rec.latency_ms(record),
        findings=tuple((str(f["rule"]), rec.strength(f), rec.text(f.get("message")))
                       for f in rec.findings(record)),
        request_line=line,
        request_headers=_headers(ingress.get("headers"), bounds.headers, "request", cut),
        request_body=_cut(_body(ingress, "request body", cut), bounds.body_chars,
                          "request body", cut),
        response_headers=_headers(origin.get("headers"), bounds.headers, "response", cut),
        response_body=_cut(_body(origin, "response body", cut), bounds.body_chars,
                           "response body", cut),
        events=tuple(shown),
        event_count=len(raw_events),
        tap_error="" if tap_error is None else _json_text(tap_error),
        cut=tuple(cut),
    )
