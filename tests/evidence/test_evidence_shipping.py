"""mcp_tap.evidence.shipping against a real SeaweedFS on loopback: what is shipped and when,
Object Lock, a frozen or missing store, the bounded spool and a restart's resumption."""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from seaweed import SECRET_KEY, SeaweedStore, seaweed_store
from structlog.testing import capture_logs
from threaded_server import serve_in_thread

from mcp_tap.errors import InputError, StoreError
from mcp_tap.evidence import EvidenceWriter, verify_bundle
from mcp_tap.evidence.shipledger import LEDGER_FILE
from mcp_tap.evidence.shipping import (
    LOCK_ABSENT,
    LOCK_ON,
    REASON_NOT_SHIPPED,
    ShipOptions,
    Shipper,
    parse_retention,
    shipping_status,
)
from mcp_tap.evidence.store import StoreLocation, client_from_env

TIMEOUT = 60.0  # a hang guard, never a timing assertion


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedStore]:
    with seaweed_store(tmp_path_factory.mktemp("store")) as running:
        # Two buckets for the module (each bucket takes volumes of the store's few): the
        # tests keep apart by prefix.
        running.make_bucket("ship")
        running.make_bucket("ship-locked", object_lock=True)
        yield running


@pytest.fixture(autouse=True)
def aws_env(store: SeaweedStore, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in store.env.items():
        monkeypatch.setenv(name, value)


def _until(condition: Any) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.05)


def _unreachable() -> Any:
    raise StoreError("connect to the object store: EndpointConnectionError")


def _record(i: int) -> dict[str, Any]:
    return {"kind": "exchange", "n": i, "pad": "x" * 200}


def _write(directory: Path, shipper: Shipper, n: int, **kwargs: Any) -> EvidenceWriter:
    writer = EvidenceWriter(directory, max_segment_bytes=2048, **kwargs)
    writer.follow(shipper.sealed, shipper.bundle_written)
    writer.start(inline=True)
    for i in range(n):
        writer.submit(_record(i))
    return writer


def _options(prefix: str, bucket: str = "ship", **kwargs: Any) -> ShipOptions:
    return ShipOptions(StoreLocation.parse(f"s3://{bucket}/{prefix}"), "v2", "pod-a", **kwargs)


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in directory.iterdir()
            if p.name == "bundle.json" or p.name.startswith("segment-")}


def _stored(store: SeaweedStore, bucket: str, prefix: str) -> dict[str, bytes]:
    client = store.client()
    return {key.rsplit("/", 1)[1]: client.get_object(Bucket=bucket, Key=key)["Body"].read()
            for key in store.keys(bucket, prefix)}


def test_every_sealed_segment_its_manifest_and_the_closing_bundle_reach_the_store(
    tmp_path: Path, store: SeaweedStore
) -> None:
    shipper = Shipper(_options("all"))
    shipper.start()
    writer = _write(tmp_path / "run-1", shipper, 40)
    writer.note_shipping(shipper.last_words())
    writer.close()
    assert shipper.close(TIMEOUT)
    local = _files(tmp_path / "run-1")
    assert len([n for n in local if n.endswith(".manifest.json")]) >= 3
    stored = _stored(store, "ship", "all/v2/pod-a/run-1/")
    assert stored == local  # the same bytes, every file, the closing bundle.json included
    closed = json.loads(stored["bundle.json"])["closed"]
    assert closed["end"] == "closed" and closed["shipping"]["to"] == "s3://ship/all/v2/pod-a"
    counters = shipper.counters()
    segments = len([n for n in local if n.endswith(".jsonl")])
    assert (counters["ship_segments"], counters["ship_dropped_segments"]) == (segments, 0)
    assert counters["ship_spool_bytes"] == 0
    ledger = _ledger(tmp_path / "run-1")
    assert ledger["done"] is True and set(ledger["shipped"]) == set(local)
    lines = (tmp_path / "run-1" / LEDGER_FILE).read_bytes().splitlines()
    # A line per upload job after the first (a segment and its manifest, a bundle.json),
    # none repeating what an earlier one holds.
    assert len(lines) - 1 <= segments + 2
    assert all(len(json.loads(line)["shipped"]) <= 2 for line in lines[1:])
    assert verify_bundle(tmp_path / "run-1").ok


def test_a_frozen_store_never_holds_the_writer_back(tmp_path: Path, store: SeaweedStore) -> None:
    shipper = Shipper(_options("frozen"))
    shipper.start()
    store.freeze()
    try:
        writer = _write(tmp_path / "run-1", shipper, 60)
        # Every record reached the disk and every full segment is sealed while the store
        # answers nothing: the uploads wait in the spool.
        assert writer.written == 60 and writer.segments >= 4
        waiting = shipper.counters()["ship_spool_segments"]
        assert waiting >= writer.segments - 2
    finally:
        store.thaw()
    writer.close()
    assert shipper.close(TIMEOUT)
    assert _stored(store, "ship", "frozen/") .keys() == _files(tmp_path / "run-1").keys()


def test_a_full_spool_gives_up_the_oldest_and_the_gap_is_shipped(
    tmp_path: Path, store: SeaweedStore
) -> None:
    """The store unreachable: every upload fails; a spool of ~2 segments drops the older
    ones, and their records become a gap record that reaches the store once it is back."""
    down = [True]

    def client() -> Any:
        if down[0]:
            raise StoreError("connect to the object store: EndpointConnectionError")
        return client_from_env(timeout=5)

    shipper = Shipper(_options("later", spool_max_bytes=6000), client=client)
    shipper.start()
    writer = _write(tmp_path / "run-1", shipper, 60)
    _until(lambda: shipper.counters()["ship_failures"] > 0)
    summary = shipper.last_words()
    dropped = shipper.take_unstated()
    counters = shipper.counters()
    assert dropped > 0 and counters["ship_dropped_records"] == dropped
    assert counters["ship_dropped_segments"] >= 2 and counters["ship_failing"] == 1
    status = shipping_status(counters)
    assert status is not None and status["failing"] and status["recordsNotShipped"] == dropped
    writer.report_lost(dropped, REASON_NOT_SHIPPED)
    down[0] = False
    writer.note_shipping(summary)
    writer.close()
    assert shipper.close(TIMEOUT)
    stored = _stored(store, "ship", "later/v2/pod-a/run-1/")
    records = [json.loads(line) for name, data in sorted(stored.items())
               if name.endswith(".jsonl") for line in data.splitlines()]
    gaps = [r for r in records if r["kind"] == "gap"]
    assert [(g["lost"], g["reason"]) for g in gaps] == [(dropped, REASON_NOT_SHIPPED)]
    # What is in the store plus what it states lost is everything written.
    exchanges = [r for r in records if r["kind"] == "exchange"]
    assert len(exchanges) + dropped == 60
    closed = json.loads(stored["bundle.json"])["closed"]
    assert closed["shipping"]["recordsNotShipped"] == dropped


def test_a_restart_ships_what_the_last_run_still_owed(tmp_path: Path, store: SeaweedStore) -> None:
    root = tmp_path / "evidence"
    first = Shipper(_options("resume"), client=_unreachable)
    first.start()
    writer = _write(root / "run-1", first, 30)
    writer.close()
    assert not first.close(1.0)  # the store was never reached: everything is still owed
    second = Shipper(_options("resume"))
    assert second.resume(root, root / "run-2") == 1
    second.start()
    assert second.close(TIMEOUT)
    assert _stored(store, "ship", "resume/v2/pod-a/run-1/") == _files(root / "run-1")
    assert _ledger(root / "run-1")["done"] is True
    assert Shipper(_options("resume")).resume(root, root / "run-3") == 0


def _ledger(directory: Path) -> dict[str, Any]:
    """The ledger's lines folded as the shipper reads them (each adds to the ones before)."""
    folded: dict[str, Any] = {"shipped": {}}
    for line in (directory / LEDGER_FILE).read_bytes().splitlines():
        data = json.loads(line)
        folded["shipped"].update(data.pop("shipped"))
        folded.update(data)
    return folded


def test_a_restart_reads_an_earlier_versions_ledger_and_a_cut_line(
        tmp_path: Path, store: SeaweedStore) -> None:
    """A ledger written whole by an earlier version (one object, no newline) is resumed,
    and rewritten as lines; a last line cut short by a crash only means that file goes
    again: nothing it names is skipped, nothing already shipped is lost."""
    root = tmp_path / "evidence"
    first = Shipper(_options("old"), client=_unreachable)
    first.start()
    _write(root / "run-1", first, 30).close()
    assert not first.close(1.0)
    names = sorted(_files(root / "run-1"))
    segment = next(n for n in names if n.endswith(".jsonl"))
    ledger = root / "run-1" / LEDGER_FILE
    location = json.loads(ledger.read_bytes().splitlines()[0])["location"]
    # What the earlier version wrote: one object; the first segment and its manifest
    # already shipped (marks as the shipper makes them).
    manifest = segment.replace(".jsonl", ".manifest.json")
    marks = {name: f"{(root / 'run-1' / name).stat().st_size} bytes"
             for name in (segment, manifest)}
    ledger.write_bytes(json.dumps({"location": location, "shipped": marks,
                                   "done": False}).encode())
    second = Shipper(_options("old"))
    assert second.resume(root, root / "run-2") == 1
    second.start()
    assert second.close(TIMEOUT)
    stored = _stored(store, "ship", "old/v2/pod-a/run-1/")
    assert not set(marks) & set(stored)  # the old ledger said they were there
    assert set(stored) == set(names) - set(marks)
    assert _ledger(root / "run-1")["done"] is True
    assert ledger.read_bytes().endswith(b"\n")
    # A segment whose manifest did not go (a run killed between the two puts): the
    # manifest is owed, and put; the segment is not put again.
    client = store.client()
    client.delete_object(Bucket="ship", Key=f"old/v2/pod-a/run-1/{manifest}")
    lines = ledger.read_bytes().splitlines()
    ledger.write_bytes(json.dumps({"location": location, "shipped": {segment: marks[segment]},
                                   "done": False}).encode() + b"\n")
    manifests = Shipper(_options("old"))
    assert manifests.resume(root, root / "run-4") == 1
    manifests.start()
    assert manifests.close(TIMEOUT)
    stored = _stored(store, "ship", "old/v2/pod-a/run-1/")
    assert stored[manifest] == (root / "run-1" / manifest).read_bytes()
    assert segment not in stored
    assert len(lines) > 1
    # A cut last line: the ledger is read up to it, the bundle is owed again.
    ledger.write_bytes(ledger.read_bytes().splitlines()[0] + b'\n{"shipped": {"segm')
    third = Shipper(_options("old"))
    assert third.resume(root, root / "run-3") == 1


def test_object_lock_retention_on_a_locked_bucket(tmp_path: Path, store: SeaweedStore) -> None:
    shipper = Shipper(_options("locked", "ship-locked", retention_s=parse_retention("1d")))
    shipper.start()
    writer = _write(tmp_path / "run-1", shipper, 12)
    writer.close()
    assert shipper.close(TIMEOUT)
    assert shipper.counters()["ship_lock"] == LOCK_ON
    client = store.client()
    key = "locked/v2/pod-a/run-1/segment-000001.jsonl"
    retention = client.get_object_retention(Bucket="ship-locked", Key=key)["Retention"]
    assert retention["Mode"] == "COMPLIANCE"
    version = client.head_object(Bucket="ship-locked", Key=key)["VersionId"]
    with pytest.raises(Exception, match="AccessDenied"):
        client.delete_object(Bucket="ship-locked", Key=key, VersionId=version)


def test_retention_on_a_bucket_without_object_lock_is_stated(
    tmp_path: Path, store: SeaweedStore
) -> None:
    shipper = Shipper(_options("unlocked", retention_s=60.0))
    shipper.start()
    writer = _write(tmp_path / "run-1", shipper, 12)
    writer.close()
    assert shipper.close(TIMEOUT)
    counters = shipper.counters()
    assert counters["ship_lock"] == LOCK_ABSENT and counters["ship_failures"] == 0
    status = shipping_status(counters)
    assert status is not None and status["objectLock"] == "bucket without Object Lock"
    assert any("no Object Lock" in note for note in status["notes"])
    assert _stored(store, "ship", "unlocked/").keys() == _files(tmp_path / "run-1").keys()


def test_retention_is_a_duration() -> None:
    assert parse_retention("7d") == 7 * 86400 and parse_retention("") == 0
    with pytest.raises(InputError, match="duration like 7d"):
        parse_retention("a week")


def test_the_store_secret_is_nowhere_in_the_bundle(tmp_path: Path, store: SeaweedStore) -> None:
    shipper = Shipper(_options("secret"), client=lambda: client_from_env(timeout=5))
    shipper.start()
    writer = _write(tmp_path / "run-1", shipper, 5)
    writer.note_shipping(shipper.summary())
    writer.close()
    assert shipper.close(TIMEOUT)
    for path in (tmp_path / "run-1").iterdir():
        if path.is_file():
            assert SECRET_KEY.encode() not in path.read_bytes()


def test_each_put_carries_the_sha256_the_store_checks_and_no_payload_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shipper's client hashes no body: SigV4 signs ``UNSIGNED-PAYLOAD`` and the
    ``x-amz-checksum-sha256`` header, which is the manifest's digest for a segment (a real
    server on loopback records what the client sends)."""
    puts: list[tuple[str, dict[str, str], bytes]] = []

    async def put(request: web.Request) -> web.Response:
        puts.append((request.path, dict(request.headers), await request.read()))
        return web.Response(headers={"ETag": '"0"'})

    app = web.Application()
    app.router.add_put("/{key:.*}", put)
    with serve_in_thread(app, "recording-store") as url:
        monkeypatch.setenv("AWS_ENDPOINT_URL", url)
        shipper = Shipper(_options("sums"))
        shipper.start()
        writer = _write(tmp_path / "run-1", shipper, 20)
        writer.close()
        assert shipper.close(TIMEOUT)
    local = _files(tmp_path / "run-1")
    shipped = {path.rsplit("/", 1)[1]: body for path, _, body in puts}
    assert shipped == local and len(puts) >= 7  # bundle.json twice, >= 3 segments
    for path, headers, body in puts:
        assert headers["X-Amz-Content-SHA256"] == "UNSIGNED-PAYLOAD"
        signed = headers["Authorization"].split("SignedHeaders=")[1].split(",")[0]
        assert "x-amz-checksum-sha256" in signed.split(";")
        digest = base64.b64decode(headers["x-amz-checksum-sha256"])
        assert digest == hashlib.sha256(body).digest()
        assert not [h for h in headers if h.lower().startswith("x-amz-checksum-")
                    and h.lower() != "x-amz-checksum-sha256"]
        name = path.rsplit("/", 1)[1]
        if name.endswith(".jsonl"):
            manifest = json.loads(local[name.replace(".jsonl", ".manifest.json")])
            assert digest.hex() == manifest["fileSha256"]


def test_a_segment_changed_after_sealing_goes_as_it_is(
    tmp_path: Path, store: SeaweedStore
) -> None:
    """The manifest's digest no longer matches the file: the store refuses it and the
    shipper puts the file as it is (with its own digest); a file of another size than its
    manifest says is hashed at once. The readers find both do not match their manifests."""
    root = tmp_path / "evidence"
    first = Shipper(_options("changed"), client=_unreachable)
    first.start()
    writer = _write(root / "run-1", first, 30)
    writer.close()
    assert not first.close(1.0)
    one, two = root / "run-1" / "segment-000001.jsonl", root / "run-1" / "segment-000002.jsonl"
    one.write_bytes(one.read_bytes().replace(b'"pad":"xx', b'"pad":"yy', 1))  # same size
    two.write_bytes(two.read_bytes()[:-1])  # a byte cut
    second = Shipper(_options("changed"))
    assert second.resume(root, root / "run-2") == 1
    with capture_logs() as logs:
        second.start()
        assert second.close(TIMEOUT)
    assert _stored(store, "ship", "changed/v2/pod-a/run-1/") == _files(root / "run-1")
    changed = [entry["file"] for entry in logs if entry["event"] == "shipping.segment_changed"]
    assert changed == ["segment-000001.jsonl"]
    assert second.counters()["ship_failures"] == 0
    assert not verify_bundle(root / "run-1").ok
