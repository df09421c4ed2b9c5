"""The gate's drift source: what changed since the ``--baseline`` capture, and what blocks.

:func:`capture_drift` compares the candidate bundles with the baseline bundles through
:func:`mcp_tap.drift.diff_captures` (the same comparison as ``mcp-tap diff``), and
:func:`drift_source` turns the diff into the gate's ``drift`` source: one ``gate.drift``
reason per change the policy's ``drift.block`` names (default: breaking inventory drift),
every other change reported in the summary. Without a baseline there is no drift source;
with one that cannot be compared (a side with no exchange, an ambiguous hop) the source
fails with ``gate.drift.empty``: a comparison the policy asked for and that did not happen
is no reason to promote.

The comparison streams both sides, baseline first, in bounded memory
(:mod:`mcp_tap.drift.stream`); past its bounds the summary says ``overBound``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from mcp_tap.errors import BundleFormatError, InputError
from mcp_tap.gate.decision import Reason, SourceResult
from mcp_tap.gate.policy import DRIFT_AREAS, DRIFT_SEVERITIES, DriftPolicy

if TYPE_CHECKING:  # mcp_tap.drift imports the gate's health window: no import cycle at run time
    from mcp_tap.drift import CaptureDiff

# Changes listed in the summary (the counts cover all of them).
_LISTED: Final = 50


def _exchanges(bundles: Sequence[Path]) -> Iterator[dict[str, Any]]:
    from mcp_tap.evidence import iter_records

    # Lenient: damaged evidence already fails the integrity source; drift compares what
    # can be read.
    for bundle in bundles:
        for record in iter_records(bundle, lenient=True):
            if record.get("kind") == "exchange":
                yield record


def capture_drift(candidates: Sequence[Path], baselines: Sequence[Path],
                  hop: str | None = None) -> CaptureDiff | str:
    """Diff the baseline bundles against the candidate bundles; a string says why it cannot."""
    try:
        # Imported here: mcp_tap.drift reads the gate's health window, so importing it at
        # module level would make `import mcp_tap.drift` circular.
        from mcp_tap.drift import diff_captures

        return diff_captures(_exchanges(baselines), _exchanges(candidates), hop=hop)
    except (InputError, BundleFormatError) as exc:
        return str(exc)


def drift_source(diff: CaptureDiff | str, policy: DriftPolicy, baselines: int) -> SourceResult:
    """The ``drift`` source for a diff (or the reason there is none) under ``policy``."""
    summary: dict[str, Any] = {"baselineBundles": baselines, "block": list(policy.block)}
    if isinstance(diff, str):
        return SourceResult("drift", (Reason("gate.drift.empty",
                                             f"no drift comparison: {diff}"),), summary)
    counts = {area: dict.fromkeys(DRIFT_SEVERITIES, 0) for area in DRIFT_AREAS}
    reasons: list[Reason] = []
    listed: list[dict[str, Any]] = []
    for change in diff.changes:
        area, severity = str(change.area), str(change.severity)
        counts[area][severity] += 1
        blocks = policy.blocks(area, severity)
        if blocks:
            reasons.append(Reason(
                "gate.drift", f"{area} drift ({severity}): {change.message}",
                details={"area": area, "severity": severity, "subject": change.subject,
                         "aspect": change.aspect, "examples": list(change.examples)}))
        if len(listed) < _LISTED:
            listed.append({"area": area, "severity": severity, "subject": change.subject,
                           "aspect": change.aspect, "message": change.message,
                           "blocks": blocks})
    summary.update(compared=diff.compared, overBound=diff.over_bound,
                   baselineExchanges=diff.baseline.exchanges,
                   changes=len(diff.changes), blocking=len(reasons), counts=counts,
                   listed=listed)
    return SourceResult("drift", tuple(reasons), summary)


__all__ = ["capture_drift", "drift_source"]
