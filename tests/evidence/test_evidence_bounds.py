"""A segment read that stops at its bound is one clear problem, and only one: a file larger
than its (signed) manifest states names the bytes expected and found; a line past the record
limit names its place; the records not read are never reported as deleted (issue 29).
Bundles written by the real writer, damaged on disk as an attacker (or a bad copy) would."""

from __future__ import annotations

from pathlib import Path

import pytest
from gate_bundles import exchange

from mcp_tap.errors import EvidenceLimitError
from mcp_tap.evidence import EvidenceWriter, verify_bundle
from mcp_tap.evidence.reader import RECORD_LIMIT_ENV, iter_records
from mcp_tap.evidence.shards import merge_shards, verify_shard

SEED = bytes(range(64, 96))  # a deterministic, non-secret test key (raw Ed25519 seed)


def _bundle(path: Path, *, signed: bool = False, segment_bytes: int = 1 << 30) -> Path:
    with EvidenceWriter(path, signing_key=SEED if signed else None,
                        max_segment_bytes=segment_bytes) as writer:
        for n in range(40):
            assert writer.submit(exchange(n))
    return path


def _problems(path: Path) -> list[tuple[str, str]]:
    report = verify_bundle(path)
    assert not report.ok
    return [(str(p.kind), p.message) for p in report.problems]


@pytest.mark.parametrize("signed", [False, True])
@pytest.mark.parametrize("tail", [b'{"kind":"exchange"}\n', b"\x00" * 70_000])
def test_a_segment_larger_than_its_manifest(tmp_path: Path, signed: bool, tail: bytes) -> None:
    bundle = _bundle(tmp_path / "b", signed=signed)
    segment = bundle / "segment-000001.jsonl"
    size = segment.stat().st_size
    with segment.open("ab") as out:
        out.write(tail)
    manifest = "signed manifest" if signed else "manifest"
    assert _problems(bundle) == [(
        "manifest",
        f"segment-000001.jsonl: larger than its {manifest} states ({size} bytes expected, "
        f"{size + len(tail)} found); nothing past byte {size} is read")]
    # Every record the manifest covers was read and checked: the count is whole.
    assert verify_bundle(bundle).records == 40
    found = f"{size} bytes expected, {size + len(tail)} found"
    with pytest.raises(EvidenceLimitError, match=found):
        list(iter_records(bundle))


def test_a_middle_segment_larger_than_its_manifest(tmp_path: Path) -> None:
    """The chain goes on into the next segment: one problem, not a hole after it."""
    bundle = _bundle(tmp_path / "b", signed=True, segment_bytes=8_000)
    segments = sorted(bundle.glob("segment-*.jsonl"))
    assert len(segments) >= 3
    size = segments[1].stat().st_size
    with segments[1].open("ab") as out:
        out.write(b"garbage\n")
    assert _problems(bundle) == [(
        "manifest",
        f"{segments[1].name}: larger than its signed manifest states ({size} bytes expected, "
        f"{size + 8} found); nothing past byte {size} is read")]


def test_a_line_past_the_record_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside one read or across reads, a line past the limit stops the read there: one
    problem naming its byte; the records after it are not read, and not called deleted."""
    bundle = _bundle(tmp_path / "b", segment_bytes=8_000)
    segments = sorted(bundle.glob("segment-*.jsonl"))
    data = segments[0].read_bytes()
    lines = data.split(b"\n")
    at = len(lines[0]) + 1 + len(lines[1]) + 1
    lines[2] = lines[2][:-1] + b',"pad":"' + b"x" * 3000 + b'"}'
    segments[0].write_bytes(b"\n".join(lines))
    monkeypatch.setenv(RECORD_LIMIT_ENV, "2048")
    expected = [(
        "format",
        f"{segments[0].name}: the line at byte {at} is longer than 2048 bytes (the record "
        "limit); read no further")]
    assert _problems(bundle) == expected
    # Sharded verification says the same, and no more.
    (merged,) = merge_shards([verify_shard(str(bundle), i, 3) for i in range(3)])
    assert [(str(p.kind), p.message) for p in merged.problems] == expected
