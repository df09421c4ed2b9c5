"""Sharded full verification (verify --shard I/N, verify --merge): the shares merged give the
verdict, counts and problems an unsharded verify gives, intact or damaged, for any N."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from gate_bundles import exchange
from releases import run

from mcp_tap.errors import InputError
from mcp_tap.evidence import EvidenceWriter, verify_bundle
from mcp_tap.evidence.shards import merge_shards, parse_shard, verify_shard
from mcp_tap.evidence.signing import Signer

SEED = bytes(range(32, 64))  # a deterministic, non-secret test key (raw Ed25519 seed)


def _bundles(root: Path, signed: bool = True) -> Path:
    for name, count in (("pod-a", 90), ("pod-b", 40)):
        with EvidenceWriter(root / name, signing_key=SEED if signed else None,
                            max_segment_bytes=12_000) as writer:
            for n in range(count):
                assert writer.submit(exchange(n))
            writer.report_lost(3, "queue full")
    return root


def _flip(bundle: Path) -> None:
    segment = bundle / "segment-000003.jsonl"
    data = bytearray(segment.read_bytes())
    data[len(data) // 3] ^= 0x01
    segment.write_bytes(bytes(data))


def _drop_line(bundle: Path) -> None:
    segment = bundle / "segment-000002.jsonl"
    lines = segment.read_bytes().splitlines(keepends=True)
    segment.write_bytes(b"".join(lines[:2] + lines[3:]))


def _cut_last(bundle: Path) -> None:
    segment = max(bundle.glob("segment-*.jsonl"))
    segment.write_bytes(segment.read_bytes()[:-7])


DAMAGE: dict[str, Callable[[Path], None]] = {
    "intact": lambda bundle: None,
    "flipped byte": _flip,
    "segment deleted": lambda b: [(b / f"segment-000002{x}").unlink()
                                  for x in (".jsonl", ".manifest.json")] and None,
    "manifest deleted": lambda b: (b / "segment-000002.manifest.json").unlink(),
    "trailing segment deleted": lambda b: [p.unlink() for p in sorted(b.glob("segment-*"))[-2:]]
    and None,
    "record deleted": _drop_line,
    "last line cut": _cut_last,
    "bundle.json edited": lambda b: (b / "bundle.json").write_bytes(
        (b / "bundle.json").read_bytes().replace(b'"format":2', b'"format": 2')),
}


def _summary(report: Any) -> dict[str, Any]:
    return {"ok": report.ok, "records": report.records, "segments": report.segments,
            "exchanges": report.exchanges, "lost": report.lost, "head": report.chain_head,
            "signer": report.signer, "end": report.end,
            "problems": Counter((p.kind, p.severity) for p in report.problems)}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("trust", [False, True])
def test_merged_shards_verify_as_one_pass(tmp_path: Path, damage: str, trust: bool) -> None:
    root = _bundles(tmp_path / "evidence", signed=damage != "bundle.json edited" or trust)
    DAMAGE[damage](root / "pod-a")
    keys = [bytes.fromhex(Signer(SEED).public_hex)] if trust else []
    whole = [verify_bundle(b, trusted_keys=keys) for b in sorted(root.iterdir())]
    assert len(list((root / "pod-b").glob("segment-*.jsonl"))) >= 3
    for count in (1, 2, 3, 7):
        results = [orjson.loads(orjson.dumps(verify_shard(str(root), i, count,
                                                          trusted_keys=keys)))
                   for i in range(count)]
        merged = merge_shards(results[::-1])
        assert [_summary(r) for r in merged] == [_summary(r) for r in whole], (damage, count)
        if damage == "intact":
            assert [r.problems for r in merged] == [r.problems for r in whole]


def test_the_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _bundles(tmp_path / "evidence")
    _flip(root / "pod-a")
    outs = [tmp_path / f"shard-{i}.json" for i in range(3)]
    codes = [run(["verify", str(root), "--shard", f"{i}/3", "--out", str(out)], capsys)[0]
             for i, out in enumerate(outs)]
    assert set(codes) <= {0, 1} and all(out.stat().st_size for out in outs)
    code, out, _ = run(["verify", "--merge", *map(str, outs), "--format", "json"], capsys)
    whole_code, whole_out, _ = run(["verify", str(root), "--format", "json"], capsys)
    assert (code, whole_code) == (1, 1)
    merged, whole = orjson.loads(out), orjson.loads(whole_out)
    assert [b["ok"] for b in merged] == [b["ok"] for b in whole] == [False, False]
    lines = tmp_path / "shards.jsonl"  # kubectl logs of the Indexed Job's pods
    lines.write_bytes(b"".join(out.read_bytes() for out in outs))
    assert run(["verify", "--merge", str(lines), "--format", "json"], capsys)[1] == out
    code, _, err = run(["verify", "--merge", *map(str, outs[:2])], capsys)
    assert code == 2 and "shards [2] missing" in err


@pytest.mark.parametrize("text", ["3/3", "-1/2", "a/b", "1", "0/0", "0/10001"])
def test_bad_shard(text: str) -> None:
    with pytest.raises(InputError, match="--shard"):
        parse_shard(text)
