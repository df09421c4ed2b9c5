"""What a capture asked and how it was answered: requests keyed for matching, final responses.

A request is matched across captures by its era, method, target name (``params.name`` of
``tools/call`` and ``prompts/get``, ``params.uri`` of ``resources/read``) and its params
without ``_meta`` (which carries per-request bookkeeping: protocol version, client info,
progress tokens), in canonical JSON. Only JSON-RPC requests count (an ``rpcId`` that is a
string or an integer); notifications and client answers have no answer to compare.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mcp_tap.core import deepjson
from mcp_tap.core.hashing import canonical_json
from mcp_tap.errors import InputError
from mcp_tap.replay import Answer, recorded_answer

_NAME_KEY = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


@dataclass(frozen=True, slots=True)
class RequestKey:
    """How a request is recognised in another capture."""

    era: str
    method: str
    name: str | None
    params: str  # canonical JSON of params without _meta
    shown: str = ""  # what the label shows of the params (the arguments of a named call)

    def label(self) -> str:
        """A short human name: ``tools/call add {"a":1,"b":2}``."""
        parts = [self.method]
        if self.name is not None:
            parts.append(self.name)
        if self.shown not in ("", "{}", "null"):
            parts.append(self.shown if len(self.shown) <= 60 else self.shown[:57] + "...")
        label = " ".join(parts)
        return f"{label} ({self.era})" if self.era != "modern" else label


@dataclass(frozen=True, slots=True)
class Asked:
    """One recorded request and its recorded origin answer (``None``: none recorded whole)."""

    key: RequestKey
    exchange_id: str
    answer: Answer | None


def strip_meta(params: Any) -> Any:
    """``params`` without its ``_meta`` (a copy; other values are returned as they are)."""
    if isinstance(params, dict):
        return {k: v for k, v in params.items() if k != "_meta"}
    return params


def request_key(era: str, body: Mapping[str, Any]) -> RequestKey | None:
    """The matching key of a JSON-RPC request body, or ``None`` if it is not a request."""
    method = body.get("method")
    if not isinstance(method, str) or "id" not in body:
        return None
    params = strip_meta(body.get("params"))
    name_key = _NAME_KEY.get(method)
    name = params.get(name_key) if isinstance(params, dict) and name_key else None
    shown: Any = params
    if isinstance(params, dict) and name_key:
        rest = {k: v for k, v in params.items() if k != name_key}
        shown = rest["arguments"] if set(rest) == {"arguments"} else rest
    return RequestKey(era, method, name if isinstance(name, str) else None,
                      _key_text(params if params is not None else {}),
                      _key_text(shown if shown is not None else {}))


def _key_text(value: Any) -> str:
    """``value``'s canonical JSON, or for what orjson cannot write (nesting past its
    limit, integers past 64 bits) the stdlib-compatible text of :mod:`mcp_tap.core.deepjson`:
    a request anyone may send is still a key, never an exception."""
    try:
        return canonical_json(value).decode()
    except TypeError:  # orjson.JSONEncodeError
        return deepjson.dumps(value)


def final_response(messages: Sequence[Any]) -> dict[str, Any] | None:
    """The JSON-RPC response among ``messages`` (the last one, for a stream)."""
    found: dict[str, Any] | None = None
    for message in messages:
        if isinstance(message, dict) and "method" not in message and (
                "result" in message or "error" in message):
            found = message
    return found


def pick_hop(records: Sequence[Mapping[str, Any]], hop: str | None, side: str) -> str | None:
    """The hop whose exchanges are compared; an :class:`InputError` when it is ambiguous."""
    return choose_hop({r["hop"] for r in records
                       if r.get("kind") == "exchange" and isinstance(r.get("hop"), str)},
                      hop, side)


def choose_hop(seen: Iterable[str], hop: str | None, side: str) -> str | None:
    """:func:`pick_hop` given the hops a side's exchanges were recorded at."""
    hops = sorted(seen)
    if hop is not None:
        if hop not in hops:
            raise InputError(f"the {side} holds no exchange at hop {hop} "
                             f"(it holds {', '.join(hops) or 'none'})")
        return hop
    if len(hops) > 1:
        raise InputError(f"the {side} holds hops {', '.join(hops)}: pass --hop so each "
                         "request counts once")
    return None


def asked(records: Iterable[Mapping[str, Any]], hop: str | None = None) -> list[Asked]:
    """Every JSON-RPC request of ``records`` (at ``hop``, if given) with its recorded answer."""
    return [found for found in (asked_of(r, hop) for r in records) if found is not None]


def asked_of(record: Mapping[str, Any], hop: str | None = None) -> Asked | None:
    """The JSON-RPC request of one record (at ``hop``, if given) with its recorded answer."""
    if record.get("kind") != "exchange" or (hop is not None and record.get("hop") != hop):
        return None
    ingress = record.get("ingress")
    body = ingress.get("body") if isinstance(ingress, dict) else None
    if not isinstance(body, dict) or (isinstance(ingress, dict) and ingress.get("truncated")):
        return None
    key = request_key(str(record.get("era") or "unknown"), body)
    if key is None:
        return None
    answer = None if record.get("tapError") else recorded_answer(record)
    if answer is not None and answer.truncated:
        answer = None
    return Asked(key, str(record.get("exchangeId") or ""), answer)
