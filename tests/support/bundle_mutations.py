"""Malformed evidence bundles for fuzzing the bundle reader and ``verify``.

A bundle is held as ``{file name: bytes}``; a mutation is a small tuple naming what to do
(flip a byte, cut a file, insert bytes, delete a file, replace a JSON field or a line with
arbitrary JSON, duplicate or swap lines, add a stray segment, put an impossible value at a
path of a record -- a finding boundary "bogus", a time of 1e20 or below zero -- or replace a
file with one that is not a regular file: a FIFO, a symlink to ``/dev/zero`` or out of the
bundle, a directory, a 20 GB sparse file; those are held as :data:`SPECIAL` markers and made
on disk by :func:`check`). :func:`random_mutations`
draws them from a ``random.Random`` (the long run in ``bench/fuzz_bundle.py``); the
hypothesis tests draw the same tuples from strategies. :func:`check` writes the bundle,
runs every reader on it and returns what went wrong: ``None`` when every outcome is a
report, a :class:`~mcp_tap.errors.BundleFormatError` or an
:class:`~mcp_tap.errors.InputError` with a one-line message.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
import traceback
from pathlib import Path
from typing import Any

import orjson

from mcp_tap.errors import BundleFormatError, InputError
from mcp_tap.evidence import EvidenceWriter, iter_records, read_bundle, verify_bundle
from mcp_tap.evidence.reader import RECORD_LIMIT_ENV

Mutation = tuple[Any, ...]
SPECIAL = b"\0special:"  # file bytes starting so are made as that kind of file on disk
SPECIAL_KINDS = ("fifo", "dev-zero", "outside", "directory", "sparse")
# Record paths a reader's consumers use, and values no writer writes there.
RECORD_PATHS = (("findings",), ("ingress", "receivedAt"), ("ingress", "forwardedAt"),
                ("origin", "status"), ("origin", "endAt"), ("origin", "sse"),
                ("egress", "sentAt"), ("ingress",), ("origin",))
IMPOSSIBLE = ("bogus", 1e20, -1, -1e-9, 2**70, 1e308, True, [], {},
              [{"rule": "x", "boundary": "bogus"}], [{"rule": 1}], [{"at": -5}],
              [{"rule": "x", "strength": "may"}], [{"at": 1e300}], "1700000000")
_WRITTEN: dict[Path, dict[str, bytes]] = {}  # what check() last wrote, per bundle directory
# Deterministic, non-secret fuzzing key (a raw Ed25519 seed).
FUZZ_KEY = bytes(range(50, 82))


_SEEDS: dict[bool, dict[str, bytes]] = {}


def seed_files(signed: bool) -> dict[str, bytes]:
    """:func:`seed_bundle`'s files, made once per process for each of signed and unsigned."""
    if signed not in _SEEDS:
        with tempfile.TemporaryDirectory() as root:
            _SEEDS[signed] = seed_bundle(Path(root), signed=signed)
    return _SEEDS[signed]


def seed_bundle(root: Path, *, signed: bool) -> dict[str, bytes]:
    """A small real bundle (two segments, a gap, an abrupt end) as ``{name: bytes}``."""
    path = root / "seed"
    writer = EvidenceWriter(path, max_segment_bytes=600, signing_key=FUZZ_KEY if signed else None)
    with writer:
        for n in range(6):
            writer.submit({"kind": "exchange", "hop": "edge", "method": "tools/call",
                           "rpcId": n, "body": {"nested": [n, {"deep": "x" * n}]}})
        writer.report_lost(2, "queue full")
        writer.submit({"kind": "exchange", "hop": "edge", "rpcId": 99})
    files = {p.name: p.read_bytes() for p in path.iterdir() if p.is_file()}
    shutil.rmtree(path)
    return files


def _json_value(rng: random.Random, depth: int = 0) -> Any:
    pick = rng.randrange(9 if depth < 3 else 6)
    if pick == 0:
        return None
    if pick == 1:
        return rng.choice([True, False])
    if pick == 2:
        return rng.choice([0, -1, 1, 2**53, 2**63 - 1, -(2**63), 7])
    if pick == 3:
        return rng.choice([0.5, -1e308, 1e-300, 3.0])
    if pick == 4:
        return rng.choice(["", "x", "\n", "\u2028", "a" * 300, "gap", "exchange", "closed",
                           "abrupt", "ed25519", "0" * 64])
    if pick == 5:
        return rng.randrange(-3, 1000)
    if pick == 6:
        return [_json_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if pick == 7:
        keys = ["seq", "prev", "digest", "kind", "lost", "reason", "format", "closed",
                "signing", "signature", "chainHead", "lastSeq", "segments", "end"]
        return {rng.choice(keys): _json_value(rng, depth + 1) for _ in range(rng.randrange(4))}
    return "[" * rng.randrange(200, 1200)  # a string that looks like deep nesting


def random_mutation(rng: random.Random, files: dict[str, bytes]) -> Mutation:
    """One mutation of ``files`` drawn from ``rng``."""
    names = sorted(files) or ["bundle.json"]
    name = rng.choice(names)
    size = len(files.get(name, b""))
    op = rng.randrange(10)
    if op == 0:
        return ("flip", name, rng.randrange(max(size, 1)), rng.randrange(1, 256))
    if op == 1:
        return ("cut", name, rng.randrange(max(size, 1)))
    if op == 2:
        junk = rng.choice([b"\n", b"{", b"}", b"\x00", b"\xff\xfe", b'"', b"[" * 2000,
                           b'{"seq":1}', rng.randbytes(rng.randrange(1, 40))])
        return ("insert", name, rng.randrange(size + 1), junk)
    if op == 3:
        return ("delete", name)
    if op == 4:
        keys = ["format", "closed", "signing", "signature", "bundleId", "segment", "count",
                "bytes", "fileSha256", "chainHead", "prevSegmentChainHead", "firstSeq",
                "lastSeq", "lost", "end", "inflight", "reason", "records", "segments"]
        return ("field", name, rng.choice(keys), _json_value(rng))
    if op == 5:
        return ("line", name, rng.randrange(8), _json_value(rng))
    if op == 6:
        return ("dupline", name, rng.randrange(8))
    if op == 7:
        return ("swap", name, rng.randrange(8), rng.randrange(8))
    if op == 8 and rng.random() < 0.3:
        return ("special", name, rng.choice(SPECIAL_KINDS))
    if op == 8 and rng.random() < 0.5:
        return ("record-path", name, rng.randrange(8), rng.choice(RECORD_PATHS),
                rng.choice(IMPOSSIBLE))
    if op == 8:
        return ("stray", rng.choice(["segment-000009.jsonl", "segment-000003.manifest.json",
                                     "segment-0000001.jsonl"]), rng.randbytes(rng.randrange(60)))
    return ("record-field", name, rng.randrange(8),
            rng.choice(["seq", "prev", "digest", "kind", "lost", "reason"]), _json_value(rng))


def random_mutations(rng: random.Random, files: dict[str, bytes]) -> list[Mutation]:
    """One to four mutations of ``files``."""
    return [random_mutation(rng, files) for _ in range(rng.randrange(1, 5))]


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def apply(files: dict[str, bytes], mutations: list[Mutation]) -> dict[str, bytes]:
    """Return a copy of ``files`` with ``mutations`` applied (ones that do not fit: skipped)."""
    out = dict(files)
    for mutation in mutations:
        op, name = mutation[0], mutation[1]
        data = out.get(name)
        if op == "stray":
            out[name] = mutation[2]
            continue
        if op == "special":
            out[name] = SPECIAL + mutation[2].encode()
            continue
        if data is None:
            continue
        if op == "flip" and data:
            at = mutation[2] % len(data)
            out[name] = data[:at] + bytes([data[at] ^ mutation[3]]) + data[at + 1:]
        elif op == "cut":
            out[name] = data[: mutation[2]]
        elif op == "insert":
            at = mutation[2] % (len(data) + 1)
            out[name] = data[:at] + mutation[3] + data[at:]
        elif op == "delete":
            del out[name]
        elif op == "field":
            try:
                value = orjson.loads(data)
            except orjson.JSONDecodeError:
                continue
            if isinstance(value, dict):
                value[mutation[2]] = mutation[3]
                out[name] = orjson.dumps(value)
        elif op == "record-path":
            lines = _lines(data)
            index = mutation[2] % len(lines)
            try:
                record = orjson.loads(lines[index])
            except orjson.JSONDecodeError:
                continue
            if not isinstance(record, dict):
                continue
            node = record
            *parents, last = mutation[3]
            for key in parents:
                child = node.get(key)
                node[key] = child = child if isinstance(child, dict) else {}
                node = child
            node[last] = mutation[4]
            lines[index] = json.dumps(record, separators=(",", ":")).encode()  # 2**70 too
            out[name] = b"\n".join(lines)
        elif op in ("line", "dupline", "swap", "record-field"):
            lines = _lines(data)
            index = mutation[2] % len(lines)
            if op == "line":
                lines[index] = orjson.dumps(mutation[3])
            elif op == "dupline":
                lines.insert(index, lines[index])
            elif op == "swap":
                other = mutation[3] % len(lines)
                lines[index], lines[other] = lines[other], lines[index]
            else:
                try:
                    record = orjson.loads(lines[index])
                except orjson.JSONDecodeError:
                    continue
                if isinstance(record, dict):
                    record[mutation[3]] = mutation[4]
                    lines[index] = orjson.dumps(record)
            out[name] = b"\n".join(lines)
    return out


def _one_line(exc: Exception) -> str | None:
    text = str(exc)
    return None if text and "\n" not in text else f"{type(exc).__name__} message: {text!r}"


def check(root: Path, files: dict[str, bytes],
          original: dict[str, bytes] | None = None) -> str | None:
    """Write ``files`` as a bundle under ``root`` and run every reader; None if all is well.

    With ``original`` (the signed seed), a segment file changed or deleted must also make
    ``verify --trust`` fail: a holder of the disk cannot alter signed records unnoticed.
    """
    bundle = root / "bundle"
    bundle.mkdir(parents=True, exist_ok=True)
    # Cheaper than a new directory per input: remove what is stale, write what changed.
    on_disk = _WRITTEN.setdefault(bundle, {})
    for name in list(on_disk):
        if name not in files or files[name] != on_disk[name]:
            _remove(bundle / name)
            del on_disk[name]
    for name, data in files.items():
        if on_disk.get(name) != data:
            _make(bundle / name, data)
            on_disk[name] = data
    return check_bundle(bundle, files, original)


def check_bundle(bundle: Path, files: dict[str, bytes],
                 original: dict[str, bytes] | None = None) -> str | None:
    """Run every reader on the bundle at ``bundle`` (a directory, or a
    :class:`~mcp_tap.evidence.storepath.StorePath` whose objects hold ``files``); None if
    all is well (see :func:`check`)."""
    trusted = [bytes.fromhex(_public_hex())]
    calls = [
        ("verify", lambda: verify_bundle(bundle)),
        ("read_bundle lenient", lambda: read_bundle(bundle, lenient=True)),
        ("iter_records", lambda: sum(1 for _ in iter_records(bundle))),
    ]
    if original is not None:
        calls.append(("verify --trust", lambda: verify_bundle(bundle, trusted_keys=trusted)))
    # A small record limit, so a sparse segment without a manifest is refused after a MiB.
    saved = os.environ.get(RECORD_LIMIT_ENV)
    os.environ[RECORD_LIMIT_ENV] = str(1 << 20)
    try:
        return _run_calls(calls, files, original)
    finally:
        if saved is None:
            del os.environ[RECORD_LIMIT_ENV]
        else:
            os.environ[RECORD_LIMIT_ENV] = saved


def _run_calls(calls: list[tuple[str, Any]], files: dict[str, bytes],
               original: dict[str, bytes] | None) -> str | None:
    for label, call in calls:
        try:
            result = call()
        except (BundleFormatError, InputError) as exc:
            wrong = _one_line(exc)
            if wrong is not None:
                return f"{label}: {wrong}"
            continue
        except Exception:  # noqa: BLE001 - a crash is exactly what the fuzzer looks for
            return f"{label} crashed:\n{traceback.format_exc()}"
        problems = getattr(result, "problems", [])
        for problem in problems:
            if "\n" in problem.message or not problem.message:
                return f"{label}: problem message not one line: {problem.message!r}"
        if label.startswith("verify") and result.ok and any(
                p.severity == "error" for p in result.problems):
            return f"{label}: ok with error problems"
        if label == "verify --trust" and result.ok and original is not None and any(
                name.startswith("segment-") and name.endswith(".jsonl")
                and files.get(name) != data for name, data in original.items()):
            return f"{label}: a changed segment verified as ok"
    return None


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _make(path: Path, data: bytes) -> None:
    """Write ``data`` at ``path``, or make the special file a :data:`SPECIAL` marker names."""
    kind = data[len(SPECIAL):].decode(errors="replace") if data.startswith(SPECIAL) else ""
    if kind not in SPECIAL_KINDS:  # (a later mutation may have changed a marker's bytes)
        path.write_bytes(data)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "outside":  # a readable file out of the bundle (beside it, the fuzzer's)
        outside = path.parent.parent / "outside.txt"
        if not outside.exists():
            outside.write_bytes(b'{"kind":"exchange","seq":0,"prev":"","digest":"x"}\n')
        path.symlink_to(outside)
    elif kind == "directory":
        path.mkdir()
    else:  # sparse: 20 GB of nothing, no newline anywhere
        with open(path, "wb") as handle:
            handle.truncate(20 * 1024**3)


def _public_hex() -> str:
    from mcp_tap.keys import ed25519_public_hex

    return ed25519_public_hex(FUZZ_KEY)
