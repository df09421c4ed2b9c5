"""The judge alone (``mcp_tap.core.exchange.judge``) on the benchmark's captured exchanges, in
a loop: for instruction counts (``valgrind --tool=callgrind``), profiles (``py-spy``) and
CPU time per judgement.

Four exchanges, each judged as the recorder judges it (the ``Exchange`` built the way
``Recorder._judge`` builds it from ``bench/micro.py``'s ``captured``, the tool schemas
learned from the ``tools/list`` answer, SSE events already decoded): ``tools/list`` answered
with JSON and ``tools/call count`` answered with SSE, each in the modern (2026-07-28) era
and in the legacy (2025-11-25) era (a session that negotiated it, the legacy headers, no
modern ``_meta``). The exchanges are built once; the loop judges them ``-n`` times each, so
two runs that differ only in ``-n`` differ by exactly that many judgements of each::

    for n in 200 2200; do
        PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/tmp/cgj.$n \\
            .venv/bin/python bench/judge_cost.py --only json -n $n
    done
    # per judgement: (Ir of /tmp/cgj.2200 - Ir of /tmp/cgj.200) / 2000

(A fixed ``PYTHONHASHSEED``: with a random one the start-up's dict look-ups differ from run
to run by millions of instructions, a few thousand per judgement after the subtraction.)

``--only`` picks one exchange (``json``, ``sse``, ``legacy-json``, ``legacy-sse``); without
it each round judges all four (the difference is then per round of four). ``--time`` prints
CPU microseconds per judgement of each exchange instead (the best of 5 batches). Every run
checks first that no exchange has a finding (the traffic is conformant), so a change that
makes the judge find something, or stop judging, shows.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

LEGACY_VERSION = "2025-11-25"
KINDS = ("json", "sse", "legacy-json", "legacy-sse")


def _legacy(call: Any) -> Any:
    """``call`` as a legacy (2025-11-25) client sends it inside a negotiated session."""
    from workload import Call

    message = orjson.loads(call.body)
    meta = message["params"]["_meta"]
    message["params"]["_meta"] = {k: v for k, v in meta.items() if k == "progressToken"}
    headers = (
        *((k, LEGACY_VERSION if k == "MCP-Protocol-Version" else v)
          for k, v in call.headers if k not in ("Mcp-Method", "Mcp-Name")),
        ("Mcp-Session-Id", "bench-session-1"),
    )
    return Call("legacy-" + call.name, orjson.dumps(message), headers, call.sse)


def exchanges() -> dict[str, Any]:
    """The four exchanges, as ``Recorder._judge`` hands them to ``judge``."""
    import micro
    from workload import JSON_CALL, SSE_CALL

    from mcp_tap.core.exchange import Exchange
    from mcp_tap.proxy.captured import materialize
    from mcp_tap.proxy.metrics import Metrics
    from mcp_tap.proxy.options import load_options
    from mcp_tap.proxy.recorder import Recorder

    opts = load_options(None, env={}, listen="127.0.0.1:0", upstream="http://127.0.0.1:9001")
    recorder = Recorder(opts, micro._NullSink(), Metrics(), time.time)
    recorder.record(micro.captured(JSON_CALL))  # learn the tool schemas, as the tap does
    state = recorder._state("tap")
    calls = {"json": JSON_CALL, "sse": SSE_CALL,
             "legacy-json": _legacy(JSON_CALL), "legacy-sse": _legacy(SSE_CALL)}
    out: dict[str, Any] = {}
    for kind, call in calls.items():
        cap = materialize(micro.captured(call), opts.capture.max_sse_events)
        legacy = kind.startswith("legacy")
        response = cap.response
        out[kind] = Exchange(
            request_headers=cap.request_headers,
            request_body=cap.request.body,
            response_status=cap.status,
            response_headers=cap.response_headers,
            response_body=response.body if response else b"",
            http_method=cap.http_method,
            capabilities=state.frozen_capabilities,
            tool_schemas=state.tools,
            legacy_session=legacy,
            negotiated_version=LEGACY_VERSION if legacy else None,
            supported_versions=opts.eras.supported_versions,
            sse_events=[t.event for t in cap.sse] if cap.sse else None,
        )
    return out


def main() -> None:
    """Judge the exchanges ``-n`` times (or time them with ``--time``)."""
    from mcp_tap.core.exchange import judge

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-n", type=int, default=1000, help="judgements of each exchange")
    p.add_argument("--only", choices=KINDS, help="judge this exchange only")
    p.add_argument("--time", action="store_true", help="print CPU us per judgement")
    args = p.parse_args()
    built = exchanges()
    chosen = [built[args.only]] if args.only else list(built.values())
    for kind, exchange in built.items():
        j = judge(exchange, where="origin")
        expected = "legacy" if kind.startswith("legacy") else "modern"
        if j.findings or j.era != expected or not j.response_messages:
            raise SystemExit(f"{kind}: era {j.era}, findings {[f.rule for f in j.findings]}")
    if args.time:
        for kind, exchange in built.items():
            best = []
            for _ in range(5):
                start = time.thread_time()
                for _ in range(args.n):
                    judge(exchange, where="origin")
                best.append((time.thread_time() - start) / args.n * 1e6)
            print(f"{kind:12s} {min(best):7.1f} us per judgement")
        return
    for _ in range(args.n):
        for exchange in chosen:
            judge(exchange, where="origin")
    print(f"judged {args.n} x {len(chosen)}")


if __name__ == "__main__":
    main()
