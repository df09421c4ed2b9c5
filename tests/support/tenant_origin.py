"""The demo origin plus a tool whose secret argument is mirrored under another name.

Run as ``python -m tenant_origin --listen 127.0.0.1:PORT`` with ``tests`` on the path
(``run_origin(module="tenant_origin")`` in ``peers.py``). ``deploy``'s ``tenant_key``
declares ``x-mcp-header: Tenant``, so a modern SDK client sends it as ``Mcp-Param-Tenant``:
a header name that is neither the argument's nor secret-sounding.
"""

from __future__ import annotations

import argparse
import asyncio
import warnings
from typing import Annotated, Any

import uvicorn
from mcp.shared.exceptions import MCPDeprecationWarning
from pydantic import Field

from mcp_tap.demo import origin

_TenantKey = Annotated[str, Field(description="The tenant's key; sent as Mcp-Param-Tenant.",
                                  json_schema_extra={"x-mcp-header": "Tenant"})]


def deploy(tenant_key: _TenantKey, service: str) -> str:
    """Pretend to deploy ``service`` for the tenant; never echo the key."""
    return f"deployed {service} ({len(tenant_key)}-character key)"


def build_server() -> Any:
    """The demo server with ``deploy`` added."""
    server = origin.build_server()
    server.add_tool(deploy, description="Deploy a service for a tenant.")
    return server


def main() -> int:
    """Serve on ``--listen HOST:PORT`` until terminated."""
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


if __name__ == "__main__":
    raise SystemExit(main())
