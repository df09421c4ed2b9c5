"""What the long fuzz runs in bench/ share: their options and the loop over seeded inputs.

Input ``N`` of target ``T`` under seed ``S`` is generated from ``random.Random("S:T:N")``,
so ``--only N`` replays exactly one input that failed.
"""

from __future__ import annotations

import argparse
import random
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable


def fuzz_parser(description: str, targets: Iterable[str]) -> argparse.ArgumentParser:
    """The options every fuzz run takes (inputs, seed, targets, one input, a time bound)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--inputs", type=int, default=100_000, help="per target (100000)")
    parser.add_argument("--seed", type=int, default=12, help="random seed (default 12)")
    parser.add_argument("--target", choices=sorted(targets), action="append",
                        help="run only this target (repeatable; default: all)")
    parser.add_argument("--only", type=int, metavar="N", help="replay input N only")
    parser.add_argument("--max-seconds", type=float, default=3600.0,
                        help="stop each target after this long (3600)")
    return parser


def run_target(name: str, one: Callable[[random.Random], str | None],
               args: argparse.Namespace) -> int:
    """Feed ``one`` the target's inputs; print a line of counts; return crashes + failures.

    ``one`` raises ``AssertionError`` on a broken property (a failure); any other exception
    is a crash. What it returns, when not None, is counted as the input's outcome.
    """
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
            outcome = one(random.Random(f"{args.seed}:{name}:{index}"))
            if outcome is not None:
                seen[outcome] += 1
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
    counts = f" ({dict(seen)})" if seen else ""
    print(f"{name}: {done} inputs, {crashes} crashes, {failures} failures, {took:.0f} s{counts}",
          flush=True)
    return crashes + failures
