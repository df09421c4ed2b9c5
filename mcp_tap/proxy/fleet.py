"""The gate service: one decision for a fleet of canary pods, ``mcp-tap gate-server``.

It answers ``GET /gate`` and ``POST /gate/flagger`` exactly as a tap's admin listener does
(:mod:`mcp_tap.proxy.canary`: the same evaluation, the same JSON, the same Flagger status
codes), but over every bundle under an evidence location: ``ROOT/RELEASE``, the release
named by the query string (``/gate?release=v2``) or, without one, the configured default.
``ROOT`` is a directory (or, where the evidence readers support it, an object-store
prefix); a release is one path segment of letters, digits, ``.``, ``_`` and ``-``, so a
query can never reach outside ``ROOT``. Any other query parameter is a 400.

The pods are still writing while the rollout is analysed: every bundle without a closing
summary is judged on what is complete (``all_open`` of
:func:`~mcp_tap.proxy.canary.evaluate_json`, the per-pod ``/gate``'s code path). On
signed evidence the evaluation merges the segments' tallies (:mod:`mcp_tap.gate.merging`),
so its cost grows with segments, not exchanges.

Bounds: at most ``max_evaluations`` evaluations run at once, each in its own process (a
second request for a release being evaluated shares that evaluation); at most
``max_waiters`` requests wait (more: 503 with ``Retry-After``); bodies past the admin
listener's limit are 413, other methods 405, other paths 404, and past its rate 429
(:func:`~mcp_tap.proxy.admin.guarded_app`).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import re
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from aiohttp import web

from mcp_tap.proxy.canary import CanaryAnalysis, evaluate_json
from mcp_tap.proxy.options import GateOptions

_RELEASE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_QUERY_KEYS: Final = frozenset({"release"})


@dataclass(frozen=True, slots=True)
class FleetOptions:
    """What the gate service judges and how much it may do at once."""

    root: str
    policy: str
    rollback: str = ""
    release: str = ""  # the default release ("": ROOT itself, when no query names one)
    baseline: tuple[str, ...] = ()
    max_evaluations: int = 1
    workers: int = 1  # processes one evaluation reads bundles with


def location(root: str, release: str) -> str:
    """The evidence location of ``release`` under ``root`` (``root`` itself for "")."""
    if not release:
        return root
    if "://" in root:
        return f"{root.rstrip('/')}/{release}"
    return str(Path(root) / release)


def release_of(query: Any, default: str) -> str:
    """The release a ``/gate`` query names (HTTPBadRequest for anything else)."""
    unknown = set(query) - _QUERY_KEYS
    if unknown:
        raise _bad(f"unknown query parameter {sorted(unknown)[0]!r}; /gate takes release=NAME")
    names = query.getall("release", [])
    if len(names) > 1:
        raise _bad("give release once")
    release = names[0] if names else default
    if release and not _RELEASE.match(release):
        raise _bad("a release is one name of letters, digits, '.', '_' and '-'")
    return str(release)


def _bad(message: str) -> web.HTTPBadRequest:
    return web.HTTPBadRequest(text=f'{{"error": "{message}"}}', content_type="application/json")


class FleetAnalysis(CanaryAnalysis):
    """The ``/gate`` routes of the gate service: a decision per release, bounded."""

    def __init__(self, options: FleetOptions) -> None:
        """Judge the releases under ``options.root``."""
        super().__init__(GateOptions(policy=options.policy, rollback=options.rollback,
                                     baseline=options.baseline), Path(options.root))
        self.fleet = options
        self._evaluating: dict[str, asyncio.Future[dict[str, Any]]] = {}

    async def decision_for(self, request: web.Request) -> dict[str, Any]:
        """The decision over the release the request names."""
        return await self.decide(release_of(request.query, self.fleet.release))

    async def decide(self, release: str) -> dict[str, Any]:
        """Evaluate ``release`` now (or join its evaluation already running)."""
        running = self._evaluating.get(release)
        if running is None or running.done():
            if self._pool is None:
                self._pool = ProcessPoolExecutor(
                    self.fleet.max_evaluations, mp_context=multiprocessing.get_context("spawn"))
            opts = self.fleet
            loop = asyncio.get_running_loop()
            running = asyncio.ensure_future(self._evaluate(loop.run_in_executor(
                self._pool, _evaluate_release, location(opts.root, release), opts)))
            self._evaluating[release] = running
            running.add_done_callback(lambda _: self._forget(release, running))
        return await asyncio.shield(running)

    def _forget(self, release: str, done: asyncio.Future[dict[str, Any]]) -> None:
        if self._evaluating.get(release) is done:
            del self._evaluating[release]

    async def _evaluate(self, running: Any) -> dict[str, Any]:
        try:
            result: dict[str, Any] = await running
        except BrokenProcessPool:
            self._pool = None
            return {"error": "the gate's evaluation process ended abruptly; retry"}
        return result


def _evaluate_release(where: str, options: FleetOptions) -> dict[str, Any]:
    """One release's decision, in an evaluation process."""
    return evaluate_json([where], options.policy, options.rollback or None,
                         list(options.baseline), all_open=True, workers=options.workers)


__all__ = ["FleetAnalysis", "FleetOptions", "location", "release_of"]
