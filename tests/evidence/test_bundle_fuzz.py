"""Hypothesis fuzzing of the bundle reader and verify (the long run: bench/fuzz_bundle.py)."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import pytest
from bundle_mutations import apply, check, random_mutations, seed_bundle
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

_SEEDS: dict[bool, dict[str, bytes]] = {}


def _seed(signed: bool) -> dict[str, bytes]:
    if signed not in _SEEDS:
        with tempfile.TemporaryDirectory() as root:
            _SEEDS[signed] = seed_bundle(Path(root), signed=signed)
    return _SEEDS[signed]


class TestBundleFuzz:
    @settings(max_examples=300, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(seed=st.integers(min_value=0, max_value=2**32 - 1), signed=st.booleans())
    def test_malformed_bundles_never_crash(self, tmp_path: Path, seed: int,
                                           signed: bool) -> None:
        """Every mutated bundle gives a report or a one-line error, and under --trust a
        changed segment of a signed bundle never verifies."""
        original = _seed(signed)
        files = apply(original, random_mutations(random.Random(seed), original))
        assert check(tmp_path, files, original if signed else None) is None

    def test_seed_bundle_is_intact(self, tmp_path: Path) -> None:
        """The unmutated seed passes the checks (so the fuzzer starts from valid evidence)."""
        assert check(tmp_path, _seed(True), _seed(True)) is None

    @pytest.mark.parametrize("depth", [254, 256, 1100])
    def test_deep_record_line(self, tmp_path: Path, depth: int) -> None:
        """A record line nested past orjson's limits is a problem, never a crash."""
        files = dict(_seed(False))
        deep = b"[" * depth + b"]" * depth
        line = b'{"kind":"exchange","prev":"","seq":0,"body":' + deep + b',"digest":"x"}'
        files["segment-000001.jsonl"] = line + b"\n"
        assert check(tmp_path, files) is None

    def test_forged_huge_numbers_cost_nothing(self, tmp_path: Path) -> None:
        """A seq of 2**62 and a segment numbered 10**15 are reported without listing the
        numbers in between (the fuzzer found this one: 17 GB before the fix)."""
        import orjson

        from mcp_tap.evidence import verify_bundle

        files = dict(_seed(False))
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
