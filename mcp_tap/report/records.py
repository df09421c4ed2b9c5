"""Reading one evidence record defensively: evidence is attacker controlled and may be old.

Every accessor tolerates a missing or mistyped field (a record from an older format, a
damaged bundle read leniently) and returns a neutral value instead of raising.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from mcp_tap.core.catalog import CATALOG

_SAFE_ID = re.compile(r"[0-9A-Za-z_-]{1,64}")


def obj(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def number(value: Any) -> float | None:
    """``value`` as a float if it is a JSON number (a boolean is not), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def text(value: Any) -> str:
    """``value`` as text ("" for None)."""
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def findings(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The well-formed findings a record carries."""
    raw = record.get("findings")
    if not isinstance(raw, list):
        return []
    return [f for f in raw if isinstance(f, dict) and isinstance(f.get("rule"), str)]


def strength(finding: Mapping[str, Any]) -> str:
    """A finding's strength; evidence from before strengths existed has the catalog's."""
    raw = finding.get("strength")
    if raw in ("must", "should"):
        return str(raw)
    entry = CATALOG.get(str(finding.get("rule")))
    return str(entry.strength) if entry is not None else "must"


def citation(rule: str) -> str:
    """Where the spec states ``rule`` (``page § section``), or "" for an unknown id."""
    entry = CATALOG.get(rule)
    return entry.cite if entry is not None else ""


def method(record: Mapping[str, Any]) -> str:
    """The JSON-RPC method, or the HTTP method of a request without one (a GET stream)."""
    name = text(record.get("method"))
    if name:
        return name
    http_method = text(obj(record.get("ingress")).get("httpMethod"))
    return f"({http_method})" if http_method else "-"


def target_name(record: Mapping[str, Any]) -> str:
    """The tool / prompt name or resource URI the request addressed, if any."""
    ingress = obj(record.get("ingress"))
    params = obj(obj(ingress.get("body")).get("params"))
    for key in ("name", "uri"):
        if isinstance(params.get(key), str):
            return str(params[key])
    for pair in ingress.get("headers") or []:
        if isinstance(pair, list) and len(pair) == 2 and str(pair[0]).lower() == "mcp-name":
            return text(pair[1])
    return ""


def latency_ms(record: Mapping[str, Any]) -> float | None:
    """Received at the tap to the last byte sent to the client (or from the origin)."""
    start = number(obj(record.get("ingress")).get("receivedAt"))
    end = number(obj(record.get("egress")).get("endAt"))
    if end is None:
        end = number(obj(record.get("origin")).get("endAt"))
    if start is None or end is None or end < start:
        return None
    return (end - start) * 1000.0


def first_event_ms(record: Mapping[str, Any]) -> float | None:
    """Received at the tap to the origin's first SSE event, if the answer was a stream."""
    events = obj(record.get("origin")).get("sse")
    if not isinstance(events, list) or not events:
        return None
    start = number(obj(record.get("ingress")).get("receivedAt"))
    first = number(obj(events[0]).get("at"))
    if start is None or first is None:
        return None
    return max(0.0, (first - start) * 1000.0)


def events(record: Mapping[str, Any]) -> list[Any]:
    """The origin's SSE events as recorded (empty for a JSON answer)."""
    raw = obj(record.get("origin")).get("sse")
    return raw if isinstance(raw, list) else []


def status(record: Mapping[str, Any]) -> str:
    """The origin's status, or ``origin → egress`` when the client got another."""
    origin = obj(record.get("origin")).get("status")
    egress = obj(record.get("egress")).get("status")
    if origin is None and egress is None:
        return "-"
    if origin == egress or origin is None or egress is None:
        return text(origin if origin is not None else egress)
    return f"{origin} \u2192 {egress}"


def hop(record: Mapping[str, Any]) -> str:
    """The hop that recorded the exchange ("-" when unnamed)."""
    return text(record.get("hop")) or "-"


def anchor(bundle: int, exchange_id: str) -> str:
    """The page-local id of an exchange: unique per bundle, safe in an id and a fragment."""
    safe = exchange_id if _SAFE_ID.fullmatch(exchange_id) else hashlib.sha256(
        exchange_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"x{bundle}-{safe}"


def rule_anchor(rule: str) -> str:
    """The page-local id of a rule's group in the findings section."""
    safe = rule if re.fullmatch(r"[0-9A-Za-z_.-]{1,80}", rule) else hashlib.sha256(
        rule.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"rule-{safe}"
