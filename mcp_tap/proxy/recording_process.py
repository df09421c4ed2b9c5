"""The recording process (``[recording] mode = "process"``): it reads the forwarder's
hand-off frames from a pipe, judges, redacts and writes each capture with the same
:class:`~mcp_tap.proxy.recorder.Recorder` and :class:`~mcp_tap.evidence.EvidenceWriter` as
inline recording, and reports metrics, the writer's counters and what it has taken.

The forwarder's side (spawning, supervising, handing over, counting losses) is
:class:`~mcp_tap.proxy.worker.ProcessRecorder`.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import os
import select
import signal
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import structlog

from mcp_tap.errors import InputError
from mcp_tap.evidence import EvidenceWriter
from mcp_tap.evidence.shipping import REASON_NOT_SHIPPED, Shipper
from mcp_tap.evidence.signing import load_signing_key
from mcp_tap.gate.segments import SegmentTally
from mcp_tap.logs import configure_logging
from mcp_tap.proxy import handoff
from mcp_tap.proxy.captured import materialize_state
from mcp_tap.proxy.metrics import Metrics
from mcp_tap.proxy.options import TapOptions
from mcp_tap.proxy.options.shipping import ship_options
from mcp_tap.proxy.recorder import BatchSink, Recorder

log = structlog.get_logger("mcp_tap.proxy")

_REPORT_EVERY_S = 0.25
_MAX_PENDING_BEGINS = 10000
_WRITER_IDLE_S = 0.25  # no capture for this long: the evidence writer's idle work
# Young collections every 20,000 net allocations, not 700: a judged exchange allocates
# thousands of short-lived (refcount-freed) objects, and each collection walks the young ones.
_GC_THRESHOLD = (20000, 20, 100)
_COALESCE_S = 0.01  # the recording process's pause after a small read (see its loop)
_COALESCE_BYTES = 256 * 1024  # a read this big means a backlog: no pause
_PIPE_BYTES = 1 << 20  # room in the pipe for what arrives during the pause
_EAGER_REPORT_S = 0.01  # behind (a big read): say what was taken this often, not every 0.25 s
REASON_HANDOVER = "recording queue full"
_SHIP_DRAIN_S = 10.0  # at drain: how long the last uploads may take (the parent waits 30 s)


def run_recording_process(
    options: TapOptions,
    bundle_dir: str,
    captures: Connection,
    reports: Connection,
    log_level: str,
) -> None:
    """The recording process: judge, redact and write every capture it is handed."""
    # The parent drives shutdown (it drains its in-flight exchanges first); a Ctrl-C that
    # reaches the whole process group must not cut the recording short.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    configure_logging(log_level)
    metrics = Metrics()
    try:
        writer, shipper = _open_evidence(options, bundle_dir)
    except InputError as exc:
        reports.send(("error", str(exc)))
        return
    batch = BatchSink(writer)
    recorder = Recorder(options, batch, metrics, time.time)
    gc.freeze()  # keep full collections from walking the start-up objects (see commands.proxy)
    gc.set_threshold(*_GC_THRESHOLD)
    reports.send(("ready",))
    taken = 0

    def report() -> None:
        counters = writer.counters()
        if shipper is not None:
            # Segments the shipper gave up: a gap record in the segment being written, which
            # is shipped (this thread is the writer's).
            writer.report_lost(shipper.take_unstated(), REASON_NOT_SHIPPED)
            counters.update(shipper.counters())
        # OSError: the proxy is gone (killed); the evidence still gets finished.
        with contextlib.suppress(OSError):
            reports.send(("report", metrics.snapshot(), counters, taken))

    state = _Handover(recorder, writer)
    fd = captures.fileno()
    with contextlib.suppress(AttributeError, OSError):  # Linux only; a smaller pipe still works
        # The forwarder's writes must find room during the pause below, or its transport
        # would buffer and poll for the pipe.
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
    frames = handoff.FrameDecoder()
    last_read = last_eager = time.monotonic()
    next_report = last_read + _REPORT_EVERY_S
    stopped = False
    while not stopped:
        readable, _, _ = select.select([fd], [], [], max(0.0, next_report - time.monotonic()))
        if readable:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break  # the proxy is gone: finish what was handed over
            last_read = time.monotonic()
            recorder.hold()  # lines and metrics of what was read: one write, one update
            for frame in frames.feed(chunk):
                taken_now, stopped = state.handle(frame)
                taken += taken_now
            batch.flush()
            recorder.release()
            if state.hold_marks or (len(chunk) >= _COALESCE_BYTES
                                    and last_read - last_eager >= _EAGER_REPORT_S):
                # The forwarder holds its clients back (or soon will): tell it what was
                # taken now, not at the next full report, so that the pause is short.
                state.hold_marks = 0
                last_eager = last_read
                with contextlib.suppress(OSError):
                    reports.send(("taken", taken))
            if len(chunk) < _COALESCE_BYTES:
                # A trickle (the forwarder hands over once per loop iteration): let the next
                # frames gather in the pipe, so that they are read, judged, logged and
                # written together. Per read this process pays a wake-up, a select, a write
                # of log lines and a write of records: per exchange when it keeps up, per
                # batch after this pause.
                time.sleep(_COALESCE_S)
        if time.monotonic() >= next_report:
            if time.monotonic() - last_read >= _WRITER_IDLE_S:
                # The writer's idle work (age rotation, pending gap records, a deleted
                # directory), when its thread would have done it: nothing for a while.
                writer.idle()
            report()
            next_report = time.monotonic() + _REPORT_EVERY_S
    if frames.bad or frames.pending:  # never expected: a frame that did not decode
        log.error("handoff.bad-frames", bad=frames.bad, cut_short_bytes=frames.pending)
    if len(options.hops) >= 2:
        writer.note_pairing(recorder.correlator.counts())
    if shipper is not None:
        summary = shipper.last_words()
        writer.report_lost(shipper.take_unstated(), REASON_NOT_SHIPPED)
        writer.note_shipping(summary)
    # EOF before "stop": the forwarder died; what it had begun is lost, and the bundle says so.
    writer.close(abrupt=not stopped, inflight=len(state.sessions))
    if shipper is not None:
        # The last segment and the closing bundle.json; what the store does not take in time
        # stays in the bundle's ledger for the next run to ship.
        shipper.close(_SHIP_DRAIN_S)
    report()
    reports.close()


def _open_evidence(options: TapOptions, bundle_dir: str) -> tuple[EvidenceWriter, Shipper | None]:
    """The started evidence writer, and the shipper that follows it (when ``[evidence]
    ship`` is set); InputError when the bundle cannot be made."""
    ev = options.evidence
    ship = ship_options(ev)
    writer = EvidenceWriter(
        bundle_dir,
        # A shipped bundle says, signed, which release and pod it is (its key says so too,
        # but anyone who can write to the store can move a key).
        meta={"fleet": {"release": ship.release, "pod": ship.pod}} if ship else None,
        max_segment_bytes=ev.max_segment_bytes,
        max_segment_age_s=ev.max_segment_age_s,
        queue_size=ev.queue_size,
        signing_key=load_signing_key(ev.signing_key_file, ev.signing_key_env, os.environ),
        # The gate reads a sealed segment's tallies instead of its records.
        tallies=SegmentTally if ev.tallies else None,
    )
    shipper = Shipper(ship) if ship is not None else None
    if shipper is not None:
        # Its own thread: a store that is down or frozen never slows this loop.
        writer.follow(shipper.sealed, shipper.bundle_written)
        shipper.resume(Path(bundle_dir).parent, Path(bundle_dir))
        shipper.start()
    # Inline: this process does nothing but record, so the batch it has just judged is
    # written before it reads the next (no writer thread to wake, no GIL hand-off). A
    # stalled disk stalls this loop; the pipe then fills and the forwarder counts what
    # it cannot hand over (stated as a gap), as for any recording process that lags.
    try:
        writer.start(inline=True)
    except InputError:
        if shipper is not None:
            shipper.close(0)
        raise
    return writer, shipper


class _Handover:
    """The recording process's side: each handed-over message, in order."""

    def __init__(self, recorder: Recorder, writer: EvidenceWriter) -> None:
        self.recorder = recorder
        self.writer = writer
        self.max_sse_events = recorder.options.capture.max_sse_events
        self.sessions: dict[int, str | None] = {}
        self.hold_marks = 0  # ("hold",) messages not yet answered with a "taken" report

    def handle(self, batch: list[tuple[Any, ...]]) -> tuple[int, bool]:
        """Handle one batch; how many captures it held and whether it asked to stop."""
        taken = 0
        for message in batch:
            kind = message[0]
            if kind == handoff.RECORD:
                taken += 1
                self._record(message[1], message[2])
            elif kind == handoff.BEGUN:
                # The exchanges begun since the last frame, by key range: each stays here
                # until recorded (the in-flight count), with no session version unless a
                # "begin" (one that names a session, in its place in the frame) says one.
                sessions = self.sessions
                for key in range(message[1], message[2]):
                    sessions[key] = None
                while len(sessions) > _MAX_PENDING_BEGINS:  # lost records leave theirs
                    sessions.pop(next(iter(sessions)))
            elif kind == handoff.BEGIN:
                _, key, hop, session = message
                known = self.recorder.session_version(hop, session) if session else None
                self.sessions[key] = known
                if len(self.sessions) > _MAX_PENDING_BEGINS:  # lost records leave theirs
                    self.sessions.pop(next(iter(self.sessions)))
            elif kind == handoff.DROP:
                self.sessions.pop(message[1], None)
            elif kind == handoff.LOST:
                self.writer.report_lost(message[1], message[2] if len(message) > 2
                                        else REASON_HANDOVER)
            elif kind == handoff.HOLD:
                self.hold_marks += 1
            elif kind == handoff.HELD:
                self.writer.note_held(message[1], message[2])
            elif kind == handoff.STOP:
                return taken, True
        return taken, False

    def _record(self, key: int | None, state: tuple[Any, ...]) -> None:
        cap = materialize_state(state, self.max_sse_events)
        if key is not None:  # (the message's key: the flat state does not repeat it)
            cap.handover_key = key
            cap.session_version = self.sessions.pop(key, None)
        try:
            self.recorder.record(cap)
        except Exception as exc:  # noqa: BLE001 - one bad record must not stop the recording
            log.error("record.failed", hop=cap.hop, error=type(exc).__name__)
