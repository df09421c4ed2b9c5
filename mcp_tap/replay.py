"""Replay: re-send captured requests to a candidate server and compare its answers.

``mcp-tap replay EVIDENCE --target URL`` reads the exchange records of evidence bundles and,
for every POST whose request body was captured whole, sends that body again to the
candidate with a fresh JSON-RPC id (same JSON type as the original) and the recorded MCP
headers (``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name``, ``Mcp-Param-*``,
``Content-Type``, ``Accept``). Credentials were redacted before the evidence was written,
so they are never re-sent; the caller injects its own (``--header``, ``--header-env``).

Legacy-era exchanges need a session: every recorded ``Mcp-Session-Id`` is mapped onto a
session of the target, opened by replaying the recorded ``initialize`` when the evidence has
it, or by a fresh ``initialize`` (followed by ``notifications/initialized``) when it does not.

Each answer is compared with the **recorded origin answer** (what the server behind the tap
said), after normalisation: JSON-RPC ids, ``_meta`` timestamps and caller-chosen paths
(``--ignore result.structuredContent.time``) are removed, and the replayed answer is redacted
with the default denylist so both sides hide the same secrets. What counts as a change:

* ``status``: a different HTTP status;
* ``outcome``: result vs error vs no JSON-RPC answer at all;
* ``error.code``: both errors, different codes;
* ``payload``: the normalised result (or ``error.data``) differs; for SSE the final response;
* ``notifications``: the methods of the notifications streamed before the final response;
* ``body``: a notification's answer body went from empty to non-empty or back;
* ``findings``: judging both exchanges with the core (:func:`mcp_tap.core.exchange.judge`)
  gives a rule one side has and the other has not.

Differences that are not semantic (JSON vs SSE transport, an error message's wording, a
request body that carried redacted values) are reported as notes and do not change the
verdict. The comparison is pure (:func:`compare`); only :class:`Target` does network I/O,
and it translates every ``httpx`` error into :class:`~mcp_tap.errors.UpstreamError`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import httpx
import orjson

from mcp_tap import __version__
from mcp_tap.core.eras import (
    HEADER_METHOD,
    HEADER_NAME,
    HEADER_PARAM_PREFIX,
    HEADER_PROTOCOL_VERSION,
    HEADER_SESSION_ID,
    PINNED_LEGACY_VERSION,
    Era,
)
from mcp_tap.core.exchange import Exchange, judge
from mcp_tap.core.hashing import canonical_json
from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.jsonrpc import classify, is_valid_id
from mcp_tap.core.redaction import REDACTED, Redactor
from mcp_tap.core.sse import SSEDecoder, SSEError, SSEEvent
from mcp_tap.errors import InputError, UpstreamError
from mcp_tap.evidence import answer_is_whole
from mcp_tap.probe import check_timeout
from mcp_tap.urls import check_http_url, shown_url

__all__ = [
    "REPLAYED_HEADERS",
    "Answer",
    "Case",
    "CaseResult",
    "Change",
    "ReplayOptions",
    "ReplayReport",
    "Skipped",
    "Target",
    "compare",
    "differences",
    "fresh_id",
    "iter_lines",
    "normalise",
    "parse_ignore",
    "recorded_answer",
    "replay",
    "replay_headers",
    "select_cases",
]

REPLAYED_HEADERS: Final[tuple[str, ...]] = (
    HEADER_PROTOCOL_VERSION,
    HEADER_METHOD,
    HEADER_NAME,
    "Content-Type",
    "Accept",
)
"""Recorded request headers re-sent as they were (plus every ``Mcp-Param-*``)."""

_ACCEPT: Final = "application/json, text/event-stream"
_FRESH_INT_BASE: Final = 7_000_000
_ISO_DATETIME: Final = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")
_TIME_KEY: Final = re.compile(r"(?:timestamp|time|date|[a-z0-9]At)$")
_MAX_DIFFS: Final = 8
_MAX_SHOWN: Final = 80


# --- values ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReplayOptions:
    """How to replay: the target URL, injected headers, ignored paths, timeout, hop filter."""

    target: str
    headers: tuple[tuple[str, str], ...] = ()
    ignore: tuple[tuple[str, ...], ...] = ()
    timeout: float = 30.0
    hop: str | None = None


@dataclass(frozen=True, slots=True)
class Answer:
    """One HTTP answer reduced to what the comparison needs.

    ``messages`` are the decoded JSON-RPC messages (the JSON body, or each SSE event's
    data); ``sse_events`` is set for ``text/event-stream`` answers; ``body_size`` counts the
    body's bytes (0: empty); ``truncated`` marks a recorded body the tap did not keep whole.
    """

    status: int
    headers: HeaderMap
    body: bytes
    messages: tuple[Any, ...] = ()
    sse_events: tuple[SSEEvent, ...] | None = None
    body_size: int = 0
    truncated: bool = False

    @property
    def is_sse(self) -> bool:
        """Whether the answer was an event stream."""
        return self.headers.content_type() == "text/event-stream"


@dataclass(frozen=True, slots=True)
class Case:
    """One recorded exchange to replay: its request and the recorded origin answer."""

    exchange_id: str
    hop: str
    era: str
    method: str | None
    kind: str
    body: Any
    headers: HeaderMap
    session: str | None
    recorded: Answer
    recorded_session: str | None = None

    @property
    def is_notification(self) -> bool:
        """Whether the request is a JSON-RPC notification (no answer owed but 202)."""
        return self.kind == "notification"


@dataclass(frozen=True, slots=True)
class Skipped:
    """A recorded exchange that was not replayed, and why."""

    exchange_id: str
    method: str | None
    reason: str

    def to_json(self) -> dict[str, Any]:
        """Return the skip as a plain JSON object."""
        return {"exchangeId": self.exchange_id, "method": self.method, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class Change:
    """One semantic difference between the recorded and the replayed answer.

    ``recorded`` / ``replayed`` hold each side's value (for ``findings``: the rules only that
    side has); a ``payload`` change lists the differing ``paths`` instead.
    """

    what: str
    message: str
    recorded: Any = None
    replayed: Any = None
    paths: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """Return the change as a plain JSON object (``paths``: where a payload differs)."""
        data: dict[str, Any] = {"what": self.what, "message": self.message,
                                "recorded": self.recorded, "replayed": self.replayed}
        if self.paths:
            data["paths"] = list(self.paths)
        return data


@dataclass(frozen=True, slots=True)
class CaseResult:
    """The outcome of one replayed exchange: ``same`` exactly when there is no change."""

    exchange_id: str
    method: str | None
    era: str
    recorded_status: int
    replayed_status: int
    changes: tuple[Change, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def verdict(self) -> str:
        """``same`` or ``changed``."""
        return "changed" if self.changes else "same"

    def to_json(self) -> dict[str, Any]:
        """Return the result as a plain JSON object (one entry of ``replay --json``)."""
        return {
            "exchangeId": self.exchange_id,
            "method": self.method,
            "era": self.era,
            "status": {"recorded": self.recorded_status, "replayed": self.replayed_status},
            "verdict": self.verdict,
            "changes": [c.to_json() for c in self.changes],
            "notes": list(self.notes),
        }


@dataclass(slots=True)
class ReplayReport:
    """Every replayed exchange's result and every skipped one."""

    target: str
    results: list[CaseResult] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)

    @property
    def changed(self) -> list[CaseResult]:
        """The results with a semantic change."""
        return [r for r in self.results if r.changes]

    @property
    def ok(self) -> bool:
        """Whether no replayed exchange changed."""
        return not self.changed

    def to_json(self) -> dict[str, Any]:
        """Return the report as one JSON object (the ``replay --json`` output)."""
        return {
            "target": self.target,
            "replayed": len(self.results),
            "changed": len(self.changed),
            "skipped": len(self.skipped),
            "ok": self.ok,
            "exchanges": [r.to_json() for r in self.results],
            "skippedExchanges": [s.to_json() for s in self.skipped],
        }


# --- options ---------------------------------------------------------------------------------


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


# --- selecting and rebuilding recorded exchanges ---------------------------------------------


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _raw_text(value: Any) -> str | None:
    """The text of a body the recorder could not parse (stored as ``{"raw": text}``)."""
    if isinstance(value, dict) and set(value) == {"raw"} and isinstance(value["raw"], str):
        return value["raw"]
    return None


def _encode(value: Any) -> bytes:
    return orjson.dumps(value)


def _decode_event_data(data: str) -> Any:
    if not data.strip():
        return None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return data


def recorded_answer(record: Mapping[str, Any]) -> Answer | None:
    """Rebuild the recorded origin answer of an exchange record (``None``: there is none)."""
    origin = record.get("origin")
    if not isinstance(origin, dict) or not isinstance(origin.get("status"), int):
        return None
    headers = HeaderMap.of([p for p in origin.get("headers") or [] if len(p) == 2])
    size = origin.get("bodySize")
    truncated = not answer_is_whole(origin)
    if headers.content_type() == "text/event-stream":
        events: list[SSEEvent] = []
        messages: list[Any] = []
        for entry in origin.get("sse") or []:
            if not isinstance(entry, dict):
                continue
            data = entry.get("data")
            text = data if isinstance(data, str) else _encode(data).decode()
            events.append(SSEEvent(text, entry.get("event"), entry.get("id")))
            if data is not None and not isinstance(data, str):
                messages.append(data)
        body = b"".join(f"data: {e.data}\n\n".encode() for e in events)
        return Answer(origin["status"], headers, body, tuple(messages), tuple(events),
                      size if isinstance(size, int) else len(body), truncated)
    value = origin.get("body")
    raw = _raw_text(value)
    if raw is not None:
        return Answer(origin["status"], headers, raw.encode(), (),
                      None, size if isinstance(size, int) else len(raw), truncated)
    body = b"" if value is None else _encode(value)
    messages_json = () if value is None else (value,)
    return Answer(origin["status"], headers, body, messages_json, None,
                  size if isinstance(size, int) else len(body), truncated)


def _outer_exchanges(records: Iterable[Mapping[str, Any]]) -> set[str]:
    """Exchange ids recorded at the outer hop of a two-hop pair (replayed at the inner one)."""
    outer: set[str] = set()
    for record in records:
        ids = record.get("exchangeIds")
        if (record.get("kind") == "hop-comparison" and isinstance(ids, list) and ids
                and isinstance(ids[0], str)):
            outer.add(ids[0])
    return outer


def _case(record: Mapping[str, Any]) -> Case | Skipped:
    exchange_id = str(record.get("exchangeId") or "")
    method = record.get("method") if isinstance(record.get("method"), str) else None
    ingress = _dict(record.get("ingress"))

    def skip(reason: str) -> Skipped:
        return Skipped(exchange_id, method, reason)

    if str(ingress.get("httpMethod", "")).upper() != "POST":
        return skip(f"{ingress.get('httpMethod', '?')} request (only POSTs are replayed)")
    if ingress.get("truncated"):
        return skip("request body truncated in the evidence")
    body = ingress.get("body")
    if body is None:
        return skip("request body not captured")
    if _raw_text(body) is not None and record.get("messageKind") in (None, "invalid"):
        return skip("request body was not JSON")
    if record.get("tapError"):
        return skip("no recorded origin answer (the tap could not reach the upstream)")
    answer = recorded_answer(record)
    if answer is None:
        return skip("no recorded origin answer")
    if answer.truncated:
        return skip("recorded answer truncated in the evidence")
    kind = record.get("messageKind") or classify(body).kind
    if kind == "response":
        return skip("a client's answer to a server request (the request it answered is gone)")
    headers = HeaderMap.of([p for p in ingress.get("headers") or [] if len(p) == 2])
    return Case(
        exchange_id=exchange_id,
        hop=str(record.get("hop") or ""),
        era=str(record.get("era") or "unknown"),
        method=method,
        kind=str(kind),
        body=body,
        headers=headers,
        session=headers.get(HEADER_SESSION_ID),
        recorded=answer,
        recorded_session=answer.headers.get(HEADER_SESSION_ID),
    )


def select_cases(
    records: Iterable[Mapping[str, Any]], hop: str | None = None
) -> tuple[list[Case], list[Skipped]]:
    """Pick the exchanges to replay, in evidence order, and say why the others are skipped.

    Only ``kind: "exchange"`` records count. Of a two-hop capture only the inner hop's
    exchange of each pair is replayed (its origin view is the server's answer); ``hop``
    keeps one hop's exchanges only.
    """
    listed = list(records)
    outer = _outer_exchanges(listed)
    cases: list[Case] = []
    skipped: list[Skipped] = []
    for record in listed:
        if record.get("kind") != "exchange":
            continue
        exchange_id = str(record.get("exchangeId") or "")
        method = record.get("method") if isinstance(record.get("method"), str) else None
        if hop is not None and record.get("hop") != hop:
            skipped.append(Skipped(exchange_id, method, f"recorded at hop {record.get('hop')}"))
            continue
        if hop is None and exchange_id in outer:
            skipped.append(Skipped(exchange_id, method,
                                   "outer hop of a two-hop pair (replayed at the inner hop)"))
            continue
        item = _case(record)
        if isinstance(item, Skipped):
            skipped.append(item)
        else:
            cases.append(item)
    return cases, skipped


def fresh_id(original: Any, counter: int) -> Any:
    """A new JSON-RPC id of the same JSON type as ``original`` (other types are kept)."""
    if isinstance(original, bool) or not is_valid_id(original):
        return original
    if isinstance(original, int):
        return _FRESH_INT_BASE + counter
    return f"replay-{counter}"


def replay_headers(recorded: HeaderMap) -> list[tuple[str, str]]:
    """The recorded request headers that are re-sent: MCP headers, Content-Type, Accept."""
    keep = {n.lower() for n in REPLAYED_HEADERS}
    prefix = HEADER_PARAM_PREFIX.lower()
    return [(n, v) for n, v in recorded if n.lower() in keep or n.lower().startswith(prefix)]


# --- normalisation and comparison -------------------------------------------------------------


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


def _final(messages: Sequence[Any]) -> dict[str, Any] | None:
    """The JSON-RPC response among ``messages`` (the last one, for a stream)."""
    found: dict[str, Any] | None = None
    for message in messages:
        if isinstance(message, dict) and "method" not in message and (
            "result" in message or "error" in message
        ):
            found = message
    return found


def _outcome(message: dict[str, Any] | None) -> str:
    if message is None:
        return "none"
    return "error" if "error" in message else "result"


def _notification_methods(messages: Sequence[Any]) -> list[str]:
    return [
        str(m["method"]) for m in messages
        if isinstance(m, dict) and isinstance(m.get("method"), str) and "id" not in m
    ]


def _show(value: Any) -> str:
    if isinstance(value, dict) and isinstance(value.get("name"), str):
        # Lead with the name: "a tool less" reads better as {"name":"slow_count",...}.
        value = {"name": value["name"], **value}
    text = orjson.dumps(value).decode() if not isinstance(value, str) else repr(value)
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 3] + "..."


def _key_path(path: str, key: Any) -> str:
    key = str(key)
    if re.fullmatch(r"[A-Za-z_$][A-Za-z0-9_$-]*", key):
        return f"{path}.{key}" if path else key
    return f"{path}[{orjson.dumps(key).decode()}]"


def _diff(a: Any, b: Any, path: str, out: list[str]) -> None:
    if len(out) >= _MAX_DIFFS or canonical_json(a) == canonical_json(b):
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(a) + [k for k in b if k not in a]:
            where = _key_path(path, key)
            if key not in b:
                out.append(f"{where}: removed (was {_show(a[key])})")
            elif key not in a:
                out.append(f"{where}: added {_show(b[key])}")
            else:
                _diff(a[key], b[key], where, out)
            if len(out) >= _MAX_DIFFS:
                return
        return
    if isinstance(a, list) and isinstance(b, list):
        for index in range(max(len(a), len(b))):
            where = f"{path}[{index}]"
            if index >= len(b):
                out.append(f"{where}: removed (was {_show(a[index])})")
            elif index >= len(a):
                out.append(f"{where}: added {_show(b[index])}")
            else:
                _diff(a[index], b[index], where, out)
            if len(out) >= _MAX_DIFFS:
                return
        return
    out.append(f"{path or 'value'}: {_show(a)} -> {_show(b)}")


def differences(recorded: Any, replayed: Any) -> list[str]:
    """Paths where two JSON values differ (at most a few), as ``path: a -> b`` lines."""
    out: list[str] = []
    _diff(recorded, replayed, "", out)
    return out


def _semantic(message: dict[str, Any] | None, ignore: Sequence[Sequence[str]]) -> Any:
    """The part of a response the payload comparison looks at (the error message is not)."""
    if message is None:
        return None
    value = normalise(message, ignore)
    if isinstance(value, dict) and isinstance(value.get("error"), dict):
        error = {k: v for k, v in value["error"].items() if k not in ("message", "code")}
        value = {**value, "error": error}
    return value


def _judge_rules(
    case: Case, headers: HeaderMap, body: bytes, answer: Answer, version: str | None
) -> set[str]:
    era = Era(case.era) if case.era in ("modern", "legacy") else None
    legacy = era is Era.LEGACY and case.method != "initialize"
    exchange = Exchange(
        request_headers=headers,
        request_body=body,
        response_status=answer.status,
        response_headers=answer.headers,
        response_body=answer.body,
        era=era,
        legacy_session=legacy,
        negotiated_version=version if legacy else None,
        sse_events=answer.sse_events,
    )
    return {f.rule for f in judge(exchange).findings}


def compare(
    case: Case,
    sent_headers: HeaderMap,
    sent_body: Any,
    replayed: Answer,
    ignore: Sequence[Sequence[str]] = (),
    *,
    version: str | None = None,
) -> tuple[list[Change], list[str]]:
    """Compare the recorded origin answer of ``case`` with ``replayed``: changes and notes.

    ``sent_headers`` and ``sent_body`` are the replayed request (fresh id included), so the
    core judges the replayed answer against the request it actually answered.
    """
    changes: list[Change] = []
    notes: list[str] = []
    recorded = case.recorded
    if recorded.status != replayed.status:
        changes.append(Change("status", f"HTTP {recorded.status} -> {replayed.status}",
                              recorded.status, replayed.status))
    if case.is_notification:
        was, now = recorded.body_size == 0, replayed.body_size == 0
        if was != now:
            changes.append(Change(
                "body",
                f"answer body {'empty' if was else 'non-empty'} -> "
                f"{'empty' if now else 'non-empty'}",
                "empty" if was else "non-empty", "empty" if now else "non-empty",
            ))
    else:
        _compare_messages(recorded, replayed, ignore, changes, notes)
    before = _judge_rules(case, case.headers, _encode(case.body), recorded, version)
    after = _judge_rules(case, sent_headers, _encode(sent_body), replayed, version)
    new, gone = sorted(after - before), sorted(before - after)
    if new or gone:
        parts = ([f"new {', '.join(new)}"] if new else []) + (
            [f"gone {', '.join(gone)}"] if gone else [])
        changes.append(Change("findings", "; ".join(parts), gone, new))
    if recorded.is_sse != replayed.is_sse:
        kinds = ("SSE" if recorded.is_sse else "JSON", "SSE" if replayed.is_sse else "JSON")
        notes.append(f"transport {kinds[0]} -> {kinds[1]}")
    if REDACTED in _encode(case.body).decode():
        notes.append("the recorded request carried redacted values; they were re-sent as "
                     f"{REDACTED!r}")
    return changes, notes


def _compare_messages(
    recorded: Answer,
    replayed: Answer,
    ignore: Sequence[Sequence[str]],
    changes: list[Change],
    notes: list[str],
) -> None:
    final_a, final_b = _final(recorded.messages), _final(replayed.messages)
    outcome_a, outcome_b = _outcome(final_a), _outcome(final_b)
    if outcome_a != outcome_b:
        changes.append(Change("outcome", f"{outcome_a} -> {outcome_b}", outcome_a, outcome_b))
    elif final_a is not None and final_b is not None:
        if outcome_a == "error":
            code_a = _dict(final_a.get("error")).get("code")
            code_b = _dict(final_b.get("error")).get("code")
            if canonical_json(code_a) != canonical_json(code_b):
                changes.append(Change("error.code", f"error code {code_a} -> {code_b}",
                                      code_a, code_b))
            msg_a = _dict(final_a.get("error")).get("message")
            msg_b = _dict(final_b.get("error")).get("message")
            if msg_a != msg_b:
                notes.append(f"error message {_show(msg_a)} -> {_show(msg_b)}")
        sem_a, sem_b = _semantic(final_a, ignore), _semantic(final_b, ignore)
        if canonical_json(sem_a) != canonical_json(sem_b):
            found = differences(sem_a, sem_b)
            summary = found[0] if len(found) == 1 else f"{len(found)} differences"
            if len(found) >= _MAX_DIFFS:
                summary = f"{_MAX_DIFFS} or more differences"
            changes.append(Change("payload", summary, paths=tuple(found)))
    if recorded.is_sse or replayed.is_sse:
        seq_a = _notification_methods(recorded.messages)
        seq_b = _notification_methods(replayed.messages)
        if seq_a != seq_b:
            changes.append(Change(
                "notifications",
                f"notification methods {_show(_runs(seq_a))} -> {_show(_runs(seq_b))}",
                seq_a, seq_b,
            ))


def _runs(methods: Sequence[str]) -> list[str]:
    """Collapse repeats for display: ``["a", "a", "b"]`` -> ``["a x2", "b"]``."""
    out: list[str] = []
    count = 0
    for index, method in enumerate(methods):
        count += 1
        if index + 1 == len(methods) or methods[index + 1] != method:
            out.append(method if count == 1 else f"{method} x{count}")
            count = 0
    return out


# --- the network side -------------------------------------------------------------------------


class Target:
    """The candidate server: POSTs JSON-RPC bodies and reads whole answers (SSE decoded).

    The one place replay touches the network: every ``httpx`` error becomes
    :class:`UpstreamError` here.
    """

    def __init__(self, url: str, *, timeout: float = 30.0,
                 client: httpx.Client | None = None) -> None:
        """Talk to ``url``; ``client`` (for tests) replaces the default ``httpx.Client``."""
        self.url = check_http_url(url, "--target")
        check_timeout(timeout)
        self._own = client is None
        self._client = client if client is not None else httpx.Client(
            timeout=httpx.Timeout(timeout), follow_redirects=False)

    def close(self) -> None:
        """Close the HTTP client (if this object opened it)."""
        if self._own:
            self._client.close()

    def post(self, headers: Sequence[tuple[str, str]], body: Any) -> Answer:
        """POST ``body`` as JSON with exactly ``headers``; return the whole answer."""
        content = _encode(body)
        try:
            with self._client.stream("POST", self.url, headers=list(headers),
                                     content=content) as response:
                status = response.status_code
                pairs = tuple((k, v) for k, v in response.headers.multi_items())
                data = b"".join(response.iter_bytes())
        except httpx.HTTPError as exc:
            raise UpstreamError(f"{shown_url(self.url)}: {_describe(exc)}") from exc
        return _answer(status, HeaderMap(pairs), data)

    def delete(self, headers: Sequence[tuple[str, str]]) -> None:
        """Send a DELETE (closing a legacy session); its answer is not judged."""
        try:
            self._client.delete(self.url, headers=list(headers))
        except httpx.HTTPError as exc:
            raise UpstreamError(f"{shown_url(self.url)}: {_describe(exc)}") from exc


def _describe(exc: httpx.HTTPError) -> str:
    text = str(exc).strip() or type(exc).__name__
    if isinstance(exc, httpx.ConnectError):
        return f"cannot connect ({text})"
    if isinstance(exc, httpx.TimeoutException):
        return f"timed out ({type(exc).__name__})"
    return text.splitlines()[0]


def _answer(status: int, headers: HeaderMap, data: bytes) -> Answer:
    """Decode an answer's body into JSON-RPC messages (and SSE events), redacted."""
    redactor = _REDACTOR
    if headers.content_type() == "text/event-stream":
        decoder = SSEDecoder()
        try:
            events = decoder.feed(data) + decoder.close()
        except SSEError:
            events = []
        redacted = tuple(
            SSEEvent(redactor.redact_text(e.data), e.event, e.id, e.retry) for e in events
        )
        messages = tuple(
            m for m in (_decode_event_data(e.data) for e in redacted)
            if m is not None and not isinstance(m, str)
        )
        return Answer(status, headers, data, messages, redacted, len(data))
    if not data.strip():
        return Answer(status, headers, data, (), None, len(data))
    try:
        message = orjson.loads(data)
    except orjson.JSONDecodeError:
        return Answer(status, headers, data, (), None, len(data))
    return Answer(status, headers, data, (redactor.redact_message(message),), None, len(data))


_REDACTOR: Final = Redactor()


@dataclass(slots=True)
class _Session:
    """A legacy session on the target: its id, version, and whether it was initialized."""

    id: str
    version: str
    initialized: bool = False


class _Replayer:
    """Replays cases in order, mapping recorded legacy sessions onto target sessions."""

    def __init__(self, target: Target, options: ReplayOptions) -> None:
        self.target = target
        self.options = options
        self.counter = 0
        self.sessions: dict[str, _Session] = {}  # recorded session id -> target session
        self.opened: list[_Session] = []

    def next_id(self, original: Any) -> Any:
        self.counter += 1
        return fresh_id(original, self.counter)

    def base_headers(self, version: str | None = None) -> list[tuple[str, str]]:
        headers = [("Accept", _ACCEPT), ("Content-Type", "application/json")]
        if version:
            headers.append((HEADER_PROTOCOL_VERSION, version))
        return headers

    def open_session(self, version: str) -> _Session | None:
        """Run ``initialize`` + ``notifications/initialized`` on the target."""
        body = {
            "jsonrpc": "2.0", "id": self.next_id(0), "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {},
                       "clientInfo": {"name": "mcp-tap-replay", "version": __version__}},
        }
        answer = self.target.post([*self.base_headers(), *self.options.headers], body)
        session = self.adopt(answer, version)
        if session is not None:
            self.initialized(session)
        return session

    def adopt(self, answer: Answer, version: str) -> _Session | None:
        sid = answer.headers.get(HEADER_SESSION_ID)
        if not sid:
            return None
        result = _dict(_dict(_final(answer.messages)).get("result"))
        negotiated = result.get("protocolVersion")
        session = _Session(sid, negotiated if isinstance(negotiated, str) else version)
        self.opened.append(session)
        return session

    def initialized(self, session: _Session) -> None:
        if session.initialized:
            return
        body = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        headers = [*self.base_headers(session.version), (HEADER_SESSION_ID, session.id),
                   *self.options.headers]
        self.target.post(headers, body)
        session.initialized = True

    def session_for(self, case: Case) -> tuple[_Session | None, list[str]]:
        """The target session a legacy case runs in (opened on first use)."""
        if case.era != "legacy" or case.session is None:
            return None, []
        session = self.sessions.get(case.session)
        notes: list[str] = []
        if session is None:
            version = case.headers.get(HEADER_PROTOCOL_VERSION) or PINNED_LEGACY_VERSION
            session = self.open_session(version)
            if session is None:
                notes.append("the target opened no legacy session (no Mcp-Session-Id)")
                return None, notes
            self.sessions[case.session] = session
            notes.append("legacy session opened on the target with a fresh initialize")
        if case.method != "notifications/initialized":
            self.initialized(session)
        return session, notes

    def run(self, case: Case) -> CaseResult:
        session, notes = self.session_for(case)
        body = case.body
        if isinstance(body, dict) and "id" in body and not case.is_notification:
            body = {**body, "id": self.next_id(body["id"])}
        headers = replay_headers(case.headers)
        if session is not None:
            headers.append((HEADER_SESSION_ID, session.id))
        headers += list(self.options.headers)
        answer = self.target.post(headers, body)
        if case.method == "notifications/initialized" and session is not None:
            session.initialized = True
        if case.method == "initialize":
            proposed = _dict(_dict(body).get("params")).get("protocolVersion")
            adopted = self.adopt(
                answer, proposed if isinstance(proposed, str) else PINNED_LEGACY_VERSION)
            if adopted is not None and case.recorded_session:
                self.sessions[case.recorded_session] = adopted
        changes, more = compare(case, HeaderMap(tuple(headers)), body, answer,
                                self.options.ignore,
                                version=session.version if session is not None else None)
        return CaseResult(case.exchange_id, case.method, case.era, case.recorded.status,
                          answer.status, tuple(changes), tuple(notes + more))

    def close_sessions(self) -> None:
        for session in self.opened:
            headers = [(HEADER_SESSION_ID, session.id),
                       (HEADER_PROTOCOL_VERSION, session.version), *self.options.headers]
            try:
                self.target.delete(headers)
            except UpstreamError:
                continue  # closing is a courtesy; the comparison is already complete


def _check_hop(records: Sequence[Mapping[str, Any]], hop: str) -> None:
    """Raise :class:`InputError` unless some exchange record was recorded at ``hop``."""
    hops = {r["hop"] for r in records
            if r.get("kind") == "exchange" and isinstance(r.get("hop"), str)}
    if hop not in hops:
        known = ", ".join(sorted(hops)) if hops else "none"
        raise InputError(f"--hop {hop!r}: no exchange in the evidence was recorded at that hop "
                         f"(hops in the evidence: {known})")


def replay(
    records: Iterable[Mapping[str, Any]],
    options: ReplayOptions,
    *,
    client: httpx.Client | None = None,
) -> ReplayReport:
    """Replay the recorded exchanges against ``options.target``; compare every answer.

    Raises :class:`InputError` for a malformed target URL, an unusable timeout or a ``hop``
    no exchange was recorded at, and :class:`UpstreamError` when the target cannot be reached
    or stops answering.
    """
    listed = list(records)
    if options.hop is not None:
        _check_hop(listed, options.hop)
    cases, skipped = select_cases(listed, options.hop)
    report = ReplayReport(shown_url(options.target), skipped=skipped)
    target = Target(options.target, timeout=options.timeout, client=client)
    replayer = _Replayer(target, options)
    try:
        for case in cases:
            report.results.append(replayer.run(case))
        replayer.close_sessions()
    finally:
        target.close()
    return report


def iter_lines(report: ReplayReport) -> Iterator[str]:
    """The human report: one line per exchange, one per change, then a summary line."""
    for result in report.results:
        status = (str(result.recorded_status) if result.recorded_status == result.replayed_status
                  else f"{result.recorded_status}->{result.replayed_status}")
        yield (f"{result.verdict:7} {result.exchange_id} {result.method or '-'} "
               f"({result.era}) HTTP {status}")
        for change in result.changes:
            yield f"        {change.what}: {change.message}"
            if len(change.paths) > 1:
                yield from (f"          {path}" for path in change.paths)
        for note in result.notes:
            yield f"        note: {note}"
    for item in report.skipped:
        yield f"skipped {item.exchange_id} {item.method or '-'}: {item.reason}"
    yield (f"replay: {len(report.results)} replayed, {len(report.changed)} changed, "
           f"{len(report.skipped)} skipped against {report.target}")
