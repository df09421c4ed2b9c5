"""A real ``mcp-tap proxy`` process in front of a small real aiohttp origin, fed raw bytes.

Shared by ``tests/proxy/test_fuzz_http.py`` and ``bench/fuzz_http.py``. Loopback only. What must
hold after any input (:class:`FuzzTap` checks it):

- every answer the tap makes itself (``X-Mcp-Tap-Error``) is a 400/408/431/502/503/504, and
  every other answer is the origin's (aiohttp's ``Server`` header, or an interim 1xx);
- a well-formed request sent between fuzz inputs reaches the origin byte for byte, and its
  answer reaches the client byte for byte (compared with the origin's answer, asked directly);
- ``/healthz`` answers 200, the process is alive, and every stderr line is one JSON object
  (the operator's ``mcp-tap:`` start-up lines aside) with no traceback and no planted bytes.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import random
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from aiohttp import web
from fuzz_http_inputs import MARKER, response_stream, valid_request
from peers import free_port
from taps import Lines

REPO_ROOT = Path(__file__).resolve().parents[2]
TAP_STATUSES = frozenset({400, 408, 431, 502, 503, 504})
"""What the tap may answer itself (408: a head not whole within ``head_timeout_s``)."""
_FIXED_DATE = "Thu, 03 Dec 2026 00:00:00 GMT"  # a fixed Date: the origin's answers repeat
_STATUS = re.compile(rb"HTTP/\d\.\d (\d{3})[^\r\n]*\r\n")
_START_S = 60.0


async def _origin_handler(request: web.Request) -> web.Response:
    """``/echo``: the request as it arrived (start line, raw fields, body), base64; else a
    fixed JSON answer."""
    body = await request.read()
    headers = {"Date": _FIXED_DATE}
    if request.path == "/echo":
        version = f"HTTP/{request.version.major}.{request.version.minor}".encode()
        raw = b"%s %s %s\r\n" % (request.method.encode(), request.raw_path.encode(), version)
        raw += b"".join(k + b": " + v + b"\r\n" for k, v in request.raw_headers) + b"\r\n"
        response = web.Response(body=base64.b64encode(raw + body), headers=headers,
                                content_type="text/plain")
    else:
        response = web.Response(body=b'{"ok":true}', headers=headers,
                                content_type="application/json")
    if "chunked" in request.headers.get("Transfer-Encoding", "").lower():
        # aiohttp 3.14's parser hands a chunked request's trailer fields to the next request
        # on the same connection as header fields (the fuzzer found it; the tap forwards
        # both byte for byte): such a connection is not reused.
        response.force_close()
    return response


async def start_origin() -> tuple[web.AppRunner, int]:
    """A real aiohttp origin on a free loopback port (its own error logs silenced: it is
    fed the fuzz inputs the tap forwards, and what it thinks of them is not under test)."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", _origin_handler)
    quiet = logging.getLogger("fuzz-origin")  # its own logger: aiohttp's stays as it was
    quiet.propagate = False
    quiet.setLevel(logging.CRITICAL)
    runner = web.AppRunner(app, access_log=None, handle_signals=False, logger=quiet)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, port


async def start_raw_origin(seed: str) -> tuple[asyncio.Server, int]:
    """A faulty origin: reads a request head and answers with the generated upstream byte
    stream its ``X-Input`` field names (valid, mutated, interim answers, random bytes), then
    closes."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
            writer.write(origin_bytes(seed, head))
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError,
                TimeoutError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def origin_bytes(seed: str, head: bytes) -> bytes:
    """What the faulty origin answers to a request head (a function of its ``X-Input``)."""
    found = re.search(rb"\r\nX-Input: (\d+)\r\n", head)
    index = int(found.group(1)) if found else -1
    return response_stream(random.Random(f"{seed}:upstream:{index}"))


def upstream_request(index: int) -> bytes:
    """The well-formed request that makes the faulty origin send input ``index``."""
    method = (b"GET", b"POST", b"HEAD")[index % 3]
    body = b"{}" if method == b"POST" else b""
    return (method + b" /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Input: %d\r\n" % index +
            (b"Content-Length: 2\r\n" if body else b"") + b"\r\n" + body)


def check_upstream_answer(got: bytes, sent: bytes) -> str:
    """The client sees the tap's own answer (allowed status, marked), or the origin's bytes
    from its first line on, or nothing (the exchange was cut)."""
    if not got:
        return "cut"
    head = got.partition(b"\r\n\r\n")[0].lower()
    if b"\r\nx-mcp-tap-error:" in head:
        status = int(got[9:12])
        assert status in TAP_STATUSES, f"the tap answered {status}: {got[:300]!r}"
        return str(status)
    first = sent.split(b"\r\n", 1)[0]
    assert got.startswith(first), f"not the origin's answer: {got[:200]!r} for {sent[:200]!r}"
    return "forwarded"


async def exchange_bytes(port: int, data: bytes, timeout: float = 30.0,
                         half_close: bool = True) -> tuple[bytes, str]:
    """Send ``data`` on a new connection, half-close, read to the end: ``(answer, how)``.

    ``how`` is ``eof`` or ``reset`` (the tap closed while bytes were still coming, which
    loses what it wrote; a normal outcome for a refused request with more bytes behind it).
    Without ``half_close`` one Content-Length answer is read (aiohttp takes a half-close for
    a client that left, and drops the answer).
    """
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    got = b""
    try:
        writer.write(data)
        await writer.drain()
        if not half_close:
            got = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
            length = re.search(rb"(?im)^content-length:\s*(\d+)\s*$", got)
            got += await asyncio.wait_for(
                reader.readexactly(int(length.group(1)) if length else 0), timeout)
            return got, "eof"
        if writer.can_write_eof():
            writer.write_eof()
        got = await asyncio.wait_for(reader.read(), timeout)
        how = "eof"
    except TimeoutError:
        raise AssertionError(f"the connection did not end within {timeout} s") from None
    except (ConnectionResetError, BrokenPipeError):
        how = "reset"
    finally:
        writer.close()
        with contextlib.suppress(ConnectionResetError, BrokenPipeError):
            await writer.wait_closed()
    return got, how


def answers(data: bytes) -> list[tuple[int, bytes]]:
    """The ``(status, head)`` of each answer in a client's byte stream (bodies skipped by
    Content-Length; a HEAD answer's missing body is recognised by what follows its head)."""
    out: list[tuple[int, bytes]] = []
    pos = 0
    while pos < len(data):
        match = _STATUS.match(data, pos)
        if match is None:
            raise AssertionError(f"not an HTTP answer at byte {pos}: {data[pos:pos + 80]!r}")
        end = data.find(b"\r\n\r\n", pos)
        if end < 0:
            raise AssertionError(f"an answer head without its end: {data[pos:pos + 200]!r}")
        head = data[pos:end + 4]
        out.append((int(match.group(1)), head))
        pos = end + 4
        length = re.search(rb"(?im)^content-length:\s*(\d+)\s*$", head)
        if length and _STATUS.match(data, pos) is None:
            pos += int(length.group(1))
        elif not length and _STATUS.match(data, pos) is None and pos < len(data):
            break  # a body read to the end of the connection
    return out


def check_answers(data: bytes) -> list[int]:
    """Assert every answer is the tap's (allowed status, marked) or the origin's."""
    statuses = []
    for status, head in answers(data):
        statuses.append(status)
        lower = head.lower()
        if b"\r\nx-mcp-tap-error:" in lower:
            assert status in TAP_STATUSES, f"the tap answered {status}: {head!r}"
        else:
            assert status < 200 or (b"\r\nserver: " in lower and b"aiohttp" in lower), \
                f"an answer from neither the tap nor the origin: {head!r}"
    return statuses


class FuzzTap:
    """One ``mcp-tap proxy`` process, its aiohttp origin, and the checks between inputs."""

    def __init__(self, evidence: Path, faulty_origin: str | None = None) -> None:
        self.evidence = evidence
        self.faulty_origin = faulty_origin  # a seed: the origin answers generated bytes
        self._raw: asyncio.Server | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.stderr: Lines | None = None
        self.port = 0
        self.admin = 0
        self.origin_port = 0
        self._runner: web.AppRunner | None = None
        self.probes = 0

    async def start(self, **env_extra: str) -> None:
        """Start the origin, then the proxy in front of it (recording in its own process)."""
        if self.faulty_origin is not None:
            self._raw, self.origin_port = await start_raw_origin(self.faulty_origin)
        else:
            self._runner, self.origin_port = await start_origin()
        self.port, self.admin = free_port(), free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_TAP_")}
        env.update(PYTHONPATH=str(REPO_ROOT), PYTHONUNBUFFERED="1",
                   MCP_TAP_LISTENER_HEAD_TIMEOUT_S="5", **env_extra)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mcp_tap", "proxy", "--listen", f"127.0.0.1:{self.port}",
             "--upstream", f"http://127.0.0.1:{self.origin_port}", "--evidence",
             str(self.evidence), "--admin", f"127.0.0.1:{self.admin}"],
            cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self.stderr = Lines(self.proc.stderr)
        await asyncio.to_thread(self.stderr.wait_for, '"event":"proxy.started"', _START_S)

    async def send(self, data: bytes) -> list[int]:
        """One fuzz input on its own connection; the statuses answered (checked)."""
        got, _ = await exchange_bytes(self.port, data)
        return check_answers(got)

    async def upstream(self, index: int) -> str:
        """One generated upstream answer (faulty origin): what the client saw, checked."""
        assert self.faulty_origin is not None
        sent = upstream_request(index)
        got, _ = await exchange_bytes(self.port, sent)
        return check_upstream_answer(got, origin_bytes(self.faulty_origin, sent))

    async def probe(self, rng: random.Random) -> None:
        """A well-formed request: forwarded byte for byte, answered byte for byte."""
        body = rng.choice([b"{}", b'{"jsonrpc":"2.0","id":1,"method":"ping"}',
                           bytes(rng.randrange(256) for _ in range(rng.randint(0, 300)))])
        sent = valid_request(rng, body=body, path=b"/echo", chunked=False)
        via_tap, how = await exchange_bytes(self.port, sent)
        direct, _ = await exchange_bytes(self.origin_port, sent, half_close=False)
        assert how == "eof", how
        _, _, echoed = via_tap.partition(b"\r\n\r\n")
        assert base64.b64decode(echoed) == sent, (
            f"the request was not forwarded byte for byte: sent {sent!r}, answer {via_tap!r}")
        assert via_tap == direct, f"the answer changed: {via_tap!r} != {direct!r}"
        self.probes += 1

    async def healthy(self) -> None:
        """The process is alive and ``/healthz`` answers 200."""
        assert self.proc is not None and self.proc.poll() is None, "the proxy died"
        got, _ = await exchange_bytes(
            self.admin, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", half_close=False)
        assert got.startswith(b"HTTP/1.1 200 "), got[:200]

    def check_logs(self) -> int:
        """Every stderr line so far is one JSON object without traceback or planted bytes;
        returns how many log lines there were."""
        assert self.stderr is not None
        with self.stderr.changed:
            lines = list(self.stderr.lines)
        logs = [ln for ln in lines if ln.strip() and not ln.startswith("mcp-tap: ")]
        for line in logs:
            assert "Traceback" not in line, line
            assert MARKER.decode() not in line, f"planted bytes reached the log: {line[:300]}"
            try:
                event: Any = json.loads(line)
            except ValueError:
                raise AssertionError(f"not one JSON object: {line[:4000]!r}") from None
            assert isinstance(event, dict) and "event" in event, line[:300]
            # An error line is a crash caught by asyncio ("Fatal error: protocol.
            # data_received() call failed") or a lost record: never expected here.
            assert event.get("level") not in ("error", "critical"), line[:600]
        return len(logs)

    async def stop(self) -> int:
        """SIGTERM the proxy (its exit status is returned) and stop the origin."""
        code = -1
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    code = await asyncio.to_thread(self.proc.wait, 60)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    await asyncio.to_thread(self.proc.wait, 10)
            else:
                code = self.proc.returncode
            if self.stderr is not None:
                await asyncio.to_thread(self.stderr.join)
            if self.proc.stderr is not None:
                self.proc.stderr.close()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._raw is not None:
            self._raw.close()
            await self._raw.wait_closed()
        return code
