"""The HTML report: one self-contained page a person acts on instead of evidence JSON.

Three steps, kept apart so the rendering can be tested without files or a browser:

* :func:`load_report` (:mod:`.load`) does the I/O: finds and verifies the bundles, streams
  their records one at a time and, when a policy and rollback evidence are given, asks the
  gate for its decision;
* :class:`ReportTally` / :func:`collect` (:mod:`.tally`) turn records into a
  :class:`ReportData` with exact counts and bounded samples (:mod:`.bounds` says how much is
  kept; memory does not grow with the bundle);
* :func:`render_report` (:mod:`.page`) turns that into HTML (pure): the decision card
  (:mod:`.decision`), health (:mod:`.health`), findings by rule (:mod:`.findings`), hops
  (:mod:`.hops`), latency plots (:mod:`.latency`, :mod:`.plots`) and the exchange index
  and view (:mod:`.exchanges`, :mod:`.detail`).
"""

from typing import Final

from mcp_tap.report.bounds import DEFAULT_BOUNDS, Bounds, Reservoir, Samples
from mcp_tap.report.load import gate_decision, load_report
from mcp_tap.report.model import (
    BundleSummary,
    ExchangeDetail,
    ExchangeRef,
    ExchangeRow,
    HealthView,
    HopBox,
    HopChange,
    HopSummary,
    ReportData,
    RuleGroup,
    StreamRow,
)
from mcp_tap.report.page import render_report
from mcp_tap.report.plots import PERCENTILES, percentile
from mcp_tap.report.tally import ReportTally, collect

MAX_ROWS: Final = DEFAULT_BOUNDS.rows
"""Rows of the exchange index by default; the rest is counted, not listed."""

__all__ = [
    "DEFAULT_BOUNDS",
    "MAX_ROWS",
    "PERCENTILES",
    "Bounds",
    "BundleSummary",
    "ExchangeDetail",
    "ExchangeRef",
    "ExchangeRow",
    "HealthView",
    "HopBox",
    "HopChange",
    "HopSummary",
    "ReportData",
    "ReportTally",
    "Reservoir",
    "RuleGroup",
    "Samples",
    "StreamRow",
    "collect",
    "gate_decision",
    "load_report",
    "percentile",
    "render_report",
]
