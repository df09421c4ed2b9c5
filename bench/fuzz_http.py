"""Long fuzz run of the HTTP front (not part of CI; the suite's share:
tests/proxy/test_fuzz_http.py).

Four targets, each ``--inputs`` generated inputs (seeded; input N of a target is
``random.Random(f"{seed}:{target}:{N}")``, so ``--target T --only N`` replays it):

* ``requests``: a client's byte stream (valid, mutated, random bytes, oversized heads,
  odd casing, duplicates, non-UTF-8, obs-fold, bare LF, conflicting Content-Length and
  Transfer-Encoding, chunk-size garbage, pipelining) through the splicing core's head and
  framing code, sans-IO (``tests/support/fuzz_http_inputs.py``): only the parser's documented
  rejections, an unchanged head byte-identical, a changed one short only of hop-by-hop lines;
* ``responses``: an upstream's byte stream the same way (interim answers, HEAD answers);
* ``process``: the client streams over loopback TCP to a real ``mcp-tap proxy`` process in
  front of a real aiohttp origin (``tests/support/fuzz_http_process.py``), a new process every
  ``--per-process`` inputs: every tap answer is a 400/408/431/502/503/504 with
  ``X-Mcp-Tap-Error``, every other answer the origin's; a well-formed request after every
  ``--probe-every`` inputs is forwarded and answered byte for byte; ``/healthz`` is 200
  every 1,000 inputs and at the end; every stderr line is one JSON object without traceback
  or planted bytes; SIGTERM exits 0;
* ``upstream``: the same process in front of a faulty origin (a plain asyncio server) that
  answers well-formed requests with generated upstream byte streams (the ``responses``
  inputs: valid, mutated, interim answers, random bytes) and closes: the client sees the
  tap's own answer (an allowed status, marked), the origin's bytes from its status line on,
  or a cut; the same health and log checks.

Run: ``nice -n 10 .venv/bin/python bench/fuzz_http.py --inputs 100000``. Exit 1 on any crash
or failure (printed with its target, seed and index). ``--max-seconds`` bounds the run: a
target stopped by it says how many inputs it ran.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))

from fuzz_http_inputs import (
    check_request_bytes,
    check_response_bytes,
    request_stream,
    response_stream,
)
from fuzz_http_process import FuzzTap


class Tally:
    """Counts of one target: outcomes, crashes and failures (the first few printed)."""

    def __init__(self, name: str, seed: int) -> None:
        self.name = name
        self.seed = seed
        self.inputs = 0
        self.crashes = 0
        self.failures = 0
        self.outcomes: Counter[str] = Counter()

    def failed(self, index: int, exc: BaseException) -> None:
        """Count a broken property (AssertionError) or a crash (anything else)."""
        if isinstance(exc, AssertionError):
            self.failures += 1
            if self.failures <= 5:
                print(f"FAIL {self.name} seed={self.seed} input={index}: {exc}"[:800])
        else:
            self.crashes += 1
            if self.crashes <= 5:
                print(f"CRASH {self.name} seed={self.seed} input={index}")
                traceback.print_exception(exc)

    def line(self, took: float) -> str:
        """The summary line of the target."""
        top = ", ".join(f"{k} {v}" for k, v in self.outcomes.most_common(8))
        return (f"{self.name}: {self.inputs} inputs, {self.crashes} crashes, "
                f"{self.failures} failures, {took:.0f} s ({top})")


def _sans_io(name: str, one: Callable[[random.Random], str], args: argparse.Namespace,
             deadline: float) -> Tally:
    tally = Tally(name, args.seed)
    indices = ([args.only] if args.only is not None
               else range(args.start, args.start + args.inputs))
    for index in indices:
        if time.monotonic() > deadline:
            print(f"{name}: stopped by --max-seconds")
            break
        rng = random.Random(f"{args.seed}:{name}:{index}")
        tally.inputs += 1
        try:
            tally.outcomes[one(rng)] += 1
        except Exception as exc:  # noqa: BLE001 - a fuzzer reports every crash
            tally.failed(index, exc)
    return tally


def _requests(rng: random.Random) -> str:
    return check_request_bytes(request_stream(rng))


def _responses(rng: random.Random) -> str:
    return check_response_bytes(response_stream(rng), head_request=rng.random() < 0.1)


async def _process(args: argparse.Namespace, deadline: float, name: str) -> Tally:
    tally = Tally(name, args.seed)
    indices = ([args.only] if args.only is not None
               else list(range(args.start, args.start + args.inputs)))
    root = Path(tempfile.mkdtemp(prefix="fuzz-http-"))
    try:
        for start in range(0, len(indices), args.per_process):
            if time.monotonic() > deadline:
                print(f"{name}: stopped by --max-seconds")
                break
            part = indices[start:start + args.per_process]
            await _one_process(args, root / f"ev{start}", part, tally, deadline)
            shutil.rmtree(root / f"ev{start}", ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return tally


async def _one_process(args: argparse.Namespace, evidence: Path, part: list[int],
                       tally: Tally, deadline: float) -> None:
    faulty = str(args.seed) if tally.name == "upstream" else None
    tap = FuzzTap(evidence, faulty_origin=faulty)
    await tap.start(**({"MCP_TAP_UPSTREAM_IDLE_TIMEOUT_S": "5"} if faulty else {}))
    gate = asyncio.Semaphore(args.jobs)

    async def one(index: int) -> None:
        async with gate:
            if time.monotonic() > deadline:
                return
            rng = random.Random(f"{args.seed}:process:{index}")
            tally.inputs += 1
            try:
                if faulty is not None:
                    tally.outcomes[await tap.upstream(index)] += 1
                    if index % 1000 == 999:
                        await tap.healthy()
                    return
                statuses = await tap.send(request_stream(rng))
                tally.outcomes[" ".join(map(str, statuses)) or "closed"] += 1
                if index % args.probe_every == 0:
                    await tap.probe(rng)
                if index % 1000 == 999:
                    await tap.healthy()
            except Exception as exc:  # noqa: BLE001 - a fuzzer reports every crash
                tally.failed(index, exc)

    try:
        await asyncio.gather(*(one(i) for i in part))
        await tap.healthy()
        tap.check_logs()
    except Exception as exc:  # noqa: BLE001 - the process-level checks count as one input's
        tally.failed(part[-1], exc)
    finally:
        code = await tap.stop()
    if code != 0:
        tally.failed(part[-1], AssertionError(f"the proxy exited {code} on SIGTERM"))
    if faulty is None:
        # In front of the faulty origin there is nothing to compare a probe with: it
        # answers every request with generated bytes, so that target runs none.
        tally.outcomes["probes"] += tap.probes


def main() -> int:
    """Run the targets; print a line per target; exit 1 on any crash or failure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=100_000, help="per target (100000)")
    parser.add_argument("--seed", type=int, default=12, help="random seed (default 12)")
    parser.add_argument("--target", choices=["requests", "responses", "process", "upstream"],
                        action="append", help="run only this target (repeatable)")
    parser.add_argument("--only", type=int, metavar="N", help="replay input N only")
    parser.add_argument("--start", type=int, default=0, help="first input index (0)")
    parser.add_argument("--jobs", type=int, default=8, help="concurrent connections (8)")
    parser.add_argument("--per-process", type=int, default=10_000,
                        help="inputs per proxy process (10000)")
    parser.add_argument("--probe-every", type=int, default=25,
                        help="a well-formed request after every Nth input (25)")
    parser.add_argument("--max-seconds", type=float, default=3600.0,
                        help="stop each target after this long (3600)")
    args = parser.parse_args()
    bad = 0
    for name in args.target or ["requests", "responses", "process", "upstream"]:
        started = time.monotonic()
        deadline = started + args.max_seconds
        if name in ("process", "upstream"):
            tally = asyncio.run(_process(args, deadline, name))
        else:
            tally = _sans_io(name, _requests if name == "requests" else _responses, args,
                             deadline)
        print(tally.line(time.monotonic() - started), flush=True)
        bad += tally.crashes + tally.failures
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
