"""Replay: re-send captured requests to a candidate server and compare its answers.

``mcp-tap replay EVIDENCE --target URL`` reads the exchange records of evidence bundles and,
for every POST whose request body was captured whole, sends that body again to the
candidate with a fresh JSON-RPC id (same JSON type as the original) and the recorded MCP
headers (``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name``, ``Mcp-Param-*``,
``Content-Type``, ``Accept``). Credentials were redacted before the evidence was written,
so they are never re-sent; the caller injects its own (``--header``, ``--header-env``).

Legacy-era exchanges need a session: every recorded ``Mcp-Session-Id`` is mapped onto a
session of the target, opened by replaying the recorded ``initialize`` when the evidence has
it, or by a fresh ``initialize`` (followed by ``notifications/initialized``) when it does not.

Each answer is compared with the **recorded origin answer** (what the server behind the tap
said), after normalisation: JSON-RPC ids, ``_meta`` timestamps and caller-chosen paths
(``--ignore result.structuredContent.time``) are removed, and the replayed answer is redacted
with the default denylist so both sides hide the same secrets. What counts as a change:

* ``status``: a different HTTP status;
* ``outcome``: result vs error vs no JSON-RPC answer at all;
* ``error.code``: both errors, different codes;
* ``payload``: the normalised result (or ``error.data``) differs; for SSE the final response;
* ``notifications``: the methods of the notifications streamed before the final response;
* ``body``: a notification's answer body went from empty to non-empty or back;
* ``findings``: judging both exchanges with the core (:func:`mcp_tap.core.exchange.judge`)
  gives a rule one side has and the other has not.

Differences that are not semantic (JSON vs SSE transport, an error message's wording, a
request body that carried redacted values) are reported as notes and do not change the
verdict. The comparison is pure (:func:`compare`); only :class:`Target` does network I/O,
and it translates every ``httpx`` error into :class:`~mcp_tap.errors.UpstreamError`.

Modules: :mod:`~mcp_tap.replay.select` (reading and selecting exchanges),
:mod:`~mcp_tap.replay.rewrite` (fresh ids, re-sent headers), :mod:`~mcp_tap.replay.target`
(sending), :mod:`~mcp_tap.replay.normalise`, :mod:`~mcp_tap.replay.compare` (the semantic
comparison), :mod:`~mcp_tap.replay.run` (sessions, the run), :mod:`~mcp_tap.replay.report`
(the output), :mod:`~mcp_tap.replay.model` (the values they share).
"""

from mcp_tap.replay.compare import compare, differences
from mcp_tap.replay.model import Answer, Case, ReplayOptions
from mcp_tap.replay.normalise import normalise, parse_ignore
from mcp_tap.replay.report import CaseResult, Change, ReplayReport, Skipped, iter_lines
from mcp_tap.replay.rewrite import REPLAYED_HEADERS, fresh_id, replay_headers
from mcp_tap.replay.run import RecordSource, collect, iter_replay, replay
from mcp_tap.replay.select import bundle_records, iter_cases, recorded_answer, select_cases
from mcp_tap.replay.target import Target

__all__ = [
    "REPLAYED_HEADERS",
    "Answer",
    "Case",
    "CaseResult",
    "Change",
    "RecordSource",
    "ReplayOptions",
    "ReplayReport",
    "Skipped",
    "Target",
    "bundle_records",
    "collect",
    "compare",
    "differences",
    "fresh_id",
    "iter_cases",
    "iter_lines",
    "iter_replay",
    "normalise",
    "parse_ignore",
    "recorded_answer",
    "replay",
    "replay_headers",
    "select_cases",
]
