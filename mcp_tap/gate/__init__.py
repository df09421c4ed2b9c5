"""The release gate: health window, rollback evidence, attestation, policy and decision.

:func:`evaluate` (with a :class:`GateRequest`, or :func:`evaluate_files` from paths) is the
whole gate as a library; the pure pieces are importable on their own.
"""

from mcp_tap.gate.decision import (
    Action,
    BundleCheck,
    Decision,
    GateInputs,
    Reason,
    Report,
    ReportCase,
    RollbackResult,
    SourceResult,
    choose,
    conformance_source,
    decide,
    hop_source,
    integrity_source,
    sdk_source,
)
from mcp_tap.gate.drift import capture_drift, drift_source
from mcp_tap.gate.evaluation import (
    GateRequest,
    evaluate,
    evaluate_files,
    load_request,
    load_rollback,
    parse_report,
)
from mcp_tap.gate.health import HealthWindow, compute_window, evaluate_health
from mcp_tap.gate.policy import DriftPolicy, Policy, load_policy, parse_policy
from mcp_tap.gate.rollback import Trust, check_rollback, missing_rollback, resolve_trust

__all__ = [
    "Action",
    "BundleCheck",
    "Decision",
    "DriftPolicy",
    "GateInputs",
    "GateRequest",
    "HealthWindow",
    "Policy",
    "Reason",
    "Report",
    "ReportCase",
    "RollbackResult",
    "SourceResult",
    "Trust",
    "capture_drift",
    "check_rollback",
    "choose",
    "compute_window",
    "conformance_source",
    "decide",
    "drift_source",
    "evaluate",
    "evaluate_files",
    "evaluate_health",
    "hop_source",
    "integrity_source",
    "load_policy",
    "load_request",
    "load_rollback",
    "missing_rollback",
    "parse_policy",
    "parse_report",
    "resolve_trust",
    "sdk_source",
]
