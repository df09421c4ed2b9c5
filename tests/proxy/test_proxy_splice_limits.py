"""The forwarding core at the edges of an answer, over raw sockets: interim 1xx heads lose
their hop-by-hop fields as final ones do, bytes an upstream sends past the end of an answer
reach no client, and the tap's own refusals are recorded under their own rules."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest
from taps import TEST_DIGEST_KEY, exchanges, running_tap, tap_options
from test_proxy_splice import RawOrigin, Step, _exchange_raw, _port, _post, _response, raw_origin

from mcp_tap.core.catalog import RULES
from mcp_tap.core.hashing import body_digest
from mcp_tap.proxy.options import CaptureOptions, UpstreamOptions
from mcp_tap.proxy.splice.answers import TAP_ERROR_RULES, tap_error_rule

__all__ = ["raw_origin"]  # the fixture, shared with test_proxy_splice

_TIMEOUT = 20.0


class TestInterimHeads:
    """A 1xx head is cleaned of hop-by-hop fields like the final head, and recorded."""

    async def test_a_103_loses_its_connection_fields_and_the_change_is_listed(
        self, tmp_path: Path, raw_origin: RawOrigin
    ) -> None:
        """Connection and the field it names leave a 103; Link passes; the final 200 is whole."""
        sent = _post(b"{}")
        interim = (b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n"
                   b"Connection: X-Hint\r\nX-Hint: h\r\n\r\n")
        interim_out = b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n"
        final = _response(b"{}")
        async with running_tap(tap_options(tmp_path, upstream=raw_origin.base)) as tap:
            raw_origin.steps.append(Step(sent, interim + final))
            got = await _exchange_raw(tap, sent, len(interim_out) + len(final))
        assert got == interim_out + final
        (rec,) = exchanges(tap)
        changes = rec["egress"]["headChanges"]
        assert [(c["change"], c["header"], c.get("interim")) for c in changes] == [
            ("removed", "Connection", "103"), ("removed", "X-Hint", "103")]
        assert rec["origin"]["status"] == 200


class TestBytesAfterTheAnswer:
    """Bytes after a complete answer belong to no response: not forwarded, connection closed."""

    @pytest.mark.parametrize(
        ("answer", "stray"),
        [
            (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
             b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nforgd"),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}", b"junk after the body"),
            (b"HTTP/1.1 204 No Content\r\n\r\n", b"a body a 204 cannot have"),
        ],
        ids=["chunked", "length", "bodiless"],
    )
    async def test_trailing_bytes_are_dropped_counted_and_noted(
        self, tmp_path: Path, answer: bytes, stray: bytes
    ) -> None:
        """The client gets exactly the answer; the next request goes on a new connection."""
        sent = _post(b"{}")
        answers = [answer + stray, answer]  # one per request, in order
        connections = 0

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal connections
            connections += 1
            try:
                while answers:
                    await reader.readexactly(len(sent))
                    writer.write(answers.pop(0))
                    await writer.drain()
                await reader.read()
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            finally:
                writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        base = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        async with running_tap(tap_options(tmp_path, upstream=base)) as tap:
            reader, writer = await asyncio.open_connection("127.0.0.1", _port(tap))
            got = b""
            for _ in range(2):
                writer.write(sent)
                got += await asyncio.wait_for(reader.readexactly(len(answer)), _TIMEOUT)
            writer.close()
            await writer.wait_closed()
            counts = dict(tap.hops[0].counts)
        server.close()
        assert got == answer + answer  # the stray bytes never reached the client
        assert connections == 2  # the connection that sent them was not reused
        assert counts["stray_upstream_bytes"] == 1
        first, second = exchanges(tap)
        (note,) = first["egress"]["headChanges"]
        assert note["change"] == "dropped" and note["bytes"] == str(len(stray))
        assert second["egress"]["headChanges"] == []
        assert first["egress"]["bodySize"] == second["egress"]["bodySize"]


class TestTunnelCapture:
    """After a 101 the tunnel's bytes pass untouched and are captured: sizes and digests of
    every byte both ways, the kept copy within the capture cap."""

    @pytest.mark.parametrize("cap", [1 << 20, 8], ids=["within-cap", "past-cap"])
    async def test_tunnel_bytes_are_counted_and_digested_both_ways(
        self, tmp_path: Path, raw_origin: RawOrigin, cap: int
    ) -> None:
        """Client bytes (some sent with the head) and the origin's echo are in the record."""
        request = (b"GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\n"
                   b"Upgrade: websocket\r\n\r\n")
        switched = (b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
                    b"Upgrade: websocket\r\n\r\n")
        early, late = b"early \x01", b"late \x00\xff bytes"
        opts = tap_options(tmp_path, upstream=raw_origin.base, digest_key=TEST_DIGEST_KEY,
                           capture=CaptureOptions(max_body_bytes=cap))
        async with running_tap(opts) as tap:
            raw_origin.steps.append(Step(request + early, switched, then_tunnel=True))
            reader, writer = await asyncio.open_connection("127.0.0.1", _port(tap))
            writer.write(request + early)  # tunnel bytes right behind the head
            assert await asyncio.wait_for(reader.readexactly(len(switched)), _TIMEOUT) == switched
            writer.write(late)
            echoed = await asyncio.wait_for(reader.readexactly(len(late)), _TIMEOUT)
            writer.write_eof()
            assert await asyncio.wait_for(reader.read(), _TIMEOUT) == b""
            writer.close()
            await writer.wait_closed()
        assert echoed == late.upper()  # untouched both ways
        (rec,) = exchanges(tap)
        tunnel = rec["tunnel"]
        up = early + late
        down = b"".join(raw_origin.received[1:]).upper()  # what the origin echoed
        assert raw_origin.received[0] == request + early and up.endswith(late)
        assert tunnel["clientBytes"] == len(up)
        assert tunnel["clientDigest"] == body_digest(TEST_DIGEST_KEY, up)
        assert tunnel["originBytes"] == len(down) == len(late)
        assert tunnel["originDigest"] == body_digest(TEST_DIGEST_KEY, down)
        assert tunnel["truncated"] is (cap < len(up))


class TestIdlePool:
    """An idle upstream connection is closed once keepalive_s passed (one sweep per pool)."""

    async def test_an_idle_connection_is_closed_and_the_next_request_opens_a_new_one(
        self, tmp_path: Path
    ) -> None:
        """The origin sees the idle connection end; the next request comes on a new one."""
        sent = _post(b"{}")
        answer = _response(b"{}")
        ended: list[asyncio.Event] = []

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            done = asyncio.Event()
            ended.append(done)
            try:
                while True:
                    await reader.readexactly(len(sent))
                    writer.write(answer)
                    await writer.drain()
            except (asyncio.IncompleteReadError, ConnectionError):
                done.set()  # the tap closed this connection
            finally:
                writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        base = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        opts = replace(tap_options(tmp_path, upstream=base),
                       upstream=UpstreamOptions(keepalive_s=0.2))
        async with running_tap(opts) as tap:
            got = await _exchange_raw(tap, sent, len(answer))
            await asyncio.wait_for(ended[0].wait(), _TIMEOUT)  # closed while idle
            idle_after = len(tap.hops[0].pool.idle)
            again = await _exchange_raw(tap, sent, len(answer))
        server.close()
        assert got == again == answer
        assert idle_after == 0
        assert len(ended) == 2  # the second request needed a new connection


class TestTapErrorRules:
    """Each tap error phase maps to its own rule, and every such rule is in the catalog."""

    def test_each_phase_has_its_own_rule(self) -> None:
        """saturated, draining, drain-deadline and write stall are not upstream failures."""
        assert tap_error_rule(503, "saturated") == "tap.saturated"
        assert tap_error_rule(503, "draining") == "tap.draining"
        assert tap_error_rule(None, "drain-deadline") == "tap.drain-deadline"
        assert tap_error_rule(None, "client-write-timeout") == "tap.client-write-stall"
        assert tap_error_rule(502, "upstream-reset") == "tap.upstream-failure"
        assert tap_error_rule(431, "head-too-large") == "tap.bad-request"

    def test_every_mapped_rule_is_a_must_in_the_catalog(self) -> None:
        """The rules the map names exist, as MUSTs citing the product's tap rules."""
        by_id = {r.id: r for r in RULES}
        for rule_id in TAP_ERROR_RULES.values():
            assert by_id[rule_id].strength == "must"
