"""Full wire-schema validation against the published JSON Schema of each revision.

The precise hand-written rules say *why* a message is wrong; this module makes sure nothing
the official schema forbids slips through a rule nobody wrote. It validates against the
``schema.json`` the specification publishes for each revision (2026-07-28, 2025-11-25,
2025-03-26), shipped in :mod:`mcp_tap.core.specschema`, reported as ``wire.schema`` (results),
``wire.schema.notification`` (server notifications) and ``request.schema`` (requests).
Revisions without a published schema here are judged by the nearest one: 2025-06-18 by
2025-11-25, 2024-11-05 by 2025-03-26.

The validators are compiled once per (revision, definition) with ``fastjsonschema`` (every
keyword the three schemas use is one it implements; faster than ``jsonschema`` with a
cached validator by the figures in pyproject.toml). ``format`` is not asserted: the
2020-12 draft the schemas declare makes it an annotation. Loading the shipped schema files
is package data read once, like importing code; nothing is read while judging.

Verdicts are cached (:class:`VerdictCache`): a verdict depends only on the kind (request,
result or notification), the method, the revision and the value, and the value is keyed by
its JSON as orjson writes it (:func:`key_json`: keys in the value's own order, no sorting;
``1``, ``1.0`` and ``true`` stay three keys, as the schema tells them apart). Two values
that differ only in key order are two keys: a second miss, never a shared verdict for values
that differ. Every value is still judged: a miss validates, and values too large or too deep
to key are validated uncached. ``results.check_result`` keeps its whole verdict on a
complete result in the same cache, under its own kind.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from functools import cache
from importlib import resources
from typing import Any, Final

import fastjsonschema
import orjson

from mcp_tap.core.eras import LEGACY_VERSIONS, MODERN_VERSIONS

KNOWN_VERSIONS = frozenset(MODERN_VERSIONS) | frozenset(LEGACY_VERSIONS)
SCHEMA_REVISIONS: Final = ("2026-07-28", "2025-11-25", "2025-03-26")
"""The revisions whose published ``schema.json`` ships with the package."""
_SCHEMA_OF: Final = {
    "2026-07-28": "2026-07-28",
    "2025-11-25": "2025-11-25",
    "2025-06-18": "2025-11-25",
    "2025-03-26": "2025-03-26",
    "2024-11-05": "2025-03-26",
}

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
        # The map itself, most recently used last.
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
        key = self.key(kind, method, version, value, canonical)
        if key is None:
            return judge(method, version, value)
        verdict: str | None = self.get(key)
        if verdict is None:
            verdict = judge(method, version, value)
            self.put(key, verdict)
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
def definitions(revision: str) -> dict[str, Any]:
    """The ``$defs`` (or draft-07 ``definitions``) of a shipped revision's schema."""
    text = resources.files("mcp_tap.core.specschema").joinpath(f"{revision}.json").read_bytes()
    document = orjson.loads(text)
    defs: dict[str, Any] = document.get("$defs") or document["definitions"]
    return defs


def _pointer(revision: str) -> str:
    return "#/definitions/" if revision == "2025-03-26" else "#/$defs/"


@cache
def validator(revision: str, name: str) -> Callable[[Any], Any]:
    """The compiled validator of definition ``name`` in ``revision``'s published schema."""
    defs = definitions(revision)
    key = "definitions" if revision == "2025-03-26" else "$defs"
    root = {key: defs, "$ref": _pointer(revision) + name}
    compiled: Callable[[Any], Any] = fastjsonschema.compile(root, use_formats=False)
    return compiled


def definition_problem(revision: str, name: str, value: Any) -> str:
    """Why ``value`` is not a ``name`` of ``revision``'s published schema ("" when it is)."""
    try:
        validator(revision, name)(value)
    except fastjsonschema.JsonSchemaValueException as exc:
        return str(exc.message)
    return ""


@cache
def _methods(revision: str) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """Method -> request definition, result definition, notification definition."""
    requests: dict[str, str] = {}
    results: dict[str, str] = {}
    notifications: dict[str, str] = {}
    defs = definitions(revision)
    # Only what a client sends and a server answers or notifies: the schema's own unions.
    sent = _union(defs, "ClientRequest") | _union(defs, "ServerNotification")
    for name, body in defs.items():
        props = body.get("properties") if isinstance(body, dict) else None
        method = props.get("method", {}).get("const") if isinstance(props, dict) else None
        if not isinstance(method, str) or name not in sent:
            continue
        if name.endswith("Notification"):
            notifications[method] = name
        elif name.endswith("Request"):
            requests[method] = name
            result = name[: -len("Request")] + "Result"
            results[method] = result if result in defs else "EmptyResult"
    # The schema names the two task answers of 2025-11-25 after the task, not the request.
    if "GetTaskRequest" in defs:
        results["tasks/get"] = "GetTaskResult"
        results["tasks/result"] = "GetTaskPayloadResult"
    return requests, results, notifications


def _union(defs: dict[str, Any], name: str) -> set[str]:
    """The definition names a union definition (``anyOf`` of ``$ref``) lists."""
    arms = defs.get(name, {}).get("anyOf", [])
    return {arm["$ref"].rsplit("/", 1)[-1] for arm in arms if "$ref" in arm}


def request_problem(method: str, version: str, params: Any) -> str:
    """Why the official schema rejects this client request ("" when it accepts or has no row).

    Methods outside the revision's schema (custom or extension methods) are not judged here.
    """
    if version not in KNOWN_VERSIONS or not (params is None or isinstance(params, dict)):
        return ""
    return VERDICTS.verdict("request", method, version, params, _request_problem)


_REQUEST, _RESULT, _NOTIFICATION = 0, 1, 2  # the tables of _methods


def _named(version: str, table: int, method: str) -> tuple[str, str | None]:
    """The revision judging ``version`` and its definition of ``method`` in ``table`` (None:
    not in the revision's schema)."""
    revision = _SCHEMA_OF[version]
    return revision, _methods(revision)[table].get(method)


def _mismatch(revision: str, name: str, value: Any, what: str, version: str) -> str:
    """Why ``value`` does not match definition ``name`` ("" when it does), said of ``what``."""
    problem = definition_problem(revision, name, value)
    return f"{what} does not match the {version} schema: {problem}" if problem else ""


def _request_problem(method: str, version: str, params: Any) -> str:
    revision, name = _named(version, _REQUEST, method)
    if name is None:
        return ""
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": 0, "method": method}
    if params is not None:
        message["params"] = params
    return _mismatch(revision, name, message, f"{method} request", version)


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
    revision, name = _named(version, _RESULT, method)
    if name is None:
        return ""
    if revision == "2026-07-28" and result.get("resultType") == "input_required":
        name = "InputRequiredResult"  # the dual-result arm the discriminator names
    elif method == "tools/call" and "task" in result and "content" not in result:
        name = "CreateTaskResult" if "CreateTaskResult" in definitions(revision) else name
    return _mismatch(revision, name, result, f"{method} result", version)


def notification_problem(version: str, message: Any) -> str:
    """Why the official schema rejects this server notification (a whole JSON-RPC message;
    "" when it accepts, or its method is not in the revision's schema)."""
    if version not in KNOWN_VERSIONS or not isinstance(message, dict):
        return ""
    method = message.get("method")
    if not isinstance(method, str):
        return ""
    return VERDICTS.verdict("notification", method, version, message, _notification_problem)


def _notification_problem(method: str, version: str, message: Any) -> str:
    revision, name = _named(version, _NOTIFICATION, method)
    if name is None:
        return ""
    return _mismatch(revision, name, message, method, version)
