"""Behaviour drift: the same request, normalised, answered differently.

Requests are paired by :class:`~mcp_tap.drift.answers.RequestKey`, the n-th occurrence in
the baseline with the n-th in the candidate (:class:`mcp_tap.drift.stream.Pairing`). For
each pair (answers recorded whole on both sides) the comparison reports:

* ``outcome``: result vs tool error (a result with ``isError: true``) vs JSON-RPC error vs no
  JSON-RPC answer. A result that became anything else is breaking; a failure that became a
  result compatible; one failure for another ``changed``. The payload of a pair whose
  outcome changed is not compared field by field (the outcome says it);
* ``error.code``: both errors, different codes: breaking (clients branch on codes); the
  message wording is not compared;
* ``resultType``: breaking (a client that expects ``complete`` cannot read a ``task``);
* payload fields, on the result with ``_meta`` and its timestamps left out (the JSON-RPC id
  is never compared): a field removed is breaking, a field added compatible, a value that
  differs ``changed``. Listing results are the inventory's; their payload is not repeated;
* ``sse``: the pattern of the answer (``json``, or the SSE events as notification methods
  and ``response``, runs collapsed) differs: ``changed``;
* ``status``: the HTTP status differs: ``changed`` (the outcome says what it means).

Identical changes of several pairs of one key are reported once, with their exchange ids.
"""

from __future__ import annotations

from typing import Any, Final

from mcp_tap.core.hashing import canonical_json
from mcp_tap.drift.answers import RequestKey, final_response
from mcp_tap.drift.inventory import LISTINGS
from mcp_tap.drift.model import Area, Change, Severity
from mcp_tap.replay import Answer, normalise

_B, _C, _X = Severity.BREAKING, Severity.COMPATIBLE, Severity.CHANGED
_MAX_FIELDS: Final = 12  # payload paths reported per pair; the rest are counted


def _outcome(response: dict[str, Any] | None) -> str:
    if response is None:
        return "none"
    if "error" in response:
        return "error"
    result = response.get("result")
    # A tool that failed answers with a result marked isError: to a client, a failure.
    return "tool error" if isinstance(result, dict) and result.get("isError") is True else "result"


def sse_pattern(answer: Answer) -> str:
    """``json`` for a JSON answer, else the SSE events (methods, ``response``), runs collapsed."""
    if not answer.is_sse:
        return "json" if answer.body else "empty"
    names: list[str] = []
    for message in answer.messages:
        if isinstance(message, dict) and isinstance(message.get("method"), str):
            names.append(message["method"] + ("?" if "id" in message else ""))
        else:
            names.append("response")
    runs: list[str] = []
    for name in names:
        if runs and runs[-1].split(" x")[0] == name:
            head, _, count = runs[-1].partition(" x")
            runs[-1] = f"{head} x{int(count or 1) + 1}"
        else:
            runs.append(name)
    return "sse[" + ", ".join(runs) + "]"


def _payload(response: dict[str, Any]) -> Any:
    result = normalise(response.get("result"))
    if isinstance(result, dict):
        result = {k: v for k, v in result.items() if k != "_meta"}
    return result


def _fields(old: Any, new: Any, path: str, out: list[tuple[Severity, str, Any, Any]]) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in old:
            sub = f"{path}.{key}"
            if key not in new:
                out.append((_B, sub, _short(old[key]), None))
            else:
                _fields(old[key], new[key], sub, out)
        for key in new:
            if key not in old:
                out.append((_C, f"{path}.{key}", None, _short(new[key])))
        return
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for index, (a, b) in enumerate(zip(old, new, strict=True)):
            _fields(a, b, f"{path}[{index}]", out)
        return
    if canonical_json(old) != canonical_json(new):
        out.append((_X, path, _short(old), _short(new)))


def _short(value: Any) -> Any:
    return value if len(canonical_json(value)) <= 120 else "..."


def compare_answers(key: RequestKey, old: Answer, new: Answer) -> list[Change]:
    """The changes between the baseline's and the candidate's answer to one request."""
    subject = key.label()
    changes: list[Change] = []

    def add(severity: Severity, aspect: str, message: str, was: Any = None,
            now: Any = None) -> None:
        changes.append(Change(Area.BEHAVIOUR, severity, subject, aspect,
                              f"{subject}: {message}", was, now))

    before, after = final_response(old.messages), final_response(new.messages)
    was, now = _outcome(before), _outcome(after)
    if old.status != new.status:
        add(_X, "status", f"HTTP status {old.status} -> {new.status}", old.status, new.status)
    if was != now:
        if was == "result":
            severity = _B
        elif now == "result":
            severity = _C
        else:
            severity = _X
        add(severity, "outcome", f"answered with {now} instead of {was}", was, now)
    elif before is not None and after is not None and was == "error":
        old_code = before["error"].get("code") if isinstance(before["error"], dict) else None
        new_code = after["error"].get("code") if isinstance(after["error"], dict) else None
        if old_code != new_code:
            add(_B, "error.code", f"error code {old_code} -> {new_code}", old_code, new_code)
    elif before is not None and after is not None:
        old_result, new_result = before.get("result"), after.get("result")
        old_type = old_result.get("resultType") if isinstance(old_result, dict) else None
        new_type = new_result.get("resultType") if isinstance(new_result, dict) else None
        if old_type != new_type and old_type is not None and new_type is not None:
            add(_B, "resultType", f"resultType {old_type} -> {new_type}", old_type, new_type)
        if key.method not in LISTINGS:
            found: list[tuple[Severity, str, Any, Any]] = []
            _fields(_payload(before), _payload(after), "result", found)
            found = [f for f in found if f[1] != "result.resultType"]
            for severity, path, a, b in found[:_MAX_FIELDS]:
                verb = {_B: "removed", _C: "added", _X: "changed"}[severity]
                add(severity, f"payload {path}", f"{path} {verb}", a, b)
            if len(found) > _MAX_FIELDS:
                add(_X, "payload", f"{len(found) - _MAX_FIELDS} more payload differences")
    old_sse, new_sse = sse_pattern(old), sse_pattern(new)
    if old_sse != new_sse:
        add(_X, "sse", f"answer pattern {old_sse} -> {new_sse}", old_sse, new_sse)
    return changes
