"""The rule catalog: every stable rule id mcp-tap reports, in one place.

``docs/rules.md`` is generated from this module (``python -m mcp_tap.core.catalog``) and a
test fails when the two drift. Ids are stable once shipped: add rules, never rename them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from mcp_tap.core.eras import Era
from mcp_tap.core.findings import Boundary, Finding, Strength

# JSON-RPC codes used by the rules.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
HEADER_MISMATCH = -32020
MISSING_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022


@dataclass(frozen=True, slots=True)
class Rule:
    """A catalog entry: id, boundary, JSON-RPC code (if any), what it means, and its source.

    ``cite`` names where the rule comes from: ``page § section``, several joined by ``; ``:
    a page of the published specification as ``<revision>/<path>.mdx`` (or
    ``<revision>/schema.ts § interface Name``), ``RFC <n> § <section>``, or for the tool's
    own rules a page of ``docs/`` (``_TOOL``); :mod:`mcp_tap.core.citations` turns each into
    the public address a reader follows, and a test checks every one resolves. ``strength`` is
    the keyword's: ``must`` (a violation) or ``should`` (a warning); ``legacy_strength``
    overrides it for legacy-era exchanges when the legacy revision words the rule more
    weakly. ``quote`` is the sentence (an excerpt, as a reader sees it) of a cited section
    whose keyword gives ``strength``, ``legacy_quote`` the one behind ``legacy_strength``
    (see :data:`QUOTES`; a test finds each in its cited section).
    """

    id: str
    boundary: Boundary
    code: int | None
    summary: str
    strength: Strength = Strength.MUST
    cite: str = ""
    legacy_strength: Strength | None = None
    quote: str = ""
    legacy_quote: str = ""

    def strength_in(self, era: Era | None) -> Strength:
        """The rule's strength for an exchange of ``era``."""
        if era is Era.LEGACY and self.legacy_strength is not None:
            return self.legacy_strength
        return self.strength


_R = Boundary.REQUEST
_S = Boundary.RESPONSE
MUST = Strength.MUST
SHOULD = Strength.SHOULD

# Spec pages: <revision>/<path> as published at modelcontextprotocol.io/specification
# (mcp_tap.core.citations makes the address).
_SHTTP = "2026-07-28/basic/transports/streamable-http.mdx"
_LHTTP = "2025-11-25/basic/transports.mdx"
_BASE = "2026-07-28/basic/index.mdx"
_LBASE = "2025-11-25/basic/index.mdx"
_2503HTTP = "2025-03-26/basic/transports.mdx"
_2503BASE = "2025-03-26/basic/index.mdx"
_SCHEMA = "2026-07-28/schema.ts"
_LSCHEMA = "2025-11-25/schema.ts"
_AUTH = "2026-07-28/basic/authorization/index.mdx"
_TOOLS = "2026-07-28/server/tools.mdx"
_MRTR = "2026-07-28/basic/patterns/mrtr.mdx"
_SUBS = "2026-07-28/basic/patterns/subscriptions.mdx"
_TASKS = "ext-tasks-draft.md"
_SEP = "sep-2243-http-standardization.md"
# The tool's own contract, for rules the specification does not own: a section of
# docs/rules.md (rendered by render_markdown below). The older spelling "product.md § ..."
# is still read as that section (mcp_tap.core.citations).
_TOOL = "docs/rules.md § The tool's own rules"


def _c(page: str, *sections: str) -> str:
    return "; ".join(f"{page} § {s}" for s in sections)


_RULES: tuple[Rule, ...] = (
    # Requests (client -> server), judged on ingress.
    Rule(
        "request.envelope",
        _R,
        INVALID_REQUEST,
        "not a JSON-RPC 2.0 request or notification, or a bad id type (null, boolean, float); "
        "a batch outside 2025-03-26, or one holding `initialize`",
        MUST,
        _c(_BASE, "Requests") + "; " + _c(_SHTTP, "Sending Messages") + "; "
        + _c("2025-03-26/basic/lifecycle.mdx", "Initialization"),
    ),
    Rule(
        "request.schema",
        _R,
        INVALID_PARAMS,
        "a request the published schema.json of its revision rejects (after every rung)",
        MUST,
        _c(_BASE, "Schema") + "; " + _c(_LBASE, "Schema"),
    ),
    Rule(
        "request.parse",
        _R,
        PARSE_ERROR,
        "the request body is not valid JSON",
        MUST,
        _c(_BASE, "Messages"),
    ),
    Rule(
        "request.meta.missing",
        _R,
        INVALID_PARAMS,
        "`_meta` or a required namespaced key is missing or has the wrong type "
        "(bare `protocolVersion`/`clientCapabilities` aliases do not count)",
        MUST,
        _c(_BASE, "`_meta`"),
    ),
    Rule(
        "request.header.missing",
        _R,
        HEADER_MISMATCH,
        "a required mirrored header is absent",
        MUST,
        _c(_SHTTP, "Protocol Version Header", "Standard Request Headers", "Server Validation"),
    ),
    Rule(
        "request.header.duplicate",
        _R,
        HEADER_MISMATCH,
        "a mirrored header is repeated with conflicting values",
        MUST,
        _c(_SHTTP, "Server Validation"),
    ),
    Rule(
        "request.header.encoding",
        _R,
        HEADER_MISMATCH,
        "bad Base64 or UTF-8 inside the `=?base64?...?=` sentinel, or a raw value with "
        "characters a header cannot carry",
        MUST,
        _c(_SHTTP, "Value Encoding", "Server Behavior for Custom Headers", "Server Validation"),
    ),
    Rule(
        "request.header.mismatch",
        _R,
        HEADER_MISMATCH,
        "a mirrored header differs from the JSON-RPC body (optional whitespace around the "
        "value is not part of it)",
        MUST,
        _c(_SHTTP, "Server Validation") + "; " + _c(_SEP, "Header/Body Mismatch"),
    ),
    Rule(
        "request.version.unsupported",
        _R,
        UNSUPPORTED_PROTOCOL_VERSION,
        "the header and body agree on a protocol version that is not supported",
        MUST,
        _c(_SHTTP, "Protocol Version Header"),
    ),
    Rule(
        "request.legacy-leak",
        _R,
        HEADER_MISMATCH,
        "modern per-request metadata on an exchange of the legacy era",
        SHOULD,
        _c(_LHTTP, "Protocol Version Header") + "; " + _c(_LBASE, "Messages"),
    ),
    Rule(
        "request.method.removed",
        _R,
        METHOD_NOT_FOUND,
        "a method the modern era removed (initialize, ping, logging/setLevel, ...) "
        "sent as a modern request",
        MUST,
        _c(_SHTTP, "Protocol Version Header") + "; 2026-07-28/deprecated.mdx",
    ),
    Rule(
        "request.accept",
        _R,
        None,
        "the client's `Accept` does not list both `application/json` and `text/event-stream` "
        "(a legacy GET: `text/event-stream`)",
        MUST,
        _c(_SHTTP, "Sending Messages") + "; "
        + _c(_LHTTP, "Sending Messages to the Server", "Listening for Messages from the Server"),
    ),
    Rule(
        "request.version.invalid",
        _R,
        None,
        "a legacy request whose `MCP-Protocol-Version` names no protocol revision",
        MUST,
        _c(_LHTTP, "Protocol Version Header"),
    ),
    # Responses (server -> client), judged on origin and egress.
    Rule(
        "response.parse",
        _S,
        PARSE_ERROR,
        "a JSON response body that is not valid JSON",
        MUST,
        _c(_BASE, "Messages", "Responses"),
    ),
    Rule(
        "response.envelope",
        _S,
        INVALID_REQUEST,
        '`jsonrpc` is not "2.0", the body is not a JSON object, or a request got a success '
        "status without a JSON-RPC response",
        MUST,
        _c(_BASE, "Messages", "Responses") + "; " + _c(_SHTTP, "Sending Messages"),
    ),
    Rule(
        "response.id",
        _S,
        INVALID_REQUEST,
        "the response id differs from the request id in value or JSON type",
        MUST,
        _c(_BASE, "Result Responses", "Error Responses"),
    ),
    Rule(
        "response.exclusivity",
        _S,
        INVALID_REQUEST,
        "a response carries both or neither of `result` and `error`",
        MUST,
        _c(_BASE, "Result Responses", "Error Responses"),
    ),
    Rule(
        "response.error.shape",
        _S,
        INVALID_REQUEST,
        "`error.code` is not an integer or `error.message` is not a string",
        MUST,
        _c(_BASE, "Error Responses"),
    ),
    Rule(
        "response.error.reserved",
        _S,
        INVALID_REQUEST,
        "a modern exchange carries an undefined code in -32020..-32099, or -32002/-32042",
        MUST,
        _c(_BASE, "Error Codes"),
    ),
    Rule(
        "response.error.data",
        _S,
        INVALID_REQUEST,
        "a -32022 error without `data.supported` (strings) and `data.requested`, or a -32021 "
        "error without the `data.requiredCapabilities` object",
        MUST,
        _c(_SCHEMA, "interface UnsupportedProtocolVersionError",
           "interface MissingRequiredClientCapabilityError") + "; " + _c(_BASE, "`_meta`"),
    ),
    Rule(
        "response.http-status",
        _S,
        INVALID_REQUEST,
        "the HTTP status does not fit the result or error (200 / 400 / 404 mapping), also for "
        "an error delivered inside an SSE stream",
        MUST,
        _c(_SHTTP, "Protocol Version Header", "Server Validation") + "; " + _c(_BASE, "`_meta`"),
    ),
    Rule(
        "response.header-mismatch-unanswered",
        _S,
        HEADER_MISMATCH,
        "a request with a header mismatch did not get HTTP 400 and JSON-RPC -32020 with its id",
        MUST,
        _c(_SHTTP, "Server Validation", "Server Behavior for Custom Headers"),
    ),
    Rule(
        "response.expected-error",
        _S,
        None,
        "a request missing required `_meta`, with an unsupported version or a removed method "
        "was not answered with the JSON-RPC error the specification names",
        MUST,
        _c(_BASE, "`_meta`") + "; " + _c(_SHTTP, "Protocol Version Header"),
    ),
    Rule(
        "response.expected-error.jsonrpc",
        _S,
        None,
        "a request that is not JSON, not a valid JSON-RPC request or has invalid params was not "
        "answered with the standard JSON-RPC error (-32700 / -32600 / -32602)",
        SHOULD,
        _c(_BASE, "Error Codes") + "; " + _c(_MRTR, "Error Handling"),
    ),
    Rule(
        "response.content-type",
        _S,
        INVALID_REQUEST,
        "a request was answered with a success status and a content type other than "
        "application/json or text/event-stream",
        MUST,
        _c(_SHTTP, "Sending Messages") + "; " + _c(_LHTTP, "Sending Messages to the Server"),
    ),
    Rule(
        "response.unauthorized.challenge",
        _S,
        None,
        "an HTTP 401 without a `WWW-Authenticate` challenge",
        MUST,
        _c(_AUTH, "Token Handling", "Error Handling")
        + "; 2026-07-28/basic/authorization/authorization-server-discovery.mdx § "
        "Protected Resource Metadata Discovery Requirements; RFC 9110 § 15.5.2",
    ),
    Rule(
        "response.origin",
        _S,
        None,
        "a request with an invalid `Origin` was not answered with HTTP 403 (a 2025-03-26 "
        "session: with a 4xx refusal)",
        MUST,
        _c(_SHTTP, "Security & Endpoint") + "; " + _c(_LHTTP, "Security Warning") + "; "
        + _c(_2503HTTP, "Security Warning"),
    ),
    Rule(
        "response.method-not-allowed",
        _S,
        None,
        "a GET or DELETE to a modern-only endpoint was not answered with HTTP 405",
        SHOULD,
        _c(_SHTTP, "Earlier Streamable HTTP Revisions"),
    ),
    Rule(
        "response.get-stream",
        _S,
        None,
        "a legacy GET was answered with a success status but not `text/event-stream`",
        MUST,
        _c(_LHTTP, "Listening for Messages from the Server"),
    ),
    Rule(
        "response.session-id",
        _S,
        None,
        "a legacy `MCP-Session-Id` with characters outside visible ASCII (0x21-0x7E)",
        MUST,
        _c(_LHTTP, "Session Management"),
    ),
    Rule(
        "response.legacy-version-status",
        _S,
        None,
        "a legacy request with an invalid `MCP-Protocol-Version` was not answered with HTTP 400",
        MUST,
        _c(_LHTTP, "Protocol Version Header"),
    ),
    Rule(
        "response.result-type.missing",
        _S,
        INVALID_REQUEST,
        "a modern result without `resultType`",
        MUST,
        _c(_BASE, "Result Responses"),
    ),
    Rule(
        "response.result-type.unknown",
        _S,
        INVALID_REQUEST,
        "an unknown or unadvertised `resultType`",
        MUST,
        _c(_BASE, "ResultType"),
    ),
    Rule(
        "response.payload.tools-list",
        _S,
        INVALID_REQUEST,
        "a `tools/list` result breaks the schema's payload rules (tools array, non-empty names, "
        "object-root inputSchema)",
        MUST,
        _c(_SCHEMA, "interface Tool") + "; " + _c(_TOOLS, "Tool"),
    ),
    Rule(
        "response.payload.tool-names-unique",
        _S,
        INVALID_REQUEST,
        "two tools in one `tools/list` result share a name",
        SHOULD,
        _c(_TOOLS, "Tool Names"),
    ),
    Rule(
        "response.payload.x-mcp-header",
        _S,
        INVALID_REQUEST,
        "an `x-mcp-header` declaration breaks its constraints (empty, not a token, not unique "
        "case-insensitively, on a non-primitive or `number` property, not statically reachable)",
        MUST,
        _c(_TOOLS, "x-mcp-header") + "; " + _c(_SHTTP, "Schema Extension"),
    ),
    Rule(
        "response.payload.completion",
        _S,
        INVALID_REQUEST,
        "a `completion/complete` result breaks the payload rules",
        MUST,
        _c("2026-07-28/server/utilities/completion.mdx", "Completion Results", "CompleteResult")
        + "; " + _c(_BASE, "Schema"),
    ),
    Rule(
        "response.payload.task",
        _S,
        INVALID_REQUEST,
        "a `task` result or a `tasks/get` answer breaks the tasks-extension payload rules "
        "(e.g. `completed` without `result`)",
        MUST,
        _c(_TASKS, "Task Creation", "Task Polling", "Task Status"),
    ),
    Rule(
        "response.payload.input-required",
        _S,
        INVALID_REQUEST,
        "an `input_required` result (or an `input_required` task) on the wrong method, without "
        "inputRequests/requestState, or asking for input the client's capabilities did not "
        "declare, members included (`elicitation: {}` is form only; `url` needs "
        "`elicitation.url`; tool-enabled sampling needs `sampling.tools`)",
        MUST,
        _c(_MRTR, "Supported Requests", "Server Requirements (Basic Workflow)")
        + "; " + _c("2026-07-28/client/elicitation.mdx", "Capabilities")
        + "; " + _c("2026-07-28/client/sampling.mdx", "Tools in Sampling"),
    ),
    Rule(
        "response.payload.caching",
        _S,
        INVALID_REQUEST,
        "a cacheable complete result without `ttlMs` >= 0 and `cacheScope` public/private",
        MUST,
        _c("2026-07-28/server/utilities/caching.mdx", "Time-to-Live (TTL) Field",
           "Cache Scope Field"),
    ),
    Rule(
        "notification.response",
        _S,
        INVALID_REQUEST,
        "a notification (or a legacy client's JSON-RPC response) got a 2xx other than 202 "
        "with an empty body, or a success-shaped JSON-RPC answer",
        MUST,
        _c(_SHTTP, "Sending Messages") + "; " + _c(_LHTTP, "Sending Messages to the Server"),
    ),
    Rule(
        "sse.event",
        _S,
        INVALID_REQUEST,
        "an SSE event that is not a valid JSON-RPC message for this era (a server request on "
        "a modern stream included)",
        MUST,
        _c(_SHTTP, "Receiving Messages"),
    ),
    Rule(
        "sse.unrelated",
        _S,
        INVALID_REQUEST,
        "a notification on a modern request stream that does not relate to the request "
        "(progress for another token, a log message the request did not ask for, "
        "list_changed, server-sent cancelled)",
        MUST,
        _c(_SHTTP, "Receiving Messages")
        + "; 2026-07-28/basic/patterns/progress.mdx § Behavior Requirements"
        + "; 2026-07-28/server/utilities/logging.mdx § Per-request log level"
        + "; 2026-07-28/basic/patterns/cancellation.mdx § Cancellation Flow",
    ),
    Rule(
        "sse.progress",
        _S,
        INVALID_REQUEST,
        "a progress notification whose `progress` does not increase over the last one for "
        "its token on the stream",
        MUST,
        "2026-07-28/basic/patterns/progress.mdx § Progress Flow; "
        "2025-11-25/basic/utilities/progress.mdx § Progress Flow",
    ),
    Rule(
        "sse.listen",
        _S,
        INVALID_REQUEST,
        "a listen stream whose first message is not the acknowledgement, or a notification "
        "without the listen request's subscriptionId or of a type not opted in",
        MUST,
        _c(_SUBS, "Opening a Stream", "Acknowledgment", "Receiving Notifications"),
    ),
    Rule(
        "sse.after-response",
        _S,
        INVALID_REQUEST,
        "a message on a request stream after its final response",
        SHOULD,
        _c(_SHTTP, "Receiving Messages") + "; " + _c(_LHTTP, "Sending Messages to the Server"),
    ),
    # --- issue 27, classes 1-3, 8, 9 (branch speca) ---
    Rule(
        "sse.progress.after-completion",
        _S,
        INVALID_REQUEST,
        "a progress notification on a request stream after the request's final response",
        MUST,
        "2026-07-28/basic/patterns/progress.mdx § Behavior Requirements; "
        "2025-11-25/basic/utilities/progress.mdx § Behavior Requirements; "
        "2025-03-26/basic/utilities/progress.mdx § Behavior Requirements",
    ),
    # --- end of issue 27 (speca) ---
    Rule(
        "sse.get-response",
        _S,
        INVALID_REQUEST,
        "a JSON-RPC response on a legacy GET stream that resumes no request stream",
        MUST,
        _c(_LHTTP, "Listening for Messages from the Server"),
    ),
    Rule(
        "sse.id",
        _S,
        INVALID_REQUEST,
        "an SSE response event whose id differs from the request's",
        MUST,
        _c(_BASE, "Result Responses", "Error Responses"),
    ),
    Rule(
        "sse.unterminated",
        _S,
        None,
        "the stream ended before the final response (a legacy stream: across its resumptions, "
        "when its session ended or it stayed idle past the limit)",
        MUST,
        _c(_BASE, "Messages", "Responses") + "; " + _c(_SHTTP, "Receiving Messages") + "; "
        + _c(_LHTTP, "Sending Messages to the Server", "Resumability and Redelivery"),
        legacy_strength=SHOULD,
    ),
    Rule(
        "wire.schema",
        _S,
        INVALID_REQUEST,
        "a result the published schema.json of its revision rejects",
        MUST,
        _c(_BASE, "Schema") + "; " + _c(_SCHEMA, "interface Result") + "; "
        + _c(_LSCHEMA, "interface Result"),
    ),
    # -- Issue 27, classes 4-7: the tasks extension, sub-capabilities, notifications and
    # the published schema (one block: see ROUND3_EXTENSIONS_NOT_CHECKED below). --
    Rule(
        "request.capability.missing",
        _R,
        MISSING_CLIENT_CAPABILITY,
        "`tasks/get`, `tasks/update`, `tasks/cancel`, or a `subscriptions/listen` asking for "
        "`taskIds`, from a request that does not declare the `io.modelcontextprotocol/tasks` "
        "extension (the server owes -32021)",
        MUST,
        _c(_TASKS, "Error Handling", "Task Status Notifications", "Capability Negotiation"),
    ),
    Rule(
        "response.payload.sampling-context",
        _S,
        INVALID_REQUEST,
        "an input request for sampling with `includeContext` `thisServer`/`allServers` to a "
        "client that did not declare `sampling.context`",
        SHOULD,
        _c("2026-07-28/client/sampling.mdx", "Capabilities"),
    ),
    Rule(
        "response.payload.structured-content",
        _S,
        INVALID_REQUEST,
        "a `tools/call` result whose `structuredContent` is missing (not an error result) or "
        "does not conform to the `outputSchema` the tool declared in `tools/list`",
        MUST,
        _c(_TOOLS, "Output Schema", "Structured Content"),
    ),
    Rule(
        "sse.server-request",
        _S,
        INVALID_REQUEST,
        "a legacy server request (elicitation, sampling, roots) on a stream for a capability, "
        "or a capability member (elicitation mode, `sampling.tools`), the client did not "
        "declare at `initialize`",
        MUST,
        "2025-11-25/basic/lifecycle.mdx § Operation; "
        + _c("2025-11-25/client/elicitation.mdx", "Capabilities")
        + "; " + _c("2025-11-25/client/sampling.mdx", "Tools in Sampling"),
    ),
    Rule(
        "wire.schema.notification",
        _S,
        INVALID_REQUEST,
        "a server notification on a request or listen stream that the published schema.json "
        "of its revision rejects (e.g. a log level outside LoggingLevel, a non-numeric "
        "progress)",
        MUST,
        _c(_BASE, "Schema", "Notifications") + "; " + _c(_LBASE, "Schema"),
    ),
    # -- end of the issue 27 (classes 4-7) block --
    # -- Issue 27, classes 2, 3 and 9: owed answers and 2025-03-26 batches (ROUND3_ADDED) --
    Rule(
        "response.batch.refused",
        _S,
        INVALID_REQUEST,
        "a valid 2025-03-26 batch of requests refused as a whole (an HTTP error status, or one "
        "error without an id instead of the batch's responses): servers must support "
        "receiving batches",
        MUST,
        _c(_2503BASE, "Batching") + "; " + _c(_2503HTTP, "Sending Messages to the Server"),
    ),
    Rule(
        "response.batch.incomplete",
        _S,
        INVALID_REQUEST,
        "a 2025-03-26 batch answered without one response per request of it",
        SHOULD,
        _c(_2503HTTP, "Sending Messages to the Server"),
    ),
    # -- end of the classes 2, 3 and 9 block --
    # Hops: comparisons between two views or two hops.
    Rule(
        "hop.error-collapse",
        Boundary.HOP,
        None,
        "an origin 4xx JSON-RPC error became a 5xx or a body without that error",
        MUST,
        _c(_SHTTP, "Server Validation") + "; RFC 9110 § 3.7",
    ),
    Rule(
        "hop.body-changed",
        Boundary.HOP,
        None,
        "the egress JSON-RPC body differs from origin",
        MUST,
        "RFC 9110 § 7.7; " + _TOOL,
    ),
    Rule(
        "hop.status-changed",
        Boundary.HOP,
        None,
        "the egress status differs from origin",
        MUST,
        "RFC 9110 § 7.7; " + _TOOL,
    ),
    Rule(
        "hop.header-changed",
        Boundary.HOP,
        None,
        "an MCP header (version, method, name, param) was dropped or rewritten between hops",
        MUST,
        _c(_SHTTP, "Server Behavior for Custom Headers", "Request Metadata"),
    ),
    Rule(
        "hop.sse-buffered",
        Boundary.HOP,
        None,
        "SSE events held back and flushed together, or the first event delayed",
        SHOULD,
        _c(_SHTTP, "Receiving Messages"),
    ),
    # Hops around an MCP gateway (box = "mcp-gateway"): what a gateway may not do silently.
    Rule(
        "hop.gateway.capability-widened",
        Boundary.HOP,
        None,
        "the gateway declared to the origin a client capability the client did not declare "
        "(the origin may now rely on it; the gateway, the client's server, \"MUST NOT rely on "
        "capabilities the client has not declared\"): a warning, since declaring alone breaks "
        "nothing yet",
        SHOULD,
        _c(_BASE, "`_meta`") + "; "
        + _c("2026-07-28/client/elicitation.mdx", "Capabilities") + "; "
        + _c("2026-07-28/client/sampling.mdx", "Capabilities") + "; "
        + _c("2026-07-28/client/roots.mdx", "Capabilities") + "; "
        + _c("2025-11-25/basic/lifecycle.mdx", "Capability Negotiation", "Operation"),
    ),
    Rule(
        "hop.gateway.param-added",
        Boundary.HOP,
        None,
        "the gateway added a request parameter the client did not send that changes what the "
        "origin does (`io.modelcontextprotocol/logLevel`: the origin may now emit "
        "`notifications/message` the client never asked for)",
        SHOULD,
        _c("2026-07-28/server/utilities/logging.mdx", "Per-request log level") + "; "
        + _c(_BASE, "`_meta`"),
    ),
    Rule(
        "hop.gateway.error-recoded",
        Boundary.HOP,
        None,
        "the origin's JSON-RPC error reached the client with another code, or as a result "
        "(the client loses what the code means: a missing capability, an unsupported version)",
        SHOULD,
        _c(_BASE, "Error Codes", "Error Responses"),
    ),
    # Clients: era selection over one client's exchanges.
    Rule(
        "client.downgrade",
        Boundary.CLIENT,
        None,
        "a legacy `initialize` after a recognised modern error (-32020/-32021/-32022)",
        SHOULD,
        _c(_SHTTP, "Backward Compatibility")
        + "; 2026-07-28/basic/versioning.mdx § Backward Compatibility with "
        "Initialization-Based Versions",
    ),
    Rule(
        "client.fallback-unproven",
        Boundary.CLIENT,
        None,
        "legacy era used without an allowlisted endpoint and positive initialize evidence "
        "(the operator's era policy)",
        SHOULD,
        _c(_SHTTP, "Backward Compatibility") + "; " + _TOOL,
    ),
    # SDK differential.
    Rule("sdk.dropped", Boundary.SDK, None, "the SDK's typed view lost a semantic field",
         MUST, _TOOL),
    Rule("sdk.changed", Boundary.SDK, None, "the SDK's typed view changed a field's value",
         MUST, _TOOL),
    Rule("sdk.rejected", Boundary.SDK, None,
         "the SDK refused a result the wire carried: the application gets an exception",
         MUST, _TOOL),
    Rule(
        "sdk.synthesized",
        Boundary.SDK,
        None,
        "the SDK's typed view invented a field the wire never carried", MUST, _TOOL),
    # The tap's own health.
    Rule(
        "tap.internal-error",
        Boundary.TAP,
        None,
        "a check raised; forwarding went on and the exchange was judged incompletely", MUST, _TOOL),
    Rule(
        "tap.upstream-failure",
        Boundary.TAP,
        None,
        "the tap could not reach the upstream and answered 502/504 itself", MUST, _TOOL),
    Rule(
        "tap.saturated",
        Boundary.TAP,
        None,
        "upstream connections were at max_connections; the tap answered 503 at once",
        MUST, _TOOL),
    Rule(
        "tap.draining",
        Boundary.TAP,
        None,
        "the tap was shutting down; it answered 503 and forwarded nothing", MUST, _TOOL),
    Rule(
        "tap.drain-deadline",
        Boundary.TAP,
        None,
        "the exchange was still running at the shutdown drain deadline and was cut",
        MUST, _TOOL),
    Rule(
        "tap.client-write-stall",
        Boundary.TAP,
        None,
        "the client stopped reading for write_timeout_s; its exchange was cut", MUST, _TOOL),
    Rule(
        "tap.capture-truncated",
        Boundary.TAP,
        None,
        "a body exceeded the capture cap; its digest covers every byte, its content is cut",
         MUST, _TOOL),
    Rule(
        "tap.bad-request",
        Boundary.TAP,
        None,
        "the HTTP parser rejected the request; the tap answered 400 and forwarded nothing",
        MUST, _TOOL),
    # Gate reasons.
    Rule("gate.conformance", Boundary.GATE, None, "conformance findings block promotion",
         MUST, _TOOL),
    Rule("gate.conformance.empty", Boundary.GATE, None, "no exchanges were recorded", MUST, _TOOL),
    Rule("gate.sdk", Boundary.GATE, None, "SDK differences the policy does not allow", MUST, _TOOL),
    Rule("gate.sdk.empty", Boundary.GATE, None, "no SDK differential could be computed",
         MUST, _TOOL),
    Rule("gate.hop", Boundary.GATE, None, "a hop finding names a box that changed the traffic",
         MUST, _TOOL),
    Rule(
        "gate.hop.empty",
        Boundary.GATE,
        None,
        "the policy requires a two-hop capture and no hop comparison was recorded", MUST, _TOOL),
    Rule("gate.hop.change", Boundary.GATE, None,
         "a box made a change of a class the policy blocks (`[hop] block`), though no rule "
         "forbids it", MUST, _TOOL),
    Rule(
        "gate.integrity",
        Boundary.GATE,
        None,
        "the evidence failed verification (gap, tampering, truncation)", MUST, _TOOL),
    Rule("gate.health.samples", Boundary.GATE, None, "too few samples in the health window",
         MUST, _TOOL),
    Rule("gate.health.error-rate", Boundary.GATE, None, "error rate above the policy maximum",
         MUST, _TOOL),
    Rule("gate.health.latency", Boundary.GATE, None, "latency percentile above the maximum",
         MUST, _TOOL),
    Rule("gate.health.sse-first-event", Boundary.GATE, None,
         "SSE first-event latency above the maximum", MUST, _TOOL),
    Rule("gate.health.duration", Boundary.GATE, None, "observation window shorter than required",
         MUST, _TOOL),
    Rule("gate.health.baseline", Boundary.GATE, None, "candidate worse than the baseline window",
         MUST, _TOOL),
    Rule("gate.drift", Boundary.GATE, None,
         "drift from the baseline capture that the policy blocks", MUST, _TOOL),
    Rule("gate.drift.empty", Boundary.GATE, None,
         "a baseline was given but the captures could not be compared", MUST, _TOOL),
    Rule("gate.rollback.missing", Boundary.GATE, None, "no rollback evidence was given",
         MUST, _TOOL),
    Rule("gate.rollback.field", Boundary.GATE, None,
         "a rollback evidence field is missing or not of the exact type and value", MUST, _TOOL),
    Rule("gate.rollback.attestation", Boundary.GATE, None,
         "the rollback attestation is missing, untrusted or does not verify", MUST, _TOOL),
)

SCHEMA_TRUTH = "This is the source of truth for all protocol messages and structures."
"""The base page's sentence that makes the published schema normative (no RFC 2119 keyword:
a message the schema rejects is no message of the protocol): the quote of the schema
rules."""

_JSONRPC = "All messages between MCP clients and servers MUST follow the"
_MISMATCH_400 = ("When rejecting a request due to header validation failure, servers MUST "
                 "return HTTP status 400 Bad Request and MUST include a JSON-RPC error response")
_RESULT_ID = "Result responses MUST include the same ID as the request they correspond to."
_SEND_REQUEST_ANSWER = ("If the body is a JSON-RPC request, the server MUST return either "
                        "Content-Type:")
QUOTES: dict[str, tuple[str, str]] = {
    # rule id: (the sentence behind its strength, the one behind its legacy strength or "")
    "request.envelope": ("Requests MUST include a string or integer ID.", ""),
    "request.schema": (SCHEMA_TRUTH, ""),
    "request.parse": (_JSONRPC, ""),
    "request.meta.missing": ("fields marked as required MUST be included on every request.", ""),
    "request.header.missing": ("Every POST request to the MCP endpoint MUST include an "
                               "MCP-Protocol-Version header.", ""),
    "request.header.duplicate": ("Servers that process the request body MUST reject requests "
                                 "where the values specified in the headers do not match the "
                                 "corresponding values in the request body.", ""),
    "request.header.encoding": ("Servers MUST reject requests with a recognized "
                                "Mcp-Param-{Name} header that contains invalid characters", ""),
    "request.header.mismatch": ("Servers that process the request body MUST reject requests "
                                "where the values specified in the headers do not match", ""),
    "request.version.unsupported": ("If the server does not implement the requested protocol "
                                    "version (whether the version is unknown to the server, or "
                                    "is a known version the server has chosen not to support), "
                                    "it MUST respond with 400 Bad Request", ""),
    "request.legacy-leak": ("The protocol version sent by the client SHOULD be the one", ""),
    "request.method.removed": ("If the server does not implement the requested RPC method, it "
                               "MUST respond with 404 Not Found and a JSON-RPC error with code "
                               "-32601 (Method not found).", ""),
    "request.accept": ("The client MUST include an Accept header listing both application/json "
                       "and text/event-stream as supported content types.", ""),
    "request.version.invalid": ("If the server receives a request with an invalid or "
                                "unsupported MCP-Protocol-Version, it MUST respond with 400 Bad "
                                "Request.", ""),
    "response.parse": (_JSONRPC, ""),
    "response.envelope": (_JSONRPC, ""),
    "response.id": (_RESULT_ID, ""),
    "response.exclusivity": ("Result responses MUST include a result field.", ""),
    "response.error.shape": ("Error responses MUST include an error field with a code and "
                             "message.", ""),
    "response.error.reserved": ("Implementations MUST NOT emit any code from this sub-range "
                                "that is not defined by this specification", ""),
    "response.error.data": ("If processing a request requires a capability the client did not "
                            "include in io.modelcontextprotocol/clientCapabilities, the server "
                            "MUST return a", ""),
    "response.http-status": ("If the server does not implement the requested RPC method, it "
                             "MUST respond with 404 Not Found", ""),
    "response.header-mismatch-unanswered": (_MISMATCH_400, ""),
    "response.expected-error": ("the server MUST reject it with JSON-RPC error code -32602 "
                                "(Invalid params).", ""),
    "response.expected-error.jsonrpc": ("Protocol errors (malformed JSON, invalid schema, "
                                        "internal server errors) SHOULD return a JSON-RPC error "
                                        "response with an appropriate error code and message.",
                                        ""),
    "response.content-type": (_SEND_REQUEST_ANSWER, ""),
    "response.unauthorized.challenge": ("The server generating a 401 (Unauthorized) response "
                                        "MUST send a WWW-Authenticate header field", ""),
    "response.origin": ("If the Origin header is present and invalid, servers MUST respond "
                        "with HTTP 403 Forbidden.", ""),
    "response.method-not-allowed": ("A server that supports only this revision and receives "
                                    "such traffic from an older client SHOULD respond as "
                                    "follows:", ""),
    "response.get-stream": ("The server MUST either return Content-Type: text/event-stream in "
                            "response to this HTTP GET, or else return HTTP 405 Method Not "
                            "Allowed", ""),
    "response.session-id": ("The session ID MUST only contain visible ASCII characters "
                            "(ranging from 0x21 to 0x7E).", ""),
    "response.legacy-version-status": ("If the server receives a request with an invalid or "
                                       "unsupported MCP-Protocol-Version, it MUST respond with "
                                       "400 Bad Request.", ""),
    "response.result-type.missing": ("The result MUST include a resultType field to indicate "
                                     "the type of the result.", ""),
    "response.result-type.unknown": ("The set of supported ResultType values MUST be created "
                                     "from the set defined in the core protocol", ""),
    "response.payload.tools-list": ("MUST be a valid JSON Schema object (not null)", ""),
    "response.payload.tool-names-unique": ("Tool names SHOULD be unique within a server.", ""),
    "response.payload.x-mcp-header": ("MUST NOT be empty MUST match HTTP field-name token "
                                      "syntax", ""),
    "response.payload.completion": (SCHEMA_TRUTH, ""),
    "response.payload.task": ("If the status is completed, the server MUST return a Task object "
                              "with status completed and a result field", ""),
    "response.payload.input-required": ("Servers MUST NOT send an inputRequests that the client "
                                        "has not declared support for in its capabilities.", ""),
    "response.payload.caching": ("Servers MUST provide a ttlMs value that is >= 0.", ""),
    "notification.response": ("If the server accepts it, the server MUST return HTTP status "
                              "code 202 Accepted with no body.", ""),
    "sse.event": ("The server MUST NOT send independent JSON-RPC requests on this stream.", ""),
    "sse.unrelated": ("These notifications MUST relate to the originating client request.", ""),
    "sse.progress": ("The progress value MUST increase with each notification, even if the "
                     "total is unknown.", ""),
    "sse.listen": ("The server MUST NOT send notification types the client has not explicitly "
                   "requested.", ""),
    "sse.after-response": ("The final JSON-RPC response SHOULD terminate the stream.", ""),
    "sse.progress.after-completion": ("Progress notifications MUST only reference tokens that: "
                                      "Were provided in an active request Are associated with "
                                      "an in-progress operation", ""),
    "sse.get-response": ("The server MUST NOT send a JSON-RPC response on the stream unless", ""),
    "sse.id": (_RESULT_ID, ""),
    "sse.unterminated": (_JSONRPC, "The SSE stream SHOULD eventually include a JSON-RPC "
                                   "response for the JSON-RPC request sent in the POST body."),
    "wire.schema": (SCHEMA_TRUTH, ""),
    "request.capability.missing": ("Servers MUST return this error for non-declaring clients "
                                   "issuing tasks/get, tasks/update, and tasks/cancel requests.",
                                   ""),
    "response.payload.sampling-context": ("SHOULD NOT use them unless the client declares "
                                          "sampling.context capability.", ""),
    "response.payload.structured-content": ("Servers MUST provide structured results that "
                                            "conform to this schema.", ""),
    "sse.server-request": ("Servers MUST NOT send elicitation requests with modes that are not "
                           "supported by the client.", ""),
    "wire.schema.notification": (SCHEMA_TRUTH, ""),
    "response.batch.refused": ("MCP implementations MAY support sending JSON-RPC batches, but "
                               "MUST support receiving JSON-RPC batches.", ""),
    "response.batch.incomplete": ("The SSE stream SHOULD eventually include one JSON-RPC "
                                  "response per each JSON-RPC request sent in the POST body.",
                                  ""),
    "hop.error-collapse": ("Intermediaries MUST return an appropriate HTTP error status (e.g., "
                           "400 Bad Request) for validation failures", ""),
    "hop.header-changed": ("Intermediate servers that do not recognize an Mcp-Param-{Name} "
                           "header MUST forward it and otherwise ignore it", ""),
    "hop.sse-buffered": ("When initiating an SSE stream, servers SHOULD include the "
                         "X-Accel-Buffering: no header in the HTTP response.", ""),
    "hop.gateway.capability-widened": ("A server MUST NOT rely on capabilities the client has "
                                       "not declared.", ""),
    "hop.gateway.param-added": ("The server MUST NOT emit notifications/message for a request "
                                "that does not include this field.", ""),
    "hop.gateway.error-recoded": ("MUST use defined codes only with their specified meanings.",
                                  ""),
    "client.downgrade": ("On 400 Bad Request, the client SHOULD inspect the response body "
                         "before falling back:", ""),
    "client.fallback-unproven": ("On 400 Bad Request, the client SHOULD inspect the response "
                                 "body before falling back:", ""),
}
"""Per rule of the specification, the sentence its strength comes from (see :class:`Rule`)."""

STRENGTH_BY_TOOL: dict[str, str] = {
    "hop.gateway.capability-widened": "declaring a capability relies on nothing yet: the "
    "origin may never use it, so the gateway's widening is a warning, not the MUST it risks",
    "hop.gateway.param-added": "the added log level breaks nothing until the origin emits "
    "messages the client never asked for: a warning of the MUST it makes possible",
    "hop.gateway.error-recoded": "a gateway is a server of its own and may answer with its "
    "own errors; a changed code is a warning that the client lost what the origin's meant",
}
"""Rules whose strength is the tool's reading of a stronger sentence, with why: their quote is
the sentence they guard, one keyword stronger than the finding."""

RULES: tuple[Rule, ...] = tuple(
    replace(r, quote=QUOTES[r.id][0], legacy_quote=QUOTES[r.id][1]) if r.id in QUOTES else r
    for r in _RULES
)

CATALOG: dict[str, Rule] = {r.id: r for r in RULES}


def rule(rule_id: str) -> Rule:
    """Return the catalog entry for ``rule_id``; an unknown id is a programming error."""
    return CATALOG[rule_id]


def finding(
    rule_id: str,
    message: str,
    where: str = "",
    *,
    code: int | None = None,
    era: Era | None = None,
    paths: tuple[str, ...] = (),
) -> Finding:
    """Make a :class:`Finding` for a catalog rule, with the rule's code unless ``code`` is given.

    ``era`` picks the rule's legacy strength for a legacy exchange (see :class:`Rule`);
    ``paths`` are the JSON pointers (or ``header:NAME``) a hop finding is about.
    """
    entry = CATALOG[rule_id]
    return Finding(
        rule=rule_id,
        code=entry.code if code is None else code,
        boundary=entry.boundary,
        message=message,
        where=where,
        strength=entry.strength_in(era),
        paths=paths,
    )


ADDED_FROM_REVIEW: tuple[str, ...] = (
    "request.accept",
    "request.version.invalid",
    "response.error.data",
    "response.expected-error.jsonrpc",
    "response.unauthorized.challenge",
    "response.origin",
    "response.method-not-allowed",
    "response.get-stream",
    "response.legacy-version-status",
    "response.session-id",
    "response.payload.tool-names-unique",
    "response.payload.x-mcp-header",
    "sse.unrelated",
    "sse.listen",
    "sse.after-response",
    "sse.get-response",
    "sse.progress",
)
"""Rules added when every Streamable HTTP page was read for MUSTs no rule checked (issue 11)."""

NOT_CHECKED: tuple[tuple[str, str, str], ...] = (
    (
        _c(_SHTTP, "Sending Messages"),
        "the client MUST use HTTP POST",
        "a GET or DELETE comes from a client of an earlier revision, which the page itself "
        "expects; the server's answer is judged instead (`response.method-not-allowed`)",
    ),
    (
        _c(_SHTTP, "Security & Endpoint"),
        "servers MUST validate `Origin`",
        "which origins a server allows is its own policy: the tap judges the answer only to an "
        "`Origin` it knows is invalid (a non-loopback origin on a loopback `Host`, or one "
        "outside the configured allowlist)",
    ),
    (
        _c(_SHTTP, "Cancellation"),
        "after the client closed the stream the server MUST NOT send further messages",
        "nothing the server writes after the close reaches the tap's view of the exchange",
    ),
    (
        _c(_BASE, "Requests"),
        "a request id MUST NOT match any other request id the sender issued",
        "needs every id a client ever sent; ids seen by one tap are a sample, so a repeat "
        "seen elsewhere could not be told from a retry through another tap",
    ),
    (
        _c(_MRTR, "Server Requirements (Basic Workflow)"),
        "`inputRequests` keys MUST be unique; `requestState` MUST be integrity-protected",
        "a JSON object cannot carry a key twice once parsed, and state protection is "
        "inside the server",
    ),
    (
        _c(_MRTR, "Client Requirements (Basic Workflow)"),
        "the retry MUST use a new id and echo `requestState` exactly",
        "needs correlating two client requests across time; the tap judges exchanges one "
        "at a time",
    ),
    (
        _c(_SHTTP, "Schema Extension"),
        "clients MUST reject tool definitions with an invalid `x-mcp-header`",
        "what a client hides from its application is not on the wire; the server's "
        "declaration is judged instead (`response.payload.x-mcp-header`)",
    ),
    (
        _c(_SHTTP, "Schema Extension"),
        "integer header values MUST be within JavaScript's safe range",
        "a client-side conversion rule; a value outside the range still mirrors the body, "
        "which `request.header.mismatch` judges",
    ),
    (
        _c(_LHTTP, "Multiple Connections"),
        "a legacy server MUST NOT broadcast one message on several streams",
        "needs matching messages across concurrent streams of a session",
    ),
    (
        _c(_LHTTP, "Resumability and Redelivery"),
        "legacy event ids MUST be unique across a session's streams; a resumed stream MUST NOT "
        "replay another stream's messages",
        "not yet checked (the resumption tracker knows the event ids; planned)",
    ),
    (
        _c(_LHTTP, "Session Management"),
        "after ending a session the server MUST answer its id with 404",
        "a server may end a session at any time without telling the tap; only a 404 it "
        "gives is seen, never the moment it ended (a DELETE the tap saw accepted would tell "
        "it: not yet tracked across exchanges, planned)",
    ),
    (
        _c(_AUTH, "Access Token Usage"),
        "access tokens MUST NOT be in the query string; authorization on every request",
        "the tap does not know which deployments use authorization, and quoting a query "
        "string that holds a token would put the secret into evidence",
    ),
    (
        _c(_TASKS, "Task Polling"),
        "`inputRequests` keys MUST be unique over a task's lifetime",
        "needs every poll of a task; each answer is judged on its own",
    ),
)
"""MUSTs on the Streamable HTTP wire that no rule checks: (citation, the MUST, why not)."""

# -- Issue 27, classes 4-7 (one block): what the tasks extension, the sub-capabilities, the
# notifications and the published schema added, and what they deliberately leave alone. --
EXTENSIONS_ADDED: tuple[str, ...] = (
    "request.capability.missing",
    "sse.server-request",
    "response.payload.sampling-context",
    "response.payload.structured-content",
    "wire.schema.notification",
)
"""Rules added for the tasks extension, sub-capabilities, notifications and the schema."""

EXTENSIONS_NOT_CHECKED: tuple[tuple[str, str, str], ...] = (
    (
        _c(_TASKS, "Task Creation"),
        "a server MUST NOT return `CreateTaskResult` until `tasks/get` for it would resolve",
        "needs a later, separate exchange (the first poll) tied to this one; each answer is "
        "judged on its own",
    ),
    (
        _c(_TASKS, "Task Update Requests"),
        "an `inputRequests` key MUST NOT be reused after its response was delivered",
        "needs the task's whole history of polls and updates",
    ),
    (
        _c(_TASKS, "Task Status Notifications"),
        "each status notification is the `tasks/get` answer of that moment",
        "needs a poll at the same instant; the notification's own Task fields are judged by "
        "the listen filter and the task payload rules",
    ),
    (
        _c(_TASKS, "Error Handling"),
        "an invalid or nonexistent `taskId` MUST get -32602 from `tasks/get`",
        "which task ids a server holds is its own state; the tap cannot tell an unknown id",
    ),
    (
        _c(_TASKS, "Task Cancellation"),
        "`notifications/cancelled` MUST NOT be used to cancel a task",
        "needs tying a client notification to an earlier exchange whose answer created the "
        "task; each exchange is judged on its own",
    ),
    (
        _c(_TASKS, "Security Considerations"),
        "task ids MUST be unguessable; every task request MUST be authorized",
        "entropy and authorization are inside the server",
    ),
    (
        _c(_TASKS, "Capability Negotiation"),
        "a client MUST treat `CreateTaskResult` to an unsupported request as invalid",
        "client-side handling is not on the wire; the server's answer is judged "
        "(`response.payload.task`)",
    ),
    (
        "2025-11-25/client/elicitation.mdx § Capabilities",
        "legacy servers MUST NOT send an elicitation mode (or, client/sampling, tool-enabled "
        "sampling) the client did not declare",
        "judged (`sse.server-request`) only when the tap saw the session's `initialize` (the "
        "one place a legacy client declares them); a session that began before the tap did "
        "is not judged",
    ),
    (
        "2025-11-25/schema.ts § interface ClientCapabilities",
        "the 2025-11-25 `tasks` capability members (requests.sampling, requests.elicitation, "
        "list, cancel)",
        "task-augmented server-to-client requests are not sent on the Streamable HTTP "
        "streams the tap sees apart from the session's initialize declaration (as above)",
    ),
    (
        "2025-11-25/basic/lifecycle.mdx § Operation",
        "a legacy server uses only the capabilities it negotiated (`tools.listChanged`, "
        "`resources.subscribe`, `logging` before the notifications they announce)",
        "not yet checked: the tap keeps the client's `initialize` capabilities per session "
        "(`sse.server-request`) but not the server's; a modern server's notifications are "
        "judged by the listen filter the client opted in with (`sse.listen`)",
    ),
    (
        _c(_BASE, "JSON Schema Usage"),
        "schemas MUST be valid in their dialect; `$ref` MUST NOT be fetched from the network",
        "a tool's `outputSchema` that is not a valid schema, or refers outside itself, is not "
        "used to judge `structuredContent` (never fetched); the tool listing is judged by "
        "`response.payload.tools-list`",
    ),
    (
        _c(_BASE, "Schema Dialect"),
        "`format` (uri, byte, uri-template) values",
        "the schemas declare JSON Schema 2020-12, where `format` is an annotation, not an "
        "assertion; the validator leaves it unasserted",
    ),
    (
        _c(_BASE, "Schema"),
        "the schema of revisions without a published schema here",
        "judged by the nearest shipped schema: 2025-06-18 by 2025-11-25, 2024-11-05 by "
        "2025-03-26",
    ),
)
"""MUSTs of the tasks extension, sub-capabilities and schema that no rule checks."""

NOT_CHECKED = NOT_CHECKED + EXTENSIONS_NOT_CHECKED


def _extensions_section() -> list[str]:
    """The Markdown lines listing :data:`EXTENSIONS_ADDED`."""
    lines = [
        "",
        "## Added for the tasks extension, sub-capabilities, notifications and the schema",
        "",
        "`wire.schema` and `request.schema` validate against the published `schema.json` of "
        "each revision (shipped in `mcp_tap/core/specschema/`), no longer the SDK's models; "
        "the tasks extension, capability members and notifications added:",
        "",
    ]
    lines += [f"- `{rid}` ({CATALOG[rid].strength}): {CATALOG[rid].summary}"
              for rid in EXTENSIONS_ADDED]
    lines += ["", "and widened:", ""]
    return lines + [f"- `{rid}` ({_strength(rid)}): {why}" for rid, why in EXTENSIONS_WIDENED]


def _strength(ids: str) -> str:
    return " / ".join(str(CATALOG[i].strength) for i in ids.split(" / "))


EXTENSIONS_WIDENED: tuple[tuple[str, str], ...] = (
    ("response.payload.input-required",
     "the members of the declared capability, not only its key (`elicitation: {}` is form "
     "only, a URL mode needs `elicitation.url`, tool-enabled sampling `sampling.tools`), also "
     "for an `input_required` task polled with `tasks/get`"),
    ("sse.listen", "the listen filter knows the tasks extension's `taskIds` "
     "(`notifications/tasks` for a listed task is opted in)"),
    ("response.payload.task", "a `notifications/tasks` carries the whole Task `tasks/get` would "
     "answer; `tasks/update` and `tasks/cancel` are acknowledged with an empty result; a "
     "2025-11-25 session's tasks are that revision's own (its schema judges them)"),
    ("response.expected-error", "a request `request.capability.missing` rejects is owed -32021 "
     "(HTTP 400); a rejected listen request answered with a stream is owed its error too"),
    ("response.error.data", "the -32021 owed to a tasks-extension request names the extension "
     "in `data.requiredCapabilities.extensions`"),
    ("wire.schema / request.schema", "the published `schema.json` instead of the SDK's "
     "generated models (e.g. `serverInfo` needs `name` and `version`; `isError` is a boolean; "
     "`format` stays an annotation)"),
)
"""Rules whose reach the same work widened, with how."""
# -- end of the issue 27 (classes 4-7) block --

# -- Issue 27, classes 2, 3, 8 and 9: owed answers, MAY answers, strengths, batches. --
ROUND3_ADDED: tuple[str, ...] = ("response.batch.refused", "response.batch.incomplete")
"""Rules added for 2025-03-26 batches."""

ROUND3_WIDENED: tuple[tuple[str, str], ...] = (
    ("request.version.invalid / response.legacy-version-status",
     "the 400 owed to an invalid legacy `MCP-Protocol-Version` is judged for notifications, "
     "client responses, GET and DELETE too; an answer given before the request is read (401, "
     "403, 404, 405, 406, 413, 415, 429) is not judged; a 2025-03-26 session is not judged on "
     "the header (its revision has none)"),
    ("response.header-mismatch-unanswered",
     "a request without `MCP-Protocol-Version` MAY be served as 2025-03-26: only a modern "
     "result (served as modern without the header) or a -32020 rejection is judged"),
    ("response.origin", "in a 2025-03-26 session any 4xx refuses an invalid `Origin` (the "
     "page asks for validation, not for 403)"),
    ("request.envelope", "a batch is judged by the session's negotiated revision, else its "
     "version header, else 2025-03-26 (no header): only 2025-03-26 has batches"),
)
"""Rules whose reach classes 2, 3 and 9 widened, with how."""

_2511 = "2025-11-25/basic/transports.mdx"
MAY_ANSWERS: tuple[tuple[str, str, str], ...] = (
    (_c(_SHTTP, "Security & Endpoint") + "; " + _c(_2511, "Security Warning"),
     "the 403 to an invalid `Origin` MAY carry a JSON-RPC error with no `id`",
     "a 403 answer is not judged further (any 403: which origins a server refuses is its own)"),
    (_c(_2503HTTP, "Security Warning"), "2025-03-26 asks only that servers validate `Origin`",
     "in a 2025-03-26 session any 4xx refuses it; a success is still `response.origin`"),
    (_c(_SHTTP, "Sending Messages") + "; " + _c(_2511, "Sending Messages to the Server"),
     "a refused notification (legacy: or client response) gets an HTTP error whose body MAY be "
     "a JSON-RPC error with no `id`", "any error status without a success-shaped body"),
    (_c(_SHTTP, "Sending Messages") + "; " + _c(_2511, "Sending Messages to the Server"),
     "a request is answered with one JSON object or an SSE stream, the server's choice",
     "both are judged alike"),
    (_c(_SHTTP, "Receiving Messages") + "; " + _c(_2511, "Sending Messages to the Server"),
     "notifications (legacy: and requests) MAY come before the response; SSE comments are "
     "keep-alives", "judged only for relatedness and declared capabilities; comments and "
     "events without data carry no message"),
    (_c(_2511, "Sending Messages to the Server", "Resumability and Redelivery"),
     "a priming event (an id, empty data) and a `retry` field; the server MAY close the "
     "connection after an event with an id without ending the stream, and MAY replay on a GET "
     "with `Last-Event-ID`", "an empty event is skipped; a stream closed after an event id "
     "waits for its resumption (the proxy follows it to the GET; a fixture, alone, is not "
     "`sse.unterminated`); a resuming GET may carry the response"),
    (_c(_2511, "Listening for Messages from the Server", "Session Management"),
     "a GET MAY get 405; the GET stream MAY close at any time; a DELETE MAY get 405",
     "405 and empty or closed streams are no finding"),
    (_c(_2511, "Session Management"), "the server MAY end a session at any time, then answers "
     "its id with 404; a server that requires sessions answers a request without one with 400",
     "a legacy 404 is given before the body: no owed error is judged; a legacy 404's or 400's "
     "error body without `id` is the session's answer, not the request's"),
    (_c(_SHTTP, "Protocol Version Header"),
     "a request without `MCP-Protocol-Version` MAY be treated as 2025-03-26",
     "its answer is not owed the -32020 rejection unless it is a modern result"),
    (_c(_2503HTTP, "Sending Messages to the Server", "Listening for Messages from the Server")
     + "; " + _c(_2503BASE, "Batching"),
     "2025-03-26: clients MAY send batches; a stream's responses, requests and notifications "
     "MAY be batched", "a batch is judged by that revision; an SSE event holding an array is "
     "split into its messages"),
    (_c(_BASE, "Error Responses", "Result Responses"),
     "an error's `data` MAY be of any type; a result MAY follow any object structure; "
     "extensions MAY add `resultType` values", "only the schema-required data of -32021 and "
     "-32022 is judged; unknown result keys are additive; an advertised extension's "
     "`resultType` is known"),
)
"""Every MAY about what an answer may be, in the transport and base pages of the three
revisions, with how the judge lets it pass (unit tests: tests/core/test_core_answers.py)."""

ROUND3_NOT_CHECKED: tuple[tuple[str, str, str], ...] = (
    (_c(_2511, "Protocol Version Header"),
     "an unsupported (but valid) legacy `MCP-Protocol-Version` MUST get 400",
     "which revisions a server supports besides the one it negotiated is not on the wire; only "
     "a value that names no revision is known to be owed 400"),
    (_c(_2511, "Session Management") + "; " + _c(_2503HTTP, "Session Management"),
     "servers that require a session SHOULD answer a request without `MCP-Session-Id` with 400",
     "whether a server requires sessions is its own choice; a request without an id ties to "
     "no session the tap saw"),
    (_c(_SHTTP, "Earlier Streamable HTTP Revisions"),
     "a modern-only server SHOULD ignore `Mcp-Session-Id` and mint or echo none",
     "a server speaking both eras mints sessions for its legacy clients; the tap cannot tell "
     "a modern-only server from it"),
    (_c(_2511, "Sending Messages to the Server"),
     "a server closing the connection before the stream ends SHOULD send a `retry` field first",
     "not yet checked: the close is seen, the retry field's absence is not reported (planned)"),
    (_c(_SHTTP, "Server Validation"),
     "intermediaries are not required to return a JSON-RPC error with their 400",
     "the tap judges the answer of the server it forwards to; a body-less 400 from an "
     "intermediary in front of that server is reported as the server's "
     "(`response.header-mismatch-unanswered`), the evidence showing the body"),
)
"""Owed answers of classes 2 and 3 that no rule checks, and why."""

NOT_CHECKED = NOT_CHECKED + ROUND3_NOT_CHECKED
# -- end of the issue 27 (classes 2, 3, 8, 9) block --


def _round3_section() -> list[str]:
    """The Markdown of issue 27's classes 2, 3, 8 and 9: rules added, widened, and the
    sentence behind every strength."""
    lines = ["", "## Added for owed answers, MAY answers and 2025-03-26 batches", ""]
    lines += [f"- `{rid}` ({CATALOG[rid].strength}): {CATALOG[rid].summary}"
              for rid in ROUND3_ADDED]
    lines += ["", "and widened:", ""]
    lines += [f"- `{rid}` ({_strength(rid)}): {why}" for rid, why in ROUND3_WIDENED]
    lines += ["", "## MAYs about answers: never a finding", "",
              "| source | what an answer MAY be | how the judge allows it |", "|---|---|---|"]
    lines += [f"| {markdown_sources(cite)} | {what} | {how} |" for cite, what, how in MAY_ANSWERS]
    lines += [
        "", "## The sentence behind each strength", "",
        "Each rule's strength is the keyword of a sentence of a section it cites (MUST, "
        "REQUIRED, SHALL: `must`; SHOULD, RECOMMENDED: `should`; a MAY is never a finding). "
        "The schema rules rest on the base page's \"source of truth\" sentence (the schema "
        "defines what a message is). A test finds every sentence in its cited section.", "",
    ]
    for r in RULES:
        if not r.quote:
            continue
        line = f"- `{r.id}` ({r.strength}): \"{r.quote}\""
        if r.legacy_quote:
            line += f"; legacy ({r.legacy_strength}): \"{r.legacy_quote}\""
        if r.id in STRENGTH_BY_TOOL:
            line += f" (a warning: {STRENGTH_BY_TOOL[r.id]})"
        lines.append(line)
    return lines


def markdown_sources(cite: str) -> str:
    """``cite`` as Markdown links for ``docs/rules.md``: public addresses as they are, this
    repository's pages relative to ``docs/``."""
    from mcp_tap.core.citations import citations

    out = []
    for found in citations(cite):
        if found.url is None:
            out.append(found.text)
            continue
        url = found.url.removeprefix("docs/") if found.local else found.url
        out.append(f"[{found.text}]({url})")
    return "; ".join(out)


TOOL_RULES_TEXT = (
    "The specification does not own every rule mcp-tap reports. The `tap.*` rules say what "
    "the tap itself saw go wrong while it forwarded (it could not reach the upstream, a "
    "check raised, a client stalled); the `sdk.*` rules compare the wire with what the "
    "official SDK's typed view makes of it; the `gate.*` rules are the gate's reasons, "
    "each a threshold or a condition of the operator's policy (`config/policy.toml`); "
    "`hop.body-changed` and `hop.status-changed` hold a box between two hops (a gateway) "
    "to forwarding MCP traffic unchanged, which RFC 9110 permits an intermediary to break "
    "but a tapped canary must not. These are the tool's contract: a finding of one of them "
    "is mcp-tap's word, not the specification's, and the `source` column says so.",
)


def _hop_changes_markdown() -> list[str]:
    """The change classes of a hop comparison and what each means per kind of box."""
    from mcp_tap.core.hopdiff import (  # (hopdiff imports no catalog: no cycle)
        BOX_GATEWAY,
        BOX_HTTP,
        CLASSES,
        DISPOSITIONS,
        GATEWAY_WHY,
    )

    def shown(meaning: str) -> str:
        return meaning if meaning in ("expected", "recorded") else f"`{meaning}`"

    lines = [
        "",
        "## Changes between hops",
        "",
        "Two hops around a box record every change the box made (`changes` of a "
        "`hop-comparison` record: direction, RFC 6901 `path` or `header:NAME`, kind, the "
        "values before and after, redacted, and the class below). Per hop pair the config "
        "says what the box is (`[[hop]] box`): `http` (a load balancer, mesh or HTTP proxy: "
        "bodies must come through unchanged) or `mcp-gateway` (an MCP server to the client "
        "and an MCP client to the origin, conformant both ways). "
        "A rule id is a finding; `expected` is what a box of that kind "
        "changes by being one; `recorded` is allowed by the specification and listed, and "
        "the gate blocks it only when the policy names its class (`[hop] block`).",
        "",
        f"| class | what | `{BOX_HTTP}` | `{BOX_GATEWAY}` | why (for a gateway) |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| `{cls}` | {what} | {shown(DISPOSITIONS[BOX_HTTP][cls])} | "
        f"{shown(DISPOSITIONS[BOX_GATEWAY][cls])} | {GATEWAY_WHY[cls]} |"
        for cls, what in CLASSES.items()
    ]
    return lines


def render_markdown() -> str:
    """Render the catalog as the Markdown of ``docs/rules.md``."""
    lines = [
        "# Rule catalog",
        "",
        "Generated from `mcp_tap/core/catalog.py` by `python -m mcp_tap.core.catalog`; "
        "do not edit by hand.",
        "",
        "Every rule cites the page and section it comes from, linked: the published MCP "
        "specification at modelcontextprotocol.io (its revision in the link), an RFC, or for "
        "the tool's own rules [the section below](#the-tools-own-rules). Each carries a "
        "strength: `must` is a violation, `should` a warning; a MAY is never a finding. "
        "`must (legacy: should)` means the legacy revision words the rule as a SHOULD. By "
        "default the gate blocks on `must` findings and reports `should` ones.",
        "",
        "| id | boundary | code | strength | what | source |",
        "|---|---|---|---|---|---|",
    ]
    for r in RULES:
        code = "—" if r.code is None else str(r.code)
        strength = str(r.strength)
        if r.legacy_strength is not None:
            strength += f" (legacy: {r.legacy_strength})"
        lines.append(f"| `{r.id}` | {r.boundary} | {code} | {strength} | {r.summary} | "
                     f"{markdown_sources(r.cite)} |")
    lines += ["", "## The tool's own rules", "", *TOOL_RULES_TEXT, ""]
    lines += _hop_changes_markdown()
    lines += [
        "## Added from the specification review",
        "",
        "Reading every Streamable HTTP page of both eras for MUSTs no rule checked added:",
        "",
    ]
    lines += [f"- `{rid}` ({CATALOG[rid].strength}): {CATALOG[rid].summary}"
              for rid in ADDED_FROM_REVIEW]
    lines += _extensions_section()
    lines += _round3_section()
    lines += [
        "",
        "## MUSTs not checked",
        "",
        "| source | requirement | why not |",
        "|---|---|---|",
    ]
    lines += [f"| {markdown_sources(cite)} | {what} | {why} |" for cite, what, why in NOT_CHECKED]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render_markdown(), end="")
