"""Every command that reads a bundle reads it from a real S3-compatible store (SeaweedFS on
loopback) exactly as from its directory: same checks, same results, one-line errors.

The bundles are real captures (the real ``mcp==2.3.0`` client, both eras, through a tap in
front of the SDK demo origin and of ``candidate_origin``), uploaded with the shipper's key
layout ``PREFIX/<release>/<pod>/<bundle>/<file>``.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from captures import capture_releases
from seaweed import SECRET_KEY, SeaweedStore, aws_env, seaweed_store, upload_bundle

from mcp_tap.evidence import verify_bundle
from mcp_tap.evidence.store import StoreLocation
from mcp_tap.evidence.storepath import StorePath

BUCKET = "evidence"
ROOT = Path(__file__).resolve().parents[2]


class Fleet:
    """The store, the local bundles and where each was put."""

    def __init__(self, store: SeaweedStore, local: dict[str, Path]) -> None:
        self.store = store
        self.local = local
        self.url: dict[str, str] = {}

    def put(self, name: str, release: str, pod: str) -> str:
        bundle = self.local[name]
        prefix = f"canary/{release}/{pod}/{bundle.name}"
        upload_bundle(self.store, BUCKET, prefix, bundle)
        self.url[name] = f"s3://{BUCKET}/{prefix}"
        return self.url[name]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    """A store holding release v1 (one pod) and v2 (two pods) of real captures."""
    root = tmp_path_factory.mktemp("store-reading")
    local = capture_releases(root / "captures")
    with seaweed_store(root) as store:
        store.make_bucket(BUCKET)
        found = Fleet(store, local)
        found.put("baseline", "v1", "pod-a")
        found.put("candidate", "v2", "pod-a")
        found.put("again", "v2", "pod-b")
        yield found


@pytest.fixture
def in_store(fleet: Fleet, monkeypatch: pytest.MonkeyPatch) -> Fleet:
    """The store's AWS environment in this process (for in-process reads)."""
    for name, value in fleet.store.env.items():
        monkeypatch.setenv(name, value)
    return fleet


def _run(fleet: Fleet, *argv: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "mcp_tap", *argv], capture_output=True, text=True,
        env=env if env is not None else aws_env(fleet.store), cwd=ROOT, timeout=300)
    return done.returncode, done.stdout, done.stderr


def _same_but_paths(text: str, fleet: Fleet) -> str:
    for name, url in fleet.url.items():
        text = text.replace(url, "<" + name + ">").replace(str(fleet.local[name]), "<" + name + ">")
    return text


class TestStorePath:
    def test_lists_and_reads_a_bundle(self, in_store: Fleet) -> None:
        bundle = StorePath(in_store.url["candidate"])
        names = sorted(p.name for p in bundle.iterdir())
        assert names == sorted(p.name for p in in_store.local["candidate"].iterdir())
        segment = next(p for p in bundle.iterdir() if p.name.endswith(".jsonl"))
        local = in_store.local["candidate"] / segment.name
        assert segment.stat().st_size == local.stat().st_size
        with segment.open("rb") as handle:
            assert handle.read() == local.read_bytes()
        assert bundle.is_dir() and not (bundle / "nothing").exists()

    def test_verify_in_process_matches_the_directory(self, in_store: Fleet) -> None:
        remote = verify_bundle(StorePath(in_store.url["candidate"]))
        local = verify_bundle(in_store.local["candidate"])
        assert remote.ok and local.ok
        assert remote.records == local.records and remote.end == local.end

    def test_location_of_store_path(self) -> None:
        path = StorePath.of(StoreLocation.parse("s3://evidence/canary/v2"))
        assert str(path / "pod-a") == "s3://evidence/canary/v2/pod-a"
        assert (path.bucket, path.key) == ("evidence", "canary/v2")


class TestCommandsReadTheStore:
    """Each command, as a process, on ``s3://`` gives what it gives on the directory."""

    def test_verify(self, fleet: Fleet) -> None:
        remote = _run(fleet, "verify", fleet.url["candidate"], "--json")
        local = _run(fleet, "verify", str(fleet.local["candidate"]), "--json")
        assert remote[0] == local[0] == 0, remote[2]
        assert _same_but_paths(remote[1], fleet) == _same_but_paths(local[1], fleet)

    def test_gate_over_a_release_prefix(self, fleet: Fleet, tmp_path: Path) -> None:
        policy = ROOT / "config" / "policy.toml"
        remote = _run(fleet, "gate", f"s3://{BUCKET}/canary/v2", "--policy", str(policy),
                      "--json")
        local = _run(fleet, "gate", str(fleet.local["candidate"]), str(fleet.local["again"]),
                     "--policy", str(policy), "--json")
        assert "Traceback" not in remote[2]
        assert remote[0] == local[0]
        decision_remote, decision_local = orjson.loads(remote[1]), orjson.loads(local[1])
        assert decision_remote["action"] == decision_local["action"]
        assert decision_remote.get("reasons") == decision_local.get("reasons")

    def test_diff(self, fleet: Fleet) -> None:
        remote = _run(fleet, "diff", fleet.url["baseline"], fleet.url["candidate"], "--json")
        local = _run(fleet, "diff", str(fleet.local["baseline"]),
                     str(fleet.local["candidate"]), "--json")
        assert remote[0] == local[0] == 1, remote[2]
        assert _same_but_paths(remote[1], fleet) == _same_but_paths(local[1], fleet)

    def test_export_har(self, fleet: Fleet, tmp_path: Path) -> None:
        remote_out, local_out = tmp_path / "remote.har", tmp_path / "local.har"
        remote = _run(fleet, "export", "--format", "har", fleet.url["candidate"], "--out",
                      str(remote_out))
        local = _run(fleet, "export", "--format", "har", str(fleet.local["candidate"]), "--out",
                     str(local_out))
        assert remote[0] == local[0] == 0, remote[2]
        assert _same_but_paths(remote_out.read_text(), fleet) == _same_but_paths(
            local_out.read_text(), fleet)

    def test_report(self, fleet: Fleet, tmp_path: Path) -> None:
        out = tmp_path / "report.html"
        code, _, err = _run(fleet, "report", fleet.url["candidate"], "--out", str(out))
        assert code == 0, err
        assert "verified" in out.read_text().lower()

    def test_sdk_diff(self, fleet: Fleet) -> None:
        remote = _run(fleet, "sdk-diff", fleet.url["candidate"], "--json")
        local = _run(fleet, "sdk-diff", str(fleet.local["candidate"]), "--json")
        assert remote[0] == local[0], remote[2]
        assert _same_but_paths(remote[1], fleet) == _same_but_paths(local[1], fleet)


class TestShardedVerify:
    def test_shards_of_a_store_prefix_merge_into_the_whole(self, fleet: Fleet,
                                                           tmp_path: Path) -> None:
        prefix = f"s3://{BUCKET}/canary/v2"
        outs = []
        for index in range(2):
            out = tmp_path / f"shard-{index}.json"
            code, _, err = _run(fleet, "verify", prefix, "--shard", f"{index}/2", "--out",
                                str(out))
            assert code == 0, err
            outs.append(str(out))
        merged = _run(fleet, "verify", "--merge", *outs, "--json")
        whole = _run(fleet, "verify", prefix, "--json")
        assert merged[0] == whole[0] == 0, (merged, whole)
        assert orjson.loads(merged[1]) == orjson.loads(whole[1])


class TestHostileAndBrokenStores:
    def _copy(self, fleet: Fleet, name: str, to: str) -> tuple[Any, str]:
        client = fleet.store.client()
        source = fleet.url[name].removeprefix(f"s3://{BUCKET}/")
        for key in fleet.store.keys(BUCKET, source + "/"):
            client.copy_object(Bucket=BUCKET, Key=key.replace(source, to, 1),
                               CopySource={"Bucket": BUCKET, "Key": key})
        return client, to

    def test_a_flipped_byte_fails_verify_as_on_disk(self, fleet: Fleet) -> None:
        client, prefix = self._copy(fleet, "candidate", "tampered/v2/pod-a/bundle")
        key = next(k for k in fleet.store.keys(BUCKET, prefix) if k.endswith(".jsonl"))
        data = bytearray(client.get_object(Bucket=BUCKET, Key=key)["Body"].read())
        at = data.index(b'"method"')
        data[at + 2] ^= 0x01
        client.put_object(Bucket=BUCKET, Key=key, Body=bytes(data))
        code, out, err = _run(fleet, "verify", f"s3://{BUCKET}/{prefix}", "--json")
        assert code == 1 and "Traceback" not in err
        kinds = {p["kind"] for p in orjson.loads(out)["problems"]}
        assert "digest" in kinds

    def test_an_object_longer_than_its_manifest_says(self, fleet: Fleet) -> None:
        client, prefix = self._copy(fleet, "candidate", "grown/v2/pod-a/bundle")
        key = next(k for k in fleet.store.keys(BUCKET, prefix) if k.endswith(".jsonl"))
        data = client.get_object(Bucket=BUCKET, Key=key)["Body"].read()
        client.put_object(Bucket=BUCKET, Key=key, Body=data + b"x" * 5_000_000)
        code, out, err = _run(fleet, "verify", f"s3://{BUCKET}/{prefix}", "--json")
        assert code == 1 and "Traceback" not in err
        # One problem, with the sizes: the records the manifest covers were all read, so
        # nothing is reported missing after it.
        name = key.rpartition("/")[2]
        signed = "signed " if orjson.loads(out)["signed"] else ""
        assert [(p["kind"], p["message"]) for p in orjson.loads(out)["problems"]] == [(
            "manifest",
            f"{name}: larger than its {signed}manifest states ({len(data)} bytes expected, "
            f"{len(data) + 5_000_000} found); nothing past byte {len(data)} is read")]

    def test_a_pod_that_died_is_unclosed_with_its_last_seq(self, fleet: Fleet) -> None:
        client, prefix = self._copy(fleet, "candidate", "died/v2/pod-c/bundle")
        meta = orjson.loads(client.get_object(Bucket=BUCKET, Key=f"{prefix}/bundle.json")
                            ["Body"].read())
        last = meta["closed"]["lastSeq"]
        del meta["closed"]
        meta.pop("signature", None)
        client.put_object(Bucket=BUCKET, Key=f"{prefix}/bundle.json", Body=orjson.dumps(meta))
        code, out, err = _run(fleet, "verify", f"s3://{BUCKET}/{prefix}", "--json")
        assert code == 0 and "Traceback" not in err  # unsigned: a warning, as on disk
        problems = orjson.loads(out)["problems"]
        unclosed = [p for p in problems if p["kind"] == "unclosed"]
        assert unclosed and f"seq {last}" in unclosed[0]["message"]

    def test_wrong_credentials_are_one_line_without_the_secret(self, fleet: Fleet) -> None:
        env = aws_env(fleet.store)
        env["AWS_SECRET_ACCESS_KEY"] = SECRET_KEY + "x"
        code, out, err = _run(fleet, "verify", fleet.url["candidate"], env=env)
        assert code == 2 and out == ""
        assert err.startswith("mcp-tap: error: ") and err.count("\n") == 1, err
        assert SECRET_KEY not in err

    def test_an_unreachable_store_is_one_line(self, fleet: Fleet) -> None:
        env = aws_env(fleet.store)
        env["AWS_ENDPOINT_URL"] = "http://127.0.0.1:9"
        code, _, err = _run(fleet, "gate", f"s3://{BUCKET}/canary/v2", "--policy",
                            str(ROOT / "config" / "policy.toml"), env=env)
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err

    def test_a_prefix_without_bundles(self, fleet: Fleet) -> None:
        code, _, err = _run(fleet, "verify", f"s3://{BUCKET}/nothing-here")
        assert code == 2 and err == (
            f"mcp-tap: error: s3://{BUCKET}/nothing-here: holds no evidence bundle "
            "(no bundle.json under it)\n")

