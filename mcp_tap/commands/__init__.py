"""One module per command; see :mod:`mcp_tap.cli`."""
