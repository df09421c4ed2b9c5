"""HAR 1.2 from evidence: one entry per recorded exchange, as the client saw it.

``request`` is the ingress view (the client's request as the tap received it) and
``response`` the egress view's status and headers with the origin's recorded body (what
the tap forwarded). Headers and bodies are the evidence's, so they are already redacted;
bodies are re-serialised from the parsed, redacted record (compact JSON), never the wire
bytes. An SSE answer's content is the event stream rebuilt from its recorded events, and
``_mcpTap.sse`` keeps each event's arrival time in ms after the request was received.

Timings come from the record's clocks (``ingress.receivedAt``, ``ingress.forwardedAt``,
``origin.firstByteAt``, ``origin.endAt``): ``send`` is the tap receiving and forwarding the
request, ``wait`` the upstream's time to its first byte, ``receive`` the rest of the
answer; ``time`` is their sum, as HAR 1.2 requires. Custom fields start with ``_`` (HAR
1.2 "Custom Fields"): ``_mcpTap`` on an entry carries its exchange id, hop, era, method and
findings; on the log, the source bundles and how many records their gap records say were
lost (evidence lost is stated, not dropped).
"""

from __future__ import annotations

import datetime
import http
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final
from urllib.parse import parse_qsl, urlsplit

import orjson

from mcp_tap.core.headers import HeaderMap
from mcp_tap.evidence import answer_is_whole
from mcp_tap.version import __version__

HAR_VERSION: Final = "1.2"
_HTTP_VERSION: Final = "HTTP/1.1"  # the tap speaks HTTP/1.1 on both sides


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _num(value: Any) -> float | None:
    return float(value) if type(value) in (int, float) else None


def _iso(at: float) -> str:
    stamp = datetime.datetime.fromtimestamp(at, tz=datetime.UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z"


def _ms(start: float | None, end: float | None) -> float:
    if start is None or end is None:
        return -1.0
    return round(max(0.0, (end - start) * 1000.0), 3)


def _pairs(value: Any) -> list[tuple[str, str]]:
    if not isinstance(value, list):
        return []
    return [(str(p[0]), str(p[1])) for p in value if isinstance(p, list | tuple) and len(p) == 2]


def _headers(pairs: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"name": name, "value": value} for name, value in pairs]


def _text(body: Any) -> str | None:
    """The text of a recorded body: raw text as stored, JSON re-serialised compactly."""
    if body is None:
        return None
    if isinstance(body, dict) and set(body) == {"raw"} and isinstance(body["raw"], str):
        return body["raw"]
    return orjson.dumps(body).decode()


def _sse_text(events: Sequence[Any]) -> str:
    lines: list[str] = []
    for event in events:
        item = _obj(event)
        if item.get("id") is not None:
            lines.append(f"id: {item['id']}")
        if item.get("event") not in (None, "message"):
            lines.append(f"event: {item['event']}")
        data = item.get("data")
        text = data if isinstance(data, str) else orjson.dumps(data).decode()
        lines.extend(f"data: {line}" for line in text.split("\n"))
        lines.append("")
    return "".join(line + "\n" for line in lines)


def _url(ingress: Mapping[str, Any], headers: HeaderMap) -> str:
    host = headers.get("Host") or "localhost"
    path = str(ingress.get("path") or "/")
    return f"http://{host}{path if path.startswith('/') else '/' + path}"


def _status_text(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return ""


def entry(record: Mapping[str, Any]) -> dict[str, Any]:
    """The HAR entry of one ``exchange`` record."""
    ingress, origin, egress = (_obj(record.get(k)) for k in ("ingress", "origin", "egress"))
    tap_error = _obj(record.get("tapError"))
    request_pairs = _pairs(ingress.get("headers"))
    request_headers = HeaderMap.of(request_pairs)
    url = _url(ingress, request_headers)
    request: dict[str, Any] = {
        "method": str(ingress.get("httpMethod") or "POST"),
        "url": url,
        "httpVersion": _HTTP_VERSION,
        "cookies": [],
        "headers": _headers(request_pairs),
        "queryString": [{"name": k, "value": v}
                        for k, v in parse_qsl(urlsplit(url).query, keep_blank_values=True)],
        "headersSize": -1,
        "bodySize": ingress.get("bodySize") if isinstance(ingress.get("bodySize"), int) else -1,
    }
    body = _text(ingress.get("body"))
    if body is not None:
        request["postData"] = {"mimeType": request_headers.get("Content-Type") or "",
                               "text": body}
    status = egress.get("status", origin.get("status", tap_error.get("status")))
    status = status if isinstance(status, int) else 0
    response_pairs = _pairs(egress.get("headers") or origin.get("headers"))
    events = origin.get("sse")
    content: dict[str, Any] = {
        "size": origin.get("bodySize") if isinstance(origin.get("bodySize"), int) else 0,
        "mimeType": str(origin.get("contentType") or HeaderMap.of(response_pairs).get(
            "Content-Type") or ""),
    }
    received = _num(ingress.get("receivedAt"))
    if isinstance(events, list) and events:
        content["text"] = _sse_text(events)
    else:
        answer = _text(origin.get("body"))
        if answer is not None:
            content["text"] = answer
    if not answer_is_whole(origin):
        content["comment"] = "not kept whole in the evidence (capture cap, encoding or cut short)"
    response = {
        "status": status,
        "statusText": _status_text(status) if status else str(tap_error.get("reason") or ""),
        "httpVersion": _HTTP_VERSION,
        "cookies": [],
        "headers": _headers(response_pairs),
        "content": content,
        "redirectURL": "",
        "headersSize": -1,
        "bodySize": egress.get("bodySize") if isinstance(egress.get("bodySize"), int) else -1,
    }
    forwarded = _num(ingress.get("forwardedAt"))
    first = _num(origin.get("firstByteAt"))
    end = _num(origin.get("endAt")) or _num(egress.get("endAt"))
    send = _ms(received, forwarded)
    wait = _ms(forwarded if forwarded is not None else received, first)
    receive = _ms(first, end)
    timings = {"send": max(send, 0.0), "wait": max(wait, 0.0), "receive": max(receive, 0.0)}
    meta: dict[str, Any] = {
        "exchangeId": record.get("exchangeId"),
        "hop": record.get("hop"),
        "era": record.get("era"),
        "method": record.get("method"),
        "findings": record.get("findings") or [],
    }
    if tap_error:
        meta["tapError"] = tap_error
    if isinstance(events, list) and events:
        meta["sse"] = [{"ms": _ms(received, _num(_obj(e).get("at"))),
                        "event": _obj(e).get("event"), "id": _obj(e).get("id")}
                       for e in events]
    return {
        "startedDateTime": _iso(received if received is not None else 0.0),
        "time": round(sum(timings.values()), 3),
        "request": request,
        "response": response,
        "cache": {},
        "timings": timings,
        "_mcpTap": meta,
    }


def to_har(records: Iterable[Mapping[str, Any]],
           sources: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """A HAR 1.2 document of ``records`` (exchanges become entries, gaps are counted)."""
    entries: list[dict[str, Any]] = []
    lost = 0
    for record in records:
        kind = record.get("kind")
        if kind == "exchange":
            entries.append(entry(record))
        elif kind == "gap" and isinstance(record.get("lost"), int):
            lost += record["lost"]
    entries.sort(key=lambda e: e["startedDateTime"])
    log: dict[str, Any] = {
        "version": HAR_VERSION,
        "creator": {"name": "mcp-tap", "version": __version__},
        "entries": entries,
        "_mcpTap": {"sources": list(sources), "lost": lost},
    }
    if lost:
        log["comment"] = f"{lost} record(s) were lost while recording (see the gap records)"
    return {"log": log}
