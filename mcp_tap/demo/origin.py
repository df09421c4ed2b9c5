"""The demo origin: a real MCP Python SDK (``mcp==2.3.0``) server over Streamable HTTP.

One endpoint, ``/mcp``, serves both protocol eras, which is how the SDK's
``StreamableHTTPSessionManager`` routes a request:

* a POST whose ``MCP-Protocol-Version`` header names a version outside the handshake
  set (``2026-07-28``, or any unknown value) goes to the stateless modern entry
  (per-request ``_meta``, ``server/discover``, no ``Mcp-Session-Id``);
* anything else (no header, or a 2024/2025 version) goes to the stateful legacy
  transport (``initialize`` handshake, ``Mcp-Session-Id``, GET stream, DELETE).

Tools: ``echo``, ``add``, ``lookup`` (its ``region`` argument carries
``x-mcp-header: Region``, so modern clients mirror it as ``Mcp-Param-Region``) and
``slow_count`` (emits progress and log notifications, so the answer becomes an SSE
stream when the caller opted in to either). Plus one prompt (``greet``), one static
resource (``demo://readme``), one resource template (``demo://regions/{region}``) and a
completion handler for the prompt's ``name`` and the template's ``region``.

Run it with ``python -m mcp_tap.demo.origin --listen 127.0.0.1:9000``; it prints
``origin listening on http://127.0.0.1:9000/mcp`` once it accepts connections and
exits with status 0 on SIGTERM or SIGINT.
"""

import argparse
import asyncio
import contextlib
import signal
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Annotated, Any

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types import Completion, PromptReference, ResourceTemplateReference
from pydantic import Field

__all__ = [
    "ENDPOINT_PATH",
    "REGIONS",
    "SERVER_NAME",
    "build_app",
    "build_server",
    "main",
    "serve",
    "serve_async",
]

SERVER_NAME = "mcp-tap-demo-origin"
"""The ``serverInfo.name`` the origin reports (``initialize`` result, modern ``_meta`` stamp)."""

SERVER_VERSION = "0.1.0"
"""The ``serverInfo.version`` the origin reports."""

ENDPOINT_PATH = "/mcp"
"""The one Streamable HTTP endpoint, for both eras."""

REGIONS: tuple[str, ...] = ("eu-west", "eu-north", "us-east", "us-west", "ap-south")
"""The regions ``lookup`` knows and the completion handler offers."""

SLOW_COUNT_STEP_SECONDS = 0.02
"""Pause between two notifications of ``slow_count``, so the stream is visibly incremental."""

_Region = Annotated[
    str,
    Field(
        description="Region to search; mirrored as the Mcp-Param-Region header.",
        json_schema_extra={"x-mcp-header": "Region"},
    ),
]


def echo(text: str) -> str:
    """Return ``text`` unchanged."""
    return text


def add(a: int, b: int) -> int:
    """Return the sum of two integers."""
    return a + b


def lookup(region: _Region, query: str) -> str:
    """Look ``query`` up in ``region`` (a fixed, deterministic answer)."""
    known = "known" if region in REGIONS else "unknown"
    return f"{query} in {region} ({known} region)"


async def slow_count(n: Annotated[int, Field(ge=0, le=1000)], ctx: Context) -> str:
    """Count to ``n``, sending one progress and one log notification per step.

    Progress reaches the client only when the request carries a ``progressToken``;
    on the modern wire a log message reaches it only when the request's ``_meta``
    opted in with ``io.modelcontextprotocol/logLevel``. Either makes the SDK commit
    the answer to ``text/event-stream``.
    """
    for i in range(1, n + 1):
        await ctx.report_progress(i, n, f"step {i} of {n}")
        await ctx.info(f"count {i}")
        await anyio.sleep(SLOW_COUNT_STEP_SECONDS)
    return f"counted to {n}"


def greet(name: str) -> str:
    """A one-message prompt greeting ``name``."""
    return f"Please greet {name} warmly."


def readme() -> str:
    """The static demo resource."""
    return "This is the mcp-tap demo origin, a real MCP Python SDK server."


def region_info(region: str) -> str:
    """The resource template ``demo://regions/{region}``."""
    return f"Region {region}: {'known' if region in REGIONS else 'unknown'}."


async def complete(ref: Any, argument: Any, context: Any) -> Any:
    """Complete the prompt's ``name`` and the template's ``region`` arguments."""
    value = str(getattr(argument, "value", ""))
    if isinstance(ref, ResourceTemplateReference) and argument.name == "region":
        values = [r for r in REGIONS if r.startswith(value)]
        return Completion(values=values, total=len(values), has_more=False)
    if isinstance(ref, PromptReference) and argument.name == "name":
        values = [
            n for n in ("Ada", "Alan", "Grace", "Linus") if n.lower().startswith(value.lower())
        ]
        return Completion(values=values, total=len(values), has_more=False)
    return None


def build_server() -> Any:
    """Build the SDK ``MCPServer`` with the demo tools, prompt, resources and completions."""
    server: Any = MCPServer(
        SERVER_NAME,
        version=SERVER_VERSION,
        instructions="Demo origin for mcp-tap tests.",
        log_level="WARNING",
    )
    server.add_tool(echo, description="Return the text unchanged.")
    server.add_tool(add, description="Add two integers.")
    server.add_tool(
        lookup, description="Look a query up in a region (region is sent as Mcp-Param-Region)."
    )
    server.add_tool(
        slow_count,
        description="Count to n, one progress and one log notification per step (SSE if opted in).",
    )
    server.prompt(description="Greet someone by name.")(greet)
    server.resource(
        "demo://readme",
        name="readme",
        description="A static text resource.",
        mime_type="text/plain",
    )(readme)
    server.resource(
        "demo://regions/{region}",
        name="region",
        description="One region's description.",
        mime_type="text/plain",
    )(region_info)
    server.completion()(complete)
    return server


def build_app(host: str = "127.0.0.1", *, json_response: bool = False) -> Any:
    """Return the ASGI (Starlette) app serving both eras on ``/mcp``.

    ``host`` is what the SDK uses to decide DNS-rebinding protection: for a loopback
    host it only accepts ``Host``/``Origin`` on loopback names (anything else gets 421/403).
    ``json_response=True`` makes every answer ``application/json`` (no SSE at all).
    The app's lifespan starts the SDK session manager, so serve it with lifespan on.

    ``slow_count`` logs through the SDK's ``Context.info``, which the SDK marks deprecated
    (``MCPDeprecationWarning``, SEP-2577): in a process that turns warnings into errors,
    filter that category. The command line (:func:`main`) ignores it.
    """
    server = build_server()
    return server.streamable_http_app(
        streamable_http_path=ENDPOINT_PATH,
        json_response=json_response,
        stateless_http=False,
        host=host,
    )


class _QuietServer(uvicorn.Server):
    """A uvicorn server whose signals are handled by :func:`serve_async`, not re-raised."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _endpoint(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{ENDPOINT_PATH}"


async def serve_async(
    host: str,
    port: int,
    *,
    json_response: bool = False,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve until SIGTERM/SIGINT or cancellation; call ``on_ready(url)`` once listening."""
    config = uvicorn.Config(
        build_app(host, json_response=json_response),
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=2,
    )
    server = _QuietServer(config)
    loop = asyncio.get_running_loop()

    def stop() -> None:
        if server.should_exit:
            server.force_exit = True
        server.should_exit = True

    installed: list[signal.Signals] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop)
            installed.append(sig)
    try:
        task = asyncio.create_task(server.serve())
        while not server.started and not task.done():
            await asyncio.sleep(0.01)
        if server.started and on_ready is not None:
            on_ready(_endpoint(host, port))
        await task
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


def serve(host: str, port: int, *, json_response: bool = False) -> None:
    """Serve the origin (blocking); print the ready line; return on SIGTERM/SIGINT."""

    def announce(url: str) -> None:
        print(f"origin listening on {url}", flush=True)

    asyncio.run(serve_async(host, port, json_response=json_response, on_ready=announce))


def _parse_listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    return host.strip("[]"), int(port)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point: ``python -m mcp_tap.demo.origin --listen HOST:PORT``."""
    parser = argparse.ArgumentParser(
        prog="python -m mcp_tap.demo.origin",
        description="Serve the real MCP Python SDK demo server (both eras) on /mcp.",
    )
    parser.add_argument(
        "--listen",
        type=_parse_listen,
        default=("127.0.0.1", 9000),
        metavar="HOST:PORT",
        help="address to listen on (default 127.0.0.1:9000)",
    )
    parser.add_argument(
        "--json-response",
        action="store_true",
        help="answer every request with application/json (never SSE)",
    )
    args = parser.parse_args(argv)
    host, port = args.listen
    # The demo keeps logging on purpose (it is how legacy clients see notifications);
    # the SDK's deprecation notice for it is noise on the origin's stderr.
    warnings.filterwarnings("ignore", category=MCPDeprecationWarning)
    try:
        serve(host, port, json_response=args.json_response)
    except OSError as exc:
        print(f"origin: cannot listen on {host}:{port}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
