"""mcp-tap: a transparent, conformance-recording reverse proxy for MCP over Streamable HTTP."""

from mcp_tap.errors import BundleFormatError, InputError, TapError, UpstreamError

__version__ = "0.1.0"

__all__ = ["BundleFormatError", "InputError", "TapError", "UpstreamError", "__version__"]
