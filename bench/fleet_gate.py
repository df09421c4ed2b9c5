"""The gate at fleet scale, on evidence the real proxy wrote: tallies against a full read,
this version against ``before`` (a ``git archive`` of an earlier commit).

How the fleet is built (nothing generated):

1. ``bench/proxy_capture.py`` drives two real taps (``mcp-tap proxy`` processes, one in
   front of a JSON demo origin, one in front of an SSE one) with real MCP SDK clients in both
   eras (half the sessions legacy: ``initialize``, ``Mcp-Session-Id`` redacted to keyed
   pseudonym tags) until ``--capture`` exchanges are recorded; the taps are stopped with
   SIGTERM (closed, signed bundles).
2. Pod 0: every record of those bundles, in order, submitted again (again and again until
   ``--per-pod`` exchanges) to the real ``EvidenceWriter`` with its own Ed25519 key and the
   recording process's tallier (:class:`mcp_tap.gate.segments.SegmentTally`), in 64 MiB
   segments as the proxy writes them. Only ``seq``, ``prev`` and ``digest`` are the
   writer's anew (it assigns them to every record); the records are the proxy's.
3. Pods 1..N-1: pod 0's segment files, hard-linked, with ``bundle.json`` and every manifest
   re-signed by the writer's :class:`~mcp_tap.evidence.signing.Signer` under the pod's own
   key and a fresh ``bundleId`` (a distinct, verifiable bundle per pod; same records).
   ``--write-every-pod`` writes every pod as step 2 instead (slower, same figures).

Measured, each in a fresh interpreter (CPU = user + system of the process and its worker
processes; peak RSS of the process): ``gate`` on the fleet (tallies), ``gate --full``,
``gate --full --rerun-sdk`` and ``verify`` on pod 0, the same with ``before`` (the full
reads alternating for ``--rounds`` rounds); and ``verify`` of a ``--legacy``-exchange
unsigned bundle of the capture's records (legacy sessions: the number screen's case).

    .venv/bin/python bench/fleet_gate.py --work /tmp/fleet               # 20 x 500,000
    .venv/bin/python bench/fleet_gate.py --work /tmp/fleet --pods 4 --per-pod 100000
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import os
import resource
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
BEFORE = "975871f"
RB_KEY_ENV = "MCP_TAP_BENCH_ROLLBACK_KEY"
RB_KEY = "mcp-tap bench rollback key, not a secret"  # a fixture key for the benchmark only
SIGNER = "bench@example"


def pod_seed(pod: int) -> bytes:
    """Pod ``pod``'s signing key: fixed per pod, not a secret."""
    return bytes((pod * 7 + i) % 256 for i in range(32))


def capture_records(capture: Path, exchanges: int) -> list[Path]:
    """The proxy-written bundles (made once, kept in ``capture``)."""
    if not capture.exists():
        sys.path.insert(0, str(ROOT / "bench"))
        from proxy_capture import capture as run_capture

        print(f"capturing {exchanges} exchanges through the real proxy ...", flush=True)
        print(orjson.dumps(run_capture(capture, exchanges)).decode(), flush=True)
    return sorted(p.parent for p in capture.glob("*/*/bundle.json"))


def _records(bundles: list[Path], legacy_only: bool = False) -> list[dict[str, Any]]:
    from mcp_tap.evidence import iter_records

    out = []
    for bundle in bundles:
        for record in iter_records(bundle):
            if legacy_only and record.get("era") != "legacy":
                continue
            out.append({k: v for k, v in record.items() if k not in ("seq", "prev", "digest")})
    return out


def write_bundle(path: Path, records: list[dict[str, Any]], exchanges: int, *,
                 seed: bytes | None, tallies: bool = True) -> dict[str, Any]:
    """``records`` again and again into a new bundle until ``exchanges`` exchange records;
    the writer's CPU seconds."""
    from mcp_tap.evidence import EvidenceWriter
    from mcp_tap.gate.segments import SegmentTally

    written = 0
    cpu = time.process_time()
    writer = EvidenceWriter(path, signing_key=seed, tallies=SegmentTally if tallies else None)
    writer.start(inline=True)
    batch: list[dict[str, Any]] = []
    for record in itertools.cycle(records):
        batch.append(dict(record))
        written += record.get("kind") == "exchange"
        if len(batch) == 64 or written >= exchanges:
            writer.submit_many(batch, owned=True)
            batch = []
        if written >= exchanges:
            break
    writer.close()
    return {"exchanges": written, "writerCpuSeconds": round(time.process_time() - cpu, 2)}


def resign(source: Path, target: Path, seed: bytes) -> None:
    """Pod ``target``: ``source``'s segments hard-linked, bundle.json and manifests signed
    anew under ``seed`` with a fresh bundle id (see the module docstring)."""
    from mcp_tap.evidence.signing import Signer

    signer = Signer(seed)
    bundle_id = secrets.token_hex(16)
    target.mkdir(parents=True)
    for path in sorted(source.iterdir()):
        if path.suffix == ".jsonl":
            os.link(path, target / path.name)
            continue
        value = orjson.loads(path.read_bytes())
        value["bundleId"] = bundle_id
        if path.name == "bundle.json":
            value["signing"] = signer.signing()
        (target / path.name).write_bytes(orjson.dumps(signer.sign(value)))


def policy_file(work: Path, pods: int) -> Path:
    from mcp_tap.evidence.signing import Signer

    keys = ", ".join(f'"{Signer(pod_seed(p)).public_hex}"' for p in range(pods))
    path = work / "policy.toml"
    path.write_text(f"""
[health]
min_samples = 100
max_error_rate = 0.01
max_latency_ms = 1000.0
min_observation_seconds = 0.0

[evidence]
trusted_keys = [{keys}]

[rollback]
trusted_signers = ["{SIGNER}"]
hmac_key_env = "{RB_KEY_ENV}"
""")
    return path


def rollback_file(work: Path) -> Path:
    from mcp_tap.gate.attest import attest_hmac

    path = work / "rollback.json"
    payload = {"previousVersion": "1.4.2", "admissionEvidenceDigest": "a" * 64,
               "artifactSha256": "b" * 64, "descriptorSha256": "c" * 64,
               "registryStatus": "active", "healthy": True,
               "routeRestoration": ["route 100% of /mcp to 1.4.2"]}
    path.write_bytes(orjson.dumps(attest_hmac(payload, SIGNER, RB_KEY.encode())))
    return path


def _peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def child(code_root: str, argv: list[str]) -> None:
    """Run ``mcp-tap ARGV`` from ``code_root`` in this fresh interpreter; print its CPU
    (this process and its workers), peak RSS and JSON output."""
    sys.path.insert(0, code_root)
    from mcp_tap.cli import main as cli

    def cpu() -> float:
        me, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF,
                                                    resource.RUSAGE_CHILDREN))
        return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime

    out = io.StringIO()
    began, wall = cpu(), time.monotonic()
    with contextlib.redirect_stdout(out):
        try:
            code = cli(argv)
        except SystemExit as exc:
            code = int(exc.code or 0)
    spent = cpu() - began
    kids_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    text = out.getvalue()
    try:
        output = orjson.loads(text)
    except orjson.JSONDecodeError:
        output = text[-2000:]
    print(orjson.dumps({"code": code, "cpuSeconds": round(spent, 2),
                        "wallSeconds": round(time.monotonic() - wall, 2),
                        "peakRssMB": _peak_rss_mb(), "workersPeakRssMB": round(kids_rss, 1),
                        "output": output}).decode())


def measure(code_root: Path, argv: list[str]) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(code_root), **{RB_KEY_ENV: RB_KEY})
    done = subprocess.run([sys.executable, __file__, "_child", str(code_root), *argv],
                          env=env, capture_output=True, text=True, timeout=7200, check=False)
    if done.returncode:
        raise SystemExit(f"measurement failed: {argv}\n{done.stderr[-3000:]}")
    result: dict[str, Any] = orjson.loads(done.stdout.strip().splitlines()[-1])
    return result


def before_tree(work: Path, commit: str = BEFORE) -> Path:
    tree = work / ("before" if commit == BEFORE else f"before-{commit}")
    if not tree.exists():
        tree.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def _gate_summary(result: dict[str, Any], exchanges: int) -> dict[str, Any]:
    out = result["output"]
    summary = {k: result[k] for k in ("cpuSeconds", "wallSeconds", "peakRssMB",
                                      "workersPeakRssMB")}
    summary["exchangesPerCpuSecond"] = round(exchanges / result["cpuSeconds"])
    if isinstance(out, dict) and "action" in out:
        summary["action"] = out["action"]
        summary["reasons"] = sorted({r["rule"] for r in out["reasons"]})
        summary["reading"] = out.get("reading")
    elif isinstance(out, dict):
        summary["ok"] = out.get("ok")
    elif isinstance(out, list):
        summary["ok"] = all(b.get("ok") for b in out)
    return summary


def build_fleet(work: Path, args: argparse.Namespace) -> tuple[list[Path], dict[str, Any]]:
    bundles = capture_records(work / "capture", args.capture)
    records = _records(bundles)
    fleet = work / f"fleet-{args.pods}x{args.per_pod}"
    pods = [fleet / f"pod-{p:02d}" for p in range(args.pods)]
    facts: dict[str, Any] = {"capturedBundles": len(bundles), "capturedRecords": len(records),
                             "capturedExchanges": sum(r.get("kind") == "exchange"
                                                      for r in records)}
    if not fleet.exists():
        # What the tallies cost the recording process: the writer with and without them.
        sample = min(args.per_pod, 100_000)
        costs = [write_bundle(work / f"tally-cost-{on}", records, sample, seed=pod_seed(0),
                              tallies=on)["writerCpuSeconds"] for on in (False, True)]
        facts["writerUsPerExchange"] = {"withoutTallies": round(costs[0] / sample * 1e6, 1),
                                        "withTallies": round(costs[1] / sample * 1e6, 1)}
        facts["pod0"] = write_bundle(pods[0], records, args.per_pod, seed=pod_seed(0))
        for p, pod in enumerate(pods[1:], 1):
            if args.write_every_pod:
                write_bundle(pod, records, args.per_pod, seed=pod_seed(p))
            else:
                resign(pods[0], pod, pod_seed(p))
    return pods, facts


def store_runs(fleet: Path, pods: list[Path], gate: list[str], total: int) -> dict[str, Any]:
    """The same fleet shipped to a real SeaweedFS on loopback (the test suite's
    ``tests/support/seaweed.py``): the gate from tallies over ``s3://`` against the
    directory. CPU is mcp-tap's (the store's own is not counted); wall time includes the
    store's answers."""
    import tempfile

    sys.path.insert(0, str(ROOT / "tests" / "support"))
    from seaweed import seaweed_store

    results: dict[str, Any] = {}
    with seaweed_store(Path(tempfile.mkdtemp(prefix="bench-store-"))) as store:
        store.make_bucket("bench")
        client = store.client()
        for pod in pods:
            for path in sorted(pod.iterdir()):
                client.upload_file(str(path), "bench", f"fleet/{pod.name}/run-1/{path.name}")
        saved = dict(os.environ)
        os.environ.update(store.env)
        try:
            results["gate fleet (tallies) from the store"] = _gate_summary(
                measure(ROOT, [*gate, "s3://bench/fleet"]), total)
            results["gate pod 0 --full from the store"] = _gate_summary(
                measure(ROOT, [*gate, "--full", f"s3://bench/fleet/{pods[0].name}"]),
                total // len(pods))
        finally:
            os.environ.clear()
            os.environ.update(saved)
    return results


def full_reads(work: Path, args: argparse.Namespace, gate: list[str], pod: Path
               ) -> dict[str, Any]:
    """``gate --full`` (the SDK outcome of signed segments from their tallies), ``gate --full
    --rerun-sdk`` and ``verify`` on one pod, with ``before``'s, alternating for ``--rounds``
    rounds: each one's median round (by CPU), with the rounds' CPU seconds beside it."""
    arms: dict[str, tuple[Path, list[str]]] = {
        "gate --full pod 0": (ROOT, [*gate, "--full", str(pod)]),
        "gate --full --rerun-sdk pod 0": (ROOT, [*gate, "--full", "--rerun-sdk", str(pod)]),
        "verify pod 0": (ROOT, ["verify", str(pod), "--format", "json"]),
    }
    if not args.no_before:
        before = before_tree(work, args.before)
        full = ["--full"] if args.before_full else []
        arms["before: gate pod 0" + (" --full" if full else "")] = (
            before, [*gate, *full, str(pod)])
        arms["before: verify pod 0"] = (before, ["verify", str(pod), "--format", "json"])
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in arms}
    for _ in range(args.rounds):
        for name, (root, argv) in arms.items():
            runs[name].append(measure(root, argv))
    results = {}
    for name, done in runs.items():
        done.sort(key=lambda r: r["cpuSeconds"])
        summary = _gate_summary(done[len(done) // 2], args.per_pod)
        summary["roundsCpuSeconds"] = [r["cpuSeconds"] for r in done]
        results[name] = summary
    return results


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    pods, facts = build_fleet(work, args)
    policy, rollback = policy_file(work, args.pods), rollback_file(work)
    fleet = pods[0].parent
    gate = ["gate", "--policy", str(policy), "--rollback", str(rollback), "--format", "json"]
    total = args.pods * args.per_pod
    results: dict[str, Any] = {"facts": facts, "fleetExchanges": total}
    results["gate fleet (tallies)"] = _gate_summary(measure(ROOT, [*gate, str(fleet)]), total)
    one = args.per_pod
    results["gate pod 0 (tallies)"] = _gate_summary(measure(ROOT, [*gate, str(pods[0])]), one)
    results.update(full_reads(work, args, gate, pods[0]))
    if args.store:
        results.update(store_runs(fleet, pods, gate, total))
    if args.full_fleet:
        results["gate --full fleet"] = _gate_summary(
            measure(ROOT, [*gate, "--full", str(fleet)]), total)
    if args.legacy:
        legacy = work / f"legacy-{args.legacy}"
        if not legacy.exists():
            records = _records(capture_records(work / "capture", args.capture), True)
            facts["legacy"] = write_bundle(legacy, records, args.legacy, seed=None,
                                           tallies=False)
        results["verify legacy"] = _gate_summary(
            measure(ROOT, ["verify", str(legacy), "--format", "json"]), args.legacy)
        if not args.no_before:
            results["before: verify legacy"] = _gate_summary(
                measure(before_tree(work, args.before), ["verify", str(legacy), "--format",
                                                         "json"]),
                args.legacy)
    return results


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "_child":
        child(sys.argv[2], sys.argv[3:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True,
                        help="a directory for the capture, the fleet and `before` (reused)")
    parser.add_argument("--capture", type=int, default=20_000,
                        help="exchanges the real proxy records (default 20000)")
    parser.add_argument("--pods", type=int, default=20, help="pods in the fleet (default 20)")
    parser.add_argument("--per-pod", type=int, default=500_000,
                        help="exchanges per pod (default 500000)")
    parser.add_argument("--legacy", type=int, default=1_000_000,
                        help="exchanges of the legacy-session bundle verify reads (0: none)")
    parser.add_argument("--write-every-pod", action="store_true",
                        help="write every pod with the writer (default: re-sign pod 0's)")
    parser.add_argument("--full-fleet", action="store_true",
                        help="also run gate --full on the whole fleet")
    parser.add_argument("--no-before", action="store_true", help="skip the `before` runs")
    parser.add_argument("--rounds", type=int, default=1,
                        help="alternating rounds of the full reads of pod 0 (median reported)")
    parser.add_argument("--before", default=BEFORE,
                        help=f"the commit `before` is (default {BEFORE})")
    parser.add_argument("--before-full", action="store_true",
                        help="run `before` with gate --full (a `before` that reads tallies)")
    parser.add_argument("--store", action="store_true",
                        help="also gate the fleet from a real SeaweedFS store (s3://); use "
                        "a small fleet (--pods 4 --per-pod 100000): every pod is uploaded")
    args = parser.parse_args()
    print(orjson.dumps(run(args), option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
