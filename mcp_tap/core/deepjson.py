"""JSON text for values orjson cannot write: nesting past its limit, huge ints, lone surrogates.

orjson writes at most 254 levels of nesting and refuses integers past 64 bits and strings
with lone surrogates (the stdlib parser produces all three; orjson's own parser accepts 1024
levels). Evidence must record any JSON, so such a value is written as text by
:func:`dumps`: iterative (no recursion limit), ASCII-only (a lone surrogate stays a
``\\ud800`` escape), compact like orjson.
"""

from __future__ import annotations

import json
import math
from typing import Any, Final

import orjson

#: Nesting orjson writes (its limit is 254 levels); a record wraps a body in a few more.
ORJSON_MAX_DEPTH: Final = 254

_ENCODE_STRING = json.encoder.encode_basestring_ascii  # the C implementation when present

class WrittenJson:
    """The last complete result one judgement wrote as JSON (``orjson.dumps``), and that
    JSON: it travels in the judgement (``ResponseContext.written``), so the recorder's
    redaction of the same parsed result reuses the bytes (their hash already computed)
    instead of writing them again. Matched by identity: parsed values are never mutated,
    and this holds its value, so the same object means the same value. One per judgement
    (no state shared between judgements, or between taps on other threads)."""

    __slots__ = ("json", "result")

    def __init__(self) -> None:
        self.result: Any = None
        self.json = b""


def dumps(value: Any) -> str:
    """Return compact ASCII JSON text for a JSON-shaped ``value`` (tuples as arrays).

    NaN and infinities are written as ``NaN`` / ``Infinity`` like the stdlib (the text is a
    record of what was seen, not JSON for a strict parser); non-string keys are written as
    their ``str``.
    """
    out: list[str] = []
    # Each entry: an iterator over a container's items and whether it is a dict, or a str to
    # emit (a closing bracket).
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _Close):
            out.append(item.text)
            continue
        if isinstance(item, _Entries):
            try:
                key, child = next(item.iterator)
            except StopIteration:
                continue
            stack.append(item)
            if item.count:
                out.append(",")
            item.count += 1
            if item.is_dict:
                out.append(_ENCODE_STRING(key if isinstance(key, str) else str(key)))
                out.append(":")
            stack.append(child)
            continue
        if isinstance(item, dict):
            out.append("{")
            stack.append(_Close("}"))
            stack.append(_Entries(iter(item.items()), True))
        elif isinstance(item, list | tuple):
            out.append("[")
            stack.append(_Close("]"))
            stack.append(_Entries(((None, v) for v in item), False))
        else:
            out.append(_scalar(item))
    return "".join(out)


def fits_orjson(value: Any, depth: int) -> bool:
    """Whether orjson can write ``value`` nested under ``depth`` more levels of record."""
    if depth > ORJSON_MAX_DEPTH:
        return False
    try:
        orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return False
    return True


def nesting(value: Any) -> int:
    """Return how deeply ``value`` nests containers (a scalar is 0), iteratively."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in children if isinstance(child, dict | list))
    return deepest


class _Close:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


class _Entries:
    __slots__ = ("count", "is_dict", "iterator")

    def __init__(self, iterator: Any, is_dict: bool) -> None:
        self.iterator = iterator
        self.is_dict = is_dict
        self.count = 0


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _ENCODE_STRING(value)
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return float.__repr__(value)
    return _ENCODE_STRING(str(value))


__all__ = ["ORJSON_MAX_DEPTH", "dumps", "fits_orjson", "nesting"]
