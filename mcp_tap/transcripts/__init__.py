"""Transcript fixtures: load them, turn each into an exchange, judge it with the core.

A fixture file holds one case object or a list of them, in the format of
``docs/transcripts.md``. A case passes when the engine's verdict meets its expectation:
a golden case (no ``expectedErrorCode``, no ``expectedRule``) must produce no finding; a
negative case must produce a finding with ``expectedErrorCode`` (and ``expectedRule`` when
given; a rule without a JSON-RPC code, such as ``sse.unterminated``, is expected by
``expectedRule`` alone) **and** no response-side finding the case did not expect: a
request the server owed 400/-32020 and answered with HTTP 500 fails, even though the
request-side rejection matched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

import orjson

from mcp_tap.core.catalog import CATALOG
from mcp_tap.core.eras import Era, is_legacy_version
from mcp_tap.core.exchange import Exchange, Judgement, judge
from mcp_tap.core.findings import Boundary, Finding
from mcp_tap.core.hashing import digest
from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.redaction import Redactor
from mcp_tap.core.responses import decode_sse
from mcp_tap.core.resume import awaiting_resumption
from mcp_tap.core.sse import encode_event
from mcp_tap.errors import InputError
from mcp_tap.files import read_file

_KEYS = {
    "name",
    "era",
    "capabilities",
    "headers",
    "request",
    "responseStatus",
    "responseHeaders",
    "responseBody",
    "expectedErrorCode",
    "expectedRule",
    "toolSchemas",
    "outputSchemas",
    "clientCapabilities",
    "protocolVersion",
    "description",
    "httpMethod",
    "probe",
}


@dataclass(frozen=True, slots=True)
class Case:
    """One transcript case, validated."""

    name: str
    era: Era
    headers: HeaderMap
    request: Any
    response_status: int | None
    response_headers: HeaderMap
    response_body: Any
    expected_code: int | None
    expected_rule: str | None
    capabilities: frozenset[str] = frozenset()
    tool_schemas: dict[str, Any] = field(default_factory=dict)
    protocol_version: str | None = None
    output_schemas: dict[str, Any] = field(default_factory=dict)
    client_capabilities: dict[str, Any] | None = None
    source: str = ""
    http_method: str = "POST"
    probe: bool = True

    @property
    def golden(self) -> bool:
        """Whether the case must be accepted."""
        return self.expected_code is None and self.expected_rule is None


@dataclass(frozen=True, slots=True)
class CaseResult:
    """A judged case: the JSON shape of ``mcp-tap transcripts --json``."""

    name: str
    passed: bool
    rule: str | None
    code: int | None
    detail: str
    evidence_digest: str
    findings: tuple[Finding, ...] = ()
    strength: str | None = None
    assumed: tuple[tuple[str, str], ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The case entry of the JSON report (``assumedHeaders``: see :func:`assumed_headers`)."""
        return {
            "name": self.name,
            "passed": self.passed,
            "rule": self.rule,
            "code": self.code,
            "strength": self.strength,
            "detail": self.detail,
            "evidenceDigest": self.evidence_digest,
            "assumedHeaders": [list(p) for p in self.assumed],
        }


def _headers(value: Any, where: str) -> HeaderMap:
    if value is None:
        return HeaderMap()
    if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        return HeaderMap.of(value)
    if isinstance(value, list) and all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in value
    ):
        return HeaderMap.of(value)
    raise ValueError(f"{where} must be an object of strings or a list of [name, value] pairs")


def parse_case(data: Any, source: str = "") -> Case:
    """Validate one fixture object; raises ``ValueError`` saying what is wrong."""
    if not isinstance(data, dict):
        raise ValueError("a case must be a JSON object")
    unknown = set(data) - _KEYS
    if unknown:
        raise ValueError(f"unknown key(s) {sorted(unknown)}")
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError("name must be a non-empty string")
    version = data.get("protocolVersion")
    if version is not None and not isinstance(version, str):
        raise ValueError(f"case {name}: protocolVersion must be a string")
    # Without an explicit era, the negotiated revision decides it (a legacy revision: the
    # legacy era); a case with neither is modern.
    negotiated = Era.LEGACY if is_legacy_version(version) else Era.MODERN
    try:
        era = Era(data.get("era", negotiated))
    except ValueError:
        raise ValueError(f'case {name}: era must be "modern" or "legacy"') from None
    if era is Era.UNKNOWN:
        raise ValueError(f'case {name}: era must be "modern" or "legacy"')
    if "request" not in data:
        raise ValueError(f"case {name}: request is required")
    status = data.get("responseStatus")
    if status is not None and (
        not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 599
    ):
        raise ValueError(f"case {name}: responseStatus must be an HTTP status integer")
    code = data.get("expectedErrorCode")
    if code is not None and (not isinstance(code, int) or isinstance(code, bool)):
        raise ValueError(f"case {name}: expectedErrorCode must be null or an integer")
    rule = data.get("expectedRule")
    if rule is not None and rule not in CATALOG:
        raise ValueError(f"case {name}: expectedRule {rule!r} is not in the rule catalog")
    caps = data.get("capabilities", [])
    if not isinstance(caps, list) or not all(isinstance(c, str) for c in caps):
        raise ValueError(f"case {name}: capabilities must be a list of strings")
    body = data.get("responseBody")
    if isinstance(body, dict) and "sse" in body and not isinstance(body["sse"], list):
        raise ValueError(f"case {name}: responseBody.sse must be a list of events")
    schemas = data.get("toolSchemas", {})
    if not isinstance(schemas, dict):
        raise ValueError(f"case {name}: toolSchemas must be an object")
    outputs = data.get("outputSchemas", {})
    if not isinstance(outputs, dict):
        raise ValueError(f"case {name}: outputSchemas must be an object")
    declared = data.get("clientCapabilities")
    if declared is not None and not isinstance(declared, dict):
        raise ValueError(f"case {name}: clientCapabilities must be an object")
    probe = data.get("probe", True)
    if not isinstance(probe, bool):
        raise ValueError(f"case {name}: probe must be a boolean")
    http_method = data.get("httpMethod", "POST")
    if http_method not in ("POST", "GET", "DELETE", "OPTIONS"):
        raise ValueError(f"case {name}: httpMethod must be POST, GET, DELETE or OPTIONS")
    return Case(
        name=name,
        era=era,
        headers=_headers(data.get("headers"), f"case {name}: headers"),
        request=data["request"],
        response_status=status,
        response_headers=_headers(data.get("responseHeaders"), f"case {name}: responseHeaders"),
        response_body=body,
        expected_code=code,
        expected_rule=rule,
        capabilities=frozenset(caps),
        tool_schemas=schemas,
        protocol_version=version,
        output_schemas=outputs,
        client_capabilities=declared,
        source=source,
        http_method=http_method,
        probe=probe,
    )


def load_file(path: str | Path) -> list[Case]:
    """Load every case of one fixture file; raises :class:`InputError` naming file and cause."""
    raw = read_file(path, "fixture file")
    return load_bytes(raw, str(path))


def load_bytes(raw: bytes, source: str) -> list[Case]:
    """Load cases from fixture bytes; ``source`` names them in errors (an empty list is one)."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"{source}: not valid JSON ({exc})") from None
    items = data if isinstance(data, list) else [data]
    if not items:
        raise InputError(f"{source}: holds no case (an empty list); a fixture file needs one")
    cases: list[Case] = []
    for i, item in enumerate(items):
        try:
            cases.append(parse_case(item, source))
        except ValueError as exc:
            raise InputError(f"{source}: case #{i}: {exc}") from None
    return cases


def corpus_files() -> list[tuple[str, bytes]]:
    """The shipped corpus as ``(name, bytes)`` pairs, in a stable order."""
    root = resources.files("mcp_tap.transcripts") / "corpus"
    return sorted(
        (f"corpus/{entry.name}", entry.read_bytes())
        for entry in root.iterdir()
        if entry.name.endswith(".json")
    )


def load_corpus() -> list[Case]:
    """Every case of the shipped corpus; names are unique."""
    cases: list[Case] = []
    for name, raw in corpus_files():
        cases += load_bytes(raw, name)
    return cases


def _body_bytes(value: Any) -> bytes:
    if value is None:
        return b""
    if isinstance(value, str):
        return value.encode("utf-8")
    return orjson.dumps(value)


def response_bytes(case: Case) -> tuple[HeaderMap, bytes]:
    """The response headers and body bytes a case describes (content type filled in)."""
    body = case.response_body
    headers = case.response_headers
    if isinstance(body, dict) and "sse" in body and set(body) == {"sse"}:
        data = b"".join(
            encode_event(e if isinstance(e, str) else orjson.dumps(e).decode("utf-8"))
            for e in body["sse"]
        )
        default_type = "text/event-stream"
    else:
        data = _body_bytes(body)
        default_type = "application/json" if data else ""
    if "content-type" not in headers and default_type:
        headers = HeaderMap((*headers.pairs, ("Content-Type", default_type)))
    return headers, data


# What a conforming client sends (2026-07-28 streamable-http "Sending Messages"; 2025-11-25
# transports "Sending Messages to the Server" / "Listening for Messages from the Server").
_CONFORMING_POST = (("Accept", "application/json, text/event-stream"),
                    ("Content-Type", "application/json"))
_CONFORMING_GET = (("Accept", "text/event-stream"),)


def assumed_headers(case: Case) -> tuple[tuple[str, str], ...]:
    """The transport headers a fixture omits and is judged as having (one rule, documented).

    A fixture written as the design lesson writes them records only the headers it is about
    (``MCP-Protocol-Version``, ``Mcp-Method``): an omitted ``Accept`` / ``Content-Type`` gets
    the value a conforming client sends, reported as assumed. A fixture that gives one is
    judged on it; captured exchanges never pass through here and are judged as recorded.
    """
    method = case.http_method.upper()
    pairs = _CONFORMING_POST if method == "POST" else _CONFORMING_GET if method == "GET" else ()
    given = case.headers.by_name()
    return tuple((n, v) for n, v in pairs if n.lower() not in given)


def case_exchange(case: Case) -> Exchange:
    """The exchange a case describes, ready for :func:`mcp_tap.core.exchange.judge`.

    Its request headers are the fixture's plus :func:`assumed_headers`.
    """
    headers, body = response_bytes(case)
    assumed = assumed_headers(case)
    return Exchange(
        request_headers=HeaderMap((*case.headers.pairs, *assumed)) if assumed else case.headers,
        request_body=_body_bytes(case.request),
        response_status=case.response_status,
        response_headers=headers,
        response_body=body,
        era=case.era,
        capabilities=case.capabilities,
        tool_schemas=case.tool_schemas,
        legacy_session=case.era is Era.LEGACY,
        negotiated_version=case.protocol_version,
        http_method=case.http_method,
        output_schemas=case.output_schemas,
        session_capabilities=case.client_capabilities,
    )


def evidence(case: Case, redactor: Redactor) -> dict[str, Any]:
    """The redacted evidence of one case (what its digest covers)."""
    return {
        "name": case.name,
        "era": str(case.era),
        "capabilities": sorted(case.capabilities),
        "headers": [list(p) for p in redactor.redact_headers(case.headers.pairs)],
        "request": redactor.redact_message(case.request),
        "responseStatus": case.response_status,
        "responseHeaders": [list(p) for p in redactor.redact_headers(case.response_headers.pairs)],
        "responseBody": redactor.redact_json(case.response_body),
        "expectedErrorCode": case.expected_code,
        "expectedRule": case.expected_rule,
        # Judgement inputs beyond the fixture's base keys (docs/transcripts.md marks them
        # *extension*): a change to them changes the verdict,
        # so it must change the digest too.
        "toolSchemas": redactor.redact_json(case.tool_schemas),
        **({"outputSchemas": redactor.redact_json(case.output_schemas)}
           if case.output_schemas else {}),  # absent when unused: older digests stay
        **({"clientCapabilities": redactor.redact_json(case.client_capabilities)}
           if case.client_capabilities is not None else {}),
        "protocolVersion": case.protocol_version,
        "httpMethod": case.http_method,
    }


def _matches(case: Case, f: Finding) -> bool:
    if case.expected_rule is not None and f.rule != case.expected_rule:
        return False
    return case.expected_code is None or f.code == case.expected_code


def _result(
    case: Case,
    passed: bool,
    shown: Finding | None,
    detail: str,
    ev: str,
    found: tuple[Finding, ...],
) -> CaseResult:
    return CaseResult(
        case.name,
        passed,
        shown.rule if shown else None,
        shown.code if shown else None,
        detail,
        ev,
        found,
        str(shown.strength) if shown else None,
        assumed_headers(case),
    )


def verdict(expected: Callable[[Finding], bool], found: Sequence[Finding]) -> tuple[
        bool, Finding | None, str]:
    """Whether findings meet a negative expectation: ``(passed, finding to show, detail)``.

    The expected finding must be present, and when it is a request-side rejection no
    response-side finding it does not cover: a rejection the server answered wrongly (HTTP
    500 for a header mismatch) fails the case. A case that expects a response-side finding
    is about the answer already; what else that answer broke is shown, not held against it.
    ``probe`` applies the same rule to what a live server answered.
    """
    match = next((f for f in found if expected(f)), None)
    extra = None
    if match is not None and match.boundary is Boundary.REQUEST:
        # Any response-side finding: the owed-answer rules carry the code the request was
        # owed (-32020), so matching the expected code does not make the answer right.
        extra = next((f for f in found if f.boundary is Boundary.RESPONSE), None)
    if match is None:
        shown = found[0] if found else None
        if shown is None:
            return False, None, "accepted, but the case expects a rejection"
        return False, shown, f"expected finding missing, got {shown.rule}: {shown.message}"
    if extra is not None:
        return False, extra, (
            f"{match.rule} as expected, but the answer broke {extra.rule}: {extra.message}")
    return True, match, f"{match.rule}: {match.message}"
# Transcripts are files the operator holds, so their session ids are no secret from the
# reader; a fixed pseudonym key keeps each case's evidence digest the same across runs.
_PSEUDONYM_KEY = b"mcp-tap transcripts: session pseudonyms"


def judge_alone(exchange: Exchange) -> tuple[Judgement, tuple[Finding, ...]]:
    """Judge one exchange with nothing after it, as a case is: the judgement and its findings,
    a legacy stream that closed after an event id held as the proxy holds it until its
    resumption (:func:`mcp_tap.core.resume.awaiting_resumption`)."""
    result = judge(exchange)
    judged = result.findings
    if result.era is Era.LEGACY and exchange.response_headers.content_type() == "text/event-stream":
        events, _ = decode_sse(exchange.response_body)
        judged = tuple(awaiting_resumption(result.request, events, judged))
    return result, judged


def run_case(case: Case, redactor: Redactor | None = None) -> CaseResult:
    """Judge one case and say whether it met its expectation."""
    red = redactor or Redactor(pseudonym_key=_PSEUDONYM_KEY)
    result, judged = judge_alone(case_exchange(case))
    # Finding messages quote wire values; the output is printed, so a secret in a fixture
    # (a credential header, a password argument) is scrubbed from them as from evidence.
    secrets = red.removed_values(
        (case.headers.pairs, case.response_headers.pairs),
        (result.request_message, *result.response_messages))
    found = tuple(replace(f, message=red.scrub(f.message, secrets)) for f in judged)
    ev_digest = digest(evidence(case, red))
    if case.golden:
        first = found[0] if found else None
        detail = "accepted" if first is None else f"{first.rule}: {first.message}"
        return _result(case, first is None, first, detail, ev_digest, found)
    passed, shown, detail = verdict(lambda f: _matches(case, f), found)
    if not passed and shown is not None and "expected finding missing" in detail:
        wanted = case.expected_rule or case.expected_code
        detail = f"expected {wanted}, got {shown.rule}: {shown.message}"
    return _result(case, passed, shown, detail, ev_digest, found)


def run_cases(cases: Iterable[Case], redactor: Redactor | None = None) -> list[CaseResult]:
    """Judge many cases; duplicate names are an input error."""
    seen: set[str] = set()
    out: list[CaseResult] = []
    red = redactor or Redactor(pseudonym_key=_PSEUDONYM_KEY)
    for case in cases:
        if case.name in seen:
            raise InputError(f"{case.source}: duplicate case name {case.name!r}")
        seen.add(case.name)
        out.append(run_case(case, red))
    return out


def report(results: Sequence[CaseResult]) -> dict[str, Any]:
    """The ``mcp-tap transcripts --json`` object."""
    return {
        "passed": sum(r.passed for r in results),
        "total": len(results),
        "cases": [r.to_json() for r in results],
    }
