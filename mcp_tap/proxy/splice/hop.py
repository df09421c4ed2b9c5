"""One hop of the forwarding core: its listener, upstream pool, counters and drain."""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from typing import Protocol

import structlog

from mcp_tap.proxy.options import TapOptions
from mcp_tap.proxy.recorder import ExchangeRecorder
from mcp_tap.proxy.splice.framing import HeadMemo
from mcp_tap.proxy.splice.upstream import UpstreamPool, UpstreamTarget

log = structlog.get_logger("mcp_tap.proxy")

COUNTED = (
    "bad_request", "saturated", "head_timeout", "write_stall", "cut", "stray_upstream_bytes",
)
"""What a hop counts itself (the recorder counts the rest): ``/metrics`` shows them."""


class Connection(Protocol):
    """A client connection as its hop sees it
    (:class:`~mcp_tap.proxy.splice.client.ClientConnection`)."""

    @property
    def exchange(self) -> object | None:
        """The exchange in flight, if any."""

    def close_if_idle(self) -> bool:
        """Close the connection when no exchange is in flight."""

    def cut(self, phase: str, reason: str) -> None:
        """Cut whatever is in flight; close the connection."""

    def hold_reading(self) -> None:
        """Stop reading the client (the recording process is behind)."""

    def release_reading(self) -> None:
        """Read the client again."""


class HopCore:
    """Everything the client connections of one hop share."""

    def __init__(
        self,
        name: str,
        upstream: str,
        options: TapOptions,
        recorder: ExchangeRecorder,
        tls: ssl.SSLContext | bool,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.name = name
        # Exchanges begun, and answers by status class (index 0: none, 1: 1xx ... 5: 5xx):
        # plain ints, read at scrape time (Metrics.forwarder), nothing else per request.
        self.began = 0
        self.answered = [0] * 6
        self.options = options
        # Read per request: one attribute, not three.
        self.max_head_bytes = options.listener.max_head_bytes
        self.max_body_bytes = options.capture.max_body_bytes
        self.recorder = recorder
        self.clock = clock
        self.loop = asyncio.get_running_loop()
        self.target = UpstreamTarget.of(upstream, tls)
        up = options.upstream
        self.pool = UpstreamPool(
            self.target,
            max_connections=up.max_connections,
            max_idle=up.pool_size,
            keepalive_s=up.keepalive_s,
            connect_timeout_s=up.connect_timeout_s,
        )
        self.host_rewrite = self.target.authority if up.host == "rewrite" else None
        # Whether every request head may change (else only one naming a hop-by-hop field).
        self.rewrites = self.host_rewrite is not None or bool(self.target.prefix)
        # A traceparent is added only where hop correlation needs one: two hops in one tap.
        self.add_traceparent = options.tracing.add_traceparent and len(options.hops) > 1
        self.connections: set[Connection] = set()
        # What this hop's parsers learnt of the heads they saw (see framing.HeadMemo).
        self.heads = HeadMemo()
        self.counts = dict.fromkeys(COUNTED, 0)
        self.stopping = False
        self.held = False  # new client connections start held (see mcp_tap.proxy.holdback)
        self.server: asyncio.Server | None = None

    def count(self, what: str) -> None:
        """Count one event of the hop's own (see :data:`COUNTED`)."""
        self.counts[what] += 1

    def metric_counts(self) -> tuple[int, list[int]]:
        """Exchanges in flight and answers by status class (see :attr:`answered`)."""
        return self.began - sum(self.answered), self.answered

    @property
    def in_flight(self) -> int:
        """Exchanges in flight on this hop."""
        return sum(1 for c in self.connections if c.exchange is not None)

    async def listen(
        self, host: str, port: int, connection: Callable[[HopCore], asyncio.Protocol]
    ) -> tuple[str, int]:
        """Start accepting, one ``connection(self)`` per client; returns the bound address."""
        self.server = await self.loop.create_server(
            lambda: connection(self), host, port, reuse_address=True
        )
        bound = self.server.sockets[0].getsockname()
        return str(bound[0]), int(bound[1])

    def stop_accepting(self) -> None:
        """Close the listener and every idle connection; in-flight exchanges go on."""
        self.stopping = True
        if self.server is not None:
            self.server.close()
        for conn in list(self.connections):
            conn.close_if_idle()

    def cut_all(self) -> int:
        """Close every exchange still running (recorded as cut); how many there were."""
        cut = 0
        for conn in list(self.connections):
            if conn.exchange is not None:
                cut += 1
            conn.cut("drain-deadline", "still running at the drain deadline; closed")
        self.pool.close()
        return cut
