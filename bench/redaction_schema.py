"""Per-exchange CPU cost of redaction and schema validation, before and after (in-process).

Two exchanges of the benchmark's workload (``bench/workload.py``, answered as
``bench/origin.py`` answers them): ``json`` (``tools/list``, a 0.9 KB result) and ``sse``
(``tools/call count n=2``: two progress notifications and the result). Per exchange the
recorder redacts the request and every answer message, and the judge validates the request
params and the result against the official schema. Timed in CPU time of this thread, best of
``--repeat`` batches of ``--exchanges``:

* ``redact``: :class:`mcp_tap.core.redaction.Redactor` (clean subtrees shared) vs
  ``--baseline-redaction FILE``, a redaction module of another revision, e.g. the one that
  copied every node: ``git show main:mcp_tap/core/redaction.py > /tmp/redaction_main.py``;
* ``schema``: the verdict cache warm (what a proxy sees after the first exchange of each
  shape) vs the same validation uncached (``schema._request_problem`` / ``_result_problem``).

Run: ``.venv/bin/python bench/redaction_schema.py --baseline-redaction /tmp/redaction_main.py``
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from origin import TOOLS
from workload import JSON_CALL, SSE_CALL, VERSION

from mcp_tap.core import schema
from mcp_tap.core.redaction import Redactor

Messages = list[Any]


def exchanges() -> dict[str, tuple[Any, Messages]]:
    """Each workload exchange: its request message and the answer messages."""
    listing = {"jsonrpc": "2.0", "id": 1, "result": {
        "resultType": "complete", "tools": TOOLS, "ttlMs": 60000, "cacheScope": "public"}}
    progress = [{"jsonrpc": "2.0", "method": "notifications/progress",
                 "params": {"progressToken": "p-1", "progress": i, "total": 2}} for i in (1, 2)]
    done = {"jsonrpc": "2.0", "id": 1, "result": {
        "resultType": "complete", "content": [{"type": "text", "text": "counted 2"}]}}
    return {
        "json": (orjson.loads(JSON_CALL.body), [listing]),
        "sse": (orjson.loads(SSE_CALL.body), [*progress, done]),
    }


def _cpu_us(work: Callable[[], None], count: int, repeat: int) -> float:
    """Best per-call CPU microseconds of ``work`` over ``repeat`` batches of ``count``."""
    best = float("inf")
    for _ in range(repeat):
        start = time.thread_time()
        for _ in range(count):
            work()
        best = min(best, time.thread_time() - start)
    return best / count * 1e6


def _redact_work(redactor: Any, request: Any, answers: Messages) -> Callable[[], None]:
    def work() -> None:
        redactor.redact_message(request)
        for message in answers:
            redactor.redact_message(message)

    return work


def _schema_work(request: Any, answers: Messages, cached: bool) -> Callable[[], None]:
    method = request["method"]
    params = request.get("params")
    results = [m["result"] for m in answers if "result" in m]
    check_request = schema.request_problem if cached else schema._request_problem
    check_result = schema.result_problem if cached else schema._result_problem

    def work() -> None:
        check_request(method, VERSION, params)
        for result in results:
            check_result(method, VERSION, result)

    return work


def _load_redactor(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("baseline_redaction", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module.Redactor()


def main() -> None:
    """Print CPU microseconds per exchange for each step, before and after."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exchanges", type=int, default=2000, help="per batch (default 2000)")
    parser.add_argument("--repeat", type=int, default=5, help="batches (default 5)")
    parser.add_argument("--baseline-redaction", metavar="FILE",
                        help="a redaction module to compare with (e.g. from git show main:...)")
    args = parser.parse_args()
    count, repeat = max(1, args.exchanges), max(1, args.repeat)
    baseline = _load_redactor(args.baseline_redaction) if args.baseline_redaction else None
    print(f"CPU us per exchange, best of {repeat} x {count}")
    print(f"{'exchange':<9}{'step':<8}{'before':>10}{'after':>10}{'ratio':>8}")
    for name, (request, answers) in exchanges().items():
        after = _cpu_us(_redact_work(Redactor(), request, answers), count, repeat)
        before = (_cpu_us(_redact_work(baseline, request, answers), count, repeat)
                  if baseline is not None else float("nan"))
        print(f"{name:<9}{'redact':<8}{before:>10.1f}{after:>10.1f}{before / after:>7.2f}x")
        uncached = _cpu_us(_schema_work(request, answers, False), count, repeat)
        _schema_work(request, answers, True)()  # the first exchange of a shape fills the cache
        cached = _cpu_us(_schema_work(request, answers, True), count, repeat)
        print(f"{name:<9}{'schema':<8}{uncached:>10.1f}{cached:>10.1f}{uncached / cached:>7.2f}x")


if __name__ == "__main__":
    main()
