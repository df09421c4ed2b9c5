"""``python -m mcp_tap`` runs the same entry point as the ``mcp-tap`` script."""

from mcp_tap.cli import main

raise SystemExit(main())
