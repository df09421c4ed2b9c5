"""The forwarding core over raw sockets: the bytes the client sent are the bytes the origin
receives, and the reverse, byte for byte (except each recorded head change).

The origin is a real raw-socket server on loopback that records every byte it receives and
answers with scripted bytes once it has read exactly the request the test sent: if the tap
changed, dropped or added a single byte, the origin's bytes differ (or it never answers).
"""

from __future__ import annotations

import asyncio
import gzip
import json
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from taps import exchanges, records, running_tap, tap_options

from mcp_tap.proxy.options import ListenerOptions, UpstreamOptions
from mcp_tap.proxy.server import TapServer

_TIMEOUT = 20.0


@dataclass
class Step:
    """Read exactly ``expect`` bytes, then write ``answer``."""

    expect: bytes
    answer: bytes
    then_tunnel: bool = False  # after answering, echo every byte back (an upgraded tunnel)


@dataclass
class RawOrigin:
    """A raw-socket origin following a script of steps per connection (shared, in order)."""

    steps: list[Step]
    received: list[bytes] = field(default_factory=list)
    server: asyncio.Server | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while self.steps:
                step = self.steps.pop(0)
                got = await reader.readexactly(len(step.expect))
                self.received.append(got)
                writer.write(step.answer)
                await writer.drain()
                if step.then_tunnel:
                    while data := await reader.read(65536):
                        self.received.append(data)
                        writer.write(data.upper())
                        await writer.drain()
                    writer.write_eof()
                    return
            await reader.read()  # the tap keeps the connection for reuse until it closes
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    @property
    def base(self) -> str:
        assert self.server is not None
        host, port = self.server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"


@pytest.fixture
async def raw_origin() -> AsyncIterator[RawOrigin]:
    origin = RawOrigin([])
    origin.server = await asyncio.start_server(origin.handle, "127.0.0.1", 0)
    yield origin
    origin.server.close()


def _port(tap: TapServer) -> int:
    return next(iter(tap.addresses.values()))[1]


async def _exchange_raw(tap: TapServer, data: bytes, until: int) -> bytes:
    """Send ``data`` to the tap and read until ``until`` bytes came back."""
    reader, writer = await asyncio.open_connection("127.0.0.1", _port(tap))
    writer.write(data)
    await writer.drain()
    got = await asyncio.wait_for(reader.readexactly(until), _TIMEOUT)
    writer.close()
    return got


def _response(body: bytes, *headers: bytes, status: bytes = b"200 OK") -> bytes:
    head = b"HTTP/1.1 " + status + b"\r\n" + b"".join(h + b"\r\n" for h in headers)
    return head + b"Content-Length: %d\r\n\r\n" % len(body) + body


def _post(body: bytes, *headers: bytes, target: bytes = b"/mcp", port: int = 1) -> bytes:
    head = b"POST " + target + b" HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % port
    head += b"".join(h + b"\r\n" for h in headers)
    return head + b"Content-Length: %d\r\n\r\n" % len(body) + body


def _json_call(request_id: int = 1) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/list"}).encode()


class TestByteExact:
    """Both directions pass byte for byte."""

    @pytest.mark.parametrize("coding", ["gzip", "deflate"])
    async def test_compressed_bodies_both_ways(
        self, tmp_path: Path, raw_origin: RawOrigin, coding: str
    ) -> None:
        """A gzip/deflate body passes compressed, with its Content-Length, both ways."""
        squeeze = gzip.compress if coding == "gzip" else zlib.compress
        request_body = squeeze(_json_call())
        answer_body = squeeze(b'{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}')
        answer = _response(answer_body, b"Content-Type: application/json",
                           b"Content-Encoding: " + coding.encode())
        async with running_tap(tap_options(tmp_path, upstream=raw_origin.base)) as tap:
            request = _post(request_body, b"Content-Type: application/json",
                            b"Content-Encoding: " + coding.encode(),
                            b"Accept: application/json, text/event-stream",
                            port=_port(tap))
            raw_origin.steps.append(Step(request, answer))
            got = await _exchange_raw(tap, request, len(answer))
        assert raw_origin.received == [request]
        assert got == answer
        (rec,) = exchanges(tap)
        assert rec["ingress"]["body"] == json.loads(_json_call())  # judged decoded
        assert rec["origin"]["headChanges"] == []
        assert rec["egress"]["headChanges"] == []
        assert rec["ingress"]["framing"] == "length"
        assert rec["origin"]["framing"] == "length"

    async def test_odd_headers_pass_in_order_with_case_duplicates_and_raw_bytes(
        self, tmp_path: Path, raw_origin: RawOrigin
    ) -> None:
        """Duplicates, odd case, non-UTF-8 bytes and Host reach the origin as sent."""
        body = _json_call()
        odd = (b"x-DUP: one", b"X-Dup: two", b"X-RAW: z\xfcri \xff",
               b"cOnTeNt-TyPe: application/json")
        answer = _response(b"{}", b"X-Answer: \xe9t\xe9", b"set-cookie: a=1", b"Set-Cookie: b=2")
        async with running_tap(tap_options(tmp_path, upstream=raw_origin.base)) as tap:
            request = _post(body, *odd, port=_port(tap))
            raw_origin.steps.append(Step(request, answer))
            got = await _exchange_raw(tap, request, len(answer))
        assert raw_origin.received == [request]  # Host too: preserved by default
        assert got == answer
        (rec,) = exchanges(tap)
        raw_pairs = [[k, v] for k, v in rec["ingress"]["headers"] if k.lower() == "x-raw"]
        assert [v.encode("latin-1") for _, v in raw_pairs] == [b"z\xfcri \xff"]

    async def test_chunked_both_ways(self, tmp_path: Path, raw_origin: RawOrigin) -> None:
        """Chunked framing (with chunk extensions and a trailer) passes untouched."""
        call = _json_call()
        chunked = b"%x;ext=1\r\n%s\r\n0\r\nX-Trailer: t\r\n\r\n" % (len(call), call)
        answer_body = b'{"jsonrpc":"2.0","id":1,"result":{}}'
        answer = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n"
                  + b"%x\r\n%s\r\n" % (10, answer_body[:10])
                  + b"%x\r\n%s\r\n" % (len(answer_body) - 10, answer_body[10:]) + b"0\r\n\r\n")
        async with running_tap(tap_options(tmp_path, upstream=raw_origin.base)) as tap:
            request = (b"POST /mcp HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n"
                       b"Transfer-Encoding: chunked\r\n\r\n" + chunked)
            raw_origin.steps.append(Step(request, answer))
            got = await _exchange_raw(tap, request, len(answer))
        assert raw_origin.received == [request]
        assert got == answer
        (rec,) = exchanges(tap)
        assert rec["ingress"]["framing"] == "chunked"
        assert rec["origin"]["framing"] == "chunked"
        assert rec["ingress"]["bodySize"] == len(call)
        assert rec["origin"]["body"] == json.loads(answer_body)

    async def test_pipelined_requests_are_each_their_own_exchange_in_order(
        self, tmp_path: Path, raw_origin: RawOrigin
    ) -> None:
        """Two requests in one write: the origin gets one after the other, each answered."""
        async with running_tap(tap_options(tmp_path, upstream=raw_origin.base)) as tap:
            first = _post(_json_call(1), b"Content-Type: application/json", port=1)
            second = _post(_json_call(2), b"Content-Type: application/json", port=2)
            answers = [_response(b'{"n":1}'), _response(b'{"n":2}')]
            raw_origin.steps += [Step(first, answers[0]), Step(second, answers[1])]
            got = await _exchange_raw(tap, first + second, len(answers[0]) + len(answers[1]))
        assert raw_origin.received == [first, second]
        assert got == answers[0] + answers[1]
        recs = exchanges(tap)
        assert [r["rpcId"] for r in recs] == [1, 2]
        assert [r["origin"]["body"] for r in recs] == [{"n": 1}, {"n": 2}]

    async def test_head_answer_has_no_body(self, tmp_path: Path, raw_origin: RawOrigin) -> None:
        """A HEAD answer's Content-Length announces a body that never comes; the next
        request on the connection is still answered."""
        head_answer = b"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n"
        after = _response(b"ok")
        async with running_tap(tap_options(tmp_path, upstream=raw_origin.base)) as tap:
            head = b"HEAD /mcp HTTP/1.1\r\nHost: h\r\n\r\n"
            get = b"GET /x HTTP/1.1\r\nHost: h\r\n\r\n"
            raw_origin.steps += [Step(head, head_answer), Step(get, after)]
            got = await _exchange_raw(tap, head + get, len(head_answer) + len(after))
        assert raw_origin.received == [head, get]
        assert got == head_answer + after
        first, second = exchanges(tap)
        assert first["origin"]["framing"] == "none"
        assert first["origin"]["ended"] is True
        assert second["origin"]["status"] == 200

    async def test_204_and_expect_100_continue(
        self, tmp_path: Path, raw_origin: RawOrigin
    ) -> None:
        """The origin's 100 Continue reaches the client, which then sends the body; a 204
        answer ends without a body."""
        body = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
        request_head = (b"POST /mcp HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n"
                        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body))
        cont = b"HTTP/1.1 100 Continue\r\n\r\n"
        final = b"HTTP/1.1 204 No Content\r\n\r\n"
        async with running_tap(tap_options(tmp_path, upstream=raw_origin.base)) as tap:
            raw_origin.steps += [Step(request_head, cont), Step(body, final)]
            reader, writer = await asyncio.open_connection("127.0.0.1", _port(tap))
            writer.write(request_head)
            assert await asyncio.wait_for(reader.readexactly(len(cont)), _TIMEOUT) == cont
            writer.write(body)
            assert await asyncio.wait_for(reader.readexactly(len(final)), _TIMEOUT) == final
            writer.close()
        assert raw_origin.received == [request_head, body]
        (rec,) = exchanges(tap)
        assert rec["origin"]["status"] == 204
        assert rec["origin"]["interim"] == [100]
        assert rec["ingress"]["ended"] is True

    async def test_upgrade_tunnels_both_ways(
        self, tmp_path: Path, raw_origin: RawOrigin
    ) -> None:
        """After a 101 the bytes pass as a tunnel; the record says it was upgraded."""
        request = (b"GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\n"
                   b"Upgrade: websocket\r\n\r\n")
        switched = (b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
                    b"Upgrade: websocket\r\n\r\n")
        async with running_tap(tap_options(tmp_path, upstream=raw_origin.base)) as tap:
            raw_origin.steps.append(Step(request, switched, then_tunnel=True))
            reader, writer = await asyncio.open_connection("127.0.0.1", _port(tap))
            writer.write(request)
            assert await asyncio.wait_for(reader.readexactly(len(switched)), _TIMEOUT) == switched
            writer.write(b"hello \x00\xff tunnel")
            echoed = await asyncio.wait_for(reader.readexactly(15), _TIMEOUT)
            assert echoed == b"HELLO \x00\xff TUNNEL"
            writer.write_eof()
            assert await asyncio.wait_for(reader.read(), _TIMEOUT) == b""
            writer.close()
        assert raw_origin.received == [request, b"hello \x00\xff tunnel"]
        (rec,) = exchanges(tap)
        assert rec["upgraded"] is True
        assert rec["origin"]["status"] == 101
        assert rec["origin"]["framing"] == "upgrade"

    async def test_absolute_form_target_is_forwarded_as_received(
        self, tmp_path: Path, raw_origin: RawOrigin
    ) -> None:
        """``GET http://x/...`` reaches the origin as sent (never a bare 500)."""
        request = b"GET http://example.test/mcp?q=1 HTTP/1.1\r\nHost: example.test\r\n\r\n"
        answer = _response(b"fine")
        async with running_tap(tap_options(tmp_path, upstream=raw_origin.base)) as tap:
            raw_origin.steps.append(Step(request, answer))
            got = await _exchange_raw(tap, request, len(answer))
        assert raw_origin.received == [request]
        assert got == answer


class TestHeadChanges:
    """The head changes only where a feature needs it, and each change is recorded."""

    async def test_hop_by_hop_fields_are_dropped_and_listed(
        self, tmp_path: Path, raw_origin: RawOrigin
    ) -> None:
        """Connection, the fields it names and Keep-Alive do not reach the origin."""
        body = _json_call()
        sent = _post(body, b"Connection: keep-alive, X-Private", b"X-Private: p",
                     b"Keep-Alive: timeout=5", b"Content-Type: application/json")
        expected = _post(body, b"Content-Type: application/json")
        answer = _response(b"{}", b"Connection: keep-alive")
        async with running_tap(tap_options(tmp_path, upstream=raw_origin.base)) as tap:
            raw_origin.steps.append(Step(expected, answer))
            got = await _exchange_raw(tap, sent, len(_response(b"{}")))
        assert raw_origin.received == [expected]
        assert got == _response(b"{}")
        (rec,) = exchanges(tap)
        removed = [c["header"] for c in rec["origin"]["headChanges"]]
        assert removed == ["Connection", "X-Private", "Keep-Alive"]
        assert [c["header"] for c in rec["egress"]["headChanges"]] == ["Connection"]

    async def test_host_is_rewritten_only_when_configured(
        self, tmp_path: Path, raw_origin: RawOrigin
    ) -> None:
        """``[upstream] host = "rewrite"`` sets the upstream's authority, recorded."""
        body = _json_call()
        opts = tap_options(tmp_path, upstream=raw_origin.base)
        opts = replace(opts, upstream=replace(opts.upstream, host="rewrite"))
        authority = raw_origin.base.removeprefix("http://").encode()
        answer = _response(b"{}")
        async with running_tap(opts) as tap:
            sent = _post(body, port=_port(tap))
            expected = sent.replace(b"Host: 127.0.0.1:%d" % _port(tap), b"Host: " + authority)
            raw_origin.steps.append(Step(expected, answer))
            await _exchange_raw(tap, sent, len(answer))
        assert raw_origin.received == [expected]
        (rec,) = exchanges(tap)
        assert rec["origin"]["headChanges"] == [
            {"change": "rewritten", "header": "Host", "why": "[upstream] host = rewrite"}
        ]

    async def test_a_single_hop_adds_no_traceparent(
        self, tmp_path: Path, raw_origin: RawOrigin
    ) -> None:
        """Hop correlation needs a traceparent only with two hops: one hop adds none."""
        body = _json_call()
        answer = _response(b"{}")
        async with running_tap(tap_options(tmp_path, upstream=raw_origin.base)) as tap:
            sent = _post(body)
            raw_origin.steps.append(Step(sent, answer))
            await _exchange_raw(tap, sent, len(answer))
        assert raw_origin.received == [sent]

    async def test_an_added_traceparent_is_not_sampled_by_default(
        self, tmp_path: Path, raw_origin: RawOrigin
    ) -> None:
        """With two hops the edge adds a traceparent whose sampled flag is 00."""
        got: list[bytes] = []

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            head = await reader.readuntil(b"\r\n\r\n")
            got.append(head)
            writer.write(_response(b"{}"))
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        hops = [("edge", f"http://127.0.0.1:{port}"), ("other", f"http://127.0.0.1:{port}")]
        async with (
            running_tap(tap_options(tmp_path, hops)) as tap,
            httpx.AsyncClient(timeout=_TIMEOUT) as client,
        ):
            await client.get(f"http://127.0.0.1:{tap.addresses['edge'][1]}/")
        server.close()
        (line,) = [ln for ln in got[0].split(b"\r\n") if ln.startswith(b"traceparent")]
        assert line.endswith(b"-00")
        (rec,) = exchanges(tap)
        assert rec["origin"]["headChanges"][-1]["header"] == "traceparent"


class TestDnsRebindingProtection:
    """The real SDK server enforces DNS-rebinding protection on Host: the tap keeps its
    verdict (it forwards the client's Host), unless told to rewrite Host."""

    @staticmethod
    async def _post(url: str, host: str) -> httpx.Response:
        headers = {"Host": host, "Accept": "application/json, text/event-stream",
                   "Content-Type": "application/json"}
        async with httpx.AsyncClient(timeout=_TIMEOUT) as client:
            return await client.post(url, headers=headers,
                                     json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})

    async def test_a_foreign_host_is_rejected_through_the_tap_as_directly(
        self, tmp_path: Path, origin_url: str, origin_base: str
    ) -> None:
        """``Host: evil.example`` gets the SDK's own 421 both ways."""
        direct = await self._post(origin_url, "evil.example")
        async with running_tap(tap_options(tmp_path, upstream=origin_base)) as tap:
            through = await self._post(f"http://127.0.0.1:{_port(tap)}/mcp", "evil.example")
        assert direct.status_code == 421
        assert (through.status_code, through.content) == (direct.status_code, direct.content)
        (rec,) = exchanges(tap)
        assert rec["origin"]["status"] == 421
        # httpx's Connection: keep-alive is hop-by-hop; Host is not touched.
        assert [c["header"] for c in rec["origin"]["headChanges"]] == ["Connection"]

    async def test_rewrite_makes_the_origin_see_its_own_authority(
        self, tmp_path: Path, origin_base: str
    ) -> None:
        """With ``host = "rewrite"`` the origin sees its own authority (and does not 421)."""
        opts = tap_options(tmp_path, upstream=origin_base)
        opts = replace(opts, upstream=replace(opts.upstream, host="rewrite"))
        async with running_tap(opts) as tap:
            through = await self._post(f"http://127.0.0.1:{_port(tap)}/mcp", "evil.example")
        assert through.status_code != 421
        (rec,) = exchanges(tap)
        changes = {c["header"]: c["change"] for c in rec["origin"]["headChanges"]}
        assert changes == {"Host": "rewritten", "Connection": "removed"}


class TestBadInput:
    """What the parser rejects gets a 400 from the tap, a counter and a record."""

    @pytest.mark.parametrize(
        "request_bytes",
        [
            b"GET / HTTP/1.1\r\nBad Header: x\r\n\r\n",
            b"\x00\x01garbage\r\n\r\n",
            b"POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
            b"CONNECT example.test:443 HTTP/1.1\r\nHost: example.test\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        ],
        ids=["space-in-name", "binary", "two-lengths", "connect", "bad-chunk-with-head"],
    )
    async def test_rejected_request_gets_400_with_tap_error(
        self, tmp_path: Path, raw_origin: RawOrigin, request_bytes: bytes
    ) -> None:
        """400 + X-Mcp-Tap-Error, nothing forwarded, a tap.bad-request record."""
        async with running_tap(tap_options(tmp_path, upstream=raw_origin.base)) as tap:
            reader, writer = await asyncio.open_connection("127.0.0.1", _port(tap))
            writer.write(request_bytes)
            answer = await asyncio.wait_for(reader.read(), _TIMEOUT)
            writer.close()
            counts = dict(tap.hops[0].counts)
        assert answer.startswith(b"HTTP/1.1 400 ")
        assert b"\r\nX-Mcp-Tap-Error: " in answer
        assert raw_origin.received == []
        assert counts["bad_request"] == 1
        (rec,) = exchanges(tap)
        assert [f["rule"] for f in rec["findings"]] == ["tap.bad-request"]
        assert rec["tapError"]["status"] == 400

    async def test_slowloris_is_closed_by_the_head_timeout(
        self, tmp_path: Path, raw_origin: RawOrigin
    ) -> None:
        """A head that never ends gets 408 and the connection closes."""
        opts = replace(tap_options(tmp_path, upstream=raw_origin.base),
                       listener=ListenerOptions(head_timeout_s=0.3))
        async with running_tap(opts) as tap:
            reader, writer = await asyncio.open_connection("127.0.0.1", _port(tap))
            writer.write(b"POST /mcp HTTP/1.1\r\nHost: h\r\nX-Slow: ")
            answer = await asyncio.wait_for(reader.read(), _TIMEOUT)
            writer.close()
            counts = dict(tap.hops[0].counts)
        assert answer.startswith(b"HTTP/1.1 408 ")
        assert b"X-Mcp-Tap-Error: head-timeout" in answer
        assert counts["head_timeout"] == 1


class TestNoHeadOfLineBlocking:
    """Held-open streams never make another request wait."""

    @staticmethod
    def _sse_origin() -> tuple[Any, list[asyncio.StreamWriter]]:
        writers: list[asyncio.StreamWriter] = []

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:  # /readyz only connects
                writer.close()
                return
            try:
                if head.startswith(b"GET /sse"):
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                                 b"Transfer-Encoding: chunked\r\n\r\n"
                                 b"8\r\n: open\n\n\r\n")
                    writers.append(writer)
                    await reader.read()  # open until the tap hangs up
                else:
                    writer.write(_response(b"quick"))
                await writer.drain()
            except ConnectionError:
                pass
            finally:
                writer.close()

        return handle, writers

    async def _open_streams(self, tap: TapServer, n: int) -> list[asyncio.StreamWriter]:
        out = []
        for _ in range(n):
            reader, writer = await asyncio.open_connection("127.0.0.1", _port(tap))
            writer.write(b"GET /sse HTTP/1.1\r\nHost: h\r\n\r\n")
            line = await asyncio.wait_for(reader.readline(), _TIMEOUT)
            assert line.startswith(b"HTTP/1.1 200")
            out.append(writer)
        return out

    async def test_120_open_streams_and_a_normal_request_is_answered(
        self, tmp_path: Path
    ) -> None:
        """120 never-ending SSE streams are open; another request is answered at once."""
        handle, _ = self._sse_origin()
        server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=512)
        base = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        async with running_tap(tap_options(tmp_path, upstream=base)) as tap:
            streams = await self._open_streams(tap, 120)
            bound = tap.hops[0].pool.bound
            async with httpx.AsyncClient(timeout=_TIMEOUT) as client:
                quick = await client.get(f"http://127.0.0.1:{_port(tap)}/quick")
            for writer in streams:
                writer.close()
        server.close()
        assert bound == 120  # every stream is still open, each on its own connection
        assert quick.status_code == 200 and quick.text == "quick"

    async def test_at_the_cap_the_tap_answers_503_saturated_and_readyz_says_so(
        self, tmp_path: Path
    ) -> None:
        """With max_connections streams open, the next request gets 503 saturated."""
        handle, _ = self._sse_origin()
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        base = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        opts = tap_options(tmp_path, upstream=base, admin=True)
        opts = replace(opts, upstream=UpstreamOptions(max_connections=3))
        async with running_tap(opts) as tap:
            streams = await self._open_streams(tap, 3)
            admin = f"http://127.0.0.1:{tap.admin_address[1]}" if tap.admin_address else ""
            async with httpx.AsyncClient(timeout=_TIMEOUT) as client:
                refused = await client.get(f"http://127.0.0.1:{_port(tap)}/quick")
                ready = await client.get(admin + "/readyz")
                metrics = (await client.get(admin + "/metrics")).text
            for writer in streams:
                writer.close()
        server.close()
        assert refused.status_code == 503
        assert refused.headers["X-Mcp-Tap-Error"] == "saturated"
        assert ready.status_code == 503
        assert any("at the cap" in p for p in ready.json()["problems"])
        assert 'mcptap_upstream_connections{kind="saturated"} 1.0' in metrics.splitlines()
        assert 'mcptap_forwarder_events{kind="saturated"} 1.0' in metrics.splitlines()
        saturated = [r for r in records(tap) if (r.get("tapError") or {}).get("phase")
                     == "saturated"]
        assert len(saturated) == 1
        assert [(f["rule"], f["strength"]) for f in saturated[0]["findings"]] == [
            ("tap.saturated", "must")]


class TestFlowControl:
    """A side that does not read makes the tap stop reading the other: nothing piles up."""

    async def test_a_client_that_does_not_read_pauses_the_upstream(
        self, tmp_path: Path
    ) -> None:
        """64 MB offered by the origin, a client that reads nothing: the tap holds at most
        a few write buffers' worth, then reads it all through once the client reads."""
        size = 64 << 20
        sent = asyncio.Event()

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size)
            block = b"x" * (1 << 20)
            for _ in range(64):
                writer.write(block)
                await writer.drain()
            sent.set()
            await reader.read()
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        base = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        async with running_tap(tap_options(tmp_path, upstream=base)) as tap:
            reader, writer = await asyncio.open_connection("127.0.0.1", _port(tap), limit=1024)
            writer.transport.pause_reading()  # the client reads nothing
            writer.write(b"GET /big HTTP/1.1\r\nHost: h\r\n\r\n")
            await asyncio.sleep(1.0)  # the origin pushes as fast as the tap takes
            (conn,) = tap.hops[0].connections
            assert conn.transport is not None
            held = conn.transport.get_write_buffer_size()
            assert not sent.is_set()  # the origin is held back ...
            assert held < 8 << 20  # ... and the tap holds nowhere near the 64 MB
            writer.transport.resume_reading()
            got = 0
            while got < size:
                chunk = await asyncio.wait_for(reader.read(1 << 20), _TIMEOUT)
                assert chunk
                got += len(chunk)
            writer.close()
        server.close()
        (rec,) = exchanges(tap)
        assert rec["origin"]["bodySize"] == size and rec["origin"]["ended"] is True
        assert rec["origin"]["truncated"] is True  # past the capture cap, digest still whole

    async def test_an_origin_that_does_not_read_pauses_the_client(
        self, tmp_path: Path
    ) -> None:
        """A 64 MB upload to an origin that reads nothing: the client is held back."""
        size = 64 << 20
        go = asyncio.Event()

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.transport.pause_reading()
            await go.wait()
            writer.transport.resume_reading()
            got = 0
            while got < size:
                got += len(await reader.read(1 << 20))
            writer.write(_response(b"done"))
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        base = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        async with running_tap(tap_options(tmp_path, upstream=base)) as tap:
            reader, writer = await asyncio.open_connection("127.0.0.1", _port(tap))
            writer.write(b"POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n" % size)
            block = b"y" * (1 << 20)
            pushed = 0

            async def push() -> None:
                nonlocal pushed
                for _ in range(64):
                    writer.write(block)
                    await writer.drain()
                    pushed += len(block)

            pushing = asyncio.create_task(push())
            await asyncio.sleep(1.0)
            held = sum(
                c.exchange.upstream.transport.get_write_buffer_size()
                for c in tap.hops[0].connections
                if c.exchange is not None and c.exchange.upstream is not None
                and c.exchange.upstream.transport is not None
            )
            assert pushed < size  # the client is held back ...
            assert held < 8 << 20  # ... and the tap holds nowhere near the 64 MB
            go.set()
            await asyncio.wait_for(pushing, _TIMEOUT)
            answer = await asyncio.wait_for(reader.readuntil(b"done"), _TIMEOUT)
            writer.close()
        server.close()
        assert answer.startswith(b"HTTP/1.1 200 OK")
        (rec,) = exchanges(tap)
        assert rec["ingress"]["bodySize"] == size and rec["ingress"]["ended"] is True

    async def test_a_client_that_stops_reading_is_cut_after_the_write_timeout(
        self, tmp_path: Path
    ) -> None:
        """Past ``write_timeout_s`` with the tap's writes unread, the exchange is cut and
        recorded as such (the upstream is let go)."""
        size = 64 << 20
        upstream_closed = asyncio.Event()

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size)
            try:
                for _ in range(64):
                    writer.write(b"z" * (1 << 20))
                    await writer.drain()
            except ConnectionError:
                pass
            upstream_closed.set()
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        base = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        opts = replace(tap_options(tmp_path, upstream=base),
                       listener=ListenerOptions(write_timeout_s=0.5))
        async with running_tap(opts) as tap:
            _, writer = await asyncio.open_connection("127.0.0.1", _port(tap))
            writer.transport.pause_reading()
            writer.write(b"GET /big HTTP/1.1\r\nHost: h\r\n\r\n")
            await asyncio.wait_for(upstream_closed.wait(), _TIMEOUT)
            counts = dict(tap.hops[0].counts)
            writer.close()
        server.close()
        assert counts["write_stall"] == 1
        (rec,) = exchanges(tap)
        assert rec["tapError"]["phase"] == "client-write-timeout"
        assert rec["origin"]["ended"] is False
        assert [(f["rule"], f["strength"]) for f in rec["findings"]] == [
            ("tap.client-write-stall", "must"), ("tap.capture-truncated", "must")]
