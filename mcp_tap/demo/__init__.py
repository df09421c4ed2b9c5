"""Demo peers for mcp-tap: the real MCP Python SDK server used as the demo origin and in tests.

Importing this package does not import the SDK; ``mcp_tap.demo.origin`` does (it needs the
``demo`` extra: ``mcp==2.3.0`` and ``uvicorn``).
"""

from __future__ import annotations

__all__: list[str] = []
