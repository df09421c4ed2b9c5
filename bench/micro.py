"""Per-exchange CPU cost of the tap's recording steps, in-process (no sockets).

Builds the ``Captured`` the forwarder makes for the benchmark's JSON and SSE exchanges and
times, in CPU time of this thread (so a noisy machine disturbs it little), each step the
request path pays after the answer went out: ``Recorder.record`` as a whole and its parts
(judge, build, log line), plus the evidence writer thread's work per record (canonical JSON,
digest, line). Prints CPU microseconds per exchange, the best of ``--repeat`` batches.

Run: ``.venv/bin/python bench/micro.py`` (about 10 s).
"""

from __future__ import annotations

import argparse
import functools
import io
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import structlog

from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.sse import SSEDecoder
from mcp_tap.evidence.format import record_digest
from mcp_tap.logs import configure_logging
from mcp_tap.proxy.capture import BodyCapture
from mcp_tap.proxy.forward import _decode_raw, _traceparent, end_to_end
from mcp_tap.proxy.metrics import Metrics
from mcp_tap.proxy.options import TracingOptions, load_options
from mcp_tap.proxy.recorder import Captured, Recorder, TimedEvent

sys.path.insert(0, str(Path(__file__).resolve().parent))
from workload import JSON_CALL, SSE_CALL, Call

ORIGIN_JSON_HEADERS = (
    (b"Content-Type", b"application/json; charset=utf-8"),
    (b"Content-Length", b"925"),
    (b"Date", b"Wed, 02 Dec 2026 17:49:52 GMT"),
    (b"Server", b"Python/3.11 aiohttp/3.14.5"),
)
ORIGIN_SSE_HEADERS = (
    (b"Content-Type", b"text/event-stream"),
    (b"Cache-Control", b"no-cache"),
    (b"X-Accel-Buffering", b"no"),
    (b"Transfer-Encoding", b"chunked"),
    (b"Date", b"Wed, 02 Dec 2026 17:49:52 GMT"),
    (b"Server", b"Python/3.11 aiohttp/3.14.5"),
)


class _NullSink:
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def submit(self, record: dict[str, Any]) -> bool:
        self.records.append(record)
        if len(self.records) > 20:
            self.records.clear()
        return True


@functools.cache
def _origin_answer(call: Call) -> tuple[tuple[tuple[bytes, bytes], ...], list[bytes]]:
    import origin

    message = orjson.loads(call.body)
    if call.sse:
        token = message["params"]["_meta"].get("progressToken", "p-1")
        n = message["params"]["arguments"]["n"]
        chunks = [origin._progress(token, i, n) for i in range(1, n + 1)]
        done = origin._result(1, {"content": [{"type": "text", "text": f"counted {n}"}]})
        chunks.append(origin._event(done))
        return ORIGIN_SSE_HEADERS, chunks
    body = origin._result(1, {"tools": origin.TOOLS, "ttlMs": 60000, "cacheScope": "public"})
    return ORIGIN_JSON_HEADERS, [orjson.dumps(body)]


def captured(call: Call, recorder: Recorder) -> Captured:
    """What the forwarder hands the recorder for one exchange of ``call``."""
    raw = (
        *((k.encode(), v.encode()) for k, v in call.headers),
        (b"Host", b"127.0.0.1:9002"),
        (b"Content-Length", str(len(call.body)).encode()),
    )
    headers = _decode_raw(raw)
    trace_id, new = _traceparent(headers, TracingOptions())
    forwarded = end_to_end(headers).without(("host",))
    forwarded = HeaderMap((("Host", "127.0.0.1:9001"), *forwarded.pairs, ("traceparent", new)))
    cap = Captured(
        hop="tap",
        upstream="http://127.0.0.1:9001",
        client="127.0.0.1",
        user_agent="",
        http_method="POST",
        path="/mcp",
        request_headers=headers,
        forwarded_headers=forwarded,
        request=BodyCapture(1 << 20, ""),
        received_at=time.time(),
        trace_id=trace_id,
    )
    cap.request.feed(call.body)
    out_raw, chunks = _origin_answer(call)
    cap.response_headers = _decode_raw(out_raw)
    cap.status = 200
    cap.response = BodyCapture(1 << 20, "")
    decoder = SSEDecoder() if call.sse else None
    for chunk in chunks:
        cap.response.feed(chunk)
        if decoder is not None:
            cap.sse.extend(TimedEvent(time.time(), e) for e in decoder.feed(chunk))
    cap.egress_status = 200
    cap.egress_headers = end_to_end(cap.response_headers)
    cap.first_byte_at = cap.sent_at = cap.end_at = cap.egress_end_at = time.time()
    cap.egress_digest = cap.response.digest
    cap.egress_bytes = cap.response.size
    return cap


def per_call(fn: Callable[[], Any], n: int, repeat: int) -> float:
    """CPU microseconds per call of ``fn``: the best of ``repeat`` batches of ``n`` calls.

    The minimum, not the median: on a shared machine the other batches are slowed by
    neighbours (caches, a sibling hyperthread), never sped up.
    """
    batches = []
    for _ in range(repeat):
        start = time.thread_time()
        for _ in range(n):
            fn()
        batches.append((time.thread_time() - start) / n * 1e6)
    return min(batches)


def steps(call: Call, opts: Any) -> dict[str, Callable[[], Any]]:
    """The steps to time for ``call``, each a no-argument callable."""
    recorder = Recorder(opts, _NullSink(), Metrics(), time.time)
    # Teach the recorder the tool schemas, as the JSON run does through the tap.
    recorder.record(captured(JSON_CALL, recorder))
    cap = captured(call, recorder)
    state = recorder._state(cap.hop)
    judgement = recorder._judge(cap, state)
    found = list(judgement.findings)
    record = recorder._build(cap, judgement, found)
    line_log = structlog.get_logger("mcp_tap.proxy")

    def write_side() -> None:
        r = dict(record, seq=1, prev="0" * 64)
        r["digest"] = record_digest(r)
        orjson.dumps(r, option=orjson.OPT_PASSTHROUGH_DATACLASS)

    return {
        "forwarder bookkeeping (headers, digests, SSE)": lambda: captured(call, recorder),
        "recorder.record (all)": lambda: recorder.record(cap),
        "  judge (core rules + schema)": lambda: recorder._judge(cap, state),
        "  build record (redaction)": lambda: recorder._build(cap, judgement, found),
        "  metrics + exchange log line": lambda: recorder._account(cap, judgement, found, None),
        "    exchange log line alone": lambda: line_log.info(
            "exchange", hop="tap", era="modern", method="tools/list", findings=[]
        ),
        "writer thread: digest + line": write_side,
    }


def main() -> None:
    """Time each step and print a table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-n", type=int, default=1000, help="calls per batch")
    p.add_argument("--repeat", type=int, default=7)
    args = p.parse_args()
    # Log lines go to a throwaway buffer: we time making them, not the terminal.
    configure_logging("info")
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=io.StringIO()))
    opts = load_options(None, env={}, listen="127.0.0.1:0", upstream="http://127.0.0.1:9001")
    rows = []
    for call in (JSON_CALL, SSE_CALL):
        for name, fn in steps(call, opts).items():
            rows.append((call.name, name, per_call(fn, args.n, args.repeat)))
    width = max(len(r[1]) for r in rows)
    print(f"{'call':<6} {'step':<{width}} {'us/exchange':>12}")
    for kind, name, us in rows:
        print(f"{kind:<6} {name:<{width}} {us:12.1f}")


if __name__ == "__main__":
    main()
