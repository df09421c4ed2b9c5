"""The recursive diff of a wire result against the SDK's typed view, the allowlist, and the
memo of outcomes (see :mod:`mcp_tap.sdkdiff`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final, TypeVar

import orjson

from mcp_tap.core.catalog import finding
from mcp_tap.core.findings import Finding
from mcp_tap.evidence.known import KnownJson
from mcp_tap.sdkdiff.sdk import (
    _DUMP_OPTIONS,
    _INDEX,
    _PLAIN_KEY,
    Difference,
    SdkParseError,
    _full_view,
    _parse,
    _Removed,
    sdk_version,
)
from mcp_tap.sdkversion import DEFAULT_ALLOWLIST

# --- the recursive diff ----------------------------------------------------------------------


def _join(path: str, key: str) -> str:
    if _PLAIN_KEY.fullmatch(key):
        return f"{path}.{key}"
    return f"{path}[{orjson.dumps(key).decode()}]"


def _short(value: Any) -> str:
    if isinstance(value, _Removed):
        return "<removed>"
    text = orjson.dumps(value).decode()
    return text if len(text) <= 80 else text[:77] + "..."


def _same_json(a: Any, b: Any) -> bool:
    """JSON equality for scalars: equal value and equal JSON type (``true`` is not ``1``)."""
    return type(a) is type(b) and bool(a == b)


def _walk(wire: Any, view: Any, path: str, key: str, out: list[Difference]) -> None:
    if isinstance(view, _Removed):
        out.append(
            Difference(
                "sdk.dropped",
                path,
                key,
                f"the SDK client removed {path} from the listing ({view.reason})",
            )
        )
        return
    if isinstance(wire, dict) and isinstance(view, dict):
        for name, value in wire.items():
            child = _join(path, name)
            if name not in view:
                out.append(
                    Difference(
                        "sdk.dropped",
                        child,
                        name,
                        f"the SDK's typed view drops {child} (wire value {_short(value)})",
                    )
                )
            else:
                _walk(value, view[name], child, name, out)
        for name, value in view.items():
            if name not in wire and value is not None:
                child = _join(path, name)
                out.append(
                    Difference(
                        "sdk.synthesized",
                        child,
                        name,
                        f"the SDK's typed view invents {child} = {_short(value)}, "
                        "which the wire never carried",
                    )
                )
        return
    if isinstance(wire, list) and isinstance(view, list):
        for index in range(max(len(wire), len(view))):
            child = f"{path}[{index}]"
            if index >= len(view):
                out.append(
                    Difference(
                        "sdk.dropped",
                        child,
                        key,
                        f"the SDK's typed view drops {child} (wire value {_short(wire[index])})",
                    )
                )
            elif index >= len(wire):
                out.append(
                    Difference(
                        "sdk.synthesized",
                        child,
                        key,
                        f"the SDK's typed view invents {child} = {_short(view[index])}",
                    )
                )
            else:
                _walk(wire[index], view[index], child, key, out)
        return
    if isinstance(wire, dict | list) or isinstance(view, dict | list) or not _same_json(wire, view):
        out.append(
            Difference(
                "sdk.changed",
                path,
                key,
                f"the SDK's typed view changes {path} from {_short(wire)} to {_short(view)}",
            )
        )


def differences(
    method: str, era: str, result: dict[str, Any], *, version: str | None = None
) -> list[Difference]:
    """Return every difference between ``result`` and the SDK view, allowlist not applied.

    Raises:
        SdkParseError: the SDK client rejects the result.
    """
    model, removed = _parse(method, sdk_version(era, version), result)
    out: list[Difference] = []
    if removed:
        _walk(result, _full_view(model, removed), "result", "result", out)
        return out
    shown: dict[str, Any] = model.model_dump(exclude_none=True, **_DUMP_OPTIONS)
    same = [name for name, value in result.items()
            if name in shown and _same_tree(value, shown[name])]
    if len(same) == len(result) == len(shown):
        return out  # the common case: the view is the wire result, Nones aside
    # Only the members that may differ are walked; a skipped one holds no difference, and
    # both sides lose it, so the walk's order and paths are the full walk's.
    view = _full_view(model, removed)
    if same:
        skip = frozenset(same)
        result = {name: value for name, value in result.items() if name not in skip}
        view = {name: value for name, value in view.items() if name not in skip}
    _walk(result, view, "result", "result", out)
    return out


def _same_tree(wire: Any, shown: Any) -> bool:
    """Whether the full walk of ``wire`` against the view's member finds no difference,
    judged from ``shown``, the member in the view dumped without None fields.

    ``shown`` is the view's member less its None-valued fields (nothing else differs
    between the two dumps), and the walk passes over a None field the wire lacks. So equal
    JSON -- the same members, lengths, scalar types and values, which the sorted orjson
    texts of the two state exactly -- means an empty walk. Anything else (a wire ``null``
    the view drops, a member either side lacks) is not equal, and is walked.
    """
    if type(wire) is dict or type(wire) is list:
        if type(shown) is not type(wire):
            return False
        try:
            return bool(orjson.dumps(wire, option=orjson.OPT_SORT_KEYS)
                        == orjson.dumps(shown, option=orjson.OPT_SORT_KEYS))
        except orjson.JSONEncodeError:  # past orjson's reach: walked
            return False
    return type(shown) is not dict and type(shown) is not list and _same_json(wire, shown)


def is_allowed(difference: Difference, allowlist: Iterable[str]) -> bool:
    """Tell whether the allowlist names the difference's last key or (index-free) full path."""
    names = allowlist if isinstance(allowlist, frozenset | set) else frozenset(allowlist)
    return (
        difference.key in names
        or difference.path in names
        or _INDEX.sub("[]", difference.path) in names
    )


def _finding(difference: Difference) -> Finding:
    return finding(difference.rule, difference.message, where=difference.path)


# Results repeat (every tools/list of one release answers the same), and the differential of
# a result is a pure function of (method, revision, result bytes): the offline path remembers
# the outcome of small results instead of validating the same bytes again. Bounded in count
# and per-entry size, so memory stays flat however long the evidence.
_MEMO_ENTRIES: Final = 1024
_MEMO_MAX_BYTES: Final = 16 * 1024
_memo: dict[tuple[str, str, bytes], tuple[Difference, ...] | SdkParseError] = {}


def _remembered_differences(method: str, version: str, result: Any,
                            raw: bytes | None = None) -> list[Difference]:
    """:func:`differences` of ``result``, remembered by ``raw`` (its JSON bytes; by default
    its serialisation)."""
    if raw is None:
        try:
            raw = orjson.dumps(result)
        except orjson.JSONEncodeError:  # too deep or not JSON: compute it, remember nothing
            return differences(method, version, result)
    if len(raw) > _MEMO_MAX_BYTES:
        return differences(method, version, result)
    outcome: tuple[Difference, ...] = _recalled(
        _memo, (method, version, raw), lambda: tuple(differences(method, version, result)))
    return list(outcome)


_K = TypeVar("_K")
_V = TypeVar("_V")


def _recalled(memo: dict[_K, _V | SdkParseError], key: _K, compute: Callable[[], _V]) -> _V:
    """``compute()``, remembered under ``key`` (its SdkParseError too, raised again), in a
    memo that drops its oldest entry past ``_MEMO_ENTRIES``."""
    outcome = memo.get(key)
    if outcome is None:
        try:
            outcome = compute()
        except SdkParseError as exc:
            outcome = exc
        if len(memo) >= _MEMO_ENTRIES:
            del memo[next(iter(memo))]  # the oldest entry
        memo[key] = outcome
    if isinstance(outcome, SdkParseError):
        raise SdkParseError(*outcome.args)
    return outcome


_split_memo: dict[tuple[str, str, bytes, frozenset[str]],
                  tuple[tuple[Finding, ...], tuple[Finding, ...]] | SdkParseError] = {}


def remembered_split(method: str, version: str, result: Any,
                     allowlist: frozenset[str]) -> tuple[list[Finding], list[Finding]]:
    """``_split(_remembered_differences(...), allowlist)``, itself remembered (bounded like
    the memo of differences): a repeated result costs one serialisation and one lookup
    instead of a walk and a finding per difference. Raises SdkParseError like it.

    ``result`` may be a :class:`~mcp_tap.evidence.known.KnownJson` (the gate's parse of a
    trusted line): its bytes are the memo key, so a repeated result costs only the lookup.
    """
    reported, allowed = split_findings(method, version, result, allowlist)
    return list(reported), list(allowed)


def split_findings(method: str, version: str, result: Any, allowlist: frozenset[str]
                   ) -> tuple[tuple[Finding, ...], tuple[Finding, ...]]:
    """:func:`remembered_split` as the remembered tuples themselves (shared: not to be
    changed), for a caller that copies them only when it keeps them."""
    if type(result) is KnownJson:
        raw: bytes = result.raw
        result = result.value
    else:
        try:
            raw = orjson.dumps(result)
        except orjson.JSONEncodeError:
            reported, allowed = _split(differences(method, version, result), allowlist)
            return tuple(reported), tuple(allowed)
    if len(raw) > _MEMO_MAX_BYTES:
        reported, allowed = _split(_remembered_differences(method, version, result, raw),
                                   allowlist)
        return tuple(reported), tuple(allowed)
    key = (method, version, raw, allowlist)
    outcome = _split_memo.get(key)
    if outcome is not None and type(outcome) is tuple:
        return outcome  # the common case: a result seen before
    value = result

    def split() -> tuple[tuple[Finding, ...], tuple[Finding, ...]]:
        reported, allowed = _split(_remembered_differences(method, version, value, raw),
                                   allowlist)
        return tuple(reported), tuple(allowed)

    return _recalled(_split_memo, key, split)


def _split(
    diffs: Iterable[Difference], allowlist: frozenset[str]
) -> tuple[list[Finding], list[Finding]]:
    reported: list[Finding] = []
    allowed: list[Finding] = []
    for diff in diffs:
        (allowed if is_allowed(diff, allowlist) else reported).append(_finding(diff))
    return reported, allowed


def diff_result(
    method: str,
    era: str,
    result: dict[str, Any],
    allowlist: frozenset[str] = DEFAULT_ALLOWLIST,
    *,
    version: str | None = None,
) -> list[Finding]:
    """Return the ``sdk.*`` findings for one raw result, allowlisted differences left out.

    Raises:
        SdkParseError: the SDK client rejects the result.
    """
    reported, _ = _split(differences(method, era, result, version=version), allowlist)
    return reported
