"""Full wire-schema validation against the official generated types of each revision.

The precise hand-written rules say *why* a message is wrong; this module makes sure nothing
the official schema forbids slips through a rule nobody wrote. It uses
``mcp_types.methods`` (the SDK's public per-version method maps over the generated
``mcp_types._v2026_07_28`` / ``_v2025_11_25`` models), reported as rule ``wire.schema``.
"""

from __future__ import annotations

from functools import cache
from types import UnionType
from typing import Any, get_args

from mcp_types import methods as _methods
from pydantic import TypeAdapter, ValidationError

from mcp_tap.core.eras import LEGACY_VERSIONS, MODERN_VERSIONS

KNOWN_VERSIONS = frozenset(MODERN_VERSIONS) | frozenset(LEGACY_VERSIONS)


@cache
def _adapter(arm: Any) -> TypeAdapter[Any]:
    return TypeAdapter(arm)


def _summary(exc: ValidationError) -> str:
    errors = exc.errors()
    parts = []
    for err in errors[:3]:
        loc = ".".join(str(p) for p in err.get("loc", ()))
        parts.append(f"{loc or '<root>'}: {err.get('msg', 'invalid')}")
    more = f" (+{len(errors) - 3} more)" if len(errors) > 3 else ""
    return "; ".join(parts) + more


def request_problem(method: str, version: str, params: Any) -> str:
    """Why the official schema rejects this client request ("" when it accepts or has no row).

    Methods outside the revision's schema (custom or extension methods) are not judged here.
    """
    if version not in KNOWN_VERSIONS or not isinstance(params, dict | None):
        return ""
    try:
        _methods.validate_client_request(method, version, params)
    except KeyError:
        return ""
    except ValidationError as exc:
        return f"{method} request does not match the {version} schema: {_summary(exc)}"
    return ""


def result_problem(method: str, version: str, result: Any) -> str:
    """Why the official schema rejects this server result ("" when it accepts or has no row)."""
    if version not in KNOWN_VERSIONS or not isinstance(result, dict):
        return ""
    row = _methods.SERVER_RESULTS.get((method, version))
    if row is None:
        return ""
    # Dual-result rows are unions whose input_required arm has only optional fields, so a
    # union would accept any malformed complete result: pick the arm the discriminator names.
    arms = (
        [a for a in get_args(row) if isinstance(a, type)] if isinstance(row, UnionType) else [row]
    )
    wanted = "InputRequiredResult" if result.get("resultType") == "input_required" else None
    chosen = [a for a in arms if (a.__name__ == "InputRequiredResult") == (wanted is not None)]
    try:
        for arm in chosen or arms:
            _adapter(arm).validate_python(result, by_name=False)
    except ValidationError as exc:
        return f"{method} result does not match the {version} schema: {_summary(exc)}"
    return ""
