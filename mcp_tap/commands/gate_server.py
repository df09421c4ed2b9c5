"""``mcp-tap gate-server --evidence ROOT --policy FILE``: one gate decision for a fleet.

Serves ``GET /gate`` and ``POST /gate/flagger`` (as a tap's admin listener does, over every
bundle under ``ROOT/RELEASE``; see :mod:`mcp_tap.proxy.fleet`), ``/healthz`` and
``/readyz`` (the evidence root is readable), for Argo Rollouts and Flagger to ask as their
own Deployment. Runs until SIGTERM or SIGINT (exit 0); bad input is one line and exit 2.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path

import orjson
from aiohttp import web

from mcp_tap.cli import EXIT_OK
from mcp_tap.commands.gate import add_decision_arguments
from mcp_tap.errors import InputError
from mcp_tap.evidence.store import is_store_url
from mcp_tap.evidence.storepath import store_problem
from mcp_tap.gate.evaluation import check_decision_files
from mcp_tap.proxy.admin import MAX_GATE_WAITERS, add_gate_routes, guarded_app
from mcp_tap.proxy.fleet import FleetAnalysis, FleetOptions
from mcp_tap.proxy.options import parse_listen

NAME = "gate-server"
HELP = "serve one gate decision for a fleet's evidence (/gate, /gate/flagger)"


def _count(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if not 1 <= number <= 64:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number from 1 to 64")
    return number


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``gate-server`` arguments to ``parser``."""
    parser.add_argument("--listen", default="127.0.0.1:9466",
                        help="HOST:PORT to listen on (default: 127.0.0.1:9466)")
    parser.add_argument("--evidence", required=True, metavar="ROOT",
                        help="the evidence root: a release's bundles are under ROOT/RELEASE")
    parser.add_argument("--release", default="",
                        help="the release judged when a request names none (default: ROOT)")
    add_decision_arguments(parser)
    parser.add_argument("--max-evaluations", type=_count, default=1, metavar="N",
                        help="evaluations at once, each its own process (default: 1)")
    parser.add_argument("--workers", type=_count, default=1, metavar="N",
                        help="processes one evaluation reads bundles with (default: 1)")
    parser.add_argument("--max-waiters", type=_count, default=MAX_GATE_WAITERS, metavar="N",
                        help=f"requests waiting for a decision at once (default: "
                        f"{MAX_GATE_WAITERS}); more get 503")
    parser.add_argument("--token-env", default="", metavar="VAR",
                        help="environment variable holding a bearer token every route but "
                        "the probes requires")
    parser.add_argument("--json", action="store_true", help="print the ready line as JSON")


def build_app(options: FleetOptions, *, token: str | None = None,
              max_waiters: int = MAX_GATE_WAITERS) -> web.Application:
    """The gate service's application."""
    root = options.root

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(_: web.Request) -> web.Response:
        if is_store_url(root):  # the store answers (off the loop: a request may hang)
            problem = await asyncio.to_thread(store_problem, root)
            problems = [problem] if problem else []
        else:
            problems = [] if Path(root).is_dir() else [
                f"evidence root {root} is not a readable directory"]
        return web.json_response({"ready": not problems, "problems": problems},
                                 status=200 if not problems else 503)

    app = guarded_app(token=token)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    add_gate_routes(app, FleetAnalysis(options), max_waiters)
    return app


async def _serve(app: web.Application, host: str, port: int, as_json: bool) -> None:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise InputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
    url = f"http://{host}:{port}/gate"
    sys.stdout.write(orjson.dumps({"event": "ready", "url": url}).decode() + "\n" if as_json
                     else f"gate service on {url}\n")
    sys.stdout.flush()
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def run(args: argparse.Namespace) -> int:
    """Serve until signalled; return the exit code."""
    host, port = parse_listen(args.listen, "--listen")
    token = None
    if args.token_env:
        token = os.environ.get(args.token_env, "").strip()
        if not token:
            raise InputError(f"--token-env names {args.token_env}, which is not set")
    check_decision_files(args.policy, args.rollback)
    options = FleetOptions(root=args.evidence, policy=str(args.policy),
                           rollback=str(args.rollback) if args.rollback else "",
                           release=args.release, baseline=tuple(str(b) for b in args.baseline),
                           max_evaluations=args.max_evaluations, workers=args.workers)
    asyncio.run(_serve(build_app(options, token=token, max_waiters=args.max_waiters),
                       host, port, args.json))
    return EXIT_OK
