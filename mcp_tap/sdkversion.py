"""What the gate needs to know of the SDK differential (:mod:`mcp_tap.sdkdiff`) without
importing it: its default allowlist, and whether a segment's sealed outcome was made by the
differential this process would run. Importing the SDK itself (its pydantic models) costs
about half a second, which a gate that takes every outcome from signed tallies never needs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from functools import cache
from importlib import metadata
from pathlib import Path
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


@cache
def differential_code() -> str:
    """SHA-256 of the differential's own code (``mcp_tap/sdkdiff/*.py`` and this module's
    allowlist), "" when it cannot be read: a sealed outcome stands for this process's run
    only when the same code made it (another mcp-tap version may judge the same SDK's view
    differently)."""
    here = Path(__file__).resolve()
    digest = hashlib.sha256()
    try:
        for path in [*sorted((here.parent / "sdkdiff").glob("*.py")), here]:
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    except OSError:
        return ""
    return digest.hexdigest()


def sealed_by_another(sdk: Mapping[str, Any]) -> str:
    """Why a segment's sealed SDK outcome (its tallies' ``sdk`` member) is not what this
    process would find ("" if it is): another ``mcp-types`` or ``mcp``, or other code of
    the differential. The provenance's ``toolHeaderFilter`` follows from the ``mcp``
    version and is not compared, so that comparing imports no SDK."""
    provenance = sdk.get("provenance")
    if not isinstance(provenance, dict) or "mcpTypes" not in provenance:
        return "the SDK differential did not run"
    if (provenance.get("mcpTypes") != package_version("mcp-types")
            or provenance.get("mcp") != package_version("mcp")):
        return "the SDK differential ran with another SDK"
    code = differential_code()
    if not code or sdk.get("differential") != code:
        return "the SDK differential ran with other code (another mcp-tap)"
    return ""


__all__ = ["DEFAULT_ALLOWLIST", "differential_code", "package_version", "sealed_by_another"]
