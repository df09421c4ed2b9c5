"""A small HTTP/1.1 keep-alive client for the benchmark, run as its own process.

Modes (each prints one JSON object on stdout):

* ``load``: closed-loop load, ``--connections`` workers each sending the same request on
  one keep-alive connection for ``--seconds`` (the fallback when ``wrk`` is missing);
* ``first-event``: one connection, sequential SSE requests; time to the first complete SSE
  event and to the end of the answer, per request;
* ``upload``: one request whose body is ``--size`` bytes, generated and sent in 1 MiB
  pieces (never held whole);
* ``download`` / ``stream``: one request whose (large or long) answer is read and counted,
  never held.

Responses are parsed with Content-Length or chunked framing; nothing beyond what the bench
origin and the proxies send is supported. Every loop is bounded by a deadline.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

import orjson

_MiB = 1024 * 1024


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0..100) by nearest rank; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def request_bytes(host: str, port: int, path: str, body: bytes, headers: dict[str, str]) -> bytes:
    """One POST request, ready to send."""
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}:{port}", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class Answer:
    """What was read of one response."""

    __slots__ = ("first_event_at", "size", "status")

    def __init__(self) -> None:
        self.status = 0
        self.size = 0
        self.first_event_at: float | None = None


async def read_answer(
    reader: asyncio.StreamReader, *, sse: bool = False, on_event: Any = None
) -> Answer:
    """Read one response; note when the first SSE event (a blank-line-terminated block) ends."""
    answer = Answer()
    head = await reader.readuntil(b"\r\n\r\n")
    status_line, _, rest = head.partition(b"\r\n")
    answer.status = int(status_line.split(b" ", 2)[1])
    length: int | None = None
    chunked = False
    for line in rest.split(b"\r\n"):
        name, _, value = line.partition(b":")
        key = name.strip().lower()
        if key == b"content-length":
            length = int(value.strip())
        elif key == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    tail = b""  # the end of the SSE text seen so far, to find "\n\n" across chunks

    def feed(data: bytes) -> None:
        nonlocal tail
        answer.size += len(data)
        if not sse:
            return
        text = tail + data
        if answer.first_event_at is None and (b"\n\n" in text or b"\r\n\r\n" in text):
            answer.first_event_at = time.perf_counter()
        if on_event is not None:
            on_event(text.count(b"\n\n") - tail.count(b"\n\n"))
        tail = text[-3:]

    if chunked:
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                await reader.readuntil(b"\r\n")  # no trailers from our peers
                break
            left = size
            while left:
                data = await reader.read(min(left, _MiB))
                if not data:
                    raise ConnectionError("connection closed mid-chunk")
                left -= len(data)
                feed(data)
            await reader.readexactly(2)
    elif length is not None:
        left = length
        while left:
            data = await reader.read(min(left, _MiB))
            if not data:
                raise ConnectionError("connection closed mid-body")
            left -= len(data)
            feed(data)
    return answer


async def load(
    host: str, port: int, raw: bytes, connections: int, seconds: float, sse: bool
) -> dict[str, Any]:
    """Closed-loop load; latencies of requests completed before the deadline."""
    latencies: list[float] = []
    errors = 0
    non2xx = 0
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal errors, non2xx
        reader, writer = await asyncio.open_connection(host, port)
        try:
            while time.perf_counter() < deadline:
                start = time.perf_counter()
                writer.write(raw)
                answer = await asyncio.wait_for(read_answer(reader, sse=sse), timeout=10)
                latencies.append(time.perf_counter() - start)
                if not 200 <= answer.status < 300:
                    non2xx += 1
        except (OSError, asyncio.IncompleteReadError, TimeoutError, ValueError):
            errors += 1
        finally:
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(connections)))
    elapsed = time.perf_counter() - started
    return {
        "requests": len(latencies),
        "seconds": elapsed,
        "rps": len(latencies) / elapsed if elapsed else 0.0,
        "p50_ms": percentile(latencies, 50) * 1000,
        "p99_ms": percentile(latencies, 99) * 1000,
        "errors": errors,
        "non2xx": non2xx,
    }


async def first_event(host: str, port: int, raw: bytes, seconds: float) -> dict[str, Any]:
    """Sequential SSE requests on one connection: time to first event and to the end."""
    firsts: list[float] = []
    totals: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds
    reader, writer = await asyncio.open_connection(host, port)
    try:
        while time.perf_counter() < deadline:
            start = time.perf_counter()
            writer.write(raw)
            answer = await asyncio.wait_for(read_answer(reader, sse=True), timeout=10)
            end = time.perf_counter()
            if answer.status != 200 or answer.first_event_at is None:
                errors += 1
                continue
            firsts.append(answer.first_event_at - start)
            totals.append(end - start)
    except (OSError, asyncio.IncompleteReadError, TimeoutError, ValueError):
        errors += 1
    finally:
        writer.close()
    return {
        "requests": len(firsts),
        "first_p50_ms": percentile(firsts, 50) * 1000,
        "first_p99_ms": percentile(firsts, 99) * 1000,
        "total_p50_ms": percentile(totals, 50) * 1000,
        "errors": errors,
    }


async def upload(host: str, port: int, path: str, size: int, headers: dict[str, str]) -> Any:
    """One request with a ``size``-byte JSON body, generated on the fly."""
    prefix = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"upload",'
    prefix += b'"arguments":{"blob":"'
    suffix = b'"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
    suffix += b'"io.modelcontextprotocol/clientCapabilities":{}}}}'
    filler = size - len(prefix) - len(suffix)
    head = request_bytes(host, port, path, b"", headers)
    head = head.replace(b"Content-Length: 0\r\n", f"Content-Length: {size}\r\n".encode())
    start = time.perf_counter()
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(head + prefix)
        block = b"A" * _MiB
        left = filler
        while left > 0:
            writer.write(block if left >= _MiB else block[:left])
            left -= _MiB
            await writer.drain()
        writer.write(suffix)
        await writer.drain()
        answer = await asyncio.wait_for(read_answer(reader), timeout=120)
    finally:
        writer.close()
    return {"status": answer.status, "sent": size, "seconds": time.perf_counter() - start}


async def one(host: str, port: int, raw: bytes, sse: bool, timeout: float) -> Any:
    """One request whose answer is read and counted (large download or long stream)."""
    events = 0

    def count(n: int) -> None:
        nonlocal events
        events += n

    start = time.perf_counter()
    reader, writer = await asyncio.open_connection(host, port, limit=4 * _MiB)
    try:
        writer.write(raw)
        answer = await asyncio.wait_for(
            read_answer(reader, sse=sse, on_event=count if sse else None), timeout=timeout
        )
    finally:
        writer.close()
    return {
        "status": answer.status,
        "received": answer.size,
        "events": events,
        "seconds": time.perf_counter() - start,
    }


def main() -> None:
    """Parse arguments, run one mode, print its JSON result."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("mode", choices=["load", "first-event", "upload", "download", "stream"])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--path", default="/mcp")
    p.add_argument("--body", default="", help="request body (JSON text)")
    p.add_argument("--header", action="append", default=[], help="NAME: VALUE")
    p.add_argument("--connections", type=int, default=1)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--size", type=int, default=200 * 1000 * 1000)
    p.add_argument("--sse", action="store_true", help="answers are SSE")
    args = p.parse_args()
    headers = dict(h.split(": ", 1) for h in args.header)
    raw = request_bytes(args.host, args.port, args.path, args.body.encode(), headers)
    if args.mode == "load":
        coro: Any = load(args.host, args.port, raw, args.connections, args.seconds, args.sse)
    elif args.mode == "first-event":
        coro = first_event(args.host, args.port, raw, args.seconds)
    elif args.mode == "upload":
        coro = upload(args.host, args.port, args.path, args.size, headers)
    else:
        coro = one(args.host, args.port, raw, args.mode == "stream", args.seconds + 60)
    result = asyncio.run(coro)
    sys.stdout.write(orjson.dumps(result).decode() + "\n")


if __name__ == "__main__":
    main()
