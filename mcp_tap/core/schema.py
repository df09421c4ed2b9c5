"""Full wire-schema validation against the official generated types of each revision.

The precise hand-written rules say *why* a message is wrong; this module makes sure nothing
the official schema forbids slips through a rule nobody wrote. It uses
``mcp_types.methods`` (the SDK's public per-version method maps over the generated
``mcp_types._v2026_07_28`` / ``_v2025_11_25`` models), reported as rule ``wire.schema``.

Verdicts are cached (:class:`VerdictCache`): a verdict depends only on the kind (request or
result), the method, the revision and the value, and the value is keyed by its JSON as
orjson writes it (:func:`key_json`: keys in the value's own order, no sorting; ``1``,
``1.0`` and ``true`` stay three keys, as the schema tells them apart). Two values that
differ only in key order are two keys: a second miss, never a shared verdict for values
that differ. Proxies see the same ``tools/list``, ``initialize`` and notification payloads,
written the same way, over and over; the pydantic validation (about 25 us) becomes a dict
lookup. Every value is still judged: a miss validates, and values too large or too deep to
key are validated uncached. ``results.check_result`` keeps its whole verdict on a complete
result in the same cache, under its own kind.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from functools import cache
from types import UnionType
from typing import Any, Final, get_args

import orjson
from mcp_types import methods as _methods
from pydantic import TypeAdapter, ValidationError

from mcp_tap.core.eras import LEGACY_VERSIONS, MODERN_VERSIONS

KNOWN_VERSIONS = frozenset(MODERN_VERSIONS) | frozenset(LEGACY_VERSIONS)

MAX_KEY_BYTES: Final = 8192  # larger values (big tool results) are rarely seen twice
MAX_ENTRIES: Final = 4096
_Key = tuple[str, str, str, bytes]  # kind, method, version, key_json of the value


class VerdictCache:
    """A bounded LRU map from (kind, method, version, JSON of the value) to a verdict.

    A verdict is a schema verdict (a ``str``) or, under its own kinds, whatever a caller
    that owns those kinds keeps (``results.check_result``'s findings); the key must hold
    everything the verdict depends on.
    """

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        """An empty cache holding at most ``max_entries`` verdicts."""
        self.max_entries = max_entries
        # The map itself: read by the judge's hot paths, which inline get (keep hits/misses).
        self.entries: OrderedDict[_Key, Any] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def key(
        self, kind: str, method: str, version: str, value: Any, canonical: bytes | None = None
    ) -> _Key | None:
        """The cache key of a verdict, or None when ``value`` is too big or deep to key.

        ``canonical``: ``value``'s :func:`key_json`, when the caller made it already.
        """
        if canonical is None:
            canonical = key_json(value)
        if canonical is None or len(canonical) > MAX_KEY_BYTES:
            return None
        return (kind, method, version, canonical)

    def get(self, key: _Key) -> Any:
        """The cached verdict for ``key`` (None on a miss)."""
        verdict = self.entries.get(key)
        if verdict is None:
            self.misses += 1
            return None
        self.hits += 1
        self.entries.move_to_end(key)
        return verdict

    def put(self, key: _Key, verdict: Any) -> None:
        """Remember ``verdict``; the least recently used falls out past the bound."""
        verdicts = self.entries
        verdicts[key] = verdict
        if len(verdicts) > self.max_entries:
            verdicts.popitem(last=False)

    def verdict(
        self, kind: str, method: str, version: str, value: Any,
        judge: Callable[[str, str, Any], str], canonical: bytes | None = None,
    ) -> str:
        """``judge(method, version, value)``, from the cache when this value was judged."""
        # key() and get() inlined: this runs for every request and every result.
        if canonical is None:
            try:
                canonical = orjson.dumps(value)
            except TypeError:  # orjson.JSONEncodeError: nested past 254 levels
                return judge(method, version, value)
        if len(canonical) > MAX_KEY_BYTES:
            return judge(method, version, value)
        key = (kind, method, version, canonical)
        verdicts = self.entries
        verdict: str | None = verdicts.get(key)
        if verdict is None:
            self.misses += 1
            verdict = judge(method, version, value)
            self.put(key, verdict)
        else:
            self.hits += 1
            verdicts.move_to_end(key)
        return verdict

    def clear(self) -> None:
        """Forget every verdict (for benchmarks and tests)."""
        self.entries.clear()
        self.hits = self.misses = 0


VERDICTS: Final = VerdictCache()


def key_json(value: Any) -> bytes | None:
    """``value`` as orjson writes it (keys in the value's order), the cache's key; None when
    orjson cannot write it (nested past 254 levels)."""
    try:
        return orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError
        return None


@cache
def _adapter(arm: Any) -> TypeAdapter[Any]:
    return TypeAdapter(arm)


def _summary(exc: ValidationError) -> str:
    errors = exc.errors()
    parts = []
    for err in errors[:3]:
        loc = ".".join(str(p) for p in err.get("loc", ()))
        parts.append(f"{loc or '<root>'}: {err.get('msg', 'invalid')}")
    more = f" (+{len(errors) - 3} more)" if len(errors) > 3 else ""
    return "; ".join(parts) + more


def request_problem(method: str, version: str, params: Any) -> str:
    """Why the official schema rejects this client request ("" when it accepts or has no row).

    Methods outside the revision's schema (custom or extension methods) are not judged here.
    """
    if version not in KNOWN_VERSIONS or not (params is None or isinstance(params, dict)):
        return ""
    return VERDICTS.verdict("request", method, version, params, _request_problem)


def _request_problem(method: str, version: str, params: Any) -> str:
    try:
        _methods.validate_client_request(method, version, params)
    except KeyError:
        return ""
    except ValidationError as exc:
        return f"{method} request does not match the {version} schema: {_summary(exc)}"
    return ""


def result_problem(
    method: str, version: str, result: Any, *, canonical: bytes | None = None
) -> str:
    """Why the official schema rejects this server result ("" when it accepts or has no row).

    ``canonical``: the result's :func:`key_json` when the caller made it already.
    """
    if version not in KNOWN_VERSIONS or not isinstance(result, dict):
        return ""
    return VERDICTS.verdict("result", method, version, result, _result_problem, canonical)


def result_problem_uncached(method: str, version: str, result: Any) -> str:
    """:func:`result_problem` without the cache (for a caller that caches more than it)."""
    if version not in KNOWN_VERSIONS or not isinstance(result, dict):
        return ""
    return _result_problem(method, version, result)


def _result_problem(method: str, version: str, result: Any) -> str:
    row = _methods.SERVER_RESULTS.get((method, version))
    if row is None:
        return ""
    # Dual-result rows are unions whose input_required arm has only optional fields, so a
    # union would accept any malformed complete result: pick the arm the discriminator names.
    arms = (
        [a for a in get_args(row) if isinstance(a, type)] if isinstance(row, UnionType) else [row]
    )
    wanted = "InputRequiredResult" if result.get("resultType") == "input_required" else None
    chosen = [a for a in arms if (a.__name__ == "InputRequiredResult") == (wanted is not None)]
    try:
        for arm in chosen or arms:
            _adapter(arm).validate_python(result, by_name=False)
    except ValidationError as exc:
        return f"{method} result does not match the {version} schema: {_summary(exc)}"
    return ""
