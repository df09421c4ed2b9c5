"""A differential of the forwarding core: the same seeded byte streams through two checkouts'
``ClientConnection`` (transports that keep every call, a clock that counts), compared by a
digest of everything each wrote, paused, closed and recorded.

Each case is a function of its seed: one to three requests (length-framed, chunked, bodiless,
HEAD, Upgrade, a bad chunk, HTTP/1.0, hop-by-hop fields, Expect) in random pieces, and
answers (length, chunked, close-delimited, 1xx then 200, 204, stray bytes, 101, SSE, a bad
head, Keep-Alive) in random pieces, with an upstream EOF or loss and a client EOF or loss at
random. A refactor of ``mcp_tap/proxy/splice`` that changes no byte and no record prints
``identical``::

    git worktree add /tmp/before main
    .venv/bin/python bench/splice_differential.py --before-root /tmp/before -n 2000

The log lines (``tap.bad-request`` ...) go to stderr and are compared too (without their
timestamps).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
_DIGEST = re.compile(r"\d+ [0-9a-f]{16}").fullmatch

class _Transport:
    """Keeps every call made on it, in order, in the shared log."""

    def __init__(self, log: list[Any], name: str) -> None:
        self.log, self.name = log, name

    def write(self, data: bytes) -> None:
        self.log.append((self.name, "w", bytes(data)))

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        self.log.append((self.name, "pause"))

    def resume_reading(self) -> None:
        self.log.append((self.name, "resume"))

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        self.log.append((self.name, "eof"))

    def close(self) -> None:
        self.log.append((self.name, "close"))

    def abort(self) -> None:
        self.log.append((self.name, "abort"))


class _Recorder:
    """Logs each begun exchange and each record, every field of it."""

    def __init__(self, log: list[Any]) -> None:
        self.log = log

    def begin(self, cap: Any) -> None:
        self.log.append(("begin", cap.http_method, cap.path))

    def record(self, cap: Any) -> None:
        d: dict[str, str] = {}
        for k in sorted(dir(cap)):
            if k.startswith("_"):
                continue
            v = getattr(cap, k)
            if callable(v):
                continue
            if hasattr(v, "state"):
                v = repr(v.state())
            elif isinstance(v, tuple) and v and hasattr(v[0], "state"):
                v = repr([x.state() for x in v])
            d[k] = repr(v)
        self.log.append(("record", repr(sorted(d.items()))))


BODY = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'


def request(rng: random.Random) -> bytes:
    """One request of a random kind."""
    kind = rng.choice(["len", "len", "chunked", "none", "head", "upgrade", "bad", "close",
                       "hop", "expect"])
    h = b"POST /mcp HTTP/1.1\r\nHost: a\r\n"
    if kind == "len":
        return h + b"Content-Length: %d\r\n\r\n" % len(BODY) + BODY
    if kind == "chunked":
        return (h + b"Transfer-Encoding: chunked\r\n\r\n" + b"%x\r\n" % len(BODY) + BODY
                + b"\r\n0\r\n\r\n")
    if kind == "none":
        return b"GET /mcp HTTP/1.1\r\nHost: a\r\nMcp-Session-Id: s1\r\n\r\n"
    if kind == "head":
        return b"HEAD /mcp HTTP/1.1\r\nHost: a\r\n\r\n"
    if kind == "upgrade":
        return b"GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: x\r\n\r\nearly"
    if kind == "bad":
        return h + b"Transfer-Encoding: chunked\r\n\r\nzz\r\nbad\r\n"
    if kind == "close":
        return h.replace(b"1.1", b"1.0") + b"Content-Length: %d\r\n\r\n" % len(BODY) + BODY
    if kind == "hop":
        return h + b"Connection: keep-alive, X-A\r\nX-A: 1\r\nContent-Length: 2\r\n\r\n{}"
    return h + b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY


def answer(rng: random.Random) -> bytes:
    """One answer of a random kind."""
    kind = rng.choice(["len", "len", "chunked", "close", "interim", "204", "stray", "101",
                       "sse", "bad", "keepalive"])
    b = b'{"jsonrpc":"2.0","id":1,"result":{}}'
    if kind == "len":
        return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(b) + b
    if kind == "chunked":
        return (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n" % len(b) + b
                + b"\r\n0\r\n\r\n")
    if kind == "close":
        return b"HTTP/1.1 200 OK\r\n\r\n" + b
    if kind == "interim":
        return b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"
    if kind == "204":
        return b"HTTP/1.1 204 No Content\r\n\r\n"
    if kind == "stray":
        return b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}junk"
    if kind == "101":
        return b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: x\r\n\r\nhi"
    if kind == "sse":
        ev = b"event: message\r\ndata: {}\r\n\r\n"
        return (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
                + b"%x\r\n" % len(ev) + ev + b"\r\n" + b"%x\r\n" % len(ev) + ev + b"\r\n0\r\n\r\n")
    if kind == "bad":
        return b"HTTP/1.1 2xx OK\r\n\r\n"
    return b"HTTP/1.1 200 OK\r\nKeep-Alive: timeout=5\r\nContent-Length: 2\r\n\r\n{}"


def pieces(rng: random.Random, data: bytes) -> list[bytes]:
    """``data`` cut at random (often whole)."""
    out = []
    while data:
        k = rng.choice([len(data), len(data), rng.randint(1, max(1, len(data)))])
        out.append(data[:k])
        data = data[k:]
    return out


async def case(seed: int) -> str:
    """One seeded case: the digest of everything logged."""
    from mcp_tap.proxy.options import load_options
    from mcp_tap.proxy.splice.client import ClientConnection
    from mcp_tap.proxy.splice.hop import HopCore
    from mcp_tap.proxy.splice.upstream import UpstreamConnection

    rng = random.Random(seed)
    log: list[Any] = []
    opts = load_options(None, env={}, listen="127.0.0.1:0", upstream="http://127.0.0.1:1")
    ticks = iter(range(10**9))
    hop = HopCore("tap", "http://127.0.0.1:1", opts, _Recorder(log), False,
                  lambda: float(next(ticks)))
    client = ClientConnection(hop)
    client.connection_made(_Transport(log, "down"))
    conns = []
    for _ in range(3):
        conn = UpstreamConnection(hop.pool)
        conn.connection_made(_Transport(log, f"up{len(conns)}"))
        hop.pool.bound += 1
        hop.pool.release(conn, reusable=True)
        conns.append(conn)
    stream = b"".join(request(rng) for _ in range(rng.randint(1, 3)))
    for p in pieces(rng, stream):
        client.data_received(p)
        await asyncio.sleep(0)
    for _ in range(4):
        owner = next((c for c in conns if c.owner is not None), None)
        if owner is None:
            await asyncio.sleep(0)
            continue
        for p in pieces(rng, answer(rng)):
            if owner.owner is None:
                break
            owner.data_received(p)
            await asyncio.sleep(0)
        r = rng.random()
        if r < 0.15 and owner.owner is not None:
            owner.eof_received()
        elif r < 0.25 and owner.owner is not None:
            owner.connection_lost(None)
        elif r < 0.3:
            client.eof_received()
        await asyncio.sleep(0)
    if rng.random() < 0.5:
        client.connection_lost(None)
    log.append(("counts", sorted(hop.counts.items()), hop.began, hop.answered))
    return hashlib.sha256(repr(log).encode()).hexdigest()[:16]

async def _run(n: int) -> None:
    for seed in range(n):
        print(seed, await case(seed), flush=True)


def _outputs(root: Path, n: int) -> tuple[list[str], list[str]]:
    """Digests per case and log lines (timestamps cut) of one checkout."""
    done = subprocess.run(
        [sys.executable, __file__, "--emit", str(root), "-n", str(n)],
        capture_output=True, text=True, check=True,
    )
    lines = done.stdout.splitlines() + done.stderr.splitlines()
    digests = [line for line in lines if _DIGEST(line)]
    logs = [line.split(" ", 2)[-1] for line in lines if not _DIGEST(line)]
    return digests, logs


def main() -> None:
    """Compare this checkout with ``--before-root`` (or emit one checkout's digests)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--before-root", type=Path, help="a checkout of the code before a change")
    p.add_argument("-n", type=int, default=1000, help="cases (seeds 0 .. n-1)")
    p.add_argument("--emit", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.emit is not None:
        sys.path.insert(0, str(args.emit.resolve()))
        asyncio.run(_run(args.n))
        return
    if args.before_root is None:
        p.error("--before-root is required")
    before, before_logs = _outputs(args.before_root, args.n)
    after, after_logs = _outputs(HERE.parent, args.n)
    differ = [b for b, a in zip(before, after, strict=True) if a != b]
    distinct = len({line.split()[1] for line in after})
    if differ or before_logs != after_logs:
        print(f"DIFFERENT: {len(differ)} of {args.n} cases (first: seed "
              f"{differ[0].split()[0] if differ else '-'}); log lines equal: "
              f"{before_logs == after_logs}")
        raise SystemExit(1)
    print(f"identical: {args.n} cases ({distinct} distinct outcomes), "
          f"{len(after_logs)} log lines")


if __name__ == "__main__":
    main()
