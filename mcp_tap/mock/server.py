"""``MockServer``: an aiohttp server that answers MCP requests from an :class:`AnswerBook`.

Both eras, as the capture's origin spoke them:

* modern (2026-07-28): every POST stands alone; the answer is the recorded one with the
  asker's id. GET and DELETE get 405 (a modern server offers neither);
* legacy (``initialize`` handshake): the recorded ``initialize`` answer comes with a fresh
  ``Mcp-Session-Id``; later requests must carry a session this server issued (else 404, as
  a legacy server answers an unknown session); DELETE ends the session; GET gets 405 (no
  standalone stream is offered, which a legacy server may do).

Notifications and client answers get 202 with no body. SSE answers are re-emitted event by
event, either at their recorded delay after the request arrived (``pacing="recorded"``,
each delay capped at ``max_delay``) or all at once (``pacing="none"``). A request nothing
recorded answers gets a JSON-RPC error naming what was asked (see
:meth:`AnswerBook.lookup`). Only the content type of a recorded answer is replayed: dates,
server names and session ids are the mock's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
from dataclasses import dataclass
from typing import Any, Final

import orjson
from aiohttp import web

from mcp_tap.core.eras import HEADER_PROTOCOL_VERSION, HEADER_SESSION_ID, infer_era
from mcp_tap.errors import InputError
from mcp_tap.mock.book import (
    AnswerBook,
    Miss,
    RecordedAnswer,
    error_body,
    for_request,
    json_bytes,
    miss_status,
    sse_bytes,
)

PACINGS: Final = ("recorded", "none")
_JSON: Final = "application/json"


@dataclass
class Counters:
    """What the mock has done so far."""

    answered: int = 0
    missed: int = 0
    notifications: int = 0
    sessions: int = 0
    # Refused before any look-up, each with its HTTP or JSON-RPC error: a path or method
    # not served, an unknown session, a body that is not JSON, a batch.
    refused: int = 0


def _parse(raw: bytes) -> Any:
    """The request body: orjson's parse, except that an id orjson read as a float is read
    again by the stdlib, which keeps an integer past 64 bits exact (an answer must carry
    the asker's id as sent). Raises ValueError for text that is not JSON."""
    message = orjson.loads(raw)
    if isinstance(message, dict) and type(message.get("id")) is float:
        # Nesting the stdlib cannot walk (RecursionError): orjson's parse stands.
        with contextlib.suppress(RecursionError):
            message = json.loads(raw)
    return message


def _json(status: int, body: Any, headers: dict[str, str]) -> web.Response:
    return web.Response(status=status, body=json_bytes(body), content_type=_JSON,
                        headers=headers)


class MockServer:
    """Serve an :class:`AnswerBook` on ``host:port`` until :meth:`stop`."""

    def __init__(self, book: AnswerBook, *, host: str = "127.0.0.1", port: int = 0,
                 pacing: str = "recorded", max_delay: float = 30.0) -> None:
        """Configure the server; nothing listens before :meth:`start`."""
        if pacing not in PACINGS:
            raise InputError(f"--pacing must be one of {', '.join(PACINGS)}, got {pacing!r}")
        self.book = book
        self.host, self.port = host, port
        self.pacing = pacing
        self.max_delay = max_delay
        self.sessions: set[str] = set()
        self.counters = Counters()
        self._runner: web.AppRunner | None = None
        self.address: tuple[str, int] | None = None

    def url(self, path: str | None = None) -> str:
        """The URL of the served endpoint (the capture's path, ``/mcp`` if it has none)."""
        if self.address is None:
            raise RuntimeError("the mock server is not started")
        host, port = self.address
        shown = f"[{host}]" if ":" in host else host
        chosen = path or (min(self.book.paths) if self.book.paths else "/mcp")
        return f"http://{shown}:{port}{chosen}"

    async def start(self) -> None:
        """Listen; raises :class:`InputError` if the address cannot be bound."""
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self.port)
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise InputError(f"cannot listen on {self.host}:{self.port}: "
                             f"{exc.strerror or exc}") from None
        self._runner = runner
        host, port = runner.addresses[0][:2]
        self.address = (str(host), int(port))

    async def stop(self) -> None:
        """Stop listening and close open streams."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def _refuse(self, response: web.Response) -> web.Response:
        self.counters.refused += 1
        return response

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if self.book.paths and request.path not in self.book.paths:
            return self._refuse(web.Response(
                status=404, text=f"mcp-tap serve: {request.path} was not recorded "
                f"(recorded: {', '.join(sorted(self.book.paths))})\n"))
        session = request.headers.get(HEADER_SESSION_ID)
        if request.method == "DELETE" and session in self.sessions:
            self.sessions.discard(session)
            return web.Response(status=200)
        if request.method != "POST":
            return self._refuse(web.Response(status=405, headers={"Allow": "POST"}))
        if session is not None and session not in self.sessions:
            return self._refuse(_json(404, {"jsonrpc": "2.0", "id": None, "error": {
                "code": -32600, "message": "mcp-tap serve: unknown or ended session"}}, {}))
        raw = await request.read()
        try:
            message = _parse(raw)
        except ValueError:  # orjson.JSONDecodeError, json.JSONDecodeError
            return self._refuse(_json(400, {"jsonrpc": "2.0", "id": None, "error": {
                "code": -32700, "message": "mcp-tap serve: the request body is not JSON"}}, {}))
        if not isinstance(message, dict):
            return self._refuse(_json(400, {"jsonrpc": "2.0", "id": None, "error": {
                "code": -32600, "message": "mcp-tap serve: only single JSON-RPC messages "
                "are served (no batches)"}}, {}))
        headers = {HEADER_SESSION_ID: session} if session else {}
        if "id" not in message or "method" not in message:
            self.counters.notifications += 1
            return web.Response(status=202, headers=headers)
        era = str(infer_era(message, request.headers.get(HEADER_PROTOCOL_VERSION),
                            legacy_session=session is not None))
        found = self.book.lookup(era, message)
        if isinstance(found, Miss):
            self.counters.missed += 1
            return _json(miss_status(era, found), error_body(message.get("id"), found), headers)
        self.counters.answered += 1
        if message.get("method") == "initialize" and era == "legacy":
            session = secrets.token_hex(16)
            self.sessions.add(session)
            self.counters.sessions += 1
            headers = {HEADER_SESSION_ID: session}
        return await self._answer(request, for_request(found, message), headers)

    async def _answer(self, request: web.Request, answer: RecordedAnswer,
                      headers: dict[str, str]) -> web.StreamResponse:
        if answer.events is None:
            if answer.body is None:
                return web.Response(status=answer.status, headers=headers)
            return web.Response(status=answer.status, body=json_bytes(answer.body),
                                content_type=answer.content_type.split(";")[0],
                                headers=headers)
        loop = asyncio.get_running_loop()
        start = loop.time()
        response = web.StreamResponse(status=answer.status, headers={
            **headers, "Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        for event in answer.events:
            if self.pacing == "recorded":
                wait = min(event.delay, self.max_delay) - (loop.time() - start)
                if wait > 0:
                    await asyncio.sleep(wait)
            await response.write(sse_bytes(event))
        await response.write_eof()
        return response
