"""How fast the gate library decides, and in how much memory, on large generated bundles.

Writes ``--bundles`` bundles of ``--exchanges`` exchange records each with the real
:class:`~mcp_tap.evidence.EvidenceWriter` (the proxy's writer: chained digests, rotating
segments, manifests, closing summary), a policy and HMAC-attested rollback evidence, then
runs ``mcp-tap gate --json`` on them in a child process per ``--workers`` value and prints
exchanges/s, exchanges/s per core used and the child's peak RSS.

The records are shaped like the proxy's: a modern ``tools/list`` as JSON, a ``tools/call``
answered over SSE with a progress notification and a result unique to the exchange (so the
SDK differential cannot reuse an earlier outcome for it), one exchange in 50 with a finding.

    .venv/bin/python bench/gate_speed.py                       # 2 x 100,000 exchanges
    .venv/bin/python bench/gate_speed.py --exchanges 1000000 --bundles 1
    .venv/bin/python bench/gate_speed.py --keep DIR            # keep the bundles in DIR
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

T0 = 1_733_150_000.0
SIGNER = "bench@example"
KEY_ENV = "MCP_TAP_BENCH_ROLLBACK_KEY"
KEY = "mcp-tap bench rollback key, not a secret"  # a fixture key for the benchmark only
MODERN = "2026-07-28"


def _exchange(n: int) -> dict[str, Any]:
    received = T0 + n * 0.02
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN}
    common = {"kind": "exchange", "hop": "edge", "exchangeId": f"x{n:08d}",
              "traceId": f"{n:032x}", "client": "127.0.0.1", "era": "modern", "rpcId": n,
              "tapError": None, "findings": []}
    if n % 2:
        result = {"resultType": "complete", "content": [{"type": "text", "text": f"counted {n}"}],
                  "isError": False}
        record = {**common, "method": "tools/call",
                  "ingress": {"httpMethod": "POST", "path": "/mcp", "headers": [],
                              "body": {"jsonrpc": "2.0", "id": n, "method": "tools/call",
                                       "params": {"name": "count", "arguments": {"n": 2},
                                                  "_meta": meta}},
                              "receivedAt": received},
                  "origin": {"status": 200, "headers": [], "contentType": "text/event-stream",
                             "body": None, "sse": [
                                 {"at": received + 0.002, "data": {
                                     "jsonrpc": "2.0", "method": "notifications/progress",
                                     "params": {"progressToken": n, "progress": 1}}},
                                 {"at": received + 0.004, "data": {
                                     "jsonrpc": "2.0", "id": n, "result": result}}],
                             "firstByteAt": received + 0.001, "endAt": received + 0.004},
                  "egress": {"status": 200, "headers": [], "sentAt": received + 0.001,
                             "endAt": received + 0.004}}
    else:
        result = {"resultType": "complete", "ttlMs": 0, "cacheScope": "private",
                  "tools": [{"name": "echo", "description": "Echo",
                             "inputSchema": {"type": "object"}}]}
        record = {**common, "method": "tools/list",
                  "ingress": {"httpMethod": "POST", "path": "/mcp", "headers": [],
                              "body": {"jsonrpc": "2.0", "id": n, "method": "tools/list",
                                       "params": {"_meta": meta}},
                              "receivedAt": received},
                  "origin": {"status": 200, "headers": [], "contentType": "application/json",
                             "body": {"jsonrpc": "2.0", "id": n, "result": result},
                             "firstByteAt": received + 0.001, "endAt": received + 0.002},
                  "egress": {"status": 200, "headers": [], "sentAt": received + 0.002,
                             "endAt": received + 0.002}}
    if n % 50 == 0:
        record["findings"] = [{"rule": "response.id", "code": -32603, "boundary": "response",
                               "message": "bench", "where": "origin"}]
    return record


def write_bundle(path: Path, exchanges: int, first: int) -> Path:
    """Write one bundle of ``exchanges`` records numbered from ``first``."""
    from mcp_tap.evidence import EvidenceWriter

    with EvidenceWriter(path, max_segment_bytes=64 * 1024 * 1024) as writer:
        for n in range(first, first + exchanges):
            while not writer.submit(_exchange(n)):  # never lose a record: wait for the disk
                writer.flush()
            if n % 5000 == 0:
                writer.flush()
    return path


def write_inputs(root: Path) -> tuple[Path, Path]:
    """Write the policy and attested rollback evidence; return their paths."""
    from mcp_tap.gate.attest import attest_hmac

    policy = root / "policy.toml"
    policy.write_text(f'[conformance]\nallow = ["response.id"]\n\n[rollback]\n'
                      f'trusted_signers = ["{SIGNER}"]\nhmac_key_env = "{KEY_ENV}"\n')
    payload = orjson.loads((Path(__file__).parent.parent / "examples/rollback.json").read_bytes())
    rollback = root / "rollback.json"
    rollback.write_bytes(orjson.dumps(attest_hmac(payload, SIGNER, KEY.encode())))
    return policy, rollback


def run_gate(bundles: list[Path], policy: Path, rollback: Path, workers: int) -> dict[str, Any]:
    """Run the gate in a child process; return its action, wall time and peak RSS."""
    code = ("import sys, orjson\nfrom pathlib import Path\n"
            "from mcp_tap.gate import evaluate_files\n"
            "d = evaluate_files([Path(p) for p in sys.argv[3:]], Path(sys.argv[1]), "
            "Path(sys.argv[2]), workers=WORKERS)\n"
            "print(orjson.dumps(d.to_json()).decode())\n").replace("WORKERS", str(workers))
    env = {**os.environ, KEY_ENV: KEY}
    started = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-c", code, str(policy), str(rollback),
                           *map(str, bundles)], capture_output=True, env=env, timeout=3600,
                          check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"gate failed: {done.stderr.decode()[-2000:]}")
    decision = orjson.loads(done.stdout)
    return {"action": decision["action"], "wall": wall,
            "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "exchanges": decision["sources"]["conformance"]["exchanges"],
            # ru_maxrss of children is the largest single child (KiB on Linux).
            "peak_rss_mb": after.ru_maxrss / 1024}


def stages(bundle: Path) -> None:
    """Print the CPU time of each stage of the gate on one bundle, in this process."""
    from mcp_tap.evidence import iter_records, verify_bundle
    from mcp_tap.gate.health import WindowTally
    from mcp_tap.gate.policy import Policy
    from mcp_tap.gate.tally import ConformanceTally, HopTally, SdkTally
    from mcp_tap.sdkdiff import DEFAULT_ALLOWLIST, SdkDiffTally

    policy = Policy()
    started = time.process_time()
    verify_bundle(bundle)
    verify = time.process_time() - started
    started = time.process_time()
    count = sum(1 for _ in iter_records(bundle))
    read = time.process_time() - started
    conformance, hop = ConformanceTally(), HopTally()
    window, sdk = WindowTally(policy.health.counting), SdkTally()
    started = time.process_time()
    for record in iter_records(bundle):
        conformance.add(record)
        hop.add(record)
        window.add(record)
    window.window()
    tallies = time.process_time() - started - read
    started = time.process_time()
    differ = SdkDiffTally(DEFAULT_ALLOWLIST)
    for record in iter_records(bundle):
        differ.add(record)
    sdk.add_report(differ.report())
    differential = time.process_time() - started - read
    for name, seconds in (("verify", verify), ("read", read), ("tallies", tallies),
                          ("sdk differential", differential)):
        print(f"  {name}: {seconds:.2f} CPU-s = {count / seconds:,.0f} exchanges/s")
    gate_only = read + tallies
    print(f"  the gate's own streaming pass (read + tallies): {count / gate_only:,.0f}/s")


def main() -> None:
    """Generate the bundles, run the gate per worker count, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exchanges", type=int, default=100_000, help="per bundle")
    parser.add_argument("--bundles", type=int, default=2)
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts")
    parser.add_argument("--keep", type=Path, help="write the bundles here and keep them")
    parser.add_argument("--stages", action="store_true",
                        help="also print the CPU time of each stage on the first bundle")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="mcp-tap-gate-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    bundles = []
    started = time.perf_counter()
    for index in range(args.bundles):
        path = root / f"bundle-{index}"
        if not (path / "bundle.json").exists():
            write_bundle(path, args.exchanges, index * args.exchanges)
        bundles.append(path)
    size = sum(f.stat().st_size for b in bundles for f in b.iterdir())
    print(f"bundles: {args.bundles} x {args.exchanges:,} exchanges, {size / 1e6:.0f} MB "
          f"({time.perf_counter() - started:.1f} s to write or find)")
    policy, rollback = write_inputs(root)
    if args.stages:
        print("stages (first bundle, one process):")
        stages(bundles[0])
    for workers in (int(w) for w in args.workers.split(",")):
        r = run_gate(bundles, policy, rollback, workers)
        cores = min(workers, args.bundles, os.cpu_count() or 1)
        print(f"workers {workers}: {r['action']}, {r['exchanges']:,} exchanges in "
              f"{r['wall']:.2f} s = {r['exchanges'] / r['wall']:,.0f}/s, "
              f"{r['exchanges'] / r['cpu']:,.0f}/s per CPU-second ({cores} core(s)), "
              f"peak RSS {r['peak_rss_mb']:.0f} MB")


if __name__ == "__main__":
    main()
