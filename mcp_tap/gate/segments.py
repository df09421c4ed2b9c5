"""Per-segment tallies: what the gate needs of a segment's records, sealed into its signed
manifest by the recording process, so the gate merges tallies instead of reading records.

:class:`SegmentTally` counts one segment's record lines as the gate's full read counts them
(the same parse, :func:`~mcp_tap.gate.fields.decode_view`, and the same tallies:
:class:`~mcp_tap.gate.health.WindowTally`, :class:`~mcp_tap.gate.tally.ConformanceTally`,
:class:`~mcp_tap.gate.tally.HopTally`, :class:`~mcp_tap.sdkdiff.SdkDiffTally`), and
:meth:`SegmentTally.seal` turns them into the manifest's ``tallies`` member. Whatever
depends on the gate's policy is kept in a form every policy can read:

* the health window per hop (``health.hop`` picks one, or takes all), failing samples by
  what failed (any ``[health.counting]``), latencies as :class:`~mcp_tap.gate.sketch.Measure`;
* findings by rule with their strengths, boundaries and count per hop, and the first
  :data:`EXAMPLES_KEPT` example digests (a policy asking for more is read from records);
* hop findings by (rule, box), and the hop-comparison count;
* the SDK differential with the default allowlist, and the SDK it ran with (a policy with
  ``[sdk] allow_fields``, or a gate with another SDK or other code of the differential,
  reads records instead);
* the segment's records, exchanges and gap records (``[seq, lost, reason]``).

:class:`MergedTallies` reads sealed tallies back (:meth:`MergedTallies.add`, in segment
order) and gives the gate's tallies for a policy. Format: ``{"version": TALLY_VERSION,
...}``; a reader that does not know a version reads the segment's records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import compress
from operator import attrgetter
from typing import Any, Final

import orjson

from mcp_tap.evidence.format import TALLY_VERSION
from mcp_tap.evidence.view import RecordView, view_of
from mcp_tap.gate.fields import decode_view
from mcp_tap.gate.health import HealthWindow, WindowTally, errors_of
from mcp_tap.gate.hopchanges import BoxChanges, HopChanges
from mcp_tap.gate.policy import ErrorCounting, Policy
from mcp_tap.gate.sketch import Measure
from mcp_tap.gate.tally import ConformanceTally, HopTally, SdkTally, Tally
from mcp_tap.sdkversion import differential_code, sealed_by_another

EXAMPLES_KEPT: Final = 10
"""Example digests a segment keeps per rule (and per hop box)."""

_kind: Final = attrgetter("kind")
_findings: Final = attrgetter("findings")
_hop: Final = attrgetter("hop")
_COUNTING: Final = ErrorCounting()  # any: the errors are read from WindowTally.failures
_MEASURES: Final = (("latency", "latencies"), ("firstEvent", "first_events"),
                    ("duration", "durations"))
_WINDOW_COUNTS: Final = ("samples", "jsonrpc", "http_5xx", "http_4xx", "tap", "unanswered",
                         "sse_streams", "sse_events")  # rejected: from the failures


class SegmentTally:
    """One segment's tallies, one record line (or view) at a time (see the module doc)."""

    def __init__(self) -> None:
        """Start empty."""
        self.records = 0
        self.exchanges = 0
        self.gaps: list[list[Any]] = []
        self.irregular = False  # a gap record the writer would not write: read records
        self.windows: dict[str | None, WindowTally] = {}
        self.conformance = ConformanceTally(EXAMPLES_KEPT)
        self.hop = HopTally(EXAMPLES_KEPT)
        self.sdk: Any = None  # an SdkDiffTally, made at the first exchange
        self.sdk_unavailable = ""

    def add_data(self, data: bytes) -> None:
        """Count the record lines of ``data`` (whole lines, each ending in a newline, as the
        evidence writer writes them)."""
        views: list[RecordView] = []
        view = memoryview(data)
        pos, size = 0, len(data)
        while pos < size:
            end = data.find(b"\n", pos)
            if end < 0:
                end = size
            line = view[pos:end]
            pos = end + 1
            decoded = decode_view(line)
            views.append(decoded if decoded is not None else view_of(orjson.loads(line)))
        self.add_views(views)

    def add_views(self, views: Sequence[RecordView]) -> None:
        """Count records' views, in order (as the gate's full read feeds its tallies)."""
        if not views:
            return
        self.records += len(views)
        kinds = list(map(_kind, views))
        every = kinds.count("exchange") == len(kinds)
        if not every and "gap" in kinds:
            for view in compress(views, [k == "gap" for k in kinds]):
                self._gap(view)
        picked = views if every else list(compress(views, [k == "exchange" for k in kinds]))
        self.exchanges += len(picked)
        if picked:
            groups: dict[str | None, list[RecordView]] = {}
            for view in picked:
                hop = view.hop
                groups.setdefault(hop if type(hop) is str else None, []).append(view)
            for hop, group in groups.items():
                window = self.windows.get(hop)
                if window is None:
                    window = self.windows[hop] = WindowTally(_COUNTING)
                window.add_views(group)
            self.conformance.add_views(picked)
            self._sdk(picked)
        self.hop.add_views(list(compress(views, map(_findings, views))) if every
                           else [v for v in views if v.findings or v.kind != "exchange"])

    def _gap(self, view: RecordView) -> None:
        lost, reason, seq = view.lost, view.reason, view.seq
        if type(lost) is not int or lost <= 0 or type(reason) is not str or type(seq) is not int:
            self.irregular = True
            return
        self.gaps.append([seq, lost, reason])

    def _sdk(self, picked: Sequence[RecordView]) -> None:
        if self.sdk is None:
            try:
                from mcp_tap.sdkdiff import DEFAULT_ALLOWLIST, SdkDiffTally
            except ImportError as exc:
                self.sdk, self.sdk_unavailable = False, str(exc)
                return
            self.sdk = SdkDiffTally(DEFAULT_ALLOWLIST)
        if self.sdk is not False:
            self.sdk.add_views(picked)

    def seal(self) -> dict[str, Any]:
        """The tallies as the segment's manifest holds them."""
        sealed: dict[str, Any] = {
            "version": TALLY_VERSION,
            "records": self.records,
            "exchanges": self.exchanges,
            "gaps": self.gaps,
            "health": [_window_json(hop, w) for hop, w in self.windows.items()],
            "conformance": {
                "exchanges": self.conformance.exchanges,
                "hops": sorted(self.conformance.hops),
                "rules": {rule: _tally_json(t) for rule, t in self.conformance.rules.items()},
            },
            "hop": {
                "comparisons": self.hop.comparisons,
                "boxes": [[rule, box, _tally_json(t)] for (rule, box), t in
                          self.hop.boxes.items()],
                "changes": {box: {"kind": c.kind, "pairs": c.pairs, "dropped": c.dropped,
                                  "rows": [[*row, n] for row, n in c.rows.items()]}
                            for box, c in self.hop.changes.boxes.items()},
            },
            "sdk": self._sdk_json(),
        }
        if self.irregular or any(c.dropped for c in self.hop.changes.boxes.values()):
            # A gap record the writer does not write, or a box's change rows past what a
            # tally keeps (merged, they could differ from one pass): the gate reads records.
            sealed["irregular"] = True
        return sealed

    def _sdk_json(self) -> dict[str, Any]:
        if self.sdk is False:
            return {"unavailable": self.sdk_unavailable}
        from mcp_tap.sdkdiff import sdk_provenance

        report = self.sdk.report() if self.sdk is not None else None
        return {
            "provenance": sdk_provenance(),
            "differential": differential_code(),
            "compared": report.compared if report else 0,
            "rejected": report.rejected if report else 0,
            "byRule": {rule: {"count": c.count, "exchanges": c.exchanges, "where": c.where,
                              "moreWhere": c.more_where}
                       for rule, c in (report.by_rule.items() if report else ())},
        }


def _tally_json(tally: Tally) -> dict[str, Any]:
    return {"count": tally.count, "boundaries": sorted(tally.boundaries),
            "examples": tally.examples, "byHop": tally.by_hop,
            "strengths": sorted(tally.strengths)}


def _window_json(hop: str | None, window: WindowTally) -> dict[str, Any]:
    data: dict[str, Any] = {"hop": hop}
    for name in _WINDOW_COUNTS:
        data[name] = getattr(window, name)
    data["maxEvents"] = window.max_events
    data["failures"] = [[mask, n] for mask, n in sorted(window.failures.items())]
    data["start"], data["end"] = window.start, window.end
    for key, attribute in _MEASURES:
        data[key] = Measure.of_counts(getattr(window, attribute)).to_json()
    return data


class TallyError(ValueError):
    """A ``tallies`` member this reader cannot use (then the segment's records are read)."""


def usable(tallies: object, policy: Policy) -> str:
    """Why ``tallies`` cannot stand for a segment's records under ``policy`` ("" if they
    can)."""
    if not isinstance(tallies, dict) or tallies.get("version") != TALLY_VERSION:
        return unknown_tallies(tallies)
    if tallies.get("irregular"):
        return "a gap record the writer does not write"
    if policy.conformance.examples > EXAMPLES_KEPT:
        return f"the policy asks for more than {EXAMPLES_KEPT} examples"
    return sdk_unusable(tallies, policy)


def unknown_tallies(tallies: object) -> str:
    """Why this reader cannot read ``tallies`` at all ("" if it is of its version)."""
    if not isinstance(tallies, dict):
        return "the manifest holds no tallies"
    if tallies.get("version") != TALLY_VERSION:
        return f"tallies of version {tallies.get('version')!r}"
    return ""


def sdk_unusable(tallies: Mapping[str, Any], policy: Policy) -> str:
    """Why the SDK differential of a segment's ``tallies`` (of a known version) cannot stand
    for running the SDK on its records under ``policy`` ("" if it can): the recording
    process ran the SDK this gate would run, on the same records, with the default
    allowlist."""
    if policy.sdk.allow_fields:
        return "the policy allows SDK fields the tallies did not"
    sdk = tallies.get("sdk")
    if not isinstance(sdk, dict):
        return "the SDK differential did not run"
    return sealed_by_another(sdk)


def sealed_sdk(tallies: object, policy: Policy) -> SdkTally | str:
    """The SDK differential a segment's ``tallies`` hold, as the gate counts it, or why they
    cannot stand for running the SDK on the segment's records under ``policy``."""
    why = unknown_tallies(tallies)
    if why:
        return why
    assert isinstance(tallies, dict)
    try:
        return sdk_unusable(tallies, policy) or sdk_part(tallies["sdk"])
    except TallyError as exc:
        return str(exc)


def sdk_part(data: Mapping[str, Any]) -> SdkTally:
    """The SDK differential of one segment's tallies (their ``sdk`` member), as the gate
    counts it (TallyError if malformed)."""
    from mcp_tap.core.rulecounts import RuleCount

    try:
        part = SdkTally(compared=_int(data["compared"]), rejected=_int(data["rejected"]))
        for rule, counted in data["byRule"].items():
            part.by_rule[_str(rule)] = RuleCount(
                count=_int(counted["count"]), exchanges=_int(counted["exchanges"]),
                where=[_str(w) for w in counted["where"]],
                more_where=bool(counted["moreWhere"]))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise TallyError(f"malformed tallies: {exc}") from exc
    return part


class MergedTallies:
    """Sealed segment tallies, merged in segment order, read for one policy."""

    def __init__(self, policy: Policy, candidate: bool) -> None:
        """Merge for ``policy``; a baseline (not ``candidate``) needs only the window."""
        self.policy = policy
        self.candidate = candidate
        self.window = WindowTally(policy.health.counting, policy.health.hop)
        self.conformance = ConformanceTally(policy.conformance.examples)
        self.hop = HopTally(policy.conformance.examples)
        self.sdk = SdkTally()
        self.measures = {key: Measure() for key, _ in _MEASURES}
        self.segments = 0

    def add(self, tallies: Mapping[str, Any]) -> None:
        """Fold in one segment's sealed tallies (TallyError if malformed)."""
        try:
            self._add(tallies)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise TallyError(f"malformed tallies: {exc}") from exc
        self.segments += 1

    def _add(self, tallies: Mapping[str, Any]) -> None:
        wanted = self.policy.health.hop
        for data in tallies["health"]:
            hop = data["hop"]
            if hop is not None:
                self.window.hops.add(_str(hop))
            if wanted is not None and hop != wanted:
                continue
            self._window(data)
        if not self.candidate:
            return
        conformance = tallies["conformance"]
        part = ConformanceTally(EXAMPLES_KEPT, _int(conformance["exchanges"]),
                                {_str(h) for h in conformance["hops"]},
                                {_str(r): _tally(t) for r, t in conformance["rules"].items()})
        self.conformance.merge(part)
        hop = tallies["hop"]
        boxes = HopTally(EXAMPLES_KEPT, _int(hop["comparisons"]),
                         {(_str(r), _str(b)): _tally(t) for r, b, t in hop["boxes"]},
                         _changes(hop["changes"]))
        self.hop.merge(boxes)
        self.sdk.merge(sdk_part(tallies["sdk"]))

    def _window(self, data: Mapping[str, Any]) -> None:
        window = self.window
        for name in _WINDOW_COUNTS:
            setattr(window, name, getattr(window, name) + _int(data[name]))
        window.max_events = max(window.max_events, _int(data["maxEvents"]))
        failures = window.failures
        for mask, count in data["failures"]:
            failures[_int(mask)] = failures.get(mask, 0) + _int(count)
        for bound, pick in (("start", min), ("end", max)):
            value = data[bound]
            if value is not None:
                value = float(value)
                current = getattr(window, bound)
                setattr(window, bound, value if current is None else pick(current, value))
        for key, _attribute in _MEASURES:
            self.measures[key].merge(Measure.from_json(data[key]))

    def add_counted(self, window: WindowTally, conformance: ConformanceTally | None,
                    hop: HopTally | None, sdk: SdkTally | None) -> None:
        """Fold in the gate's own tallies of records it read (of this policy's counting
        and hop; their latencies are exact)."""
        self._merge_window(window)
        for key, attribute in _MEASURES:
            self.measures[key].merge(Measure.of_counts(getattr(window, attribute), limit=None))
        if self.candidate and conformance is not None and hop is not None and sdk is not None:
            self.conformance.merge(conformance)
            self.hop.merge(hop)
            self.sdk.merge(sdk)

    def merge(self, other: MergedTallies) -> None:
        """Fold in the merged tallies of a later bundle (same policy)."""
        self._merge_window(other.window)
        for key, measure in other.measures.items():
            self.measures[key].merge(measure)
        if self.candidate and other.candidate:
            self.conformance.merge(other.conformance)
            self.hop.merge(other.hop)
            self.sdk.merge(other.sdk)
        self.segments += other.segments

    def _merge_window(self, window: WindowTally) -> None:
        self.window.merge(window)  # the counts, what failed, the hops, the first and last

    def health_window(self) -> HealthWindow:
        """The merged health window, errors counted as the policy counts them, percentiles
        from the :class:`~mcp_tap.gate.sketch.Measure` of each measurement (exact or
        sketched: :meth:`sketched`); InputError as :meth:`WindowTally.window`."""
        window = self.window
        window.errors, window.rejected = errors_of(window.failures,
                                                   self.policy.health.counting)
        measures = self.measures
        return window.window((measures["latency"], measures["firstEvent"],
                              measures["duration"]))

    def sketched(self) -> list[str]:
        """The measures whose percentiles are sketched (the others are exact)."""
        return [key for key, measure in self.measures.items() if not measure.exact]


def _changes(data: Mapping[str, Any]) -> HopChanges:
    changes = HopChanges()
    for box, counted in data.items():
        tally = changes.boxes[_str(box)] = BoxChanges(_str(counted["kind"]),
                                                      _int(counted["pairs"]))
        for *row, count in counted["rows"]:
            if len(row) != 5:
                raise ValueError("a change row of another shape")
            tally.rows[tuple(_str(r) for r in row)] = _int(count)  # type: ignore[index]
        tally.dropped = _int(counted["dropped"])
    return changes


def _tally(data: Mapping[str, Any]) -> Tally:
    return Tally(_int(data["count"]), {_str(b) for b in data["boundaries"]},
                 [_str(e) for e in data["examples"]],
                 {_str(h): _int(n) for h, n in data["byHop"].items()},
                 {_str(s) for s in data["strengths"]})


def _int(value: object) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(f"{value!r} is not a count")
    return value


def _str(value: object) -> str:
    if type(value) is not str:
        raise ValueError(f"{value!r} is not a string")
    return value


__all__ = ["EXAMPLES_KEPT", "TALLY_VERSION", "MergedTallies", "SegmentTally", "TallyError",
           "sdk_part", "sdk_unusable", "sealed_sdk", "unknown_tallies", "usable"]
