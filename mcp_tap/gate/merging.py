"""The gate on signed evidence: sealed segments' tallies merged, only the other segments'
records read, so the cost grows with segments, not exchanges.

:class:`SealedFeed` sits beside the gate's record feed for one bundle: verify hands it each
segment whose signed manifest carries tallies (:mod:`mcp_tap.evidence.sealed` checks the
signature and the chain of manifests first); it takes them when this policy can read them
(:func:`~mcp_tap.gate.segments.usable`), folding the records read before it into the merge
first, so everything is merged in segment order and examples are the first ones, as one
pass over the records gives. :func:`undecided` says when a sketched percentile lies too
near a threshold for the decision to be certain: the gate then reads every record.

:class:`Reading` is what the gate says about how it read the evidence (the ``reading``
member of its output, outside the decision's evidence digest).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mcp_tap.gate.health import HealthWindow
from mcp_tap.gate.policy import HealthPolicy, Policy
from mcp_tap.gate.segments import MergedTallies, TallyError, usable
from mcp_tap.gate.sketch import RELATIVE_ACCURACY, certainly_above

_EPSILON = 1e-9  # evaluate_health's slack at a threshold


class SealedFeed:
    """One bundle's sealed segments' tallies, merged in order with the records read."""

    def __init__(self, policy: Policy, candidate: bool,
                 drain: Callable[[MergedTallies, list[Any]], None]) -> None:
        """``drain`` folds the records read so far (the gate's own tallies) into a merge,
        their gaps into a list, and starts them afresh."""
        self.policy = policy
        self.merged = MergedTallies(policy, candidate)
        self.drain = drain
        self.gaps: list[tuple[int, str]] = []
        self.unusable: dict[str, int] = {}  # why a sealed segment was read: how many

    def take(self, _name: str, tallies: Mapping[str, Any] | None) -> bool:
        """verify's sealed consumer: whether this segment's tallies stand for its records."""
        why = usable(tallies, self.policy)  # "the manifest holds no tallies" for None
        part = MergedTallies(self.policy, self.merged.candidate)
        if tallies is not None and not why:
            try:
                part.add(tallies)
            except TallyError as exc:
                why = str(exc)
        if why or tallies is None:
            self.unusable[why] = self.unusable.get(why, 0) + 1
            return False
        self.drain(self.merged, self.gaps)  # the records read before this segment first
        self.merged.merge(part)
        for _seq, lost, reason in tallies["gaps"]:
            self.gaps.append((lost if type(lost) is int and lost > 0 else 1,
                              reason if isinstance(reason, str) else "unknown"))
        return True

    @property
    def segments(self) -> int:
        """Segments taken from their manifests."""
        return self.merged.segments


@dataclass(slots=True)
class SdkRuns:
    """Where the SDK differential of the records read came from: segments whose signed
    tallies gave it, the exchanges the SDK ran on in the gate, and why other segments'
    tallies could not give it (a segment without a signed manifest gives no reason: it has
    no tallies)."""

    segments: int = 0
    exchanges: int = 0
    because: dict[str, int] = field(default_factory=dict)

    def refused(self, why: str) -> None:
        """Count one segment whose tallies could not give it, and why."""
        self.because[why] = self.because.get(why, 0) + 1

    def add(self, other: SdkRuns) -> None:
        """Fold in another bundle's."""
        self.segments += other.segments
        self.exchanges += other.exchanges
        for why, n in other.because.items():
            self.because[why] = self.because.get(why, 0) + n

    def to_json(self) -> dict[str, Any]:
        """As the reading states it."""
        data: dict[str, Any] = {"segmentsFromTallies": self.segments,
                                "exchangesRun": self.exchanges}
        if self.because:
            data["segmentsRunBecause"] = dict(sorted(self.because.items()))
        return data


@dataclass(slots=True)
class Reading:
    """How the gate read the evidence: segments from tallies, records read, and whether
    each measurement's percentiles are exact or sketched."""

    mode: str = "records"  # "tallies": signed manifests' tallies merged where they could be
    bundles: int = 0
    sealed_segments: int = 0
    records_read: int = 0
    read_because: dict[str, int] = field(default_factory=dict)
    sketched: list[str] = field(default_factory=list)
    fallback: str = ""  # why the tallies' decision was replaced by a full read
    sdk: SdkRuns = field(default_factory=SdkRuns)  # of the records read

    def to_json(self) -> dict[str, Any]:
        """The reading as the gate's output states it."""
        measures = ("latency", "firstEvent", "duration")
        data: dict[str, Any] = {
            "mode": self.mode,
            "cost": ("grows with segments: signed manifests' tallies merged"
                     if self.mode == "tallies" else "grows with exchanges: every record read"),
            "bundles": self.bundles,
            "segmentsFromTallies": self.sealed_segments,
            "recordsRead": self.records_read,
            "percentiles": {m: ("sketched" if m in self.sketched else "exact")
                            for m in measures},
        }
        if self.sketched:
            data["relativeError"] = RELATIVE_ACCURACY
        if self.read_because:
            data["segmentsReadBecause"] = dict(sorted(self.read_because.items()))
        data["sdk"] = self.sdk.to_json()
        if self.fallback:
            data["fullReadBecause"] = self.fallback
        return data

    def text(self) -> str:
        """One line for a person."""
        if self.mode != "tallies":
            line = f"read: every record ({self.records_read} records of {self.bundles} bundles)"
        else:
            line = (f"read: tallies of {self.sealed_segments} sealed segment(s) merged, "
                    f"{self.records_read} record(s) of other segments read; cost grows with "
                    "segments, not exchanges")
        exact = [m for m in ("latency", "firstEvent", "duration") if m not in self.sketched]
        line += f"; percentiles exact: {', '.join(exact) or 'none'}"
        if self.sketched:
            line += (f"; sketched (within {RELATIVE_ACCURACY:.0%}): "
                     f"{', '.join(self.sketched)}")
        if self.sdk.segments:
            line += (f"; SDK differential: the recording process's outcome from the signed "
                     f"tallies of {self.sdk.segments} segment(s), run here on "
                     f"{self.sdk.exchanges} exchange(s)")
        if self.fallback:
            line += f"; {self.fallback}"
        return line


def undecided(window: HealthWindow, policy: HealthPolicy, baseline: HealthWindow | None,
              sketched: list[str], baseline_sketched: list[str]) -> str:
    """Why a threshold comparison on a sketched percentile could go either way ("" when
    every one is certain): the decision must be the one the exact percentiles give."""
    name = policy.latency_percentile
    checks: list[tuple[str, float | None, float, bool]] = []
    if window.latency_ms is not None:
        checks.append(("latency", window.latency_ms.get(name), policy.max_latency_ms,
                       "latency" in sketched))
    if window.sse_first_event_ms is not None and policy.max_sse_first_event_ms is not None:
        checks.append(("firstEvent", window.sse_first_event_ms.get(name),
                       policy.max_sse_first_event_ms, "firstEvent" in sketched))
    for measure, value, threshold, is_sketch in checks:
        if is_sketch and value is not None and certainly_above(
                value, threshold, _EPSILON) is None:
            return (f"the sketched {name} {measure} {value} ms is within "
                    f"{RELATIVE_ACCURACY:.0%} of the threshold {threshold} ms")
    if (baseline is not None and baseline.latency_ms is not None
            and window.latency_ms is not None
            and ("latency" in sketched or "latency" in baseline_sketched)):
        from mcp_tap.gate.sketch import bounds

        cand = bounds(window.latency_ms.get(name)) if "latency" in sketched else (
            window.latency_ms.get(name),) * 2
        base = bounds(baseline.latency_ms.get(name)) if "latency" in baseline_sketched else (
            baseline.latency_ms.get(name),) * 2
        grow = 1.0 + policy.baseline.max_latency_increase
        if not (cand[0] > base[1] * grow + _EPSILON or cand[1] <= base[0] * grow + _EPSILON):
            return f"the sketched {name} latency is too near the baseline's to compare"
    return ""


__all__ = ["Reading", "SdkRuns", "SealedFeed", "undecided"]
