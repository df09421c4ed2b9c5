"""The SDK differential: raw wire results against the real Python SDK's typed view.

An application that uses the official SDK client (``mcp`` / ``mcp-types`` 2.3.0) never sees
the wire: it sees the public ``mcp_types`` model (``ListToolsResult``, ``CallToolResult``,
...) that ``ClientSession.send_request`` builds from the raw result. This module reproduces
that path with the SDK's own functions and models, dumps the typed view back to the wire
shape the way the SDK serialises (``model_dump(mode="json", by_alias=True,
exclude_none=True)``) and reports, per result, what the SDK dropped, changed or synthesized.

The path, as ``mcp/client/session.py`` 2.3.0 runs it for a received result:

1. ``_clamp_inbound_ttl``: a negative numeric ``ttlMs`` is floored to ``0``.
2. ``mcp_types.sdk_methods.validate_server_result(method, version, raw)``: the revision's
   generated wire model (``mcp_types._v2026_07_28`` / ``_v2025_11_25``) must accept the raw
   result; a ``(method, version)`` the surface map does not know is skipped, like the SDK does.
3. Top-level keys that only a *later* revision declares for the method (``ttlMs``,
   ``cacheScope``, ``resultType`` on a 2025-era session) are removed before parsing.
4. The version-free public model (``mcp_types.methods.MONOLITH_RESULTS[method]``, the very
   types ``ClientSession`` passes to ``send_request``) validates the rest with
   ``by_name=False``; unknown fields are ignored, defaults fill what the wire omitted.
5. ``tools/list`` on a modern session: ``ClientSession._absorb_tool_listing`` removes every
   tool whose ``x-mcp-header`` annotations are invalid, using the SDK's own
   ``mcp.shared.inbound.find_invalid_x_mcp_header`` (applied when the ``mcp`` package is
   installed; :func:`sdk_provenance` says whether it was).

Two methods take a different path in the SDK and are reproduced as such: ``initialize`` is
always validated at the session's pre-handshake fallback revision ``2025-11-25`` and refused
when its ``protocolVersion`` is not a handshake revision; ``server/discover`` is only clamped
and parsed with ``DiscoverResult.model_validate`` (no wire-model validation at all).

Differences are found by a recursive walk of the wire result against the typed view, with
paths such as ``result.tools[0].futureHint`` (keys that are not plain identifiers are
bracketed: ``result._meta["io.modelcontextprotocol/serverInfo"]``):

* ``sdk.dropped``: present on the wire, absent from the view (reported at the highest
  missing node; a wire ``null`` for a field the model knows is not a drop, the model holds
  ``None``);
* ``sdk.changed``: present in both with a different JSON value or JSON type (``1`` vs ``1.0``);
* ``sdk.synthesized``: present in the view (not ``None``) where the wire was silent.

**Allowlist.** A difference is *allowed* when its path's last key, or its full path, or its
full path with list indices written ``[]`` (``result.tools[].futureHint``) is in the
allowlist. The allowlist covers all three rules: a bookkeeping field the application is not
meant to act on may be dropped, defaulted or rewritten without it being a semantic
difference. Allowed differences stay in the report (``allowed``), they just do not count
against the gate. The default names ``resultType``, ``_meta``, ``ttlMs`` and ``cacheScope``.

Apart from reading the installed SDK's package versions (:func:`sdk_provenance`) this module
does no I/O and reads no clock; the ``sdk-diff`` command and the gate feed it records.
"""

from __future__ import annotations

import contextlib
import copy
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import metadata
from types import UnionType
from typing import Any, Final, get_args

import mcp_types as sdk_types
import orjson
from mcp_types import methods as sdk_methods
from mcp_types import version as sdk_versions
from pydantic import TypeAdapter, ValidationError

from mcp_tap.core.catalog import finding
from mcp_tap.core.findings import Finding
from mcp_tap.errors import TapError
from mcp_tap.evidence import answer_is_whole

__all__ = [
    "DEFAULT_ALLOWLIST",
    "TYPED_METHODS",
    "Difference",
    "SdkDiffEntry",
    "SdkDiffReport",
    "SdkParseError",
    "diff_records",
    "diff_result",
    "differences",
    "is_allowed",
    "sdk_provenance",
    "sdk_version",
    "sdk_view",
]

DEFAULT_ALLOWLIST: Final[frozenset[str]] = frozenset({"resultType", "_meta", "ttlMs", "cacheScope"})
"""Bookkeeping fields whose loss, default or rewrite in the SDK view is not semantic."""

TYPED_METHODS: Final[frozenset[str]] = frozenset(
    {
        "initialize",
        "server/discover",
        "tools/list",
        "tools/call",
        "prompts/list",
        "prompts/get",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "completion/complete",
    }
)
"""The methods whose results the SDK client parses into a public typed model."""

ERAS: Final[frozenset[str]] = frozenset({"modern", "legacy"})

_MODERN_VERSION: Final = "2026-07-28"
_LEGACY_VERSION: Final = "2025-11-25"
# ClientSession.send_request's literal fallback before a version is negotiated: the revision
# every initialize result is validated at.
_PRE_HANDSHAKE_VERSION: Final = "2025-11-25"
_PROTOCOL_VERSION_META_KEY: Final = "io.modelcontextprotocol/protocolVersion"

_DUMP_OPTIONS: Final[dict[str, Any]] = {"mode": "json", "by_alias": True}
_PLAIN_KEY = re.compile(r"[A-Za-z_$][A-Za-z0-9_$-]*")
_INDEX = re.compile(r"\[\d+\]")


class SdkParseError(TapError):
    """The SDK client rejects a result: the application would get an exception, not a value."""


@dataclass(frozen=True, slots=True)
class Difference:
    """One difference between the wire result and the SDK view, before the allowlist."""

    rule: str
    path: str
    key: str
    message: str


class _Removed:
    """Marks a list element the SDK client removed (a tool filtered out of a listing)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


# --- versions and the SDK itself -------------------------------------------------------------


def sdk_version(era: str, version: str | None = None) -> str:
    """Return the protocol revision the SDK session would have negotiated for ``era``.

    ``version`` (for instance the request's ``_meta`` protocol version or its
    ``MCP-Protocol-Version`` header) is used when it is a known revision of that era;
    otherwise the era's newest revision is assumed. ``era`` may itself be a revision string.
    All pre-2026 revisions share one wire schema, so the legacy choice only matters for the
    version gate, not for the shape.
    """
    modern: tuple[str, ...] = tuple(sdk_versions.MODERN_PROTOCOL_VERSIONS)
    legacy: tuple[str, ...] = tuple(sdk_versions.HANDSHAKE_PROTOCOL_VERSIONS)
    if era in modern or era in legacy:
        return era
    if era == "modern":
        return version if version in modern else _MODERN_VERSION
    if era == "legacy":
        return version if version in legacy else _LEGACY_VERSION
    raise ValueError(f"era must be 'modern', 'legacy' or a known protocol version, got {era!r}")


def _is_modern(version: str) -> bool:
    return version in tuple(sdk_versions.MODERN_PROTOCOL_VERSIONS)


@cache
def _x_mcp_header_checker() -> Callable[[Any], str | None] | None:
    """The SDK client's own ``x-mcp-header`` validator, or None when ``mcp`` is not installed."""
    try:
        from mcp.shared.inbound import find_invalid_x_mcp_header
    except ImportError:
        return None
    checker: Callable[[Any], str | None] = find_invalid_x_mcp_header
    return checker


def _package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def sdk_provenance() -> dict[str, Any]:
    """Say which SDK produced the typed view: package versions and the tool-listing filter."""
    return {
        "mcpTypes": _package_version("mcp-types"),
        "mcp": _package_version("mcp"),
        "toolHeaderFilter": _x_mcp_header_checker() is not None,
    }


@cache
def _adapter(target: Any) -> TypeAdapter[Any]:
    return TypeAdapter(target)


def _wire_fields(target: Any) -> frozenset[str]:
    """Top-level wire keys a surface row declares (its members', for a union)."""
    members = get_args(target) if isinstance(target, UnionType) else (target,)
    keys: set[str] = set()
    for model in members:
        fields = getattr(model, "model_fields", None)
        if isinstance(fields, dict):
            for name, info in fields.items():
                keys.add(info.alias or name)
    return frozenset(keys)


def _later_revision_fields(method: str, version: str) -> frozenset[str]:
    """Result keys a newer revision declares for ``method`` that ``version`` does not."""
    surface: Mapping[tuple[str, str], Any] = sdk_methods.SERVER_RESULTS
    known: tuple[str, ...] = tuple(sdk_versions.KNOWN_PROTOCOL_VERSIONS)
    current = surface.get((method, version))
    if current is None or version not in known:
        return frozenset()
    later: set[str] = set()
    for revision in known[known.index(version) + 1 :]:
        row = surface.get((method, revision))
        if row is not None:
            later |= _wire_fields(row)
    return frozenset(later) - _wire_fields(current)


def _clamp_inbound_ttl(raw: dict[str, Any]) -> None:
    ttl = raw.get("ttlMs")
    if isinstance(ttl, int | float) and not isinstance(ttl, bool) and ttl < 0:
        raw["ttlMs"] = 0


def _describe(exc: ValidationError, method: str, version: str) -> str:
    parts = []
    for error in exc.errors()[:3]:
        loc = ".".join(str(p) for p in error.get("loc", ())) or "result"
        parts.append(f"{loc}: {error.get('msg', 'invalid')}")
    more = exc.error_count() - len(parts)
    tail = f" (+{more} more)" if more > 0 else ""
    return f"the SDK rejects the {method} result at {version}: " + "; ".join(parts) + tail


def _parse(method: str, version: str, result: Any) -> tuple[Any, dict[int, str]]:
    """Run the SDK client's receive path; return the typed model and the removed tools."""
    if method not in TYPED_METHODS:
        raise ValueError(f"{method!r} is not a method the SDK types (see TYPED_METHODS)")
    if not isinstance(result, dict):
        raise SdkParseError(f"the {method} result is not a JSON object")
    raw: dict[str, Any] = copy.deepcopy(result)
    _clamp_inbound_ttl(raw)
    removed: dict[int, str] = {}
    try:
        if method == "server/discover":
            # ClientSession.discover / negotiate_auto: no wire-model validation, default by_name.
            return sdk_types.DiscoverResult.model_validate(raw), removed
        if method == "initialize":
            version = _PRE_HANDSHAKE_VERSION
        with contextlib.suppress(KeyError):  # the session skips rows the surface lacks
            sdk_methods.validate_server_result(method, version, raw)
        foreign = _later_revision_fields(method, version)
        if not foreign.isdisjoint(raw):
            raw = {key: value for key, value in raw.items() if key not in foreign}
        model = _adapter(sdk_methods.MONOLITH_RESULTS[method]).validate_python(raw, by_name=False)
    except ValidationError as exc:
        raise SdkParseError(_describe(exc, method, version)) from None
    if method == "initialize":
        handshake: tuple[str, ...] = tuple(sdk_versions.HANDSHAKE_PROTOCOL_VERSIONS)
        if model.protocol_version not in handshake:
            raise SdkParseError(
                "the SDK client refuses the initialize result: unsupported protocolVersion "
                f"{model.protocol_version!r}"
            )
    if method == "tools/list" and _is_modern(version):
        checker = _x_mcp_header_checker()
        if checker is not None:
            for index, tool in enumerate(model.tools):
                reason = checker(tool.input_schema)
                if reason is not None:
                    removed[index] = reason
    return model, removed


def _full_view(model: Any, removed: Mapping[int, str]) -> dict[str, Any]:
    view: dict[str, Any] = model.model_dump(**_DUMP_OPTIONS)
    if removed:
        view["tools"] = [
            _Removed(removed[i]) if i in removed else tool for i, tool in enumerate(view["tools"])
        ]
    return view


def sdk_view(
    method: str, era: str, result: dict[str, Any], *, version: str | None = None
) -> dict[str, Any]:
    """Return the SDK client's typed view of a raw ``result``, dumped back to the wire shape.

    ``era`` is ``"modern"``, ``"legacy"`` or a protocol revision; ``version`` optionally names
    the revision the exchange used (see :func:`sdk_version`). Tools the modern client filters
    out of a listing are absent from the view.

    Raises:
        SdkParseError: the SDK client rejects the result (the application gets an exception).
        ValueError: an unknown era or a method the SDK does not type.
    """
    resolved = sdk_version(era, version)
    model, removed = _parse(method, resolved, result)
    view: dict[str, Any] = model.model_dump(exclude_none=True, **_DUMP_OPTIONS)
    if removed:
        view["tools"] = [tool for i, tool in enumerate(view["tools"]) if i not in removed]
    return view


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
    _walk(result, _full_view(model, removed), "result", "result", out)
    return out


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


def _remembered_differences(method: str, version: str, result: dict[str, Any]) -> list[Difference]:
    try:
        raw = orjson.dumps(result)
    except orjson.JSONEncodeError:  # too deep or not JSON: compute it, remember nothing
        return differences(method, version, result)
    if len(raw) > _MEMO_MAX_BYTES:
        return differences(method, version, result)
    key = (method, version, raw)
    outcome = _memo.get(key)
    if outcome is None:
        try:
            outcome = tuple(differences(method, version, result))
        except SdkParseError as exc:
            outcome = exc
        if len(_memo) >= _MEMO_ENTRIES:
            del _memo[next(iter(_memo))]  # the oldest entry
        _memo[key] = outcome
    if isinstance(outcome, SdkParseError):
        raise SdkParseError(*outcome.args)
    return list(outcome)


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


# --- records and the report ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SdkDiffEntry:
    """The SDK differential of one recorded exchange."""

    exchangeId: str  # the evidence record's own key
    method: str
    era: str
    findings: list[Finding]
    error: str | None = None
    version: str = ""
    hop: str = ""
    allowed: list[Finding] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """Return the entry as a plain JSON object."""
        return {
            "exchangeId": self.exchangeId,
            "hop": self.hop,
            "method": self.method,
            "era": self.era,
            "version": self.version,
            "error": self.error,
            "findings": [f.to_json() for f in self.findings],
            "allowed": [f.to_json() for f in self.allowed],
        }


@dataclass(frozen=True, slots=True)
class SdkDiffReport:
    """The SDK differential over a set of exchange records.

    ``compared`` counts exchanges whose result went through the SDK path (one entry each,
    an SDK rejection included); ``skipped`` counts the other exchange records, with the
    reasons in ``skip_reasons``.
    """

    compared: int
    skipped: int
    entries: list[SdkDiffEntry]
    allowlist: frozenset[str] = DEFAULT_ALLOWLIST
    skip_reasons: dict[str, int] = field(default_factory=dict)
    sdk: dict[str, Any] = field(default_factory=dict)

    @property
    def findings(self) -> list[Finding]:
        """Every non-allowlisted finding of every entry, in record order."""
        return [f for entry in self.entries for f in entry.findings]

    @property
    def errors(self) -> list[SdkDiffEntry]:
        """The entries whose result the SDK client rejected."""
        return [entry for entry in self.entries if entry.error is not None]

    @property
    def ok(self) -> bool:
        """True when no non-allowlisted difference and no SDK rejection was found."""
        return not self.findings and not self.errors

    def to_json(self) -> dict[str, Any]:
        """Return the report as a plain JSON object (the ``sdk-diff --json`` output)."""
        return {
            "ok": self.ok,
            "compared": self.compared,
            "skipped": self.skipped,
            "skipReasons": dict(sorted(self.skip_reasons.items())),
            "allowlist": sorted(self.allowlist),
            "sdk": self.sdk,
            "findings": len(self.findings),
            "rejected": len(self.errors),
            "entries": [entry.to_json() for entry in self.entries],
        }


def _response(origin: Mapping[str, Any], rpc_id: Any) -> Any:
    """The JSON-RPC response object of an origin view, from its JSON body or its SSE events."""
    body = origin.get("body")
    if isinstance(body, dict) and ("result" in body or "error" in body):
        return body
    events = origin.get("sse")
    if isinstance(events, list):
        for event in reversed(events):
            data = event.get("data") if isinstance(event, dict) else None
            if not isinstance(data, dict) or ("result" not in data and "error" not in data):
                continue
            found = data.get("id")
            if rpc_id is None or (type(found) is type(rpc_id) and found == rpc_id):
                return data
    return None


def _request_version(record: Mapping[str, Any]) -> str | None:
    """The protocol revision the request named: modern ``_meta`` first, then the header."""
    ingress = record.get("ingress")
    if not isinstance(ingress, dict):
        return None
    body = ingress.get("body")
    params = body.get("params") if isinstance(body, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    if isinstance(meta, dict) and isinstance(meta.get(_PROTOCOL_VERSION_META_KEY), str):
        named: str = meta[_PROTOCOL_VERSION_META_KEY]
        return named
    headers = ingress.get("headers")
    if isinstance(headers, list):
        for pair in headers:
            if (
                isinstance(pair, list | tuple)
                and len(pair) == 2
                and isinstance(pair[0], str)
                and pair[0].lower() == "mcp-protocol-version"
                and isinstance(pair[1], str)
            ):
                return pair[1]
    return None


def _diff_record(record: Mapping[str, Any], allowlist: frozenset[str]) -> SdkDiffEntry | str:
    """Return the entry of one exchange record, or the reason it was skipped."""
    method = record.get("method")
    era = record.get("era")
    origin = record.get("origin")
    if not isinstance(method, str) or method not in TYPED_METHODS:
        return "method not typed by the SDK"
    if not isinstance(era, str) or era not in ERAS:
        return "era unknown"
    if not isinstance(origin, dict):
        return "no origin response"
    if not answer_is_whole(origin):
        return "origin body truncated"
    response = _response(origin, record.get("rpcId"))
    if response is None:
        return "no JSON-RPC response"
    if "result" not in response:
        return "error response"
    if method == "initialize":
        version = _PRE_HANDSHAKE_VERSION
    else:
        version = sdk_version(era, _request_version(record))
    error: str | None = None
    reported: list[Finding] = []
    allowed: list[Finding] = []
    try:
        reported, allowed = _split(
            _remembered_differences(method, version, response["result"]), allowlist)
    except SdkParseError as exc:
        error = str(exc)
    except RecursionError:
        error = "the result is nested too deeply to compare"
    if error is not None:
        reported = [finding("sdk.rejected", error, where="result")]
    return SdkDiffEntry(
        exchangeId=str(record.get("exchangeId", "")),
        method=method,
        era=era,
        findings=reported,
        error=error,
        version=version,
        hop=str(record.get("hop", "")),
        allowed=allowed,
    )


def diff_records(
    records: Iterable[dict[str, Any]], allowlist: frozenset[str] = DEFAULT_ALLOWLIST
) -> SdkDiffReport:
    """Run the SDK differential over evidence records (non-exchange records are ignored).

    ``records`` is read once, in order: a stream such as
    :func:`mcp_tap.evidence.iter_records` is enough.

    An exchange is compared when its method is in :data:`TYPED_METHODS`, its era is known,
    its origin view is complete and it carries a JSON-RPC ``result``; everything else is
    counted as skipped, by reason. An SDK rejection becomes an entry with ``error`` set.
    """
    entries: list[SdkDiffEntry] = []
    reasons: dict[str, int] = {}
    for record in records:
        if not isinstance(record, dict) or record.get("kind", "exchange") != "exchange":
            continue
        outcome = _diff_record(record, allowlist)
        if isinstance(outcome, str):
            reasons[outcome] = reasons.get(outcome, 0) + 1
        else:
            entries.append(outcome)
    return SdkDiffReport(
        compared=len(entries),
        skipped=sum(reasons.values()),
        entries=entries,
        allowlist=allowlist,
        skip_reasons=reasons,
        sdk=sdk_provenance(),
    )
