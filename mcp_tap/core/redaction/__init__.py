"""Redaction: secrets are removed before anything is serialised, hashed, logged or written.

:mod:`.keys` decides which names are secret (canonical names, patterns, the MCP allowlist),
:mod:`.text` searches text that is not JSON, :mod:`.policy` holds the operator's additions,
:mod:`.redactor` walks JSON, headers and URLs.
"""

from mcp_tap.core.redaction.keys import (
    DEFAULT_ALLOW,
    DEFAULT_PATTERNS,
    SESSION_HEADER,
    KeyMatcher,
    canonical_key,
)
from mcp_tap.core.redaction.policy import ArgumentPolicy, RedactionPolicy
from mcp_tap.core.redaction.redactor import Redacted, Redactor
from mcp_tap.core.redaction.text import REDACTED, strip_url_secrets

__all__ = [
    "DEFAULT_ALLOW",
    "DEFAULT_PATTERNS",
    "REDACTED",
    "SESSION_HEADER",
    "ArgumentPolicy",
    "KeyMatcher",
    "Redacted",
    "RedactionPolicy",
    "Redactor",
    "canonical_key",
    "strip_url_secrets",
]
