"""The demo origin plus a tool whose secret argument is mirrored under another name.

Run as ``python -m tenant_origin --listen 127.0.0.1:PORT`` with ``tests`` on the path
(``run_origin(module="tenant_origin")`` in ``peers.py``). ``deploy``'s ``tenant_key``
declares ``x-mcp-header: Tenant``, so a modern SDK client sends it as ``Mcp-Param-Tenant``:
a header name that is neither the argument's nor secret-sounding.
"""

from __future__ import annotations

from typing import Annotated, Any

from origin_variant import serve_variant
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
    return serve_variant(build_server)


if __name__ == "__main__":
    raise SystemExit(main())
