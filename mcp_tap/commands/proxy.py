"""``mcp-tap proxy``: run the recording proxy."""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import sys
from collections.abc import Callable
from pathlib import Path

import structlog

from mcp_tap.core.redaction import strip_url_secrets
from mcp_tap.gate.evaluation import check_decision_files
from mcp_tap.logs import add_log_level_option, configure_logging
from mcp_tap.proxy.options import load_options
from mcp_tap.proxy.server import TapServer

NAME = "proxy"
HELP = "run the recording proxy in front of an MCP server or gateway"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the command's options."""
    parser.add_argument("--listen", help="HOST:PORT to listen on (loopback by default)")
    parser.add_argument("--upstream", help="base URL of the origin or gateway")
    parser.add_argument("--hop", help="name of the hop (default: tap)")
    parser.add_argument("--evidence", help="evidence directory (a bundle per run inside)")
    parser.add_argument("--admin", help="HOST:PORT of the admin listener ('' disables it)")
    parser.add_argument("--config", help="TOML configuration file (see config/tap.toml)")
    parser.add_argument("--ship", metavar="s3://BUCKET/PREFIX",
                        help="ship sealed evidence to this object-store prefix ([evidence] ship; "
                             "credentials from the AWS_* environment)")
    add_log_level_option(parser, "info", "log level")
    parser.add_argument(
        "--loop",
        choices=("auto", "uvloop", "asyncio"),
        default="auto",
        help="event loop: uvloop when installed (auto, the default), or asyncio's own",
    )
    parser.add_argument("--uvloop", action="store_true", help="the same as --loop uvloop")
    parser.add_argument("--json", action="store_true", help="logs are JSON already; accepted")


def _announce(server: TapServer) -> None:
    # For a person at a terminal only: a log collector gets the JSON ``proxy.started`` line,
    # which carries the same addresses.
    if not sys.stderr.isatty():
        return
    for hop, (host, port) in server.addresses.items():
        # An upstream URL's userinfo or query may be a credential: shown without them.
        upstream = strip_url_secrets(next(h.upstream for h in server.options.hops if h.name == hop))
        sys.stderr.write(f"mcp-tap: hop {hop} listening on http://{host}:{port} -> {upstream}\n")
    if server.admin_address:
        host, port = server.admin_address
        routes = "/healthz /readyz /metrics" + (" /gate" if server.options.gate.policy else "")
        sys.stderr.write(f"mcp-tap: admin on http://{host}:{port} ({routes})\n")
    sys.stderr.write(f"mcp-tap: evidence bundle {server.bundle_dir}\n")
    ev = server.options.evidence
    if ev.ship:
        sys.stderr.write(f"mcp-tap: shipping to {ev.ship.rstrip('/')}/{ev.release}/<pod>/\n")
    sys.stderr.flush()


def event_loop(choice: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The loop factory for ``--loop`` (None: asyncio's own). ``auto`` is uvloop when it is
    installed (a dependency; measured the same or better: docs/benchmark.md, issue 28);
    ``uvloop`` asked for but missing says so in the log and runs asyncio's loop."""
    if choice == "asyncio":
        return None
    try:
        # Imported by name: the tap runs (on asyncio's loop) where uvloop cannot be installed.
        factory: Callable[[], asyncio.AbstractEventLoop] = (
            importlib.import_module("uvloop").new_event_loop)
    except ImportError:
        if choice == "uvloop":
            structlog.get_logger("mcp_tap.proxy").warning(
                "proxy.uvloop_missing", detail="uvloop is not installed; using asyncio's loop"
            )
        return None
    return factory


def run(args: argparse.Namespace) -> int:
    """Run until SIGTERM/SIGINT; drain in-flight exchanges and flush evidence before exit."""
    options = load_options(
        args.config,
        listen=args.listen,
        upstream=args.upstream,
        hop=args.hop,
        evidence_dir=args.evidence,
        admin=args.admin,
        ship=args.ship,
    )
    if options.gate.policy:  # /gate on the admin listener: its files read before serving
        check_decision_files(Path(options.gate.policy),
                             Path(options.gate.rollback) if options.gate.rollback else None)
    configure_logging(args.log_level)
    server = TapServer(options, log_level=args.log_level)
    loop_factory = event_loop("uvloop" if args.uvloop else args.loop)
    # Start-up leaves ~75,000 long-lived objects (schema models, aiohttp); without this, every
    # full collection walks them all and stalls every stream in flight for tens of ms.
    gc.freeze()
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(server.run_until_signalled(_announce))
    return 0
