"""Pair the exchanges of one request across two hops in one process and compare them.

A pair is found two ways, and its record says which (``pairedBy``):

* ``traceparent``: both hops saw the same W3C trace id (the tap adds a ``traceparent`` when
  the client sent none, and most boxes propagate it), and the same method and name. A box
  that is an MCP gateway sends the origin its own JSON-RPC ids and, in the handshake era,
  its own session set-up under the same trace, so the id is not part of the key; several
  candidates in one trace are told apart by their params, then their id.
* ``params``: the inner hop received no ``traceparent`` (the box dropped it): the same
  method, name and keyed digest of the params (``_meta`` and the handshake's identity left
  out), requests begun at most ``params_window_s`` apart, the inner one inside the outer
  one in time.

Exactly one candidate makes a pair; several are *ambiguous*: nothing is guessed, the view
is counted (:attr:`Correlator.ambiguous`) and left unpaired. Views whose partner never comes
(a gateway's own requests, a notification it answers itself) are counted per hop when their
window ends (:attr:`Correlator.unpaired`).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from mcp_tap.core.hashing import DigestKey, canonical_json, hmac_sha256
from mcp_tap.core.hops import BOX_HTTP, HopComparison, HopThresholds, HopView, compare_hops

PAIRED_BY_TRACE = "traceparent"
PAIRED_BY_PARAMS = "params"
_NAME_PARAM = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri",
               "resources/subscribe": "uri", "resources/unsubscribe": "uri"}
# Not part of what the client asked for: a gateway sends its own.
_IDENTITY_PARAMS = ("_meta", "clientInfo", "capabilities")


@dataclass(frozen=True, slots=True)
class Pending:
    """One hop's view waiting for its partner.

    ``traced_here``: no ``traceparent`` reached this hop (the tap added the trace id), so a
    partner may be found by params; ``ended_at``: when the exchange ended (a request that
    went through a box ended inside the one that sent it); ``redacted``: what the record
    holds of it (for the change values); ``box_kind``: this hop's upstream's.
    """

    exchange_id: str
    view: HopView
    received_at: float
    upstream: str
    box_kind: str = BOX_HTTP
    trace_id: str = ""
    traced_here: bool = False
    ended_at: float | None = None
    redacted: Any = None


@dataclass(frozen=True, slots=True)
class PairResult:
    """A compared pair: both exchange ids, how it was paired, the comparison, and both
    views (outer first)."""

    outer_id: str
    inner_id: str
    outer_hop: str
    inner_hop: str
    comparison: HopComparison
    paired_by: str = PAIRED_BY_TRACE
    outer: Pending | None = None
    inner: Pending | None = None


@dataclass(slots=True)
class _Waiting:
    item: Pending
    offered_at: float
    trace_key: tuple[str, str, str]
    params_key: tuple[str, str, bytes]
    rpc_id: str


@dataclass(slots=True)
class _Index:
    """Waiting views by serial number, and by each of their two keys."""

    items: OrderedDict[int, _Waiting] = field(default_factory=OrderedDict)
    by_trace: dict[tuple[str, str, str], list[int]] = field(default_factory=dict)
    by_params: dict[tuple[str, str, bytes], list[int]] = field(default_factory=dict)

    def add(self, serial: int, waiting: _Waiting) -> None:
        self.items[serial] = waiting
        self.by_trace.setdefault(waiting.trace_key, []).append(serial)
        self.by_params.setdefault(waiting.params_key, []).append(serial)

    def remove(self, serial: int) -> _Waiting:
        waiting = self.items.pop(serial)
        _unlist(self.by_trace, waiting.trace_key, serial)
        _unlist(self.by_params, waiting.params_key, serial)
        return waiting


def _unlist(index: dict[Any, list[int]], key: Any, serial: int) -> None:
    serials = index[key]
    serials.remove(serial)
    if not serials:
        del index[key]


def _keys(view: HopView, trace_id: str, secret: bytes) -> tuple[
        tuple[str, str, str], tuple[str, str, bytes], str]:
    message = view.request_message if isinstance(view.request_message, dict) else {}
    method = message.get("method")
    method = method if isinstance(method, str) else ""
    params = message.get("params")
    name = params.get(_NAME_PARAM.get(method, "")) if isinstance(params, dict) else None
    name = name if isinstance(name, str) else ""
    asked = ({k: v for k, v in params.items() if k not in _IDENTITY_PARAMS}
             if isinstance(params, dict) else params)
    try:
        digest = hmac_sha256(secret, canonical_json(asked))
    except (TypeError, ValueError):  # a value canonical JSON cannot write: no params key
        digest = b""
    try:
        rpc_id = canonical_json(message.get("id")).decode()
    except (TypeError, ValueError):
        rpc_id = ""
    return (trace_id, method, name), (method, name, digest), rpc_id


class Correlator:
    """Holds views until their partner arrives (see the module's docstring).

    A view waits at most ``window_s`` seconds *from when it was offered* (the end of its
    exchange), so a long SSE stream is paired as well as a quick JSON answer.
    """

    def __init__(
        self,
        thresholds: HopThresholds,
        *,
        window_s: float = 60.0,
        max_pending: int = 50000,
        params_window_s: float = 5.0,
        key: DigestKey | None = None,
    ) -> None:
        self.thresholds = thresholds
        self.window_s = window_s
        self.params_window_s = params_window_s
        self.max_pending = max_pending
        self._secret = (key or DigestKey.random()).secret
        self._index = _Index()
        self._serial = 0
        self.unpaired: dict[str, int] = {}
        """Views whose window ended without a partner, per hop."""
        self.ambiguous = 0
        """Views with several candidates: left unpaired, never guessed."""
        self.paired: dict[str, int] = {}
        """Pairs made, per way (``traceparent`` / ``params``)."""

    @property
    def expired(self) -> int:
        """Every view that left without a partner (unpaired, of any hop)."""
        return sum(self.unpaired.values())

    def counts(self) -> dict[str, Any]:
        """What pairing did, for the bundle's closing summary: the views still waiting
        count as unpaired."""
        unpaired = dict(self.unpaired)
        for waiting in self._index.items.values():
            hop = waiting.item.view.hop
            unpaired[hop] = unpaired.get(hop, 0) + 1
        return {"paired": dict(sorted(self.paired.items())),
                "unpaired": dict(sorted(unpaired.items())), "ambiguous": self.ambiguous}

    def offer(self, item: Pending, now: float) -> PairResult | None:
        """Add one view; returns the comparison when it completes a pair of two hops."""
        self._expire(now)
        trace_key, params_key, rpc_id = _keys(item.view, item.trace_id, self._secret)
        waiting = _Waiting(item, now, trace_key, params_key, rpc_id)
        found = self._by_trace(waiting)
        paired_by = PAIRED_BY_TRACE
        if found is None:
            found, paired_by = self._by_params(waiting), PAIRED_BY_PARAMS
        if found is None:
            self._serial += 1
            self._index.add(self._serial, waiting)
            if len(self._index.items) > self.max_pending:
                self._drop(next(iter(self._index.items)))
            return None
        if found < 0:
            self.ambiguous += 1
            return None
        other = self._index.remove(found).item
        self.paired[paired_by] = self.paired.get(paired_by, 0) + 1
        return self._compare(other, item, paired_by)

    def _compare(self, a: Pending, b: Pending, paired_by: str) -> PairResult:
        # The hop that received the request first is nearer the client.
        outer, inner = (a, b) if a.received_at <= b.received_at else (b, a)
        box = f"{outer.upstream} (hop {outer.view.hop} upstream)"
        comparison = compare_hops(outer.view, inner.view, box, self.thresholds, outer.box_kind)
        return PairResult(outer.exchange_id, inner.exchange_id, outer.view.hop,
                          inner.view.hop, comparison, paired_by, outer, inner)

    def _one(self, serials: list[int]) -> int | None:
        """The one candidate, None for none, -1 for several."""
        if not serials:
            return None
        return serials[0] if len(serials) == 1 else -1

    def _by_trace(self, new: _Waiting) -> int | None:
        if not new.item.trace_id:
            return None
        hop, items = new.item.view.hop, self._index.items
        serials = [s for s in self._index.by_trace.get(new.trace_key, ())
                   if items[s].item.view.hop != hop]
        if len(serials) > 1:  # several in one trace: the same params, then the same id
            serials = ([s for s in serials if items[s].params_key == new.params_key]
                       or serials)
            serials = [s for s in serials if items[s].rpc_id == new.rpc_id] or serials
        return self._one(serials)

    def _by_params(self, new: _Waiting) -> int | None:
        if not new.params_key[2]:
            return None
        items = self._index.items
        serials = [s for s in self._index.by_params.get(new.params_key, ())
                   if self._could_pair(items[s].item, new.item)]
        return self._one(serials)

    def _could_pair(self, a: Pending, b: Pending) -> bool:
        """Whether ``a`` and ``b`` could be one request through a box that dropped its
        trace: other hops, other traces, the inner one traced here, begun close together,
        the inner one inside the outer one."""
        if a.view.hop == b.view.hop or a.trace_id == b.trace_id:
            return False
        outer, inner = (a, b) if a.received_at <= b.received_at else (b, a)
        if not inner.traced_here or inner.received_at - outer.received_at > self.params_window_s:
            return False
        return (inner.ended_at is None or outer.ended_at is None
                or inner.ended_at <= outer.ended_at)

    def _drop(self, serial: int) -> None:
        hop = self._index.remove(serial).item.view.hop
        self.unpaired[hop] = self.unpaired.get(hop, 0) + 1

    def _expire(self, now: float) -> None:
        items = self._index.items
        while items:
            serial, waiting = next(iter(items.items()))
            if now - waiting.offered_at <= self.window_s:
                break
            self._drop(serial)
