"""A JSON value of a stored record together with the bytes it was decoded from.

Results repeat in evidence (every ``tools/list`` of one release answers the same bytes), and
the one consumer of a result's value on the gate's path, the SDK differential, keys its memo
by those bytes. A reader that sees the bytes anyway (the gate's parse of a trusted line)
decodes each distinct result once and hands on a :class:`KnownJson` -- the bytes and the
value decoded from them, shared by every record carrying the same bytes -- instead of
building the same value again per record and having the differential serialise it again to
find it in its memo.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec
import orjson


class KnownJson:
    """``value`` and the exact JSON bytes ``raw`` it was decoded from (treat both as
    read-only: one instance is shared by every record holding the same bytes)."""

    __slots__ = ("raw", "value")

    def __init__(self, raw: bytes, value: Any) -> None:
        """Pair ``raw`` with the value decoded from it."""
        self.raw = raw
        self.value = value

    def __repr__(self) -> str:
        return f"KnownJson({self.raw[:60]!r})"


_ENTRIES: Final = 1024
_MAX_BYTES: Final = 16 * 1024
# orjson, the full parse: the value is exactly what the fully parsed record holds there
# (msgspec would read an integer past 64 bits as an int, orjson as a float).
_decode_any: Final = orjson.loads
_errors: Final = (orjson.JSONDecodeError,)


_TAIL: Final = 64  # bytes of a text's end that find its entry (the whole text is compared)
_SAME_TAIL: Final = 8  # texts kept per tail


class KnownValues:
    """Each distinct JSON text decoded once, remembered in bounded memory (at most
    :data:`_ENTRIES` texts of at most :data:`_MAX_BYTES` each; a longer text is decoded
    every time). The decode is orjson's: exactly what the full parse of the line holds for
    that member.

    Texts are found by their last :data:`_TAIL` bytes and then compared whole: hashing a
    fresh copy of every text (a few KB per record) would cost more than the comparison.
    """

    __slots__ = ("count", "known")

    def __init__(self) -> None:
        """Start empty."""
        self.known: dict[bytes, list[KnownJson]] = {}
        self.count = 0

    def get(self, raw: msgspec.Raw) -> KnownJson | None:
        """The value of the JSON text ``raw``, or None when orjson rejects it (a number
        out of range, nesting past its limit: the caller then parses the line fully)."""
        text = bytes(raw)
        tail = text[-_TAIL:]
        same = self.known.get(tail)
        if same is not None:
            for known in same:
                if known.raw == text:
                    return known
        try:
            known = KnownJson(text, _decode_any(text))
        except _errors:
            return None
        if len(text) <= _MAX_BYTES:
            if self.count >= _ENTRIES:
                self.known.clear()  # rare (a capture of ever-new results): start over
                self.count = 0
                same = None
            if same is None:
                same = self.known[tail] = []
            if len(same) < _SAME_TAIL:
                same.append(known)
                self.count += 1
        return known


__all__ = ["KnownJson", "KnownValues"]
