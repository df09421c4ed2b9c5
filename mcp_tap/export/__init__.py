"""Evidence out of mcp-tap: HAR 1.2, plain JSON lines, and re-redacted derived bundles."""

from mcp_tap.export.derive import Derived, derive, load_policy_file
from mcp_tap.export.har import HAR_VERSION, to_har
from mcp_tap.export.jsonl import iter_jsonl

__all__ = ["HAR_VERSION", "Derived", "derive", "iter_jsonl", "load_policy_file", "to_har"]
