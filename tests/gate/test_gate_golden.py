"""The gate's decision, the SDK differential's report and verify's findings on fixed bundles,
compared with what the code gave before the offline path was made faster
(``tests/data/gate_golden.json``): every check and every tally must give the same JSON.

The bundles hold the proxy's own records (``tests/data/proxy_exchanges.jsonl``, written by
``mcp-tap demo --drive``: JSON and SSE answers, both eras, findings), the varied shapes of
:mod:`test_gate_fields` and results the SDK differential reports (a member the SDK drops, a
result it rejects), signed and unsigned, intact and damaged, with a baseline.

Regenerate (only when a decision is meant to change): ``.venv/bin/python
tests/gate/test_gate_golden.py --write``.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import orjson
from gate_bundles import exchange, healthy
from test_gate_fields import KEY, _bundle, _varied

from mcp_tap.evidence import EvidenceWriter, verify_bundle
from mcp_tap.gate import GateRequest, evaluate
from mcp_tap.gate.policy import EvidencePolicy, Policy
from mcp_tap.keys import ed25519_public_hex
from mcp_tap.sdkdiff import diff_bundles

DATA = Path(__file__).parents[1] / "data"
GOLDEN = DATA / "gate_golden.json"


def _records() -> list[dict[str, Any]]:
    proxy = [orjson.loads(line) for line in (DATA / "proxy_exchanges.jsonl").read_bytes()
             .splitlines()]
    records = _varied()
    for n in range(40):  # the proxy's records again and again, as a busy capture repeats them
        record = copy.deepcopy(proxy[n % len(proxy)])
        record["exchangeId"] = f"p{n:04d}"
        record["hop"] = "edge"  # one hop, as the health window needs
        records.append(record)
    extra = exchange(100, tool={"name": "echo", "inputSchema": {"type": "object"},
                                "x-vendor": {"flag": True}})  # a member the SDK drops
    rejected = exchange(101)
    rejected["origin"]["body"]["result"]["tools"] = "not a list"  # the SDK rejects it
    nested = exchange(102, tool={"name": "deep", "inputSchema": {"type": "object"},
                                 "annotations": {"title": "T", "x": [1, {"y": None}]}})
    records += [extra, rejected, copy.deepcopy(extra), nested, copy.deepcopy(rejected)]
    return records


def _unsigned(path: Path, records: list[dict[str, Any]]) -> Path:
    with EvidenceWriter(path) as writer:
        for record in records:
            assert writer.submit(copy.deepcopy(record))
    return path


def _damaged(path: Path, records: list[dict[str, Any]]) -> Path:
    bundle = _bundle(path, records)
    segment = sorted(bundle.glob("segment-*.jsonl"))[0]
    data = bytearray(segment.read_bytes())
    at = data.index(b'"tools":[', len(data) // 2) + 12
    data[at] ^= 0x01  # one flipped byte inside a result
    segment.write_bytes(bytes(data))
    return bundle


def outcomes(tmp: Path) -> dict[str, Any]:
    """Every JSON this test pins, from bundles written under ``tmp``."""
    records = _records()
    signed = _bundle(tmp / "signed", records)
    unsigned = _unsigned(tmp / "unsigned", records)
    damaged = _damaged(tmp / "damaged", records)
    baseline = healthy(tmp / "baseline", 30)
    trusted = Policy(evidence=EvidencePolicy(
        trusted_keys=(bytes.fromhex(ed25519_public_hex(KEY)),), require_signed=True))

    def gate(evidence: tuple[Path, ...], policy: Policy, base: tuple[Path, ...] = ()
             ) -> dict[str, Any]:
        request = GateRequest(evidence=evidence, policy=policy, baseline=base)
        decision: dict[str, Any] = evaluate(request, workers=1).to_json()
        return decision

    return {
        "gate signed, key trusted": gate((signed,), trusted),
        "gate signed, no key trusted": gate((signed,), Policy()),
        "gate unsigned": gate((unsigned,), Policy()),
        "gate unsigned, key required": gate((unsigned,), trusted),
        "gate damaged, key trusted": gate((damaged,), trusted),
        "gate two bundles and a baseline": gate((signed, unsigned), trusted, (baseline,)),
        "sdk-diff": diff_bundles([signed], jobs=1).to_json(),
        "verify damaged": [p.to_json() for p in verify_bundle(
            damaged, trusted_keys=trusted.evidence.trusted_keys).problems],
    }


def _normalised(value: Any) -> Any:
    """``value`` through JSON (tuples become lists, as in the stored file)."""
    return orjson.loads(orjson.dumps(value))


def test_outcomes_unchanged(tmp_path: Path) -> None:
    expected = orjson.loads(GOLDEN.read_bytes())
    got = _normalised(outcomes(tmp_path))
    assert sorted(got) == sorted(expected)
    for name, value in expected.items():
        assert got[name] == value, name


if __name__ == "__main__":
    import tempfile

    if sys.argv[1:] != ["--write"]:
        raise SystemExit("usage: test_gate_golden.py --write")
    with tempfile.TemporaryDirectory() as tmp:
        GOLDEN.write_bytes(orjson.dumps(_normalised(outcomes(Path(tmp))),
                                        option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
                           + b"\n")
