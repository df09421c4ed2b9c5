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
_decode_any: Final = msgspec.json.Decoder().decode
_errors: Final = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)


class KnownValues:
    """Each distinct JSON text decoded once, remembered in bounded memory (at most
    :data:`_ENTRIES` texts of at most :data:`_MAX_BYTES` each; a longer text is decoded
    every time). The decode is msgspec's of any JSON value, exactly what a decoder typed
    ``Any`` gives for that member of a line."""

    __slots__ = ("known",)

    def __init__(self) -> None:
        """Start empty."""
        self.known: dict[bytes, KnownJson] = {}

    def get(self, raw: msgspec.Raw) -> KnownJson | None:
        """The value of the JSON text ``raw``, or None when msgspec rejects it (a number
        out of range, nesting past its limit: the caller then parses the line fully)."""
        text = bytes(raw)
        known = self.known.get(text)
        if known is not None:
            return known
        try:
            known = KnownJson(text, _decode_any(text))
        except _errors:
            return None
        if len(text) <= _MAX_BYTES:
            if len(self.known) >= _ENTRIES:
                del self.known[next(iter(self.known))]  # the oldest
            self.known[text] = known
        return known


__all__ = ["KnownJson", "KnownValues"]
