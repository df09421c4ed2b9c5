"""The ``hop-comparison`` record of a pair: its findings and every change, redacted.

The diff runs on the raw messages (a secret swapped for another is a change too); each value
shown is taken from the exchange records' redacted bodies at the same path when it is the
same there, else it is a secret (or holds one): a string or number is shown as the keyed
pseudonym session ids get, a container as redacted. Header values go through the header
redaction the records use, and a value it changes is shown as its keyed pseudonym.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mcp_tap.core.hashing import canonical_json
from mcp_tap.core.hopdiff import ABSENT, REQUEST, Change, resolve, tokens
from mcp_tap.core.hops import Judged
from mcp_tap.core.redaction import Redactor
from mcp_tap.proxy.correlate import PairResult, Pending


@dataclass(frozen=True, slots=True)
class RedactedSides:
    """What an exchange record holds of its messages: the redacted request and the redacted
    response messages (JSON body, or each SSE event's data), in the record's shapes."""

    request: Any = None
    responses: tuple[Any, ...] = ()


def redacted_sides(record: dict[str, Any]) -> RedactedSides:
    """The redacted messages of an exchange record."""
    ingress = record.get("ingress") or {}
    origin = record.get("origin") or {}
    if origin.get("sse"):
        responses = tuple(e.get("data") for e in origin["sse"] if isinstance(e, dict))
    elif origin.get("body") is not None:
        responses = (origin["body"],)
    else:
        responses = ()
    return RedactedSides(ingress.get("body"), responses)


def _final(messages: Sequence[Any]) -> Any:
    for m in reversed(messages):
        if isinstance(m, dict) and "method" not in m and ("result" in m or "error" in m):
            return m
    return ABSENT


class ChangeRenderer:
    """Renders the changes of one pair with one bundle's redactor."""

    def __init__(self, redactor: Redactor) -> None:
        """Values redacted by ``redactor`` (keyed pseudonyms for secrets)."""
        self.redactor = redactor

    def _secret(self, raw: Any, redacted: Any) -> Any:
        if isinstance(raw, dict | list):
            return redacted
        text = raw if isinstance(raw, str) else canonical_json(raw).decode()
        return self.redactor.pseudonym(text)

    def _body_value(self, raw: Any, document: Any, path: str) -> Any:
        if raw is ABSENT:
            return ABSENT
        redacted = resolve(document, path) if document is not None else ABSENT
        if redacted is ABSENT:
            # Not in the record's body (stored as text, or cut): redact it under its own key.
            parts = tokens(path)
            key = parts[-1] if parts else "value"
            redacted = self.redactor.walk_plain({key: raw}).value[key]
        if redacted == raw and (type(redacted) is bool) == (type(raw) is bool):
            return raw
        return self._secret(raw, redacted)

    def _header_value(self, name: str, raw: Any) -> Any:
        if raw is ABSENT:
            return ABSENT
        values = raw if isinstance(raw, list) else [raw]
        shown = []
        for value in values:
            (_, redacted), = self.redactor.redact_header_lists([(name, str(value))])
            shown.append(value if redacted == value else self.redactor.pseudonym(str(value)))
        return shown if isinstance(raw, list) else shown[0]

    def change_json(self, judged: Judged, docs: tuple[Any, Any, Any, Any]) -> dict[str, Any]:
        """One change for the record; ``docs``: the redacted request before and after, the
        final redacted response before and after."""
        c: Change = judged.change
        out: dict[str, Any] = {"class": c.cls, "direction": c.direction, "kind": c.kind,
                               "meaning": judged.disposition, "path": c.path}
        if c.path.startswith("header:"):
            name = c.path.removeprefix("header:")
            before, after = self._header_value(name, c.before), self._header_value(name, c.after)
        elif c.path.startswith(("http:", "stream:")):
            before, after = c.before, c.after
        else:
            ahead, behind = (docs[0], docs[1]) if c.direction == REQUEST else (docs[2], docs[3])
            before = self._body_value(c.before, ahead, c.path)
            after = self._body_value(c.after, behind, c.path)
        if before is not ABSENT:
            out["before"] = before
        if after is not ABSENT:
            out["after"] = after
        return out


def _docs(outer: Pending, inner: Pending) -> tuple[Any, Any, Any, Any]:
    o = outer.redacted if isinstance(outer.redacted, RedactedSides) else RedactedSides()
    i = inner.redacted if isinstance(inner.redacted, RedactedSides) else RedactedSides()
    final_in, final_out = _final(i.responses), _final(o.responses)
    return (o.request, i.request, None if final_in is ABSENT else final_in,
            None if final_out is ABSENT else final_out)


def comparison_record(
    pair: PairResult, trace_id: str, renderer: ChangeRenderer,
    findings: list[dict[str, Any]],
) -> dict[str, Any]:
    """The ``hop-comparison`` record of ``pair`` (``findings``: already redacted)."""
    comparison = pair.comparison
    record: dict[str, Any] = {
        "kind": "hop-comparison",
        "traceId": trace_id,
        "box": comparison.box,
        "boxKind": comparison.box_kind,
        "between": [pair.outer_hop, pair.inner_hop],
        "exchangeIds": [pair.outer_id, pair.inner_id],
        "pairedBy": pair.paired_by,
        "findings": findings,
        "changes": [],
    }
    if comparison.changes and pair.outer is not None and pair.inner is not None:
        docs = _docs(pair.outer, pair.inner)
        record["changes"] = [renderer.change_json(j, docs) for j in comparison.changes]
    if comparison.dropped:
        record["changesDropped"] = comparison.dropped
    return record


def pair_secrets(redactor: Redactor, pair: PairResult) -> list[str]:
    """What redaction removes from both views of ``pair`` (finding messages quote values)."""
    views = [p.view for p in (pair.outer, pair.inner) if p is not None]
    headers = [h.pairs for v in views
               for h in (v.request_headers, v.forwarded_headers, v.response_headers)
               if h is not None]
    messages = [m for v in views for m in (v.request_message, *v.response_messages)]
    return redactor.removed_values(headers, messages)
