"""Per-exchange CPU cost of the tap's recording steps, in-process (no sockets).

Builds the ``RawExchange`` the forwarding core makes for the benchmark's JSON and SSE
exchanges (the same head parsing, head rewrite and raw body capture, bodies read to their
end) and times, in CPU time of this thread (so a noisy machine disturbs it little), the
forwarder's share and each step the recorder pays per exchange: ``Recorder.record`` as a
whole and its parts (materialize: header maps, digests, SSE decoding; judge; build; metrics
and log line, batched by 16 as the recording process does), plus the evidence writer's
work per record (canonical JSON, digest, line) and what handing records to a writer thread
costs the process per record, by batch size (a wake-up of the writer thread per batch; the
recording process writes inline since, see docs/benchmark.md). Prints CPU microseconds per
exchange, the best of ``--repeat`` batches (of 3 runs for the hand-over rows).

``--splice``: the forwarding process's own work per exchange instead, in-process: the request
bytes handed to a real client connection of a hop (as its socket would), forwarded to a pooled
upstream connection, the origin's answer bytes handed to that connection and spliced back,
the exchange finished and handed to the real :class:`ProcessRecorder`'s batch and frame
(fake transports stand in for the sockets and the pipe, so no syscall is timed). Byte-exact:
each exchange checks that the origin got the request's bytes and the client the answer's.

Run: ``.venv/bin/python bench/micro.py`` (about 10 s), ``--splice`` (about 5 s).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import io
import itertools
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from mcp_tap.evidence import EvidenceWriter
from mcp_tap.evidence.format import record_digest
from mcp_tap.logs import configure_logging
from mcp_tap.proxy.capture import RawBody, RawExchange
from mcp_tap.proxy.captured import materialize
from mcp_tap.proxy.metrics import Metrics
from mcp_tap.proxy.options import load_options
from mcp_tap.proxy.recorder import Recorder
from mcp_tap.proxy.splice.client import ClientConnection
from mcp_tap.proxy.splice.head import parse_head, rewrite
from mcp_tap.proxy.splice.hop import HopCore
from mcp_tap.proxy.splice.upstream import UpstreamConnection
from mcp_tap.proxy.worker import ProcessRecorder

sys.path.insert(0, str(Path(__file__).resolve().parent))
# The tests' in-process transport (writes kept, no socket): one fake, not a copy per user.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))
from splices import Transport
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


def captured(call: Call) -> RawExchange:
    """What the forwarding core hands the recorder for one exchange of ``call``."""
    head_raw = b"POST /mcp HTTP/1.1\r\n" + b"".join(
        k.encode() + b": " + v.encode() + b"\r\n"
        for k, v in (*call.headers, ("Host", "127.0.0.1:9002"),
                     ("Content-Length", str(len(call.body))))
    ) + b"\r\n"
    head = parse_head(head_raw)
    rewrite(head, head_raw)  # nothing to change for this request: the head goes as it came
    body = RawBody(1 << 20)
    body.feed(call.body)
    body.ended = True
    raw = RawExchange("tap", "http://127.0.0.1:9001", "127.0.0.1", "POST", "/mcp",
                      head_raw, body, time.time())
    out_raw, chunks = _origin_answer(call)
    raw.response_pairs = out_raw
    raw.status = raw.egress_status = 200
    response = RawBody(1 << 20)
    for chunk in chunks:
        response.feed(chunk, time.time())
    response.ended = True
    raw.response = response
    raw.request_framing = "length"
    raw.response_framing = "chunked" if call.sse else "length"
    raw.first_byte_at = raw.sent_at = raw.end_at = raw.egress_end_at = time.time()
    raw.egress_bytes = response.size
    return raw


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
    recorder.record(captured(JSON_CALL))
    raw = captured(call)
    cap = materialize(raw, opts.capture.max_sse_events)
    state = recorder._state(cap.hop)
    judgement = recorder._judge(cap, state, None)
    found = list(judgement.findings)
    # The bodies are whole and judged: the figures are those of every rule running.
    assert cap.request.complete and cap.response is not None and cap.response.complete
    assert judgement.method == orjson.loads(call.body)["method"] and judgement.response_messages
    record = recorder.records.build(cap, judgement, found)

    def write_side() -> None:
        r = dict(record, seq=1, prev="0" * 64)
        r["digest"] = record_digest(r)
        orjson.dumps(r, option=orjson.OPT_PASSTHROUGH_DATACLASS)

    return {
        "forwarder bookkeeping (head, raw chunks)": lambda: captured(call),
        "recorder.record (all)": lambda: recorder.record(raw),
        "  materialize (header maps, digests, SSE)": lambda: materialize(
            raw, opts.capture.max_sse_events
        ),
        "  judge (core rules + schema)": lambda: recorder._judge(cap, state, None),
        "  build record (redaction)": lambda: recorder.records.build(cap, judgement, found),
        "  metrics + exchange log line": functools.partial(
            account, recorder, cap, judgement, found),
        "    exchange log line alone": lambda: recorder.lines.info(
            "exchange",
            {"hop": "tap", "era": "modern", "method": "tools/list", "findings": []},
            {"exchange_id": "e", "trace_id": ""},
        ),
        "writer thread: digest + line": write_side,
    }


def account(recorder: Recorder, cap: Any, judgement: Any, found: Any) -> None:
    """One exchange's metrics and log line, as the recording process counts them: held
    and released in batches of 16 (one metrics update and one write per batch)."""
    if recorder._tallies is None:
        recorder.hold()
    recorder._account(cap, judgement, judgement.method, found, None,
                      {"exchange_id": "e", "trace_id": ""})
    if len(recorder._tallies or ()) >= 16:
        recorder.release()


def handoff(record: dict[str, Any], size: int, n: int = 2000) -> float:
    """CPU microseconds of this process (writer thread included) per record handed to a
    real :class:`EvidenceWriter` in batches of ``size``, the recording loop pausing 0.5 ms
    between batches as it does between reads."""
    with tempfile.TemporaryDirectory() as tmp:
        writer = EvidenceWriter(Path(tmp) / "ev")
        writer.start()
        start = time.process_time()
        for _ in range(0, n, size):
            writer.submit_many([dict(record) for _ in range(size)])
            time.sleep(0.0005)
        writer.flush(60)
        cpu = time.process_time() - start
        writer.close()
    return cpu / n * 1e6


def _request_bytes(call: Call) -> bytes:
    head = b"POST /mcp HTTP/1.1\r\n" + b"".join(
        k.encode() + b": " + v.encode() + b"\r\n"
        for k, v in (*call.headers, ("Host", "127.0.0.1:9002"),
                     ("Content-Length", str(len(call.body))))
    ) + b"\r\n"
    return head + call.body


def _response_bytes(call: Call) -> bytes:
    pairs, chunks = _origin_answer(call)
    if call.sse:
        body = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"
    else:
        body = chunks[0]
        pairs = tuple((k, str(len(body)).encode() if k == b"Content-Length" else v)
                      for k, v in pairs)
    return b"HTTP/1.1 200 OK\r\n" + b"".join(k + b": " + v + b"\r\n" for k, v in pairs) \
        + b"\r\n" + body


def _response_reads(call: Call, split: bool) -> list[bytes]:
    """The origin's answer as the tap reads it: whole, or (``split``, an SSE answer) one
    event per read, the head with the first one and the last-chunk line on its own, as a
    stream comes."""
    response = _response_bytes(call)
    if not split:
        return [response]
    reads, rest = [], response
    while (end := rest.find(b"\n\n\r\n")) >= 0:  # the end of an event's chunk
        reads.append(rest[: end + 4])
        rest = rest[end + 4:]
    reads.append(rest)
    return reads


def _connections(
    hop: HopCore,
) -> tuple[ClientConnection, Transport, UpstreamConnection, Transport]:
    """A client connection and a pooled upstream connection of ``hop``, each on a fake
    transport (what they write is kept in the transport's ``out``)."""
    client = ClientConnection(hop)
    down = Transport()
    client.connection_made(down)  # type: ignore[arg-type]
    conn = UpstreamConnection(hop.pool)
    up = Transport()
    conn.connection_made(up)  # type: ignore[arg-type]
    hop.pool.bound += 1
    hop.pool.release(conn, reusable=True)
    return client, down, conn, up


def splice_exchanges(
    hop: HopCore, recorder: ProcessRecorder, call: Call, split: bool = False,
    distinct: int = 0,
) -> Callable[[int], None]:
    """A client connection and a pooled upstream connection of ``hop`` (fake transports)
    and a function that splices ``batch`` exchanges of ``call`` through them, then flushes
    the hand-off (what the loop does once per iteration). ``distinct``: cycle through that
    many exchanges whose request and response heads each carry their own ``X-Request-Id``
    (no head seen again before ``distinct`` others: what a client whose every head
    differs costs), instead of one exchange repeated."""
    if distinct:
        exchanges = []
        for i in range(distinct):
            tag = f"{i:08x}".encode()
            reads = _response_reads(call, split)
            exchanges.append((
                _request_bytes(call).replace(b"\r\n\r\n", b"\r\nX-Request-Id: " + tag
                                             + b"\r\n\r\n", 1),
                [reads[0].replace(b"\r\n\r\n", b"\r\nX-Request-Id: " + tag + b"\r\n\r\n", 1),
                 *reads[1:]]))
    else:
        exchanges = [(_request_bytes(call), _response_reads(call, split))]
    client, down, conn, up = _connections(hop)
    turn = itertools.cycle(exchanges)

    def exchange(batch: int) -> None:
        for _ in range(batch):
            request, reads = next(turn)
            client.data_received(request)
            for data in reads:
                conn.data_received(data)
        recorder._flush()
        up.writes.clear()
        down.writes.clear()

    return exchange


async def splice_set_up(opts: Any) -> tuple[HopCore, ProcessRecorder, Transport]:
    """A hop whose recorder is the real :class:`ProcessRecorder` (its process never starts:
    its frames go to a fake pipe)."""
    metrics = Metrics()
    with tempfile.TemporaryDirectory() as tmp:
        recorder = ProcessRecorder(opts, Path(tmp) / "ev", metrics)
    pipe = Transport()
    recorder._transport = pipe  # type: ignore[assignment]
    recorder._loop = asyncio.get_running_loop()
    recorder.queue_size = 1 << 60
    hop = HopCore("tap", "http://127.0.0.1:9001", opts, recorder, False, time.time)
    return hop, recorder, pipe


def _splice_call(hop: HopCore, recorder: ProcessRecorder, pipe: Transport, call: Call,
                 n: int, repeat: int) -> list[tuple[str, str, float]]:
    """CPU microseconds per spliced exchange of ``call``, hand-off in batches of 1 and 8."""
    request, response = _request_bytes(call), _response_bytes(call)
    client, down, conn, up = _connections(hop)

    def exchange(batch: int) -> None:
        for _ in range(batch):
            client.data_received(request)
            conn.data_received(response)
        recorder._flush()  # what the loop does once per iteration

    pipe.writes.clear()
    exchange(1)
    # Byte-exact, both ways, one write per received chunk, one frame per flush.
    assert b"".join(up.writes) == request and len(up.writes) == 1, up.writes
    assert b"".join(down.writes) == response and len(down.writes) == 1, down.writes
    assert len(pipe.writes) == 1 and client.exchange is None
    rows = []
    for batch in (1, 8):
        best = []
        for _ in range(repeat):
            up.writes.clear()
            down.writes.clear()
            pipe.writes.clear()
            start = time.thread_time()
            for _ in range(n // batch):
                exchange(batch)
            best.append((time.thread_time() - start) / (n // batch * batch) * 1e6)
        rows.append((call.name, f"splice: request in -> origin -> answer back, "
                     f"hand-off in batches of {batch}", min(best)))
    client.connection_lost(None)
    return rows


async def _splice_rows(opts: Any, n: int, repeat: int) -> list[tuple[str, str, float]]:
    """CPU microseconds per spliced exchange (see the module's ``--splice``)."""
    hop, recorder, pipe = await splice_set_up(opts)
    rows = [row for call in (JSON_CALL, SSE_CALL)
            for row in _splice_call(hop, recorder, pipe, call, n, repeat)]
    exchange = splice_exchanges(hop, recorder, SSE_CALL, split=True)
    best = []
    for _ in range(repeat):
        start = time.thread_time()
        for _ in range(n // 8):
            exchange(8)
        best.append((time.thread_time() - start) / (n // 8 * 8) * 1e6)
    rows.append((SSE_CALL.name, "splice, the answer read one event at a time, batches of 8",
                 min(best)))
    return rows


def main() -> None:
    """Time each step and print a table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-n", type=int, default=1000, help="calls per batch")
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--splice", action="store_true",
                   help="time the forwarding process's splice path instead")
    args = p.parse_args()
    if args.splice:
        opts = load_options(None, env={}, listen="127.0.0.1:0",
                            upstream="http://127.0.0.1:9001")
        rows = asyncio.run(_splice_rows(opts, args.n, args.repeat))
        width = max(len(r[1]) for r in rows)
        print(f"{'call':<6} {'step':<{width}} {'us/exchange':>12}")
        for kind, name, us in rows:
            print(f"{kind:<6} {name:<{width}} {us:12.1f}")
        return
    # Log lines go to a throwaway buffer: we time making them, not the terminal. (The
    # logging set-up itself stays as the proxy has it: lines go to whatever stderr is.)
    configure_logging("info")
    sink = io.StringIO()
    sys.stderr = sink
    opts = load_options(None, env={}, listen="127.0.0.1:0", upstream="http://127.0.0.1:9001")
    rows = []
    for call in (JSON_CALL, SSE_CALL):
        for name, fn in steps(call, opts).items():
            rows.append((call.name, name, per_call(fn, args.n, args.repeat)))
    record = Recorder(opts, _NullSink(), Metrics(), time.time).record(captured(JSON_CALL))
    for size in (1, 4, 16):
        rows.append(("json", f"hand-over to the writer, batches of {size} (process CPU)",
                     min(handoff(record, size) for _ in range(3))))
    width = max(len(r[1]) for r in rows)
    print(f"{'call':<6} {'step':<{width}} {'us/exchange':>12}")
    for kind, name, us in rows:
        print(f"{kind:<6} {name:<{width}} {us:12.1f}")


if __name__ == "__main__":
    main()
