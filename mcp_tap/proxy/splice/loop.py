"""The tap's event loop: asyncio's selector loop with a shorter path per socket event.

uvloop stays an option (``--uvloop``); this is the default. At 32 connections the
forwarding process spends about a fifth of its instructions in asyncio's own Python: per
read event the loop queues the reader's handle through a method call, and the socket
transport reads in a second method behind ``_read_ready``; per write it checks six things
before the ``send``. :class:`TapLoop` is :class:`asyncio.SelectorEventLoop` with:

* a selector (:class:`TapSelector`, on epoll) that maps each event to its key without a
  method call, and events queued onto the ready list directly (``_add_callback`` inlined);
* plain TCP transports of class :class:`LeanTransport`: asyncio's socket transport whose
  read callback is the receive itself (one frame fewer per read) and whose ``write`` of
  bytes to an idle socket is one ``send`` after two checks; everything else (partial
  writes, buffering, flow control, half-close, close, abort, errors) is asyncio's own.

As many system calls as asyncio's loop: one read per read event, one write per write;
made with ``os.read`` / ``os.write`` on the socket's descriptor (for a stream socket the
same as ``recv`` / ``send`` without flags), whose arguments cost ~0.4k instructions less
to take than the socket methods' (``PyArg_ParseTuple``). TLS transports (a buffered
protocol below asyncio's SSL layer) keep asyncio's read path. The overridden methods are
asyncio's code with the calls inlined; the test suite runs on this loop
(``tests/conftest.py``). Copying asyncio's ``_run_once`` to run each handle without
``Handle._run`` was measured at ~0.2k instructions an event and left out.
"""

from __future__ import annotations

import asyncio
import math
import os
import select
import selectors
import sys
from asyncio import selector_events
from typing import Any

_READ = selectors.EVENT_READ
_WRITE = selectors.EVENT_WRITE
_EPOLL = hasattr(selectors, "EpollSelector")  # (Linux; elsewhere asyncio's own selector)
_EpollBase: Any = getattr(selectors, "EpollSelector", selectors.SelectSelector)
_EPOLLIN = getattr(select, "EPOLLIN", 1)
_EPOLLOUT = getattr(select, "EPOLLOUT", 4)
_read = os.read  # (module globals: no attribute look-up per call)
_write = os.write
_FATAL_READ = "Fatal read error on socket transport"
_FATAL_WRITE = "Fatal write error on socket transport"
_FATAL_PROTOCOL = "Fatal error: protocol.data_received() call failed."

# (asyncio's transport class is private; the loop only makes this one for plain sockets)
_Base: Any = getattr(selector_events, "_SelectorSocketTransport")  # noqa: B009 - (not in typeshed)


class LeanTransport(_Base):  # type: ignore[misc]
    """asyncio's selector socket transport, with a one-call read and a short write."""

    _buffered = False  # the protocol is a buffered one (it is read as asyncio reads it)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        """As asyncio's; a buffered protocol is read the way asyncio reads it."""
        super().set_protocol(protocol)
        # The reader is looked up when it is (re)registered: asyncio registers it after
        # connection_made, and again on resume_reading (start_tls pauses, then switches).
        # (Not self.__dict__: reading it would turn every attribute load into a dict look-up.)
        if isinstance(protocol, asyncio.BufferedProtocol):
            self._buffered = True
            self._read_ready = self._read_ready_cb  # type: ignore[method-assign]
        elif self._buffered:
            self._buffered = False
            del self._read_ready

    def _read_ready(self) -> None:
        # asyncio's _read_ready__data_received, called directly (not through _read_ready).
        if self._conn_lost:
            return
        try:
            data = _read(self._sock_fd, self.max_size)  # (sock.recv)
        except (BlockingIOError, InterruptedError):
            return
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:  # noqa: BLE001 - asyncio's own handling
            self._fatal_error(exc, _FATAL_READ)
            return
        if not data:
            self._read_ready__on_eof()
            return
        try:
            self._protocol.data_received(data)
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:  # noqa: BLE001 - asyncio's own handling
            self._fatal_error(exc, _FATAL_PROTOCOL)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Send ``data`` now if the socket takes it all (the usual case); otherwise what
        asyncio's ``write`` does with what is left."""
        if type(data) is bytes and not self._buffer and not self._conn_lost \
                and not self._eof and self._empty_waiter is None and data:
            try:
                n = _write(self._sock_fd, data)  # (sock.send)
            except (BlockingIOError, InterruptedError):
                n = 0
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException as exc:  # noqa: BLE001 - asyncio's own handling
                self._fatal_error(exc, _FATAL_WRITE)
                return
            if n == len(data):
                return
            data = data[n:]
        super().write(data)


class TapSelector(_EpollBase):  # type: ignore[misc]
    """:class:`selectors.EpollSelector` whose ``select`` maps each event to its key with a
    dict look-up, not a method call (``_key_from_fd``), and reads the usual event (readable,
    nothing else) without the two mask tests."""

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        """As :meth:`selectors.EpollSelector.select`."""
        if timeout is None:
            timeout = -1
        elif timeout <= 0:
            timeout = 0
        else:
            # epoll_wait() has a resolution of 1 millisecond, round away from zero to wait
            # *at least* timeout seconds (as asyncio's).
            timeout = math.ceil(timeout * 1e3) * 1e-3
        fd_to_key = self._fd_to_key
        ready: list[tuple[selectors.SelectorKey, int]] = []
        try:
            fd_event_list = self._selector.poll(timeout, max(len(fd_to_key), 1))
        except InterruptedError:
            return ready
        key_of = fd_to_key.get
        append = ready.append
        for fd, event in fd_event_list:
            if event == _EPOLLIN:
                events = _READ
            else:
                events = 0
                if event & ~_EPOLLIN:
                    events |= _WRITE
                if event & ~_EPOLLOUT:
                    events |= _READ
            key = key_of(fd)
            if key:
                append((key, events & key.events))
        return ready


class TapLoop(asyncio.SelectorEventLoop):
    """The tap's default event loop (see the module's docstring)."""

    def __init__(self, selector: selectors.BaseSelector | None = None) -> None:
        super().__init__(selector if selector is not None or not _EPOLL else TapSelector())

    def _make_socket_transport(
        self, sock: Any, protocol: asyncio.BaseProtocol, waiter: Any = None, *,
        extra: Any = None, server: Any = None,
    ) -> asyncio.Transport:
        transport: asyncio.Transport = LeanTransport(self, sock, protocol, waiter, extra, server)
        return transport

    def _process_events(self, event_list: list[tuple[selectors.SelectorKey, int]]) -> None:
        # asyncio's, with _add_callback (a call per event) inlined.
        loop: Any = self  # (the selector loop's private parts, which typeshed leaves out)
        ready = loop._ready.append
        for key, mask in event_list:
            reader, writer = key.data
            if mask & _READ and reader is not None:
                if reader._cancelled:
                    loop._remove_reader(key.fileobj)
                else:
                    ready(reader)
            if mask & _WRITE and writer is not None:
                if writer._cancelled:
                    loop._remove_writer(key.fileobj)
                else:
                    ready(writer)


# The overridden methods are copies of Python 3.11's asyncio with calls inlined; another
# version's asyncio may keep different state in its transports, so it runs unchanged there.
LEAN = sys.version_info[:2] == (3, 11)


def new_loop() -> asyncio.AbstractEventLoop:
    """The loop factory of ``mcp-tap proxy``: a :class:`TapLoop` on the Python whose asyncio
    it was written against (3.11), asyncio's own selector loop on any other."""
    return TapLoop() if LEAN else asyncio.SelectorEventLoop()
