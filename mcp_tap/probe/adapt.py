"""Adapting a golden request to the live server's inventory: fill missing required
arguments, substitute a missing item the case does not depend on, or skip with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from mcp_tap.core.eras import (
    HEADER_NAME,
    HEADER_PARAM_PREFIX,
    Era,
)
from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.requests import param_headers
from mcp_tap.core.sentinel import encode_header_value, is_safe_plain
from mcp_tap.probe.inventory import (
    Inventory,
)
from mcp_tap.probe.model import Expect
from mcp_tap.transcripts import Case


def _dict(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def _expected_result_type(case: Case) -> str | None:
    """The ``resultType`` of the case's described result (``complete`` when absent)."""
    body = case.response_body
    if isinstance(body, dict) and isinstance(body.get("sse"), list):
        return "stream"  # An SSE answer is about the stream; do not substitute its tool.
    result = body.get("result") if isinstance(body, dict) else None
    if not isinstance(result, dict):
        return None
    rtype = result.get("resultType", "complete")
    return rtype if isinstance(rtype, str) else None


def _synth(schema: Any) -> tuple[bool, Any]:
    """A plausible value for one JSON-schema property: ``(True, value)`` or ``(False, None)``."""
    if not isinstance(schema, dict):
        return False, None
    if "default" in schema:
        return True, schema["default"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return True, schema["enum"][0]
    if "const" in schema:
        return True, schema["const"]
    kind = schema.get("type")
    if kind in ("integer", "number"):
        low = schema.get("minimum", 1)
        value = max(1, low) if isinstance(low, int | float) else 1
        return True, int(value) if kind == "integer" else value
    plain = {"string": "hello", "boolean": True, "array": [], "object": {}, "null": None}
    if isinstance(kind, str) and kind in plain:
        return True, plain[kind]
    return False, None


def _fill_arguments(schema: Any, given: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``given`` plus a value for each missing required argument; the names it could not fill."""
    args = dict(given)
    if not isinstance(schema, dict):
        return args, []
    props = _dict(schema.get("properties"))
    required = schema.get("required")
    required = required if isinstance(required, list) else []
    unfilled: list[str] = []
    for name in required:
        if not isinstance(name, str) or name in args:
            continue
        ok, value = _synth(props.get(name))
        if ok:
            args[name] = value
        else:
            unfilled.append(name)
    return args, unfilled


def _param_tokens(headers: HeaderMap) -> set[str]:
    """The ``Mcp-Param-{Token}`` tokens a request carries, lowercased."""
    return {n[len(HEADER_PARAM_PREFIX):].lower()
            for n in headers.names_with_prefix(HEADER_PARAM_PREFIX)}


def _declared_tokens(tool: Mapping[str, Any] | None) -> set[str]:
    schema = tool.get("inputSchema") if tool else None
    return {decl.token.lower() for decl in param_headers(schema)}


def _with_name_header(headers: HeaderMap, value: str) -> HeaderMap:
    """``headers`` with every ``Mcp-Name`` value replaced (encoded for the wire)."""
    if HEADER_NAME not in headers:
        return headers
    encoded = encode_header_value(value)
    return HeaderMap(tuple((k, encoded if k.lower() == HEADER_NAME.lower() else v)
                           for k, v in headers))


def _name_is_plain(headers: HeaderMap, name: Any) -> bool:
    """Whether a routed name is incidental: header-safe and mirrored verbatim (or not at all)."""
    if not isinstance(name, str) or not is_safe_plain(name):
        return False
    return all(v == name for v in headers.get_all(HEADER_NAME))


@dataclass(slots=True)
class Draft:
    """A case being adapted: mutable while the planner works on it."""

    case: Case
    headers: HeaderMap
    message: dict[str, Any]
    expect: Expect
    code: int | None
    notes: list[str] = field(default_factory=list)
    skip: str | None = None

    @property
    def params(self) -> dict[str, Any]:
        """The request's ``params`` object (created empty when absent, so adapters can edit it)."""
        params = self.message.get("params")
        if not isinstance(params, dict):
            params = {}
            self.message["params"] = params
        return params


def _substitutable(draft: Draft, name: Any) -> bool:
    """Whether a missing item may be replaced: an ordinary call expecting a plain result."""
    return (draft.expect is Expect.RESULT
            and _expected_result_type(draft.case) == "complete"
            and not _param_tokens(draft.headers)
            and _name_is_plain(draft.headers, name))


def _missing(draft: Draft, what: str, name: Any) -> None:
    """The server lacks the item a golden case names: route-check it or skip it."""
    if draft.expect is Expect.RESULT and not _name_is_plain(draft.headers, name):
        draft.expect = Expect.ROUTED
        draft.notes.append(f"{what} {name!r} is not on the server; the case is about that "
                           "name, so any answer but a request rejection passes")
        return
    why = ""
    rtype = _expected_result_type(draft.case)
    if rtype == "stream":
        why = " (the case expects an SSE stream from it)"
    elif rtype not in (None, "complete"):
        why = f" (the case expects a result of type {rtype!r})"
    draft.skip = f"needs {what} {name!r}{why}"


def _adapt_tool_call(draft: Draft, inv: Inventory) -> None:
    params = draft.params
    name = params.get("name")
    given = _dict(params.get("arguments"))
    used = _param_tokens(draft.headers)
    tool = inv.tools.get(name) if isinstance(name, str) else None
    if tool is not None:
        lacking = used - _declared_tokens(tool)
        if lacking:
            draft.skip = (f"needs tool {name!r} declaring x-mcp-header "
                          f"{', '.join(sorted(lacking))} (the server's {name!r} does not)")
            return
        if draft.expect is Expect.REJECTED:
            return  # A negative request is sent exactly as written.
        args, unfilled = _fill_arguments(tool.get("inputSchema"), given)
        if unfilled:
            draft.skip = f"needs tool {name!r} with arguments the probe can fill ({unfilled})"
            return
        if args != given:
            params["arguments"] = args
            draft.notes.append(f"filled required argument(s) of {name!r}: "
                               f"{sorted(set(args) - set(given))}")
        if draft.case.era is Era.MODERN:
            _mirror_params(draft, tool, args)  # Legacy revisions have no Mcp-Param-* headers.
        return
    if draft.expect is Expect.REJECTED:
        if used:
            # Param headers are only checkable by a server that declares them for this tool.
            draft.skip = f"needs tool {name!r} declaring x-mcp-header {', '.join(sorted(used))}"
        return
    if not _substitutable(draft, name):
        _missing(draft, "tool", name)
        return
    for other, descriptor in inv.tools.items():
        if _declared_tokens(descriptor):
            continue  # A substitute must not need Mcp-Param-* headers the case lacks.
        args, unfilled = _fill_arguments(descriptor.get("inputSchema"), {})
        if unfilled:
            continue
        params["name"] = other
        params["arguments"] = args
        draft.headers = _with_name_header(draft.headers, other)
        draft.notes.append(f"tool {name!r} is not on the server: called {other!r} "
                           f"with {orjson.dumps(args).decode()}")
        return
    draft.skip = f"needs tool {name!r} (the server lists no tool the probe can call)"


def _header_text(value: Any) -> str | None:
    """An argument as an ``Mcp-Param-*`` value (spec: Value Encoding), ``None`` if not primitive."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return encode_header_value(value)
    return None


def _mirror_params(draft: Draft, tool: Mapping[str, Any], args: Mapping[str, Any]) -> None:
    """Add the ``Mcp-Param-*`` headers the server's tool declares and the case lacks.

    A golden call must stay golden against this server: its tool may declare
    ``x-mcp-header`` arguments the corpus's imaginary tool did not.
    """
    added: list[str] = []
    for decl in param_headers(tool.get("inputSchema")):
        name = HEADER_PARAM_PREFIX + decl.token
        node: Any = args
        for key in decl.path:
            node = node.get(key) if isinstance(node, dict) else None
        text = _header_text(node)
        if text is None or name in draft.headers:
            continue
        draft.headers = HeaderMap((*draft.headers.pairs, (name, text)))
        added.append(name)
    if added:
        draft.notes.append(f"added {', '.join(added)} for the server's x-mcp-header arguments")


def _prompt_arguments(prompt: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    declared: list[str] = []
    required: list[str] = []
    for arg in prompt.get("arguments") or []:
        if isinstance(arg, dict) and isinstance(arg.get("name"), str):
            declared.append(arg["name"])
            if arg.get("required"):
                required.append(arg["name"])
    return declared, required


def _adapt_prompt_get(draft: Draft, inv: Inventory) -> None:
    params = draft.params
    name = params.get("name")
    given = _dict(params.get("arguments"))
    prompt = inv.prompts.get(name) if isinstance(name, str) else None
    if prompt is None:
        if not _substitutable(draft, name) or not inv.prompts:
            _missing(draft, "prompt", name)
            return
        name, prompt = next(iter(inv.prompts.items()))
        draft.notes.append(f"prompt {params.get('name')!r} is not on the server: "
                           f"got {name!r} instead")
        params["name"] = name
        draft.headers = _with_name_header(draft.headers, name)
    declared, required = _prompt_arguments(prompt)
    # The case's argument values, in order, fill the server's required arguments: the
    # case's intent ("greet ada") survives a different argument name.
    spare = [v for k, v in given.items() if k not in declared and isinstance(v, str)]
    args = {k: v for k, v in given.items() if k in declared}
    for arg in required:
        if arg not in args:
            args[arg] = spare.pop(0) if spare else "hello"
    if args != given:
        draft.notes.append(f"prompt arguments {sorted(given)} -> {sorted(args)}")
        params["arguments"] = args


def _adapt_resource_read(draft: Draft, inv: Inventory) -> None:
    params = draft.params
    uri = params.get("uri")
    if uri in inv.resources or draft.expect is not Expect.RESULT:
        return  # Present, or the case wants the server's error for a missing resource.
    if not _substitutable(draft, uri) or not inv.resources:
        _missing(draft, "resource", uri)
        return
    params["uri"] = inv.resources[0]
    draft.headers = _with_name_header(draft.headers, inv.resources[0])
    draft.notes.append(f"resource {uri!r} is not on the server: read {inv.resources[0]!r}")


def _adapt_completion(draft: Draft, inv: Inventory) -> None:
    params = draft.params
    ref = params.get("ref")
    argument = params.get("argument")
    if not isinstance(ref, dict) or ref.get("type") != "ref/prompt" or not isinstance(argument,
                                                                                       dict):
        return
    name = ref.get("name")
    prompt = inv.prompts.get(name) if isinstance(name, str) else None
    if prompt is None or not _prompt_arguments(prompt)[0]:
        found = next(((n, p) for n, p in inv.prompts.items() if _prompt_arguments(p)[0]), None)
        if found is None:
            draft.skip = f"needs prompt {name!r} with an argument to complete"
            return
        draft.notes.append(f"prompt {name!r} is not on the server: completing {found[0]!r}")
        name, prompt = found
        params["ref"] = {**ref, "name": name}
    declared, _ = _prompt_arguments(prompt)
    if argument.get("name") not in declared:
        draft.notes.append(f"argument {argument.get('name')!r} -> {declared[0]!r}")
        params["argument"] = {**argument, "name": declared[0]}


ADAPTERS = {
    "tools/call": _adapt_tool_call,
    "prompts/get": _adapt_prompt_get,
    "resources/read": _adapt_resource_read,
    "completion/complete": _adapt_completion,
}
