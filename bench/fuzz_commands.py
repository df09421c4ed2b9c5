"""The long fuzz run of the reading commands on records with hostile values (not in CI).

Each input is one exchange record of the writer's shape (SSE answer, egress, a finding)
with one to three of its paths set to hostile values (null, "bogus", -1, 1e20, 2**63,
lists and objects where scalars belong, newlines...), written as a real bundle; ``export
--format har``, ``report``, ``gate``, ``sdk-diff`` and ``diff`` run on it in-process (the
reading commands with ``--allow-unverified``, so every record the evidence schema passes
reaches their consumers). A failure is anything raised past the CLI's error boundary.

Input ``i`` of seed ``S`` is reproducible alone: ``--seed S --start i --count 1``.

Run: ``.venv/bin/python bench/fuzz_commands.py --count 2000``
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))

from command_fuzz import HOSTILE, all_paths, base_record, hostile_record, run_commands


def main() -> None:
    """Run the inputs; print progress as JSON lines and each failure in full."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=2000, help="inputs (default 2,000)")
    parser.add_argument("--seed", type=int, default=12, help="the run's seed (default 12)")
    parser.add_argument("--start", type=int, default=0, help="first input index")
    args = parser.parse_args()
    paths = sorted(all_paths(base_record()), key=str)
    failures = 0
    began = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for index in range(args.start, args.start + args.count):
            rng = random.Random(f"{args.seed}:{index}")
            changes = [(rng.choice(paths), rng.choice(HOSTILE))
                       for _ in range(rng.randrange(1, 4))]
            problem = run_commands(root, hostile_record(changes))
            if problem is not None:
                failures += 1
                print(f"input {index}: {problem}", flush=True)
            if (index - args.start + 1) % 250 == 0:
                print(f'{{"inputs": {index - args.start + 1}, "failures": {failures}, '
                      f'"seconds": {time.monotonic() - began:.1f}}}', flush=True)
    print(f'{{"inputs": {args.count}, "failures": {failures}, "seed": {args.seed}}}')
    raise SystemExit(1 if failures else 0)


if __name__ == "__main__":
    main()
