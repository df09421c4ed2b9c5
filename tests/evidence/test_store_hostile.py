"""Hostile objects in the object store: the reader's guarantees hold for what a real
S3-compatible store (SeaweedFS on loopback) serves, as for files (issue 29).

Anyone with write access to the bucket can put anything under a release's prefix. Each case
puts one bundle of the real writer's into the store with one thing planted -- a line past
the record limit, bytes that are not JSON, records with impossible values, a segment larger
than its manifest, a key prefix (a "directory") in a segment's place -- and runs
``verify``, ``gate``, ``report``, ``replay``, ``export har``, ``diff`` and ``sdk-diff`` on
its ``s3://`` address as real processes. Each must end (the subprocess timeout only guards
against a hang), exit 1 or 2, name the problem, and print no traceback.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from gate_bundles import KEY, KEY_ENV, exchange, write_attested, write_policy
from seaweed import SeaweedStore, aws_env, seaweed_store, upload_bundle

from mcp_tap.evidence import EvidenceWriter
from mcp_tap.evidence.reader import RECORD_LIMIT_ENV

REPO_ROOT = Path(__file__).resolve().parents[2]
BUCKET = "hostile"
_GUARD = 120.0  # seconds: a hang fails the test instead of hanging the suite
_LIMIT = 64 * 1024  # the record limit the commands run with (RECORD_LIMIT_ENV)
SEGMENT = "segment-000001.jsonl"
MANIFEST = "segment-000001.manifest.json"


def _bundle(path: Path, mutate: Callable[[dict[str, Any]], None] | None = None) -> Path:
    """Ten exchanges, unsigned (so a planted segment can be given an honest manifest);
    ``mutate`` changes the fifth record before it is written."""
    with EvidenceWriter(path) as writer:
        for n in range(10):
            record = exchange(n)
            if n == 4 and mutate is not None:
                mutate(record)
            assert writer.submit(record)
    return path


def _restate(bundle: Path) -> None:
    """Make the manifest state the segment's new size and hash: what stops the read is the
    planted content, not the size check."""
    segment = (bundle / SEGMENT).read_bytes()
    manifest = orjson.loads((bundle / MANIFEST).read_bytes())
    manifest.update(bytes=len(segment), fileSha256=hashlib.sha256(segment).hexdigest())
    (bundle / MANIFEST).write_bytes(orjson.dumps(manifest))


def _huge_line(bundle: Path) -> None:
    lines = (bundle / SEGMENT).read_bytes().split(b"\n")
    lines[4] = lines[4][:-1] + b',"pad":"' + b"x" * (4 * _LIMIT) + b'"}'
    (bundle / SEGMENT).write_bytes(b"\n".join(lines))
    _restate(bundle)


def _not_json(bundle: Path) -> None:
    (bundle / SEGMENT).write_bytes(b"root:x:0:0:root:/root:/bin/bash\n"
                                   b"daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n")
    _restate(bundle)


def _grown(bundle: Path) -> None:
    with (bundle / SEGMENT).open("ab") as out:
        out.write(b'{"kind":"exchange"}\n' * 1000)


def _bogus_boundary(record: dict[str, Any]) -> None:
    record["findings"] = [{"rule": "response.id", "code": None, "boundary": "bogus",
                           "message": "m", "where": "", "strength": "must"}]


def _received_1e20(record: dict[str, Any]) -> None:
    record["ingress"]["receivedAt"] = 1e20


def _prefix_for_segment(bundle: Path) -> None:
    """The segment's key becomes a key prefix (``.../segment-000001.jsonl/x``): a
    "directory" where the object should be (put in the store by the fixture)."""


CASES: dict[str, tuple[Any, Any, str]] = {
    # name: (record mutation, damage to the files, fragment of the line naming the problem)
    "huge-line": (None, _huge_line, f"is longer than {_LIMIT} bytes (the record limit)"),
    "not-json": (None, _not_json, f"{SEGMENT} line 1: not valid JSON"),
    "bogus-boundary": (_bogus_boundary, None,
                       "Invalid enum value 'bogus' - at $.findings[0].boundary"),
    "received-1e20": (_received_1e20, None,
                      "Expected float <= 253402300799.0 - at $.ingress.receivedAt"),
    "grown": (None, _grown, "larger than its manifest states ("),
    "prefix-for-segment": (None, _prefix_for_segment,
                           f"cannot read evidence file s3://{BUCKET}/canary/prefix-for-segment/"
                           f"pod-a/run-1/{SEGMENT}: Is a directory"),
}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SeaweedStore, Path]]:
    """The store, with a clean bundle (diff's baseline) and each case's under its prefix."""
    root = tmp_path_factory.mktemp("store-hostile")
    with seaweed_store(root) as running:
        running.make_bucket(BUCKET)
        good = _bundle(root / "good")
        upload_bundle(running, BUCKET, "canary/v1/pod-a/good", good)
        for name, (mutate, damage) in ((n, c[:2]) for n, c in CASES.items()):
            bundle = _bundle(root / name, mutate)
            if damage is not None:
                damage(bundle)
            upload_bundle(running, BUCKET, f"canary/{name}/pod-a/run-1", bundle)
        client, key = running.client(), f"canary/prefix-for-segment/pod-a/run-1/{SEGMENT}"
        client.delete_object(Bucket=BUCKET, Key=key)
        client.put_object(Bucket=BUCKET, Key=f"{key}/x", Body=b"{}\n")
        yield running, root


def _commands(where: str, good: str, out: Path) -> dict[str, list[str]]:
    return {
        "verify": ["verify", where],
        "gate": ["gate", "--policy", str(write_policy(out)), "--rollback",
                 str(write_attested(out / "rollback.json")), where],
        "report": ["report", "--out", str(out / "r.html"), where],
        "replay": ["replay", "--target", "http://127.0.0.1:9/mcp", where],
        "export": ["export", "--format", "har", "--out", str(out / "x.har"), where],
        "diff": ["diff", good, where],
        "sdk-diff": ["sdk-diff", where],
    }


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_command_on_a_hostile_store_object(
        case: str, store: tuple[SeaweedStore, Path], tmp_path: Path) -> None:
    running, _ = store
    env = {k: v for k, v in aws_env(running).items() if not k.startswith("MCP_TAP_")}
    env.update(PYTHONPATH=str(REPO_ROOT), **{RECORD_LIMIT_ENV: str(_LIMIT), KEY_ENV: KEY})
    where = f"s3://{BUCKET}/canary/{case}/pod-a/run-1"
    good = f"s3://{BUCKET}/canary/v1/pod-a/good"
    fragment = CASES[case][2]
    failures = []
    for name, argv in _commands(where, good, tmp_path).items():
        done = subprocess.run([sys.executable, "-m", "mcp_tap", *argv], cwd=REPO_ROOT, env=env,
                              capture_output=True, text=True, timeout=_GUARD, check=False)
        said = done.stdout + done.stderr
        if (done.returncode not in (1, 2) or "Traceback" in said or fragment not in said
                or (done.returncode == 2 and done.stderr.count("\n") != 1)):
            failures.append(f"{name}: exit {done.returncode}: {said[-800:]}")
    assert not failures, "\n".join(failures)


def test_the_planted_bundles_are_what_they_say(store: tuple[SeaweedStore, Path]) -> None:
    """The cases plant what they name (the test above could pass on a bundle that is
    merely missing): each case's objects are in the store, the huge line past the limit."""
    running, root = store
    for name in set(CASES) - {"prefix-for-segment"}:
        keys = running.keys(BUCKET, f"canary/{name}/pod-a/run-1/")
        assert sorted(k.rpartition("/")[2] for k in keys) == sorted(
            ["bundle.json", MANIFEST, SEGMENT]), name
    assert os.path.getsize(root / "huge-line" / SEGMENT) > 4 * _LIMIT
