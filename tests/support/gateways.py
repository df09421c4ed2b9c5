"""A small, real aiohttp gateway to place between two tap hops, with switchable faults.

Not a conftest: import it (``from gateways import Gateway``). It behaves like an ordinary
reverse proxy: every end-to-end request header goes upstream in order (``traceparent``
included), hop-by-hop headers are dropped, ``Host`` is set for the upstream, a ``Via`` is
added, and the answer streams back chunk by chunk. Set :attr:`Gateway.fault` to make it
misbehave the way real gateways do:

``"none"``
    a clean pass-through.
``"collapse-errors"``
    an upstream 4xx becomes ``500 Internal Server Error`` with a generic text body.
``"rewrite-name"``
    the ``Mcp-Name`` request header is replaced by :attr:`Gateway.rewrite_name_to` (the body
    is left alone, as a gateway that "routes" by header would do).
``"drop-name"``
    the ``Mcp-Name`` request header is removed.
``"buffer-sse"``
    a ``text/event-stream`` answer is read to its end and released in one write.
``"drop-traceparent"``
    ``traceparent`` and ``tracestate`` are not propagated.
``"rewrite-body"``
    a JSON request body's ``params.arguments.text`` becomes :attr:`Gateway.rewrite_text_to`
    (the headers are left alone).

The upstream can be set after start (:attr:`Gateway.upstream`), which lets a test start
the gateway first, give its URL to one tap hop, and point it at another hop once the tap
listens.
"""

from __future__ import annotations

import json
from typing import Literal

import aiohttp
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

__all__ = ["Fault", "Gateway"]

Fault = Literal[
    "none", "collapse-errors", "rewrite-name", "drop-name", "buffer-sse", "drop-traceparent",
    "rewrite-body",
]

# RFC 9110 7.6.1 hop-by-hop fields, Transfer-Encoding included: this gateway re-frames the
# bodies it forwards (aiohttp writes its own framing), unlike the tap, which splices them.
_HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
    "trailers", "transfer-encoding", "upgrade", "proxy-connection",
})
GENERIC_500 = b"Internal Server Error"
"""The body a collapsing gateway answers with."""


def _end_to_end(pairs: list[tuple[str, str]], *also_drop: str) -> list[tuple[str, str]]:
    named = {
        token.strip().lower()
        for name, value in pairs
        if name.lower() == "connection"
        for token in value.split(",")
    }
    drop = _HOP_BY_HOP | named | {n.lower() for n in also_drop}
    return [(k, v) for k, v in pairs if k.lower() not in drop]


def _pairs(raw: tuple[tuple[bytes, bytes], ...]) -> list[tuple[str, str]]:
    return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in raw]


class Gateway:
    """A reverse proxy on ``127.0.0.1`` forwarding to :attr:`upstream` (a base URL)."""

    def __init__(
        self, upstream: str = "", *, fault: Fault = "none", rewrite_name_to: str = "add"
    ) -> None:
        self.upstream = upstream.rstrip("/")
        self.fault: Fault = fault
        self.rewrite_name_to = rewrite_name_to
        self.rewrite_text_to = "rewritten"
        self.forwarded: list[list[tuple[str, str]]] = []
        """The request headers of every request sent upstream, in order."""
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._port = 0

    @property
    def url(self) -> str:
        """The gateway's base URL (``http://127.0.0.1:PORT``), valid after :meth:`start`."""
        if not self._port:
            raise RuntimeError("the gateway is not started")
        return f"http://127.0.0.1:{self._port}"

    async def start(self, port: int = 0) -> str:
        """Listen on ``127.0.0.1:port`` (0: any free port); return :attr:`url`."""
        self._session = aiohttp.ClientSession(
            auto_decompress=False,
            cookie_jar=aiohttp.DummyCookieJar(),
            skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
        )
        app = web.Application(client_max_size=0)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", port).start()
        self._port = self._runner.addresses[0][1]
        return self.url

    async def stop(self) -> None:
        """Stop listening and close the upstream session."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> Gateway:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- forwarding ------------------------------------------------------------------------

    def _request_headers(self, request: web.Request) -> list[tuple[str, str]]:
        headers = _end_to_end(_pairs(request.raw_headers), "host", "content-length")
        if self.fault == "drop-traceparent":
            headers = [(k, v) for k, v in headers if k.lower() not in ("traceparent", "tracestate")]
        if self.fault == "rewrite-name":
            headers = [
                (k, self.rewrite_name_to if k.lower() == "mcp-name" else v) for k, v in headers
            ]
        if self.fault == "drop-name":
            headers = [(k, v) for k, v in headers if k.lower() != "mcp-name"]
        headers.append(("Via", "1.1 test-gateway"))
        return headers

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if self._session is None or not self.upstream:
            return web.Response(status=503, text="gateway has no upstream")
        headers = self._request_headers(request)
        self.forwarded.append(headers)
        body = await request.read() if request.body_exists else None
        if self.fault == "rewrite-body" and body:
            body = self._rewritten(body)
        url = URL(self.upstream + request.raw_path, encoded=True)
        try:
            async with self._session.request(
                request.method, url, headers=headers, data=body, allow_redirects=False
            ) as upstream:
                return await self._answer(request, upstream)
        except aiohttp.ClientError:
            return web.Response(status=502, text="Bad Gateway")

    def _rewritten(self, body: bytes) -> bytes:
        message = json.loads(body)
        arguments = message.get("params", {}).get("arguments")
        if isinstance(arguments, dict) and "text" in arguments:
            arguments["text"] = self.rewrite_text_to
        return json.dumps(message).encode()

    async def _answer(
        self, request: web.Request, upstream: aiohttp.ClientResponse
    ) -> web.StreamResponse:
        pairs = _end_to_end(_pairs(upstream.raw_headers), "content-length")
        content_type = upstream.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if self.fault == "collapse-errors" and 400 <= upstream.status < 500:
            await upstream.read()
            return web.Response(status=500, body=GENERIC_500, content_type="text/plain")
        if self.fault == "buffer-sse" and content_type == "text/event-stream":
            held = await upstream.read()  # the whole stream, then all of it at once
            return web.Response(
                status=upstream.status,
                reason=upstream.reason,
                body=held,
                headers=CIMultiDict(pairs),
            )
        stream = web.StreamResponse(status=upstream.status, reason=upstream.reason)
        for name, value in pairs:
            stream.headers.add(name, value)
        await stream.prepare(request)
        async for chunk in upstream.content.iter_any():
            await stream.write(chunk)
        await stream.write_eof()
        return stream
