"""The upstream leg: one protocol per upstream connection and a capped pool of them.

A connection is bound to one exchange while it is in flight and goes back to the pool
(idle, for at most ``keepalive_s``, closed by one sweep timer for the whole pool rather than
a timer per release) when its answer ended cleanly; a held-open stream holds
only its own connection, so nothing waits behind it. At ``max_connections`` bound at once,
:meth:`UpstreamPool.reserve` says no and the tap answers 503 at once.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, cast
from urllib.parse import urlsplit

from mcp_tap.urls import shown_url

if TYPE_CHECKING:
    from mcp_tap.proxy.splice.framing import ResponseMessage


class UpstreamOwner(Protocol):
    """What an upstream connection reports to (the client connection it serves)."""

    def upstream_data(self, data: bytes) -> None:
        """Bytes from the upstream."""

    def upstream_eof(self) -> None:
        """The upstream half-closed."""

    def upstream_lost(self, exc: Exception | None) -> None:
        """The upstream connection is gone."""

    def upstream_buffer_full(self) -> None:
        """The upstream's write buffer is above its high-water mark (stop reading the client)."""

    def upstream_buffer_drained(self) -> None:
        """... and drained again."""


@dataclass(frozen=True, slots=True)
class UpstreamTarget:
    """Where a hop forwards to, parsed once.

    ``url`` is the upstream as it may be shown (in every capture, so in every record and
    hop-comparison ``box``, and on ``/readyz``): its ``user:password@`` replaced by
    ``***@``. This is the one place the configured URL becomes displayable; the tap never
    sends userinfo upstream, so nothing else needs it.
    """

    url: str
    host: str
    port: int
    tls: ssl.SSLContext | None
    authority: bytes  # host[:port] as in the URL: the Host a rewrite puts in
    prefix: bytes  # the URL's base path ("" for none), put before each origin-form target

    @classmethod
    def of(cls, url: str, tls: ssl.SSLContext | bool) -> UpstreamTarget:
        """Parse an upstream base URL (already validated by the options)."""
        parts = urlsplit(url)
        https = parts.scheme == "https"
        context: ssl.SSLContext | None = None
        if https:
            if isinstance(tls, ssl.SSLContext):
                context = tls
            else:  # verification turned off explicitly
                context = ssl.create_default_context()
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
        port = parts.port or (443 if https else 80)
        return cls(shown_url(url), parts.hostname or "", port, context,
                   parts.netloc.rpartition("@")[2].encode("idna"),
                   parts.path.rstrip("/").encode("latin-1"))


class UpstreamConnection(asyncio.Protocol):
    """One connection to the upstream; reports to its current owner."""

    def __init__(self, pool: UpstreamPool) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.owner: UpstreamOwner | None = None
        self.reused = False
        self.closed = False
        self.response: ResponseMessage | None = None  # the answer parser, kept across answers
        self.idle_since = 0.0  # time.monotonic() when it went back to the idle list

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Connected."""
        # uvloop's transports are not asyncio.Transport subclasses, but have its methods.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        """Upstream bytes go to the owner; an idle connection that talks is closed."""
        if self.owner is not None:
            self.owner.upstream_data(data)
        else:
            self.close()

    def eof_received(self) -> bool:
        """The upstream half-closed: the owner decides (a tunnel may keep writing)."""
        if self.owner is not None:
            self.owner.upstream_eof()
            return True
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        """Gone: tell the owner, or leave the idle list."""
        self.closed = True
        owner, self.owner = self.owner, None
        if owner is not None:
            owner.upstream_lost(exc)
        else:
            self.pool.forget(self)

    def pause_writing(self) -> None:
        """Flow control: the owner stops reading its client."""
        if self.owner is not None:
            self.owner.upstream_buffer_full()

    def resume_writing(self) -> None:
        """Flow control: the owner reads its client again."""
        if self.owner is not None:
            self.owner.upstream_buffer_drained()

    def write(self, data: bytes) -> None:
        """Send bytes upstream."""
        if self.transport is not None and not self.closed:
            self.transport.write(data)

    def close(self) -> None:
        """Close (buffered bytes are still sent)."""
        self.owner = None
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        """Close at once."""
        self.owner = None
        if self.transport is not None:
            self.transport.abort()


class UpstreamPool:
    """Connections to one upstream: at most ``max_connections`` bound at once."""

    def __init__(
        self,
        target: UpstreamTarget,
        *,
        max_connections: int,
        max_idle: int,
        keepalive_s: float,
        connect_timeout_s: float,
    ) -> None:
        self.target = target
        self.max_connections = max_connections
        self.max_idle = max_idle
        self.keepalive_s = keepalive_s
        self.connect_timeout_s = connect_timeout_s
        self.bound = 0  # connections bound to an exchange (or being opened for one)
        self.saturated = 0  # requests answered 503 because the cap was reached
        self.idle: list[UpstreamConnection] = []  # oldest first (take_idle gives the newest)
        # One coarse sweep closes idle connections past keepalive_s (no timer per release).
        self._sweep: asyncio.TimerHandle | None = None

    @property
    def at_cap(self) -> bool:
        """Whether the next exchange would be refused."""
        return self.bound >= self.max_connections

    def reserve(self) -> bool:
        """Bind a slot for one exchange; False (and counted) at the cap."""
        if self.bound >= self.max_connections:
            self.saturated += 1
            return False
        self.bound += 1
        return True

    def unreserve(self) -> None:
        """Give back a slot whose connection never came."""
        self.bound -= 1

    def take_idle(self) -> UpstreamConnection | None:
        """The most recently used idle connection, if one is still open."""
        while self.idle:
            conn = self.idle.pop()
            if not conn.closed and conn.transport is not None and not conn.transport.is_closing():
                conn.reused = True
                return conn
        return None

    async def connect(self) -> UpstreamConnection:
        """Open a new connection (raises OSError or TimeoutError)."""
        loop = asyncio.get_running_loop()
        target = self.target
        opening = loop.create_connection(
            lambda: UpstreamConnection(self),
            target.host,
            target.port,
            ssl=target.tls,
            server_hostname=target.host if target.tls is not None else None,
        )
        if self.connect_timeout_s:
            _, conn = await asyncio.wait_for(opening, self.connect_timeout_s)
        else:
            _, conn = await opening
        return conn

    def release(self, conn: UpstreamConnection, reusable: bool) -> None:
        """Unbind a connection: back to the idle list if its last answer ended cleanly."""
        self.bound -= 1
        conn.owner = None
        if not reusable or conn.closed or len(self.idle) >= self.max_idle:
            conn.close()
            return
        # time.monotonic, not the running loop's clock: asyncio.get_running_loop() costs a
        # getpid() system call per call on Python 3.11, and this runs once per request.
        conn.idle_since = time.monotonic()
        self.idle.append(conn)
        if self.keepalive_s and self._sweep is None:
            self._sweep = asyncio.get_running_loop().call_later(self.keepalive_s, self._expire)

    def _expire(self) -> None:
        """Close the idle connections unused for ``keepalive_s``; come back for the next."""
        self._sweep = None
        now = time.monotonic()
        idle = self.idle
        while idle and idle[0].idle_since + self.keepalive_s <= now:
            idle.pop(0).close()
        if idle:  # the oldest left decides (reuse takes the newest: the order holds)
            self._sweep = asyncio.get_running_loop().call_later(
                idle[0].idle_since + self.keepalive_s - now, self._expire)

    def forget(self, conn: UpstreamConnection) -> None:
        """Drop a connection from the idle list (it closed)."""
        if conn in self.idle:
            self.idle.remove(conn)

    def close(self) -> None:
        """Close every idle connection."""
        idle, self.idle = self.idle, []
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        for conn in idle:
            conn.close()
