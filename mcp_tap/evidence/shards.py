"""Sharded full verification: ``verify LOCATION --shard I/N`` checks a deterministic share of
the segments, ``verify --merge FILES`` combines the shares into the reports one unsharded
``verify`` gives.

The segments of every bundle under the location, in listing order (bundles as
:func:`~mcp_tap.evidence.reader.find_bundles` lists them, segments by number), are dealt
round-robin: segment ``k`` of that list belongs to shard ``k mod N``. A shard checks each of
its segments exactly as verify does (every record's digest, the chain and sequence inside
the segment, the file against its signed manifest), starting from the segment's own first
record, and writes down where the segment starts and ends (first ``seq`` and ``prev``,
last ``seq`` and digest, the manifest's chain links) with its problems and counts. The
shard that holds a bundle's first segment also checks ``bundle.json`` (format, signature,
missing segment numbers) and copies its closing summary.

The merge walks each bundle's segments in order and checks what crosses them, as verify's
single pass does: each segment's first record follows the last of the one before (``seq``
and ``prev``), each manifest links to the previous manifest's chain head, and the closing
summary matches the end of the chain (:func:`~mcp_tap.evidence.closing.check_closed`, the
same check). The verdict is the unsharded one; a segment whose records are out of order
inside it makes its shard verify that bundle whole, so the merge reports exactly what
verify does for it.

A shard's result is one JSON object (``"format": "mcp-tap.verify-shard"``); results from
different locations, trust settings or shard counts do not merge (InputError).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import orjson

from mcp_tap.errors import BundleFormatError, EvidenceLimitError, InputError
from mcp_tap.evidence.closing import check_closed
from mcp_tap.evidence.problems import Problem, VerifyReport
from mcp_tap.evidence.reader import (
    SegmentFiles,
    SegmentScan,
    bundle_path,
    find_bundles,
    list_segments,
    read_bundle_meta,
    read_manifest,
)
from mcp_tap.evidence.verify import _Verifier, report_of, verify_bundle

SHARD_FORMAT: Final = "mcp-tap.verify-shard"
SHARD_VERSION: Final = 1
MAX_SHARDS: Final = 10_000


def parse_shard(text: str) -> tuple[int, int]:
    """``"I/N"`` as ``(I, N)`` with ``0 <= I < N <= MAX_SHARDS`` (InputError otherwise)."""
    index, _, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        i, n = -1, 0
    if not 0 <= i < n <= MAX_SHARDS:
        raise InputError(f"--shard {text!r}: give I/N with 0 <= I < N <= {MAX_SHARDS} "
                         "(e.g. 0/4; a Kubernetes Indexed Job's JOB_COMPLETION_INDEX is I)")
    return i, n


def verify_shard(location: str, index: int, count: int, *,
                 trusted_keys: Sequence[bytes] = ()) -> dict[str, Any]:
    """Check shard ``index`` of ``count`` of the bundles at ``location`` (see the module
    docstring); the JSON result :func:`merge_shards` combines."""
    bundles: dict[str, Any] = {}
    position = 0
    for order, bundle in enumerate(find_bundles(location)):
        fmt, meta = read_bundle_meta(bundle)
        segments = list_segments(bundle)
        entry: dict[str, Any] = {"order": order}
        if position % count == index if segments else order % count == index:
            entry["bundle"] = _bundle_facts(bundle, fmt, meta, segments, trusted_keys)
        facts: list[dict[str, Any]] = []
        whole = False
        for number, files in enumerate(segments):
            if (position + number) % count == index and not whole:
                fact = _segment_facts(bundle, fmt, meta, files, number == len(segments) - 1,
                                      trusted_keys)
                whole = fact is None  # out of order inside: verify the bundle whole
                facts += [fact] if fact is not None else []
        position += len(segments)
        if whole:
            entry["whole"] = _report_json(verify_bundle(bundle, trusted_keys=trusted_keys))
            facts = []
        entry["segments"] = facts
        bundles[str(bundle)] = entry
    return {"format": SHARD_FORMAT, "version": SHARD_VERSION, "location": str(location),
            "shard": [index, count], "trusted": sorted(k.hex() for k in trusted_keys),
            "bundles": bundles}


def _verifier(bundle: Path, fmt: int, meta: dict[str, Any], trusted: Sequence[bytes]
              ) -> _Verifier:
    verifier = _Verifier(bundle, fmt, meta, trusted, False)
    verifier.check_signing()
    return verifier


def _bundle_facts(bundle: Path, fmt: int, meta: dict[str, Any], segments: list[SegmentFiles],
                  trusted: Sequence[bytes]) -> dict[str, Any]:
    verifier = _verifier(bundle, fmt, meta, trusted)
    verifier.check_holes(segments)
    return {
        "format": fmt,
        "meta": {key: meta.get(key) for key in ("bundleId", "signing", "closed")},
        "segments": [[f.number, f.path is not None, f.manifest_path is not None]
                     for f in segments],
        "problems": [p.to_json() for p in verifier.problems],
        "signaturesOk": verifier.signatures_ok,
    }


def _segment_facts(bundle: Path, fmt: int, meta: dict[str, Any], files: SegmentFiles,
                   is_last: bool, trusted: Sequence[bytes]) -> dict[str, Any] | None:
    """One segment checked on its own, from its first record; None when its records are out
    of order (only a pass over the whole bundle names what happened)."""
    verifier = _verifier(bundle, fmt, meta, trusted)
    verifier.problems.clear()  # bundle.json's problems are the bundle's, reported once
    first = _first_record(files.path) if files.path is not None else None
    if first is not None:
        verifier.max_seq, verifier.head = first[0] - 1, first[1] if first[0] else ""
    link = _manifest_link(files.manifest_path)
    prev_head = link[1] if link is not None else ""
    # The manifest's own link (the link across segments is the merge's to check).
    verifier.previous_chain_head = prev_head if isinstance(prev_head, str) else None
    verifier.segment(files, is_last=is_last)
    if verifier.out_of_order:
        return None
    return {
        "number": files.number, "first": list(first) if first else None,
        "count": verifier.segment_count, "records": verifier.records,
        "exchanges": verifier.exchanges, "gapLost": verifier.gap_lost,
        "maxSeq": verifier.max_seq, "head": verifier.head, "files": verifier.segment_files,
        "link": link[1] if link is not None else None,
        "chainHeadAfter": verifier.previous_chain_head,
        "signaturesOk": verifier.signatures_ok,
        # Its read stopped at a line past the record limit (what follows was not read).
        **({"unread": True} if verifier.unread else {}),
        "problems": [p.to_json() for p in verifier.problems + verifier.order_problems],
    }


def _first_record(path: Path | None) -> tuple[int, str] | None:
    """``(seq, prev)`` of a segment's first line, if it is an evidence record."""
    if path is None:
        return None
    try:
        for block, start, stop in SegmentScan(path).spans():
            end = block.find(b"\n", start, stop)
            record = orjson.loads(block[start: stop if end < 0 else end])
            break
        else:
            return None
    except (orjson.JSONDecodeError, EvidenceLimitError, InputError):
        return None
    if not isinstance(record, dict):
        return None
    seq, prev = record.get("seq"), record.get("prev")
    if type(seq) is not int or seq < 0 or type(prev) is not str:
        return None
    return seq, prev


def _manifest_link(path: Path | None) -> tuple[object, object] | None:
    """The manifest's ``(chainHead, prevSegmentChainHead)``, as verify links them."""
    if path is None:
        return None
    try:
        manifest = read_manifest(path)
    except (BundleFormatError, InputError):
        return None
    return manifest.get("chainHead"), manifest.get("prevSegmentChainHead")


def merge_shards(results: Sequence[Mapping[str, Any]], *, require_signed: bool = False
                 ) -> list[VerifyReport]:
    """Combine every shard's result of one location into one report per bundle, as an
    unsharded verify gives them (InputError when the results do not make a whole)."""
    try:
        return _merge(results, require_signed)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise InputError(f"a shard result is malformed ({type(exc).__name__}: {exc})"
                         [:300]) from exc


def _merge(results: Sequence[Mapping[str, Any]], require_signed: bool) -> list[VerifyReport]:
    if not results:
        raise InputError("--merge needs the results of every shard")
    first = results[0]
    count = _check_shards(results)
    trusted = tuple(bytes.fromhex(k) for k in first["trusted"])
    entries: dict[str, list[Mapping[str, Any]]] = {}
    for result in results:
        for key, entry in result["bundles"].items():
            entries.setdefault(key, []).append(entry)
    reports: list[tuple[int, VerifyReport]] = []
    for key, parts in entries.items():
        if len(parts) != count:
            raise InputError(f"{key}: listed by {len(parts)} of {count} shards (the location "
                             "changed between shards?)")
        whole = next((p["whole"] for p in parts if "whole" in p), None)
        report = _report_from(whole) if whole is not None else _merge_bundle(
            key, parts, trusted, require_signed)
        reports.append((parts[0]["order"], report))
    return [report for _, report in sorted(reports, key=lambda item: item[0])]


def _check_shards(results: Sequence[Mapping[str, Any]]) -> int:
    first = results[0]
    for result in results:
        if result.get("format") != SHARD_FORMAT or result.get("version") != SHARD_VERSION:
            raise InputError("a --merge input is not a verify --shard result of this version")
        if (result["location"], result["trusted"], result["shard"][1]) != (
                first["location"], first["trusted"], first["shard"][1]):
            raise InputError("shard results of different locations, keys or shard counts")
    count: int = first["shard"][1]
    indices = sorted(result["shard"][0] for result in results)
    if indices != list(range(count)):
        missing = sorted(set(range(count)) - set(indices))
        raise InputError(f"shards {missing or 'twice'} missing from --merge; every shard of "
                         f"{count} is needed once")
    return count


def _merge_bundle(key: str, parts: Sequence[Mapping[str, Any]], trusted: tuple[bytes, ...],
                  require_signed: bool) -> VerifyReport:
    owners = [p["bundle"] for p in parts if "bundle" in p]
    if len(owners) != 1:
        raise InputError(f"{key}: its bundle.json was checked by {len(owners)} shards")
    facts = owners[0]
    meta = dict(facts["meta"])
    fmt = facts["format"]
    verifier = _Verifier(bundle_path(key), fmt, meta, trusted, require_signed)
    verifier.problems = [_problem(p) for p in facts["problems"]]
    signing = meta.get("signing")
    verifier.public_key = bytes.fromhex(signing["publicKey"]) if (
        isinstance(signing, dict) and facts["signaturesOk"]
        and isinstance(signing.get("publicKey"), str)) else None
    verifier.signatures_ok = facts["signaturesOk"]
    segments = {s["number"]: s for p in parts for s in p["segments"]}
    place = bundle_path(key)
    listed = [SegmentFiles(n, place if has_file else None, place if has_manifest else None)
              for n, has_file, has_manifest in facts["segments"]]
    for files in listed:
        segment = segments.get(files.number)
        if segment is None:
            raise InputError(f"{key}: segment {files.number} is in no shard's result")
        _cross(verifier, files.name, segment)
    check_closed(verifier, listed)
    return report_of(bundle_path(key), fmt, meta, verifier)


def _cross(v: _Verifier, name: str, segment: Mapping[str, Any]) -> None:
    """Check what crosses into ``segment`` from the one before, then take its counts."""
    first = segment["first"]
    if first is not None and segment["count"]:
        seq, prev = first
        if seq != v.max_seq + 1:
            v.problem("sequence", f"{name}: its first record is seq {seq}, but the records "
                      f"before it end at seq {v.max_seq} (records deleted, duplicated or "
                      "reordered)", segment=name, seq=seq)
        elif seq and prev != v.head:
            v.problem("chain", f"record seq {seq} in {name}: prev does not match the digest "
                      f"of record seq {seq - 1} (a record was altered or replaced)",
                      segment=name, seq=seq)
    link = segment["link"]
    if link is not None and v.previous_chain_head is not None and link != v.previous_chain_head:
        v.problem("manifest", f"{name.replace('.jsonl', '.manifest.json')}: "
                  "prevSegmentChainHead does not match the previous segment's chain head",
                  segment=name)
    v.previous_chain_head = segment["chainHeadAfter"]
    v.records += segment["records"]
    v.exchanges += segment["exchanges"]
    v.gap_lost += segment["gapLost"]
    v.segment_files += segment["files"]
    unread = segment.get("unread") is True
    v.unread = v.unread or unread
    if segment["count"] or unread:  # unread: the sequence goes on from its manifest
        v.max_seq, v.head = segment["maxSeq"], segment["head"]
    if not segment["signaturesOk"]:
        v.signatures_ok = False
    v.problems += [_problem(p) for p in segment["problems"]]


def _problem(data: Mapping[str, Any]) -> Problem:
    return Problem(data["kind"], data["severity"], data["message"], data["segment"],
                   data["seq"])


_REPORT_FIELDS: Final = ("path", "format", "ok", "records", "segments", "chain_head",
                         "bundle_id", "signer", "signed", "lost", "exchanges", "end",
                         "inflight")


def _report_json(report: VerifyReport) -> dict[str, Any]:
    data = {name: getattr(report, name) for name in _REPORT_FIELDS}
    data["problems"] = [p.to_json() for p in report.problems]
    return data


def _report_from(data: Mapping[str, Any]) -> VerifyReport:
    return VerifyReport(**{name: data[name] for name in _REPORT_FIELDS},
                        problems=[_problem(p) for p in data["problems"]])


def read_results(paths: Sequence[Path]) -> list[dict[str, Any]]:
    """Read shard results from files, each holding one result or several, one JSON object
    per line (``kubectl logs`` of an Indexed Job's pods); InputError for anything else."""
    from mcp_tap.files import read_file

    results = []
    for path in paths:
        for number, line in enumerate(read_file(path, "shard result").splitlines(), 1):
            if not line.strip():
                continue
            try:
                value = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise InputError(f"shard result {path} line {number} is not JSON: {exc}"
                                 ) from exc
            if not isinstance(value, dict):
                raise InputError(f"shard result {path} line {number} is not a JSON object")
            results.append(value)
    return results


__all__ = ["SHARD_FORMAT", "merge_shards", "parse_shard", "read_results", "verify_shard"]
