"""``diff_captures``: every drift between a baseline and a candidate capture, in one value.

Pure: it takes records (as :func:`mcp_tap.evidence.read_bundle` returns them), so the
command, the gate (a ``--baseline`` source, later) and tests call the same function.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from mcp_tap.drift.answers import asked, pick_hop
from mcp_tap.drift.behaviour import behaviour_changes
from mcp_tap.drift.conformance import conformance_changes, health_changes, rule_tally, window
from mcp_tap.drift.inventory import inventory, inventory_changes
from mcp_tap.drift.model import Area, CaptureDiff, CaptureSide, Change, Severity
from mcp_tap.errors import InputError

_ORDER = {Severity.BREAKING: 0, Severity.COMPATIBLE: 1, Severity.CHANGED: 2}


def describe_side(records: Sequence[Mapping[str, Any]], bundles: Sequence[str],
                  chain_heads: Sequence[str]) -> CaptureSide:
    """Summarise one side: its bundles, chain heads, exchange and request counts."""
    exchanges = [r for r in records if r.get("kind") == "exchange"]
    requests = sum(1 for r in exchanges if type(r.get("rpcId")) in (int, str))
    return CaptureSide(tuple(bundles), tuple(chain_heads), len(exchanges), requests)


def diff_captures(
    baseline: Sequence[Mapping[str, Any]],
    candidate: Sequence[Mapping[str, Any]],
    *,
    hop: str | None = None,
    baseline_side: CaptureSide | None = None,
    candidate_side: CaptureSide | None = None,
) -> CaptureDiff:
    """Compare two captures of the same service: inventory, behaviour, conformance, health.

    ``hop`` picks the hop whose exchanges are compared (needed when a capture holds
    several). Raises :class:`InputError` when a side has no exchange or the hop is ambiguous.
    """
    for side, records in (("baseline", baseline), ("candidate", candidate)):
        if not any(r.get("kind") == "exchange" for r in records):
            raise InputError(f"the {side} holds no exchange to compare")
    old_hop = pick_hop(baseline, hop, "baseline")
    new_hop = pick_hop(candidate, hop, "candidate")
    changes: list[Change] = inventory_changes(inventory(baseline, old_hop),
                                              inventory(candidate, new_hop))
    behaviour, compared, only_old, only_new = behaviour_changes(
        asked(baseline, old_hop), asked(candidate, new_hop))
    changes += behaviour
    changes += conformance_changes(rule_tally(baseline, old_hop), rule_tally(candidate, new_hop))
    old_window, new_window = window(baseline, old_hop), window(candidate, new_hop)
    changes += health_changes(old_window, new_window)
    area_order = list(Area)
    changes.sort(key=lambda c: (area_order.index(c.area), _ORDER[c.severity], c.subject))
    return CaptureDiff(
        baseline=baseline_side or describe_side(baseline, (), ()),
        candidate=candidate_side or describe_side(candidate, (), ()),
        changes=tuple(changes),
        compared=compared,
        only_baseline=tuple(only_old),
        only_candidate=tuple(only_new),
        health={"baseline": old_window.to_json(), "candidate": new_window.to_json()},
    )


def iter_lines(diff: CaptureDiff) -> Iterator[str]:
    """The human report: one section per area, one line per change, then a verdict line."""
    yield (f"baseline: {diff.baseline.exchanges} exchanges, {diff.baseline.requests} requests; "
           f"candidate: {diff.candidate.exchanges} exchanges, {diff.candidate.requests} "
           f"requests; {diff.compared} request(s) compared")
    for area in Area:
        found = diff.by_area(area)
        if not found:
            continue
        yield f"{area}:"
        for change in found:
            line = f"  {change.severity:<10} {change.message}"
            if change.examples:
                line += f"  [{', '.join(change.examples)}]"
            yield line
    if diff.only_baseline:
        yield f"asked only in the baseline (not compared): {'; '.join(diff.only_baseline)}"
    if diff.only_candidate:
        yield f"asked only in the candidate (not compared): {'; '.join(diff.only_candidate)}"
    counts = {s: sum(1 for c in diff.changes if c.severity is s) for s in Severity}
    summary = ", ".join(f"{counts[s]} {s}" for s in Severity)
    yield ("BREAKING: " if diff.breaking else "ok: ") + summary
