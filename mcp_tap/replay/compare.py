"""The semantic comparison of a recorded and a replayed answer: changes and notes (pure)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

import orjson

from mcp_tap.core.eras import (
    Era,
)
from mcp_tap.core.exchange import Exchange, judge
from mcp_tap.core.hashing import canonical_json
from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.redaction import REDACTED
from mcp_tap.replay.model import (
    Answer,
    Case,
    as_dict,
    encode_json,
)
from mcp_tap.replay.normalise import normalise
from mcp_tap.replay.report import Change

_MAX_DIFFS: Final = 8


_MAX_SHOWN: Final = 80


def final_response(messages: Sequence[Any]) -> dict[str, Any] | None:
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
    before = _judge_rules(case, case.headers, encode_json(case.body), recorded, version)
    after = _judge_rules(case, sent_headers, encode_json(sent_body), replayed, version)
    new, gone = sorted(after - before), sorted(before - after)
    if new or gone:
        parts = ([f"new {', '.join(new)}"] if new else []) + (
            [f"gone {', '.join(gone)}"] if gone else [])
        changes.append(Change("findings", "; ".join(parts), gone, new))
    if recorded.is_sse != replayed.is_sse:
        kinds = ("SSE" if recorded.is_sse else "JSON", "SSE" if replayed.is_sse else "JSON")
        notes.append(f"transport {kinds[0]} -> {kinds[1]}")
    if REDACTED in encode_json(case.body).decode():
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
    final_a, final_b = final_response(recorded.messages), final_response(replayed.messages)
    outcome_a, outcome_b = _outcome(final_a), _outcome(final_b)
    if outcome_a != outcome_b:
        changes.append(Change("outcome", f"{outcome_a} -> {outcome_b}", outcome_a, outcome_b))
    elif final_a is not None and final_b is not None:
        if outcome_a == "error":
            code_a = as_dict(final_a.get("error")).get("code")
            code_b = as_dict(final_b.get("error")).get("code")
            if canonical_json(code_a) != canonical_json(code_b):
                changes.append(Change("error.code", f"error code {code_a} -> {code_b}",
                                      code_a, code_b))
            msg_a = as_dict(final_a.get("error")).get("message")
            msg_b = as_dict(final_b.get("error")).get("message")
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
