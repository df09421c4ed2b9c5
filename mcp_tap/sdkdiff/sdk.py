"""The SDK's own path for a received result: versions, parsing, the typed view (see
:mod:`mcp_tap.sdkdiff`)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache, lru_cache
from types import UnionType
from typing import Any, Final, get_args

import mcp_types as sdk_types
from mcp_types import methods as sdk_methods
from mcp_types import version as sdk_versions
from pydantic import TypeAdapter, ValidationError

from mcp_tap.errors import TapError
from mcp_tap.sdkversion import package_version

TYPED_METHODS: Final[frozenset[str]] = frozenset(
    {
        "initialize",
        "server/discover",
        "tools/list",
        "tools/call",
        "prompts/list",
        "prompts/get",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "completion/complete",
    }
)
"""The methods whose results the SDK client parses into a public typed model."""

ERAS: Final[frozenset[str]] = frozenset({"modern", "legacy"})

_MODERN_VERSION: Final = "2026-07-28"
_LEGACY_VERSION: Final = "2025-11-25"
# ClientSession.send_request's literal fallback before a version is negotiated: the revision
# every initialize result is validated at.
_PRE_HANDSHAKE_VERSION: Final = "2025-11-25"

_DUMP_OPTIONS: Final[dict[str, Any]] = {"mode": "json", "by_alias": True}
_PLAIN_KEY = re.compile(r"[A-Za-z_$][A-Za-z0-9_$-]*")
_INDEX = re.compile(r"\[\d+\]")


class SdkParseError(TapError):
    """The SDK client rejects a result: the application would get an exception, not a value."""


@dataclass(frozen=True, slots=True)
class Difference:
    """One difference between the wire result and the SDK view, before the allowlist."""

    rule: str
    path: str
    key: str
    message: str


class _Removed:
    """Marks a list element the SDK client removed (a tool filtered out of a listing)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


# --- versions and the SDK itself -------------------------------------------------------------


def sdk_version(era: str, version: str | None = None) -> str:
    """Return the protocol revision the SDK session would have negotiated for ``era``.

    ``version`` (for instance the request's ``_meta`` protocol version or its
    ``MCP-Protocol-Version`` header) is used when it is a known revision of that era;
    otherwise the era's newest revision is assumed. ``era`` may itself be a revision string.
    All pre-2026 revisions share one wire schema, so the legacy choice only matters for the
    version gate, not for the shape.
    """
    modern: tuple[str, ...] = tuple(sdk_versions.MODERN_PROTOCOL_VERSIONS)
    legacy: tuple[str, ...] = tuple(sdk_versions.HANDSHAKE_PROTOCOL_VERSIONS)
    if era in modern or era in legacy:
        return era
    if era == "modern":
        return version if version in modern else _MODERN_VERSION
    if era == "legacy":
        return version if version in legacy else _LEGACY_VERSION
    raise ValueError(f"era must be 'modern', 'legacy' or a known protocol version, got {era!r}")


def _is_modern(version: str) -> bool:
    return version in tuple(sdk_versions.MODERN_PROTOCOL_VERSIONS)






def sdk_provenance() -> dict[str, Any]:
    """Say which SDK produced the typed view: package versions and the tool-listing filter."""
    return {
        "mcpTypes": package_version("mcp-types"),
        "mcp": package_version("mcp"),
        "toolHeaderFilter": _x_mcp_header_checker() is not None,
    }


@cache
def _x_mcp_header_checker() -> Callable[[Any], str | None] | None:
    """The SDK client's own ``x-mcp-header`` validator, or None when ``mcp`` is not installed."""
    try:
        from mcp.shared.inbound import find_invalid_x_mcp_header
    except ImportError:
        return None
    checker: Callable[[Any], str | None] = find_invalid_x_mcp_header
    return checker


@cache
def _adapter(target: Any) -> TypeAdapter[Any]:
    return TypeAdapter(target)


def _wire_fields(target: Any) -> frozenset[str]:
    """Top-level wire keys a surface row declares (its members', for a union)."""
    members = get_args(target) if isinstance(target, UnionType) else (target,)
    keys: set[str] = set()
    for model in members:
        fields = getattr(model, "model_fields", None)
        if isinstance(fields, dict):
            for name, info in fields.items():
                keys.add(info.alias or name)
    return frozenset(keys)


@lru_cache(maxsize=256)  # a few methods and revisions, over and over; requests name any string
def _later_revision_fields(method: str, version: str) -> frozenset[str]:
    """Result keys a newer revision declares for ``method`` that ``version`` does not."""
    surface: Mapping[tuple[str, str], Any] = sdk_methods.SERVER_RESULTS
    known: tuple[str, ...] = tuple(sdk_versions.KNOWN_PROTOCOL_VERSIONS)
    current = surface.get((method, version))
    if current is None or version not in known:
        return frozenset()
    later: set[str] = set()
    for revision in known[known.index(version) + 1 :]:
        row = surface.get((method, revision))
        if row is not None:
            later |= _wire_fields(row)
    return frozenset(later) - _wire_fields(current)


def _clamp_inbound_ttl(raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` as the SDK client reads it: a negative ``ttlMs`` clamped to 0, in a shallow
    copy (the caller's result may be shared and is never changed)."""
    ttl = raw.get("ttlMs")
    if isinstance(ttl, int | float) and not isinstance(ttl, bool) and ttl < 0:
        return {**raw, "ttlMs": 0}
    return raw


def _describe(exc: ValidationError, method: str, version: str) -> str:
    parts = []
    for error in exc.errors()[:3]:
        loc = ".".join(str(p) for p in error.get("loc", ())) or "result"
        parts.append(f"{loc}: {error.get('msg', 'invalid')}")
    more = exc.error_count() - len(parts)
    tail = f" (+{more} more)" if more > 0 else ""
    return f"the SDK rejects the {method} result at {version}: " + "; ".join(parts) + tail


def _parse(method: str, version: str, result: Any) -> tuple[Any, dict[int, str]]:
    """Run the SDK client's receive path; return the typed model and the removed tools."""
    if method not in TYPED_METHODS:
        raise ValueError(f"{method!r} is not a method the SDK types (see TYPED_METHODS)")
    if not isinstance(result, dict):
        raise SdkParseError(f"the {method} result is not a JSON object")
    # Pydantic's validation reads its input without changing it, and the clamp (the one
    # change the client makes) copies: the result itself is validated, not a deep copy
    # (an orjson round trip was an eighth of a distinct result's differential).
    raw: dict[str, Any] = _clamp_inbound_ttl(result)
    removed: dict[int, str] = {}
    try:
        if method == "server/discover":
            # ClientSession.discover / negotiate_auto: no wire-model validation, default by_name.
            return sdk_types.DiscoverResult.model_validate(raw), removed
        if method == "initialize":
            version = _PRE_HANDSHAKE_VERSION
        with contextlib.suppress(KeyError):  # the session skips rows the surface lacks
            sdk_methods.validate_server_result(method, version, raw)
        foreign = _later_revision_fields(method, version)
        if not foreign.isdisjoint(raw):
            raw = {key: value for key, value in raw.items() if key not in foreign}
        model = _adapter(sdk_methods.MONOLITH_RESULTS[method]).validate_python(raw, by_name=False)
    except ValidationError as exc:
        raise SdkParseError(_describe(exc, method, version)) from None
    if method == "initialize":
        handshake: tuple[str, ...] = tuple(sdk_versions.HANDSHAKE_PROTOCOL_VERSIONS)
        if model.protocol_version not in handshake:
            raise SdkParseError(
                "the SDK client refuses the initialize result: unsupported protocolVersion "
                f"{model.protocol_version!r}"
            )
    if method == "tools/list" and _is_modern(version):
        checker = _x_mcp_header_checker()
        if checker is not None:
            for index, tool in enumerate(model.tools):
                reason = checker(tool.input_schema)
                if reason is not None:
                    removed[index] = reason
    return model, removed


def _full_view(model: Any, removed: Mapping[int, str]) -> dict[str, Any]:
    view: dict[str, Any] = model.model_dump(**_DUMP_OPTIONS)
    if removed:
        view["tools"] = [
            _Removed(removed[i]) if i in removed else tool for i, tool in enumerate(view["tools"])
        ]
    return view


def sdk_view(
    method: str, era: str, result: dict[str, Any], *, version: str | None = None
) -> dict[str, Any]:
    """Return the SDK client's typed view of a raw ``result``, dumped back to the wire shape.

    ``era`` is ``"modern"``, ``"legacy"`` or a protocol revision; ``version`` optionally names
    the revision the exchange used (see :func:`sdk_version`). Tools the modern client filters
    out of a listing are absent from the view.

    Raises:
        SdkParseError: the SDK client rejects the result (the application gets an exception).
        ValueError: an unknown era or a method the SDK does not type.
    """
    resolved = sdk_version(era, version)
    model, removed = _parse(method, resolved, result)
    view: dict[str, Any] = model.model_dump(exclude_none=True, **_DUMP_OPTIONS)
    if removed:
        view["tools"] = [tool for i, tool in enumerate(view["tools"]) if i not in removed]
    return view
