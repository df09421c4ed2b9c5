"""Speed and memory of the offline path: ``verify`` and the streaming reader on big bundles.

``generate`` writes a bundle of proxy-written exchanges: it runs ``mcp-tap demo --drive``
(the real proxy in front of the real MCP SDK server: both eras, JSON and SSE answers,
findings) once, takes the exchange records the proxy wrote as templates, and writes
``--exchanges`` of them (each with its own exchange id, rpc id and times) through mcp-tap's
own :class:`~mcp_tap.evidence.EvidenceWriter` in batches, signed with a throwaway key
unless ``--unsigned``. ``measure`` runs, each in a fresh process so peak RSS is its own:
``verify_bundle`` (with the key trusted) and a full pass of ``iter_records``, and prints
exchanges/s per core (CPU time) and peak RSS. The default does both for 1,000,000 exchanges
and a 100,000-exchange bundle beside it, to show memory flat in the bundle's size.

``gate`` runs the gate library on the bundle in one process (every source: verify, the
conformance, hop and health tallies, the SDK differential), the bundle's key trusted.

Run: ``.venv/bin/python bench/offline.py`` (about 3 GB of disk and 5 minutes on 2 cores);
``--exchanges 200000`` for a quicker look; ``--json out.json`` for the figures;
``--workdir DIR --keep`` then ``--workdir DIR --reuse`` to measure the same bundles again,
``--measure verify,gate`` to pick the measurements.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
# Deterministic, non-secret benchmark key (a raw Ed25519 seed).
BENCH_KEY = bytes(range(7, 39))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def proxy_templates(workdir: Path) -> list[dict[str, Any]]:
    """Exchange records the real proxy wrote for the demo's tour of MCP traffic."""
    from mcp_tap.evidence import find_bundles, iter_records

    evidence = workdir / "templates"
    subprocess.run(
        [sys.executable, "-m", "mcp_tap", "demo", "--drive", "--evidence", str(evidence),
         "--listen", f"127.0.0.1:{_free_port()}", "--admin", ""],
        cwd=REPO, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        timeout=300)
    records = [r for b in find_bundles(evidence) for r in iter_records(b)
               if r.get("kind") == "exchange"]
    if not records:
        raise SystemExit("the demo wrote no exchange records")
    for record in records:
        for key in ("seq", "prev", "digest"):
            record.pop(key, None)
    return records


def _shifted(view: dict[str, Any], delta: float) -> dict[str, Any]:
    """A copy of a record's view with every time in it (``...At``, SSE events' ``at``) moved
    by ``delta`` seconds; bodies and event data are shared, not copied."""
    moved = dict(view)
    for key, value in view.items():
        if key.endswith("At") and type(value) is float:
            moved[key] = value + delta
    events = view.get("sse")
    if isinstance(events, list):
        moved["sse"] = [{**e, "at": e["at"] + delta}
                        if isinstance(e, dict) and type(e.get("at")) is float else e
                        for e in events]
    return moved


def generate(out: Path, exchanges: int, templates: list[dict[str, Any]], *,
             signed: bool, batch: int = 64) -> float:
    """Write ``exchanges`` records cycling through ``templates``; return the seconds taken."""
    from mcp_tap.evidence import EvidenceWriter

    started = time.monotonic()
    key = BENCH_KEY if signed else None
    # A queue slot per batch: the generator may outrun the disk, and must lose nothing.
    writer = EvidenceWriter(out, signing_key=key, queue_size=exchanges // batch + 16)
    writer.start()
    try:
        pending: list[dict[str, Any]] = []
        for n in range(exchanges):
            template = templates[n % len(templates)]
            record = copy.copy(template)
            record["exchangeId"] = f"{n:016x}"
            record["rpcId"] = n
            # Every time of the exchange moves with its receipt: moving receivedAt alone
            # (as this did) left origin and egress times at the demo's, so each exchange's
            # latency was a huge negative number and the health window meaningless.
            received = template.get("ingress", {}).get("receivedAt")
            delta = 1_780_000_000.0 + n * 0.001 - (received if type(received) is float else 0.0)
            for view in ("ingress", "origin", "egress"):
                if isinstance(record.get(view), dict):
                    record[view] = _shifted(record[view], delta)
            pending.append(record)
            if len(pending) == batch:
                writer.submit_many(pending)
                pending = []
        if pending:
            writer.submit_many(pending)
    finally:
        writer.close(timeout=None)  # the disk may be far behind: wait for all of it
    if writer.lost_total:
        raise SystemExit(f"the generator lost {writer.lost_total} records")
    return time.monotonic() - started


def _peak_rss_kb() -> int:
    """This process's peak RSS. Not ``ru_maxrss``: Linux carries that across ``execve`` from
    the parent (here the generator, which holds its queue), while ``VmHWM`` starts afresh."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _measure_child(what: str, bundle: Path) -> dict[str, Any]:
    from mcp_tap.evidence import iter_records, verify_bundle
    from mcp_tap.keys import ed25519_public_hex

    cpu0, wall0 = time.process_time(), time.monotonic()
    if what == "verify":
        report = verify_bundle(bundle, trusted_keys=[bytes.fromhex(ed25519_public_hex(
            BENCH_KEY))])
        count = report.exchanges
        ok = report.ok
        problems = [p.message for p in report.problems[:3]]
    elif what == "gate":
        from mcp_tap.gate import GateRequest, evaluate
        from mcp_tap.gate.policy import EvidencePolicy, Policy

        # The gate library as `mcp-tap gate` runs it, one process (workers=1), the bundle's
        # key trusted; no rollback evidence (the decision holds, after every source ran).
        trusted = EvidencePolicy(trusted_keys=(bytes.fromhex(ed25519_public_hex(BENCH_KEY)),),
                                 require_signed=True)
        decision = evaluate(GateRequest(evidence=(bundle,), policy=Policy(evidence=trusted)),
                            workers=1)
        sources = {s.name: s for s in decision.sources}
        count = int(sources["conformance"].summary["exchanges"])
        ok = sources["integrity"].passed
        problems = [r.message for r in decision.reasons[:3]]
    else:
        count = sum(1 for r in iter_records(bundle) if r.get("kind") == "exchange")
        ok, problems = True, []
    cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    rss_kb = _peak_rss_kb()
    return {"what": what, "exchanges": count, "ok": ok, "problems": problems,
            "cpuSeconds": round(cpu, 3), "wallSeconds": round(wall, 3),
            "exchangesPerCpuSecond": round(count / cpu) if cpu else None,
            "peakRssMB": round(rss_kb / 1024, 1)}


def measure(bundle: Path, what: str) -> dict[str, Any]:
    """Run one measurement in a fresh interpreter and return its figures."""
    done = subprocess.run([sys.executable, __file__, "_child", what, str(bundle)],
                          cwd=REPO, check=True, capture_output=True, text=True, timeout=3600)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _bundle_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.iterdir())


def main(argv: list[str] | None = None) -> int:
    """Generate the bundles and measure them (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exchanges", type=int, default=1_000_000,
                        help="exchanges in the big bundle (default 1,000,000)")
    parser.add_argument("--small", type=int, default=100_000,
                        help="exchanges in the comparison bundle (0: none)")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="where the bundles go (default: a temporary directory)")
    parser.add_argument("--keep", action="store_true", help="keep the bundles")
    parser.add_argument("--unsigned", action="store_true", help="write unsigned bundles")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument("--reuse", action="store_true",
                        help="measure bundles already in --workdir instead of writing them")
    parser.add_argument("--measure", default="verify,gate,iter",
                        help="comma-separated: verify, gate, iter (default all three)")
    args = parser.parse_args(argv)
    if args.exchanges < 1:
        parser.error("--exchanges must be at least 1")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="mcp-tap-offline-"))
    workdir.mkdir(parents=True, exist_ok=True)
    figures: dict[str, Any] = {"cores": len(os.sched_getaffinity(0)),
                               "loadavg": os.getloadavg(), "bundles": []}
    try:
        templates = [] if args.reuse else proxy_templates(workdir)
        figures["templates"] = len(templates)
        sizes = [n for n in (args.small, args.exchanges) if n]
        for size in sizes:
            bundle = workdir / f"bundle-{size}"
            seconds = 0.0 if args.reuse else generate(bundle, size, templates,
                                                       signed=not args.unsigned)
            entry: dict[str, Any] = {"exchanges": size, "bytes": _bundle_size(bundle),
                                     "generateSeconds": round(seconds, 1)}
            for what in args.measure.split(","):
                entry[what] = measure(bundle, what)
            figures["bundles"].append(entry)
            print(json.dumps(entry), flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "_child":
        print(json.dumps(_measure_child(sys.argv[2], Path(sys.argv[3]))))
        sys.exit(0)
    sys.exit(main())
