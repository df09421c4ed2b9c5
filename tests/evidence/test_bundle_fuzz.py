"""Hypothesis fuzzing of the bundle reader and verify (the long run: bench/fuzz_bundle.py)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from bundle_mutations import (
    IMPOSSIBLE,
    RECORD_PATHS,
    SPECIAL_KINDS,
    apply,
    check,
    random_mutations,
    seed_files,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


class TestBundleFuzz:
    @settings(max_examples=300, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(seed=st.integers(min_value=0, max_value=2**32 - 1), signed=st.booleans())
    def test_malformed_bundles_never_crash(self, tmp_path: Path, seed: int,
                                           signed: bool) -> None:
        """Every mutated bundle gives a report or a one-line error, and under --trust a
        changed segment of a signed bundle never verifies."""
        original = seed_files(signed)
        files = apply(original, random_mutations(random.Random(seed), original))
        assert check(tmp_path, files, original if signed else None) is None

    @settings(max_examples=60, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(kind=st.sampled_from(SPECIAL_KINDS),
           name=st.sampled_from(["segment-000001.jsonl", "segment-000002.jsonl",
                                 "segment-000001.manifest.json", "bundle.json",
                                 "segment-000009.jsonl"]),
           signed=st.booleans())
    def test_files_that_are_not_regular(self, tmp_path: Path, kind: str, name: str,
                                        signed: bool) -> None:
        """A FIFO, a /dev/zero link, a link out of the bundle, a directory or a 20 GB sparse
        file in any place of a bundle: a problem or a one-line error, never a hang."""
        original = seed_files(signed)
        files = apply(original, [("special", name, kind)])
        assert check(tmp_path, files, original if signed else None) is None

    @settings(max_examples=150, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(line=st.integers(0, 7), path=st.sampled_from(RECORD_PATHS),
           value=st.sampled_from(IMPOSSIBLE), signed=st.booleans())
    def test_impossible_values(self, tmp_path: Path, line: int, path: tuple[str, ...],
                               value: object, signed: bool) -> None:
        """An impossible value at any path a consumer reads is a problem with its place
        (verify) or a one-line error (the strict reader), never an exception deeper in."""
        original = seed_files(signed)
        for name in ("segment-000001.jsonl", "segment-000002.jsonl"):
            files = apply(original, [("record-path", name, line, path, value)])
            assert check(tmp_path, files, original if signed else None) is None

    def test_impossible_value_is_named_with_its_place(self, tmp_path: Path) -> None:
        """verify names the segment, the line and the field of an impossible value."""
        from mcp_tap.evidence import verify_bundle

        files = apply(seed_files(False), [("record-path", "segment-000001.jsonl", 0,
                                      ("ingress", "receivedAt"), 1e20)])
        assert check(tmp_path, files) is None
        report = verify_bundle(tmp_path / "bundle")
        (problem,) = [p for p in report.problems if "evidence schema" in p.message]
        assert (problem.kind, problem.severity, problem.segment) == (
            "format", "error", "segment-000001.jsonl")
        assert problem.message.startswith("segment-000001.jsonl line 1: evidence schema 2: ")
        assert problem.message.endswith("at $.ingress.receivedAt")

    def test_seed_bundle_is_intact(self, tmp_path: Path) -> None:
        """The unmutated seed passes the checks (so the fuzzer starts from valid evidence)."""
        assert check(tmp_path, seed_files(True), seed_files(True)) is None

    @pytest.mark.parametrize("depth", [254, 256, 1100])
    def test_deep_record_line(self, tmp_path: Path, depth: int) -> None:
        """A record line nested past orjson's limits is a problem, never a crash."""
        files = dict(seed_files(False))
        deep = b"[" * depth + b"]" * depth
        line = b'{"kind":"exchange","prev":"","seq":0,"body":' + deep + b',"digest":"x"}'
        files["segment-000001.jsonl"] = line + b"\n"
        assert check(tmp_path, files) is None

    def test_forged_huge_numbers_cost_nothing(self, tmp_path: Path) -> None:
        """A seq of 2**62 and a segment numbered 10**15 are reported without listing the
        numbers in between (the fuzzer found this one: 17 GB before the fix)."""
        import orjson

        from mcp_tap.evidence import verify_bundle

        files = dict(seed_files(False))
        lines = files["segment-000001.jsonl"].split(b"\n")
        record = orjson.loads(lines[1])
        record["seq"] = 2**62
        lines[1] = orjson.dumps(record)
        files["segment-000001.jsonl"] = b"\n".join(lines)
        files["segment-1000000000000000.jsonl"] = b""
        assert check(tmp_path, files) is None
        report = verify_bundle(tmp_path / "bundle")
        messages = [p.message for p in report.problems if p.kind == "sequence"]
        assert "segments 4..999999999999999 missing: no segment file and no manifest" in messages
        assert any("..4611686018427387903 missing before seq 4611686018427387904" in m
                   for m in messages)
