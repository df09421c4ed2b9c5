"""mcp-tap: a transparent, conformance-recording reverse proxy for MCP over Streamable HTTP.

The public API, for release tooling that embeds the gate instead of running the command:

* the gate: :func:`evaluate` a :class:`GateRequest` (or :func:`evaluate_files` from paths,
  :func:`load_request` to read one) into a :class:`Decision` whose :class:`Action` is
  promote, rollback or hold; :func:`load_policy` reads a :class:`Policy`;
* the evidence: :func:`verify_bundle` into a :class:`VerifyReport`, :func:`iter_records`
  streams a bundle's records;
* the errors: :class:`TapError` and its subclasses.

Everything but the errors and the version is imported on first use, so ``import mcp_tap``
(and ``mcp-tap --version``) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from mcp_tap.errors import BundleFormatError, InputError, TapError, UpstreamError
from mcp_tap.version import __version__

if TYPE_CHECKING:
    from mcp_tap.evidence import VerifyReport, iter_records, verify_bundle
    from mcp_tap.gate import (
        Action,
        Decision,
        GateRequest,
        Policy,
        evaluate,
        evaluate_files,
        load_policy,
        load_request,
    )


# name -> the module that defines it; resolved by __getattr__ on first use.
_LAZY: dict[str, str] = {
    "Action": "mcp_tap.gate",
    "Decision": "mcp_tap.gate",
    "GateRequest": "mcp_tap.gate",
    "Policy": "mcp_tap.gate",
    "evaluate": "mcp_tap.gate",
    "evaluate_files": "mcp_tap.gate",
    "load_policy": "mcp_tap.gate",
    "load_request": "mcp_tap.gate",
    "VerifyReport": "mcp_tap.evidence",
    "iter_records": "mcp_tap.evidence",
    "verify_bundle": "mcp_tap.evidence",
}

__all__ = [
    "Action",
    "BundleFormatError",
    "Decision",
    "GateRequest",
    "InputError",
    "Policy",
    "TapError",
    "UpstreamError",
    "VerifyReport",
    "__version__",
    "evaluate",
    "evaluate_files",
    "iter_records",
    "load_policy",
    "load_request",
    "verify_bundle",
]


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mcp_tap' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
