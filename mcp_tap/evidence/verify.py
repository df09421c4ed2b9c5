"""Integrity check of an evidence bundle: digests, the hash chain, the sequence, manifests, gaps.

What is checked, on records exactly as stored (before any migration):

* every line parses and ends in a newline (``format``; a last line cut short: ``truncated``);
* ``digest`` is :func:`~mcp_tap.evidence.format.record_digest` of the record (``digest``:
  a flipped byte);
* ``prev`` equals the digest of the record with ``seq - 1``, ``""`` for seq 0 (``chain``: a
  record replaced or re-written). Linking by ``seq`` rather than by file position means two
  swapped lines show up once, as reordered, instead of as three broken links;
* ``seq`` runs 0, 1, 2, ... over the whole bundle (``sequence``: missing numbers are deleted
  records, a smaller number after a larger one is reordering, a repeat is duplication);
* each segment's manifest matches its file (``manifest``: size, SHA-256, count, first/last
  seq, chain head, and the link to the previous segment's chain head); a segment without a
  manifest is an error, except the last one of a bundle without a ``closed`` summary, which
  is ``unclosed`` (a warning: the writer is running or did not shut down cleanly);
* the ``closed`` summary in ``bundle.json`` matches the last record and the segment count
  (trailing segments deleted), and the losses the writer counted all have gap records;
* every gap record is reported (``gap``): the evidence is incomplete, so it fails.

An unreadable directory or an unknown format is not a finding but an error
(:class:`~mcp_tap.errors.InputError` / :class:`~mcp_tap.errors.BundleFormatError`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from mcp_tap.core.hashing import sha256_hex
from mcp_tap.errors import BundleFormatError
from mcp_tap.evidence.format import record_digest, upgrade_manifest, upgrade_record
from mcp_tap.evidence.reader import (
    SegmentFiles,
    check_manifest_format,
    list_segments,
    parse_lines,
    read_bundle_meta,
    read_manifest,
)
from mcp_tap.files import read_file

ProblemKind = Literal[
    "digest", "chain", "sequence", "manifest", "truncated", "gap", "format", "unclosed"
]
Severity = Literal["error", "warning"]


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a bundle: what kind, how bad, where, and a one-line message."""

    kind: ProblemKind
    severity: Severity
    message: str
    segment: str | None = None
    seq: int | None = None

    def to_json(self) -> dict[str, Any]:
        """Return the problem as a plain JSON object."""
        return {
            "kind": self.kind,
            "severity": self.severity,
            "segment": self.segment,
            "seq": self.seq,
            "message": self.message,
        }


@dataclass(slots=True)
class VerifyReport:
    """The outcome of :func:`verify_bundle`; ``ok`` means no problem of severity error."""

    path: str
    format: int
    ok: bool
    records: int
    segments: int
    problems: list[Problem] = field(default_factory=list)

    @property
    def errors(self) -> list[Problem]:
        """The problems that make the bundle fail."""
        return [p for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        """The problems that do not make the bundle fail."""
        return [p for p in self.problems if p.severity == "warning"]

    def to_json(self) -> dict[str, Any]:
        """Return the report as a plain JSON object (the ``verify --json`` output)."""
        return {
            "path": self.path,
            "format": self.format,
            "ok": self.ok,
            "records": self.records,
            "segments": self.segments,
            "errors": len(self.errors),
            "warnings": len(self.warnings),
            "problems": [p.to_json() for p in self.problems],
        }


@dataclass(frozen=True, slots=True)
class _Stored:
    seq: int
    prev: str
    digest: str
    segment: str


def _ranges(numbers: list[int]) -> list[tuple[int, int]]:
    """Collapse sorted integers into inclusive ``(first, last)`` runs."""
    runs: list[tuple[int, int]] = []
    for number in numbers:
        if runs and runs[-1][1] == number - 1:
            runs[-1] = (runs[-1][0], number)
        else:
            runs.append((number, number))
    return runs


def _span(first: int, last: int) -> str:
    return f"record seq {first}" if first == last else f"records seq {first}..{last}"


class _Verifier:
    """One pass over a bundle, collecting problems; see the module docstring for the rules."""

    def __init__(self, root: Path, bundle_format: int, meta: dict[str, Any]) -> None:
        self.root = root
        self.format = bundle_format
        self.meta = meta
        self.closed_raw = meta.get("closed")
        closed = self.closed_raw
        self.closed: dict[str, Any] | None = closed if isinstance(closed, dict) else None
        self.problems: list[Problem] = []
        self.records = 0
        self.segment_files = 0
        self.stored: list[_Stored] = []  # in file order
        self.by_seq: dict[int, _Stored] = {}  # first occurrence of each seq
        self.max_seq = -1
        self.gap_lost = 0
        self.previous_chain_head: str | None = ""  # None: unknown (previous manifest missing)

    def problem(
        self,
        kind: ProblemKind,
        message: str,
        *,
        segment: str | None = None,
        seq: int | None = None,
        severity: Severity = "error",
    ) -> None:
        self.problems.append(Problem(kind, severity, message, segment, seq))

    def run(self) -> None:
        segments = list_segments(self.root)
        numbers = [files.number for files in segments]
        if numbers:
            missing = sorted(set(range(1, numbers[-1] + 1)) - set(numbers))
            for first, last in _ranges(missing):
                which = f"segment {first}" if first == last else f"segments {first}..{last}"
                self.problem("sequence", f"{which} missing: no segment file and no manifest")
        for index, files in enumerate(segments):
            self.segment(files, is_last=index == len(segments) - 1)
        self.check_chain()
        self.check_sequence()
        self.check_closed(segments)

    def segment(self, files: SegmentFiles, *, is_last: bool) -> None:
        name = files.name
        if files.path is None:
            self.problem("manifest", f"{name} is missing but its manifest exists (segment deleted)",
                         segment=name)
            self.previous_chain_head = None
            return
        self.segment_files += 1
        data = read_file(files.path, "evidence file")
        records = self.records_of(name, data)
        if files.manifest_path is None:
            if is_last and self.closed is None:
                self.problem(
                    "unclosed",
                    f"{name} has no manifest: unclosed (the writer is still running "
                    "or did not shut down cleanly)",
                    segment=name,
                    severity="warning",
                )
            else:
                self.problem("manifest", f"{name} has no manifest", segment=name)
            self.previous_chain_head = None
            return
        self.check_manifest(files, name, data, records)

    def records_of(self, name: str, data: bytes) -> list[_Stored]:
        records: list[_Stored] = []
        for line in parse_lines(data):
            if not line.complete:
                self.problem(
                    "truncated",
                    f"{name}: truncated segment: line {line.number} ends without a newline",
                    segment=name,
                )
            if line.record is None:
                if line.complete:
                    self.problem("format", f"{name} line {line.number}: {line.error}",
                                 segment=name)
                continue
            stored = self.record(name, line.number, line.record)
            if stored is not None:
                records.append(stored)
        return records

    def record(self, name: str, line: int, record: dict[str, Any]) -> _Stored | None:
        seq, prev, digest = record.get("seq"), record.get("prev"), record.get("digest")
        if (
            isinstance(seq, bool)
            or not isinstance(seq, int)
            or seq < 0
            or not isinstance(prev, str)
            or not isinstance(digest, str)
            or not isinstance(record.get("kind"), str)
        ):
            self.problem(
                "format",
                f"{name} line {line}: not an evidence record (needs int seq, "
                "string prev, digest and kind)",
                segment=name,
            )
            return None
        self.records += 1
        where = f"record seq {seq} in {name}"
        if record_digest(record) != digest:
            self.problem("digest", f"{where}: digest mismatch", segment=name, seq=seq)
        if seq in self.by_seq:
            self.problem("sequence", f"{where}: seq appears more than once (duplicated)",
                         segment=name, seq=seq)
        elif seq < self.max_seq:
            self.problem(
                "sequence",
                f"{where}: comes after seq {self.max_seq} (records reordered)",
                segment=name,
                seq=seq,
            )
        self.max_seq = max(self.max_seq, seq)
        stored = _Stored(seq, prev, digest, name)
        self.stored.append(stored)
        self.by_seq.setdefault(seq, stored)
        upgraded = upgrade_record(record, self.format)
        if upgraded.get("kind") == "gap":
            lost = upgraded.get("lost")
            count = lost if isinstance(lost, int) and not isinstance(lost, bool) else 0
            self.gap_lost += count
            reason = upgraded.get("reason", "unknown reason")
            self.problem("gap", f"gap: {count} records lost ({reason}) at {where}",
                         segment=name, seq=seq)
        return stored

    def check_manifest(
        self, files: SegmentFiles, name: str, data: bytes, records: list[_Stored]
    ) -> None:
        assert files.manifest_path is not None  # the caller checked; narrows the type
        manifest_file = files.manifest_path.name
        try:
            raw = read_manifest(files.manifest_path)
            check_manifest_format(raw, files.manifest_path, self.format)
        except BundleFormatError as exc:
            self.problem("format", str(exc), segment=name)
            self.previous_chain_head = None
            return
        manifest = upgrade_manifest(raw, self.format)
        expected: dict[str, Any] = {
            "segment": files.number,
            "count": len(records),
            "bytes": len(data),
            "fileSha256": sha256_hex(data),
        }
        if records:
            expected.update(
                firstSeq=records[0].seq,
                lastSeq=records[-1].seq,
                chainHead=records[-1].digest,
                prevSegmentChainHead=records[0].prev,
            )
        else:
            expected.update(chainHead=manifest.get("prevSegmentChainHead"))
        for key, value in expected.items():
            if manifest.get(key) != value:
                self.problem(
                    "manifest",
                    f"{manifest_file}: {key} is {manifest.get(key)!r} but the segment "
                    f"gives {value!r}",
                    segment=name,
                )
        link = manifest.get("prevSegmentChainHead")
        if self.previous_chain_head is not None and link != self.previous_chain_head:
            self.problem(
                "manifest",
                f"{manifest_file}: prevSegmentChainHead does not match the previous "
                "segment's chain head",
                segment=name,
            )
        head = manifest.get("chainHead")
        self.previous_chain_head = head if isinstance(head, str) else None

    def check_chain(self) -> None:
        for stored in self.stored:
            if stored.seq == 0:
                if stored.prev != "":
                    self.problem("chain", f"record seq 0 in {stored.segment}: prev is not empty",
                                 segment=stored.segment, seq=0)
                continue
            before = self.by_seq.get(stored.seq - 1)
            # A missing predecessor is reported once, as deleted records.
            if before is not None and stored.prev != before.digest:
                self.problem(
                    "chain",
                    f"record seq {stored.seq} in {stored.segment}: prev does not match the "
                    f"digest of record seq {stored.seq - 1} (a record was altered or replaced)",
                    segment=stored.segment,
                    seq=stored.seq,
                )

    def check_sequence(self) -> None:
        if not self.by_seq:
            return
        missing = sorted(set(range(self.max_seq + 1)) - self.by_seq.keys())
        for first, last in _ranges(missing):
            after = self.by_seq[last + 1]
            self.problem(
                "sequence",
                f"{_span(first, last)} missing before seq {last + 1} in {after.segment} "
                "(records deleted)",
                segment=after.segment,
                seq=first,
            )

    def check_closed(self, segments: list[SegmentFiles]) -> None:
        if self.closed_raw is not None and not self.closed_summary_well_typed():
            return
        if self.closed is None:
            if self.segment_files and all(files.manifest_path for files in segments):
                self.problem(
                    "unclosed",
                    "bundle.json has no closing summary: unclosed (the writer is still "
                    "running or did not shut down cleanly; later records may be missing)",
                    severity="warning",
                )
            return
        closed = self.closed
        last_seq = self.max_seq
        if isinstance(closed.get("lastSeq"), int) and closed["lastSeq"] > last_seq:
            self.problem(
                "sequence",
                f"{_span(last_seq + 1, closed['lastSeq'])} missing at the end: bundle.json "
                f"says the bundle closed at seq {closed['lastSeq']} (records deleted)",
                seq=last_seq + 1,
            )
        elif last_seq in self.by_seq and closed.get("chainHead") != self.by_seq[last_seq].digest:
            self.problem(
                "chain",
                f"bundle.json: closing chainHead does not match the digest of the last record "
                f"(seq {last_seq})",
                seq=last_seq,
            )
        count = closed.get("segments")
        if isinstance(count, int) and count > len(segments):
            self.problem(
                "sequence",
                f"bundle.json says the bundle has {count} segments but {len(segments)} "
                "remain (segments deleted)",
            )
        lost = closed.get("lost")
        if isinstance(lost, int) and lost > self.gap_lost:
            self.problem(
                "gap",
                f"gap: the writer counted {lost} lost records but gap records account "
                f"for {self.gap_lost}",
            )


    def closed_summary_well_typed(self) -> bool:
        """Whether ``closed`` has the writer's shape; a problem per field that does not.

        A summary whose fields have other types would otherwise be skipped field by field,
        and an edited ``"lost": "lots"`` would hide the count of lost records.
        """
        closed = self.closed_raw
        if not isinstance(closed, dict):
            self.problem("format", f"bundle.json: closing summary must be an object, "
                                   f"got {closed!r}")
            return False
        well_typed = True
        for key, low in (("segments", 0), ("records", 0), ("lastSeq", -1), ("lost", 0)):
            value = closed.get(key)
            if type(value) is not int or value < low:
                self.problem("format", f"bundle.json: closing {key} must be an integer "
                                       f">= {low}, got {value!r}")
                well_typed = False
        if not isinstance(closed.get("chainHead"), str):
            self.problem("format", f"bundle.json: closing chainHead must be a string, "
                                   f"got {closed.get('chainHead')!r}")
            well_typed = False
        return well_typed


def verify_bundle(path: str | Path) -> VerifyReport:
    """Check the bundle at ``path`` and return every problem found.

    Raises :class:`InputError` if ``path`` is not a readable bundle and
    :class:`BundleFormatError` if its format version is unknown.
    """
    root = Path(path)
    bundle_format, meta = read_bundle_meta(root)
    verifier = _Verifier(root, bundle_format, meta)
    verifier.run()
    return VerifyReport(
        path=str(root),
        format=bundle_format,
        ok=not any(p.severity == "error" for p in verifier.problems),
        records=verifier.records,
        segments=verifier.segment_files,
        problems=verifier.problems,
    )
