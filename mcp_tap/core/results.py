"""Result rules: the ``resultType`` discriminator by era, then the method payload rules.

Additive unknown fields are valid and never reported here (the SDK differential shows who
drops them). An unknown or unadvertised ``resultType`` is never read as ``complete``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import orjson

from mcp_tap.core import deepjson, schema
from mcp_tap.core.catalog import finding
from mcp_tap.core.eras import (
    ERA_LEGACY,
    ERA_MODERN,
    LEGACY_VERSIONS,
    MODERN_VERSIONS,
    TASKS_EXTENSION,
    Era,
)
from mcp_tap.core.findings import Finding, Strength
from mcp_tap.core.jsonrpc import json_type

CORE_RESULT_TYPES = frozenset({"complete", "input_required"})
EXTENSION_RESULT_TYPES: dict[str, str] = {"task": TASKS_EXTENSION}
"""Extension result types and the capability that must have been advertised for each."""

INPUT_REQUIRED_METHODS = frozenset({"tools/call", "resources/read", "prompts/get"})
CACHEABLE_METHODS = frozenset(
    {
        "server/discover",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
    }
)
TASK_STATUSES = frozenset({"working", "input_required", "completed", "cancelled", "failed"})
MAX_COMPLETION_VALUES = 100

# ISO 8601 date-time as the schema's `date-time` format (RFC 3339 profile).
_ISO8601 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _non_negative_int(value: Any) -> bool:
    return _is_int(value) and value >= 0


def check_result(
    method: str | None,
    result: Any,
    era: Era,
    *,
    capabilities: Iterable[str] = (),
    client_extensions: Iterable[str] | None = None,
    version: str | None = None,
    where: str = "origin",
    client_capabilities: dict[str, Any] | None = None,
) -> list[Finding]:
    """Judge one success ``result`` of ``method`` in ``era``.

    ``capabilities`` are the extension ids the server advertised; ``client_extensions``
    those the client declared (``None`` when unknown, which does not block ``task``);
    ``client_capabilities`` the request's declared capabilities (``None`` when unknown).
    """
    return result_findings(
        method, result, era, capabilities, client_extensions, version, where, client_capabilities
    )


def result_findings(
    method: str | None,
    result: Any,
    era: Era,
    capabilities: Iterable[str],
    client_extensions: Iterable[str] | None,
    version: str | None,
    where: str,
    client_capabilities: dict[str, Any] | None,
    written_out: deepjson.WrittenJson | None = None,
) -> list[Finding]:
    """:func:`check_result` with every argument positional (the judge calls it per answer).

    ``written_out``, when given, receives the result and its JSON when this writes it (for
    the recorder's redaction of the same result: see :class:`deepjson.WrittenJson`)."""
    if not isinstance(result, dict):
        return [
            finding(
                "response.envelope", f"result must be an object, got {json_type(result)}", where
            )
        ]
    rtype = result.get("resultType")
    if "resultType" not in result:
        if era is ERA_MODERN:
            return [
                finding("response.result-type.missing", "modern result has no resultType", where)
            ]
        rtype = "complete"  # Legacy results are complete once the legacy era was selected.
    if not isinstance(rtype, str):
        return [
            finding(
                "response.result-type.unknown",
                f"resultType must be a string, got {json_type(rtype)}",
                where,
            )
        ]
    schema_version = version or (MODERN_VERSIONS[0] if era is ERA_MODERN else LEGACY_VERSIONS[0])
    if rtype == "complete":
        # The payload and schema rules of a complete result, from the verdict cache when
        # seen. What they find depends on the method, the era, the schema revision and the
        # result alone (capabilities and client declarations matter only to task and
        # input_required results), so the result's JSON keys them in ``schema.VERDICTS``.
        # The findings carry ``where``: a hit at another place is judged again (none found
        # is the same anywhere).
        try:
            # The key, the schema verdict's key, and the x-mcp-header search of tools/list.
            written: bytes | None = orjson.dumps(result)
        except TypeError:  # orjson.JSONEncodeError: nested past 254 levels
            written = None
        if written is not None and written_out is not None:  # for the recorder's redaction
            written_out.result = result
            written_out.json = written
        if written is None or len(written) > schema.MAX_KEY_BYTES:
            return _complete_rules(method, result, era, schema_version, where, written)
        key = (_COMPLETE_KIND[era], method or "", schema_version, written)
        cache = schema.VERDICTS
        cached: tuple[str, tuple[Finding, ...]] | None = cache.get(key)
        if cached is not None and (not cached[1] or cached[0] == where):
            return list(cached[1])
        complete_found = _complete_rules(method, result, era, schema_version, where, written)
        cache.put(key, (where, tuple(complete_found)))
        return complete_found
    if era is ERA_LEGACY:
        return [
            finding(
                "response.result-type.unknown",
                f"resultType {rtype!r} does not exist in the legacy era",
                where,
            )
        ]
    caps = frozenset(capabilities)
    if rtype not in CORE_RESULT_TYPES:
        needed = EXTENSION_RESULT_TYPES.get(rtype)
        if needed is None:
            return [finding("response.result-type.unknown", f"unknown resultType {rtype!r}", where)]
        if needed not in caps:
            return [
                finding(
                    "response.result-type.unknown",
                    f"resultType {rtype!r} needs the advertised extension {needed}",
                    where,
                )
            ]
    found = _payload(method, rtype, result, era, caps, client_extensions, where)
    if rtype == "input_required" and not found:
        found = _input_capabilities(result, client_capabilities, where)
    if found and any(f.strength is Strength.MUST for f in found):
        return found
    if method and rtype != "task":
        problem = schema.result_problem(method, schema_version, result)
        if problem:
            return [*found, finding("wire.schema", problem, where)]
    return found


# The kind of the cache entries of complete results, one per era (the era is part of the key).
_COMPLETE_KIND = {era: f"complete-result {era.value}" for era in Era}


def _complete_rules(
    method: str | None,
    result: dict[str, Any],
    era: Era,
    version: str,
    where: str,
    written: bytes | None,
) -> list[Finding]:
    """A complete result's payload and schema rules, without the verdict cache of
    :func:`result_findings` (``written``: the result's JSON, if made)."""
    found = _payload(method, "complete", result, era, frozenset(), None, where, written)
    if found and any(f.strength is Strength.MUST for f in found):
        return found
    if method:
        problem = schema.result_problem_uncached(method, version, result)
        if problem:
            return [*found, finding("wire.schema", problem, where)]
    return found


def _payload(
    method: str | None,
    rtype: str,
    result: dict[str, Any],
    era: Era,
    caps: frozenset[str],
    client_extensions: Iterable[str] | None,
    where: str,
    canonical: bytes | None = None,
) -> list[Finding]:
    if rtype == "task":
        return _task(method, result, client_extensions, where)
    if rtype == "input_required":
        return _input_required(method, result, where)
    problems: list[Finding] = []
    if method == "tools/list":
        problems += _tools_list(result, where, canonical)
    elif method == "completion/complete":
        problems += _completion(result, where)
    elif era is ERA_MODERN and method == "tasks/get":
        # The extension's Task (ttlMs, result on completion); a 2025-11-25 session's tasks
        # are that revision's own (ttl, tasks/result), judged by its schema.
        problems += _task_get(result, where)
    elif era is ERA_MODERN and (method == "tasks/update" or method == "tasks/cancel"):
        problems += _task_ack(method, result, where)
    if era is ERA_MODERN and method in CACHEABLE_METHODS:
        problems += _caching(method, result, where)
    return problems


def _tools_list(
    result: dict[str, Any], where: str, canonical: bytes | None = None
) -> list[Finding]:
    def bad(msg: str) -> list[Finding]:
        return [finding("response.payload.tools-list", msg, where)]

    tools = result.get("tools")
    if not isinstance(tools, list):
        return bad(f"tools must be an array, got {json_type(tools)}")
    seen: set[str] = set()
    warnings: list[Finding] = []
    # One search of the whole list instead of one per tool: no tool declares a header unless
    # the name is written somewhere in it.
    # ``canonical`` (the whole result written out) holds every key of every tool.
    declares = (
        _X_MCP_HEADER_KEY in canonical if canonical is not None else mentions_x_mcp_header(tools)
    )
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            return bad(f"tools[{i}] must be an object")
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            return bad(f"tools[{i}].name must be a non-empty string")
        if name in seen and not warnings:
            # Unique names are a SHOULD (server/tools "Tool Names"); `description` is
            # optional in the schema's Tool, so neither is a violation.
            warnings.append(
                finding(
                    "response.payload.tool-names-unique",
                    f"tools[{i}].name {name!r} is not unique",
                    where,
                )
            )
        seen.add(name)
        if "description" in tool and not isinstance(tool["description"], str):
            return bad(f"tools[{i}] ({name}) description must be a string when present")
        schema_ = tool.get("inputSchema")
        if not isinstance(schema_, dict) or schema_.get("type") != "object":
            return bad(
                f'tools[{i}] ({name}) inputSchema must be an object-root schema (type: "object")'
            )
        problem = x_mcp_header_problem(schema_) if declares else ""
        if problem:
            return [finding("response.payload.x-mcp-header", f"tools[{i}] ({name}): {problem}",
                            where)]
    return warnings


# RFC 9110 5.6.2 token characters.
_TCHAR = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_PRIMITIVE = frozenset({"string", "integer", "boolean"})
_NESTING = ("items", "prefixItems", "additionalProperties", "patternProperties", "oneOf", "anyOf",
            "allOf", "not", "if", "then", "else", "$defs", "definitions", "dependentSchemas",
            "contains", "unevaluatedProperties", "unevaluatedItems", "propertyNames")


_X_MCP_HEADER_KEY = b'"x-mcp-header"'


def mentions_x_mcp_header(value: Any) -> bool:
    """Whether ``value``'s JSON may hold the key ``x-mcp-header`` (True when unsure).

    False means no object in ``value`` has that key: orjson writes every key of every
    dict (subclasses too) verbatim, and the key needs no escape.
    """
    try:
        # orjson writes every key verbatim (this one needs no escape).
        return _X_MCP_HEADER_KEY in orjson.dumps(value)
    except (TypeError, orjson.JSONEncodeError):
        return True  # not writable by orjson (deep, huge numbers): walk it


def x_mcp_header_problem(input_schema: dict[str, Any]) -> str:
    """Why a tool's ``x-mcp-header`` declarations break server/tools "x-mcp-header", or ``""``.

    Token syntax, no control characters, case-insensitive uniqueness, primitive non-``number``
    types, and static reachability: only through ``properties`` chains from the root.
    """
    if not mentions_x_mcp_header(input_schema):
        return ""  # the common case, no declaration at all
    tokens: dict[str, str] = {}

    def walk(node: Any, path: str, reachable: bool) -> str:
        if isinstance(node, list):
            for i, item in enumerate(node):
                problem = walk(item, f"{path}[{i}]", False)
                if problem:
                    return problem
            return ""
        if not isinstance(node, dict):
            return ""
        if "x-mcp-header" in node and path:
            problem = _declaration(node, path, reachable, tokens)
            if problem:
                return problem
        for key, sub in node.items():
            if key == "properties" and isinstance(sub, dict):
                for name, prop in sub.items():
                    problem = walk(prop, f"{path}.{name}" if path else name, reachable)
                    if problem:
                        return problem
            elif key in _NESTING or key == "$ref":
                problem = walk(sub, f"{path}/{key}", False)
                if problem:
                    return problem
        return ""

    return walk(input_schema, "", True)


def _declaration(node: dict[str, Any], path: str, reachable: bool, tokens: dict[str, str]) -> str:
    token = node["x-mcp-header"]
    if not isinstance(token, str) or not token:
        return f"x-mcp-header of {path} must be a non-empty string"
    if not set(token) <= _TCHAR:
        return f"x-mcp-header {token!r} of {path} is not an HTTP token"
    if not reachable:
        return f"x-mcp-header {token!r} of {path} is not reachable through properties alone"
    ptype = node.get("type")
    if ptype not in _PRIMITIVE:
        return f"x-mcp-header {token!r} of {path} is on type {ptype!r} (string, integer, boolean)"
    other = tokens.get(token.lower())
    if other is not None:
        return f"x-mcp-header {token!r} of {path} repeats that of {other} (case-insensitively)"
    tokens[token.lower()] = path
    return ""


def _completion(result: dict[str, Any], where: str) -> list[Finding]:
    def bad(msg: str) -> list[Finding]:
        return [finding("response.payload.completion", msg, where)]

    completion = result.get("completion")
    if not isinstance(completion, dict):
        return bad(f"completion must be an object, got {json_type(completion)}")
    values = completion.get("values")
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        return bad("completion.values must be an array of strings")
    if len(values) > MAX_COMPLETION_VALUES:
        return bad(f"completion.values has {len(values)} items (at most {MAX_COMPLETION_VALUES})")
    if "total" in completion:
        total = completion["total"]
        if not _non_negative_int(total):
            return bad(f"completion.total must be a non-negative integer, got {total!r}")
        if total < len(values):
            return bad(f"completion.total {total} is less than the {len(values)} values returned")
    if "hasMore" in completion and not isinstance(completion["hasMore"], bool):
        return bad("completion.hasMore must be a boolean")
    return []


def _caching(method: str, result: dict[str, Any], where: str) -> list[Finding]:
    ttl = result.get("ttlMs")
    scope = result.get("cacheScope")
    if not _non_negative_int(ttl):
        return [
            finding(
                "response.payload.caching", f"{method} result needs ttlMs >= 0, got {ttl!r}", where
            )
        ]
    if scope not in ("public", "private"):
        return [
            finding(
                "response.payload.caching",
                f"{method} result needs cacheScope public or private, got {scope!r}",
                where,
            )
        ]
    return []


def _task(
    method: str | None,
    result: dict[str, Any],
    client_extensions: Iterable[str] | None,
    where: str,
) -> list[Finding]:
    def bad(msg: str) -> list[Finding]:
        return [finding("response.payload.task", msg, where)]

    if method != "tools/call":
        return bad(f"a task result is only valid for tools/call, not {method}")
    if client_extensions is not None and TASKS_EXTENSION not in set(client_extensions):
        return bad("a task result for a client that did not declare the tasks extension")
    problem = _task_fields(result)
    return bad(problem) if problem else []


def _task_fields(result: dict[str, Any]) -> str:
    """The fields every Task carries (tasks extension "Tasks")."""
    task_id = result.get("taskId")
    if not isinstance(task_id, str) or not task_id:
        return "taskId must be a non-empty string"
    if result.get("status") not in TASK_STATUSES:
        return f"status {result.get('status')!r} is not one of {sorted(TASK_STATUSES)}"
    for key in ("createdAt", "lastUpdatedAt"):
        value = result.get(key)
        if not isinstance(value, str) or not _ISO8601.fullmatch(value):
            return f"{key} must be an ISO 8601 date-time, got {value!r}"
    if "ttlMs" not in result:
        return "ttlMs must be present (null or a non-negative integer)"
    if result["ttlMs"] is not None and not _non_negative_int(result["ttlMs"]):
        return f"ttlMs must be null or a non-negative integer, got {result['ttlMs']!r}"
    if "pollIntervalMs" in result and not _non_negative_int(result["pollIntervalMs"]):
        return f"pollIntervalMs must be a non-negative integer, got {result['pollIntervalMs']!r}"
    return ""


_STATUS_FIELD = {"completed": "result", "failed": "error", "input_required": "inputRequests"}


def task_answer_problem(task: dict[str, Any]) -> str:
    """Why a Task as ``tasks/get`` answers it (or ``notifications/tasks`` carries it) breaks
    the extension ("Task Polling": its status carries its payload, e.g. completed: result),
    or ``""``."""
    problem = _task_fields(task)
    if not problem:
        status = task["status"]
        key = _STATUS_FIELD.get(status)
        if key is not None and not isinstance(task.get(key), dict):
            got = json_type(task.get(key))
            problem = f"a {status} task must carry {key} (an object), got {got}"
    return problem


def _task_get(result: dict[str, Any], where: str) -> list[Finding]:
    """A ``tasks/get`` answer: a Task whose status carries its payload (e.g. completed: result)."""
    problem = task_answer_problem(result)
    return [finding("response.payload.task", f"tasks/get: {problem}", where)] if problem else []


_ACK_KEYS = frozenset({"resultType", "_meta"})


def _task_ack(method: str, result: dict[str, Any], where: str) -> list[Finding]:
    """``tasks/update`` and ``tasks/cancel`` MUST acknowledge with an empty result
    (ext-tasks-draft "Task Update Requests", "Task Cancellation")."""
    extra = sorted(k for k in result if k not in _ACK_KEYS)
    if not extra:
        return []
    return [finding("response.payload.task",
                    f"{method} must be acknowledged with an empty result, got {extra}", where)]


# The client capability each kind of input request needs (mrtr "Server Requirements").
_INPUT_CAPABILITY = {
    "elicitation/create": "elicitation",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}


def task_input_capabilities(
    result: Any, capabilities: dict[str, Any], where: str
) -> list[Finding]:
    """An ``input_required`` task's ``inputRequests`` (a ``tasks/get`` answer) against the
    capabilities the polling request declared, as a direct ``InputRequiredResult``'s."""
    if not isinstance(result, dict) or result.get("status") != "input_required":
        return []
    return _input_capabilities(result, capabilities, where)


def _input_capabilities(
    result: dict[str, Any], capabilities: dict[str, Any] | None, where: str
) -> list[Finding]:
    """Every input request is one of the three kinds, for a capability the client declared."""
    requests = result.get("inputRequests")
    if not isinstance(requests, dict):
        return []
    for key, request in requests.items():
        method = request.get("method") if isinstance(request, dict) else None
        needed = _INPUT_CAPABILITY.get(method) if isinstance(method, str) else None
        if needed is None:
            return [
                finding(
                    "response.payload.input-required",
                    f"inputRequests[{key!r}] must be an elicitation, sampling or roots request, "
                    f"got {method!r}",
                    where,
                )
            ]
        if capabilities is None:
            continue
        if needed not in capabilities:
            return [
                finding(
                    "response.payload.input-required",
                    f"inputRequests[{key!r}] is {method}, but the client did not declare {needed}",
                    where,
                )
            ]
        params = request.get("params") if isinstance(request, dict) else None
        sub = sub_capability_problem(str(method), params, capabilities.get(needed))
        if sub is not None:
            rule_id, problem = sub
            return [finding(rule_id, f"inputRequests[{key!r}]: {problem}", where)]
    return []


def server_request_problem(
    method: str, params: Any, capabilities: dict[str, Any]
) -> tuple[str, str] | None:
    """A legacy server-to-client request against the capabilities the client declared at
    ``initialize``: ``(rule id, why)`` or None. Methods other than the three capability-bound
    ones (``ping``, ``tasks/*``) are not judged here."""
    needed = _INPUT_CAPABILITY.get(method)
    if needed is None:
        return None
    if needed not in capabilities:
        return ("sse.server-request",
                f"{method}, but the client did not declare {needed} at initialize")
    found = sub_capability_problem(method, params, capabilities.get(needed))
    if found is None:
        return None
    rule_id, why = found
    return ("sse.server-request" if rule_id == "response.payload.input-required" else rule_id,
            f"{method}: {why}")


def sub_capability_problem(
    method: str, params: Any, declared: Any
) -> tuple[str, str] | None:
    """What a server-to-client request asks beyond the members of the capability the client
    declared: ``(rule id, why)``, or None.

    ``elicitation``: ``form`` and ``url`` are the modes; an empty object means form only
    (client/elicitation "Capabilities": servers MUST NOT send a mode the client did not
    declare). ``sampling``: ``tools`` allows tool-enabled requests (a MUST, client/sampling
    "Tools in Sampling"); ``context`` allows ``includeContext`` other than ``none`` (a
    SHOULD NOT, "Capabilities"). ``roots`` has no member a request uses.
    """
    declared = declared if isinstance(declared, dict) else {}
    params = params if isinstance(params, dict) else {}
    if method == "elicitation/create":
        mode = params.get("mode", "form")
        modes = {m for m in ("form", "url") if m in declared} or {"form"}
        if isinstance(mode, str) and mode in ("form", "url") and mode not in modes:
            shown = ", ".join(sorted(modes))
            return (
                "response.payload.input-required",
                f"elicitation mode {mode!r}, but the client declared elicitation for {shown} only",
            )
    elif method == "sampling/createMessage":
        if ("tools" in params or "toolChoice" in params) and "tools" not in declared:
            return (
                "response.payload.input-required",
                "tool-enabled sampling (tools/toolChoice), but the client did not declare "
                "sampling.tools",
            )
        context = params.get("includeContext")
        if context in ("thisServer", "allServers") and "context" not in declared:
            return (
                "response.payload.sampling-context",
                f"includeContext {context!r}, but the client did not declare sampling.context",
            )
    return None


def _input_required(method: str | None, result: dict[str, Any], where: str) -> list[Finding]:
    def bad(msg: str) -> list[Finding]:
        return [finding("response.payload.input-required", msg, where)]

    if method not in INPUT_REQUIRED_METHODS:
        return bad(
            f"input_required is only valid for {', '.join(sorted(INPUT_REQUIRED_METHODS))}, "
            f"not {method}"
        )
    requests = result.get("inputRequests")
    state = result.get("requestState")
    if requests is None and state is None:
        return bad("input_required carries neither inputRequests nor requestState")
    if requests is not None and not isinstance(requests, dict):
        return bad("inputRequests must be an object")
    if state is not None and not isinstance(state, str):
        return bad("requestState must be a string")
    return []
