"""Capture diff: what changed between two captures of one service, at the MCP level.

Inventory drift (:mod:`~mcp_tap.drift.inventory`), behaviour drift
(:mod:`~mcp_tap.drift.behaviour`), conformance and health drift
(:mod:`~mcp_tap.drift.conformance`), put together by :func:`diff_captures`.
"""

from mcp_tap.drift.diff import describe_side, diff_captures, iter_lines
from mcp_tap.drift.model import Area, CaptureDiff, CaptureSide, Change, Severity

__all__ = [
    "Area",
    "CaptureDiff",
    "CaptureSide",
    "Change",
    "Severity",
    "describe_side",
    "diff_captures",
    "iter_lines",
]
