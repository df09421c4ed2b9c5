"""``diff_captures``: every drift between a baseline and a candidate capture, in one value.

Pure: it takes records (a stream such as :func:`mcp_tap.evidence.iter_records` gives, or
a list), so the command, the gate's ``--baseline`` drift source and tests call the same
function; memory is bounded (:mod:`mcp_tap.drift.stream`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from mcp_tap.drift.model import Area, CaptureDiff, CaptureSide, Severity
from mcp_tap.drift.stream import MAX_ANSWERS, MAX_REQUESTS, diff_streams
from mcp_tap.gate.hopchanges import box_lines


def describe_side(records: Sequence[Mapping[str, Any]], bundles: Sequence[str],
                  chain_heads: Sequence[str]) -> CaptureSide:
    """Summarise one side: its bundles, chain heads, exchange and request counts."""
    exchanges = [r for r in records if r.get("kind") == "exchange"]
    requests = sum(1 for r in exchanges if type(r.get("rpcId")) in (int, str))
    return CaptureSide(tuple(bundles), tuple(chain_heads), len(exchanges), requests)


def diff_captures(
    baseline: Iterable[Mapping[str, Any]],
    candidate: Iterable[Mapping[str, Any]],
    *,
    hop: str | None = None,
    baseline_side: CaptureSide | None = None,
    candidate_side: CaptureSide | None = None,
) -> CaptureDiff:
    """Compare two captures of the same service: inventory, behaviour, conformance, health.

    ``hop`` picks the hop whose exchanges are compared (needed when a capture holds
    several). Raises :class:`InputError` when a side has no exchange or the hop is ambiguous.
    Each side is read once, baseline first, in bounded memory
    (:func:`mcp_tap.drift.stream.diff_streams`): a stream of records is enough.
    ``baseline_side`` / ``candidate_side`` replace the sides' descriptions.
    """
    diff = diff_streams(baseline, candidate, hop=hop)
    return replace(diff, baseline=baseline_side or diff.baseline,
                   candidate=candidate_side or diff.candidate)


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
    for side in ("baseline", "candidate"):
        boxes = diff.hops.get(side)
        if boxes:
            yield f"between hops ({side}):"
            yield from box_lines(boxes)
    if diff.only_baseline:
        yield f"asked only in the baseline (not compared): {'; '.join(diff.only_baseline)}"
    if diff.only_candidate:
        yield f"asked only in the candidate (not compared): {'; '.join(diff.only_candidate)}"
    if diff.over_bound:
        yield (f"over bound: more than {MAX_REQUESTS:,} requests or {MAX_ANSWERS:,} distinct "
               "answers; the requests past the bound were not compared")
    counts = {s: sum(1 for c in diff.changes if c.severity is s) for s in Severity}
    summary = ", ".join(f"{counts[s]} {s}" for s in Severity)
    yield ("BREAKING: " if diff.breaking else "ok: ") + summary
