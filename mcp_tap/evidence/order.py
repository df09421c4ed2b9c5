"""The exact sequence and chain check of ``verify``, for bundles whose records are out of
order: it keeps every record's ``(seq, prev, digest)`` to name what was deleted, duplicated
or reordered. An intact bundle never needs it (see :mod:`mcp_tap.evidence.verify`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from mcp_tap.errors import EvidenceLimitError
from mcp_tap.evidence.problems import Problem, ProblemKind
from mcp_tap.evidence.reader import SegmentFiles, SegmentScan

if TYPE_CHECKING:
    from mcp_tap.evidence.passes import VerifyState


@dataclass(frozen=True, slots=True)
class Stored:
    """What the order check keeps of one record: its seq, prev, digest and segment."""

    seq: int
    prev: str
    digest: str
    segment: str


def holes(numbers: list[int], start: int) -> list[tuple[int, int]]:
    """The inclusive ``(first, last)`` runs missing from sorted, distinct ``numbers`` counted
    from ``start``. Computed from the neighbours, never by listing the range: a forged seq of
    2**62 must cost nothing."""
    runs: list[tuple[int, int]] = []
    expected = start
    for number in numbers:
        if number > expected:
            runs.append((expected, number - 1))
        expected = max(expected, number + 1)
    return runs


def span(first: int, last: int) -> str:
    """``record seq N`` or ``records seq N..M`` for a message."""
    return f"record seq {first}" if first == last else f"records seq {first}..{last}"


class OrderPass:
    """The exact sequence and chain check, run only when records are out of order.

    It keeps every record's ``(seq, prev, digest)`` to say which records were deleted,
    duplicated or reordered; an intact bundle never needs it.
    """

    def __init__(self, root: Path, segments: list[SegmentFiles]) -> None:
        self.root = root
        self.segments = segments
        self.stored: list[Stored] = []  # in file order
        self.by_seq: dict[int, Stored] = {}  # first occurrence of each seq
        self.problems: list[Problem] = []

    def problem(self, kind: ProblemKind, message: str, *, segment: str | None = None,
                seq: int | None = None) -> None:
        self.problems.append(Problem(kind, "error", message, segment, seq))

    def run(self, verifier: VerifyState) -> list[Problem]:
        max_seq = -1
        for files in self.segments:
            if files.path is None:
                continue
            name = files.name
            for stored in _stored_records(files.path, name):
                where = f"record seq {stored.seq} in {name}"
                if stored.seq in self.by_seq:
                    self.problem("sequence", f"{where}: seq appears more than once "
                                             "(duplicated)", segment=name, seq=stored.seq)
                elif stored.seq < max_seq:
                    self.problem("sequence", f"{where}: comes after seq {max_seq} (records "
                                             "reordered)", segment=name, seq=stored.seq)
                max_seq = max(max_seq, stored.seq)
                self.stored.append(stored)
                self.by_seq.setdefault(stored.seq, stored)
        self.check_chain()
        self.check_sequence()
        if max_seq in self.by_seq:
            verifier.head = self.by_seq[max_seq].digest
        return self.problems

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
        for first, last in holes(sorted(self.by_seq), 0):
            after = self.by_seq[last + 1]
            self.problem(
                "sequence",
                f"{span(first, last)} missing before seq {last + 1} in {after.segment} "
                "(records deleted)",
                segment=after.segment,
                seq=first,
            )


def _stored_records(path: Path, name: str) -> Iterator[Stored]:
    try:
        yield from _scanned(path, name)
    except EvidenceLimitError:
        return  # the first pass reported where the read stopped


def _scanned(path: Path, name: str) -> Iterator[Stored]:
    for _number, line, _complete in SegmentScan(path).lines():
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(record, dict):
            continue
        seq, prev, digest = record.get("seq"), record.get("prev"), record.get("digest")
        if (type(seq) is int and seq >= 0 and isinstance(prev, str) and isinstance(digest, str)
                and isinstance(record.get("kind"), str)):
            yield Stored(seq, prev, digest, name)
