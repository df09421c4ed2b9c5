"""Recording in a separate process (``[recording] mode = "process"``).

Judging, redaction, metrics and evidence cost about as much CPU per exchange as the
forwarding itself (see ``docs/benchmark.md``). Inline, that work runs on the event loop and
the next request waits for it. Here the forwarder only hands the finished capture (headers,
capped bodies, SSE events: a few KB) to a recording process, which runs the very same
:class:`Recorder` and :class:`EvidenceWriter`, so the evidence is the same in both modes.

The handover is cheap on purpose: captures that end in the same event-loop iteration are
encoded together, once, on the loop thread (marshal, see :mod:`~mcp_tap.proxy.handoff`), and
written to a pipe through a non-blocking asyncio transport (length-prefixed frames), after
the reads of the next iteration (a request that arrived as an answer ended is forwarded
first). No thread is woken per capture.

The recording process (:mod:`~mcp_tap.proxy.recording_process`) reports its metrics, the
writer's counters and how many captures it has taken every quarter second and once more when
it stops; ``/metrics`` shows the latest report. When ``queue_size`` captures are handed over
but not yet taken (the process is slow, stopped or gone), further captures are counted lost
and, with the next capture that fits, become a gap record in the evidence: never silent.
Order is kept (one pipe, one reader), so legacy sessions and hop pairs are learnt in the
order the exchanges ended.

Before that, back-pressure (``[recording] max_wait_ms``, :mod:`~mcp_tap.proxy.holdback`):
when half of ``queue_size`` is handed over and not taken, the forwarder stops reading from
its clients until a report shows three eighths or less left, for ``max_wait_ms`` at most. The
pause is marked in the hand-off (``("hold",)``): the recording process answers it, and any
read that finds a backlog, with a short ``("taken", n)`` report, so the pause ends as soon
as it can. Never while no recording process runs, never past the bound, never during drain.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import structlog

from mcp_tap.errors import InputError
from mcp_tap.evidence import iter_records
from mcp_tap.proxy import handoff
from mcp_tap.proxy.capture import RawExchange
from mcp_tap.proxy.holdback import HoldBack
from mcp_tap.proxy.metrics import Metrics
from mcp_tap.proxy.options import TapOptions
from mcp_tap.proxy.recording_process import (
    REASON_HANDOVER,
    run_recording_process,
)

log = structlog.get_logger("mcp_tap.proxy")

_START_TIMEOUT_S = 120.0  # the recording process imports the schema models on start
_STOP_TIMEOUT_S = 30.0
_LOG_EVERY_S = 5.0
_WATCH_EVERY_S = 0.5  # how often the forwarder checks its recording process is alive
REASON_DIED = "the recording process died"
_WRITER_QUEUE_FULL = "queue full"  # the reason of the writer's own gap records


class ProcessRecorder:
    """The forwarder's recorder when recording runs in its own process.

    ``begin``/``record`` never block: they add to the batch of this loop iteration.
    ``start()`` spawns the process and waits until it has opened the evidence bundle;
    ``aclose()`` hands over the rest, lets the process drain and waits for it.
    """

    def __init__(
        self,
        options: TapOptions,
        bundle_dir: Path,
        metrics: Metrics,
        log_level: str = "info",
        next_bundle: Callable[[], Path] | None = None,
    ) -> None:
        self._options, self._log_level = options, log_level
        self._next_bundle = next_bundle  # where a restarted recording process writes
        self._spawn(bundle_dir)
        self.metrics = metrics
        self.bundle_dir = bundle_dir
        self.bundle_dirs = [bundle_dir]  # one per recording process this proxy ran
        self.restarts = 0
        self._died_with: int | None = None  # the exit code of the last one that died
        self.queue_size = options.recording.queue_size
        self.lost = 0  # captures that never reached the recording process
        self._pending_lost = 0  # ... of which no gap record has been handed over yet
        self._lost_from: float | None = None  # wall-clock span of the pending losses
        self._lost_to: float | None = None
        self._lost_reason = REASON_HANDOVER
        self._sent = 0  # captures handed over
        self._taken = 0  # ... of which the recording process has taken (as last reported)
        # Back-pressure: hold the clients back from high water until low water (or the bound).
        # High water at a half, low at three eighths: at full load the default queue's pause
        # stays within max_wait_ms (docs/benchmark.md, "Figures the code relies on").
        self.holdback = HoldBack(options.recording.max_wait_ms / 1000, lambda: self._taken,
                                 lambda: self._sent - self._taken, self.queue_size // 8)
        self._high = max(1, self.queue_size // 2) if self.holdback.enabled else 1 << 62
        self._low = self.queue_size * 3 // 8
        self._held_base = (0, 0.0)  # the hold-back totals when this recording process began
        self._writer_counters: dict[str, int] = {}
        # Hand-off messages of this loop iteration; a capture is kept as the RawExchange
        # until the flush turns it into a ("record", key, plain values) message.
        self._batch: list[tuple[Any, ...] | RawExchange] = []
        self._scheduled = False  # a flush is scheduled
        # Exchanges are keyed in the order they begin; keys below _announced have been
        # announced to the recording process (as one ("begun", first, end) range per flush).
        self._next_key = 0
        self._announced = 0
        self._transport: asyncio.WriteTransport | None = None
        self._pipe_fd: int | None = None  # the transport's pipe (a frame goes by writev)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reader: threading.Thread | None = None
        self._last_lost_log = 0.0
        self._closing = False
        self._watcher: asyncio.TimerHandle | None = None
        self._restarting: asyncio.Task[None] | None = None

    def _spawn(self, bundle_dir: Path) -> None:
        ctx = multiprocessing.get_context("spawn")  # fork would copy the loop and its threads
        self._captures_in, self._captures_out = ctx.Pipe(duplex=False)
        self._reports, self._reports_out = ctx.Pipe(duplex=False)
        self._process = ctx.Process(
            target=run_recording_process,
            args=(self._options, str(bundle_dir), self._captures_in, self._reports_out,
                  self._log_level),
            name="mcp-tap-recorder",
            daemon=True,
        )

    @property
    def pid(self) -> int | None:
        """The recording process's pid (None before :meth:`start`)."""
        return self._process.pid

    # -- life cycle ----------------------------------------------------------------------

    async def start(self) -> None:
        """Spawn the recording process; raise :class:`InputError` if it cannot record.

        From then on it is supervised: when it dies, a new one is started (writing a new
        bundle, see ``next_bundle``), and the captures the dead one did not confirm plus
        those made while none ran become one gap record there, with their count and span.
        """
        await self._start_process()
        self._watch()

    async def _start_process(self) -> None:
        self._process.start()
        self._captures_in.close()
        self._reports_out.close()
        loop = self._loop = asyncio.get_running_loop()
        message = await loop.run_in_executor(None, self._first_report)
        if message[0] != "ready":
            await loop.run_in_executor(None, self._end_unstarted)
            raise InputError(f"the recording process did not start: {message[1]}")
        fd = os.dup(self._captures_out.fileno())
        self._captures_out.close()
        os.set_blocking(fd, False)
        pipe = os.fdopen(fd, "wb", buffering=0)
        self._transport, _ = await loop.connect_write_pipe(asyncio.Protocol, pipe)
        self._pipe_fd = fd
        self._reader = threading.Thread(
            target=self._read_reports, args=(self._reports,), name="mcp-tap-recorder-reports",
            daemon=True,
        )
        self._reader.start()

    # -- supervision ---------------------------------------------------------------------

    def _watch(self) -> None:
        if not self._closing and self._loop is not None and self._next_bundle is not None:
            self._watcher = self._loop.call_later(_WATCH_EVERY_S, self._check)

    def _check(self) -> None:
        """Every ``_WATCH_EVERY_S``: is the recording process still there?"""
        self._watcher = None
        if self._closing or self._restarting is not None:
            return
        if self._process.is_alive():
            self._watch()
            return
        self._batch = []  # its captures were counted as handed over: see _restart
        self._announced = self._next_key  # (and its begun exchanges are nobody's now)
        self.holdback.caught_up()  # nobody to wait for: read the clients again at once
        self._died_with = self._process.exitcode
        log.error("recorder.died", exitcode=self._died_with)
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        if self._reader is not None:
            self._reader.join(1.0)  # at EOF already: its last report must land before the reset
        self.restarts += 1
        handed, self._sent, self._taken = self._sent, 0, 0
        assert self._loop is not None
        self._restarting = self._loop.create_task(self._restart(self.bundle_dir, handed))

    async def _restart(self, old_bundle: Path, handed: int) -> None:
        assert self._next_bundle is not None and self._loop is not None
        # Exact: what the dead process was handed, minus what its bundle shows it recorded
        # (an exchange record, or a loss its writer already stated there).
        confirmed = await self._loop.run_in_executor(None, _accounted_in, old_bundle)
        self._count_lost(max(0, handed - confirmed), REASON_DIED)
        while not self._closing:
            bundle = self._next_bundle()
            self._spawn(bundle)
            try:
                await self._start_process()
            except InputError as exc:
                log.error("recorder.restart_failed", error=str(exc))
                await asyncio.sleep(1.0)
                continue
            self.bundle_dir = bundle
            self.bundle_dirs.append(bundle)
            self._held_base = (self.holdback.pauses, self.holdback.seconds)
            log.warning("recorder.restarted", bundle=str(bundle), lost=self._pending_lost)
            self._hand_over_lost()
            break
        self._restarting = None
        self._watch()

    def _count_lost(self, n: int, reason: str) -> None:
        if not n:
            return
        now = time.time()
        self.lost += n
        self._pending_lost += n
        self._lost_from = self._lost_from or now
        self._lost_to = now
        if reason != REASON_HANDOVER:
            self._lost_reason = reason

    def _hand_over_lost(self) -> None:
        """Queue the gap record of the pending losses (count, span and why)."""
        if not self._pending_lost:
            return
        reason = self._lost_reason
        if reason != REASON_HANDOVER and self._lost_from is not None and self._lost_to is not None:
            span = (_utc(self._lost_from), _utc(self._lost_to))
            reason = f"{reason}; captures from {span[0]} to {span[1]}"
        self._queue(handoff.lost(self._pending_lost, reason))
        self._pending_lost = 0
        self._lost_from = self._lost_to = None
        self._lost_reason = REASON_HANDOVER

    async def aclose(self, timeout: float = _STOP_TIMEOUT_S) -> None:
        """Hand over what is left, let the process drain and stop, take its last report."""
        deadline = time.monotonic() + timeout
        self._closing = True
        self.holdback.stop()
        if self._watcher is not None:
            self._watcher.cancel()
        if self._restarting is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._restarting), timeout / 2)
        transport = self._transport
        if transport is not None and not transport.is_closing():
            self._hand_over_lost()
            pauses, seconds = self._held_base
            if self.holdback.pauses > pauses:  # for the bundle's closing summary
                self._batch.append(handoff.held(self.holdback.pauses - pauses,
                                                self.holdback.seconds - seconds))
            self._batch.append(handoff.stop())
            self._flush()
            while transport.get_write_buffer_size() and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            transport.close()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._join, max(0.0, deadline - time.monotonic()))

    def _first_report(self) -> tuple[Any, ...]:
        """``("ready",)`` or ``("error", why)``: the recording process's first word."""
        try:
            if not self._reports.poll(_START_TIMEOUT_S):
                return ("error", f"no answer within {_START_TIMEOUT_S:g} s")
            message: tuple[Any, ...] = self._reports.recv()
        except (EOFError, OSError):
            self._process.join(5)
            return ("error", f"it exited (code {self._process.exitcode})")
        return message

    def _end_unstarted(self) -> None:
        """Make sure a recording process that did not start is gone (it ignores SIGTERM)."""
        self._process.join(5)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(5)
        self._captures_out.close()
        self._reports.close()

    def _join(self, timeout: float) -> None:
        if self._process.pid is None:  # never started
            return
        self._process.join(timeout)
        if self._process.is_alive():
            # The recording process ignores SIGTERM (the parent drives shutdown): SIGKILL.
            log.error("recorder.killed", reason="did not drain in time")
            self._process.kill()
            self._process.join(5)
        if self._reader is not None:
            self._reader.join(5)

    def _read_reports(self, reports: Connection) -> None:
        while True:
            try:
                message = reports.recv()
            except (EOFError, OSError):
                reports.close()  # the process is gone: this pipe is done with
                return
            if message[0] == "report":
                _, snapshot, self._writer_counters, self._taken = message
                self.metrics.restore(snapshot)
            elif message[0] == "taken":
                self._taken = message[1]
            hold = self.holdback
            if (hold.held or hold.spent) and self._sent - self._taken <= self._low:
                loop = self._loop
                with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to resume
                    if loop is not None:
                        loop.call_soon_threadsafe(self._caught_up)

    def _caught_up(self) -> None:
        """On the loop: a report says the backlog fell to the low-water mark."""
        if self._sent - self._taken <= self._low:
            self.holdback.caught_up()

    # -- the forwarder's side ----------------------------------------------------------------

    def begin(self, cap: RawExchange) -> None:
        """Tell the recording process an exchange began (and snapshot its legacy session).

        Every exchange is announced, so a recording process whose forwarder dies knows how
        many were in flight (begun, never handed over) and states them lost: by its key,
        in the range of keys the next flush announces (one message for all the exchanges
        begun meanwhile). One that names a session also gets a ``("begin", key, hop,
        session)`` message, in its place among the records, where the recording process
        takes the session's version as known at that point.
        """
        key = cap.handover_key = self._next_key
        self._next_key = key + 1
        if cap.session is not None:
            self._queue(handoff.begin(key, cap.hop, cap.session))
        elif not self._scheduled:
            self._schedule()  # the flush announces it, even if nothing else is handed over

    def record(self, cap: RawExchange) -> None:
        """Hand the finished capture to the recording process (counted lost if it is full)."""
        transport = self._transport
        full = self._sent - self._taken >= self.queue_size
        if transport is None or transport.is_closing() or full:
            self._count_lost(1, REASON_HANDOVER if full else REASON_DIED)
            if transport is not None and not transport.is_closing():
                self._queue(handoff.drop(cap.handover_key))  # counted here, not in flight
            now = time.monotonic()
            if now - self._last_lost_log >= _LOG_EVERY_S:
                self._last_lost_log = now
                log.warning("evidence.lost", reason=REASON_HANDOVER, lost=self.lost)
            return
        if self._pending_lost:
            self._hand_over_lost()
        self._sent += 1
        # The capture itself for now; its plain values (RawExchange.state, decoded in
        # _Handover.handle) are taken at the flush, off the path of the next request.
        self._batch.append(cap)
        if not self._scheduled:
            self._schedule()
        if self._sent - self._taken >= self._high and not self.holdback.held:
            self._hold()

    def _hold(self) -> None:
        """High water: hold the clients back, unless no recording process is there to wait
        for (restarting, closing, dead) or it stalled through the last pause (see
        :class:`HoldBack`)."""
        if self._closing or self._restarting is not None or self._loop is None:
            return
        if not self._process.is_alive():
            return  # the supervisor's next check restarts it; meanwhile losses are counted
        if self.holdback.hold(self._loop):
            self._queue(handoff.hold())  # answered with a report as soon as it is reached

    def _queue(self, message: tuple[Any, ...]) -> None:
        self._batch.append(message)
        if not self._scheduled:
            self._schedule()

    def _schedule(self) -> None:
        if self._loop is not None:
            self._scheduled = True
            self._loop.call_soon(self._flush_after_reads)

    def _flush_after_reads(self) -> None:
        """Flush after the reads of this loop iteration, not before them.

        A callback scheduled while an iteration runs comes first in the next one, ahead of
        the reads its poll found: a request that arrived meanwhile (typically the next one
        on a connection whose answer just ended) would wait for the hand-off's encoding and
        pipe write, and for the recording process that write wakes. Scheduled once more
        from here, the flush goes behind those reads (and takes what they add to the batch).
        """
        if self._loop is not None:
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._scheduled = False
        batch, self._batch = self._batch, []
        first, end = self._announced, self._next_key
        self._announced = end  # (announced or, with no recording process, nobody's)
        if (not batch and first == end) or self._transport is None \
                or self._transport.is_closing():
            return
        # The range first, so that every record of the frame finds its key begun.
        messages: handoff.Batch = [handoff.begun(first, end)] if first != end else []
        record = handoff.record
        messages += [record(m.handover_key, m.state()) if type(m) is RawExchange
                     else m for m in batch]  # type: ignore[misc]  # (m is a message then)
        # The old list and the captures go before the encoding: marshal indexes every
        # object referenced elsewhere (a reference count above one).
        del batch
        parts = handoff.frame_parts(messages)
        del messages
        transport = self._transport
        fd = self._pipe_fd
        if fd is not None and not transport.get_write_buffer_size():
            # Nothing queued before it: prefix and payload in one writev, the payload not
            # copied behind its prefix (what transport.write of the joined frame would do
            # next: one write). Anything else (the rest of a partial write, an error) goes
            # to the transport, which buffers or reports it as its own write would.
            try:
                sent = os.writev(fd, parts)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:
                sent = -1  # (the transport's write meets it again and closes, asyncio's way)
            if sent == sum(map(len, parts)):
                return
            if sent > 0:
                transport.write(b"".join(parts)[sent:])
                return
        transport.write(b"".join(parts))

    # -- what the admin listener shows ---------------------------------------------------

    def counters(self) -> dict[str, int]:
        """The recording process's evidence counters, plus captures not yet marked as lost."""
        counters = dict(self._writer_counters)
        counters["lost"] = counters.get("lost", 0) + self._pending_lost
        counters["lost_total"] = counters.get("lost_total", 0) + self._pending_lost
        return counters

    def problems(self) -> list[str]:
        """Why evidence is not being recorded right now (empty when it is)."""
        problems: list[str] = []
        if self._restarting is not None:  # not ready until the new one says it is
            problems.append(
                f"the recording process exited (code {self._died_with}); restarting it")
        elif not self._process.is_alive():
            problems.append(f"the recording process exited (code {self._process.exitcode})")
        if self._writer_counters.get("failing"):
            lost = self._writer_counters.get("lost_total", 0)
            problems.append(f"evidence writer is failing to write (lost {lost} records so far)")
        return problems


def _accounted_in(bundle: Path) -> int:
    """How many handed-over captures a (dead) recording process's bundle accounts for.

    Read one record at a time: a day's bundle must not land in the forwarder's memory.
    """
    accounted = 0
    try:
        for r in iter_records(bundle, lenient=True):
            kind = r.get("kind")
            if kind == "exchange":
                accounted += 1
            elif kind == "gap" and r.get("reason") == _WRITER_QUEUE_FULL:
                accounted += int(r.get("lost", 0))
    except (OSError, InputError):
        pass  # what was read before the bundle became unreadable is still accounted for
    return accounted


def _utc(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")
