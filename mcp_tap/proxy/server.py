"""Wire the proxy together: hops, recorder (inline or its own process), evidence writer,
admin; drain on SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import ssl
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog
from aiohttp import web

from mcp_tap.errors import InputError
from mcp_tap.evidence import EvidenceWriter
from mcp_tap.evidence.shipping import shipping_status
from mcp_tap.evidence.signing import load_signing_key
from mcp_tap.gate.segments import SegmentTally
from mcp_tap.proxy.admin import admin_app
from mcp_tap.proxy.inline import InlineRecording
from mcp_tap.proxy.metrics import Metrics
from mcp_tap.proxy.options import TapOptions, parse_listen
from mcp_tap.proxy.recorder import BatchSink, Recorder
from mcp_tap.proxy.splice.client import ClientConnection
from mcp_tap.proxy.splice.hop import COUNTED, HopCore
from mcp_tap.proxy.worker import ProcessRecorder

log = structlog.get_logger("mcp_tap.proxy")


def new_bundle_dir(root: str, now: float) -> Path:
    """A fresh bundle directory under ``root`` for this run (one writer per chain)."""
    stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%dT%H%M%S")
    base = Path(root) / f"run-{stamp}Z-{os.getpid()}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path


def _ssl_context(verify: bool, ca_file: str) -> ssl.SSLContext | bool:
    if not verify:
        return False
    try:
        return ssl.create_default_context(cafile=ca_file or None)
    except (OSError, ssl.SSLError) as exc:
        raise InputError(f"upstream ca_file {ca_file!r}: {exc}") from None


class TapServer:
    """One proxy process: every hop's listener, the admin listener, one evidence bundle."""

    def __init__(
        self,
        options: TapOptions,
        *,
        clock: Callable[[], float] = time.time,
        log_level: str = "info",
    ) -> None:
        """Set up (nothing listens and nothing is written before :meth:`start`).

        With ``[recording] mode = "process"`` (the default) the recorder and the evidence
        writer live in a recording process: ``recorder`` is its :class:`ProcessRecorder`
        (``writer`` is None) and ``log_level`` is passed on to it. Inline, this process
        judges and writes: ``writer`` and ``recorder`` are the evidence writer and
        :class:`Recorder`, fed one batch per loop iteration (:class:`InlineRecording`).
        """
        self.options = options
        self.clock = clock
        self.metrics = Metrics()
        self.bundle_dir = new_bundle_dir(options.evidence.dir, clock())
        ev = options.evidence
        self.writer: EvidenceWriter | None = None
        self.recorder: Recorder | ProcessRecorder
        self.inline: InlineRecording | None = None
        if options.recording.mode == "process":
            self.recorder = ProcessRecorder(
                options, self.bundle_dir, self.metrics, log_level,
                next_bundle=lambda: new_bundle_dir(options.evidence.dir, clock()),
            )
        else:
            self.writer = EvidenceWriter(
                self.bundle_dir,
                max_segment_bytes=ev.max_segment_bytes,
                max_segment_age_s=ev.max_segment_age_s,
                queue_size=ev.queue_size,
                clock=clock,
                signing_key=load_signing_key(ev.signing_key_file, ev.signing_key_env, os.environ),
                # The gate reads a sealed segment's tallies instead of its records.
                tallies=SegmentTally if ev.tallies else None,
            )
            sink = BatchSink(self.writer)
            self.recorder = Recorder(options, sink, self.metrics, clock)
            self.inline = InlineRecording(self.recorder, sink)
        self.addresses: dict[str, tuple[str, int]] = {}
        self.admin_address: tuple[str, int] | None = None
        self._admin_runner: web.AppRunner | None = None
        self.hops: list[HopCore] = []
        self.metrics.evidence(self._evidence_counters)
        if isinstance(self.recorder, ProcessRecorder):
            hold = self.recorder.holdback
            self.metrics.held_back(lambda: (hold.pauses, hold.seconds))
        self.metrics.forwarder(lambda: {h.name: h.metric_counts() for h in self.hops})
        self.metrics.gauge(
            "mcptap_forwarder_events",
            "Events of the forwarding core: bad requests (400/431), saturated (503), head "
            "timeouts (408), client write stalls, exchanges cut.",
            lambda: {k: float(sum(h.counts[k] for h in self.hops)) for k in COUNTED},
        )
        self.metrics.gauge(
            "mcptap_upstream_connections",
            "Upstream connections bound to an exchange, the cap, and 1 when at the cap.",
            lambda: {
                "bound": float(sum(h.pool.bound for h in self.hops)),
                "max": float(sum(h.pool.max_connections for h in self.hops)),
                "saturated": float(any(h.pool.at_cap for h in self.hops)),
            },
        )

    def _evidence_counters(self) -> dict[str, int]:
        if isinstance(self.recorder, ProcessRecorder):
            return self.recorder.counters()
        return self.writer.counters() if self.writer is not None else {}

    async def start(self) -> None:
        """Open the evidence bundle and start listening.

        If any step fails (the recording process, TLS settings, a listener that cannot bind),
        what was already started is stopped again (the recording process included, so the
        process can exit), the bundle is removed when nothing was recorded in it, and the
        error is raised; no ``proxy.stopped`` line is logged for a run that never started.
        """
        root = Path(self.options.evidence.dir)
        fresh_root = not root.exists()
        fresh_bundle = not self.bundle_dir.exists()
        try:
            await self._start()
        except BaseException:
            await self._shutdown()
            log.debug("proxy.start_failed", bundle=str(self.bundle_dir))
            if fresh_bundle and not self._evidence_counters().get("written", 0):
                shutil.rmtree(self.bundle_dir, ignore_errors=True)
                if fresh_root:
                    with contextlib.suppress(OSError):
                        root.rmdir()  # only if it is empty: this run made it
            raise

    async def _start(self) -> None:
        up = self.options.upstream
        tls = _ssl_context(up.verify_tls, up.ca_file)  # before anything is started
        if isinstance(self.recorder, ProcessRecorder):
            await self.recorder.start()
        elif self.writer is not None:
            self.writer.start()
        for hop in self.options.hops:
            core = HopCore(hop.name, hop.upstream, self.options, self.inline or self.recorder,
                           tls, self.clock)
            self.hops.append(core)
            if isinstance(self.recorder, ProcessRecorder):
                self.recorder.holdback.hops.append(core)
            host, port = parse_listen(hop.listen)
            try:
                self.addresses[hop.name] = await core.listen(host, port, ClientConnection)
            except OSError as exc:
                raise InputError(
                    f"hop {hop.name}: cannot listen on {hop.listen} ({exc.strerror or exc})"
                ) from None
        if self.options.admin.listen:
            canary = None
            if self.options.gate.policy:
                from mcp_tap.proxy.canary import CanaryAnalysis

                canary = CanaryAnalysis(self.options.gate, self.bundle_dir)
            token_env = self.options.admin.token_env
            # Read here, not kept in the options: the token appears in no config or log.
            token = os.environ.get(token_env, "").strip() if token_env else None
            app = admin_app(self.metrics, self.readiness, canary, token=token or None,
                            details=self.readiness_details)
            self._admin_runner = web.AppRunner(app, access_log=None)
            await self._admin_runner.setup()
            host, port = parse_listen(self.options.admin.listen)
            site = web.TCPSite(self._admin_runner, host, port, reuse_address=True)
            try:
                await site.start()
            except OSError as exc:
                raise InputError(
                    f"admin: cannot listen on {self.options.admin.listen} ({exc.strerror or exc})"
                ) from None
            bound = self._admin_runner.addresses[0]
            self.admin_address = (bound[0], bound[1])
        log.info(
            "proxy.started",
            bundle=str(self.bundle_dir),
            hops={h: f"{a[0]}:{a[1]}" for h, a in self.addresses.items()},
            admin=f"{self.admin_address[0]}:{self.admin_address[1]}"
            if self.admin_address
            else None,
        )

    def readiness_details(self) -> dict[str, Any]:
        """What ``/readyz`` states beside readiness: shipping (never a readiness problem)."""
        status = shipping_status(self._evidence_counters())
        return {"shipping": status} if status is not None else {}

    async def readiness(self) -> list[str]:
        """Problems that make the tap not ready: unreachable upstreams, unwritable evidence."""
        problems: list[str] = []
        for hop in self.hops:
            target = hop.target  # its url is the shown form: no userinfo
            try:
                _, writer = await asyncio.wait_for(
                    asyncio.open_connection(target.host, target.port), timeout=2
                )
                writer.close()
            except (OSError, TimeoutError):
                problems.append(f"hop {hop.name}: upstream {target.url} is not reachable")
        problems += [
            f"hop {h.name}: upstream connections at the cap ({h.pool.max_connections}); "
            "new requests get 503 saturated"
            for h in self.hops
            if h.pool.at_cap
        ]
        if not os.access(self.bundle_dir, os.W_OK):
            problems.append(f"evidence directory {self.bundle_dir} is not writable")
        if isinstance(self.recorder, ProcessRecorder):
            problems += self.recorder.problems()
        elif self.writer is not None and self.writer.failing:
            problems.append(f"evidence writer is failing to write (lost "
                            f"{self.writer.lost_total} records so far)")
        return problems

    async def stop(self, drain_timeout: float | None = None) -> None:
        """Stop accepting, let in-flight exchanges finish until the drain deadline (then cut
        them, recorded as cut), flush the evidence."""
        await self._shutdown(drain_timeout)
        held = {}
        if isinstance(self.recorder, ProcessRecorder) and self.recorder.holdback.pauses:
            hold = self.recorder.holdback
            held = {"held_back": hold.pauses, "held_back_s": round(hold.seconds, 3)}
        log.info("proxy.stopped", bundle=str(self.bundle_dir), **self._evidence_counters(),
                 **held)

    async def _shutdown(self, drain_timeout: float | None = None) -> None:
        if drain_timeout is None:
            drain_timeout = self.options.listener.drain_timeout_s
        if isinstance(self.recorder, ProcessRecorder):
            was_held = self.recorder.holdback.held
            self.recorder.holdback.stop()  # the drain reads every client: nothing waits
            for _ in range(2 if was_held else 0):
                # A request that waited unread begins its exchange (and is drained as one)
                # before idle connections are closed: read events run the iteration after.
                await asyncio.sleep(0)
        for hop in self.hops:
            hop.stop_accepting()
        in_flight = sum(h.in_flight for h in self.hops)
        if in_flight:
            log.info("proxy.draining", in_flight=in_flight)
            deadline = time.monotonic() + drain_timeout
            while sum(h.in_flight for h in self.hops) and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
        cut = sum(h.cut_all() for h in self.hops)
        if cut:
            log.warning("proxy.drain-deadline", cut=cut)
        for hop in self.hops:
            if hop.server is not None:
                await hop.server.wait_closed()
        await asyncio.sleep(0)  # let the cut transports report their loss
        if self._admin_runner is not None:
            await self._admin_runner.cleanup()
            self._admin_runner = None
        if isinstance(self.recorder, ProcessRecorder):
            await self.recorder.aclose()
        elif self.writer is not None:
            self.flush_inline()
            if len(self.options.hops) >= 2 and isinstance(self.recorder, Recorder):
                self.writer.note_pairing(self.recorder.correlator.counts())
            await self.writer.aclose()

    def flush_inline(self) -> None:
        """Inline recording: record now what waits for this loop iteration's batch (call
        on the loop's thread; nothing to do in the recording process's mode)."""
        if self.inline is not None:
            self.inline.flush()

    async def run_until_signalled(self, ready: Callable[[TapServer], None] | None = None) -> None:
        """Start, wait for SIGTERM or SIGINT, then drain and stop."""
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await self.start()
        if ready is not None:
            ready(self)
        try:
            await stop.wait()
        finally:
            await self.stop()
