"""Mirrored headers: the one value of a routing header, ``Mcp-Name`` against the routed
params value (after sentinel decoding), and ``Mcp-Param-*`` against the arguments a tool's
``x-mcp-header`` declarations name (rung 4 of the modern request ladder, see requests.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from mcp_tap.core.catalog import finding
from mcp_tap.core.eras import (
    HEADER_METHOD,
    HEADER_NAME,
    HEADER_PARAM_PREFIX,
    HEADER_PROTOCOL_VERSION,
    NAME_ROUTED_PARAMS,
)
from mcp_tap.core.findings import Finding
from mcp_tap.core.headers import ConflictingHeaderError, HeaderMap
from mcp_tap.core.results import mentions_x_mcp_header
from mcp_tap.core.sentinel import SentinelError, decode_header_value

WHERE = "ingress"
# Plain decimals only: exponent forms and NaN never compare numerically.
_DECIMAL = re.compile(r"-?[0-9]+(\.[0-9]+)?")


@dataclass(frozen=True, slots=True)
class ParamHeader:
    """One ``x-mcp-header`` declaration of a tool: argument path, header token, JSON type."""

    path: tuple[str, ...]
    token: str
    json_type: str | None


def param_headers(input_schema: Any) -> tuple[ParamHeader, ...]:
    """The ``x-mcp-header`` declarations reachable through plain ``properties`` chains."""
    found: list[ParamHeader] = []

    def walk(node: Any, path: tuple[str, ...]) -> None:
        if not isinstance(node, dict):
            return
        props = node.get("properties")
        if not isinstance(props, dict):
            return
        for name, sub in props.items():
            if not isinstance(sub, dict):
                continue
            token = sub.get("x-mcp-header")
            if isinstance(token, str) and token:
                t = sub.get("type")
                found.append(ParamHeader((*path, name), token, t if isinstance(t, str) else None))
            walk(sub, (*path, name))

    walk(input_schema, ())
    return tuple(found)


def single_value(headers: HeaderMap, name: str) -> tuple[str | None, Finding | None]:
    """The one value of a mirrored header, without the optional whitespace around it.

    HTTP strips spaces and tabs around a field value (RFC 9110 5.5): they are not part of
    it, so ``Mcp-Name:  foo `` carries ``foo`` (SEP-2243, "Header/Body Mismatch").
    """
    raw = headers.values_of(name)
    if len(raw) == 1:  # the common case: one value, no duplicate to compare
        return raw[0].strip(" \t"), None
    if not raw:
        return None, None
    values = [v.strip(" \t") for v in raw]
    if any(v != values[0] for v in values[1:]):
        exc = ConflictingHeaderError(name, headers.get_all(name))
        return None, finding("request.header.duplicate", str(exc), WHERE)
    return values[0], None


def duplicate_routing_header(headers: HeaderMap) -> Finding | None:
    """A conflicting duplicate of a routing header (version, method, name), if any."""
    for name in (HEADER_PROTOCOL_VERSION, HEADER_METHOD, HEADER_NAME):
        _, problem = single_value(headers, name)
        if problem:
            return problem
    return None


MISSING = " header is missing"
"""How a missing mirrored header's finding message ends (after the header's name)."""


def mirror_problem(headers: HeaderMap, name: str, body_value: Any, what: str) -> Finding | None:
    """Header ``name`` against the body value it mirrors: missing, mismatched, or ``None``."""
    value, problem = single_value(headers, name)
    if problem:
        return problem
    if value is None:
        return finding("request.header.missing", f"{name}{MISSING}", WHERE)
    if value != body_value:
        return finding(
            "request.header.mismatch",
            f"{name}: {value!r} differs from {what} {body_value!r}",
            WHERE,
        )
    return None


def _decoded(headers: HeaderMap, name: str) -> tuple[str | None, Finding | None]:
    raw, problem = single_value(headers, name)
    if problem or raw is None:
        return None, problem
    try:
        return decode_header_value(raw), None
    except SentinelError as exc:
        return None, finding("request.header.encoding", f"{name}: {exc}", WHERE)


def name_header_problem(
    headers: HeaderMap, message: dict[str, Any], method: str
) -> Finding | None:
    """``Mcp-Name`` against the params value ``method`` routes by (after sentinel decoding)."""
    key = NAME_ROUTED_PARAMS.get(method)
    if key is None:
        return None
    params = message.get("params") or {}
    body_value = params.get(key) if isinstance(params, dict) else None
    decoded, problem = _decoded(headers, HEADER_NAME)
    if problem:
        return problem
    if decoded is None:
        if body_value is None:
            return None
        return finding("request.header.missing", f"{HEADER_NAME} header is missing", WHERE)
    if decoded != body_value:
        return finding(
            "request.header.mismatch",
            f"{HEADER_NAME}: {decoded!r} differs from params.{key} {body_value!r}",
            WHERE,
        )
    return None


def param_header_problem(
    headers: HeaderMap, message: dict[str, Any], method: str, tool_schemas: Mapping[str, Any]
) -> Finding | None:
    """Each ``Mcp-Param-*`` header against the tools/call argument its tool declares."""
    if method != "tools/call":
        return None
    params = message.get("params") or {}
    tool = params.get("name")
    if not isinstance(tool, str) or tool not in tool_schemas:
        return None
    input_schema = tool_schemas[tool]
    if not mentions_x_mcp_header(input_schema):
        return None  # the common case: no declaration, no walk (param_headers would be ())
    arguments = params.get("arguments")
    arguments = arguments if isinstance(arguments, dict) else {}
    for decl in param_headers(input_schema):
        name = HEADER_PARAM_PREFIX + decl.token
        value = _at_path(arguments, decl.path)
        decoded, problem = _decoded(headers, name)
        if problem:
            return problem
        argument = ".".join(decl.path)
        if value is None:
            if decoded is not None:
                return finding(
                    "request.header.mismatch",
                    f"{name} is present but argument {argument!r} is absent",
                    WHERE,
                )
            continue
        if decoded is None:
            return finding(
                "request.header.missing",
                f"{name} header is missing for argument {argument!r}",
                WHERE,
            )
        if not _param_matches(decl.json_type, value, decoded):
            return finding(
                "request.header.mismatch",
                f"{name}: {decoded!r} differs from argument {argument!r} {value!r}",
                WHERE,
            )
    return None


def _at_path(arguments: dict[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = arguments
    for key in path:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


# Tuples: isinstance with a union (int | float) builds the union every call.
_NUMBER = (int, float)
_SCALAR = (str, int, float)


def _param_matches(declared: str | None, value: Any, decoded: str) -> bool:
    if isinstance(value, bool):
        return decoded == ("true" if value else "false")
    if isinstance(value, _NUMBER) and declared in ("integer", "number"):
        # Integers compare numerically: "042" and "42.0" equal 42.
        if not _DECIMAL.fullmatch(decoded):
            return False
        try:
            return Decimal(decoded) == Decimal(str(value))
        except InvalidOperation:  # pragma: no cover - the pattern admits only valid decimals
            return False
    if isinstance(value, _SCALAR):
        return decoded == str(value)
    return False
