"""What a box between two tap hops changed, path by path, and what kind of change it is.

Sans-IO: two hops' views of one exchange in, :class:`Change` values out. A request change
goes from what entered the box (the outer hop's forwarded view) to what left it (the inner
hop's received view); a response change from what the origin answered (the inner hop's
origin view) to what the box answered (the outer hop's origin view).

Each change has a ``path``: an RFC 6901 JSON pointer into the JSON-RPC message (the
request, or the final response of the answer), ``header:NAME`` for a header, ``http:status``
for the status, ``stream:METHOD`` for a count of stream messages of one method. Its ``cls``
says what kind of change it is (:data:`CLASSES`); what a class means depends on the box
(:mod:`mcp_tap.core.hops`): an HTTP box must pass bodies unchanged, an MCP gateway is a
server to the client and a client to the origin and changes some things by being one.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from mcp_tap.core.eras import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
)
from mcp_tap.core.headers import HeaderMap


class _Absent:
    """The value on the side where a member does not exist."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Final = _Absent()
"""``Change.before`` of an added member, ``Change.after`` of a removed one."""

REQUEST: Final = "request"
RESPONSE: Final = "response"
ADDED: Final = "added"
REMOVED: Final = "removed"
CHANGED: Final = "changed"

MAX_CHANGES: Final = 200
"""Changes kept per comparison; the rest are counted (:attr:`Diff.dropped`)."""
_MAX_DEPTH = 32  # deeper than this a difference is one change of the whole subtree

# -- the classes -------------------------------------------------------------------------

CLASSES: Final[Mapping[str, str]] = {
    "jsonrpc-id": "the JSON-RPC id",
    "identity": "clientInfo / serverInfo",
    "trace": "trace context (traceparent, tracestate, baggage)",
    "own-meta": "`_meta` under a non-reserved prefix, or a progress token of the box's own",
    "session": "the Mcp-Session-Id header",
    "transport": "an HTTP header that is not an MCP one",
    "credentials": "Authorization / Cookie headers",
    "protocol-version": "the protocol version (body field or era of the request)",
    "capability-widened": "a client capability declared to the origin that the client did "
                          "not declare",
    "capability-narrowed": "a client capability the client declared, not passed on",
    "param-added": "a request parameter the client did not send (a log level, ...)",
    "param-changed": "a request parameter the client sent, changed or dropped",
    "mirrored-header": "an MCP header mirroring the body (method, name, version, params)",
    "server-capabilities": "server capabilities, instructions",
    "tool-metadata": "a tool's title, description, annotations, icons or `_meta`",
    "tools": "a tool added, removed or renamed, or its input or output schema",
    "result": "any other member of a result, or a result that became an error",
    "error-recoded": "the JSON-RPC error code, or an error that became a result",
    "error-detail": "the error's message or data",
    "status": "the HTTP status",
    "stream": "stream messages (notifications, requests) added or dropped",
    "envelope": "the method or the jsonrpc member",
}
"""Every change class and what it covers (docs/rules.md shows this table)."""

# -- what each class means per kind of box ------------------------------------------------

BOX_HTTP: Final = "http"
BOX_GATEWAY: Final = "mcp-gateway"
BOX_KINDS: Final = (BOX_HTTP, BOX_GATEWAY)
EXPECTED: Final = "expected"
RECORDED: Final = "recorded"

GATEWAY_FINDINGS: Final[Mapping[str, str]] = {
    "capability-widened": "hop.gateway.capability-widened",
    "param-added": "hop.gateway.param-added",
    "error-recoded": "hop.gateway.error-recoded",
}
"""Change classes that are findings around an MCP gateway, and their rules."""

_BASE = "2026-07-28/basic/index.mdx"
GATEWAY_WHY: Final[Mapping[str, str]] = {
    "jsonrpc-id": f"{_BASE} § Requests: the gateway sends the origin its own requests, and "
                  "\"the request ID MUST NOT match the ID of any other request the sender has "
                  "issued\" is the sender's rule",
    "identity": f"{_BASE} § `_meta`: clientInfo / serverInfo \"are self-reported by the "
                "sender\"; the gateway is the sender",
    "trace": f"{_BASE} § `_meta` (OpenTelemetry trace context): each hop continues the trace",
    "own-meta": f"{_BASE} § `_meta`: \"third-party extensions use their own vendor prefix\"; "
                "2026-07-28/basic/patterns/progress.mdx: progress tokens are the requester's",
    "session": "2025-11-25/basic/transports.mdx § Session Management: the server assigns "
               "the session; the gateway holds its own with the origin",
    "transport": "RFC 9110 § 7.6: an intermediary rewrites connection and routing fields",
    "credentials": "2026-07-28/basic/authorization/security-considerations.mdx § Access "
                   "Token Privilege Restriction: \"The MCP server MUST NOT pass through the "
                   "token\" it received",
    "protocol-version": "2026-07-28/basic/versioning.mdx: the gateway, a client, speaks a "
                        "version the origin supports; each hop's exchanges are judged in "
                        "their own era",
    "capability-widened": "finding `hop.gateway.capability-widened` (should)",
    "capability-narrowed": f"{_BASE} § `_meta`: declaring less is always safe for the origin "
                           "(\"A server MUST NOT rely on capabilities the client has not "
                           "declared\"); the client loses a feature: block it by policy",
    "param-added": "finding `hop.gateway.param-added` (should)",
    "param-changed": "not forbidden: the gateway writes its own requests "
                     "(2026-07-28/server/tools.mdx § Tool Names: proxies SHOULD disambiguate "
                     "names, e.g. by a prefix)",
    "mirrored-header": "recorded when it mirrors the gateway's own body; dropped or "
                       "rewritten alone: `hop.header-changed` (must; 2026-07-28/basic/"
                       "transports/streamable-http.mdx § Standard Request Headers)",
    "server-capabilities": "2026-07-28/server/discover.mdx: the gateway is the client's "
                           "server and answers with its own capabilities",
    "tool-metadata": "not forbidden: the gateway lists its own tools (2026-07-28/server/"
                     "tools.mdx § Listing Tools)",
    "tools": "not forbidden (2026-07-28/server/tools.mdx § Tool Names: proxies SHOULD "
             "disambiguate; § x-mcp-header: a client MUST drop a tool with an invalid one)",
    "result": "not forbidden: the gateway answers its own client; each hop's results are "
              "judged by the response rules",
    "error-recoded": "finding `hop.gateway.error-recoded` (should); an origin 4xx error "
                     "turned into a 5xx is `hop.error-collapse` (must) for both kinds",
    "error-detail": "not forbidden: messages are for humans (basic/index.mdx § Error Responses)",
    "status": "each hop's status is judged against its own message (`response.http-status`)",
    "stream": "each hop's stream is judged on its own (`sse.*`, "
              "`response.notification.*`)",
    "envelope": "each hop's envelope is judged on its own (`request.envelope`)",
}
"""Why each class means what it does around an MCP gateway (docs/rules.md)."""

_GATEWAY_EXPECTED = ("jsonrpc-id", "identity", "trace", "own-meta", "session", "transport",
                     "credentials")

DISPOSITIONS: Final[Mapping[str, Mapping[str, str]]] = {
    BOX_HTTP: {
        **{c: "hop.body-changed" for c in CLASSES},
        "mirrored-header": "hop.header-changed",
        "session": "hop.header-changed",
        "status": "hop.status-changed",
        "trace": EXPECTED,
        "transport": EXPECTED,
        "credentials": RECORDED,
    },
    BOX_GATEWAY: {
        **{c: RECORDED for c in CLASSES},
        **{c: EXPECTED for c in _GATEWAY_EXPECTED},
        **GATEWAY_FINDINGS,
    },
}
"""Per box kind, per change class: a rule id (a finding), ``expected`` or ``recorded``."""

_TOOL_METADATA = frozenset({"title", "description", "annotations", "icons", "_meta"})
_TRACE_KEYS = frozenset({"traceparent", "tracestate", "baggage"})
_CREDENTIALS = frozenset({"authorization", "cookie", "set-cookie", "proxy-authorization"})
_MIRRORED = frozenset({"mcp-protocol-version", "mcp-method", "mcp-name"})
# Framing and per-connection fields: every box rewrites them; never listed as changes.
_NOT_COMPARED = frozenset({
    "connection", "keep-alive", "content-length", "transfer-encoding", "te", "trailer",
    "upgrade", "proxy-connection", "date", "host",
})
# Members where a whole object added or removed is listed member by member (so a widened
# capability names its own path, not its parent's).
_EXPAND = frozenset({
    "/params/_meta", "/params/_meta/" + META_CLIENT_CAPABILITIES.replace("/", "~1"),
    "/params/capabilities", "/result/capabilities", "/result/_meta",
})


@dataclass(frozen=True, slots=True)
class Change:
    """One difference between what entered the box and what left it."""

    direction: str
    path: str
    kind: str
    before: Any = ABSENT
    after: Any = ABSENT
    cls: str = ""


@dataclass(frozen=True, slots=True)
class Diff:
    """The changes of one pair (at most :data:`MAX_CHANGES`) and how many more there were."""

    changes: tuple[Change, ...] = ()
    dropped: int = 0


# -- JSON pointers -----------------------------------------------------------------------


def escape(token: str) -> str:
    """One RFC 6901 reference token (``~`` as ``~0``, ``/`` as ``~1``)."""
    return token.replace("~", "~0").replace("/", "~1")


def tokens(path: str) -> list[str]:
    """The unescaped reference tokens of a JSON pointer (``""`` is the whole document)."""
    if not path:
        return []
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def resolve(document: Any, path: str) -> Any:
    """The value at ``path`` in ``document``, or :data:`ABSENT`."""
    node = document
    for token in tokens(path):
        if isinstance(node, dict):
            node = node.get(token, ABSENT)
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return ABSENT
        if node is ABSENT:
            return ABSENT
    return node


# -- the structural diff -------------------------------------------------------------------


def _same(a: Any, b: Any) -> bool:
    # JSON equality: true is not 1, 1.0 is 1. Python's == holds True == 1 inside containers
    # too, so equal containers are confirmed by their JSON text (unequal text is walked, and
    # only the leaves decide).
    if a is b:
        return True
    if isinstance(a, dict | list):
        if a != b:
            return False
        try:
            return orjson.dumps(a) == orjson.dumps(b)
        except TypeError:  # a value orjson cannot write: walk it
            return False
    return a == b and (type(a) is bool) == (type(b) is bool)


def _keyed(items: list[Any]) -> dict[str, int] | None:
    """Index of a list of objects by their ``name`` (or ``uri``) when every one has a
    distinct one: such lists (tools, prompts, resources) are compared entry by entry."""
    index: dict[str, int] = {}
    for i, item in enumerate(items):
        key = item.get("name", item.get("uri")) if isinstance(item, dict) else None
        if not isinstance(key, str) or key in index:
            return None
        index[key] = i
    return index


def _walk(before: Any, after: Any, path: str, depth: int) -> Iterator[tuple[str, str, Any, Any]]:
    """(kind, path, before, after) of every difference, in document order."""
    if _same(before, after):
        return
    if depth < _MAX_DEPTH and isinstance(before, dict) and isinstance(after, dict):
        for key in (*before, *(k for k in after if k not in before)):
            sub = f"{path}/{escape(str(key))}"
            b, a = before.get(key, ABSENT), after.get(key, ABSENT)
            if b is ABSENT or a is ABSENT:
                present = a if b is ABSENT else b
                if sub in _EXPAND and isinstance(present, dict) and present:
                    yield from _walk(before.get(key, {}), after.get(key, {}), sub, depth + 1)
                else:
                    yield (ADDED if b is ABSENT else REMOVED), sub, b, a
            else:
                yield from _walk(b, a, sub, depth + 1)
        return
    if depth < _MAX_DEPTH and isinstance(before, list) and isinstance(after, list):
        yield from _walk_list(before, after, path, depth)
        return
    yield CHANGED, path, before, after


def _walk_list(
    before: list[Any], after: list[Any], path: str, depth: int
) -> Iterator[tuple[str, str, Any, Any]]:
    old, new = _keyed(before), _keyed(after)
    if old is not None and new is not None:
        # Entries by name: a removed entry has its index in the list before, an added or
        # changed one its index in the list after (the pointer is into that document).
        for key, i in old.items():
            if key not in new:
                yield REMOVED, f"{path}/{i}", before[i], ABSENT
        for key, j in new.items():
            if key in old:
                yield from _walk(before[old[key]], after[j], f"{path}/{j}", depth + 1)
            else:
                yield ADDED, f"{path}/{j}", ABSENT, after[j]
        return
    for i in range(max(len(before), len(after))):
        if i >= len(before):
            yield ADDED, f"{path}/{i}", ABSENT, after[i]
        elif i >= len(after):
            yield REMOVED, f"{path}/{i}", before[i], ABSENT
        else:
            yield from _walk(before[i], after[i], f"{path}/{i}", depth + 1)


# -- classes -------------------------------------------------------------------------------

_CAPS = escape(META_CLIENT_CAPABILITIES)


def _reserved(key: str) -> bool:
    """Whether a ``_meta`` key's prefix is reserved for MCP (its second label is
    ``modelcontextprotocol`` or ``mcp``; basic/index.mdx § ``_meta``)."""
    prefix, slash, _ = key.partition("/")
    if not slash:
        return False
    labels = prefix.split(".")
    return len(labels) >= 2 and labels[1] in ("modelcontextprotocol", "mcp")


def _capability(kind: str, before: Any, after: Any) -> str:
    if kind == ADDED:
        return "capability-widened"
    if kind == REMOVED:
        return "capability-narrowed"
    return "capability-widened" if after and not before else "capability-narrowed"


def _request_meta(key: str, kind: str, before: Any, after: Any) -> str:
    if key == META_CLIENT_INFO:
        return "identity"
    if key == META_CLIENT_CAPABILITIES:
        return _capability(kind, before, after)
    if key == META_PROTOCOL_VERSION:
        return "protocol-version"
    if key in _TRACE_KEYS:
        return "trace"
    if kind == REMOVED:
        return "param-changed"  # the client's own metadata, dropped
    if key == "progressToken":
        # A token of the box's own (it answers progress for its own request); a token the
        # client sent and the box replaced is the same kind of change.
        return "own-meta"
    if key == META_LOG_LEVEL:
        return "param-added"  # a log level the client did not ask for, or a wider one
    if _reserved(key):
        return "param-added" if kind == ADDED else "param-changed"
    return "own-meta"


def request_class(path: str, kind: str, before: Any, after: Any) -> str:
    """The class of a change at ``path`` of the request (see :data:`CLASSES`)."""
    parts = tokens(path)
    if not parts or parts[0] in ("jsonrpc", "method"):
        return "envelope"
    if parts[0] == "id":
        return "jsonrpc-id"
    if parts[0] != "params" or len(parts) == 1:
        return "param-added" if kind == ADDED else "param-changed"
    if parts[1] == "_meta" and len(parts) >= 3:
        if parts[2] == META_CLIENT_CAPABILITIES and len(parts) >= 4:
            return _capability(kind, before, after)
        return _request_meta(parts[2], kind, before, after)
    # The handshake era's initialize carries these as parameters.
    if parts[1] == "clientInfo":
        return "identity"
    if parts[1] == "capabilities":
        return _capability(kind, before, after)
    if parts[1] == "protocolVersion":
        return "protocol-version"
    return "param-added" if kind == ADDED else "param-changed"


def _result_class(parts: list[str]) -> str:
    if len(parts) < 2:
        return "result"
    member = parts[1]
    if member == "_meta":
        key = parts[2] if len(parts) > 2 else ""
        if key == META_SERVER_INFO:
            return "identity"
        return "result" if _reserved(key) or not key else "own-meta"
    if member == "serverInfo":
        return "identity"
    if member in ("capabilities", "instructions"):
        return "server-capabilities"
    if member in ("protocolVersion", "supportedVersions"):
        return "protocol-version"
    if member == "tools" and len(parts) >= 4 and parts[3] in _TOOL_METADATA:
        return "tool-metadata"
    if member == "tools":
        return "tools"
    return "result"


def response_class(path: str, kind: str) -> str:
    """The class of a change at ``path`` of the final response message."""
    parts = tokens(path)
    if not parts or parts[0] == "jsonrpc":
        return "envelope"
    if parts[0] == "id":
        return "jsonrpc-id"
    if parts[0] == "result":
        # A result where the origin answered an error: the error did not reach the client.
        return "error-recoded" if kind == ADDED and len(parts) == 1 else _result_class(parts)
    if parts[0] == "error":
        if len(parts) == 1:
            return "result" if kind == ADDED else "error-recoded"
        return "error-recoded" if parts[1] == "code" else "error-detail"
    return "envelope"


def header_class(name: str) -> str:
    """The class of a change of header ``name`` (lower case)."""
    if name in _MIRRORED or name.startswith("mcp-param-"):
        return "mirrored-header"
    if name == "mcp-session-id":
        return "session"
    if name in _TRACE_KEYS:
        return "trace"
    if name in _CREDENTIALS:
        return "credentials"
    return "transport"


# -- one pair ---------------------------------------------------------------------------


def _final(messages: Sequence[Any]) -> Any:
    """The answer's final response (a result or error, not a request or notification)."""
    for m in reversed(messages):
        if isinstance(m, dict) and "method" not in m and ("result" in m or "error" in m):
            return m
    return ABSENT


def _stream_counts(messages: Sequence[Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for m in messages:
        if isinstance(m, dict) and isinstance(m.get("method"), str):
            counts[m["method"]] = counts.get(m["method"], 0) + 1
    return counts


def _header_changes(direction: str, before: HeaderMap, after: HeaderMap) -> Iterator[Change]:
    old, new = before.by_name(), after.by_name()
    for name in (*old, *(n for n in new if n not in old)):
        if name in _NOT_COMPARED:
            continue
        b, a = list(old.get(name, ())), list(new.get(name, ()))
        if b == a:
            continue
        kind = ADDED if not b else REMOVED if not a else CHANGED
        yield Change(direction, f"header:{name}", kind,
                     b[0] if len(b) == 1 else (b or ABSENT),
                     a[0] if len(a) == 1 else (a or ABSENT), header_class(name))


def _body_changes(direction: str, before: Any, after: Any) -> Iterator[Change]:
    if before is ABSENT and after is ABSENT:
        return
    if before is ABSENT or after is ABSENT:
        kind = ADDED if before is ABSENT else REMOVED
        yield Change(direction, "", kind, before, after, "envelope")
        return
    for kind, path, b, a in _walk(before, after, "", 0):
        cls = (request_class(path, kind, b, a) if direction == REQUEST
               else response_class(path, kind))
        yield Change(direction, path, kind, b, a, cls)


def _stream_changes(before: Sequence[Any], after: Sequence[Any]) -> Iterator[Change]:
    old, new = _stream_counts(before), _stream_counts(after)
    for method in (*old, *(m for m in new if m not in old)):
        b, a = old.get(method, 0), new.get(method, 0)
        if b != a:
            kind = ADDED if not b else REMOVED if not a else CHANGED
            yield Change(RESPONSE, f"stream:{method}", kind, b, a, "stream")


def diff_pair(
    request_before: Any,
    request_after: Any,
    headers_before: HeaderMap,
    headers_after: HeaderMap,
    response_before: Sequence[Any],
    response_after: Sequence[Any],
    response_headers_before: HeaderMap | None = None,
    response_headers_after: HeaderMap | None = None,
    status_before: int | None = None,
    status_after: int | None = None,
) -> Diff:
    """Every change the box made to one exchange: the request (body, then headers), then the
    answer (status, final response, stream messages, headers); at most :data:`MAX_CHANGES`.
    A missing body is :data:`ABSENT` (or ``None``)."""
    found = _all_changes(
        _none_absent(request_before), _none_absent(request_after), headers_before,
        headers_after, response_before, response_after, response_headers_before,
        response_headers_after, status_before, status_after)
    kept: list[Change] = []
    dropped = 0
    for change in found:
        if len(kept) < MAX_CHANGES:
            kept.append(change)
        else:
            dropped += 1
    return Diff(tuple(kept), dropped)


def _none_absent(value: Any) -> Any:
    return ABSENT if value is None else value


def _all_changes(
    request_before: Any,
    request_after: Any,
    headers_before: HeaderMap,
    headers_after: HeaderMap,
    response_before: Sequence[Any],
    response_after: Sequence[Any],
    response_headers_before: HeaderMap | None,
    response_headers_after: HeaderMap | None,
    status_before: int | None,
    status_after: int | None,
) -> Iterator[Change]:
    yield from _body_changes(REQUEST, request_before, request_after)
    yield from _header_changes(REQUEST, headers_before, headers_after)
    if status_before is not None and status_after is not None and status_before != status_after:
        yield Change(RESPONSE, "http:status", CHANGED, status_before, status_after, "status")
    yield from _body_changes(RESPONSE, _final(response_before), _final(response_after))
    yield from _stream_changes(response_before, response_after)
    if response_headers_before is not None and response_headers_after is not None:
        yield from _header_changes(RESPONSE, response_headers_before, response_headers_after)
