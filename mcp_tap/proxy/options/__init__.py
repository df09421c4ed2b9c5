"""Proxy options: small frozen value objects, loaded from TOML, environment and flags.

The value objects are in :mod:`.values`, the ``[redaction]`` table (name patterns and the
operator's digest key) in :mod:`.redaction`, and the loading (precedence, coercion, ranges,
hops) in :mod:`.loading`; everything public is re-exported here.

Precedence: command-line flags > environment (``MCP_TAP_<SECTION>_<KEY>``, e.g.
``MCP_TAP_EVIDENCE_DIR``, ``MCP_TAP_UPSTREAM_VERIFY_TLS``) > the config file > defaults.
``config/tap.toml`` documents every option.
"""

from mcp_tap.proxy.options.loading import load_options
from mcp_tap.proxy.options.redaction import redaction_policy
from mcp_tap.proxy.options.values import (
    HOST_MODES,
    RECORDING_MODES,
    AdminOptions,
    CaptureOptions,
    EraOptions,
    EvidenceOptions,
    GateOptions,
    HopComparisonOptions,
    HopOptions,
    ListenerOptions,
    RecordingOptions,
    TapOptions,
    TracingOptions,
    UpstreamOptions,
    check_hop_name,
    check_upstream,
    parse_listen,
)

__all__ = [
    "HOST_MODES",
    "RECORDING_MODES",
    "AdminOptions",
    "CaptureOptions",
    "EraOptions",
    "EvidenceOptions",
    "GateOptions",
    "HopComparisonOptions",
    "HopOptions",
    "ListenerOptions",
    "RecordingOptions",
    "TapOptions",
    "TracingOptions",
    "UpstreamOptions",
    "check_hop_name",
    "check_upstream",
    "load_options",
    "parse_listen",
    "redaction_policy",
]
