"""The tap's event loop (:mod:`mcp_tap.proxy.splice.loop`): its lean transport keeps
asyncio's semantics for partial writes, flow control, half-close and buffered protocols."""

from __future__ import annotations

import asyncio
import socket

import pytest

from mcp_tap.proxy.splice.loop import LEAN, LeanTransport, TapLoop


class _Collect(asyncio.Protocol):
    def __init__(self) -> None:
        self.data = bytearray()
        self.eof = asyncio.get_running_loop().create_future()
        self.lost = asyncio.get_running_loop().create_future()
        self.paused = 0
        self.resumed = 0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.data += data

    def eof_received(self) -> bool:
        self.eof.set_result(True)
        return True  # keep writing after the peer's half-close

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(exc)

    def pause_writing(self) -> None:
        self.paused += 1

    def resume_writing(self) -> None:
        self.resumed += 1


async def _pair() -> tuple[_Collect, socket.socket]:
    loop = asyncio.get_running_loop()
    ours, theirs = socket.socketpair()
    theirs.setblocking(False)
    _, proto = await loop.create_connection(_Collect, sock=ours)
    return proto, theirs


@pytest.mark.skipif(not LEAN, reason="TapLoop is the default only on Python 3.11")
async def test_the_tests_run_on_the_tap_loop_and_its_transport() -> None:
    assert isinstance(asyncio.get_running_loop(), TapLoop)
    proto, theirs = await _pair()
    assert isinstance(proto.transport, LeanTransport)
    proto.transport.close()
    await proto.lost
    theirs.close()


async def test_reads_writes_half_close_and_close() -> None:
    loop = asyncio.get_running_loop()
    proto, theirs = await _pair()
    assert proto.transport is not None
    await loop.sock_sendall(theirs, b"hello")
    while len(proto.data) < 5:
        await asyncio.sleep(0)
    assert bytes(proto.data) == b"hello"
    proto.transport.write(b"back")
    proto.transport.write(bytearray(b" and "))  # not bytes: asyncio's own write
    proto.transport.write(memoryview(b"forth"))
    assert await loop.sock_recv(theirs, 100) == b"back and forth"
    theirs.shutdown(socket.SHUT_WR)
    assert await proto.eof is True
    proto.transport.write(b"after eof")  # kept open: still writable
    assert await loop.sock_recv(theirs, 100) == b"after eof"
    proto.transport.write_eof()
    assert await loop.sock_recv(theirs, 100) == b""
    proto.transport.close()
    assert await proto.lost is None
    theirs.close()


async def test_a_write_the_socket_cannot_take_is_buffered_with_flow_control() -> None:
    loop = asyncio.get_running_loop()
    proto, theirs = await _pair()
    transport = proto.transport
    assert transport is not None
    transport.set_write_buffer_limits(high=64 * 1024)
    big = bytes(range(256)) * 4096  # 1 MiB: more than a socket pair's buffers
    transport.write(big)
    transport.write(b"tail")  # behind the buffered rest, in order
    assert transport.get_write_buffer_size() > 0
    assert proto.paused == 1
    got = bytearray()
    while len(got) < len(big) + 4:
        got += await loop.sock_recv(theirs, 1 << 20)
    assert bytes(got) == big + b"tail"
    while transport.get_write_buffer_size():
        await asyncio.sleep(0)
    assert proto.resumed == 1
    transport.abort()
    await proto.lost
    theirs.close()


async def test_a_write_after_the_connection_is_lost_is_dropped() -> None:
    proto, theirs = await _pair()
    transport = proto.transport
    assert transport is not None
    theirs.close()
    transport.write(b"x" * 100_000)  # the peer is gone: an error, asyncio's way
    exc = await proto.lost
    assert isinstance(exc, OSError)
    transport.write(b"more")  # after the loss: dropped silently
    assert transport.is_closing()


class _Buffered(asyncio.BufferedProtocol):
    def __init__(self) -> None:
        self.buffer = bytearray(16)
        self.got = bytearray()
        self.lost = asyncio.get_running_loop().create_future()

    def get_buffer(self, sizehint: int) -> bytearray:
        return self.buffer

    def buffer_updated(self, nbytes: int) -> None:
        self.got += self.buffer[:nbytes]

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost.set_result(exc)


async def test_a_buffered_protocol_is_read_as_asyncio_reads_it() -> None:
    loop = asyncio.get_running_loop()
    ours, theirs = socket.socketpair()
    theirs.setblocking(False)
    transport, proto = await loop.create_connection(_Buffered, sock=ours)
    assert isinstance(transport, LeanTransport)
    await loop.sock_sendall(theirs, b"0123456789" * 5)  # more than its 16-byte buffer
    while len(proto.got) < 50:
        await asyncio.sleep(0)
    assert bytes(proto.got) == b"0123456789" * 5
    # Switched to a plain protocol (as start_tls switches the other way): read as plain.
    plain = _Collect()
    transport.pause_reading()
    transport.set_protocol(plain)
    transport.resume_reading()
    await loop.sock_sendall(theirs, b"plain")
    while len(plain.data) < 5:
        await asyncio.sleep(0)
    assert bytes(plain.data) == b"plain"
    transport.close()
    await plain.lost
    theirs.close()


async def test_the_selector_reports_what_asyncios_reports() -> None:
    import selectors

    from mcp_tap.proxy.splice.loop import TapSelector

    ours, theirs = socket.socketpair()
    tap, std = TapSelector(), selectors.DefaultSelector()
    try:
        for selector in (tap, std):
            selector.register(ours, selectors.EVENT_READ | selectors.EVENT_WRITE, "data")
        assert [(k.data, m) for k, m in tap.select(0)] == [("data", selectors.EVENT_WRITE)]
        theirs.send(b"x")
        both = selectors.EVENT_READ | selectors.EVENT_WRITE
        assert [(k.data, m) for k, m in tap.select(0)] == [("data", both)]
        for selector in (tap, std):
            selector.modify(ours, selectors.EVENT_READ, "read")
        assert [(k.data, m) for k, m in tap.select(0.001)] \
            == [(k.data, m) for k, m in std.select(0.001)] == [("read", selectors.EVENT_READ)]
        ours.recv(1)
        assert tap.select(0) == [] == std.select(0)
        theirs.close()  # the peer's close: readable (EOF), as asyncio's selector says
        assert [m for _, m in tap.select(0)] == [m for _, m in std.select(0)]
    finally:
        tap.close()
        std.close()
        ours.close()
