"""Which SDK the SDK differential (:mod:`mcp_tap.sdkdiff`) runs with, and its default
allowlist, in a module of their own: the gate compares a segment's tallies with them, and
importing the SDK itself (its pydantic models, about half a second) is not needed for that."""

from __future__ import annotations

from functools import cache
from importlib import metadata
from typing import Any, Final

DEFAULT_ALLOWLIST: Final[frozenset[str]] = frozenset({"resultType", "_meta", "ttlMs", "cacheScope"})
"""Bookkeeping fields whose loss, default or rewrite in the SDK view is not semantic."""


@cache  # installed versions do not change under a running process; the gate asks per chunk
def package_version(name: str) -> str | None:
    """The installed version of the distribution ``name`` (None: not installed)."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def sdk_provenance() -> dict[str, Any]:
    """Say which SDK produced the typed view: package versions and the tool-listing filter,
    which the differential applies exactly when ``mcp`` is installed (an installed ``mcp``
    without it is refused when :mod:`mcp_tap.sdkdiff` is imported)."""
    mcp = package_version("mcp")
    return {"mcpTypes": package_version("mcp-types"), "mcp": mcp,
            "toolHeaderFilter": mcp is not None}


__all__ = ["DEFAULT_ALLOWLIST", "package_version", "sdk_provenance"]
