"""Long fuzz run of the JSON-RPC judge (not part of CI; the suite's share:
tests/test_fuzz_judge.py).

Two targets, each ``--inputs`` generated inputs (seeded; input N of a target is
``random.Random(f"{seed}:{target}:{N}")``, so ``--target T --only N`` replays it), over the
sans-IO core (``mcp_tap.core.exchange.judge`` and what it calls: requests, responses,
results, notifications, SSE, eras, selection):

* ``exchanges``: exchanges built from generated JSON-RPC messages in both eras, valid-ish and
  mutated (wrong types, missing fields, huge integers, nesting up to 3,000 levels, odd
  Unicode, batches, broken JSON, SSE bodies, truncation, every boundary): no exception, every
  finding a catalog rule at the catalog's strength for the era (must or should, never a MAY),
  one-line messages;
* ``golden``: harmless variants of the transcripts corpus's golden cases (key order, JSON
  whitespace, the request id as another integer or a string, header-name case): zero
  findings.

Run: ``nice -n 10 .venv/bin/python bench/fuzz_judge.py --inputs 100000``. Runs at the default
recursion limit. Exit 1 on any crash or failure (printed with its target, seed and index).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fuzz_judge_inputs import judge_golden, judge_random

TARGETS: dict[str, Callable[[random.Random], Any]] = {
    "exchanges": judge_random,
    "golden": judge_golden,
}


def main() -> int:
    """Run the targets; print a line per target; exit 1 on any crash or failure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=100_000, help="per target (100000)")
    parser.add_argument("--seed", type=int, default=12, help="random seed (default 12)")
    parser.add_argument("--target", choices=sorted(TARGETS), action="append",
                        help="run only this target (repeatable; default: all)")
    parser.add_argument("--only", type=int, metavar="N", help="replay input N only")
    parser.add_argument("--max-seconds", type=float, default=3600.0,
                        help="stop each target after this long (3600)")
    args = parser.parse_args()
    sys.setrecursionlimit(1000)  # the default: nothing may need more
    bad = 0
    for name in args.target or sorted(TARGETS):
        target = TARGETS[name]
        started = time.monotonic()
        crashes = failures = done = 0
        seen: Counter[str] = Counter()
        indices = [args.only] if args.only is not None else range(args.inputs)
        for index in indices:
            if time.monotonic() - started > args.max_seconds:
                print(f"{name}: stopped by --max-seconds")
                break
            done += 1
            try:
                out = target(random.Random(f"{args.seed}:{name}:{index}"))
                seen["with findings" if name == "exchanges" and out else
                     "clean" if name == "exchanges" else "golden"] += 1
            except AssertionError as exc:
                failures += 1
                if failures <= 5:
                    print(f"FAIL {name} seed={args.seed} input={index}: {exc}"[:800])
            except Exception:  # noqa: BLE001 - a fuzzer reports every crash
                crashes += 1
                if crashes <= 5:
                    print(f"CRASH {name} seed={args.seed} input={index}")
                    traceback.print_exc()
        took = time.monotonic() - started
        print(f"{name}: {done} inputs, {crashes} crashes, {failures} failures, {took:.0f} s "
              f"({dict(seen)})", flush=True)
        bad += crashes + failures
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
