"""Shared fixtures: one real SDK origin per session, and in-process aiohttp origins.

Keep this small and generic; scenario helpers belong in the test modules (or in
``peers.py`` / ``taps.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest
from aiohttp import web
from peers import run_origin

from mcp_tap.commands.proxy import event_loop


def pytest_asyncio_loop_factories(config: pytest.Config, item: pytest.Item) -> dict[str, object]:
    """Every async test runs on the tap's own event loop (``mcp-tap proxy``'s default:
    uvloop when installed), so the forwarding core is tested on the transports it runs on."""
    return {"tap_loop": event_loop("auto") or asyncio.new_event_loop}


@pytest.fixture(scope="session")
def origin_url() -> Iterator[str]:
    """The demo origin (the real ``mcp==2.3.0`` server) for the whole session: its ``/mcp`` URL."""
    with run_origin() as url:
        yield url


@pytest.fixture(scope="session")
def origin_base(origin_url: str) -> str:
    """The demo origin's base URL (what a tap hop takes as its upstream)."""
    return origin_url.removesuffix("/mcp")


StartApp = Callable[[web.Application], Awaitable[str]]


@pytest.fixture
async def serve_app() -> AsyncIterator[StartApp]:
    """Start aiohttp applications on free loopback ports: ``base_url = await serve_app(app)``.

    Handlers are cancelled when their client goes away (``handler_cancellation=True``), so an
    origin can observe a disconnect. Every runner is cleaned up after the test.
    """
    runners: list[web.AppRunner] = []

    async def start(app: web.Application) -> str:
        runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
        await runner.setup()
        runners.append(runner)
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        return f"http://{host}:{port}"

    try:
        yield start
    finally:
        for runner in reversed(runners):
            await runner.cleanup()
