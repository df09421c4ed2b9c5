"""The request ladder: judge one client request in its era.

Modern order (it decides the code, see docs/rules.md):

1. JSON parse and JSON-RPC envelope, then the ``_meta`` metadata types   (-32700/-32600/-32602)
2. ``MCP-Protocol-Version`` vs the body's version                       (-32020)
3. ``Mcp-Method`` vs ``method``                                          (-32020)
4. ``Mcp-Name`` vs the routed body value (after sentinel decoding), then
   ``Mcp-Param-*`` vs ``x-mcp-header`` arguments                         (-32020)
5. only then: is the agreed version supported?                          (-32022)

The first failing rung wins, as it does on a conforming server. The legacy branch is
separate: the handshake era has no per-request envelope, and modern metadata leaking into
it is its own finding.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mcp_tap.core import schema
from mcp_tap.core.catalog import finding
from mcp_tap.core.eras import (
    BATCH_VERSIONS,
    ERA_LEGACY,
    ERA_MODERN,
    HEADER_METHOD,
    HEADER_NAME,
    HEADER_PROTOCOL_VERSION,
    HEADERLESS_REVISIONS,
    HEADERLESS_VERSION,
    LEGACY_VERSIONS,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    MODERN_META_KEYS,
    MODERN_VERSIONS,
    NAME_ROUTED_PARAMS,
    REMOVED_IN_MODERN,
    TASKS_EXTENSION,
    Era,
    body_meta,
)
from mcp_tap.core.fastinit import FACTORY, fast_init, new_twin
from mcp_tap.core.findings import Finding
from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.jsonrpc import (
    KIND_INVALID,
    KIND_NOTIFICATION,
    KIND_REQUEST,
    KIND_RESPONSE,
    Classified,
    Kind,
    classify,
    json_type,
    make_classified,
)

# ParamHeader and param_headers re-exported: the probe and tests read declarations here.
from mcp_tap.core.mirrored import (
    ParamHeader as ParamHeader,
)
from mcp_tap.core.mirrored import (
    duplicate_routing_header,
    mirror_problem,
    name_header_problem,
    param_header_problem,
    single_value,
)
from mcp_tap.core.mirrored import (
    param_headers as param_headers,
)
from mcp_tap.core.sentinel import SENTINEL_PREFIX

WHERE = "ingress"


class _RequestContextTwin:
    """RequestContext's layout (fast_init checks it): make_request_context builds it."""

    __slots__ = ("era", "negotiated_version", "supported_versions", "tool_schemas")


def make_request_context(
    era: Era, supported_versions: tuple[str, ...] = MODERN_VERSIONS,
    tool_schemas: Mapping[str, Any] = FACTORY, negotiated_version: str | None = None,
) -> RequestContext:
    """``RequestContext(...)`` without ``type.__call__``."""
    made = new_twin(_RequestContextTwin)
    made.era = era
    made.supported_versions = supported_versions
    made.tool_schemas = {} if tool_schemas is FACTORY else tool_schemas
    made.negotiated_version = negotiated_version
    made.__class__ = RequestContext
    built: RequestContext = made
    return built


@fast_init(make_request_context)  # made per exchange: see core/fastinit.py
@dataclass(frozen=True, slots=True)
class RequestContext:
    """What the judge knows besides the request itself.

    ``tool_schemas`` maps tool names to their ``inputSchema`` (learned from ``tools/list``
    results or given by a fixture) for the ``Mcp-Param-*`` rung; ``negotiated_version`` is
    the legacy session's version when known.
    """

    era: Era
    supported_versions: tuple[str, ...] = MODERN_VERSIONS
    tool_schemas: Mapping[str, Any] = field(default_factory=dict)
    negotiated_version: str | None = None


class _RequestVerdictTwin:
    """RequestVerdict's layout (fast_init checks it): make_verdict builds one, then retypes it."""

    __slots__ = ("batch", "classified", "era", "findings", "version")


def make_verdict(
    classified: Classified, era: Era, version: str | None, findings: tuple[Finding, ...],
    batch: tuple[RequestVerdict, ...] = (),
) -> RequestVerdict:
    """``RequestVerdict(...)`` without ``type.__call__``."""
    made = new_twin(_RequestVerdictTwin)
    made.classified = classified
    made.era = era
    made.version = version
    made.findings = findings
    made.batch = batch
    made.__class__ = RequestVerdict
    built: RequestVerdict = made
    return built


@fast_init(make_verdict)  # made per exchange: see core/fastinit.py
@dataclass(frozen=True, slots=True)
class RequestVerdict:
    """The outcome of the ladder: the classified message, its era and version, findings."""

    classified: Classified
    era: Era
    version: str | None
    findings: tuple[Finding, ...]
    batch: tuple[RequestVerdict, ...] = ()

    @property
    def kind(self) -> Kind:
        """The message kind."""
        return self.classified.kind

    @property
    def method(self) -> str | None:
        """The JSON-RPC method, if any."""
        return self.classified.method

    @property
    def id(self) -> Any:
        """The request id (``None`` for notifications and unidentifiable requests)."""
        return self.classified.id if self.classified.kind is KIND_REQUEST else None

    @property
    def rejection(self) -> Finding | None:
        """The first request-side finding with a JSON-RPC code: what a server must answer."""
        for f in self.findings:
            if f.code is not None:
                return f
        return None


_VERSION_KEY = HEADER_PROTOCOL_VERSION.lower()  # the header index's keys are lowercase
_METHOD_KEY = HEADER_METHOD.lower()
_NAME_KEY = HEADER_NAME.lower()


def check_request(
    headers: HeaderMap,
    message: Any,
    ctx: RequestContext,
    *,
    parse_error: str | None = None,
) -> RequestVerdict:
    """Run the request ladder of ``ctx.era`` on one decoded request body.

    ``parse_error`` says the body was not JSON (``message`` is then ignored).
    """
    return request_verdict(
        headers,
        message,
        ctx.era,
        ctx.supported_versions,
        ctx.tool_schemas,
        ctx.negotiated_version,
        parse_error,
        body_meta(message),
    )


def request_verdict(
    headers: HeaderMap,
    message: Any,
    era: Era,
    supported_versions: tuple[str, ...],
    tool_schemas: Mapping[str, Any],
    negotiated_version: str | None,
    parse_error: str | None,
    meta: dict[str, Any] | None,
) -> RequestVerdict:
    """:func:`check_request` with :class:`RequestContext`'s fields as arguments (the judge's
    call: no context object per exchange); ``meta`` is ``body_meta(message)``."""
    if parse_error is not None:
        c = make_classified(KIND_INVALID, None, parse_error)
        found = finding("request.parse", parse_error, WHERE)
        return make_verdict(c, era, None, (found,))
    if era is ERA_LEGACY:
        return _legacy(headers, message, meta, negotiated_version)
    # The modern ladder: the envelope here, the routing rungs in _routing_problem, support
    # here. Each return builds the verdict itself (a closure made per request cost more).
    c = classify(message)
    kind, why = c.kind, c.problem
    raw_version = meta.get(META_PROTOCOL_VERSION) if meta is not None else None
    version = raw_version if isinstance(raw_version, str) else None
    if kind is KIND_INVALID:
        found = finding("request.envelope", why, WHERE)
        return make_verdict(c, ERA_MODERN, version, (found,))
    if kind is KIND_RESPONSE:
        found = finding(
            "request.envelope", "a modern client must not POST a JSON-RPC response", WHERE
        )
        return make_verdict(c, ERA_MODERN, version, (found,))
    if kind is KIND_NOTIFICATION:
        # The 2026-07-28 revision defines no header rules for notification POSTs; only
        # conflicting duplicates of the routing headers are judged (readers would disagree).
        dup = duplicate_routing_header(headers)
        return make_verdict(c, ERA_MODERN, version, (dup,) if dup else ())

    # Rungs 1-4: metadata types and the routing headers.
    problem = _routing_problem(headers, message, meta, version, tool_schemas)
    if problem is not None:
        return make_verdict(c, ERA_MODERN, version, (problem,))
    # A request: classify made sure its method is a non-empty string.
    method: str = message["method"]
    # Rung 5: support.
    if version not in supported_versions:
        found = finding(
            "request.version.unsupported",
            f"header and body agree on {version!r}, which is not supported "
            f"(supported: {', '.join(supported_versions)})",
            WHERE,
        )
        return make_verdict(c, ERA_MODERN, version, (found,))
    if method in REMOVED_IN_MODERN:
        found = finding(
            "request.method.removed", f"{method} does not exist in the modern era", WHERE
        )
        return make_verdict(c, ERA_MODERN, version, (found,))
    if method in TASKS_METHODS or method == "subscriptions/listen":
        undeclared = tasks_capability_problem(method, message.get("params"), meta)
        if undeclared:
            found = finding("request.capability.missing", undeclared, WHERE)
            return make_verdict(c, ERA_MODERN, version, (found,))
    schema_problem = schema.request_problem(method, version or "", message.get("params"))
    if schema_problem:
        found = finding("request.schema", schema_problem, WHERE)
        return make_verdict(c, ERA_MODERN, version, (found,))
    return make_verdict(c, ERA_MODERN, version, ())


def _routing_problem(
    headers: HeaderMap,
    message: Any,
    meta: dict[str, Any] | None,
    version: str | None,
    tool_schemas: Mapping[str, Any],
) -> Finding | None:
    """The first problem of a modern request's rungs 1-4 (metadata types, then the version,
    method, name and parameter headers against the body), or None."""
    # Rung 1: metadata types. The usual request first (meta is body_meta(message), so the
    # params and _meta objects exist): both keys, a string and an object, neither optional
    # key present; anything else is for _meta_problem to judge.
    if not (
        meta is not None
        and version is not None  # the caller's isinstance(meta[META_PROTOCOL_VERSION], str)
        and isinstance(meta.get(META_CLIENT_CAPABILITIES), dict)
        and META_CLIENT_INFO not in meta
        and META_LOG_LEVEL not in meta
    ):
        meta_problem = _meta_problem(message, meta)
        if meta_problem:
            return finding("request.meta.missing", meta_problem, WHERE)
    # Rung 2: version header. Rung 3: method header. The usual request has one value of
    # each, equal to the body's: mirror_problem's first case, tested here
    # (a specialisation: tests/core/test_core_routing_fast_path.py ties it to its source).
    by_name = headers.by_name()
    sent = by_name.get(_VERSION_KEY)
    if sent is None or len(sent) != 1 or sent[0].strip(" \t") != version:
        problem = mirror_problem(
            headers, HEADER_PROTOCOL_VERSION, version, "the _meta protocol version"
        )
        if problem:
            return problem
    # A request: classify made sure its method is a non-empty string.
    method: str = message["method"]
    sent = by_name.get(_METHOD_KEY)
    if sent is None or len(sent) != 1 or sent[0].strip(" \t") != method:
        problem = mirror_problem(headers, HEADER_METHOD, method, "the method")
        if problem:
            return problem
    # Rung 4: name header, then parameter headers (each called only for the methods it
    # judges: it has nothing to say about the others).
    routed = NAME_ROUTED_PARAMS.get(method)
    if routed is not None:
        # The usual Mcp-Name: one plain value (printable ASCII, not the sentinel), equal to
        # the routed param. name_header_problem's (and decode_header_value's) answer for it
        # is None; anything else goes to them.
        params = message.get("params")
        body_value = params.get(routed) if isinstance(params, dict) else None
        sent = by_name.get(_NAME_KEY)
        plain = sent[0].strip(" \t") if sent is not None and len(sent) == 1 else None
        if (
            plain is None
            or plain != body_value
            or not plain.isascii()
            or not plain.isprintable()
            or plain.startswith(SENTINEL_PREFIX)
        ):
            problem = name_header_problem(headers, message, method)
            if problem:
                return problem
        if method == "tools/call":
            problem = param_header_problem(headers, message, method, tool_schemas)
            if problem:
                return problem
    return None


TASKS_METHODS = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
"""The tasks extension's own requests (ext-tasks-draft "Error Handling")."""


def tasks_capability_problem(method: str, params: Any, meta: dict[str, Any] | None) -> str:
    """Why a server owes -32021 to this request (ext-tasks-draft "Error Handling"), or "".

    ``tasks/get``, ``tasks/update`` and ``tasks/cancel``, and a ``subscriptions/listen``
    whose filter asks for ``taskIds``, from a client whose request does not declare the
    ``io.modelcontextprotocol/tasks`` extension (declarations are per request).
    """
    if method == "subscriptions/listen":
        wanted = params.get("notifications") if isinstance(params, dict) else None
        if not isinstance(wanted, dict) or "taskIds" not in wanted:
            return ""
    caps = meta.get(META_CLIENT_CAPABILITIES) if meta is not None else None
    extensions = caps.get("extensions") if isinstance(caps, dict) else None
    if isinstance(extensions, dict) and TASKS_EXTENSION in extensions:
        return ""
    what = "a listen request asking for taskIds" if method == "subscriptions/listen" else method
    return f"{what} from a client that did not declare the {TASKS_EXTENSION} extension"


def _legacy(
    headers: HeaderMap, message: Any, meta: dict[str, Any] | None, version: str | None
) -> RequestVerdict:
    # version: the negotiated version (None when unknown), then the one initialize offers.
    if isinstance(message, list):
        return _batch(headers, message, version)
    c = classify(message)
    kind = c.kind
    if kind is KIND_INVALID:
        return make_verdict(
            c, ERA_LEGACY, version, (finding("request.envelope", c.problem, WHERE),)
        )
    # (A request's method is a string: classify made sure of it.)
    if kind is KIND_REQUEST and message["method"] == "initialize":
        params = message.get("params")
        offered = params.get("protocolVersion") if isinstance(params, dict) else None
        version = offered if isinstance(offered, str) else version
    if meta and not MODERN_META_KEYS.isdisjoint(meta):
        leaked = sorted(MODERN_META_KEYS & meta.keys())
        return make_verdict(
            c,
            ERA_LEGACY,
            version,
            (
                finding(
                    "request.legacy-leak",
                    f"modern metadata {', '.join(leaked)} on a legacy-era exchange",
                    WHERE,
                ),
            ),
        )
    header, _ = single_value(headers, HEADER_PROTOCOL_VERSION)
    if header in MODERN_VERSIONS:  # is_modern_version(header): header is a string or None
        return make_verdict(
            c,
            ERA_LEGACY,
            version,
            (
                finding(
                    "request.legacy-leak",
                    f"{HEADER_PROTOCOL_VERSION}: {header} (a modern revision) on a legacy exchange",
                    WHERE,
                ),
            ),
        )
    if header is not None and header not in LEGACY_VERSIONS and version not in HEADERLESS_REVISIONS:
        # Not a revision at all: the server owes 400 (response.legacy-version-status).
        return make_verdict(
            c,
            ERA_LEGACY,
            version,
            (
                finding(
                    "request.version.invalid",
                    f"{HEADER_PROTOCOL_VERSION}: {header!r} names no protocol revision",
                    WHERE,
                ),
            ),
        )
    if kind is KIND_REQUEST:
        schema_version = version if version in LEGACY_VERSIONS else LEGACY_VERSIONS[0]
        # (A request's method is a string: classify made sure of it.)
        problem = schema.request_problem(message["method"], schema_version, message.get("params"))
        if problem:
            return make_verdict(
                c,
                ERA_LEGACY,
                version,
                (finding("request.schema", problem, WHERE),),
            )
    return make_verdict(c, ERA_LEGACY, version, ())


def batch_version(headers: HeaderMap, negotiated: str | None) -> str:
    """The revision a legacy batch is judged by: the session's negotiated one, else the
    ``MCP-Protocol-Version`` header's, else 2025-03-26 (2025-11-25 transports "Protocol
    Version Header": without the header and no other way, assume 2025-03-26)."""
    if negotiated is not None:
        return negotiated
    header, _ = single_value(headers, HEADER_PROTOCOL_VERSION)
    return header if header is not None else HEADERLESS_VERSION


def _batch(headers: HeaderMap, message: list[Any], negotiated: str | None) -> RequestVerdict:
    """A JSON-RPC batch, judged by the revision the session negotiated (:func:`batch_version`):
    2025-03-26 defines batches (basic/index "Batching"; transports "Sending Messages to the
    Server" 3), every other revision has none (a single message only)."""
    version = batch_version(headers, negotiated)
    if version in BATCH_VERSIONS and message:
        found: list[Finding] = []
        items: list[RequestVerdict] = []
        for item in message:
            item_c = classify(item)
            if item_c.kind is KIND_INVALID:
                found.append(finding("request.envelope", f"batch item: {item_c.problem}", WHERE))
            elif item_c.kind is KIND_REQUEST and item_c.method == "initialize":
                # 2025-03-26 lifecycle "Initialization": "The initialize request MUST NOT be
                # part of a JSON-RPC batch".
                found.append(finding("request.envelope",
                                     "initialize must not be part of a JSON-RPC batch", WHERE))
            items.append(make_verdict(item_c, ERA_LEGACY, version, ()))
        # Only the requests of a batch are answered; all notifications: 202 like one.
        requests = tuple(v for v in items if v.kind is KIND_REQUEST)
        head = requests[0].classified if requests else classify(message[0])
        return make_verdict(head, ERA_LEGACY, version, tuple(found), requests)
    why = (
        "an empty JSON-RPC batch" if not message
        else f"JSON-RPC batches are not allowed in revision {version} (only 2025-03-26 has them)"
    )
    return make_verdict(classify(message), ERA_LEGACY, version,
                         (finding("request.envelope", why, WHERE),))


def _meta_problem(message: dict[str, Any], meta: dict[str, Any] | None) -> str:
    params = message.get("params")
    if params is None:
        return "params._meta is missing (it carries protocolVersion and clientCapabilities)"
    if not isinstance(params, dict):
        return "params must be an object"
    if "_meta" not in params:
        return "params._meta is missing"
    if meta is None:
        return f"params._meta must be an object, got {json_type(params['_meta'])}"
    # The usual request: both keys, a string and an object, neither optional key present.
    if (
        isinstance(meta.get(META_PROTOCOL_VERSION), str)
        and isinstance(meta.get(META_CLIENT_CAPABILITIES), dict)
        and META_CLIENT_INFO not in meta
        and META_LOG_LEVEL not in meta
    ):
        return ""
    missing = [k for k in (META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES) if k not in meta]
    if missing:
        aliases = [k for k in ("protocolVersion", "clientCapabilities") if k in meta]
        note = f" (bare alias {', '.join(aliases)} is not the key)" if aliases else ""
        return f"params._meta is missing {', '.join(missing)}{note}"
    checks = (
        (META_PROTOCOL_VERSION, str, "a string"),
        (META_CLIENT_CAPABILITIES, dict, "an object"),
        (META_CLIENT_INFO, dict, "an object"),
        (META_LOG_LEVEL, str, "a string"),
    )
    for key, typ, what in checks:
        if key in meta and not isinstance(meta[key], typ):
            return f"params._meta[{key!r}] must be {what}, got {json_type(meta[key])}"
    return ""
