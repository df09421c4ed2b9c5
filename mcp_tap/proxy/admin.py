"""The admin listener: ``/healthz`` (alive), ``/readyz`` (upstreams reachable, evidence
writable), ``/metrics`` (Prometheus text), and with a gate policy ``/gate`` and
``/gate/flagger`` (canary analysis, :mod:`mcp_tap.proxy.canary`). Loopback by default.

It shares the proxy's event loop, so it must stay cheap whatever it is asked: a request
body past :data:`MAX_BODY_BYTES` is refused (413) before it is read, requests waiting for a
gate decision are bounded (:data:`MAX_GATE_WAITERS`; more get 503 with ``Retry-After``,
and every waiter shares the one evaluation, which runs in its own process), ``/metrics``
renders at most every :data:`RENDER_INTERVAL_S`, requests past :data:`RATE_PER_S` wait and
get 429 (the probes are never limited), and a method
or path it does not serve gets 405 (with ``Allow``) or 404. Off loopback, protect it with
``[admin] token_env`` (a bearer token read from that environment variable: every route
but ``/healthz`` and ``/readyz``, which probes call, then needs ``Authorization: Bearer``)
or a NetworkPolicy (``examples/k8s/networkpolicy.yaml``).
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

from aiohttp import web

from mcp_tap.proxy.metrics import CONTENT_TYPE, Metrics

if TYPE_CHECKING:
    from mcp_tap.proxy.canary import CanaryAnalysis

ReadinessCheck = Callable[[], Awaitable[list[str]]]
Handler = Callable[[web.Request], Awaitable[web.Response]]

MAX_BODY_BYTES: Final = 64 * 1024
"""The largest request body the admin listener reads (Flagger's webhook posts well under
1 KiB); a larger one is 413 and is not read."""
MAX_GATE_WAITERS: Final = 64
"""Requests that may wait for a gate decision at once; more are answered 503 at once."""
RATE_PER_S: Final = 20.0
"""Requests per second (a burst of as many) the admin listener answers on every route but
the probes; past it a request waits :data:`SLOW_DOWN_S` and gets 429 with Retry-After, so a
client asking in a loop costs the forwarding loop a few requests a second, not thousands.
Scrapers and rollout controllers ask every few seconds."""
SLOW_DOWN_S: Final = 1.0
MAX_SLOWED: Final = 256  # requests held in that wait at once; more get 429 at once
RENDER_INTERVAL_S: Final = 0.1
"""``/metrics`` renders at most this often: a scrape within it of the previous rendering
gets that rendering (Prometheus scrapes every few seconds; a client asking in a loop would
otherwise spend the forwarding loop's time rendering; measured in bench/admin_hammer.py)."""
_OPEN_PATHS: Final = frozenset({"/healthz", "/readyz"})  # probes: never behind the token


def _bounded(handler: Handler, slots: asyncio.Semaphore) -> Handler:
    """``handler`` admitted only while a slot is free (503 with Retry-After otherwise)."""

    async def bounded(request: web.Request) -> web.Response:
        if slots.locked():
            return web.json_response(
                {"error": "too many gate requests waiting; retry"}, status=503,
                headers={"Retry-After": "1"})
        async with slots:
            return await handler(request)

    return bounded


class _Pace:
    """A token bucket over the admin routes but the probes (see :data:`RATE_PER_S`)."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.tokens = rate
        self.at = 0.0
        self.slowed = 0

    def take(self, now: float) -> bool:
        self.tokens = min(self.rate, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens < 1.0:
            return False
        self.tokens -= 1.0
        return True


def _pace_middleware(rate: float) -> Callable[..., Awaitable[web.StreamResponse]]:
    pace = _Pace(rate)

    @web.middleware
    async def paced(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in _OPEN_PATHS or pace.take(asyncio.get_running_loop().time()):
            return await handler(request)
        if pace.slowed < MAX_SLOWED:  # the wait costs no CPU, and slows a loop of requests
            pace.slowed += 1
            try:
                await asyncio.sleep(SLOW_DOWN_S)
            finally:
                pace.slowed -= 1
        return web.json_response({"error": "too many admin requests; retry"}, status=429,
                                 headers={"Retry-After": "1"})

    return paced


def _token_middleware(token: str) -> Callable[..., Awaitable[web.StreamResponse]]:
    expected = f"Bearer {token}".encode()

    @web.middleware
    async def require_token(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path not in _OPEN_PATHS:
            given = request.headers.get("Authorization", "").encode()
            if not hmac.compare_digest(given, expected):
                return web.json_response({"error": "a bearer token is required"}, status=401,
                                         headers={"WWW-Authenticate": "Bearer"})
        return await handler(request)

    return require_token


def admin_app(
    metrics: Metrics, readiness: ReadinessCheck, canary: CanaryAnalysis | None = None,
    *, token: str | None = None, max_gate_waiters: int = MAX_GATE_WAITERS,
    rate: float = RATE_PER_S, details: Callable[[], dict[str, Any]] | None = None,
) -> web.Application:
    """Build the admin application (with the canary analysis routes when given); with
    ``token``, every route but the probes needs ``Authorization: Bearer <token>``.
    ``details``: more members for ``/readyz``'s answer that do not decide readiness (what
    shipping to the object store owes)."""

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(_: web.Request) -> web.Response:
        try:
            problems = await asyncio.wait_for(readiness(), timeout=5)
        except TimeoutError:
            problems = ["readiness check timed out"]
        status = 200 if not problems else 503
        more = details() if details is not None else {}
        return web.json_response({"ready": not problems, "problems": problems, **more},
                                 status=status)

    rendered: list[tuple[float, bytes]] = [(-RENDER_INTERVAL_S, b"")]  # (when, text)

    async def prometheus(_: web.Request) -> web.Response:
        now = asyncio.get_running_loop().time()
        at, body = rendered[0]
        if now - at >= RENDER_INTERVAL_S:
            body = metrics.render().encode()
            rendered[0] = (now, body)
        return web.Response(
            body=body,
            headers={"Content-Type": CONTENT_TYPE, "X-Content-Type-Options": "nosniff"},
        )

    app = guarded_app(token=token, rate=rate)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", prometheus)
    if canary is not None:
        add_gate_routes(app, canary, max_gate_waiters)
    return app


def guarded_app(*, token: str | None = None, rate: float = RATE_PER_S) -> web.Application:
    """An application with the admin listener's guards and no routes: the bearer token
    (when given; the probes exempt), the pace, and the body limit. Also the gate service's
    (:mod:`mcp_tap.proxy.fleet`)."""
    # The token first: a request without it is refused before it spends the rate.
    middlewares = [*([_token_middleware(token)] if token else []), _pace_middleware(rate)]
    # aiohttp answers 413 for a body past client_max_size, 405 with Allow for a method a
    # route does not serve, 404 for a path none does.
    return web.Application(client_max_size=MAX_BODY_BYTES, middlewares=middlewares)


def add_gate_routes(app: web.Application, canary: CanaryAnalysis,
                    max_gate_waiters: int = MAX_GATE_WAITERS) -> None:
    """Add ``/gate`` and ``/gate/flagger``, with at most ``max_gate_waiters`` requests
    waiting for a decision at once."""
    slots = asyncio.Semaphore(max_gate_waiters)
    canary.add_routes(app, lambda handler: _bounded(handler, slots))
