"""Serving a variant of the demo origin (the real SDK server with tools changed) as a process:
``main`` of ``candidate_origin`` and ``tenant_origin``, started by ``peers.run_origin``."""

from __future__ import annotations

import argparse
import asyncio
import warnings
from collections.abc import Callable
from typing import Any

import uvicorn
from mcp.shared.exceptions import MCPDeprecationWarning

from mcp_tap.demo import origin


def serve_variant(build_server: Callable[[], Any]) -> int:
    """Serve the server ``build_server`` makes on ``--listen HOST:PORT`` (the demo origin's
    endpoint, SSE answers, sessions) until terminated."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--listen", required=True)
    args = parser.parse_args()
    host, _, port = args.listen.rpartition(":")
    warnings.filterwarnings("ignore", category=MCPDeprecationWarning)
    app = build_server().streamable_http_app(
        streamable_http_path=origin.ENDPOINT_PATH, json_response=False,
        stateless_http=False, host=host)
    config = uvicorn.Config(app, host=host, port=int(port), log_level="warning",
                            lifespan="on", timeout_graceful_shutdown=2)
    asyncio.run(uvicorn.Server(config).serve())
    return 0
