"""``mcp-tap serve EVIDENCE... --listen ADDR``: answer MCP clients from a capture.

A mock MCP server for client teams: each request is matched on its method, target name
and params (``_meta`` left out) and answered with the recorded origin answer, in both eras
(see :mod:`mcp_tap.mock`). ``--pacing recorded`` re-emits SSE events at their recorded
delays, ``--pacing none`` at once. Runs until SIGTERM or SIGINT (exit 0); bad input is one
line and exit 2.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Iterator
from typing import Any

import orjson

from mcp_tap.cli import EXIT_OK
from mcp_tap.drift.answers import choose_hop
from mcp_tap.errors import InputError
from mcp_tap.evidence import find_bundles, iter_records
from mcp_tap.mock import PACINGS, AnswerBook, MockServer
from mcp_tap.proxy.options import parse_listen

NAME = "serve"
HELP = "serve a capture as a mock MCP server (both eras, SSE re-emitted)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``serve`` arguments to ``parser``."""
    parser.add_argument("evidence", nargs="+", metavar="EVIDENCE",
                        help="evidence bundle directories (or directories of bundles)")
    parser.add_argument("--listen", default="127.0.0.1:9100", metavar="HOST:PORT",
                        help="address to listen on (default 127.0.0.1:9100; port 0 picks one)")
    parser.add_argument("--pacing", default="recorded", choices=PACINGS,
                        help="SSE events at their recorded delays (default) or at once")
    parser.add_argument("--hop", metavar="NAME",
                        help="answer from the exchanges recorded at this hop (needed when "
                        "the capture holds several)")
    parser.add_argument("--json", action="store_true",
                        help="print the ready line and the final counts as JSON")


def load_book(paths: list[str], hop: str | None) -> AnswerBook:
    """The answer book of every bundle ``paths`` name; InputError if it answers nothing.

    Two streaming passes (the hops recorded, then the answers), so only the book is held.
    """
    bundles = [found for path in paths for found in find_bundles(path)]

    def records() -> Iterator[dict[str, Any]]:
        for found in bundles:
            yield from iter_records(found)

    hops = {r["hop"] for r in records()
            if r.get("kind") == "exchange" and isinstance(r.get("hop"), str)}
    book = AnswerBook.from_records(records(), choose_hop(hops, hop, "evidence"))
    if not len(book):
        raise InputError("the evidence holds no request with a whole recorded answer to serve")
    return book


async def _serve(server: MockServer, as_json: bool) -> None:
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
    ready = {"url": server.url(), "answers": len(server.book), "pacing": server.pacing}
    if as_json:
        sys.stdout.write(orjson.dumps({"event": "ready", **ready}).decode() + "\n")
    else:
        sys.stdout.write(f"serving {ready['answers']} recorded answers on {ready['url']} "
                         f"(pacing {server.pacing})\n")
    sys.stdout.flush()
    try:
        await stop.wait()
    finally:
        await server.stop()
    counts = vars(server.counters)
    if as_json:
        sys.stdout.write(orjson.dumps({"event": "stopped", **counts}).decode() + "\n")
    else:
        sys.stdout.write("stopped: " + ", ".join(f"{k} {v}" for k, v in counts.items()) + "\n")


def run(args: argparse.Namespace) -> int:
    """Serve the capture until signalled; return the exit code."""
    host, port = parse_listen(args.listen, "--listen")
    book = load_book(args.evidence, args.hop)
    asyncio.run(_serve(MockServer(book, host=host, port=port, pacing=args.pacing),
                       args.json))
    return EXIT_OK
