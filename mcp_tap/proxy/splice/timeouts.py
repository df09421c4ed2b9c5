"""Timers for the forwarding core: one-shot, re-armed by activity at the cost of a store.

Each read from a stream pushes its deadline forward (:meth:`Timer.touch`); the loop timer
only fires at the old deadline, sees the new one and sleeps again, so a busy stream costs
no timer churn. A timer of 0 seconds never fires (the option's "no limit").
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class Timer:
    """Calls ``fire`` once ``seconds`` passed without a :meth:`touch` (while started)."""

    __slots__ = ("_handle", "deadline", "fire", "loop", "seconds")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, seconds: float, fire: Callable[[], None]
    ) -> None:
        self.loop = loop
        self.seconds = seconds
        self.fire = fire
        self.deadline = 0.0
        self._handle: asyncio.TimerHandle | None = None

    def start(self) -> None:
        """(Re)start the countdown from now."""
        if not self.seconds:
            return
        self.deadline = self.loop.time() + self.seconds
        if self._handle is None:
            self._handle = self.loop.call_at(self.deadline, self._check)

    def touch(self) -> None:
        """Activity: push the deadline forward (starts the timer if it is not running)."""
        if self._handle is None:
            self.start()
        else:
            self.deadline = self.loop.time() + self.seconds

    def stop(self) -> None:
        """Stop the countdown."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    @property
    def running(self) -> bool:
        """Whether the countdown is on."""
        return self._handle is not None

    def _check(self) -> None:
        if self.loop.time() < self.deadline:
            self._handle = self.loop.call_at(self.deadline, self._check)
            return
        self._handle = None
        self.fire()
