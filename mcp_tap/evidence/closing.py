"""verify's check of a bundle's closing summary (``closed`` in ``bundle.json``): moved out
of :mod:`mcp_tap.evidence.verify`, which runs it last, once every segment was read."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcp_tap.evidence.format import END_ABRUPT, END_CLOSED
from mcp_tap.evidence.order import span
from mcp_tap.evidence.reader import SegmentFiles

if TYPE_CHECKING:
    from mcp_tap.evidence.passes import VerifyState


def _text(value: object, limit: int = 200) -> str:
    """``value`` for a one-line message: a string as is, anything else as JSON-ish repr,
    control characters escaped, at most ``limit`` characters."""
    text = value if isinstance(value, str) else repr(value)
    text = text.encode("unicode_escape").decode("ascii") if not text.isprintable() else text
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_closed(v: VerifyState, segments: list[SegmentFiles]) -> None:
    """The closing summary against what the segments held (see the module docstring of
    :mod:`mcp_tap.evidence.verify`): deleted tails, a wrong chain head, unstated losses,
    an abrupt end."""
    if v.closed_raw is not None and not closed_summary_well_typed(v):
        return
    if v.closed is None:
        if v.open:  # still being written: no summary yet is what writing looks like
            return
        if v.segment_files and all(files.manifest_path for files in segments):
            v.problem(
                "unclosed",
                "bundle.json has no closing summary: unclosed (the writer is still "
                "running or did not shut down cleanly; later records may be missing; "
                f"the last record here is seq {v.max_seq})",
                severity="error" if v.strict else "warning",
            )
        elif v.strict and not v.segment_files:
            v.problem("unclosed", "bundle.json has no closing summary: unclosed "
                                     "(nothing proves the bundle is complete)")
        return
    closed = v.closed
    last_seq = v.max_seq
    if v.unread:
        pass  # a read stopped at a bound (its one problem): what follows it was not read
    elif isinstance(closed.get("lastSeq"), int) and closed["lastSeq"] > last_seq:
        v.problem(
            "sequence",
            f"{span(last_seq + 1, closed['lastSeq'])} missing at the end: bundle.json "
            f"says the bundle closed at seq {closed['lastSeq']} (records deleted)",
            seq=last_seq + 1,
        )
    elif last_seq >= 0 and closed.get("chainHead") != v.head:
        v.problem(
            "chain",
            f"bundle.json: closing chainHead does not match the digest of the last record "
            f"(seq {last_seq})",
            seq=last_seq,
        )
    count = closed.get("segments")
    if isinstance(count, int) and count > len(segments):
        v.problem(
            "sequence",
            f"bundle.json says the bundle has {count} segments but {len(segments)} "
            "remain (segments deleted)",
        )
    lost = closed.get("lost")
    if isinstance(lost, int) and lost > v.gap_lost:
        v.problem(
            "gap",
            f"gap: the writer counted {lost} lost records but gap records account "
            f"for {v.gap_lost}",
        )
    if closed.get("end") == END_ABRUPT:
        v.problem(
            "abrupt",
            f"bundle ended abruptly ({_text(closed.get('reason'))}): "
            f"{closed.get('inflight')} "
            "exchange(s) in flight were never recorded",
        )

def closed_summary_well_typed(v: VerifyState) -> bool:
    """Whether ``closed`` has the writer's shape; a problem per field that does not.

    A summary whose fields have other types would otherwise be skipped field by field,
    and an edited ``"lost": "lots"`` would hide the count of lost records.
    """
    closed = v.closed_raw
    if not isinstance(closed, dict):
        v.problem("format", f"bundle.json: closing summary must be an object, "
                               f"got {closed!r}"[:300])
        return False
    well_typed = True
    for key, low in (("segments", 0), ("records", 0), ("lastSeq", -1), ("lost", 0)):
        value = closed.get(key)
        if type(value) is not int or value < low:
            v.problem("format", f"bundle.json: closing {key} must be an integer "
                                   f">= {low}, got {value!r}"[:300])
            well_typed = False
    if not isinstance(closed.get("chainHead"), str):
        v.problem("format", f"bundle.json: closing chainHead must be a string, "
                               f"got {closed.get('chainHead')!r}"[:300])
        well_typed = False
    if v.format >= 2:
        end = closed.get("end")
        if end not in (END_CLOSED, END_ABRUPT):
            v.problem("format", f'bundle.json: closing end must be "closed" or '
                                   f'"abrupt", got {end!r}'[:300])
            well_typed = False
        elif end == END_ABRUPT and (type(closed.get("inflight")) is not int
                                    or closed["inflight"] < 0):
            v.problem("format", "bundle.json: an abrupt end needs an integer "
                                   f"inflight >= 0, got {closed.get('inflight')!r}"[:300])
            well_typed = False
    return well_typed


__all__ = ["check_closed", "closed_summary_well_typed"]
