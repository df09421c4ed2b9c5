"""Which pod's evidence drives a gate reason: a fleet's bundles name their pod and release.

A tap that ships its evidence writes ``"fleet": {"release": ..., "pod": ...}`` into its
signed ``bundle.json`` (:mod:`mcp_tap.proxy.recording_process`). When the gate decides over
many pods' bundles (a release prefix in the object store, or their directories), a reason
that only says "response.id: 60 finding(s)" leaves the operator to search every pod for
them; :func:`name_pods` adds to each conformance and hop reason the pods (and bundles)
whose records hold its findings, with their counts, and the integrity source names the pod
of each bundle it speaks of (:class:`~mcp_tap.gate.decision.BundleCheck`'s ``pod``).

Only what the bundle states is used, never a path: the decision evidence stays the same
wherever the bundles sit (a store, a copy on disk). A ``fleet`` member that is not two short
names of letters, digits, ``.``, ``_`` and ``-`` (what the shipper writes) names nothing,
so a hostile ``bundle.json`` cannot put text of its choosing into the decision.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from mcp_tap.gate.decision import Reason, SourceResult

_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_SHOWN: Final = 3  # pods named in a reason's message; details list every bundle


def fleet_of(meta: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """``(pod, release)`` a bundle's ``bundle.json`` states (``fleet``), each None when it
    states none (or something no shipper writes)."""
    fleet = meta.get("fleet")
    if not isinstance(fleet, dict):
        return None, None
    return _name(fleet.get("pod")), _name(fleet.get("release"))


def _name(value: object) -> str | None:
    return value if isinstance(value, str) and _NAME.fullmatch(value) else None


@dataclass(frozen=True, slots=True)
class PlacedCounts:
    """One candidate bundle of the decision: its index among the gate's bundles (as in
    the integrity source), the pod and release it names, its name (the last part of its
    path or key prefix) and its findings counted by rule and by ``(rule, box)``."""

    index: int
    pod: str | None
    release: str | None
    name: str
    rules: Mapping[str, int]
    boxes: Mapping[tuple[str, str], int]


def name_pods(result: SourceResult, bundles: Sequence[PlacedCounts]) -> SourceResult:
    """``result`` (the conformance or hop source) with each of its reasons about a finding
    rule naming the pods whose bundles hold those findings: ``details["pods"]`` lists each
    such bundle (pod, release, bundle index and name, count) and the message ends with the
    pods. Unchanged when no bundle names a pod."""
    if not any(b.pod is not None for b in bundles):
        return result
    reasons = tuple(_named(reason, bundles) for reason in result.reasons)
    return replace(result, reasons=reasons)


def _named(reason: Reason, bundles: Sequence[PlacedCounts]) -> Reason:
    if len(reason.findings) != 1 or "report" in reason.details:
        return reason  # a report's case, or a reason about no single rule
    rule = reason.findings[0]
    box = reason.details.get("box") if reason.rule == "gate.hop" else None
    placed: list[dict[str, Any]] = []
    for bundle in bundles:
        count = (bundle.rules.get(rule, 0) if box is None
                 else bundle.boxes.get((rule, str(box)), 0))
        if count and bundle.pod is not None:
            placed.append({"pod": bundle.pod, "release": bundle.release,
                           "bundle": bundle.index, "name": bundle.name, "count": count})
    if not placed:
        return reason
    pods: dict[tuple[str, str | None], list[dict[str, Any]]] = {}
    for entry in placed:
        pods.setdefault((entry["pod"], entry["release"]), []).append(entry)
    shown = [_pod_text(pod, entries) for (pod, _), entries in list(pods.items())[:_SHOWN]]
    text = ("in pod " if len(pods) == 1 else "in pods ") + "; ".join(shown)
    if len(pods) > _SHOWN:
        text += f"; and {len(pods) - _SHOWN} more"
    return replace(reason, message=f"{reason.message} {text}",
                   details={**reason.details, "pods": placed})


def _pod_text(pod: str, entries: list[dict[str, Any]]) -> str:
    """``"P of release R (40 in bundle 1 NAME, ...)"``."""
    release = entries[0]["release"]
    where = ", ".join(f"{e['count']} in bundle {e['bundle']} {e['name']}"
                      for e in entries[:_SHOWN])
    if len(entries) > _SHOWN:
        where += ", ..."
    return f"{pod}{' of release ' + release if release else ''} ({where})"


__all__ = ["PlacedCounts", "fleet_of", "name_pods"]
