"""A bare aiohttp streaming forwarder: the floor any aiohttp-based proxy stands on.

No recording, no checks, no digests: request and response bodies are streamed chunk by
chunk, hop-by-hop headers dropped. The benchmark runs it beside mcp-tap so "what aiohttp
itself costs" and "what mcp-tap adds on top" can be told apart on the same machine, in the
same run (the issue's reference point: a bare aiohttp forwarder reached 0.28x of direct).

Run: ``python bench/bare.py --port 9003 --upstream http://127.0.0.1:9001``.
"""

from __future__ import annotations

import argparse

import aiohttp
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
    }
)


def make_app(upstream: str) -> web.Application:
    """The forwarding application."""
    state: dict[str, aiohttp.ClientSession] = {}

    async def start(_app: web.Application) -> None:
        state["session"] = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=100),
            auto_decompress=False,
            skip_auto_headers=("User-Agent",),
        )

    async def stop(_app: web.Application) -> None:
        await state["session"].close()

    async def body(request: web.Request):  # type: ignore[no-untyped-def]
        async for chunk in request.content.iter_any():
            yield chunk

    async def handle(request: web.Request) -> web.StreamResponse:
        headers = CIMultiDict((k, v) for k, v in request.headers.items() if k.lower() not in _HOP)
        async with state["session"].request(
            request.method,
            URL(upstream + request.raw_path, encoded=True),
            headers=headers,
            data=body(request) if request.body_exists else None,
            allow_redirects=False,
            skip_auto_headers=("Accept", "Accept-Encoding", "Content-Type"),
        ) as up:
            response = web.StreamResponse(status=up.status, reason=up.reason)
            for k, v in up.headers.items():
                if k.lower() not in _HOP:
                    response.headers.add(k, v)
            try:
                await response.prepare(request)
                async for chunk in up.content.iter_any():
                    await response.write(chunk)
                await response.write_eof()
            except (ConnectionResetError, aiohttp.ClientConnectionError):
                pass  # the client left (wrk stops mid-request at the end of a run)
            return response

    app = web.Application(client_max_size=0)
    app.router.add_route("*", "/{tail:.*}", handle)
    app.on_startup.append(start)
    app.on_cleanup.append(stop)
    return app


def main() -> None:
    """Serve until killed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9003)
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--uvloop", action="store_true", help="use uvloop when installed")
    args = parser.parse_args()
    if args.uvloop:
        try:
            import uvloop  # type: ignore[import-not-found]

            uvloop.install()
        except ImportError:
            pass
    web.run_app(
        make_app(args.upstream.rstrip("/")),
        host=args.host,
        port=args.port,
        access_log=None,
        print=None,
    )


if __name__ == "__main__":
    main()
