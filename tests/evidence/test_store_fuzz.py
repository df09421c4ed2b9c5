"""Hypothesis fuzzing of the bundle reader on objects a real S3-compatible store serves
(SeaweedFS on loopback): the mutations of ``test_bundle_fuzz.py`` (flipped bytes, cut and
deleted files, arbitrary JSON, swapped lines, stray segments, impossible values), uploaded
as a bundle's objects and read through ``s3://``. Every outcome is a report or a one-line
error, and a changed segment of a signed bundle never verifies under ``--trust`` (issue 29:
the reader's guarantees hold for the store as for files). Fewer examples than on disk: each
one is a round of uploads."""

from __future__ import annotations

import random
from collections.abc import Iterator
from itertools import count

import pytest
from bundle_mutations import (
    IMPOSSIBLE,
    RECORD_PATHS,
    apply,
    check_bundle,
    random_mutations,
    seed_files,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from seaweed import SeaweedStore, seaweed_store

from mcp_tap.evidence.reader import bundle_path

BUCKET = "fuzz"
_PREFIXES = count()




@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedStore]:
    """One store for the module, its credentials in this process's environment."""
    with seaweed_store(tmp_path_factory.mktemp("store-fuzz")) as running:
        running.make_bucket(BUCKET)
        with pytest.MonkeyPatch.context() as patch:
            for name, value in running.env.items():
                patch.setenv(name, value)
            yield running


def _check_in_store(store: SeaweedStore, files: dict[str, bytes],
                    original: dict[str, bytes] | None) -> str | None:
    """Put ``files`` under a fresh prefix (nothing of an earlier example under it) and run
    every reader on its ``s3://`` address."""
    prefix = f"release/pod/run-{next(_PREFIXES)}"
    client = store.client()
    for name, data in files.items():
        client.put_object(Bucket=BUCKET, Key=f"{prefix}/{name}", Body=data)
    return check_bundle(bundle_path(f"s3://{BUCKET}/{prefix}"), files, original)


class TestStoreFuzz:
    @settings(max_examples=40, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(seed=st.integers(min_value=0, max_value=2**32 - 1), signed=st.booleans())
    def test_malformed_objects_never_crash(self, store: SeaweedStore, seed: int,
                                           signed: bool) -> None:
        """Mutated objects: a report or a one-line error, never a traceback."""
        original = seed_files(signed)
        files = apply(original, random_mutations(random.Random(seed), original))
        assert _check_in_store(store, files, original if signed else None) is None

    @settings(max_examples=20, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(line=st.integers(0, 7), path=st.sampled_from(RECORD_PATHS),
           value=st.sampled_from(IMPOSSIBLE), signed=st.booleans())
    def test_impossible_values(self, store: SeaweedStore, line: int,
                               path: tuple[str, ...], value: object, signed: bool) -> None:
        """An impossible value at any path a consumer reads, in an object: a problem with
        its place or a one-line error."""
        original = seed_files(signed)
        files = apply(original, [("record-path", "segment-000001.jsonl", line, path, value)])
        assert _check_in_store(store, files, original if signed else None) is None

    def test_the_seed_verifies_from_the_store(self, store: SeaweedStore) -> None:
        """The unmutated signed seed reads from the store as from disk (the fuzzer starts from
        evidence that verifies there but for its stated loss); a flipped byte is an error."""
        from mcp_tap.evidence import verify_bundle

        original = seed_files(True)
        assert _check_in_store(store, original, original) is None
        seeded = bundle_path(f"s3://{BUCKET}/release/pod/run-{next(_PREFIXES) - 1}")
        intact = verify_bundle(seeded)  # the seed states a loss on purpose: its only problem
        assert (intact.records, intact.signed, [p.kind for p in intact.problems]) == (
            8, True, ["gap"])
        flipped = dict(original)
        segment = bytearray(flipped["segment-000001.jsonl"])
        segment[40] ^= 0x01
        flipped["segment-000001.jsonl"] = bytes(segment)
        prefix = f"release/pod/run-{next(_PREFIXES)}"
        for name, data in flipped.items():
            store.client().put_object(Bucket=BUCKET, Key=f"{prefix}/{name}", Body=data)
        report = verify_bundle(bundle_path(f"s3://{BUCKET}/{prefix}"))
        assert any(p.kind != "gap" and p.severity == "error" for p in report.problems)
