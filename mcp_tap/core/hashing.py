"""Canonical JSON and SHA-256 digests: the one way every digest in mcp-tap is made."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

_CANONICAL = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


def canonical_json(value: Any) -> bytes:
    """Serialise ``value`` canonically: orjson, sorted keys, no whitespace."""
    return orjson.dumps(value, option=_CANONICAL)


def sha256_hex(data: bytes) -> str:
    """Return the lowercase hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def digest(value: Any) -> str:
    """Return the SHA-256 hex digest of the canonical JSON of ``value``."""
    return sha256_hex(canonical_json(value))
