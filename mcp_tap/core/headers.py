"""An ordered header multimap: keeps order, case and duplicates for evidence.

Lookups are case-insensitive (HTTP field names are), values stay case-sensitive.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


def media_type(content_type: str) -> str:
    """The media type of a ``Content-Type`` value: parameters dropped, lowercased."""
    # A server sends one or two distinct values: remembered (bounded) instead of split,
    # stripped and lowercased on every answer.
    known = _MEDIA_TYPES.get(content_type)
    if known is None:
        known = content_type.split(";", 1)[0].strip().lower()
        if len(_MEDIA_TYPES) < _MAX_MEDIA_TYPES:
            _MEDIA_TYPES[content_type] = known
    return known


_MEDIA_TYPES: dict[str, str] = {}
_MAX_MEDIA_TYPES = 256


class ConflictingHeaderError(ValueError):
    """A header name appears more than once with different values."""

    def __init__(self, name: str, values: Sequence[str]) -> None:
        super().__init__(f"header {name} repeated with conflicting values {list(values)!r}")
        self.name = name
        self.values = tuple(values)


@dataclass(frozen=True, slots=True)
class HeaderMap:
    """Immutable ordered list of ``(name, value)`` pairs with case-insensitive lookup."""

    pairs: tuple[tuple[str, str], ...] = ()
    # Lowercased name -> its values, built on the first lookup: the judge looks up a dozen
    # names per map, and a scan of every pair per lookup cost more than the rules using it.
    _index: dict[str, list[str]] | None = field(
        default=None, init=False, repr=False, compare=False, hash=False
    )

    @classmethod
    def of(
        cls, headers: HeaderMap | Mapping[str, str] | Iterable[Sequence[str]] | None
    ) -> HeaderMap:
        """Build a map from a mapping, a sequence of pairs, another map, or ``None``."""
        if headers is None:
            return cls()
        if isinstance(headers, HeaderMap):
            return headers
        if isinstance(headers, Mapping):
            return cls(tuple((str(k), str(v)) for k, v in headers.items()))
        pairs: list[tuple[str, str]] = []
        for item in headers:
            if len(item) != 2:
                raise ValueError(f"a header pair must have two items, got {list(item)!r}")
            pairs.append((str(item[0]), str(item[1])))
        return cls(tuple(pairs))

    def get_all(self, name: str) -> list[str]:
        """Every value of ``name`` in order (case-insensitive name match)."""
        index = self._index if self._index is not None else self._indexed()
        return list(index.get(name.lower(), ()))

    def values_of(self, name: str) -> Sequence[str]:
        """Every value of ``name`` in order, not copied (read only; cheaper than get_all)."""
        index = self._index if self._index is not None else self._indexed()
        return index.get(name.lower(), ())

    def by_name(self) -> Mapping[str, Sequence[str]]:
        """Lowercased name -> its values in order (never empty), not copied (read only).

        For a caller that looks up several names: one call, then plain dict look-ups.
        """
        index = self._index
        return index if index is not None else self._indexed()

    def _indexed(self) -> dict[str, list[str]]:
        index: dict[str, list[str]] = {}
        for k, v in self.pairs:
            lk = k.lower()
            if lk in index:
                index[lk].append(v)
            else:
                index[lk] = [v]
        object.__setattr__(self, "_index", index)  # a cache of the immutable pairs
        return index

    def get(self, name: str, default: str | None = None) -> str | None:
        """The first value of ``name``, or ``default``."""
        index = self._index if self._index is not None else self._indexed()
        values = index.get(name.lower())
        return values[0] if values else default

    def single(self, name: str) -> str | None:
        """The one value of ``name``: ``None`` when absent, identical duplicates collapse.

        Raises :class:`ConflictingHeaderError` when duplicates disagree.
        """
        values = self.get_all(name)
        if not values:
            return None
        if any(v != values[0] for v in values[1:]):
            raise ConflictingHeaderError(name, values)
        return values[0]

    def names_with_prefix(self, prefix: str) -> list[str]:
        """Distinct header names (as first seen) that start with ``prefix``, case-insensitively."""
        seen: dict[str, str] = {}
        p = prefix.lower()
        for k, _ in self.pairs:
            lk = k.lower()
            if lk.startswith(p) and lk not in seen:
                seen[lk] = k
        return list(seen.values())

    def content_type(self) -> str:
        """The media type of ``Content-Type`` without parameters, lowercased ("" if absent)."""
        return media_type(self.get("content-type") or "")

    def without(self, names: Iterable[str]) -> HeaderMap:
        """A copy without any header whose name (case-insensitively) is in ``names``."""
        drop = {n.lower() for n in names}
        return HeaderMap(tuple(p for p in self.pairs if p[0].lower() not in drop))

    def to_json(self) -> list[list[str]]:
        """The evidence shape: a list of ``[name, value]`` pairs."""
        return [[k, v] for k, v in self.pairs]

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self.pairs)

    def __len__(self) -> int:
        return len(self.pairs)

    def __contains__(self, name: Any) -> bool:
        return isinstance(name, str) and bool(self.values_of(name))
