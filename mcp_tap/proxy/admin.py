"""The admin listener: ``/healthz`` (alive), ``/readyz`` (upstreams reachable, evidence
writable), ``/metrics`` (Prometheus text), and with a gate policy ``/gate`` and
``/gate/flagger`` (canary analysis, :mod:`mcp_tap.proxy.canary`). Loopback by default."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from aiohttp import web

from mcp_tap.proxy.metrics import CONTENT_TYPE, Metrics

if TYPE_CHECKING:
    from mcp_tap.proxy.canary import CanaryAnalysis

ReadinessCheck = Callable[[], Awaitable[list[str]]]


def admin_app(
    metrics: Metrics, readiness: ReadinessCheck, canary: CanaryAnalysis | None = None
) -> web.Application:
    """Build the admin application (with the canary analysis routes when given)."""

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(_: web.Request) -> web.Response:
        try:
            problems = await asyncio.wait_for(readiness(), timeout=5)
        except TimeoutError:
            problems = ["readiness check timed out"]
        status = 200 if not problems else 503
        return web.json_response({"ready": not problems, "problems": problems}, status=status)

    async def prometheus(_: web.Request) -> web.Response:
        return web.Response(
            body=metrics.render().encode(),
            headers={"Content-Type": CONTENT_TYPE, "X-Content-Type-Options": "nosniff"},
        )

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", prometheus)
    if canary is not None:
        canary.add_routes(app)
    return app
