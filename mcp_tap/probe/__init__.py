"""Live probing: send the corpus's request side to a real server and judge its real answers.

``mcp-tap probe --target URL`` turns transcript cases into HTTP requests (httpx), sends them
to a live MCP server and judges every answer with the same core the proxy runs
(:func:`mcp_tap.core.exchange.judge`). Nothing here re-implements a rule: the probe only
decides *what to send* and *what a case needs to pass*.

The plan
--------
A corpus case is *probeable* when its point is the request: a golden case (the server must
accept it) or a negative case whose ``expectedRule`` is a request rule (the fault is in what
we send on purpose, so the server owes a specific rejection). Negative cases about faulty
*responses* (a missing ``resultType``, a wrong id, ...) describe a server's mistake; there is
nothing to send that would make a good server make it, so they are listed as not probeable.

Corpus requests name tools, prompts and resources of the corpus's imaginary server. Before
the cases, the probe learns the live server's inventory (``tools/list``, ``prompts/list``,
``resources/list``) and adapts golden requests to it:

* the named tool/prompt/resource exists: sent as is (missing required arguments filled in);
* it does not, and the case is a plain call whose point is "a normal call succeeds": the
  first listed item the probe can call replaces it (the report says so);
* it does not, and the name itself is the point (a ``=?base64?`` sentinel, a name that looks
  like one): sent as is; it must get past the header checks (any answer but a request
  rejection passes), since an unknown-tool answer is the correct outcome;
* otherwise (a case expecting a task or ``input_required`` result from a tool the server
  lacks, ``Mcp-Param-*`` headers the server's tool does not declare) the case is skipped with
  the reason ("skipped: needs tool 'long_job' ...").

A case passes when the judgement shows the *server* behaved: no response-side finding, the
request-side findings exactly what we sent on purpose (none for golden cases, the case's
``expectedRule``/``expectedErrorCode`` for negative ones), and, for golden requests, the
kind of answer the case describes (a result, or the error code it names).

Eras
----
``modern``: each request stands alone (``_meta`` envelope, mirrored headers), judged in the
modern era. ``legacy``: the probe runs the ``initialize`` handshake (protocol version
``2025-11-25``), reads ``Mcp-Session-Id``, sends ``notifications/initialized``, then sends
the legacy cases with ``MCP-Protocol-Version`` and the session header, judged in the legacy
era; the session is closed with DELETE at the end.

Transport failures are translated into :class:`mcp_tap.errors.UpstreamError` at one place
(:class:`HttpClient`). If the target cannot be reached at all the error propagates (the CLI
exits 2); once it has answered, a case that gets no answer fails with the reason.

Modules
-------
:mod:`~mcp_tap.probe.model` (the planned case), :mod:`~mcp_tap.probe.client` (the transport),
:mod:`~mcp_tap.probe.answers` (reading an answer), :mod:`~mcp_tap.probe.inventory` (what the
server offers), :mod:`~mcp_tap.probe.plan` and :mod:`~mcp_tap.probe.adapt` (what to send),
:mod:`~mcp_tap.probe.verdict` (pass or fail), :mod:`~mcp_tap.probe.run` (the eras, the run),
:mod:`~mcp_tap.probe.report` (the output).
"""

from mcp_tap.probe.answers import BODY_LIMIT
from mcp_tap.probe.client import (
    ACCEPT,
    DEFAULT_TIMEOUT,
    MAX_TIMEOUT,
    Answer,
    HttpClient,
    check_timeout,
)
from mcp_tap.probe.inventory import Inventory
from mcp_tap.probe.model import Expect, ProbeCase
from mcp_tap.probe.plan import is_probeable, legacy_extra_cases, plan_cases
from mcp_tap.probe.report import ProbeReport, ProbeResult
from mcp_tap.probe.run import run_probe

__all__ = [
    "ACCEPT",
    "BODY_LIMIT",
    "DEFAULT_TIMEOUT",
    "MAX_TIMEOUT",
    "Answer",
    "Expect",
    "HttpClient",
    "Inventory",
    "ProbeCase",
    "ProbeReport",
    "ProbeResult",
    "check_timeout",
    "is_probeable",
    "legacy_extra_cases",
    "plan_cases",
    "run_probe",
]
