"""What each box between two hops changed, over many hop-comparison records, in bounded
memory: one row per (meaning, class, direction, kind, path pattern) with its count.

A path pattern is the change's path with array indices as ``*`` (``/result/tools/*/title``),
so a tool list of a hundred entries is one row. Rows are ranked most important first: the
``must`` findings' changes, the ``should`` findings', the recorded ones (which the gate
blocks when the policy names their class), then the expected ones. The gate, ``diff`` and
``report`` show the same rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from mcp_tap.core.catalog import CATALOG

MAX_ROWS: Final = 500
"""Distinct rows kept per box; more are counted (``rowsDropped``)."""
SHOWN: Final = 20
"""Rows per box in a summary."""

Row = tuple[str, str, str, str, str]
"""(meaning, class, direction, kind, path pattern)."""


def pattern(path: str) -> str:
    """``path`` with its array indices as ``*``."""
    if not path.startswith("/"):
        return path
    return "/" + "/".join("*" if t.isdigit() else t for t in path[1:].split("/"))


def rank(meaning: str) -> int:
    """0 for a ``must`` rule, 1 for a ``should`` rule, 2 recorded, 3 expected."""
    rule = CATALOG.get(meaning)
    if rule is not None:
        return 0 if str(rule.strength) == "must" else 1
    return 2 if meaning == "recorded" else 3


@dataclass(slots=True)
class BoxChanges:
    """One box: its kind, the pairs compared, and its change rows."""

    kind: str = ""
    pairs: int = 0
    rows: dict[Row, int] = field(default_factory=dict)
    dropped: int = 0

    def add_row(self, row: Row, count: int = 1) -> None:
        """Count ``row`` (a new row past :data:`MAX_ROWS` is counted as dropped)."""
        if row in self.rows or len(self.rows) < MAX_ROWS:
            self.rows[row] = self.rows.get(row, 0) + count
        else:
            self.dropped += count

    def ranked(self) -> list[tuple[Row, int]]:
        """The rows, most important first, then the most frequent."""
        return sorted(self.rows.items(),
                      key=lambda item: (rank(item[0][0]), -item[1], item[0][2], item[0][4]))

    def to_json(self, shown: int = SHOWN) -> dict[str, Any]:
        """The box's summary with its first ``shown`` rows."""
        ranked = self.ranked()
        out: dict[str, Any] = {
            "kind": self.kind, "pairs": self.pairs,
            "changes": [{"meaning": m, "class": c, "direction": d, "kind": k, "path": p,
                         "count": n} for (m, c, d, k, p), n in ranked[:shown]],
        }
        if len(ranked) > shown:
            out["moreRows"] = len(ranked) - shown
        if self.dropped:
            out["rowsDropped"] = self.dropped
        return out


def box_name(box: Any, between: Any) -> str:
    """How the gate names the box of a hop-comparison record (``box``, ``between``)."""
    name = box if isinstance(box, str) and box else "box"
    if isinstance(between, list) and len(between) == 2:
        return f"{name}, between hop {between[0]} and hop {between[1]}"
    return name


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


@dataclass(slots=True)
class HopChanges:
    """Every box's rows, by box name (as the gate names boxes)."""

    boxes: dict[str, BoxChanges] = field(default_factory=dict)

    def add(self, box: str, kind: Any, changes: Any) -> None:
        """Count one hop-comparison record's ``changes`` for ``box`` (a record written
        before records had changes counts nowhere)."""
        if not isinstance(changes, list):
            return
        tally = self.boxes.setdefault(box, BoxChanges(_text(kind)))
        tally.pairs += 1
        for c in changes:
            if isinstance(c, Mapping):
                tally.add_row((_text(c.get("meaning")), _text(c.get("class")),
                               _text(c.get("direction")), _text(c.get("kind")),
                               pattern(_text(c.get("path")))))

    def merge(self, other: HopChanges) -> None:
        """Fold in another tally (a later bundle's)."""
        for box, theirs in other.boxes.items():
            mine = self.boxes.setdefault(box, BoxChanges(theirs.kind))
            mine.pairs += theirs.pairs
            mine.dropped += theirs.dropped
            for row, n in theirs.rows.items():
                mine.add_row(row, n)

    def blocked(self, classes: Iterable[str]) -> list[tuple[str, str, int, list[str]]]:
        """(box, class, count, path patterns) of the recorded or expected changes whose
        class ``classes`` names (findings block on their own)."""
        wanted = set(classes)
        out: dict[tuple[str, str], tuple[int, list[str]]] = {}
        for box, tally in sorted(self.boxes.items()):
            for (meaning, cls, _, _, path), n in tally.ranked():
                if cls in wanted and meaning in ("recorded", "expected"):
                    count, paths = out.get((box, cls), (0, []))
                    if path not in paths and len(paths) < 10:
                        paths.append(path)
                    out[(box, cls)] = (count + n, paths)
        return [(box, cls, n, paths) for (box, cls), (n, paths) in out.items()]

    def paths_of(self, box: str, rule: str, limit: int = 10) -> list[str]:
        """The path patterns of ``rule``'s changes in ``box``."""
        tally = self.boxes.get(box)
        if tally is None:
            return []
        paths = [row[4] for row, _ in tally.ranked() if row[0] == rule]
        return list(dict.fromkeys(paths))[:limit]

    def to_json(self, shown: int = SHOWN) -> dict[str, Any]:
        """Every box's summary."""
        return {box: tally.to_json(shown) for box, tally in sorted(self.boxes.items())}


def box_lines(boxes: object, indent: str = "  ") -> list[str]:
    """The changes per box of a hop summary (``changes``), most important first."""
    if not isinstance(boxes, dict):
        return []
    out: list[str] = []
    for box, summary in boxes.items():
        out.append(f"{indent}box {box} ({summary.get('kind') or 'http'}): "
                   f"{summary.get('pairs', 0)} pair(s)")
        for c in summary.get("changes", ()):
            out.append(f"{indent}  {c['meaning']:<34} {c['class']:<20} {c['direction']:<8} "
                       f"{c['kind']:<7} {c['path']} x{c['count']}")
        if summary.get("moreRows"):
            out.append(f"{indent}  ... {summary['moreRows']} more row(s)")
    return out
