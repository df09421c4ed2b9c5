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
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from types import TracebackType
from typing import Any, Final

import httpx
import orjson

from mcp_tap.core.catalog import (
    CATALOG,
    HEADER_MISMATCH,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
)
from mcp_tap.core.eras import (
    HEADER_METHOD,
    HEADER_NAME,
    HEADER_PARAM_PREFIX,
    HEADER_PROTOCOL_VERSION,
    HEADER_SESSION_ID,
    LEGACY_VERSIONS,
    META_CLIENT_CAPABILITIES,
    META_PROTOCOL_VERSION,
    MODERN_VERSIONS,
    PINNED_LEGACY_VERSION,
    Era,
)
from mcp_tap.core.exchange import Exchange, Judgement, judge
from mcp_tap.core.findings import Boundary, Finding
from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.jsonrpc import Kind, classify, parse_json
from mcp_tap.core.redaction import Redactor
from mcp_tap.core.requests import param_headers
from mcp_tap.core.responses import decode_sse
from mcp_tap.core.sentinel import encode_header_value, is_safe_plain
from mcp_tap.core.transport import jsonrpc_shaped
from mcp_tap.errors import InputError, UpstreamError
from mcp_tap.header_options import check_header
from mcp_tap.transcripts import Case, load_corpus
from mcp_tap.urls import check_http_url, shown_url

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

ACCEPT: Final = "application/json, text/event-stream"
"""The ``Accept`` value every Streamable HTTP POST carries."""

BODY_LIMIT: Final = 2048
"""How many characters of a response body the report shows (the rest is counted, not shown)."""

DEFAULT_TIMEOUT: Final = 10.0
# The longest wait for one answer an operator may ask for: beyond it a timeout is a typo
# (and an infinite or huge one overflows the socket layer).
MAX_TIMEOUT: Final = 3600.0
"""Seconds the probe waits for one answer (connect, each read, each write)."""

MODERN_VERSION: Final = MODERN_VERSIONS[0]

# JSON-RPC codes that mean "your request was refused before it was routed": a request whose
# headers are correct must never get one of these.
_REQUEST_REJECTIONS: Final = frozenset({
    PARSE_ERROR, INVALID_REQUEST, HEADER_MISMATCH, MISSING_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
})

# Golden error answers whose code the revisions disagree on: the case's code, and the
# others a server may use instead. SEP-2164 standardised resource-not-found as -32602;
# 2025-11-25 only recommended -32002 and its clients accept either.
_ALSO_ACCEPTED: Final[dict[tuple[Era, str, int], frozenset[int]]] = {
    (Era.LEGACY, "resources/read", -32002): frozenset({-32602}),
}

# Owed-answer findings first: for a rejected request they are the headline.
_HEADLINE_RULES: Final = ("response.header-mismatch-unanswered", "response.expected-error",
                          "notification.response")

HEADERLESS_LEGACY_VERSION: Final = "2025-03-26"
"""The revision a server that supports pre-2025-06-18 clients MAY assume for a request that
carries no ``MCP-Protocol-Version`` header (2026-07-28, Streamable HTTP, Protocol Version
Header)."""

_INVENTORY_PAGES: Final = 10


class Expect(StrEnum):
    """What a probed case needs from the server, besides the judge finding nothing."""

    RESULT = "result"
    """A success result (golden request)."""
    ERROR = "error"
    """A JSON-RPC error with the case's code (golden request whose correct answer is an error)."""
    ACCEPTED = "accepted"
    """A notification: the judge's 202-and-empty-body rule decides."""
    ROUTED = "routed"
    """Past the header checks: a result or any error but a request rejection."""
    REJECTED = "rejected"
    """A negative request: the judge's owed-answer rules decide (400/-32020, the code, ...)."""
    RESULT_OR_MISMATCH = "result-or-mismatch"
    """A result, or a 400/-32020 header rejection: the request repeats a singleton header
    line, which RFC 9110 section 5.3 forbids a sender to generate, so a server may refuse it
    (the tap itself reads identical duplicates as one value)."""


@dataclass(frozen=True, slots=True)
class ProbeCase:
    """One planned request: what to send, in which era, and what passing means.

    ``headers`` are the case's own headers (the MCP routing headers under test); transport
    headers (``Accept``, ``Content-Type``, the legacy session, operator headers) are added
    when sending. ``skip`` is the reason the case cannot be probed against this server.
    """

    name: str
    era: Era
    headers: HeaderMap
    body: bytes
    expect: Expect
    expected_rule: str | None = None
    expected_code: int | None = None
    notes: tuple[str, ...] = ()
    skip: str | None = None


@dataclass(frozen=True, slots=True)
class Answer:
    """What the server sent back: status, headers and the whole body (SSE read to its end)."""

    status: int
    headers: HeaderMap
    body: bytes


@dataclass(frozen=True, slots=True)
class Inventory:
    """What the live server offers, learned before the cases (for adapting them)."""

    tools: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    prompts: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    resources: tuple[str, ...] = ()
    extensions: frozenset[str] = frozenset()
    problems: tuple[str, ...] = ()

    @property
    def tool_schemas(self) -> dict[str, Any]:
        """Tool name -> ``inputSchema``, for the judge's ``Mcp-Param-*`` rung."""
        return {name: tool.get("inputSchema") for name, tool in self.tools.items()}


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """One case's outcome: the JSON shape of a ``mcp-tap probe --json`` case entry.

    ``rule``/``code``: for a failed case the rule the server broke (``None`` when the failure
    is only "not the answer the case describes"); for a passed negative case the request rule
    the server honoured; ``None`` for a passed golden case. ``body`` is the exact response
    text seen, cut at :data:`BODY_LIMIT` characters.
    """

    name: str
    era: Era
    passed: bool
    skipped: bool
    rule: str | None
    code: int | None
    http_status: int | None
    body: str | None
    detail: str
    findings: tuple[Finding, ...] = ()
    request_headers: tuple[tuple[str, str], ...] = ()
    request_body: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The case entry of the JSON report."""
        return {
            "name": self.name,
            "era": str(self.era),
            "passed": self.passed,
            "skipped": self.skipped,
            "rule": self.rule,
            "code": self.code,
            "httpStatus": self.http_status,
            "body": self.body,
            "detail": self.detail,
            "findings": [f.to_json() for f in self.findings],
            "request": None if self.skipped else {
                "headers": [list(p) for p in self.request_headers],
                "body": self.request_body,
            },
        }


@dataclass(frozen=True, slots=True)
class ProbeReport:
    """Every case's outcome against one target, plus the corpus cases that are not probeable.

    ``notes`` say what the probe could not learn (an inventory list the server refused),
    which explains skipped or substituted cases; they are not findings.
    """

    target: str
    eras: tuple[Era, ...]
    results: tuple[ProbeResult, ...]
    not_probeable: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def probed(self) -> list[ProbeResult]:
        """The cases that were sent (not skipped)."""
        return [r for r in self.results if not r.skipped]

    @property
    def failed(self) -> list[ProbeResult]:
        """The sent cases that did not pass."""
        return [r for r in self.probed if not r.passed]

    @property
    def ok(self) -> bool:
        """Whether something was probed and every probed case passed."""
        return bool(self.probed) and not self.failed

    def to_json(self) -> dict[str, Any]:
        """The ``mcp-tap probe --json`` object."""
        probed = self.probed
        return {
            "target": self.target,
            "eras": [str(e) for e in self.eras],
            "ok": self.ok,
            "total": len(self.results),
            "passed": sum(r.passed for r in probed),
            "failed": len(self.failed),
            "skipped": len(self.results) - len(probed),
            "notProbeable": list(self.not_probeable),
            "notes": list(self.notes),
            "cases": [r.to_json() for r in self.results],
        }


# --- operator input ----------------------------------------------------------------------


def _check_target(target: str) -> str:
    return check_http_url(target, "--target")


def check_timeout(value: float, what: str = "--timeout") -> float:
    """Return ``value`` when it is a usable timeout: finite, above 0, at most :data:`MAX_TIMEOUT`.

    Raises :class:`InputError` naming ``what`` otherwise (probe and replay share this rule).
    """
    if not (math.isfinite(value) and 0 < value <= MAX_TIMEOUT):
        raise InputError(f"{what} must be a number of seconds above 0 and at most "
                         f"{MAX_TIMEOUT:g}, got {value!r}")
    return value


# --- transport (the one place httpx errors become UpstreamError) ---------------------------


def _reason(exc: httpx.HTTPError, timeout: float) -> str:
    """One line saying why a request got no answer."""
    text = " ".join(str(exc).split())
    if isinstance(exc, httpx.TimeoutException):
        return f"no answer within {timeout:g} s"
    if isinstance(exc, httpx.ConnectError):
        low = text.lower()
        if "refused" in low:
            return "connection refused"
        if "name or service not known" in low or "nodename" in low or "getaddrinfo" in low:
            return "host name not resolved"
        return text or "cannot connect"
    if isinstance(exc, httpx.RemoteProtocolError):
        return f"the server broke the connection ({text or 'no details'})"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class HttpClient:
    """A synchronous httpx client bound to one target; the probe's only transport.

    ``reached`` turns true after the first answer: before it, a transport error means the
    target is unreachable (the whole probe stops); after it, one case got no answer.
    """

    def __init__(
        self,
        target: str,
        *,
        headers: Sequence[tuple[str, str]] = (),
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """Open a client for ``target`` sending the operator ``headers`` on every request."""
        self.target = target
        self.extra_headers = tuple(headers)
        self.timeout = timeout
        self.reached = False
        self._client = httpx.Client(timeout=httpx.Timeout(timeout), transport=transport)

    def __enter__(self) -> HttpClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def wire_headers(self, headers: HeaderMap, *, session: str | None = None) -> HeaderMap:
        """The headers actually sent: transport headers, the case's, the session, the operator's."""
        pairs: list[tuple[str, str]] = []
        if "accept" not in headers:
            pairs.append(("Accept", ACCEPT))
        if "content-type" not in headers:
            pairs.append(("Content-Type", "application/json"))
        pairs += headers.pairs
        if session is not None:
            pairs.append((HEADER_SESSION_ID, session))
        pairs += self.extra_headers
        return HeaderMap(tuple(pairs))

    def send(self, method: str, headers: HeaderMap, body: bytes = b"") -> Answer:
        """Send one request with exactly ``headers`` (order and duplicates kept) and read it all."""
        # Bytes values: a raw non-ASCII header value (a negative case) must reach the wire as
        # its UTF-8 bytes, which httpx refuses to do for str values.
        raw = [(k.encode("ascii", "replace"), v.encode("utf-8")) for k, v in headers]
        try:
            response = self._client.request(method, self.target, headers=raw, content=body)
        except httpx.HTTPError as exc:
            what = _reason(exc, self.timeout)
            if not self.reached:
                raise UpstreamError(f"cannot reach {shown_url(self.target)}: {what}") from None
            raise UpstreamError(f"{shown_url(self.target)}: {what}") from None
        except httpx.InvalidURL as exc:
            raise InputError(f"--target {shown_url(self.target)!r}: {exc}") from None
        self.reached = True
        return Answer(response.status_code, HeaderMap(tuple(response.headers.multi_items())),
                      response.content)

    def post(self, headers: HeaderMap, body: bytes, *, session: str | None = None) -> Answer:
        """POST ``body`` with the case ``headers`` plus transport, session and operator headers."""
        return self.send("POST", self.wire_headers(headers, session=session), body)


# --- reading answers ----------------------------------------------------------------------


def _messages(answer: Answer) -> list[Any]:
    """The JSON-RPC messages of an answer: the JSON body, or each SSE event's data."""
    if answer.headers.content_type() == "text/event-stream":
        events, _ = decode_sse(answer.body)
        out: list[Any] = []
        for event in events:
            if event.data:
                try:
                    out.append(parse_json(event.data))
                except ValueError:
                    continue
        return out
    try:
        return [parse_json(answer.body)] if answer.body.strip() else []
    except ValueError:
        return []


def _final(messages: Iterable[Any]) -> dict[str, Any] | None:
    """The last JSON-RPC response (result or error) among ``messages``."""
    found: dict[str, Any] | None = None
    for message in messages:
        if isinstance(message, dict) and classify(message).kind is Kind.RESPONSE:
            found = message
    return found


def _error_code(message: dict[str, Any] | None) -> int | None:
    error = message.get("error") if message else None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def _shown(body: bytes) -> str:
    text = body.decode("utf-8", "replace")
    if len(text) <= BODY_LIMIT:
        return text
    return text[:BODY_LIMIT] + f"... [{len(body)} bytes, cut at {BODY_LIMIT} characters]"


def _answer_summary(status: int, final: dict[str, Any] | None) -> str:
    if final is None:
        return f"HTTP {status} without a JSON-RPC response"
    if "error" in final:
        code = _error_code(final)
        return f"HTTP {status} with JSON-RPC error {code if code is not None else '?'}"
    return f"HTTP {status} with a result"


# --- the plan -----------------------------------------------------------------------------


def is_probeable(case: Case) -> bool:
    """Whether a case's point is its request (golden, or a negative with a request rule).

    A case that describes an answer no request can provoke is not: a GET, DELETE or OPTIONS
    exchange, a plain HTTP error (401, 429, 5xx...), an ``Origin`` refusal, a client's
    JSON-RPC response, or one the corpus marks ``"probe": false``.
    """
    if not case.probe or case.http_method != "POST" or "origin" in case.headers:
        return False
    if classify(case.request).kind is Kind.RESPONSE:
        return False
    status = case.response_status
    body = b"" if case.response_body is None else _body_bytes(case.response_body)
    if status is not None and status >= 400 and not jsonrpc_shaped(body):
        return False
    if case.golden:
        return True
    rule = CATALOG.get(case.expected_rule) if case.expected_rule else None
    return rule is not None and rule.boundary is Boundary.REQUEST


def _body_bytes(value: Any) -> bytes:
    # A string request is raw bytes on purpose (the not-JSON negative case).
    return value.encode("utf-8") if isinstance(value, str) else orjson.dumps(value)


def _expectation(case: Case) -> tuple[Expect, int | None]:
    """What a probed case needs, read from the corpus: its rejection, or its answer's kind."""
    if not case.golden:
        return Expect.REJECTED, case.expected_code
    if classify(case.request).kind is Kind.NOTIFICATION:
        return Expect.ACCEPTED, None
    body = case.response_body
    if isinstance(body, dict) and isinstance(body.get("sse"), list):
        final = _final(body["sse"])
    else:
        final = body if isinstance(body, dict) else None
    if final is not None and "error" in final:
        return Expect.ERROR, _error_code(final)
    names = [name.lower() for name, _ in case.headers]
    if len(names) != len(set(names)):
        return Expect.RESULT_OR_MISMATCH, None
    return Expect.RESULT, None


def _expected_result_type(case: Case) -> str | None:
    """The ``resultType`` of the case's described result (``complete`` when absent)."""
    body = case.response_body
    if isinstance(body, dict) and isinstance(body.get("sse"), list):
        return "stream"  # An SSE answer is about the stream; do not substitute its tool.
    result = body.get("result") if isinstance(body, dict) else None
    if not isinstance(result, dict):
        return None
    rtype = result.get("resultType", "complete")
    return rtype if isinstance(rtype, str) else None


def _unsendable(headers: HeaderMap) -> str | None:
    """Why a header cannot cross HTTP/1.1 as written (its edges are stripped or refused)."""
    for name, value in headers:
        if value != value.strip(" \t"):
            return (f"{name}: {value!r} has raw surrounding whitespace, which HTTP/1.1 strips "
                    "before any server sees it; only an in-process judge can test it")
        if any(ch in value for ch in "\r\n\0"):
            return f"{name}: {value!r} contains a line break or NUL, which HTTP/1.1 refuses"
    return None


def _dict(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def _synth(schema: Any) -> tuple[bool, Any]:
    """A plausible value for one JSON-schema property: ``(True, value)`` or ``(False, None)``."""
    if not isinstance(schema, dict):
        return False, None
    if "default" in schema:
        return True, schema["default"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return True, schema["enum"][0]
    if "const" in schema:
        return True, schema["const"]
    kind = schema.get("type")
    if kind in ("integer", "number"):
        low = schema.get("minimum", 1)
        value = max(1, low) if isinstance(low, int | float) else 1
        return True, int(value) if kind == "integer" else value
    plain = {"string": "hello", "boolean": True, "array": [], "object": {}, "null": None}
    if isinstance(kind, str) and kind in plain:
        return True, plain[kind]
    return False, None


def _fill_arguments(schema: Any, given: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``given`` plus a value for each missing required argument; the names it could not fill."""
    args = dict(given)
    if not isinstance(schema, dict):
        return args, []
    props = _dict(schema.get("properties"))
    required = schema.get("required")
    required = required if isinstance(required, list) else []
    unfilled: list[str] = []
    for name in required:
        if not isinstance(name, str) or name in args:
            continue
        ok, value = _synth(props.get(name))
        if ok:
            args[name] = value
        else:
            unfilled.append(name)
    return args, unfilled


def _param_tokens(headers: HeaderMap) -> set[str]:
    """The ``Mcp-Param-{Token}`` tokens a request carries, lowercased."""
    return {n[len(HEADER_PARAM_PREFIX):].lower()
            for n in headers.names_with_prefix(HEADER_PARAM_PREFIX)}


def _declared_tokens(tool: Mapping[str, Any] | None) -> set[str]:
    schema = tool.get("inputSchema") if tool else None
    return {decl.token.lower() for decl in param_headers(schema)}


def _with_name_header(headers: HeaderMap, value: str) -> HeaderMap:
    """``headers`` with every ``Mcp-Name`` value replaced (encoded for the wire)."""
    if HEADER_NAME not in headers:
        return headers
    encoded = encode_header_value(value)
    return HeaderMap(tuple((k, encoded if k.lower() == HEADER_NAME.lower() else v)
                           for k, v in headers))


def _name_is_plain(headers: HeaderMap, name: Any) -> bool:
    """Whether a routed name is incidental: header-safe and mirrored verbatim (or not at all)."""
    if not isinstance(name, str) or not is_safe_plain(name):
        return False
    return all(v == name for v in headers.get_all(HEADER_NAME))


@dataclass(slots=True)
class _Draft:
    """A case being adapted: mutable while the planner works on it."""

    case: Case
    headers: HeaderMap
    message: dict[str, Any]
    expect: Expect
    code: int | None
    notes: list[str] = field(default_factory=list)
    skip: str | None = None

    @property
    def params(self) -> dict[str, Any]:
        params = self.message.get("params")
        if not isinstance(params, dict):
            params = {}
            self.message["params"] = params
        return params


def _substitutable(draft: _Draft, name: Any) -> bool:
    """Whether a missing item may be replaced: an ordinary call expecting a plain result."""
    return (draft.expect is Expect.RESULT
            and _expected_result_type(draft.case) == "complete"
            and not _param_tokens(draft.headers)
            and _name_is_plain(draft.headers, name))


def _missing(draft: _Draft, what: str, name: Any) -> None:
    """The server lacks the item a golden case names: route-check it or skip it."""
    if draft.expect is Expect.RESULT and not _name_is_plain(draft.headers, name):
        draft.expect = Expect.ROUTED
        draft.notes.append(f"{what} {name!r} is not on the server; the case is about that "
                           "name, so any answer but a request rejection passes")
        return
    why = ""
    rtype = _expected_result_type(draft.case)
    if rtype == "stream":
        why = " (the case expects an SSE stream from it)"
    elif rtype not in (None, "complete"):
        why = f" (the case expects a result of type {rtype!r})"
    draft.skip = f"needs {what} {name!r}{why}"


def _adapt_tool_call(draft: _Draft, inv: Inventory) -> None:
    params = draft.params
    name = params.get("name")
    given = _dict(params.get("arguments"))
    used = _param_tokens(draft.headers)
    tool = inv.tools.get(name) if isinstance(name, str) else None
    if tool is not None:
        lacking = used - _declared_tokens(tool)
        if lacking:
            draft.skip = (f"needs tool {name!r} declaring x-mcp-header "
                          f"{', '.join(sorted(lacking))} (the server's {name!r} does not)")
            return
        if draft.expect is Expect.REJECTED:
            return  # A negative request is sent exactly as written.
        args, unfilled = _fill_arguments(tool.get("inputSchema"), given)
        if unfilled:
            draft.skip = f"needs tool {name!r} with arguments the probe can fill ({unfilled})"
            return
        if args != given:
            params["arguments"] = args
            draft.notes.append(f"filled required argument(s) of {name!r}: "
                               f"{sorted(set(args) - set(given))}")
        if draft.case.era is Era.MODERN:
            _mirror_params(draft, tool, args)  # Legacy revisions have no Mcp-Param-* headers.
        return
    if draft.expect is Expect.REJECTED:
        if used:
            # Param headers are only checkable by a server that declares them for this tool.
            draft.skip = f"needs tool {name!r} declaring x-mcp-header {', '.join(sorted(used))}"
        return
    if not _substitutable(draft, name):
        _missing(draft, "tool", name)
        return
    for other, descriptor in inv.tools.items():
        if _declared_tokens(descriptor):
            continue  # A substitute must not need Mcp-Param-* headers the case lacks.
        args, unfilled = _fill_arguments(descriptor.get("inputSchema"), {})
        if unfilled:
            continue
        params["name"] = other
        params["arguments"] = args
        draft.headers = _with_name_header(draft.headers, other)
        draft.notes.append(f"tool {name!r} is not on the server: called {other!r} "
                           f"with {orjson.dumps(args).decode()}")
        return
    draft.skip = f"needs tool {name!r} (the server lists no tool the probe can call)"


def _header_text(value: Any) -> str | None:
    """An argument as an ``Mcp-Param-*`` value (spec: Value Encoding), ``None`` if not primitive."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return encode_header_value(value)
    return None


def _mirror_params(draft: _Draft, tool: Mapping[str, Any], args: Mapping[str, Any]) -> None:
    """Add the ``Mcp-Param-*`` headers the server's tool declares and the case lacks.

    A golden call must stay golden against this server: its tool may declare
    ``x-mcp-header`` arguments the corpus's imaginary tool did not.
    """
    added: list[str] = []
    for decl in param_headers(tool.get("inputSchema")):
        name = HEADER_PARAM_PREFIX + decl.token
        node: Any = args
        for key in decl.path:
            node = node.get(key) if isinstance(node, dict) else None
        text = _header_text(node)
        if text is None or name in draft.headers:
            continue
        draft.headers = HeaderMap((*draft.headers.pairs, (name, text)))
        added.append(name)
    if added:
        draft.notes.append(f"added {', '.join(added)} for the server's x-mcp-header arguments")


def _prompt_arguments(prompt: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    declared: list[str] = []
    required: list[str] = []
    for arg in prompt.get("arguments") or []:
        if isinstance(arg, dict) and isinstance(arg.get("name"), str):
            declared.append(arg["name"])
            if arg.get("required"):
                required.append(arg["name"])
    return declared, required


def _adapt_prompt_get(draft: _Draft, inv: Inventory) -> None:
    params = draft.params
    name = params.get("name")
    given = _dict(params.get("arguments"))
    prompt = inv.prompts.get(name) if isinstance(name, str) else None
    if prompt is None:
        if not _substitutable(draft, name) or not inv.prompts:
            _missing(draft, "prompt", name)
            return
        name, prompt = next(iter(inv.prompts.items()))
        draft.notes.append(f"prompt {params.get('name')!r} is not on the server: "
                           f"got {name!r} instead")
        params["name"] = name
        draft.headers = _with_name_header(draft.headers, name)
    declared, required = _prompt_arguments(prompt)
    # The case's argument values, in order, fill the server's required arguments: the
    # case's intent ("greet ada") survives a different argument name.
    spare = [v for k, v in given.items() if k not in declared and isinstance(v, str)]
    args = {k: v for k, v in given.items() if k in declared}
    for arg in required:
        if arg not in args:
            args[arg] = spare.pop(0) if spare else "hello"
    if args != given:
        draft.notes.append(f"prompt arguments {sorted(given)} -> {sorted(args)}")
        params["arguments"] = args


def _adapt_resource_read(draft: _Draft, inv: Inventory) -> None:
    params = draft.params
    uri = params.get("uri")
    if uri in inv.resources or draft.expect is not Expect.RESULT:
        return  # Present, or the case wants the server's error for a missing resource.
    if not _substitutable(draft, uri) or not inv.resources:
        _missing(draft, "resource", uri)
        return
    params["uri"] = inv.resources[0]
    draft.headers = _with_name_header(draft.headers, inv.resources[0])
    draft.notes.append(f"resource {uri!r} is not on the server: read {inv.resources[0]!r}")


def _adapt_completion(draft: _Draft, inv: Inventory) -> None:
    params = draft.params
    ref = params.get("ref")
    argument = params.get("argument")
    if not isinstance(ref, dict) or ref.get("type") != "ref/prompt" or not isinstance(argument,
                                                                                       dict):
        return
    name = ref.get("name")
    prompt = inv.prompts.get(name) if isinstance(name, str) else None
    if prompt is None or not _prompt_arguments(prompt)[0]:
        found = next(((n, p) for n, p in inv.prompts.items() if _prompt_arguments(p)[0]), None)
        if found is None:
            draft.skip = f"needs prompt {name!r} with an argument to complete"
            return
        draft.notes.append(f"prompt {name!r} is not on the server: completing {found[0]!r}")
        name, prompt = found
        params["ref"] = {**ref, "name": name}
    declared, _ = _prompt_arguments(prompt)
    if argument.get("name") not in declared:
        draft.notes.append(f"argument {argument.get('name')!r} -> {declared[0]!r}")
        params["argument"] = {**argument, "name": declared[0]}


_ADAPTERS = {
    "tools/call": _adapt_tool_call,
    "prompts/get": _adapt_prompt_get,
    "resources/read": _adapt_resource_read,
    "completion/complete": _adapt_completion,
}


def _legacy_headers(headers: HeaderMap, negotiated: str | None) -> HeaderMap:
    """Drop the corpus's session id (the real one is added when sending) and pin the version."""
    pairs: list[tuple[str, str]] = []
    for name, value in headers:
        low = name.lower()
        if low == HEADER_SESSION_ID.lower():
            continue
        if low == HEADER_PROTOCOL_VERSION.lower() and negotiated and value in LEGACY_VERSIONS:
            value = negotiated
        pairs.append((name, value))
    return HeaderMap(tuple(pairs))


def _plan_one(case: Case, inv: Inventory, negotiated: str | None) -> ProbeCase:
    expect, code = _expectation(case)
    headers = case.headers
    if case.era is Era.LEGACY:
        headers = _legacy_headers(headers, negotiated)
    message = case.request
    unsendable = _unsendable(case.headers)
    method = message.get("method") if isinstance(message, dict) else None
    adapter = _ADAPTERS.get(method) if isinstance(method, str) else None
    if unsendable or adapter is None or not isinstance(message, dict):
        skip = f"cannot be sent: {unsendable}" if unsendable else None
        return ProbeCase(case.name, case.era, headers, _body_bytes(message), expect,
                         case.expected_rule, code, (), skip)
    # Work on a copy: the corpus case stays as shipped.
    draft = _Draft(case, headers, orjson.loads(orjson.dumps(message)), expect, code)
    adapter(draft, inv)
    return ProbeCase(case.name, case.era, draft.headers, orjson.dumps(draft.message),
                     draft.expect, case.expected_rule, code, tuple(draft.notes), draft.skip)


def _is_handshake(case: Case) -> bool:
    method = case.request.get("method") if isinstance(case.request, dict) else None
    return case.era is Era.LEGACY and case.golden and method in (
        "initialize", "notifications/initialized")


def plan_cases(
    cases: Sequence[Case],
    era: Era,
    inventory: Inventory,
    *,
    negotiated: str | None = None,
) -> tuple[list[ProbeCase], list[str]]:
    """The probe plan for ``era``: its probeable cases adapted to ``inventory``.

    Returns the planned cases (skipped ones included, with their reason) and the names of
    the era's cases that are not probeable (response-side negatives). Legacy handshake cases
    (golden ``initialize`` / ``notifications/initialized``) are not planned here: the
    handshake itself sends them.
    """
    planned: list[ProbeCase] = []
    unprobeable: list[str] = []
    for case in cases:
        if case.era is not era or _is_handshake(case):
            continue
        if not is_probeable(case):
            unprobeable.append(case.name)
            continue
        planned.append(_plan_one(case, inventory, negotiated))
    return planned, unprobeable


def legacy_extra_cases() -> list[Case]:
    """Legacy cases the corpus lacks, sent in the live session after the corpus's own.

    An unknown method must get -32601; a ``jsonrpc: "1.0"`` envelope is not a JSON-RPC 2.0
    request and must get -32600 (Invalid Request), as in the modern era.
    """
    return [
        Case(
            name="probe-legacy-method-not-found",
            era=Era.LEGACY,
            headers=HeaderMap(((HEADER_PROTOCOL_VERSION, PINNED_LEGACY_VERSION),)),
            request={"jsonrpc": "2.0", "id": 1, "method": "tools/frobnicate"},
            response_status=None,
            response_headers=HeaderMap(),
            response_body={"jsonrpc": "2.0", "id": 1,
                           "error": {"code": METHOD_NOT_FOUND, "message": "Method not found"}},
            expected_code=None,
            expected_rule=None,
            source="mcp_tap.probe",
        ),
        Case(
            name="probe-legacy-jsonrpc-version",
            era=Era.LEGACY,
            headers=HeaderMap(((HEADER_PROTOCOL_VERSION, PINNED_LEGACY_VERSION),)),
            request={"jsonrpc": "1.0", "id": 1, "method": "tools/list"},
            response_status=None,
            response_headers=HeaderMap(),
            response_body=None,
            expected_code=INVALID_REQUEST,
            expected_rule="request.envelope",
            source="mcp_tap.probe",
        ),
    ]


# --- judging one answer -------------------------------------------------------------------


def _matches(pc: ProbeCase, f: Finding) -> bool:
    if pc.expected_rule is not None and f.rule != pc.expected_rule:
        return False
    return pc.expected_code is None or f.code == pc.expected_code


def _method_of(body: bytes) -> str | None:
    try:
        message = parse_json(body)
    except ValueError:
        return None
    method = message.get("method") if isinstance(message, dict) else None
    return method if isinstance(method, str) else None


def _accepted_codes(pc: ProbeCase) -> frozenset[int]:
    """The error codes that satisfy a golden error case (the case's, plus known equivalents)."""
    if pc.expected_code is None:
        return frozenset()
    key = (pc.era, _method_of(pc.body) or "", pc.expected_code)
    return frozenset({pc.expected_code}) | _ALSO_ACCEPTED.get(key, frozenset())


def _headline(found: Sequence[Finding]) -> Finding:
    """The finding a failed case is reported under: an owed answer first, else the first."""
    for rule in _HEADLINE_RULES:
        for f in found:
            if f.rule == rule:
                return f
    return found[0]


def _verdict(pc: ProbeCase, answer: Answer, judgement: Judgement,
             sent: tuple[tuple[str, str], ...]) -> ProbeResult:
    """Decide one probed case from the core's judgement of the real exchange."""
    found = judgement.findings
    request_side = [f for f in found if f.boundary is Boundary.REQUEST]
    response_side = [f for f in found if f.boundary is not Boundary.REQUEST]
    final = _final(judgement.response_messages)
    seen = _answer_summary(answer.status, final)
    notes = "".join(f"; {n}" for n in pc.notes)

    def result(passed: bool, rule: str | None, code: int | None, detail: str) -> ProbeResult:
        return ProbeResult(pc.name, pc.era, passed, False, rule, code, answer.status,
                           _shown(answer.body), detail + notes, found, sent,
                           _shown(pc.body))

    # 1. Did we send what we meant? Anything else is a flaw of the plan, not of the server.
    intended = next((f for f in request_side if _matches(pc, f)), None)
    if pc.expect is Expect.REJECTED and intended is None:
        want = pc.expected_rule or pc.expected_code
        saw = "; ".join(f"{f.rule}: {f.message}" for f in request_side) or "nothing"
        return result(False, None, None,
                      f"probe plan error: the request did not carry the intended {want} "
                      f"(the ladder saw {saw})")
    if pc.expect is not Expect.REJECTED and request_side:
        first = request_side[0]
        return result(False, first.rule, first.code,
                      f"probe plan error: the golden request was judged faulty: {first.message}")
    # 2. Did the server behave? The judge's response-side findings say.
    if response_side:
        first = _headline(response_side)
        detail = "; ".join(f"{f.rule} ({f.where}): {f.message}" for f in response_side)
        return result(False, first.rule, first.code, detail)
    # 3. Did it give the kind of answer the case describes?
    code = _error_code(final)
    has_result = final is not None and "result" in final
    if pc.expect is Expect.RESULT and not has_result:
        return result(False, None, code, f"expected a result, got {seen}")
    if pc.expect is Expect.ERROR and code not in _accepted_codes(pc):
        return result(False, None, code,
                      f"expected JSON-RPC error {pc.expected_code}, got {seen}")
    if pc.expect is Expect.ERROR and code != pc.expected_code:
        return result(True, None, code,
                      f"as expected: {seen} (accepted for {pc.expected_code}: the revisions "
                      "disagree on this code, see SEP-2164)")
    if pc.expect is Expect.ROUTED and (final is None or code in _REQUEST_REJECTIONS):
        return result(False, None, code,
                      f"expected the headers to be accepted (a result or a non-rejection "
                      f"error), got {seen}")
    if pc.expect is Expect.RESULT_OR_MISMATCH and not has_result:
        if code == HEADER_MISMATCH and answer.status == 400:
            return result(True, None, code,
                          f"refused the repeated header lines with {seen} (allowed: RFC 9110 "
                          "section 5.3 forbids a sender to repeat a singleton field)")
        return result(False, None, code,
                      f"expected a result or a 400/-32020 rejection, got {seen}")
    if pc.expect is Expect.REJECTED and intended is not None:
        return result(True, intended.rule, intended.code,
                      f"{intended.rule} sent on purpose; the answer is what it is owed: {seen}")
    if pc.expect is Expect.ACCEPTED:
        return result(True, None, None, f"accepted: HTTP {answer.status}, empty body")
    return result(True, None, code, f"as expected: {seen}")


def _skipped(pc: ProbeCase, reason: str | None = None) -> ProbeResult:
    return ProbeResult(pc.name, pc.era, False, True, None, None, None, None,
                       f"skipped: {reason or pc.skip}")


def _headerless(pc: ProbeCase) -> bool:
    """Whether a modern negative case is about a missing ``MCP-Protocol-Version`` header."""
    return (pc.era is Era.MODERN and pc.expect is Expect.REJECTED
            and pc.expected_rule == "request.header.missing"
            and HEADER_PROTOCOL_VERSION not in pc.headers)


@dataclass(slots=True)
class _Session:
    """Per-era state shared by every case of the era."""

    era: Era
    inventory: Inventory = field(default_factory=Inventory)
    session_id: str | None = None
    negotiated: str | None = None


class _Run:
    """One probe run: the transport, the redactor for the report, facts learned on the way."""

    def __init__(self, http: HttpClient) -> None:
        self.http = http
        # Operator headers may carry credentials: the report shows what was sent, redacted.
        self.redactor = Redactor()
        self.notes: list[str] = []
        self._headerless_legacy: bool | None = None

    def learned(self, state: _Session) -> None:
        """Record what the era's inventory could not list (it explains skips)."""
        self.notes += [f"{state.era} inventory: {p}" for p in state.inventory.problems]

    def headerless_legacy(self) -> bool:
        """Whether the server supports pre-2025-06-18 clients (asked once, when needed).

        Such a server MAY treat a request without ``MCP-Protocol-Version`` as 2025-03-26
        instead of rejecting it with -32020. The evidence: an ``initialize`` offering
        2025-03-26, sent without the header, gets a result agreeing on 2025-03-26.
        """
        if self._headerless_legacy is None:
            body = dict(_DEFAULT_INITIALIZE)
            body["params"] = {**_DEFAULT_INITIALIZE["params"],
                              "protocolVersion": HEADERLESS_LEGACY_VERSION}
            body["id"] = "probe-headerless-initialize"
            try:
                answer = self.http.post(HeaderMap(), orjson.dumps(body))
            except UpstreamError:
                self._headerless_legacy = False
                return False
            final = _final(_messages(answer))
            result = final.get("result") if final else None
            version = result.get("protocolVersion") if isinstance(result, dict) else None
            self._headerless_legacy = version == HEADERLESS_LEGACY_VERSION
            self.close_session(answer.headers.get(HEADER_SESSION_ID), HEADERLESS_LEGACY_VERSION)
        return self._headerless_legacy

    def close_session(self, session_id: str | None, version: str) -> None:
        """DELETE a legacy session the probe opened (best effort, not judged)."""
        if session_id is None:
            return
        headers = HeaderMap(((HEADER_PROTOCOL_VERSION, version),))
        with contextlib.suppress(UpstreamError):
            self.http.send("DELETE", self.http.wire_headers(headers, session=session_id))


def _excused(run: _Run, pc: ProbeCase, outcome: ProbeResult) -> ProbeResult:
    """A failed missing-version-header case, excused when the specification allows the answer."""
    if outcome.passed or not _headerless(pc) or outcome.http_status is None:
        return outcome
    if not run.headerless_legacy():
        return outcome
    return ProbeResult(
        outcome.name, outcome.era, True, False, pc.expected_rule, pc.expected_code,
        outcome.http_status, outcome.body,
        "allowed: the server supports pre-2025-06-18 clients (initialize offering "
        f"{HEADERLESS_LEGACY_VERSION} without the header succeeded), so it MAY treat a request "
        f"without {HEADER_PROTOCOL_VERSION} as {HEADERLESS_LEGACY_VERSION} instead of "
        f"answering -32020; it answered: {outcome.detail}",
        outcome.findings, outcome.request_headers, outcome.request_body)


def _run_case(run: _Run, pc: ProbeCase, state: _Session
              ) -> tuple[ProbeResult, Answer | None, Judgement | None]:
    """Send one planned case and judge the real answer."""
    if pc.skip is not None:
        return _skipped(pc), None, None
    http = run.http
    wire = http.wire_headers(pc.headers, session=state.session_id)
    sent = tuple(run.redactor.redact_headers(wire.pairs))
    try:
        answer = http.send("POST", wire, pc.body)
    except UpstreamError as exc:
        if not http.reached:
            raise
        return ProbeResult(pc.name, pc.era, False, False, None, None, None, None,
                           f"no answer: {exc}", (), sent, _shown(pc.body)), None, None
    exchange = Exchange(
        request_headers=wire,
        request_body=pc.body,
        response_status=answer.status,
        response_headers=answer.headers,
        response_body=answer.body,
        era=pc.era,
        capabilities=state.inventory.extensions,
        tool_schemas=state.inventory.tool_schemas,
        legacy_session=pc.era is Era.LEGACY,
        negotiated_version=state.negotiated,
    )
    judgement = judge(exchange)
    outcome = _excused(run, pc, _verdict(pc, answer, judgement, sent))
    secrets = run.redactor.removed_values(
        (wire.pairs, answer.headers.pairs),
        (judgement.request_message, *judgement.response_messages))
    return _scrubbed(run.redactor, outcome, secrets), answer, judgement


def _scrubbed(redactor: Redactor, r: ProbeResult, secrets: Sequence[str]) -> ProbeResult:
    """``r`` with secrets (operator credentials, cookies the server set) out of its text.

    Finding messages and the detail quote wire values, and the body is shown as received;
    the report is printed and kept by CI, so it gets the evidence's redaction.
    """
    return replace(
        r,
        detail=redactor.scrub(r.detail, secrets),
        body=None if r.body is None else redactor.scrub(r.body, secrets),
        findings=tuple(replace(f, message=redactor.scrub(f.message, secrets))
                       for f in r.findings),
    )


# --- inventory ----------------------------------------------------------------------------


def _modern_request(method: str, request_id: str, params: Mapping[str, Any] | None = None
                    ) -> tuple[HeaderMap, bytes]:
    body_params = dict(params or {})
    body_params["_meta"] = {META_PROTOCOL_VERSION: MODERN_VERSION, META_CLIENT_CAPABILITIES: {}}
    headers = HeaderMap(((HEADER_PROTOCOL_VERSION, MODERN_VERSION), (HEADER_METHOD, method)))
    body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": body_params}
    return headers, orjson.dumps(body)


def _legacy_request(method: str, request_id: str, negotiated: str,
                    params: Mapping[str, Any] | None = None) -> tuple[HeaderMap, bytes]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params:
        body["params"] = dict(params)
    return HeaderMap(((HEADER_PROTOCOL_VERSION, negotiated),)), orjson.dumps(body)


def _pages(http: HttpClient, state: _Session, method: str, key: str
           ) -> tuple[list[Any], str | None]:
    """Every item of a paginated list method, or the reason it could not be listed."""
    items: list[Any] = []
    cursor: str | None = None
    for page in range(_INVENTORY_PAGES):
        params = {"cursor": cursor} if cursor else None
        request_id = f"probe-inventory-{method}-{page}"
        if state.era is Era.MODERN:
            headers, body = _modern_request(method, request_id, params)
        else:
            headers, body = _legacy_request(method, request_id, state.negotiated or "", params)
        try:
            answer = http.post(headers, body, session=state.session_id)
        except UpstreamError as exc:
            if not http.reached:
                raise
            return items, f"{method}: no answer ({exc})"
        final = _final(_messages(answer))
        result = final.get("result") if final else None
        if not isinstance(result, dict) or not isinstance(result.get(key), list):
            return items, f"{method}: {_answer_summary(answer.status, final)}"
        items += result[key]
        cursor = result.get("nextCursor") if isinstance(result.get("nextCursor"), str) else None
        if not cursor:
            break
    return items, None


def _named(items: Iterable[Any], key: str) -> dict[str, Mapping[str, Any]]:
    return {item[key]: item for item in items
            if isinstance(item, dict) and isinstance(item.get(key), str)}


def _inventory(http: HttpClient, state: _Session, extensions: frozenset[str]) -> Inventory:
    """Learn the server's tools, prompts and resources (best effort; the reasons are kept)."""
    found: dict[str, list[Any]] = {}
    problems: list[str] = []
    for method, key in (("tools/list", "tools"), ("prompts/list", "prompts"),
                        ("resources/list", "resources")):
        found[key], problem = _pages(http, state, method, key)
        problems += [problem] if problem else []
    return Inventory(
        tools=_named(found["tools"], "name"),
        prompts=_named(found["prompts"], "name"),
        resources=tuple(_named(found["resources"], "uri")),
        extensions=extensions,
        problems=tuple(problems),
    )


def _extensions(capabilities: Any) -> frozenset[str]:
    ext = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    return frozenset(ext) if isinstance(ext, dict) else frozenset()


def _modern_extensions(http: HttpClient) -> frozenset[str]:
    """The extensions ``server/discover`` advertises (none when it does not answer)."""
    headers, body = _modern_request("server/discover", "probe-inventory-discover")
    final = _final(_messages(http.post(headers, body)))
    result = final.get("result") if final else None
    return _extensions(result.get("capabilities") if isinstance(result, dict) else None)


# --- eras ---------------------------------------------------------------------------------


def _run_planned(run: _Run, planned: Iterable[ProbeCase], state: _Session
                 ) -> list[ProbeResult]:
    return [_run_case(run, pc, state)[0] for pc in planned]


def _run_modern(run: _Run, cases: Sequence[Case]) -> tuple[list[ProbeResult], list[str]]:
    state = _Session(Era.MODERN)
    state.inventory = _inventory(run.http, state, _modern_extensions(run.http))
    run.learned(state)
    planned, unprobeable = plan_cases(cases, Era.MODERN, state.inventory)
    return _run_planned(run, planned, state), unprobeable


_DEFAULT_INITIALIZE: Final[dict[str, Any]] = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": PINNED_LEGACY_VERSION, "capabilities": {},
               "clientInfo": {"name": "mcp-tap-probe", "version": "1"}},
}


def _handshake_case(cases: Sequence[Case], method: str) -> ProbeCase:
    """The corpus's own handshake message for ``method`` (or a built-in one)."""
    for case in cases:
        if _is_handshake(case) and case.request.get("method") == method:
            expect = Expect.ACCEPTED if method.startswith("notifications/") else Expect.RESULT
            return ProbeCase(case.name, Era.LEGACY, _legacy_headers(case.headers, None),
                             _body_bytes(case.request), expect)
    if method == "initialize":
        return ProbeCase("probe-legacy-initialize", Era.LEGACY, HeaderMap(),
                         orjson.dumps(_DEFAULT_INITIALIZE), Expect.RESULT)
    return ProbeCase("probe-legacy-initialized", Era.LEGACY,
                     HeaderMap(((HEADER_PROTOCOL_VERSION, PINNED_LEGACY_VERSION),)),
                     orjson.dumps({"jsonrpc": "2.0", "method": method}), Expect.ACCEPTED)


def _run_legacy(run: _Run, cases: Sequence[Case]) -> tuple[list[ProbeResult], list[str]]:
    state = _Session(Era.LEGACY)
    init_result, answer, judgement = _run_case(run, _handshake_case(cases, "initialize"), state)
    results = [init_result]
    final = _final(judgement.response_messages) if judgement else None
    result = final.get("result") if final else None
    result = result if isinstance(result, dict) else {}
    version = result.get("protocolVersion")
    failure = None
    if not init_result.passed:
        failure = f"legacy handshake failed: {init_result.detail}"
    elif version not in LEGACY_VERSIONS:
        failure = f"legacy handshake failed: initialize answered protocolVersion {version!r}"
    if failure is None and answer is not None and isinstance(version, str):
        state.session_id = answer.headers.get(HEADER_SESSION_ID)
        state.negotiated = version
        notified = _handshake_case(cases, "notifications/initialized")
        notified = ProbeCase(notified.name, notified.era,
                             _legacy_headers(notified.headers, version),
                             notified.body, notified.expect)
        results.append(_run_case(run, notified, state)[0])
        state.inventory = _inventory(run.http, state, _extensions(result.get("capabilities")))
        run.learned(state)
    planned, unprobeable = plan_cases([*cases, *legacy_extra_cases()], Era.LEGACY,
                                      state.inventory, negotiated=state.negotiated)
    if failure is not None:
        return results + [_skipped(pc, failure) for pc in planned], unprobeable
    results += _run_planned(run, planned, state)
    run.close_session(state.session_id, state.negotiated or PINNED_LEGACY_VERSION)
    return results, unprobeable


def run_probe(
    target: str,
    *,
    eras: Sequence[Era] = (Era.MODERN, Era.LEGACY),
    headers: Sequence[tuple[str, str]] = (),
    timeout: float = DEFAULT_TIMEOUT,
    cases: Sequence[Case] | None = None,
    transport: httpx.BaseTransport | None = None,
) -> ProbeReport:
    """Probe ``target`` in each of ``eras`` with ``cases`` (default: the shipped corpus).

    ``headers`` are sent on every request (authentication); ``transport`` replaces httpx's
    network transport (tests). Raises :class:`InputError` for a bad target, header, era or
    timeout and :class:`UpstreamError` when the target cannot be reached at all.
    """
    _check_target(target)
    for name, value in headers:
        check_header(name, value, f"header {name}")
    check_timeout(timeout)
    for era in eras:
        if era not in (Era.MODERN, Era.LEGACY):
            raise InputError(f"--era must be modern or legacy, got {era!r}")
    corpus = load_corpus() if cases is None else list(cases)
    results: list[ProbeResult] = []
    unprobeable: list[str] = []
    with HttpClient(target, headers=headers, timeout=timeout, transport=transport) as http:
        run = _Run(http)
        for era in eras:
            runner = _run_modern if era is Era.MODERN else _run_legacy
            era_results, era_unprobeable = runner(run, corpus)
            results += era_results
            unprobeable += era_unprobeable
    return ProbeReport(shown_url(target), tuple(eras), tuple(results), tuple(unprobeable),
                       tuple(run.notes))
