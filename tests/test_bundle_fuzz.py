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
