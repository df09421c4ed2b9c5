"""Exact counts of findings per rule, with bounded examples: what a report over millions of
exchanges can hold in constant memory.

A :class:`RuleCount` counts every finding of one rule and the exchanges that carried one,
and keeps the first :data:`WHERES` distinct paths and the first ``limit`` example exchange
ids, in the order seen. Merging the counts of consecutive parts of a stream, in order, gives
what counting the whole stream at once gives (the first distinct items of the whole are
among the first distinct items of each part).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

WHERES: Final = 50
"""Distinct paths kept per rule; beyond them ``more_where`` says some were left out."""


@dataclass(slots=True)
class RuleCount:
    """One rule's findings: exact counts, the first distinct paths and example exchanges."""

    count: int = 0
    exchanges: int = 0
    where: list[str] = field(default_factory=list)
    more_where: bool = False
    examples: list[str] = field(default_factory=list)

    def add_where(self, where: str) -> None:
        """Remember one path a finding was at (the first :data:`WHERES` distinct ones)."""
        if where and where not in self.where:
            if len(self.where) < WHERES:
                self.where.append(where)
            else:
                self.more_where = True

    def add_example(self, example: str, limit: int) -> None:
        """Remember one exchange id as an example (the first ``limit`` distinct ones)."""
        if len(self.examples) < limit and example not in self.examples:
            self.examples.append(example)

    def merge(self, other: RuleCount, limit: int) -> None:
        """Fold in the counts of a later part of the stream."""
        self.count += other.count
        self.exchanges += other.exchanges
        for where in other.where:
            self.add_where(where)
        self.more_where = self.more_where or other.more_where
        for example in other.examples:
            self.add_example(example, limit)

    def to_json(self) -> dict[str, Any]:
        """The counts as a JSON object (paths sorted)."""
        data: dict[str, Any] = {"count": self.count, "exchanges": self.exchanges,
                                "where": sorted(self.where), "examples": list(self.examples)}
        if self.more_where:
            data["moreWhere"] = True
        return data


def merge_rule_counts(mine: dict[str, RuleCount], theirs: dict[str, RuleCount],
                      limit: int) -> None:
    """Fold ``theirs`` (a later part of the stream) into ``mine``, rule by rule."""
    for rule, counted in theirs.items():
        if rule not in mine:
            mine[rule] = RuleCount()
        mine[rule].merge(counted, limit)


__all__ = ["WHERES", "RuleCount", "merge_rule_counts"]
