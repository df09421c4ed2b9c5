"""``[recording] mode = "inline"``: the :class:`~mcp_tap.proxy.recorder.Recorder` on the
forwarding event loop, one batch per loop iteration.

Recording each exchange as it ends cost a disk write, a log-line write and a wake-up of the
evidence writer's thread per exchange, and that thread's GIL hand-offs (a convoy: the loop
thread gave the GIL up at every socket call and waited to get it back). Measured at 32
connections: about 5 futex calls and 2 writes per request, 3x the CPU per request of the two
processes of the default mode together. Batched, the writer gets one batch, stderr one
write of lines and the metrics one update per loop iteration, as in the recording process.

Order is kept: an exchange that begins while earlier ones wait for the batch has its legacy
session snapshotted in its place among them, after what they teach the recorder.
"""

from __future__ import annotations

import asyncio

import structlog

from mcp_tap.proxy.capture import RawExchange
from mcp_tap.proxy.recorder import BatchSink, Recorder

log = structlog.get_logger("mcp_tap.proxy")


class InlineRecording:
    """What the hops hand exchanges to in inline mode: each loop iteration's exchanges are
    recorded together, after that iteration's reads."""

    def __init__(self, recorder: Recorder, sink: BatchSink) -> None:
        """``recorder`` writes through ``sink`` (the same one), flushed once per batch."""
        self.recorder = recorder
        self.sink = sink
        self._pending: list[tuple[bool, RawExchange]] = []  # (a begin?, the exchange)
        self._loop: asyncio.AbstractEventLoop | None = None

    def begin(self, cap: RawExchange) -> None:
        """Snapshot the exchange's legacy session now, or in its place after the batch."""
        if self._pending:
            self._pending.append((True, cap))
        else:
            self.recorder.begin(cap)

    def record(self, cap: RawExchange) -> None:
        """Record the exchange with the rest of this loop iteration's."""
        if not self._pending:
            self._schedule()
        self._pending.append((False, cap))

    def _schedule(self) -> None:
        try:
            loop = self._loop or asyncio.get_running_loop()
        except RuntimeError:  # no loop (a caller outside one): the batch waits for flush()
            return
        self._loop = loop
        # Twice: a callback scheduled now runs first in the next iteration, ahead of the
        # reads its poll finds; from there once more, the batch goes behind those reads, so
        # a request that arrived meanwhile is forwarded before the judging.
        loop.call_soon(loop.call_soon, self.flush)

    def flush(self) -> None:
        """Record every exchange waiting for its batch (the shutdown calls it last)."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        recorder = self.recorder
        recorder.hold()  # one write of log lines, one metrics update
        try:
            for is_begin, cap in pending:
                if is_begin:
                    recorder.begin(cap)
                    continue
                try:
                    recorder.record(cap)
                except Exception as exc:  # noqa: BLE001 - evidence must never break traffic
                    log.error("record.failed", hop=cap.hop, error=type(exc).__name__)
        finally:
            try:
                self.sink.flush()
            except Exception as exc:  # noqa: BLE001 - evidence must never break traffic
                log.error("record.failed", error=type(exc).__name__, records=len(pending))
            recorder.release()
