"""An aiohttp application served on a free loopback port from a thread of its own, so that a
synchronous caller (a CLI run, httpx's sync client) can talk to it."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator

from aiohttp import web
from ports import free_port


@contextlib.contextmanager
def serve_in_thread(app: web.Application, name: str) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1 in a thread called ``name``; yield its base URL
    (``http://127.0.0.1:PORT``). The app is cleaned up and the thread joined on exit."""
    runner = web.AppRunner(app, access_log=None)
    port = free_port()
    loop = asyncio.new_event_loop()
    ready = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(runner.setup())
        loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, name=name, daemon=True)
    thread.start()
    try:
        assert ready.wait(15), f"{name}: the server did not start"
        yield f"http://127.0.0.1:{port}"
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(15)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(15)
        loop.close()
