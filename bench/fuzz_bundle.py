"""The long fuzz run of the bundle reader and ``verify`` (not in CI's time).

Each input is a small real bundle (signed or not, two segments, a gap, an abrupt end)
with one to four random mutations from ``tests/support/bundle_mutations.py``: flipped bytes, cut
files, inserted junk (deep brackets, NUL, invalid UTF-8), deleted files, JSON fields and
record lines replaced with arbitrary JSON, duplicated or swapped lines, stray segments,
impossible values at the record paths consumers read (a finding boundary "bogus", times of
1e20 or below zero), and files that are not regular files (a FIFO, a symlink to /dev/zero
or out of the bundle, a directory, a 20 GB sparse file).
Every input runs through ``verify_bundle`` (and, for signed seeds, ``verify_bundle`` with the
key trusted), ``read_bundle(lenient=True)`` and ``iter_records``. A crash is anything but a
report, a one-line ``BundleFormatError`` or a one-line ``InputError``; for signed seeds a
changed segment that verifies under the trusted key counts as a failure too.

Input ``i`` of seed ``S`` is reproducible alone: ``--seed S --start i --count 1 --show``.

Run: ``.venv/bin/python bench/fuzz_bundle.py`` (100,000 inputs over the usable cores;
bundles are written under /dev/shm when it exists).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))

from bundle_mutations import apply, check, random_mutations, seed_bundle


def _limit_memory() -> None:
    """A reader that blows up on some input must fail as a MemoryError (a crash the run
    reports), not take the machine down: 1.5 GiB of address space beyond what a worker has."""
    size = next(int(line.split()[1]) * 1024 for line in Path("/proc/self/status").read_text()
                .splitlines() if line.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (size + (3 << 29), size + (3 << 29)))


def _work(args: tuple[int, int, int, str]) -> tuple[int, list[tuple[int, str]]]:
    """Run inputs ``start .. start + count - 1``; return how many ran and the failures."""
    seed, start, count, base = args
    failures: list[tuple[int, str]] = []
    with tempfile.TemporaryDirectory(dir=base) as tmp:
        root = Path(tmp)
        seeds = {signed: seed_bundle(root, signed=signed) for signed in (False, True)}
        for index in range(start, start + count):
            rng = random.Random(f"{seed}:{index}")
            signed = rng.random() < 0.5
            original = seeds[signed]
            files = apply(original, random_mutations(rng, original))
            problem = check(root, files, original if signed else None)
            if problem is not None:
                failures.append((index, problem))
    return count, failures


def main(argv: list[str] | None = None) -> int:
    """Run the fuzz inputs in parallel and print the tally (exit 1 on any failure)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=100_000, help="inputs (default 100,000)")
    parser.add_argument("--seed", type=int, default=12, help="the run's seed (default 12)")
    parser.add_argument("--start", type=int, default=0, help="first input index")
    parser.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--show", action="store_true", help="print each failure in full")
    args = parser.parse_args(argv)
    base = "/dev/shm" if Path("/dev/shm").is_dir() else None
    chunk = 500
    work = [(args.seed, start, min(chunk, args.start + args.count - start), base or "")
            for start in range(args.start, args.start + args.count, chunk)]
    if base is None:
        work = [(s, a, c, tempfile.gettempdir()) for s, a, c, _ in work]
    started = time.monotonic()
    done, failures = 0, []
    with ProcessPoolExecutor(max_workers=max(1, args.jobs), initializer=_limit_memory) as pool:
        for ran, failed in pool.map(_work, work):
            done += ran
            failures += failed
            if done % 10_000 < chunk:  # progress, for a run cut short
                print(json.dumps({"inputs": done, "failures": len(failures),
                                  "seconds": round(time.monotonic() - started, 1)}), flush=True)
    seconds = time.monotonic() - started
    for index, problem in failures[:20]:
        shown = problem if args.show else problem.splitlines()[-1]
        print(f"input {index}: {shown}")
    print(json.dumps({"inputs": done, "failures": len(failures), "seed": args.seed,
                      "seconds": round(seconds, 1)}))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
