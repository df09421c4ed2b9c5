"""Canary analysis on the admin listener: the gate's decision for Argo Rollouts and Flagger.

``GET /gate`` evaluates the evidence this tap is writing right now (plus the bundles, the
baseline, the policy and the rollback evidence of :class:`~mcp_tap.proxy.options.GateOptions`)
(the first as an open bundle: judged on what is complete so far, so neither its missing
closing summary nor the line the writer is in the middle of is a reason to roll back) and
answers the :class:`~mcp_tap.gate.decision.Decision` as JSON, always with status 200
when a decision was reached, so an Argo Rollouts ``web`` metric can say::

    successCondition: result.action == "promote"
    failureCondition: result.action == "rollback"

and a ``hold`` meets neither: the measurement is inconclusive. ``POST /gate/flagger``
answers Flagger's webhook contract: 200 lets the canary proceed, anything else halts it
(412 rollback, 503 hold), with the action and reasons in the body.

An evaluation reads every bundle and runs the SDK differential: seconds of CPU on a large
window. It runs in a separate process (spawned once, then reused), never on the event loop
that forwards traffic; requests that arrive while one runs share its result.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from pathlib import Path
from typing import Any

from aiohttp import web

from mcp_tap.errors import TapError
from mcp_tap.proxy.options import GateOptions

Handler = Callable[[web.Request], Awaitable[web.Response]]
"""A route handler of the admin application."""

# Flagger: 2xx proceeds; any other status halts the canary (and counts as a failed check).
FLAGGER_STATUS = {"promote": 200, "rollback": 412, "hold": 503}


def evaluate_json(
    evidence: list[str], policy: str, rollback: str | None, baseline: list[str],
    open_bundles: Sequence[str] = (), *, all_open: bool = False, workers: int = 1,
) -> dict[str, Any]:
    """Evaluate the gate in this (worker) process and return the decision's JSON;
    ``open_bundles`` are still being written (the tap's own bundle: judged on what is
    complete so far, see :class:`~mcp_tap.gate.evaluation.GateRequest`).

    Bad input (a malformed policy, unreadable rollback evidence) comes back as
    ``{"error": message}``: one line, never a traceback. ``all_open``: every bundle is
    judged as still being written while it has no closing summary (a fleet's pods, for the
    gate service); ``workers``: processes that read bundles in parallel.
    """
    from mcp_tap.gate.evaluation import evaluate, load_request

    try:
        request = load_request(
            list(evidence), Path(policy), Path(rollback) if rollback else None,
            baseline=list(baseline), open_bundles=open_bundles)
        if all_open:
            request = replace(request, open_bundles=request.evidence + request.baseline)
        decision = evaluate(request, workers=workers)
    except TapError as exc:
        return {"error": str(exc)}
    result: dict[str, Any] = decision.to_json()
    if decision.reading is not None:  # how the evidence was read (outside the digest)
        result["reading"] = decision.reading.to_json()
    return result


class CanaryAnalysis:
    """The ``/gate`` routes of one tap: what they judge, and the process that judges it."""

    def __init__(self, options: GateOptions, bundle_dir: Path) -> None:
        """Judge ``bundle_dir`` (this run's bundle) with ``options``."""
        self.options = options
        self.bundle_dir = bundle_dir
        self._pool: ProcessPoolExecutor | None = None
        self._running: asyncio.Future[dict[str, Any]] | None = None

    def add_routes(self, app: web.Application, admit: Callable[[Handler], Handler] | None = None
                   ) -> None:
        """Add ``GET /gate`` and ``POST /gate/flagger`` to the admin application, each
        wrapped by ``admit`` when given (the admin listener's bound on waiting requests)."""
        wrap = admit or (lambda handler: handler)
        app.router.add_get("/gate", wrap(self.gate))
        app.router.add_post("/gate/flagger", wrap(self.flagger))
        app.on_cleanup.append(self._close)

    async def decision(self) -> dict[str, Any]:
        """Evaluate now (or join the evaluation already running) and return its JSON."""
        if self._running is not None and not self._running.done():
            return await asyncio.shield(self._running)
        if self._pool is None:
            # Spawned, not forked: the tap runs threads (the evidence writer), and a fork
            # could copy a lock one of them holds.
            self._pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        opts = self.options
        loop = asyncio.get_running_loop()
        self._running = asyncio.ensure_future(self._evaluate(loop.run_in_executor(
            self._pool, evaluate_json, [str(self.bundle_dir), *opts.evidence], opts.policy,
            opts.rollback or None, list(opts.baseline), [str(self.bundle_dir)])))
        return await asyncio.shield(self._running)

    async def _evaluate(self, running: Awaitable[dict[str, Any]]) -> dict[str, Any]:
        try:
            return await running
        except BrokenProcessPool:
            # The evaluating process died (killed, out of memory): say so, start a new one
            # next time; forwarding is not affected.
            self._pool = None
            return {"error": "the gate's evaluation process ended abruptly; retry"}

    async def decision_for(self, _request: web.Request) -> dict[str, Any]:
        """The decision a request asks for: this tap's (the gate service's depends on the
        request, :class:`mcp_tap.proxy.fleet.FleetAnalysis`)."""
        return await self.decision()

    async def gate(self, request: web.Request) -> web.Response:
        """``GET /gate``: the decision JSON (200), or 503 with the error when there is none."""
        result = await self.decision_for(request)
        return web.json_response(result, status=503 if "error" in result else 200)

    async def flagger(self, request: web.Request) -> web.Response:
        """``POST /gate/flagger``: 200 promote, 412 rollback, 503 hold or no decision."""
        # Flagger posts {name, namespace, phase, metadata}; the decision does not depend on it,
        # but a body that is not JSON is still read (and ignored) so the connection is clean.
        await request.read()
        result = await self.decision_for(request)
        if "error" in result:
            return web.json_response({"action": None, "reason": result["error"]}, status=503)
        action = str(result["action"])
        reasons = [r["message"] for r in result.get("reasons", [])]
        body = {
            "action": action,
            "reason": "; ".join(reasons) if reasons else "every source passed",
            "reasons": result.get("reasons", []),
            "evidenceDigest": result.get("evidenceDigest"),
        }
        return web.json_response(body, status=FLAGGER_STATUS.get(action, 503))

    async def _close(self, _: web.Application) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
