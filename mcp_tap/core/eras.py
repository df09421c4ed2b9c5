"""Version eras: which protocol revisions are modern or legacy, and the metadata keys.

Two eras, never one lenient validator for both: every exchange is judged in exactly one
era and the era is recorded beside it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Final

MODERN_VERSIONS: tuple[str, ...] = ("2026-07-28",)
"""Revisions that use the per-request `_meta` envelope (no initialize handshake)."""

LEGACY_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
"""Revisions of the initialize-handshake era, newest first."""

BATCH_VERSIONS: tuple[str, ...] = ("2025-03-26",)
"""Revisions that define JSON-RPC batches (2025-03-26 basic/index "Batching"; added there,
removed again by 2025-06-18)."""

HEADERLESS_VERSION = "2025-03-26"
"""The revision a legacy request without ``MCP-Protocol-Version`` (and no negotiated one) is
assumed to speak (2025-11-25 transports "Protocol Version Header"; 2026-07-28
streamable-http: a server MAY treat such a request as 2025-03-26)."""

HEADERLESS_REVISIONS = frozenset({"2025-03-26", "2024-11-05"})
"""Revisions whose transport defines no ``MCP-Protocol-Version`` header (it came with
2025-06-18), so no 400 for an invalid one, and no 403 for an invalid ``Origin`` either
(2025-03-26 transports "Security Warning" only says to validate it)."""

PINNED_LEGACY_VERSION = "2025-11-25"
"""The legacy revision a fallback client pins (and the SDK's handshake default)."""

NAMESPACE = "io.modelcontextprotocol/"
META_PROTOCOL_VERSION = NAMESPACE + "protocolVersion"
META_CLIENT_CAPABILITIES = NAMESPACE + "clientCapabilities"
META_CLIENT_INFO = NAMESPACE + "clientInfo"
META_LOG_LEVEL = NAMESPACE + "logLevel"
META_SERVER_INFO = NAMESPACE + "serverInfo"
META_SUBSCRIPTION_ID = NAMESPACE + "subscriptionId"
MODERN_META_KEYS = frozenset({META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES})

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"

HEADER_PROTOCOL_VERSION = "MCP-Protocol-Version"
HEADER_METHOD = "Mcp-Method"
HEADER_NAME = "Mcp-Name"
HEADER_PARAM_PREFIX = "Mcp-Param-"
HEADER_SESSION_ID = "Mcp-Session-Id"

REMOVED_IN_MODERN = frozenset(
    {
        "initialize",
        "notifications/initialized",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
    }
)
"""Methods the 2026-07-28 revision removed."""

NAME_ROUTED_PARAMS: dict[str, str] = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}
"""Method -> the params key that `Mcp-Name` mirrors."""


class Era(StrEnum):
    """The era an exchange is judged in."""

    MODERN = "modern"
    LEGACY = "legacy"
    UNKNOWN = "unknown"


# The members as module constants. On Python 3.11 ``Era.MODERN`` is a look-up through the
# slot of EnumType.__getattr__, several times a global's cost; the judge compares eras a
# dozen times per exchange, so its modules use these.
ERA_MODERN: Final = Era.MODERN
ERA_LEGACY: Final = Era.LEGACY
ERA_UNKNOWN: Final = Era.UNKNOWN


def is_modern_version(version: object) -> bool:
    """Whether ``version`` is a revision of the modern era this build knows."""
    return isinstance(version, str) and version in MODERN_VERSIONS


def is_legacy_version(version: object) -> bool:
    """Whether ``version`` is a revision of the legacy (initialize) era."""
    return isinstance(version, str) and version in LEGACY_VERSIONS


def body_meta(message: Any) -> dict[str, Any] | None:
    """The ``params._meta`` object of a message, or ``None`` when absent or not an object."""
    if not isinstance(message, dict):
        return None
    params = message.get("params")
    if not isinstance(params, dict):
        return None
    meta = params.get("_meta")
    return meta if isinstance(meta, dict) else None


def infer_era(
    message: Any,
    version_header: str | None,
    *,
    legacy_session: bool = False,
) -> Era:
    """Decide the era of one request from what crossed the wire (a pure policy).

    ``legacy_session`` is true when the request belongs to a session that a legacy
    ``initialize`` opened (the proxy tracks ``Mcp-Session-Id``). Legacy wins when the
    session says so, even if modern metadata leaks in (that leak is then judged as
    ``request.legacy-leak``), and for an ``initialize`` without the modern metadata; an
    ``initialize`` carrying it is a modern request (judged ``request.method.removed``).
    Otherwise a request is modern unless only legacy signs are present.
    """
    return era_of(message, body_meta(message), version_header, legacy_session)


def era_of(
    message: Any, meta: dict[str, Any] | None, version_header: str | None, legacy_session: bool
) -> Era:
    """:func:`infer_era` given the message's :func:`body_meta` (the judge looks it up once)."""
    if legacy_session:
        return ERA_LEGACY
    method = message.get("method") if isinstance(message, dict) else None
    modern_meta = meta is not None and not MODERN_META_KEYS.isdisjoint(meta)
    if method in ("initialize", "notifications/initialized"):
        # A modern-shaped initialize (the per-request metadata, no handshake) is a modern
        # request for a method the modern era removed, not a legacy handshake.
        return ERA_MODERN if modern_meta and method == "initialize" else ERA_LEGACY
    if modern_meta:
        return ERA_MODERN
    if is_legacy_version(version_header):
        return ERA_LEGACY
    if isinstance(message, list) and version_header is None:
        # A batch without the version header: no modern request is an array, and a request
        # without the header speaks 2025-03-26, where batches exist (HEADERLESS_VERSION).
        return ERA_LEGACY
    return ERA_MODERN
