"""Plain record export: every record of the bundles, one JSON object per line, in order.

The records are written as stored (already redacted, with their ``seq``, ``prev`` and
``digest``), so a consumer can re-check each digest with
:func:`mcp_tap.evidence.record_digest`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import orjson


def iter_jsonl(records: Iterable[Mapping[str, Any]]) -> Iterator[bytes]:
    """One line (ending in ``\\n``) per record."""
    for record in records:
        yield orjson.dumps(record) + b"\n"
