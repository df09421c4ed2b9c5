"""Long fuzz run of the JSON-RPC judge (not part of CI; the suite's share:
tests/core/test_fuzz_judge.py).

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

import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))

from fuzz_judge_inputs import judge_golden, judge_random
from fuzz_runner import fuzz_parser, run_target

TARGETS: dict[str, Callable[[random.Random], Any]] = {
    "exchanges": judge_random,
    "golden": judge_golden,
}


def _outcome(name: str, out: Any) -> str:
    if name == "exchanges":
        return "with findings" if out else "clean"
    return "golden"


def main() -> int:
    """Run the targets; print a line per target; exit 1 on any crash or failure."""
    args = fuzz_parser(__doc__.splitlines()[0], TARGETS).parse_args()
    sys.setrecursionlimit(1000)  # the default: nothing may need more
    bad = 0
    for name in args.target or sorted(TARGETS):
        target = TARGETS[name]
        bad += run_target(name, lambda rng, n=name, t=target: _outcome(n, t(rng)), args)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
