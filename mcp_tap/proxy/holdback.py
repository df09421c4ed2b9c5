"""Back-pressure from the recording hand-off to the clients (``[recording] max_wait_ms``).

When the forwarder outruns its recording process, captures pile up in the hand-off; past
``queue_size`` they are counted lost. Before that, at a high-water mark, :class:`HoldBack`
stops *reading* from every client connection of the hops using the hand-off (new ones start
held too), so requests wait in the kernel's socket buffers instead of being forwarded and
then lost from the evidence. Nothing is refused or rewritten: only when bytes are read
changes. Exchanges already in flight go on: a request whose body is still coming is read
to its end (and a tunnel's bytes keep flowing), their answers are written as usual.

The pause is bounded: the recording process's report that it caught up (below a low-water
mark) ends it, and so does ``max_wait_s``, whatever happens to the recording process. A pause
that runs out while the recording process took fewer than ``progress`` captures (it is
stalled, or nearly) *spends* the back-pressure: no new pause until it has taken ``progress``
more, or a report shows the backlog below the low-water mark, so a stalled recording process
costs each client at most one ``max_wait_s`` and then losses are counted as without
back-pressure. One that ran out while the recording process kept taking (slow, not stalled)
leaves the back-pressure armed: flow control at the recording process's pace, each pause
bounded. Everything here runs on the event loop (the report thread calls in with
``call_soon_threadsafe``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import structlog

if TYPE_CHECKING:
    from mcp_tap.proxy.splice.hop import HopCore

log = structlog.get_logger("mcp_tap.proxy")

REASON = "recording"
"""The pause reason of a client connection held back (see ``ClientConnection._pause``)."""
_LOG_EVERY_S = 5.0


class HoldBack:
    """Whether the clients of the hops using one hand-off are held back, and for how long."""

    def __init__(
        self,
        max_wait_s: float,
        taken: Callable[[], int],
        backlog: Callable[[], int],
        progress: int,
    ) -> None:
        self.max_wait_s = max_wait_s
        self._taken = taken  # captures the recording process has taken (as last reported)
        self._backlog = backlog  # captures handed over and not yet taken (for the log)
        self.progress = max(1, progress)  # what a pause must see taken for it not to spend
        self._mark = 0  # taken() when the pause began, or when it was spent
        self.enabled = max_wait_s > 0  # 0: no back-pressure at all
        self.hops: list[HopCore] = []
        self.held = False
        self.spent = False  # a pause ran out; none again until the backlog fell below low water
        self.pauses = 0  # episodes since start
        self.timeouts = 0  # ... of which ran out (max_wait_s)
        self._seconds = 0.0  # held in the episodes that ended
        self._since = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._last_log = -_LOG_EVERY_S
        self._unlogged = 0

    @property
    def seconds(self) -> float:
        """Seconds the clients were held back in all, the episode in progress included."""
        if self.held:
            return self._seconds + time.monotonic() - self._since
        return self._seconds

    def hold(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Stop reading from every client connection, for ``max_wait_s`` at most.

        Returns whether a pause began (not when disabled, already held, or spent and the
        recording process has not taken ``progress`` captures since).
        """
        if self.held or not self.enabled:
            return False
        if self.spent:
            if self._taken() - self._mark < self.progress:
                return False
            self.spent = False  # it moves again: worth waiting for
        self._mark = self._taken()
        self.held = True
        self.pauses += 1
        self._since = time.monotonic()
        self._timer = loop.call_later(self.max_wait_s, self._ran_out)
        for hop in self.hops:
            hop.held = True  # connections accepted from now on start held (connection_made)
            for conn in hop.connections:
                conn.hold_reading()
        return True

    def caught_up(self) -> None:
        """The recording process is below the low-water mark: read again, and arm again."""
        self.spent = False
        self.release()

    def release(self, *, timed_out: bool = False) -> None:
        """Read every client connection again (nothing when not held)."""
        if not self.held:
            return
        self.held = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        took = time.monotonic() - self._since
        self._seconds += took
        for hop in self.hops:
            hop.held = False
            for conn in list(hop.connections):
                conn.release_reading()
        now = time.monotonic()
        if now - self._last_log >= _LOG_EVERY_S:
            self._last_log = now
            log.warning(
                "recording.held-back",
                seconds=round(took, 3),
                ran_out=timed_out,
                backlog=self._backlog(),
                pauses=self.pauses,
                held_s=round(self._seconds, 3),
                suppressed=self._unlogged,
            )
            self._unlogged = 0
        else:
            self._unlogged += 1

    def _ran_out(self) -> None:
        self._timer = None
        self.timeouts += 1
        taken = self._taken()
        if taken - self._mark < self.progress:  # stalled (or nearly): stop waiting for it
            self.spent = True
            self._mark = taken
        self.release(timed_out=True)

    def stop(self) -> None:
        """Release for good (drain, shutdown): no pause from now on."""
        self.enabled = False
        self.release()
