"""The answer book: what a capture answered, looked up by what is asked (sans-IO).

Every recorded JSON-RPC request whose origin answer was kept whole becomes an entry under
its :class:`~mcp_tap.drift.answers.RequestKey` (era, method, target name, params without
``_meta``). Asked the same thing several times, the book gives the recorded answers in
their recorded order and then repeats the last one. ``initialize`` and ``server/discover``
also match on the method alone (a different client sends different ``clientInfo``). An
answer is replayed with the asker's JSON-RPC id (and, in notifications/progress, its
``progressToken``); SSE events keep their recorded delay after the request arrived.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from mcp_tap.core import deepjson
from mcp_tap.drift.answers import RequestKey, request_key
from mcp_tap.evidence import answer_is_whole

METHOD_ONLY: Final = frozenset({"initialize", "server/discover"})
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602


@dataclass(frozen=True, slots=True)
class RecordedEvent:
    """One SSE event: seconds after the request arrived, its ``event``/``id`` and data."""

    delay: float
    data: Any
    event: str | None = None
    id: str | None = None


@dataclass(frozen=True, slots=True)
class RecordedAnswer:
    """One recorded origin answer: status, content type, JSON body or SSE events."""

    status: int
    content_type: str
    body: Any = None
    events: tuple[RecordedEvent, ...] | None = None
    exchange_id: str = ""

    @property
    def is_sse(self) -> bool:
        """Whether the answer was an event stream."""
        return self.events is not None


@dataclass(frozen=True, slots=True)
class Miss:
    """Nothing recorded answers the request: the JSON-RPC error to give instead."""

    code: int
    message: str
    data: dict[str, Any]


def _num(value: Any) -> float | None:
    return float(value) if type(value) in (int, float) else None


def recorded(record: Mapping[str, Any]) -> RecordedAnswer | None:
    """The origin answer of an exchange record, or ``None`` when it was not kept whole."""
    origin = record.get("origin")
    if not isinstance(origin, dict) or not isinstance(origin.get("status"), int):
        return None
    if record.get("tapError") or not answer_is_whole(origin):
        return None
    content_type = str(origin.get("contentType") or "application/json")
    events = origin.get("sse")
    ingress = record.get("ingress")
    start = _num(ingress.get("receivedAt")) if isinstance(ingress, dict) else None
    ident = str(record.get("exchangeId") or "")
    if isinstance(events, list) and content_type.startswith("text/event-stream"):
        out: list[RecordedEvent] = []
        for event in events:
            if not isinstance(event, dict):
                continue
            at = _num(event.get("at"))
            delay = max(0.0, at - start) if at is not None and start is not None else 0.0
            out.append(RecordedEvent(delay, event.get("data"), event.get("event"),
                                     event.get("id")))
        return RecordedAnswer(origin["status"], "text/event-stream", None, tuple(out), ident)
    return RecordedAnswer(origin["status"], content_type, origin.get("body"), None, ident)


@dataclass
class AnswerBook:
    """Recorded answers by request key, with a cursor per key for repeated asks."""

    entries: dict[RequestKey, list[RecordedAnswer]] = field(default_factory=dict)
    by_method: dict[tuple[str, str], list[RecordedAnswer]] = field(default_factory=dict)
    paths: set[str] = field(default_factory=set)
    _asked: dict[RequestKey, int] = field(default_factory=dict)

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]],
                     hop: str | None = None) -> AnswerBook:
        """Build the book from exchange records (of ``hop``, if given)."""
        book = cls()
        for record in records:
            if record.get("kind") != "exchange" or (hop is not None
                                                    and record.get("hop") != hop):
                continue
            ingress = record.get("ingress")
            if not isinstance(ingress, dict):
                continue
            if isinstance(ingress.get("path"), str):
                book.paths.add(ingress["path"].split("?", 1)[0])
            body = ingress.get("body")
            if not isinstance(body, dict) or ingress.get("truncated"):
                continue
            key = request_key(str(record.get("era") or "unknown"), body)
            answer = recorded(record)
            if key is None or answer is None:
                continue
            book.entries.setdefault(key, []).append(answer)
            book.by_method.setdefault((key.era, key.method), []).append(answer)
        return book

    def __len__(self) -> int:
        """How many recorded answers the book holds."""
        return sum(len(v) for v in self.entries.values())

    def lookup(self, era: str, message: Mapping[str, Any]) -> RecordedAnswer | Miss:
        """The recorded answer for ``message`` asked in ``era``, or the :class:`Miss`."""
        key = request_key(era, message)
        if key is None:
            return Miss(INVALID_PARAMS, "mcp-tap serve: not a JSON-RPC request", {})
        answers = self.entries.get(key)
        if answers is None and key.method in METHOD_ONLY:
            answers = self.by_method.get((era, key.method))
            if answers is not None:
                key = RequestKey(era, key.method, None, "*")
        if answers is None:
            return self._miss(key)
        index = self._asked.get(key, 0)
        self._asked[key] = index + 1
        return answers[min(index, len(answers) - 1)]

    def _miss(self, key: RequestKey) -> Miss:
        same = sorted({k.label() for k in self.entries
                       if k.era == key.era and k.method == key.method})
        # The same tool (prompt, resource) asked otherwise says the most; else the method.
        target = f"{key.method} {key.name}"
        named = [label for label in same if key.name is not None
                 and (label == target or label.startswith(target + " "))]
        same = named or same
        asked = {"era": key.era, "method": key.method, "name": key.name,
                 "params": key.shown or key.params}
        if not same:
            eras = sorted({k.era for k in self.entries if k.method == key.method})
            where = f" (recorded in the {', '.join(eras)} era only)" if eras else ""
            return Miss(METHOD_NOT_FOUND, f"mcp-tap serve: the capture holds no {key.method} "
                        f"request{where}; asked: {key.label()}", {"asked": asked})
        shown = "; ".join(same[:5]) + (f"; and {len(same) - 5} more" if len(same) > 5 else "")
        return Miss(INVALID_PARAMS, f"mcp-tap serve: no recorded answer for {key.label()}; "
                    f"recorded: {shown}", {"asked": asked, "recorded": same[:20]})


def _rewrite_message(message: Any, request_id: Any, token: Any) -> Any:
    if not isinstance(message, dict):
        return message
    out = copy.deepcopy(message)
    if "method" not in out and ("result" in out or "error" in out):
        out["id"] = request_id
    elif (out.get("method") == "notifications/progress" and token is not None
          and isinstance(out.get("params"), dict)):
        out["params"]["progressToken"] = token
    return out


def progress_token(message: Mapping[str, Any]) -> Any:
    """The ``progressToken`` a request's ``_meta`` carries, if any."""
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta.get("progressToken") if isinstance(meta, dict) else None


def for_request(answer: RecordedAnswer, message: Mapping[str, Any]) -> RecordedAnswer:
    """``answer`` addressed to ``message``: its id, its progress token."""
    request_id, token = message.get("id"), progress_token(message)
    if answer.events is None:
        return RecordedAnswer(answer.status, answer.content_type,
                              _rewrite_message(answer.body, request_id, token), None,
                              answer.exchange_id)
    events = tuple(RecordedEvent(e.delay, _rewrite_message(e.data, request_id, token),
                                 e.event, e.id) for e in answer.events)
    return RecordedAnswer(answer.status, answer.content_type, None, events, answer.exchange_id)


def error_body(request_id: Any, miss: Miss) -> dict[str, Any]:
    """The JSON-RPC error response for a :class:`Miss`."""
    return {"jsonrpc": "2.0", "id": request_id,
            "error": {"code": miss.code, "message": miss.message, "data": miss.data}}


def miss_status(era: str, miss: Miss) -> int:
    """The HTTP status of a miss: 2026-07-28 maps -32601 to 404 and -32602 to 400."""
    if era != "modern":
        return 200
    return 404 if miss.code == METHOD_NOT_FOUND else 400


def json_bytes(value: Any) -> bytes:
    """``value`` as JSON: orjson, or for what it cannot write (an asker's id past 64 bits,
    nesting past its limit) the stdlib-compatible text of :mod:`mcp_tap.core.deepjson`."""
    try:
        return orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError
        return deepjson.dumps(value).encode()


def sse_bytes(event: RecordedEvent) -> bytes:
    """One event on the wire (``id``/``event`` lines when recorded, then ``data``)."""
    lines: list[str] = []
    if event.id is not None:
        lines.append(f"id: {event.id}")
    if event.event not in (None, "message"):
        lines.append(f"event: {event.event}")
    data = event.data if isinstance(event.data, str) else json_bytes(event.data).decode()
    lines.extend(f"data: {line}" for line in data.split("\n"))
    return ("\n".join(lines) + "\n\n").encode()
