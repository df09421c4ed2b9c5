"""Normalisation: what differs between runs (ids, ``_meta`` timestamps, ignored paths) removed."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

from mcp_tap.errors import InputError

_ISO_DATETIME: Final = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")


_TIME_KEY: Final = re.compile(r"(?:timestamp|time|date|[a-z0-9]At)$")


def parse_ignore(path: str) -> tuple[str, ...]:
    """Parse a simple dotted path (``result.structuredContent.time``, ``$.`` optional).

    A segment ``*`` or ``[]`` matches every key or element; a number indexes a list.
    """
    text = path.strip().removeprefix("$").removeprefix(".")
    text = text.replace("[]", ".*")
    text = re.sub(r"\[(\d+)\]", r".\1", text)
    parts = tuple(p for p in text.split(".") if p)
    if not parts:
        raise InputError(f"--ignore {path!r}: an empty path")
    return parts


def _is_timestamp(key: str, value: Any) -> bool:
    local = key.rsplit("/", 1)[-1]
    if _TIME_KEY.search(local) or _TIME_KEY.search(local.lower()):
        return True
    return isinstance(value, str) and bool(_ISO_DATETIME.match(value))


def _strip_meta_times(value: Any, in_meta: bool = False) -> Any:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if in_meta and _is_timestamp(str(key), item):
                continue
            out[key] = _strip_meta_times(item, in_meta or key == "_meta")
        return out
    if isinstance(value, list):
        return [_strip_meta_times(item, in_meta) for item in value]
    return value


def _drop_path(value: Any, path: Sequence[str]) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if head in ("*", key):
                if rest:
                    out[key] = _drop_path(item, rest)
                continue
            out[key] = item
        return out
    if isinstance(value, list):
        items: list[Any] = []
        for index, item in enumerate(value):
            if head == "*" or head == str(index):
                if rest:
                    items.append(_drop_path(item, rest))
                continue
            items.append(item)
        return items
    return value


def normalise(message: Any, ignore: Sequence[Sequence[str]] = ()) -> Any:
    """Remove what differs between runs: the top-level id, ``_meta`` timestamps, ``ignore``."""
    value = message
    if isinstance(value, dict):
        value = {k: v for k, v in value.items() if k != "id"}
    value = _strip_meta_times(value)
    for path in ignore:
        value = _drop_path(value, path)
    return value
