"""The real recording process's loop, run in this process on a fixed batch stream: for
instruction counts (``valgrind --tool=callgrind``) and profiles (``py-spy``).

``run_recording_process`` runs as the proxy runs it (same logging set-up, same writer, same
loop), but in the main thread of this process and fed deterministically: the handed-over
frames (``--per-frame`` of the benchmark's captures each, ``bench/micro.py``'s ``captured``)
come from a pipe that this script refills, ``--per-read`` exchanges at a time, whenever the
loop pauses after a read (the pause itself is skipped). So every run does the same work in
the same batches, whatever the machine is doing, and two runs that differ only in ``-n``
differ by exactly ``n`` exchanges: the difference of their instruction counts divided by
the difference of ``n`` is the instructions per exchange, start-up excluded::

    for n in 200 1200; do
        valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.$n \\
            .venv/bin/python bench/recording_cost.py json -n $n 2>/dev/null
    done
    # per exchange: (Ir of /tmp/cg.1200 - Ir of /tmp/cg.200) / 1000

``--fingerprint`` runs the same loop with everything random or timed fixed (digest key,
exchange and bundle ids, the wall clock) and prints the SHA-256 of the evidence segments
instead: equal before and after a change of the recording path means the same evidence
bytes for the same input.

The periodic report to the proxy is off (it is per 0.25 s, not per exchange, and would
depend on how fast this runs); log lines go to this script's stderr.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import pickle
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


class _Reports:
    """The recording process's report pipe, discarded."""

    def send(self, message: Any) -> None:
        if message[0] == "error":
            raise SystemExit(f"the recording process did not start: {message[1]}")

    def close(self) -> None:
        pass


class _Captures:
    """The capture pipe's read end, as the recording process uses it (its descriptor)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd


def frame(messages: list[tuple[Any, ...]]) -> bytes:
    """One handed-over frame, encoded as the forwarder of the tree under test encodes it
    (marshal with a flagged pickle fallback; a tree before that hand-off: plain pickle)."""
    try:
        from mcp_tap.proxy import handoff
    except ImportError:
        data = pickle.dumps(messages, protocol=pickle.HIGHEST_PROTOCOL)
        return len(data).to_bytes(4, "big") + data
    return handoff.encode(messages)


def _states(kind: str, distinct: int) -> list[tuple[Any, ...]]:
    """The handed-over states cycled through: 16 alike, or ``distinct`` whose request and
    response heads each carry their own ``X-Request-Id`` (no head seen twice in a row of
    more than the recorder's head caches hold: what a client whose every head differs, by
    a traceparent or a Content-Length, costs)."""
    import dataclasses

    import micro
    from workload import JSON_CALL, SSE_CALL

    call = JSON_CALL if kind == "json" else SSE_CALL
    if not distinct:
        return [micro.captured(call).state() for _ in range(16)]
    out = []
    for i in range(distinct):
        tag = f"{i:08x}"
        raw = micro.captured(dataclasses.replace(
            call, headers=(*call.headers, ("X-Request-Id", tag))))
        raw.response_pairs = (*raw.response_pairs, (b"X-Request-Id", tag.encode()))
        out.append(raw.state())
    return out


def reads(kind: str, n: int, per_frame: int, per_read: int, distinct: int = 0) -> list[bytes]:
    """What the recording process reads, read by read: ``n`` exchanges, then the stop."""
    states = _states(kind, distinct)
    out: list[bytes] = []
    key = 0
    while key < n:
        chunk = b""
        for _ in range(0, min(per_read, n - key), per_frame):
            messages: list[tuple[Any, ...]] = []
            for _ in range(per_frame):
                messages += [("begin", key, "tap", None),
                             ("record", key, states[key % len(states)])]
                key += 1
            chunk += frame(messages)
        out.append(chunk)
    out.append(frame([("stop",)]))
    return out


def _fix_randomness() -> None:
    """Every id drawn from a counter and the wall clock stopped (``--fingerprint``)."""
    import secrets

    drawn = iter(range(1 << 62))
    secrets.token_hex = lambda n=32: (  # type: ignore[assignment]
        next(drawn).to_bytes(8, "big") * (n // 8 + 1))[:n].hex()
    time.time = lambda: 1_700_000_000.0


def main() -> None:
    """Run the recording loop over ``-n`` exchanges and say how many it recorded."""
    try:  # the recording process's own module; a tree before the split: worker
        from mcp_tap.proxy import recording_process as worker
    except ImportError:
        from mcp_tap.proxy import worker  # type: ignore[no-redef]
    from mcp_tap.proxy.options import load_options

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("kind", choices=["json", "sse"])
    p.add_argument("-n", type=int, default=1000, help="exchanges")
    p.add_argument("--per-frame", type=int, default=2)
    p.add_argument("--per-read", type=int, default=16, help="exchanges per read (a batch)")
    p.add_argument("--distinct-heads", type=int, default=0, metavar="N",
                   help="cycle through N exchanges whose heads all differ (e.g. 1024, more "
                   "than the recorder's head caches keep); default: 16 alike")
    p.add_argument("--fingerprint", action="store_true",
                   help="fixed key, ids and clock; print the SHA-256 of the segments")
    p.add_argument("--ship", metavar="s3://BUCKET/PREFIX", default="",
                   help="ship the evidence there as the proxy would (AWS_* from the "
                   "environment; bench/ship_cost.py runs a store)")
    p.add_argument("--max-segment-bytes", type=int, default=0,
                   help="rotate segments at this size (default: the proxy's)")
    p.add_argument("--cpu", action="store_true",
                   help="print the CPU seconds of the loop, every thread of this process "
                   "(the shipper's too)")
    args = p.parse_args()
    env: dict[str, str] = {}
    if args.ship:
        env.update(MCP_TAP_EVIDENCE_SHIP=args.ship, MCP_TAP_EVIDENCE_RELEASE="bench")
    if args.max_segment_bytes:
        env["MCP_TAP_EVIDENCE_MAX_SEGMENT_BYTES"] = str(args.max_segment_bytes)
    if args.fingerprint:
        _fix_randomness()
        env = {"MCP_TAP_REDACTION_DIGEST_KEY_ENV": "BENCH_KEY",
               "BENCH_KEY": "a fixed digest key for fingerprints"}
    opts = load_options(None, env=env, listen="127.0.0.1:0", upstream="http://127.0.0.1:9001")
    pending = reads(args.kind, args.n, args.per_frame, args.per_read, args.distinct_heads)
    rfd, wfd = os.pipe()
    os.write(wfd, pending.pop(0))

    def refill(_seconds: float) -> None:
        # The loop pauses after each read: the next batch arrives meanwhile.
        if pending:
            os.write(wfd, pending.pop(0))

    if max(len(r) for r in pending) >= worker._COALESCE_BYTES:
        raise SystemExit("a read that big is not followed by a pause: lower --per-read")
    sleep = time.sleep
    time.sleep = refill  # the pause of worker's loop (nothing else in this process sleeps)
    worker._REPORT_EVERY_S = 1e9
    ship_cpu = [0.0, 0.0]  # the shipper thread's CPU; of which making its client
    if args.ship:
        # The shipper thread's own CPU, measured on that thread (a bench-only wrapper), and
        # apart the part of it that made the S3 client (importing boto3 and building the
        # client: a fixed cost once per process whose spread, tens of ms, would otherwise
        # swamp the difference of two runs).
        from mcp_tap.evidence import shipping

        run, init = shipping.Shipper._run, shipping.Shipper.__init__

        def timed(self: Any) -> None:
            start = time.thread_time()
            try:
                run(self)
            finally:
                ship_cpu[0] += time.thread_time() - start

        def made(self: Any, *a: Any, **kw: Any) -> None:
            init(self, *a, **kw)
            make = self._make_client

            def timed_client() -> Any:
                start = time.thread_time()
                try:
                    return make()
                finally:
                    ship_cpu[1] += time.thread_time() - start

            self._make_client = timed_client

        shipping.Shipper._run = timed  # type: ignore[method-assign]
        shipping.Shipper.__init__ = made  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as tmp:
        cpu = time.process_time()
        worker.run_recording_process(opts, f"{tmp}/ev", _Captures(rfd),  # type: ignore[arg-type]
                                     _Reports(), "info")  # type: ignore[arg-type]
        cpu = time.process_time() - cpu
        # A byte count, not a parse: the check must cost next to nothing per exchange.
        segments = [path.read_bytes()
                    for path in sorted(Path(tmp, "ev").glob("segment-*.jsonl"))]
        exchanges = sum(data.count(b'"kind":"exchange"') for data in segments)
        if args.cpu:
            print(f"bytes {sum(len(d) for d in segments)}", file=sys.__stdout__)
    time.sleep = sleep
    if args.fingerprint:
        print(hashlib.sha256(b"".join(segments)).hexdigest(), file=sys.__stdout__)
    if args.cpu:
        print(f"cpu {cpu:.6f}", file=sys.__stdout__)
        if args.ship:
            print(f"ship-thread-cpu {ship_cpu[0] - ship_cpu[1]:.6f}", file=sys.__stdout__)
            print(f"ship-client-cpu {ship_cpu[1]:.6f}", file=sys.__stdout__)
    print(f"{args.kind}: {exchanges} exchanges recorded of {args.n}", file=sys.__stdout__)
    if exchanges != args.n:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
