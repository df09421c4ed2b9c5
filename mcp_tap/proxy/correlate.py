"""Pair the exchanges of one request across two hops in one process and compare them.

Exchanges are keyed by their W3C trace id (the tap adds a ``traceparent`` when the client
sent none, and gateways propagate it). The first hop to see a trace is the outer one;
when its partner arrives the pair is compared with the core's :func:`compare_hops`.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from mcp_tap.core.hops import HopComparison, HopThresholds, HopView, compare_hops


@dataclass(frozen=True, slots=True)
class Pending:
    """One hop's view waiting for its partner."""

    exchange_id: str
    view: HopView
    received_at: float
    upstream: str


@dataclass(frozen=True, slots=True)
class PairResult:
    """A compared pair: both exchange ids and the comparison."""

    outer_id: str
    inner_id: str
    outer_hop: str
    inner_hop: str
    comparison: HopComparison


class Correlator:
    """Holds views by ``(trace id, JSON-RPC id)`` until their partner arrives.

    A view waits at most ``window_s`` seconds *from when it was offered* (the end of its
    exchange), so a long SSE stream is paired as well as a quick JSON answer.
    """

    def __init__(
        self, thresholds: HopThresholds, *, window_s: float = 60.0, max_pending: int = 50000
    ) -> None:
        self.thresholds = thresholds
        self.window_s = window_s
        self.max_pending = max_pending
        # key -> (view, when it was offered); insertion order is offer order.
        self._pending: OrderedDict[tuple[str, str], tuple[Pending, float]] = OrderedDict()
        self.expired = 0

    def offer(self, key: tuple[str, str], item: Pending, now: float) -> PairResult | None:
        """Add one view; returns the comparison when it completes a pair of two hops."""
        self._expire(now)
        waiting = self._pending.get(key)
        if waiting is None or waiting[0].view.hop == item.view.hop:
            self._pending[key] = (item, now)
            self._pending.move_to_end(key)
            if len(self._pending) > self.max_pending:
                self._pending.popitem(last=False)
                self.expired += 1
            return None
        del self._pending[key]
        other = waiting[0]
        # The hop that received the request first is nearer the client.
        outer, inner = (other, item) if other.received_at <= item.received_at else (item, other)
        box = f"{outer.upstream} (hop {outer.view.hop} upstream)"
        comparison = compare_hops(outer.view, inner.view, box, self.thresholds)
        return PairResult(
            outer.exchange_id, inner.exchange_id, outer.view.hop, inner.view.hop, comparison
        )

    def _expire(self, now: float) -> None:
        while self._pending:
            key, (_, offered_at) = next(iter(self._pending.items()))
            if now - offered_at <= self.window_s:
                break
            del self._pending[key]
            self.expired += 1
