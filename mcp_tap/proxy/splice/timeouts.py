"""Timers for the forwarding core: one-shot, re-armed by activity at the cost of a store.

Each read from a stream pushes its deadline forward (:meth:`Timer.touch`); the loop timer
only fires at the old deadline, sees the new one and sleeps again, so a busy stream costs
no timer churn. Stopping only marks the timer off (the loop timer, when it comes, sees that
and goes), so a keep-alive connection that stops and starts it per request costs no churn
either. A timer of 0 seconds never fires (the option's "no limit").

Deadlines are read from :func:`time.monotonic` itself, not ``loop.time()``: that is the same
clock on asyncio's loop, but a Python-level call per read, and these are read per request.
The loop timer is set with ``call_later`` (relative), so it works on any loop's clock.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

_now = time.monotonic


class Timer:
    """Calls ``fire`` once ``seconds`` passed without a :meth:`touch` (while started)."""

    __slots__ = ("active", "deadline", "fire", "handle", "loop", "seconds")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, seconds: float, fire: Callable[[], None]
    ) -> None:
        self.loop = loop
        self.seconds = seconds
        self.fire = fire
        self.deadline = 0.0
        self.active = False
        # The loop timer, while one is set. When it is, (re)starting is two stores.
        self.handle: asyncio.TimerHandle | None = None

    def start(self) -> None:
        """(Re)start the countdown from now."""
        if not self.seconds:
            return
        self.active = True
        self.deadline = _now() + self.seconds
        if self.handle is None:
            self.handle = self.loop.call_later(self.seconds, self._check)

    def touch(self) -> None:
        """Activity: push the deadline forward (starts the timer if it is not running)."""
        if self.active:
            self.deadline = _now() + self.seconds
        else:
            self.start()

    def stop(self) -> None:
        """Stop the countdown (the loop timer, if any, finds it off and goes)."""
        self.active = False

    def cancel(self) -> None:
        """Stop the countdown and drop the loop timer now (the owner is going away)."""
        self.active = False
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None

    @property
    def running(self) -> bool:
        """Whether the countdown is on."""
        return self.active

    def _check(self) -> None:
        self.handle = None
        if not self.active:
            return
        left = self.deadline - _now()
        if left > 0:
            self.handle = self.loop.call_later(left, self._check)
            return
        self.active = False
        self.fire()
