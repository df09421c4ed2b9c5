"""HTTP-level rules of Streamable HTTP: answers that carry no JSON-RPC, and non-POST methods.

An HTTP 401, 403, 404, 405, 413, 415, 429 or 5xx without a JSON-RPC body is a plain HTTP
answer, judged by the rules that apply to it (a 401 must carry ``WWW-Authenticate``) and
never as malformed JSON-RPC. GET, DELETE and OPTIONS are judged by era: a legacy GET must
open an SSE stream or say 405; a modern-only endpoint should answer GET and DELETE with 405.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from ipaddress import ip_address
from typing import Any
from urllib.parse import urlsplit

from mcp_tap.core import schema
from mcp_tap.core.catalog import finding
from mcp_tap.core.eras import (
    BATCH_VERSIONS,
    ERA_LEGACY,
    ERA_MODERN,
    HEADER_PROTOCOL_VERSION,
    HEADER_SESSION_ID,
    HEADERLESS_REVISIONS,
    LEGACY_VERSIONS,
    MODERN_VERSIONS,
    Era,
)
from mcp_tap.core.findings import Finding
from mcp_tap.core.headers import HeaderMap, media_type
from mcp_tap.core.jsonrpc import (
    KIND_NOTIFICATION,
    KIND_REQUEST,
    KIND_RESPONSE,
    classify,
    parse_json,
)
from mcp_tap.core.results import server_request_problem
from mcp_tap.core.sse import SSEEvent, unbatched

REQUEST_MEDIA_TYPES = ("application/json", "text/event-stream")
# Statuses a server gives before (or instead of) reading the JSON-RPC body: authentication,
# authorization or Origin refusal, method not allowed, too large, wrong media type, rate limit.
# A rejected request answered with one of them was not answered wrongly.
# 406: the client's Accept refused (no MCP page names the answer to a bad Accept; checked
# before the body like 415).
PRE_BODY_STATUSES = frozenset({401, 403, 405, 406, 413, 415, 429})

_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain"})


def jsonrpc_shaped(body: bytes) -> bool:
    """Whether a body is (meant as) JSON-RPC: a JSON object with ``jsonrpc``, or a list."""
    if not body.strip():
        return False
    try:
        data = parse_json(body)
    except ValueError:
        return False
    return isinstance(data, list) or (isinstance(data, dict) and "jsonrpc" in data)


def http_only(status: int, body: bytes) -> bool:
    """Whether an answer is a plain HTTP error: status >= 400 and no JSON-RPC body."""
    return status >= 400 and not jsonrpc_shaped(body)


def challenge(status: int, headers: HeaderMap, where: str) -> list[Finding]:
    """A 401 must carry a ``WWW-Authenticate`` challenge (RFC 9110 15.5.2, basic/authorization)."""
    if status == 401 and not (headers.get("www-authenticate") or "").strip():
        return [
            finding(
                "response.unauthorized.challenge",
                "HTTP 401 without a WWW-Authenticate challenge",
                where,
            )
        ]
    return []


def accept_problem(headers: HeaderMap, http_method: str, era: Era) -> Finding | None:
    """The client's ``Accept`` must list both media types (a legacy GET: the event stream)."""
    method = http_method.upper()
    if method == "POST":
        wanted: tuple[str, ...] = REQUEST_MEDIA_TYPES
    elif method == "GET" and era is ERA_LEGACY:
        wanted = ("text/event-stream",)
    else:
        return None
    values = tuple(headers.values_of("accept"))
    missing = missing_media_types(values, wanted)
    if not missing:
        return None
    shown = ", ".join(values) or "(none)"
    return finding(
        "request.accept",
        f"Accept {shown!r} does not list {' and '.join(missing)}",
        "ingress",
    )


@functools.lru_cache(maxsize=256)  # clients send the same Accept on every request
def missing_media_types(values: tuple[str, ...], wanted: tuple[str, ...]) -> tuple[str, ...]:
    """The media types of ``wanted`` that the ``Accept`` values do not list."""
    listed = _listed(values)
    return tuple(m for m in wanted if m not in listed)


@functools.lru_cache(maxsize=256)
def _listed(values: tuple[str, ...]) -> frozenset[str]:
    """The media types ``Accept`` values list."""
    return frozenset(media_type(part) for v in values for part in v.split(","))


def _host_of(value: str) -> str | None:
    try:
        host = urlsplit(value if "//" in value else f"//{value}").hostname
    except ValueError:
        return None
    return host.lower() if host else None


def _loopback(host: str) -> bool:
    if host in _LOOPBACK_NAMES or host.endswith(".localhost"):
        return True
    try:
        return ip_address(host).is_loopback
    except ValueError:
        return False


def origin_invalid(headers: HeaderMap, allowed: Iterable[str] | None = None) -> str | None:
    """Why the request's ``Origin`` is one the server must refuse, or ``None``.

    Which origins a server accepts is its own policy. With ``allowed`` (exact origins) an
    origin outside it is invalid; without it, only the DNS-rebinding case the rule exists for
    is known to be invalid: a non-loopback origin on a request whose ``Host`` is loopback.
    """
    origin = headers.get("origin")
    if origin is None:
        return None
    if allowed is not None:
        allowed = tuple(allowed)
        return None if origin in allowed else f"Origin {origin!r} is not in the allowlist"
    host = _host_of(headers.get("host") or "")
    origin_host = _host_of(origin) if origin != "null" else None
    if host is None or not _loopback(host):
        return None
    if origin_host is not None and _loopback(origin_host):
        return None
    return f"Origin {origin!r} on a request to the loopback host {host!r}"


def check_origin(
    headers: HeaderMap,
    status: int | None,
    where: str,
    allowed: Iterable[str] | None = None,
    negotiated: str | None = None,
) -> tuple[list[Finding], bool]:
    """Judge the answer to a request with an invalid ``Origin``: it must be HTTP 403.

    Returns the findings and whether the answer was the owed refusal (then nothing else
    about the answer is judged: its body MAY be a JSON-RPC error without ``id``). In a
    session of 2025-03-26 (``negotiated``), whose page says only that servers MUST validate
    the ``Origin``, any 4xx is that refusal; a success is still a finding.
    """
    why = origin_invalid(headers, allowed)
    if why is None or status is None:
        return [], False
    if status == 403 or (negotiated in HEADERLESS_REVISIONS and 400 <= status < 500):
        return [], True
    owed = "a 4xx refusal" if negotiated in HEADERLESS_REVISIONS else "403"
    return [finding("response.origin", f"{why} was answered HTTP {status}, not {owed}",
                    where)], False


def legacy_version_invalid(headers: HeaderMap, negotiated: str | None) -> Finding | None:
    """A legacy request's ``MCP-Protocol-Version`` that names no protocol revision
    (2025-11-25 transports "Protocol Version Header"), or ``None``. A session of a revision
    that defines no such header (2025-03-26) is not judged on it; a modern revision on a
    legacy exchange is ``request.legacy-leak``'s."""
    if negotiated in HEADERLESS_REVISIONS:
        return None
    values = headers.values_of(HEADER_PROTOCOL_VERSION)
    if not values:
        return None
    header = values[0].strip(" \t")
    if header in LEGACY_VERSIONS or header in MODERN_VERSIONS:
        return None
    return finding(
        "request.version.invalid",
        f"{HEADER_PROTOCOL_VERSION}: {header!r} names no protocol revision",
        "ingress",
    )


def legacy_version_answer(invalid: Finding, status: int, where: str) -> list[Finding]:
    """The answer owed to a legacy request with an invalid ``MCP-Protocol-Version``: "it
    MUST respond with 400 Bad Request" (2025-11-25 transports "Protocol Version Header").
    An answer given before the request was read (authentication, rate limit, an unknown
    session's 404) is not judged."""
    if status == 400 or status in PRE_BODY_STATUSES or status == 404:
        return []
    return [
        finding(
            "response.legacy-version-status",
            f"{invalid.message}, answered HTTP {status} (owed 400)",
            where,
        )
    ]


def session_id_problem(headers: HeaderMap, where: str) -> list[Finding]:
    """A legacy session id must be visible ASCII (0x21-0x7E) only."""
    value = headers.get(HEADER_SESSION_ID)
    if value is None or (value and all("!" <= ch <= "~" for ch in value)):
        return []
    return [
        finding(
            "response.session-id",
            f"{HEADER_SESSION_ID} {value!r} holds characters outside 0x21-0x7E",
            where,
        )
    ]


def check_non_post(
    http_method: str,
    era: Era,
    request_headers: HeaderMap,
    status: int | None,
    headers: HeaderMap,
    events: Iterable[SSEEvent] | None,
    where: str,
    version: str | None = None,
    capabilities: dict[str, Any] | None = None,
) -> list[Finding]:
    """Judge a GET, DELETE or OPTIONS exchange in its era (no JSON-RPC request body);
    ``version`` is a legacy session's negotiated revision and ``capabilities`` what its
    client declared at ``initialize``, when known."""
    method = http_method.upper()
    found: list[Finding] = []
    if status is None:
        return found
    found += challenge(status, headers, where)
    if method not in ("GET", "DELETE"):
        return found  # OPTIONS (CORS preflight) and others: HTTP's business, not MCP's.
    if era is ERA_LEGACY:
        invalid = legacy_version_invalid(request_headers, version)
        if invalid is not None:
            # Every request, GET and DELETE too, with an invalid version is owed 400.
            return [*found, invalid, *legacy_version_answer(invalid, status, where)]
    if era is ERA_MODERN:
        if status != 405 and status not in PRE_BODY_STATUSES:
            found.append(
                finding(
                    "response.method-not-allowed",
                    f"{method} to a modern-only endpoint answered HTTP {status}, not 405",
                    where,
                )
            )
        return found
    if era is not ERA_LEGACY or method != "GET" or not 200 <= status < 300:
        return found
    if headers.content_type() != "text/event-stream":
        found.append(
            finding(
                "response.get-stream",
                f"a legacy GET answered HTTP {status} with "
                f"{headers.content_type() or 'no content type'}, not an SSE stream",
                where,
            )
        )
        return found
    # A resumption may carry the resumed request's response.
    resumes = "last-event-id" in request_headers
    answered = False
    if events is not None and version in BATCH_VERSIONS:
        events = unbatched(events)  # 2025-03-26: its messages MAY be batched
    for index, event in enumerate(events or ()):
        message = _message(event.data)
        kind = classify(message).kind if message is not None else None
        if kind is KIND_RESPONSE and not resumes and not answered:
            answered = True
            found.append(
                finding(
                    "sse.get-response",
                    "a JSON-RPC response on a GET stream that resumes nothing "
                    "(no Last-Event-ID)",
                    f"{where} sse[{index}]",
                )
            )
        elif kind is KIND_REQUEST and capabilities is not None:
            bad = server_request_problem(message["method"], message.get("params"), capabilities)
            if bad is not None:
                found.append(finding(bad[0], bad[1], f"{where} sse[{index}]"))
        elif kind is KIND_NOTIFICATION:
            # The legacy listen stream's notifications are messages of the session's
            # revision too (wire.schema.notification).
            problem = schema.notification_problem(version or LEGACY_VERSIONS[0], message)
            if problem:
                found.append(
                    finding("wire.schema.notification", problem, f"{where} sse[{index}]")
                )
    return found


def _message(data: str) -> Any:
    """An event's JSON-RPC message (None when the event carries none or no JSON)."""
    if not data:
        return None
    try:
        return parse_json(data)
    except ValueError:
        return None
