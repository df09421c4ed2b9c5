"""Integrity check of an evidence bundle: digests, the hash chain, the sequence, manifests,
signatures, gaps and how the bundle ended.

What is checked, on records exactly as stored (before any migration):

* every line parses and ends in a newline (``format``; a last line cut short: ``truncated``);
* ``digest`` is the record's digest (``digest``: a flipped byte). In format 2 that is the
  SHA-256 of the line's bytes before its closing ``digest`` member (the writer writes the
  canonical JSON there, so this equals :func:`~mcp_tap.evidence.format.record_digest`); a
  line in another layout is hashed as :func:`~mcp_tap.evidence.format.record_digest`;
* ``prev`` equals the digest of the record with ``seq - 1``, ``""`` for seq 0 (``chain``: a
  record replaced or re-written). Linking by ``seq`` rather than by file position means two
  swapped lines show up once, as reordered, instead of as three broken links;
* ``seq`` runs 0, 1, 2, ... over the whole bundle (``sequence``: missing numbers are deleted
  records, a smaller number after a larger one is reordering, a repeat is duplication);
* each segment's manifest matches its file (``manifest``: size, SHA-256, count, first/last
  seq, chain head, bundle id, and the link to the previous segment's chain head); a segment
  without a manifest is an error, except the last one of a bundle without a ``closed``
  summary, which is ``unclosed`` (a warning: the writer is running or did not shut down
  cleanly; an error when signed evidence from a trusted key is required, because then
  nothing proves the tail is complete);
* signatures (``signature``): a signed bundle's ``bundle.json`` and every manifest verify
  under the bundle's public key; with ``trusted_keys``, that key must be one of them and an
  unsigned bundle fails;
* the ``closed`` summary in ``bundle.json`` matches the last record and the segment count
  (trailing segments deleted), and the losses the writer counted all have gap records;
* every gap record is reported (``gap``) and an ``end: "abrupt"`` summary too (``abrupt``:
  the forwarder vanished with exchanges in flight): the evidence is incomplete, so it fails.

A bundle verified as ``open`` (its writer is known to be still writing it: a running tap's
own bundle, judged by its live ``/gate``) is judged on what is complete so far: while it has
no closing summary, the last segment's missing manifest and an unfinished last line of that
segment are what writing looks like, not problems, and that line is not read (the report's
``end`` is ``"open"``). Everything before it is checked as for any bundle; the open segment's
lines are covered by no signed manifest yet, so their numbers are always screened.

Records are read one at a time from a chunked read of each segment, so memory is flat in the
bundle's size. The sequence and chain are checked as the records stream past; only when a
record is out of order does a second pass keep every ``(seq, prev, digest)`` to name exactly
what was deleted, duplicated or reordered. :func:`verify_bundles` runs bundles in parallel
processes.

An unreadable directory or an unknown format is not a finding but an error
(:class:`~mcp_tap.errors.InputError` / :class:`~mcp_tap.errors.BundleFormatError`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

from mcp_tap.errors import BundleFormatError
from mcp_tap.evidence.closing import _text, check_closed
from mcp_tap.evidence.format import (
    DIGEST_MEMBER,
    DIGEST_TAIL,
    ED25519,
    END_CLOSED,
    END_OPEN,
    SIGNATURE,
    SIGNING,
    line_digest,
    manifest_name,
    record_digest,
    upgrade_manifest,
    upgrade_record,
)
from mcp_tap.evidence.head import DECODE_ERRORS, decode_head, valid_utf8
from mcp_tap.evidence.order import OrderPass, Stored, holes
from mcp_tap.evidence.problems import (
    LOSS_KINDS,
    Problem,
    ProblemKind,
    Severity,
    VerifyReport,
)
from mcp_tap.evidence.reader import (
    SegmentFiles,
    SegmentScan,
    bundle_path,
    check_manifest_format,
    list_segments,
    read_bundle_meta,
    read_manifest,
)
from mcp_tap.evidence.schema import line_problem, manifest_problem, record_problem
from mcp_tap.evidence.screen import ORJSON_DEPTH, nesting_bounded, suspect_lines
from mcp_tap.evidence.sealed import SealedConsumer, take_sealed
from mcp_tap.evidence.signing import signature_valid
from mcp_tap.evidence.view import is_schema_checked

__all__ = ["LOSS_KINDS", "Problem", "RecordConsumer", "VerifyReport", "verify_bundle",
           "verify_bundles"]

LineDecoder = Callable[[bytes | memoryview], Any]
"""A cheaper parse of a record line that verify may hand its consumer (``decode=``): an
object with the chain fields as attributes (``seq`` an int >= 0; ``prev``, ``digest`` and
``kind`` strings), or None for a line it cannot vouch for."""

RecordConsumer = Callable[[list[Any]], None]
"""What :func:`verify_bundle` hands the records to: a list of them in file order (each a
dict, or what ``decode`` made of its line), once per read of a segment (about a MiB of
lines), so the consumer's work runs in batches, not a call per record."""

PARSED_BATCH = 16
"""Records parsed fully (whole JSON trees, or what ``prepare`` keeps of them) handed to the
consumer at a time: a read's worth held at once would run out of the caches (measured:
half as slow again as handing each on at once)."""


def _record_digest(record: dict[str, Any]) -> str | None:
    """:func:`record_digest`, or None for a record canonical JSON cannot hold (too deep)."""
    try:
        return record_digest(record)
    except TypeError:  # orjson.JSONEncodeError: nesting past orjson's limit
        return None


def _manifest_size(files: SegmentFiles) -> int | None:
    """The segment size its manifest states, to bound the segment's read (None: no
    manifest, or none readable; check_manifest reports why)."""
    if files.manifest_path is None:
        return None
    try:
        size = read_manifest(files.manifest_path).get("bytes")
    except BundleFormatError:
        return None
    return size if type(size) is int and size >= 0 else None


def _public_key(signing: object) -> bytes | None:
    """The raw public key of a ``signing`` object of the writer's shape, else None."""
    if not isinstance(signing, dict) or signing.get("algorithm") != ED25519:
        return None
    key = signing.get("publicKey")
    if not isinstance(key, str) or len(key) != 64:
        return None
    try:
        return bytes.fromhex(key)
    except ValueError:
        return None


class _Verifier:
    """One pass over a bundle, collecting problems; see the module docstring for the rules."""

    def __init__(self, root: Path, bundle_format: int, meta: dict[str, Any],
                 trusted_keys: Sequence[bytes], require_signed: bool,
                 consumer: RecordConsumer | None = None, *, fast_keys: Sequence[bytes] = (),
                 decode: LineDecoder | None = None,
                 prepare: Callable[[dict[str, Any]], Any] | None = None,
                 open_bundle: bool = False, sealed: SealedConsumer | None = None) -> None:
        self.root = root
        self.sealed = sealed
        self.consumer = consumer
        self.batch: list[Any] = []  # the records of the read being checked, for the consumer
        self.prepare = prepare
        self.fast_keys = tuple(fast_keys)
        self.decode = decode
        self.format = bundle_format
        self.meta = meta
        self.closed_raw = meta.get("closed")
        closed = self.closed_raw
        self.closed: dict[str, Any] | None = closed if isinstance(closed, dict) else None
        # Still being written: a closing summary, once there, makes it a closed bundle.
        self.open = open_bundle and closed is None
        self.trusted = tuple(trusted_keys)
        self.strict = require_signed or bool(self.trusted)
        self.problems: list[Problem] = []
        self.order_problems: list[Problem] = []  # chain and sequence, from the streaming pass
        self.records = 0
        self.exchanges = 0
        self.segment_files = 0
        self.max_seq = -1
        self.head = ""  # digest of the first record with seq == max_seq
        self.seen_seq0 = False
        self.out_of_order = False
        self.gap_lost = 0
        self.previous_chain_head: str | None = ""  # None: unknown (previous manifest missing)
        self.bundle_id = meta.get("bundleId") if isinstance(meta.get("bundleId"), str) else None
        self.public_key: bytes | None = None
        self.signatures_ok = True
        # bundle.json verifies under a trusted key: see records_of for what that saves.
        self.trusted_signer = False
        # A segment's read stopped at a line past the record limit: records after it were
        # not read (check_closed does not report them missing).
        self.unread = False
        self.segment_count = 0  # records of the segment just read ...
        self.segment_last: Stored | None = None  # ... and its last one

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
        self.check_signing()
        segments = list_segments(self.root)
        self.check_holes(segments)
        for index, files in enumerate(segments):
            self.segment(files, is_last=index == len(segments) - 1)
        if self.out_of_order:
            self.problems += OrderPass(self.root, segments).run(self)
        else:
            self.problems += self.order_problems
        check_closed(self, segments)

    def check_holes(self, segments: list[SegmentFiles]) -> None:
        """Segment numbers with neither a file nor a manifest."""
        numbers = [files.number for files in segments]
        if numbers:
            for first, last in holes(numbers, 1):
                which = f"segment {first}" if first == last else f"segments {first}..{last}"
                self.problem("sequence", f"{which} missing: no segment file and no manifest")

    # -- signatures ----------------------------------------------------------------------

    def check_signing(self) -> None:
        signing = self.meta.get(SIGNING)
        if self.format >= 2 and self.bundle_id is None:
            self.problem("format", "bundle.json: bundleId must be a string")
        if signing is None:
            if self.strict:
                self.problem("signature", "bundle is unsigned, but signed evidence from a "
                                          "trusted key is required")
            return
        self.public_key = _public_key(signing)
        if self.public_key is None:
            self.problem("format", f"bundle.json: signing must be null or "
                                   f'{{"algorithm": "ed25519", "publicKey": <64 hex>}}, '
                                   f"got {signing!r}"[:300])
            self.signatures_ok = False
            return
        if not signature_valid(self.public_key, self.meta):
            self.signature_failed("bundle.json: signature does not verify (edited after "
                                  "signing, or signed by another key)")
        if self.trusted and self.public_key not in self.trusted:
            self.problem("signature", f"bundle is signed by key {self.public_key.hex()}, "
                                      "which is not trusted")
        elif self.signatures_ok and (self.public_key in self.trusted
                                     or self.public_key in self.fast_keys):
            self.trusted_signer = True

    def signature_failed(self, message: str, segment: str | None = None) -> None:
        self.signatures_ok = False
        self.problem("signature", message, segment=segment)

    # -- segments and records ------------------------------------------------------------

    def segment(self, files: SegmentFiles, *, is_last: bool) -> None:
        name = files.name
        if files.path is None:
            self.problem("manifest", f"{name} is missing but its manifest exists (segment deleted)",
                         segment=name)
            self.previous_chain_head = None
            return
        if self.sealed is not None and take_sealed(self, files, self.sealed):
            return  # its signed manifest's tallies stand for its records
        self.segment_files += 1
        path = files.path
        if files.manifest_path is None and self.open and not is_last:
            files = _late_manifest(files, path)
        scan = SegmentScan(path, max_bytes=_manifest_size(files), defer=True)
        # The segment an open bundle's writer is appending to: its unfinished line is skipped.
        writing = self.open and is_last and files.manifest_path is None
        first = self.records_of(name, scan, writing=writing,
                                covered=files.manifest_path is not None)
        if scan.stopped is not None and not self.stopped_at_bound(files, scan):
            return
        if writing:
            self.previous_chain_head = None
            return
        if files.manifest_path is None:
            if is_last and self.closed is None:
                self.problem(
                    "unclosed",
                    f"{name} has no manifest: unclosed (the writer is still running "
                    "or did not shut down cleanly)",
                    segment=name,
                    severity="error" if self.strict else "warning",
                )
            else:
                self.problem("manifest", f"{name} has no manifest", segment=name)
            self.previous_chain_head = None
            return
        self.check_manifest(files, name, scan, first)

    def stopped_at_bound(self, files: SegmentFiles, scan: SegmentScan) -> bool:
        """A segment's read stopped at its bound: one problem; nothing past it is read.
        Whether its manifest is still to be checked (True for a file larger than its
        manifest states: every byte the manifest covers was read, so its size, hash,
        count, chain head and signature are checked as usual; a file that only grew at its
        end gives this one problem).

        A line past the record limit stops the read early: the records after it are not
        read, neither deleted nor reordered, so the sequence goes on from the last record
        its manifest states (the next segment is not reported as a hole) and the closing
        summary's last record is not reported as missing (``unread``).
        """
        name = files.name
        assert scan.stopped is not None  # the caller checked
        message = str(scan.stopped).removeprefix(f"{scan.path}: ")
        if self.public_key is not None:
            message = message.replace("than its manifest", "than its signed manifest", 1)
        self.problem("manifest" if scan.grown else "format", f"{name}: {message}",
                     segment=name)
        if scan.grown and files.manifest_path is not None:
            return True
        self.unread = True
        self.previous_chain_head = None
        try:
            manifest = read_manifest(files.manifest_path) if files.manifest_path else {}
        except BundleFormatError:
            manifest = {}
        last, head = manifest.get("lastSeq"), manifest.get("chainHead")
        if type(last) is int and last >= self.max_seq and isinstance(head, str):
            self.max_seq, self.head = last, head
        return False

    # The hot loop of verify: one SHA-256 per record over the line as stored, and its
    # chain fields. Those come from mcp_tap.evidence.head.decode_head (the line's syntax
    # checked whole, nothing else built), or with a consumer from its ``decode``; a line
    # that narrow parse cannot vouch for, a gap record (its count is needed) and a format-1
    # line go through self.line, the full parse.
    #
    # The narrow parse skips members without reading their numbers' values, so it cannot
    # see a number too large for a double (1e400, which the full parse, the reader and
    # every consumer reject). For a bundle whose bundle.json verifies under a trusted key
    # that needs no check: the writer never writes such a number (orjson writes no
    # infinity), and the signed manifests cover every byte of every segment (file SHA-256,
    # chain head), so an altered line fails verification whatever the narrow parse made of
    # it. Every other bundle has each read screened (screen.suspect_lines: two translations
    # in C, not a parse), and a line that may hold such a number is parsed fully.
    #
    # Each span is whole lines of a read (a last one may lack its newline); a line is a
    # memoryview into the read, so it is neither copied nor split out: it is hashed,
    # decoded and handed on in place. The decoders skip over members without checking
    # their UTF-8; a span that is valid UTF-8 has only valid lines (a newline never sits
    # inside a character), so that check is made once per span (an ASCII read holds ASCII
    # spans). The verifier's running counts are kept in locals on the hot path, stored
    # back around every call that reads or changes them.
    def records_of(self, name: str, scan: SegmentScan, *, writing: bool = False,
                   covered: bool = True) -> Stored | None:
        """Check every line of one segment; return its first record (for the manifest).

        ``writing``: the segment an open bundle's writer is appending to, whose unfinished
        last line is not read; ``covered``: the segment has a manifest (which a trusted
        signature would cover).
        """
        first: Stored | None = None
        count = 0
        last_seq, last_prev, last_digest = -1, "", ""
        consumer = self.consumer
        fast, parse, decode, screen, deep = self._read_modes(covered)
        suspects: set[int] | None = None
        head_errors = DECODE_ERRORS
        seq: Any
        prev: Any
        digest: Any
        number = 0
        records, exchanges, max_seq, chain_head = (self.records, self.exchanges, self.max_seq,
                                                   self.head)
        batch = self.batch
        for block, pos, size in scan.spans():
            view = memoryview(block)
            find = block.find
            block_utf8 = ((block.isascii() or valid_utf8(view[pos:size]))
                          if fast or decode is not None else False)
            if screen:
                suspects = suspect_lines(block)
            while pos < size:
                end = find(b"\n", pos)
                complete = end >= 0
                if not complete:
                    if writing:  # the line the writer is still writing: not a record yet
                        break
                    end = size
                number += 1
                line = view[pos:end]
                start, pos = pos, end + 1
                record: Any = None
                kind: object = None
                # Whether the narrow parse may stand for the full one on this line.
                narrow = complete and (suspects is None or start not in suspects) and (
                    not deep or block.count(b"[", start, end) + block.count(b"{", start, end)
                    < ORJSON_DEPTH)
                if fast and narrow:
                    if block_utf8 or valid_utf8(line):
                        try:
                            head = decode_head(line)
                        except head_errors:
                            pass
                        else:
                            seq, prev, digest, kind = head.seq, head.prev, head.digest, head.kind
                elif parse and complete:
                    record, seq, prev, digest, kind = self._parsed(
                        line, decode if narrow else None, block_utf8)
                actual = (_stored_digest(block, view, start, end)
                          if kind is not None and kind != "gap" else None)
                if actual is None:
                    self.records, self.exchanges = records, exchanges
                    self.max_seq, self.head = max_seq, chain_head
                    stored = self.line(name, number, bytes(line), complete)
                    records, exchanges = self.records, self.exchanges
                    max_seq, chain_head = self.max_seq, self.head
                    if stored is None:
                        continue
                    seq, prev, digest = stored
                else:
                    records += 1
                    if actual != digest:
                        self.problem("digest", f"record seq {seq} in {name}: digest mismatch",
                                     segment=name, seq=seq)
                    if seq == max_seq + 1 and seq and prev == chain_head:
                        max_seq, chain_head = seq, digest  # the common case: in order
                    else:
                        self.max_seq, self.head = max_seq, chain_head
                        self.order(name, seq, prev, digest)
                        max_seq, chain_head = self.max_seq, self.head
                    if kind == "exchange":
                        exchanges += 1
                    if consumer is not None:
                        batch = self._hand_on(record, batch)
                if first is None:
                    first = Stored(seq, prev, digest, name)
                count += 1
                last_seq, last_prev, last_digest = seq, prev, digest
            if batch:  # the read's records, to the consumer in one call
                consumer(batch)  # type: ignore[misc]  # a batch is filled only for one
                batch = self.batch = []
        self.records, self.exchanges = records, exchanges
        self.max_seq, self.head = max_seq, chain_head
        self.segment_count = count
        self.segment_last = Stored(last_seq, last_prev, last_digest, name) if count else None
        return first

    def _read_modes(self, covered: bool) -> tuple[bool, bool, Any, bool, bool]:
        """How :meth:`records_of` reads a segment: ``(fast, parse, decode, screen, deep)``."""
        # A consumer needs its records parsed: its own narrow parse (decode), else the full
        # parse, which then checks each line.
        fast = self.format >= 2 and self.consumer is None
        # Format 2 lines hash as stored; the full parse is inlined for them, and anything
        # unusual (or format 1) is left to self.line, which reports it.
        parse = self.format >= 2 and not fast
        decode = (self.decode if self.decode is not None and self.consumer is not None
                  and self.format >= 2 else None)
        # Without a trusted signature each read is screened for numbers the narrow parse
        # cannot judge; lines past msgspec's nesting limit are sorted out per line where
        # that limit is not below orjson's.
        screen = (fast or decode is not None) and not (self.trusted_signer and covered)
        deep = screen and not nesting_bounded()
        return fast, parse, decode, screen, deep

    def _hand_on(self, record: Any, batch: list[Any]) -> list[Any]:
        """Add ``record`` to the consumer's batch; a full batch of fully parsed records goes
        to the consumer at once (the batch it returns is the one to go on filling)."""
        if type(record) is not dict:  # the consumer's own narrow parse: at the read's end
            batch.append(record)
            return batch
        batch.append(record if self.prepare is None else self.prepare(record))
        if len(batch) >= PARSED_BATCH:
            self.consumer(batch)  # type: ignore[misc]  # batches are filled only for one
            batch = self.batch = []
        return batch

    @staticmethod
    def _parsed(line: memoryview, decode: Any, block_utf8: bool) -> tuple[Any, Any, Any, Any, Any]:
        """A complete line parsed for a consumer: ``(record, seq, prev, digest, kind)``.

        With ``decode`` (the consumer's narrow parse, where it may stand for the full one)
        the record is the consumer's; else orjson's dict. ``kind`` is None where the line
        must go through :meth:`line`, which reports what is wrong with it."""
        record: Any = None
        seq: Any = None
        prev: Any = None
        digest: Any = None
        kind: Any = None
        if decode is not None:
            if block_utf8 or valid_utf8(line):
                record = decode(line)
                if (record is not None and not is_schema_checked(record)
                        and line_problem(line) is not None):
                    record = None  # the full parse (self.line) reports the value
                if record is not None:  # its chain fields are typed
                    seq, prev, digest, kind = record.seq, record.prev, record.digest, record.kind
            return record, seq, prev, digest, kind
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            return None, seq, prev, digest, kind
        if type(record) is dict:
            seq, prev = record.get("seq"), record.get("prev")
            digest, kind = record.get("digest"), record.get("kind")
            if (type(seq) is not int or seq < 0 or type(prev) is not str
                    or type(digest) is not str or type(kind) is not str
                    or record_problem(record) is not None):
                kind = None  # self.line reports it
        return record, seq, prev, digest, kind

    def line(self, name: str, number: int, line: bytes, complete: bool
             ) -> tuple[int, str, str] | None:
        """Check one line by parsing it whole; return its chain fields, None if it has none."""
        if not complete:
            self.problem(
                "truncated",
                f"{name}: truncated segment: line {number} ends without a newline",
                segment=name,
            )
        if not line:
            if complete:
                self.problem("format", f"{name} line {number}: empty line", segment=name)
            return None
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            if complete:
                self.problem("format", f"{name} line {number}: not valid JSON", segment=name)
            return None
        if type(record) is not dict:
            if complete:
                self.problem("format", f"{name} line {number}: not a JSON object", segment=name)
            return None
        seq, prev, digest = record.get("seq"), record.get("prev"), record.get("digest")
        kind = record.get("kind")
        if (type(seq) is not int or seq < 0 or type(prev) is not str
                or type(digest) is not str or type(kind) is not str):
            self.problem(
                "format",
                f"{name} line {number}: not an evidence record (needs int seq, "
                "string prev, digest and kind)",
                segment=name,
            )
            return None
        self.records += 1
        problem = record_problem(upgrade_record(record, self.format))
        if problem is not None:
            # Counted in the chain (its chain fields are sound), never handed on.
            self.problem("format", f"{name} line {number}: {problem}", segment=name, seq=seq)
        actual = line_digest(line) if self.format >= 2 else None
        if (actual if actual is not None else _record_digest(record)) != digest:
            self.problem("digest", f"record seq {seq} in {name}: digest mismatch",
                         segment=name, seq=seq)
        if seq == self.max_seq + 1 and seq and prev == self.head:
            self.max_seq, self.head = seq, digest
        else:
            self.order(name, seq, prev, digest)
        if kind == "exchange":
            self.exchanges += 1
        elif kind == "gap":
            self.gap(name, seq, record)
        if self.consumer is not None and complete and problem is None:
            self.batch.append(record if self.prepare is None else self.prepare(record))
        return seq, prev, digest

    def order(self, name: str, seq: int, prev: str, digest: str) -> None:
        """A record that is not the in-order successor of the one before (or is seq 0)."""
        if seq == self.max_seq + 1:
            if seq == 0 and prev != "":
                self.order_problems.append(Problem(
                    "chain", "error", f"record seq 0 in {name}: prev is not empty", name, 0))
            elif seq and prev != self.head:
                self.order_problems.append(Problem(
                    "chain", "error",
                    f"record seq {seq} in {name}: prev does not match the digest of record "
                    f"seq {seq - 1} (a record was altered or replaced)", name, seq))
            self.max_seq, self.head = seq, digest
            return
        self.out_of_order = True
        if seq > self.max_seq:
            self.max_seq, self.head = seq, digest

    def gap(self, name: str, seq: int, record: dict[str, Any]) -> None:
        """Count and report one gap record."""
        upgraded = upgrade_record(record, self.format)
        lost = upgraded.get("lost")
        count = lost if type(lost) is int and lost > 0 else 0
        self.gap_lost += count
        reason = _text(upgraded.get("reason", "unknown reason"))
        self.problem("gap", f"gap: {count} records lost ({reason}) at record seq {seq} in "
                            f"{name}", segment=name, seq=seq)

    def check_manifest(
        self, files: SegmentFiles, name: str, scan: SegmentScan, first: Stored | None
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
        if self.public_key is not None and not signature_valid(self.public_key, raw):
            self.signature_failed(f"{manifest_file}: signature does not verify (edited after "
                                  "signing, or signed by another key)", segment=name)
        elif self.public_key is None and SIGNATURE in raw and self.meta.get(SIGNING) is None:
            self.signature_failed(f"{manifest_file}: signed, but bundle.json names no "
                                  "signing key", segment=name)
        manifest = upgrade_manifest(raw, self.format)
        problem = manifest_problem(manifest)
        if problem is not None:
            self.problem("format", f"{manifest_file}: {problem}", segment=name)
        expected: dict[str, Any] = {
            "segment": files.number,
            "count": self.segment_count,
            "bytes": scan.size,
            "fileSha256": scan.sha256,
        }
        if self.format >= 2:
            expected["bundleId"] = self.bundle_id
        last = self.segment_last
        if first is not None and last is not None:
            expected.update(
                firstSeq=first.seq,
                lastSeq=last.seq,
                chainHead=last.digest,
                prevSegmentChainHead=first.prev,
            )
        else:
            expected.update(chainHead=manifest.get("prevSegmentChainHead"))
        for key, value in expected.items():
            if manifest.get(key) != value:
                shown = repr(manifest.get(key))[:100]
                self.problem(
                    "manifest",
                    f"{manifest_file}: {key} is {shown} but the segment gives {value!r}",
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

    def lost(self) -> int:
        closed = self.closed or {}
        stated = closed.get("lost")
        return max(self.gap_lost, stated if type(stated) is int and stated > 0 else 0)


def _late_manifest(files: SegmentFiles, segment: Path) -> SegmentFiles:
    """``files`` with the manifest an open bundle's writer wrote after the directory was
    listed (it closes a segment, manifest and all, before it opens the next one, so a
    segment before the last one always has its manifest by the time it is read)."""
    manifest = segment.with_name(manifest_name(files.number))
    return replace(files, manifest_path=manifest) if manifest.exists() else files


def _stored_digest(block: bytes, view: memoryview, start: int, end: int) -> str | None:
    """The format-2 digest of the line ``block[start:end]``, hashed in place: SHA-256 of
    the line up to its closing digest member, then ``}`` (what ``line_digest`` computes);
    None when the line does not end in a digest member."""
    tail = end - DIGEST_TAIL
    if tail > start and block.startswith(DIGEST_MEMBER, tail):
        hasher = hashlib.sha256(view[start:tail])
        hasher.update(b"}")
        return hasher.hexdigest()
    return None


def verify_bundle(
    path: str | Path,
    *,
    trusted_keys: Sequence[bytes] = (),
    require_signed: bool = False,
    consumer: RecordConsumer | None = None,
    fast_keys: Sequence[bytes] = (),
    decode: LineDecoder | None = None,
    prepare: Callable[[dict[str, Any]], Any] | None = None,
    open_bundle: bool = False,
    sealed: SealedConsumer | None = None,
) -> VerifyReport:
    """Check the bundle at ``path`` and return every problem found.

    ``open_bundle``: its writer is still writing it (a running tap's own bundle): without a
    closing summary it is judged on what is complete so far (see the module docstring), and
    the report's ``end`` is ``"open"``.

    ``consumer`` is handed each stored record, in file order, as it is checked (the record
    parsed from its line, as stored, before any migration): a list of them once per read of
    a segment (:data:`RecordConsumer`), so a caller that also reads the records (the gate)
    reads and parses the bundle once, and runs its work per batch. It sees every line that
    is an evidence record; when the report is ``ok`` that is every line of every segment,
    what :func:`~mcp_tap.evidence.iter_records` yields.

    ``trusted_keys`` (raw Ed25519 public keys): the bundle must be signed by one of them,
    which also makes an unclosed bundle an error. ``require_signed`` without keys fails
    unsigned bundles and accepts any key whose signatures verify. Raises
    :class:`InputError` if ``path`` is not a readable bundle and :class:`BundleFormatError`
    if its format version is unknown.

    ``fast_keys``: keys under which a valid signature lets verify take its fast path (as
    ``trusted_keys`` do) without making anything stricter; ``decode``: with a consumer, a
    cheaper parse of a record line to hand it on that fast path (see :data:`LineDecoder`:
    it must return None for any line it cannot vouch for, which is then parsed fully; a
    gap record always is). It is called only with lines whose UTF-8 verify has checked, as
    bytes or a memoryview. ``prepare``: with a consumer, what a record parsed fully (a dict)
    is handed on as, made as soon as it is parsed (a batch of whole parsed records would
    hold a read's worth of JSON trees at once). ``sealed``: a segment whose signed manifest
    carries tallies the caller takes is accounted for from the manifest, not read
    (:mod:`mcp_tap.evidence.sealed`); the consumer then sees only the other segments' records.
    """
    root = bundle_path(path)
    bundle_format, meta = read_bundle_meta(root)
    verifier = _Verifier(root, bundle_format, meta, trusted_keys, require_signed, consumer,
                         fast_keys=fast_keys, decode=decode, prepare=prepare,
                         open_bundle=open_bundle, sealed=sealed)
    verifier.run()
    return report_of(root, bundle_format, meta, verifier)


def report_of(root: Path, bundle_format: int, meta: dict[str, Any], verifier: _Verifier
              ) -> VerifyReport:
    """The report of a verifier that has run over the bundle at ``root`` (or, for sharded
    verification, of the checks merged into one: :mod:`mcp_tap.evidence.shards`)."""
    signer = (verifier.public_key.hex()
              if verifier.public_key is not None and verifier.signatures_ok else None)
    closed = verifier.closed or {}
    end = closed.get("end", END_CLOSED if verifier.closed is not None
                     else END_OPEN if verifier.open else None)
    inflight = closed.get("inflight")
    return VerifyReport(
        path=str(root),
        format=bundle_format,
        ok=not any(p.severity == "error" for p in verifier.problems),
        records=verifier.records,
        segments=verifier.segment_files,
        problems=verifier.problems,
        chain_head=verifier.head,
        bundle_id=verifier.bundle_id,
        signer=signer,
        signed=meta.get(SIGNING) is not None,
        lost=verifier.lost(),
        exchanges=verifier.exchanges,
        end=end if isinstance(end, str) else None,
        inflight=inflight if type(inflight) is int else 0,
    )


def _verify_one(args: tuple[Path, tuple[bytes, ...], bool]) -> VerifyReport:
    path, keys, require_signed = args
    return verify_bundle(path, trusted_keys=keys, require_signed=require_signed)


def verify_bundles(
    paths: Sequence[Path],
    *,
    trusted_keys: Sequence[bytes] = (),
    require_signed: bool = False,
    jobs: int | None = None,
) -> list[VerifyReport]:
    """:func:`verify_bundle` for every path, in order, one process per bundle in parallel.

    ``jobs`` defaults to the number of usable cores; one bundle (or ``jobs=1``) runs here.
    """
    work = [(bundle_path(p), tuple(trusted_keys), require_signed) for p in paths]
    workers = min(len(work), jobs or len(os.sched_getaffinity(0)))
    if workers <= 1:
        return [_verify_one(item) for item in work]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(_verify_one, work))
