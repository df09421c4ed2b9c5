"""Streaming tallies of the gate's record-driven sources: one record in at a time, merged.

Each tally takes records one by one (:meth:`add`), holds only counts, a bounded number of
example digests and the measurements the judgement needs, and merges with the tally of
another bundle (:meth:`merge`, in bundle order, so examples are the first ones seen). The
source builders in :mod:`mcp_tap.gate.decision` and :mod:`mcp_tap.gate.health` judge a
finished tally; :mod:`mcp_tap.gate.evaluation` feeds one tally per bundle, in parallel
processes when there are several bundles.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import compress
from operator import attrgetter
from typing import Any, Final

from mcp_tap.core.catalog import CATALOG
from mcp_tap.core.findings import Finding, Strength
from mcp_tap.core.hashing import digest
from mcp_tap.core.redaction import strip_url_secrets
from mcp_tap.core.rulecounts import RuleCount, merge_rule_counts
from mcp_tap.evidence.known import KnownJson
from mcp_tap.evidence.view import RecordView, evidence_digest, view_of
from mcp_tap.gate.hopchanges import HopChanges


def record_digest(record: Mapping[str, Any]) -> str:
    """Return a record's evidence digest: the writer's ``digest``, else recomputed the same way."""
    stored = record.get("digest")
    if isinstance(stored, str) and stored:
        return stored
    return digest({k: v for k, v in record.items() if k != "digest"})


def findings_of(record: Mapping[str, Any]) -> list[Finding]:
    """Return the findings a record carries (malformed entries are skipped)."""
    raw = record.get("findings")
    if not isinstance(raw, list) or not raw:
        return []
    return [_finding(f) for f in raw if isinstance(f, dict) and "rule" in f]


def _finding(data: dict[str, Any]) -> Finding:
    """A recorded finding; evidence from before findings carried a strength gets the rule's."""
    found = Finding.from_json(data)
    if "strength" not in data:
        found = replace(found, strength=rule_strength(found.rule))
    return found


_hop: Final = attrgetter("hop")
_record_findings: Final = attrgetter("findings")
_STR: Final = {str}
_ABSENT: Final = object()  # a finding without "strength" (not the same as "strength": null)
_SUMMARY_ENTRIES: Final = 4096
_summaries: dict[tuple[Any, ...], tuple[str, str, str, str]] = {}
_known_summaries: dict[KnownJson, tuple[tuple[str, str, str, str], ...]] = {}


def finding_summaries(record: Mapping[str, Any]) -> Sequence[tuple[str, str, str, str]]:
    """``(rule, boundary, strength, where)`` of each finding a record carries, as strings,
    exactly what :func:`findings_of` gives as :class:`Finding` objects."""
    return summaries_of(record.get("findings"))


def summaries_of(raw: Any) -> Sequence[tuple[str, str, str, str]]:
    """:func:`finding_summaries` of a record whose ``findings`` member is ``raw`` (the
    value, or the :class:`~mcp_tap.evidence.known.KnownJson` the gate's parse of a trusted
    line holds there).

    The tallies need only these four, and findings repeat (one rule at one place, over
    and over): each distinct finding is turned into a :class:`Finding` once and
    remembered (a bounded number of them), instead of once per record; the summaries of a
    KnownJson (the same findings, byte for byte) are remembered whole.
    """
    if type(raw) is KnownJson:
        known = _known_summaries.get(raw)
        if known is None:
            if len(_known_summaries) >= _SUMMARY_ENTRIES:
                _known_summaries.clear()
            known = _known_summaries[raw] = tuple(summaries_of(raw.value))
        return known
    if not raw or not isinstance(raw, list):
        return []
    out: list[tuple[str, str, str, str]] = []
    for data in raw:
        if not isinstance(data, dict) or "rule" not in data:
            continue
        try:
            key = (data["rule"], data.get("boundary", "response"),
                   data.get("strength", _ABSENT), data.get("where", ""))
            summary = _summaries.get(key)
        except TypeError:  # an unhashable value (a list): no memo for this one
            key, summary = None, None
        if summary is None:
            found = _finding(data)
            summary = (found.rule, str(found.boundary), str(found.strength), found.where)
            if key is not None:
                if len(_summaries) >= _SUMMARY_ENTRIES:
                    _summaries.clear()
                _summaries[key] = summary
        out.append(summary)
    return out


def rule_strength(rule_id: str) -> Strength:
    """The catalog strength of ``rule_id`` (``must`` for an id this build does not know)."""
    entry = CATALOG.get(rule_id)
    return entry.strength if entry is not None else Strength.MUST


@dataclass(slots=True)
class Tally:
    """One rule's (or rule and box's) count, boundaries, first examples, count per hop and
    the strengths its findings carried."""

    count: int = 0
    boundaries: set[str] = field(default_factory=set)
    examples: list[str] = field(default_factory=list)
    by_hop: dict[str, int] = field(default_factory=dict)
    strengths: set[str] = field(default_factory=set)

    def add(
        self, boundary: str, example: str, limit: int, hop: str = "", strength: str = "must"
    ) -> None:
        """Count one finding seen at ``boundary`` in the record whose digest is ``example``."""
        self.count += 1
        self.strengths.add(strength)
        self.boundaries.add(boundary)
        self.by_hop[hop] = self.by_hop.get(hop, 0) + 1
        if example not in self.examples and len(self.examples) < limit:
            self.examples.append(example)

    def merge(self, other: Tally, limit: int) -> None:
        """Fold in the tally of a later bundle."""
        self.count += other.count
        self.boundaries |= other.boundaries
        self.strengths |= other.strengths
        for hop, n in other.by_hop.items():
            self.by_hop[hop] = self.by_hop.get(hop, 0) + n
        for example in other.examples:
            if example not in self.examples and len(self.examples) < limit:
                self.examples.append(example)


def _merge_tallies(mine: dict[Any, Tally], theirs: Mapping[Any, Tally], limit: int) -> None:
    for key, tally in theirs.items():
        if key in mine:
            mine[key].merge(tally, limit)
        else:
            mine[key] = Tally(tally.count, set(tally.boundaries), list(tally.examples[:limit]),
                              dict(tally.by_hop), set(tally.strengths))


@dataclass(slots=True)
class ConformanceTally:
    """Exchanges, the hops they were seen at, and every non-``hop.*`` finding by rule."""

    examples: int = 3
    exchanges: int = 0
    hops: set[str] = field(default_factory=set)
    rules: dict[str, Tally] = field(default_factory=dict)

    def add(self, record: Mapping[str, Any]) -> None:
        """Count one record (only ``exchange`` records count)."""
        if record.get("kind") == "exchange":
            self.add_views((view_of(record),))

    def add_views(self, records: Sequence[RecordView]) -> None:
        """Count ``exchange`` records' views, in order (the caller checked their kind)."""
        self.exchanges += len(records)
        named = list(map(_hop, records))
        if set(map(type, named)) == _STR:  # the common case: every hop a string, in C
            self.hops.update(named)
        else:
            self.hops.update(hop if type(hop) is str else "" for hop in named)
        for record in compress(records, map(_record_findings, records)):
            raw_hop = record.hop
            hop = raw_hop if type(raw_hop) is str else ""
            example = ""
            for rule, boundary, strength, _where in summaries_of(record.findings):
                if rule.startswith("hop."):
                    continue
                if not example:
                    example = evidence_digest(record)
                tally = self.rules.get(rule)
                if tally is None:
                    tally = self.rules[rule] = Tally()
                tally.add(boundary, example, self.examples, hop, strength)

    def add_all(self, records: Iterable[Mapping[str, Any]]) -> ConformanceTally:
        """Count every record of ``records``; return self."""
        for record in records:
            self.add(record)
        return self

    def merge(self, other: ConformanceTally) -> None:
        """Fold in the tally of a later bundle."""
        self.exchanges += other.exchanges
        self.hops |= other.hops
        _merge_tallies(self.rules, other.rules, self.examples)


def _box(record: RecordView, where: str) -> str:
    """Name the box a hop finding blames, as precisely as the record allows."""
    box = record.box
    between = record.between
    if isinstance(box, str) and box:
        if "@" in box:  # an older tap named the box by its upstream URL, userinfo and all
            box = strip_url_secrets(box)
        # The proxy's hop-comparison record: the box, and the two hops around it.
        if isinstance(between, list) and len(between) == 2:
            return f"{box}, between hop {between[0]} and hop {between[1]}"
        return box
    if isinstance(between, str) and between:
        return between if between.startswith("between ") else f"between {between}"
    boxes = record.boxes
    if isinstance(boxes, list) and len(boxes) == 2 and all(isinstance(b, str) for b in boxes):
        return f"between {boxes[0]} and {boxes[1]}"
    hop = record.hop
    name = f"hop {hop}" if isinstance(hop, str) and hop else "hop"
    return f"{name} {where}".strip()


@dataclass(slots=True)
class HopTally:
    """Hop-comparison records, and every ``hop.*`` finding by (rule, box)."""

    examples: int = 3
    comparisons: int = 0
    boxes: dict[tuple[str, str], Tally] = field(default_factory=dict)
    changes: HopChanges = field(default_factory=HopChanges)

    def add(self, record: Mapping[str, Any]) -> None:
        """Count one record (hop-comparison and exchange records count)."""
        kind = record.get("kind")
        if kind == "hop-comparison" or (kind == "exchange" and record.get("findings")):
            self.add_views((view_of(record),))


    def add_views(self, records: Iterable[RecordView]) -> None:
        """Count records' views, in order (hop-comparison and exchange records count)."""
        for record in records:
            kind = record.kind
            if kind == "hop-comparison":
                self.comparisons += 1
                self.changes.add(_box(record, ""), record.boxKind, record.changes)
            elif kind != "exchange":
                continue
            if not record.findings:  # the common case: nothing to count
                continue
            for rule, boundary, _strength, where in summaries_of(record.findings):
                if not rule.startswith("hop."):
                    continue
                tally = self.boxes.setdefault((rule, _box(record, where)), Tally())
                tally.add(boundary, evidence_digest(record), self.examples)

    def add_all(self, records: Iterable[Mapping[str, Any]]) -> HopTally:
        """Count every record of ``records``; return self."""
        for record in records:
            self.add(record)
        return self

    def merge(self, other: HopTally) -> None:
        """Fold in the tally of a later bundle."""
        self.comparisons += other.comparisons
        _merge_tallies(self.boxes, other.boxes, self.examples)
        self.changes.merge(other.changes)


@dataclass(slots=True)
class SdkTally:
    """The SDK differential's outcome, folded from per-bundle reports: exact counts per rule.

    Satisfies :class:`mcp_tap.gate.decision.SdkReport`; it keeps the counts the gate judges
    (bounded by the rules found), not one entry per compared exchange.
    """

    examples: int = 3
    compared: int = 0
    rejected: int = 0
    by_rule: dict[str, RuleCount] = field(default_factory=dict)
    unavailable: str = ""

    def add_report(self, report: Any) -> None:
        """Fold in one :class:`mcp_tap.sdkdiff.SdkDiffReport`."""
        self.compared += report.compared
        self.rejected += report.rejected
        merge_rule_counts(self.by_rule, report.by_rule, self.examples)

    def merge(self, other: SdkTally) -> None:
        """Fold in the tally of a later bundle."""
        self.compared += other.compared
        self.rejected += other.rejected
        merge_rule_counts(self.by_rule, other.by_rule, self.examples)
        self.unavailable = self.unavailable or other.unavailable
