"""The capture diff over two streams of records, in bounded memory.

:func:`diff_streams` reads the baseline's records once, then the candidate's once, keeping
only what the comparison needs: per side the hops seen, the counts, the inventory (the
service's listed items), the findings per rule and the gate's health window (counts of
latencies); for the behaviour comparison, the baseline's requests in order with their
answers, each distinct answer kept once (answers differing only in JSON-RPC ids are one:
the comparison never looks at ids), and per candidate request key how many times it was
asked. Each candidate request is compared with its baseline counterpart (the n-th
occurrence of its key on both sides) as it streams past.

That state grows with the number of distinct requests and answers, not with the capture,
and is bounded: at most :data:`MAX_ANSWERS` distinct baseline answers and
:data:`MAX_REQUESTS` baseline requests (and distinct candidate request keys) are kept.
Past a bound the diff goes on with what it kept and says so (``over_bound``, ``overBound``
in the JSON): requests beyond it are not compared and the "asked on one side only" lists
are partial; every count and the other comparisons stay exact.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from mcp_tap.core.hashing import canonical_json
from mcp_tap.drift.answers import Asked, RequestKey, asked_of, choose_hop
from mcp_tap.drift.behaviour import compare_answers
from mcp_tap.drift.conformance import (
    RuleTally,
    add_rules,
    conformance_changes,
    health_changes,
)
from mcp_tap.drift.inventory import Inventory, add_listing, inventory_changes
from mcp_tap.drift.model import Area, CaptureDiff, CaptureSide, Change, Severity
from mcp_tap.errors import InputError
from mcp_tap.gate.health import WindowTally
from mcp_tap.gate.hopchanges import HopChanges, box_name
from mcp_tap.gate.policy import ErrorCounting
from mcp_tap.replay import Answer

MAX_ANSWERS: Final = 20_000
"""Distinct baseline answers kept for the behaviour comparison."""
MAX_REQUESTS: Final = 100_000
"""Baseline requests (and distinct candidate request keys) kept for the pairing."""

_ORDER: Final = {Severity.BREAKING: 0, Severity.COMPATIBLE: 1, Severity.CHANGED: 2}
_EXAMPLES: Final = 3
_NO_ANSWER: Final = -1  # the baseline request has no answer recorded whole
_NOT_KEPT: Final = -2  # its answer was past MAX_ANSWERS: the pair is not compared


@dataclass(slots=True)
class SideTally:
    """One side's summary, one record at a time (``hop``: count only that hop's records;
    ``None``: all of them, which is what a single-hop capture needs)."""

    hop: str | None
    hops: set[str] = field(default_factory=set)
    exchanges: int = 0
    requests: int = 0
    inventory: Inventory = field(default_factory=dict)
    rules: RuleTally = field(default_factory=dict)
    window: WindowTally | None = None
    boxes: HopChanges = field(default_factory=HopChanges)  # what the boxes between hops changed

    def __post_init__(self) -> None:
        """The health window counts with the gate's default error counting."""
        self.window = WindowTally(ErrorCounting(), self.hop)

    def add(self, record: Mapping[str, Any]) -> Asked | None:
        """Count one record; return its request and answer when it is a request."""
        kind = record.get("kind")
        if kind == "exchange":
            self.exchanges += 1
            hop = record.get("hop")
            if isinstance(hop, str):
                self.hops.add(hop)
            if type(record.get("rpcId")) in (int, str):
                self.requests += 1
        elif kind == "hop-comparison":
            self.boxes.add(box_name(record.get("box"), record.get("between")),
                           record.get("boxKind"), record.get("changes"))
        add_listing(self.inventory, record, self.hop)
        add_rules(self.rules, record, self.hop)
        assert self.window is not None
        self.window.add(record)
        return asked_of(record, self.hop) if kind == "exchange" else None


def _fingerprint(answer: Answer) -> bytes | None:
    """What :func:`~mcp_tap.drift.behaviour.compare_answers` reads of an answer, as bytes:
    the status, SSE or not, an empty body or not, and the messages with their ids blanked
    (whether a message has an id matters, its value does not). None when not JSON."""
    messages = [({**m, "id": 0} if "id" in m else m) if isinstance(m, dict) else m
                for m in answer.messages]
    try:
        return canonical_json([answer.status, answer.is_sse, bool(answer.body), messages])
    except TypeError:  # nested past canonical JSON's limit
        return None


class Pairing:
    """The behaviour comparison, streaming: the baseline's requests in, then the candidate's."""

    def __init__(self, max_answers: int = MAX_ANSWERS, max_requests: int = MAX_REQUESTS) -> None:
        """Start with no request; the bounds are :data:`MAX_ANSWERS` / :data:`MAX_REQUESTS`."""
        self.max_answers = max_answers
        self.max_requests = max_requests
        self.baseline: dict[RequestKey, list[int]] = {}  # key -> answer index per occurrence
        self.answers: list[Answer] = []
        self.known: dict[bytes, int] = {}
        self.kept_requests = 0
        self.asked: dict[RequestKey, int] = {}  # candidate key -> occurrences so far
        self.merged: dict[tuple[str, str, str], Change] = {}
        self.examples: dict[tuple[str, str, str], list[str]] = {}
        self.compared = 0
        self.over_bound = False

    def add_baseline(self, item: Asked) -> None:
        """Remember one baseline request and (a reference to) its answer."""
        if self.kept_requests >= self.max_requests:
            self.over_bound = True
            return
        self.kept_requests += 1
        self.baseline.setdefault(item.key, []).append(self._answer_index(item.answer))

    def _answer_index(self, answer: Answer | None) -> int:
        if answer is None:
            return _NO_ANSWER
        fingerprint = _fingerprint(answer)
        if fingerprint is not None:
            index = self.known.get(fingerprint)
            if index is not None:
                return index
        if len(self.answers) >= self.max_answers:
            self.over_bound = True
            return _NOT_KEPT
        self.answers.append(answer)
        if fingerprint is not None:
            self.known[fingerprint] = len(self.answers) - 1
        return len(self.answers) - 1

    def add_candidate(self, item: Asked) -> None:
        """Compare one candidate request with its baseline counterpart, if both answered."""
        key = item.key
        seen = self.asked.get(key)
        if seen is None:
            if len(self.asked) >= self.max_requests:
                self.over_bound = True
                return
            seen = 0
        self.asked[key] = seen + 1
        olds = self.baseline.get(key)
        if olds is None or seen >= len(olds) or item.answer is None or olds[seen] < 0:
            return
        self.compared += 1
        for change in compare_answers(key, self.answers[olds[seen]], item.answer):
            ident = (change.subject, change.aspect, change.message)
            self.merged.setdefault(ident, change)
            examples = self.examples.setdefault(ident, [])
            if len(examples) < _EXAMPLES:
                examples.append(item.exchange_id)

    def changes(self) -> list[Change]:
        """The behaviour changes found, identical ones once with their first examples."""
        return [Change(c.area, c.severity, c.subject, c.aspect, c.message, c.baseline,
                       c.candidate, tuple(self.examples[ident]))
                for ident, c in self.merged.items()]

    def only_baseline(self) -> list[str]:
        """Labels of the requests asked in the baseline only."""
        return sorted({k.label() for k in self.baseline.keys() - self.asked.keys()})

    def only_candidate(self) -> list[str]:
        """Labels of the requests asked in the candidate only."""
        return sorted({k.label() for k in self.asked.keys() - self.baseline.keys()})


def diff_streams(
    baseline: Iterable[Mapping[str, Any]],
    candidate: Iterable[Mapping[str, Any]],
    *,
    hop: str | None = None,
    max_answers: int = MAX_ANSWERS,
    max_requests: int = MAX_REQUESTS,
) -> CaptureDiff:
    """Compare two captures read once each, baseline first (see the module docstring).

    Same answer as :func:`mcp_tap.drift.diff_captures` within the bounds. The sides'
    ``bundles`` and ``chain_heads`` are left empty for the caller to fill. Raises
    :class:`InputError` when a side has no exchange or the hop is ambiguous.
    """
    pairing = Pairing(max_answers, max_requests)
    old = SideTally(hop)
    for record in baseline:
        item = old.add(record)
        if item is not None:
            pairing.add_baseline(item)
    new = SideTally(hop)
    for record in candidate:
        item = new.add(record)
        if item is not None:
            pairing.add_candidate(item)
    for side, tally in (("baseline", old), ("candidate", new)):
        if not tally.exchanges:
            raise InputError(f"the {side} holds no exchange to compare")
    # With no hop named every record was counted: right when each side has one hop, and
    # an error (raised here, before any result is used) when a side has several.
    choose_hop(old.hops, hop, "baseline")
    choose_hop(new.hops, hop, "candidate")
    changes: list[Change] = inventory_changes(old.inventory, new.inventory)
    changes += pairing.changes()
    changes += conformance_changes(old.rules, new.rules)
    assert old.window is not None and new.window is not None
    old_window, new_window = old.window.window(), new.window.window()
    changes += health_changes(old_window, new_window)
    area_order = list(Area)
    changes.sort(key=lambda c: (area_order.index(c.area), _ORDER[c.severity], c.subject))
    return CaptureDiff(
        baseline=CaptureSide((), (), old.exchanges, old.requests),
        candidate=CaptureSide((), (), new.exchanges, new.requests),
        changes=tuple(changes),
        compared=pairing.compared,
        only_baseline=tuple(pairing.only_baseline()),
        only_candidate=tuple(pairing.only_candidate()),
        health={"baseline": old_window.to_json(), "candidate": new_window.to_json()},
        over_bound=pairing.over_bound,
        hops={side: tally.boxes.to_json() for side, tally in (("baseline", old),
                                                               ("candidate", new))
              if tally.boxes.boxes},
    )


__all__ = ["MAX_ANSWERS", "MAX_REQUESTS", "Pairing", "SideTally", "diff_streams"]
