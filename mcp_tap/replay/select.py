"""Reading and selecting recorded exchanges: which are replayed, and their recorded answer."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp_tap.core.eras import (
    HEADER_SESSION_ID,
)
from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.jsonrpc import classify
from mcp_tap.core.sse import SSEEvent
from mcp_tap.errors import InputError
from mcp_tap.evidence import answer_is_whole, iter_records
from mcp_tap.replay.model import (
    Answer,
    Case,
    as_dict,
    encode_json,
)
from mcp_tap.replay.report import Skipped


def _raw_text(value: Any) -> str | None:
    """The text of a body the recorder could not parse (stored as ``{"raw": text}``)."""
    if isinstance(value, dict) and set(value) == {"raw"} and isinstance(value["raw"], str):
        return value["raw"]
    return None


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
            text = data if isinstance(data, str) else encode_json(data).decode()
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
    body = b"" if value is None else encode_json(value)
    messages_json = () if value is None else (value,)
    return Answer(origin["status"], headers, body, messages_json, None,
                  size if isinstance(size, int) else len(body), truncated)


@dataclass(slots=True)
class Scan:
    """What the first pass over the records learns: the hops, and the outer exchanges.

    It holds names and ids, never records: the hops recorded at (a handful), and the
    exchange ids recorded at the outer hop of a two-hop pair, which are replayed at the
    inner hop instead (one short id per pair; none for a single-hop capture).
    """

    hops: set[str] = field(default_factory=set)
    outer: set[str] = field(default_factory=set)


def scan(records: Iterable[Mapping[str, Any]]) -> Scan:
    """Read ``records`` once, one at a time, for what selecting needs to know in advance."""
    found = Scan()
    for record in records:
        kind = record.get("kind")
        if kind == "exchange" and isinstance(record.get("hop"), str):
            found.hops.add(record["hop"])
        ids = record.get("exchangeIds")
        # The pair's comparison record may come after both exchanges: hence a first pass.
        if (kind == "hop-comparison" and isinstance(ids, list) and ids
                and isinstance(ids[0], str)):
            found.outer.add(ids[0])
    return found


def check_hop(found: Scan, hop: str) -> None:
    """Raise :class:`InputError` unless some exchange record was recorded at ``hop``."""
    if hop not in found.hops:
        known = ", ".join(sorted(found.hops)) if found.hops else "none"
        raise InputError(f"--hop {hop!r}: no exchange in the evidence was recorded at that hop "
                         f"(hops in the evidence: {known})")


def _case(record: Mapping[str, Any]) -> Case | Skipped:
    exchange_id = str(record.get("exchangeId") or "")
    method = record.get("method") if isinstance(record.get("method"), str) else None
    ingress = as_dict(record.get("ingress"))

    def skip(reason: str) -> Skipped:
        """The exchange skipped for ``reason``."""
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


def iter_cases(
    records: Iterable[Mapping[str, Any]], outer: Set[str], hop: str | None = None
) -> Iterator[Case | Skipped]:
    """Each exchange record of ``records`` as a case to replay or a skip, one at a time.

    Only ``kind: "exchange"`` records count. Of a two-hop capture only the inner hop's
    exchange of each pair is replayed (its origin view is the server's answer): ``outer``
    names the others (see :func:`scan`); ``hop`` keeps one hop's exchanges only.
    """
    for record in records:
        if record.get("kind") != "exchange":
            continue
        exchange_id = str(record.get("exchangeId") or "")
        method = record.get("method") if isinstance(record.get("method"), str) else None
        if hop is not None and record.get("hop") != hop:
            yield Skipped(exchange_id, method, f"recorded at hop {record.get('hop')}")
        elif hop is None and exchange_id in outer:
            yield Skipped(exchange_id, method,
                          "outer hop of a two-hop pair (replayed at the inner hop)")
        else:
            yield _case(record)


def select_cases(
    records: Iterable[Mapping[str, Any]], hop: str | None = None
) -> tuple[list[Case], list[Skipped]]:
    """Pick the exchanges to replay, in evidence order, and say why the others are skipped.

    The list form of :func:`iter_cases` (it holds every record; replay itself streams).
    """
    listed = list(records)
    cases: list[Case] = []
    skipped: list[Skipped] = []
    for item in iter_cases(listed, scan(listed).outer, hop):
        if isinstance(item, Skipped):
            skipped.append(item)
        else:
            cases.append(item)
    return cases, skipped


def bundle_records(bundles: Sequence[str | Path], *, lenient: bool = False
                   ) -> Callable[[], Iterator[dict[str, Any]]]:
    """A record source reading ``bundles`` in order with the streaming evidence reader.

    Each call starts over, one record at a time (:func:`mcp_tap.evidence.iter_records`).
    """
    paths = tuple(bundles)

    def read() -> Iterator[dict[str, Any]]:
        for path in paths:
            yield from iter_records(path, lenient=lenient)

    return read
