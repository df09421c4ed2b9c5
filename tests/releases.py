"""Test helper: the rollback evidence a release controller would attest."""

from __future__ import annotations

from typing import Any


def rollback_payload(**changes: Any) -> dict[str, Any]:
    """A valid, unattested rollback payload for version 1.4.2, with ``changes`` applied."""
    return {
        "previousVersion": "1.4.2",
        "admissionEvidenceDigest": "a" * 64,
        "artifactSha256": "b" * 64,
        "descriptorSha256": "c" * 64,
        "registryStatus": "active",
        "healthy": True,
        "routeRestoration": ["route 100% of /mcp to 1.4.2", "drain candidate pods"],
        **changes,
    }
