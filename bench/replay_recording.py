"""CPU per exchange of the real recording process, fed at a fixed rate (no forwarder, no wrk).

Spawns ``run_recording_process`` exactly as the proxy does (spawn context, pipes, evidence
to a temporary directory, ``info`` log lines to this script's stderr) and writes it frames of
the benchmark's captures (``bench/micro.py``'s ``captured``), ``--per-frame`` exchanges per
frame every ``--gap-ms``, as the forwarder's event loop would. Prints the process's CPU
(user + system, from ``/proc``) per exchange. Throughput does not vary between the code
versions compared, so neither does the batching, which makes two versions comparable on a
busy machine: run them interleaved, e.g.::

    for root in . /tmp/tap-before; do
        PYTHONPATH=$root .venv/bin/python bench/replay_recording.py json 2>/dev/null
    done
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def main() -> None:
    """Feed the recording process and print its CPU per exchange."""
    import micro
    from recording_cost import frame
    from workload import JSON_CALL, SSE_CALL

    try:  # the recording process's own module; a tree before the split: worker

        from mcp_tap.proxy import recording_process as worker

    except ImportError:

        from mcp_tap.proxy import worker  # type: ignore[no-redef]
    from mcp_tap.proxy.options import load_options

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("kind", choices=["json", "sse"])
    p.add_argument("-n", type=int, default=3000, help="exchanges measured")
    p.add_argument("--per-frame", type=int, default=2)
    p.add_argument("--gap-ms", type=float, default=1.0)
    args = p.parse_args()
    call = JSON_CALL if args.kind == "json" else SSE_CALL
    opts = load_options(None, env={}, listen="127.0.0.1:0", upstream="http://127.0.0.1:9001")
    ctx = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp:
        captures_in, captures_out = ctx.Pipe(duplex=False)
        reports_in, reports_out = ctx.Pipe(duplex=False)
        process = ctx.Process(target=worker.run_recording_process,
                              args=(opts, f"{tmp}/ev", captures_in, reports_out, "info"))
        process.start()
        captures_in.close()
        reports_out.close()
        if reports_in.recv()[0] != "ready":
            raise SystemExit("the recording process did not start")
        caps = [micro.captured(call) for _ in range(200)]
        fd = captures_out.fileno()
        key = 0

        def send(count: int) -> None:
            nonlocal key
            for _ in range(0, count, args.per_frame):
                messages: list[tuple[Any, ...]] = []
                for _ in range(args.per_frame):
                    cap = caps[key % len(caps)]
                    cap.handover_key = key
                    messages += [("begin", key, cap.hop, None), ("record", key, cap.state())]
                    key += 1
                data = frame(messages)
                while data:
                    data = data[os.write(fd, data):]
                time.sleep(args.gap_ms / 1000)

        assert process.pid is not None
        send(300)  # warm up: caches, first segment
        time.sleep(1.0)
        before = _cpu_ticks(process.pid)
        send(args.n)
        time.sleep(1.0)  # let it finish what it was handed
        used = _cpu_ticks(process.pid) - before
        os.write(fd, frame([("stop",)]))
        process.join(30)
    tick_us = 1e6 / os.sysconf("SC_CLK_TCK")
    print(f"{args.kind}: {used * tick_us / args.n:.0f} us CPU per exchange "
          f"({args.per_frame} per frame every {args.gap_ms:g} ms)")


if __name__ == "__main__":
    main()
