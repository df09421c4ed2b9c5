"""The rule catalog: every stable rule id mcp-tap reports, in one place.

``docs/rules.md`` is generated from this module (``python -m mcp_tap.core.catalog``) and a
test fails when the two drift. Ids are stable once shipped: add rules, never rename them.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcp_tap.core.findings import Boundary, Finding

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
    """A catalog entry: id, boundary, JSON-RPC code (if any) and what it means."""

    id: str
    boundary: Boundary
    code: int | None
    summary: str


_R = Boundary.REQUEST
_S = Boundary.RESPONSE

RULES: tuple[Rule, ...] = (
    # Requests (client -> server), judged on ingress.
    Rule(
        "request.envelope",
        _R,
        INVALID_REQUEST,
        "not a JSON-RPC 2.0 request or notification, or a bad id type (null, boolean, float)",
    ),
    Rule(
        "request.schema",
        _R,
        INVALID_PARAMS,
        "a request the official generated schema of its revision rejects (after every rung)",
    ),
    Rule("request.parse", _R, PARSE_ERROR, "the request body is not valid JSON"),
    Rule(
        "request.meta.missing",
        _R,
        INVALID_PARAMS,
        "`_meta` or a required namespaced key is missing or has the wrong type "
        "(bare `protocolVersion`/`clientCapabilities` aliases do not count)",
    ),
    Rule("request.header.missing", _R, HEADER_MISMATCH, "a required mirrored header is absent"),
    Rule(
        "request.header.duplicate",
        _R,
        HEADER_MISMATCH,
        "a mirrored header is repeated with conflicting values",
    ),
    Rule(
        "request.header.encoding",
        _R,
        HEADER_MISMATCH,
        "bad `=?base64?...?=` sentinel, bad Base64 or UTF-8, or a raw unsafe value",
    ),
    Rule(
        "request.header.mismatch",
        _R,
        HEADER_MISMATCH,
        "a mirrored header differs from the JSON-RPC body",
    ),
    Rule(
        "request.version.unsupported",
        _R,
        UNSUPPORTED_PROTOCOL_VERSION,
        "the header and body agree on a protocol version that is not supported",
    ),
    Rule(
        "request.legacy-leak",
        _R,
        HEADER_MISMATCH,
        "modern per-request metadata on an exchange of the legacy era",
    ),
    Rule(
        "request.method.removed",
        _R,
        METHOD_NOT_FOUND,
        "a method the modern era removed (initialize, ping, logging/setLevel, ...) "
        "sent as a modern request",
    ),
    # Responses (server -> client), judged on origin and egress.
    Rule("response.parse", _S, PARSE_ERROR, "a JSON response body that is not valid JSON"),
    Rule(
        "response.envelope",
        _S,
        INVALID_REQUEST,
        '`jsonrpc` is not "2.0", or the body is not a JSON object',
    ),
    Rule(
        "response.id",
        _S,
        INVALID_REQUEST,
        "the response id differs from the request id in value or JSON type",
    ),
    Rule(
        "response.exclusivity",
        _S,
        INVALID_REQUEST,
        "a response carries both or neither of `result` and `error`",
    ),
    Rule(
        "response.error.shape",
        _S,
        INVALID_REQUEST,
        "`error.code` is not an integer or `error.message` is not a string",
    ),
    Rule(
        "response.error.reserved",
        _S,
        INVALID_REQUEST,
        "an undefined code in -32020..-32099, or -32002 from a modern server",
    ),
    Rule(
        "response.http-status",
        _S,
        INVALID_REQUEST,
        "the HTTP status does not fit the result or error (200 / 400 / 404 mapping)",
    ),
    Rule(
        "response.header-mismatch-unanswered",
        _S,
        HEADER_MISMATCH,
        "a request with a header mismatch did not get HTTP 400 and JSON-RPC -32020 with its id",
    ),
    Rule(
        "response.expected-error",
        _S,
        None,
        "a request the ladder rejects (bad envelope, missing metadata, unsupported version, "
        "removed method) was not answered with that JSON-RPC error",
    ),
    Rule(
        "response.content-type",
        _S,
        INVALID_REQUEST,
        "a request was answered with a content type other than "
        "application/json or text/event-stream",
    ),
    Rule(
        "response.result-type.missing", _S, INVALID_REQUEST, "a modern result without `resultType`"
    ),
    Rule(
        "response.result-type.unknown",
        _S,
        INVALID_REQUEST,
        "an unknown or unadvertised `resultType`",
    ),
    Rule(
        "response.payload.tools-list",
        _S,
        INVALID_REQUEST,
        "a `tools/list` result breaks the payload rules (tools array, unique names, "
        "description, object-root inputSchema)",
    ),
    Rule(
        "response.payload.completion",
        _S,
        INVALID_REQUEST,
        "a `completion/complete` result breaks the payload rules",
    ),
    Rule(
        "response.payload.task",
        _S,
        INVALID_REQUEST,
        "a `task` result breaks the tasks-extension payload rules",
    ),
    Rule(
        "response.payload.input-required",
        _S,
        INVALID_REQUEST,
        "an `input_required` result on the wrong method or without inputRequests/requestState",
    ),
    Rule(
        "response.payload.caching",
        _S,
        INVALID_REQUEST,
        "a cacheable complete result without `ttlMs` >= 0 and `cacheScope` public/private",
    ),
    Rule(
        "notification.response",
        _S,
        INVALID_REQUEST,
        "a notification got anything but HTTP 202 with an empty body",
    ),
    Rule(
        "sse.event",
        _S,
        INVALID_REQUEST,
        "an SSE event that is not a valid JSON-RPC message for this era, "
        "or an unrelated message before the response",
    ),
    Rule(
        "sse.id", _S, INVALID_REQUEST, "an SSE response event whose id differs from the request's"
    ),
    Rule("sse.unterminated", _S, None, "the stream ended before the final response"),
    Rule(
        "wire.schema",
        _S,
        INVALID_REQUEST,
        "a result the official generated schema of its revision rejects",
    ),
    # Hops: comparisons between two views or two hops.
    Rule(
        "hop.error-collapse",
        Boundary.HOP,
        None,
        "an origin 4xx JSON-RPC error became a 5xx or a body without that error",
    ),
    Rule("hop.body-changed", Boundary.HOP, None, "the egress JSON-RPC body differs from origin"),
    Rule("hop.status-changed", Boundary.HOP, None, "the egress status differs from origin"),
    Rule(
        "hop.header-changed",
        Boundary.HOP,
        None,
        "an MCP header (version, method, name, param) was dropped or rewritten between hops",
    ),
    Rule(
        "hop.sse-buffered",
        Boundary.HOP,
        None,
        "SSE events held back and flushed together, or the first event delayed",
    ),
    # Clients: era selection over one client's exchanges.
    Rule(
        "client.downgrade",
        Boundary.CLIENT,
        None,
        "`initialize` after a recognised modern error (-32020/-32021/-32022)",
    ),
    Rule(
        "client.fallback-unproven",
        Boundary.CLIENT,
        None,
        "legacy era used without an allowlisted endpoint and positive initialize evidence",
    ),
    # SDK differential.
    Rule("sdk.dropped", Boundary.SDK, None, "the SDK's typed view lost a semantic field"),
    Rule("sdk.changed", Boundary.SDK, None, "the SDK's typed view changed a field's value"),
    Rule("sdk.rejected", Boundary.SDK, None,
         "the SDK refused a result the wire carried: the application gets an exception"),
    Rule(
        "sdk.synthesized",
        Boundary.SDK,
        None,
        "the SDK's typed view invented a field the wire never carried",
    ),
    # The tap's own health.
    Rule(
        "tap.internal-error",
        Boundary.TAP,
        None,
        "a check raised; forwarding went on and the exchange was judged incompletely",
    ),
    Rule(
        "tap.upstream-failure",
        Boundary.TAP,
        None,
        "the tap could not reach the upstream and answered 502/504 itself",
    ),
    Rule(
        "tap.capture-truncated",
        Boundary.TAP,
        None,
        "a body exceeded the capture cap; its digest covers every byte, its content is cut",
    ),
    Rule(
        "tap.bad-request",
        Boundary.TAP,
        None,
        "the HTTP parser rejected the request; the tap answered 400 and forwarded nothing",
    ),
    # Gate reasons.
    Rule("gate.conformance", Boundary.GATE, None, "conformance findings block promotion"),
    Rule("gate.conformance.empty", Boundary.GATE, None, "no exchanges were recorded"),
    Rule("gate.sdk", Boundary.GATE, None, "SDK differences the policy does not allow"),
    Rule("gate.sdk.empty", Boundary.GATE, None, "no SDK differential could be computed"),
    Rule("gate.hop", Boundary.GATE, None, "a hop finding names a box that changed the traffic"),
    Rule(
        "gate.hop.empty",
        Boundary.GATE,
        None,
        "the policy requires a two-hop capture and no hop comparison was recorded",
    ),
    Rule(
        "gate.integrity",
        Boundary.GATE,
        None,
        "the evidence failed verification (gap, tampering, truncation)",
    ),
    Rule("gate.health.samples", Boundary.GATE, None, "too few samples in the health window"),
    Rule("gate.health.error-rate", Boundary.GATE, None, "error rate above the policy maximum"),
    Rule("gate.health.latency", Boundary.GATE, None, "latency percentile above the maximum"),
    Rule(
        "gate.health.sse-first-event",
        Boundary.GATE,
        None,
        "SSE first-event latency above the maximum",
    ),
    Rule("gate.health.duration", Boundary.GATE, None, "observation window shorter than required"),
    Rule("gate.health.baseline", Boundary.GATE, None, "candidate worse than the baseline window"),
    Rule("gate.rollback.missing", Boundary.GATE, None, "no rollback evidence was given"),
    Rule(
        "gate.rollback.field",
        Boundary.GATE,
        None,
        "a rollback evidence field is missing or not of the exact type and value",
    ),
    Rule(
        "gate.rollback.attestation",
        Boundary.GATE,
        None,
        "the rollback attestation is missing, untrusted or does not verify",
    ),
)

CATALOG: dict[str, Rule] = {r.id: r for r in RULES}


def rule(rule_id: str) -> Rule:
    """Return the catalog entry for ``rule_id``; an unknown id is a programming error."""
    return CATALOG[rule_id]


def finding(rule_id: str, message: str, where: str = "", *, code: int | None = None) -> Finding:
    """Make a :class:`Finding` for a catalog rule, with the rule's code unless ``code`` is given."""
    entry = CATALOG[rule_id]
    return Finding(
        rule=rule_id,
        code=entry.code if code is None else code,
        boundary=entry.boundary,
        message=message,
        where=where,
    )


def render_markdown() -> str:
    """Render the catalog as the Markdown of ``docs/rules.md``."""
    lines = [
        "# Rule catalog",
        "",
        "Generated from `mcp_tap/core/catalog.py` by `python -m mcp_tap.core.catalog`; "
        "do not edit by hand.",
        "",
        "| id | boundary | code | what |",
        "|---|---|---|---|",
    ]
    for r in RULES:
        code = "—" if r.code is None else str(r.code)
        lines.append(f"| `{r.id}` | {r.boundary} | {code} | {r.summary} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render_markdown(), end="")
