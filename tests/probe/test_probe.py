"""Tests for ``mcp_tap.probe`` and ``mcp-tap probe``: live probing judged by the core.

Real peers only for the verdicts: the real ``mcp==2.3.0`` server (the demo origin, started
on loopback by :func:`peers.run_origin`) in both eras, and a deliberately non-conformant
``aiohttp.web`` server started in this file. The planner tests need no network.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from aiohttp import web
from peers import free_port, run_origin
from threaded_server import serve_in_thread

from mcp_tap.cli import main
from mcp_tap.commands.probe import outcome
from mcp_tap.core.eras import Era
from mcp_tap.core.headers import HeaderMap
from mcp_tap.errors import InputError, UpstreamError
from mcp_tap.probe import (
    Expect,
    Inventory,
    ProbeCase,
    ProbeReport,
    ProbeResult,
    is_probeable,
    legacy_extra_cases,
    plan_cases,
    run_probe,
)
from mcp_tap.transcripts import load_corpus

CORPUS = {case.name: case for case in load_corpus()}

# The real SDK's genuine non-conformances the probe finds (both in the legacy transport):
# an invalid JSON-RPC envelope gets -32602 (Invalid params) instead of the owed -32600.
KNOWN_SDK_FAULTS = {
    # The standard JSON-RPC code is a SHOULD (a warning), but a warning still fails the case.
    ("legacy", "negative-legacy-batch"): ("response.expected-error.jsonrpc", -32600),
    ("legacy", "probe-legacy-jsonrpc-version"): ("response.expected-error.jsonrpc", -32600),
}

ECHO = {
    "name": "echo",
    "description": "Echo.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}},
                    "required": ["text"]},
}
ADD = {
    "name": "add",
    "description": "Add.",
    "inputSchema": {"type": "object",
                    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                    "required": ["a", "b"]},
}
LOOKUP = {
    "name": "lookup",
    "description": "Lookup.",
    "inputSchema": {"type": "object",
                    "properties": {"region": {"type": "string", "x-mcp-header": "Region"},
                                   "query": {"type": "string"}},
                    "required": ["region", "query"]},
}


def _planned(names: list[str], inventory: Inventory, era: Era = Era.MODERN) -> dict[str, ProbeCase]:
    """Plan the named corpus cases against ``inventory``, keyed by case name."""
    planned, _ = plan_cases([CORPUS[n] for n in names], era, inventory,
                            negotiated="2025-11-25" if era is Era.LEGACY else None)
    return {pc.name: pc for pc in planned}


def _by_name(report: ProbeReport, era: str) -> dict[str, ProbeResult]:
    """The report's results of one era, keyed by case name."""
    return {r.name: r for r in report.results if str(r.era) == era}


# --- a deliberately non-conformant server ------------------------------------------------


def _json(body: Any, status: int = 200) -> web.Response:
    """A compact JSON answer (orjson), so tests can compare the exact body text."""
    return web.Response(body=orjson.dumps(body), status=status, content_type="application/json")


def _rpc_error(request_id: Any, code: int, message: str, status: int) -> web.Response:
    return _json({"jsonrpc": "2.0", "id": request_id,
                  "error": {"code": code, "message": message}}, status)


Handler = Callable[[web.Request], Awaitable[web.Response]]


async def _faulty_mcp(request: web.Request) -> web.Response:
    """A modern-only MCP endpoint with three faults: 500 for header mismatches, a JSON body
    for notifications, and results without ``resultType``."""
    try:
        message = orjson.loads(await request.read())
    except orjson.JSONDecodeError:
        return _rpc_error(None, -32700, "Parse error", 400)
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return _rpc_error(None, -32600, "Invalid Request", 400)
    method = message.get("method")
    params: dict[str, Any] = message["params"] if isinstance(message.get("params"), dict) else {}
    if "id" not in message:
        # Fault: a notification gets a JSON-RPC body instead of 202 with nothing.
        return _json({"jsonrpc": "2.0", "result": {}}, 202)
    request_id = message["id"]
    name_routed = method in ("tools/call", "prompts/get")
    if request.headers.get("Mcp-Method") != method or (
            name_routed and request.headers.get("Mcp-Name") != params.get("name")):
        # Fault: a header mismatch gets a bare 500 instead of 400/-32020.
        return web.Response(status=500)
    meta: dict[str, Any] = params["_meta"] if isinstance(params.get("_meta"), dict) else {}
    version = meta.get("io.modelcontextprotocol/protocolVersion")
    if "io.modelcontextprotocol/clientCapabilities" not in meta or version is None:
        return _rpc_error(request_id, -32602, "Missing _meta", 400)
    if version != "2026-07-28":
        return _json({"jsonrpc": "2.0", "id": request_id, "error": {
            "code": -32022, "message": "Unsupported protocol version",
            "data": {"supported": ["2026-07-28"], "requested": version}}}, 400)
    # Fault: no result carries resultType.
    if method == "tools/list":
        result: dict[str, Any] = {"tools": [ECHO], "ttlMs": 0, "cacheScope": "private"}
    elif method == "tools/call" and params.get("name") == "echo":
        text = (params.get("arguments") or {}).get("text", "")
        result = {"content": [{"type": "text", "text": text}]}
    else:
        return _rpc_error(request_id, -32601, "Method not found", 404)
    return _json({"jsonrpc": "2.0", "id": request_id, "result": result})


@contextlib.contextmanager
def run_faulty(handler: Handler = _faulty_mcp) -> Iterator[str]:
    """Serve a faulty aiohttp app on a free loopback port in a thread; yield its URL."""
    app = web.Application()
    app.router.add_post("/mcp", handler)
    with serve_in_thread(app, "faulty-mcp") as base:
        yield f"{base}/mcp"


@pytest.fixture(scope="module")
def origin() -> Iterator[str]:
    """The real SDK server (demo origin subprocess), one per module."""
    with run_origin() as url:
        yield url


@pytest.fixture(scope="module")
def faulty() -> Iterator[str]:
    """The deliberately non-conformant aiohttp server, one per module."""
    with run_faulty() as url:
        yield url


@pytest.fixture(scope="module")
def sdk_report(origin: str) -> ProbeReport:
    """One probe of the real SDK server in both eras."""
    return run_probe(origin)


@pytest.fixture(scope="module")
def faulty_report(faulty: str) -> ProbeReport:
    """One probe of the faulty server in both eras."""
    return run_probe(faulty)


# --- units ----------------------------------------------------------------------------------


class TestIsProbeable:
    """is_probeable: golden and request-side negative cases are probeable, response-side not."""

    def test_golden_case_is_probeable(self) -> None:
        """A golden request is sent."""
        assert is_probeable(CORPUS["golden-modern-list"])

    def test_request_side_negative_is_probeable(self) -> None:
        """A negative case whose fault is in the request is sent."""
        assert is_probeable(CORPUS["negative-header-body-mismatch"])

    def test_response_side_negative_is_not_probeable(self) -> None:
        """A negative case describing a faulty response is not sent."""
        assert not is_probeable(CORPUS["negative-missing-result-type"])


class TestPlanCases:
    """plan_cases: corpus requests adapted to the live server's inventory, or skipped."""

    def test_existing_tool_is_sent_as_written(self) -> None:
        """A call to a tool the server has keeps the corpus body and headers."""
        pc = _planned(["golden-modern-call"], Inventory(tools={"echo": ECHO}))["golden-modern-call"]
        case = CORPUS["golden-modern-call"]
        assert (pc.expect, pc.skip, pc.notes) == (Expect.RESULT, None, ())
        assert orjson.loads(pc.body) == case.request
        assert pc.headers == case.headers

    def test_missing_plain_tool_is_substituted(self) -> None:
        """A plain call to a missing tool calls the first callable listed tool instead."""
        inv = Inventory(tools={"lookup": LOOKUP, "add": ADD})
        pc = _planned(["golden-modern-call"], inv)["golden-modern-call"]
        params = orjson.loads(pc.body)["params"]
        assert (params["name"], params["arguments"]) == ("add", {"a": 1, "b": 1})
        assert pc.headers.get("Mcp-Name") == "add"
        assert pc.notes == (
            "tool 'echo' is not on the server: called 'add' with {\"a\":1,\"b\":1}",)

    def test_server_param_headers_are_added(self) -> None:
        """A golden call gets the Mcp-Param-* headers the server's tool declares."""
        echo = {**ECHO, "inputSchema": {"type": "object", "properties": {
            "text": {"type": "string", "x-mcp-header": "Text"}}, "required": ["text"]}}
        pc = _planned(["golden-modern-call"], Inventory(tools={"echo": echo}))["golden-modern-call"]
        assert pc.headers.get("Mcp-Param-Text") == "hello"
        assert pc.notes == ("added Mcp-Param-Text for the server's x-mcp-header arguments",)

    def test_missing_task_tool_is_skipped_with_reason(self) -> None:
        """A case expecting a task result from a missing tool is skipped, saying why."""
        pc = _planned(["golden-modern-task"], Inventory(tools={"echo": ECHO}))["golden-modern-task"]
        assert pc.skip == "needs tool 'long_job' (the case expects a result of type 'task')"

    def test_sentinel_name_missing_tool_only_needs_routing(self) -> None:
        """A case about an encoded Mcp-Name is sent as is and must only pass the header checks."""
        name = "golden-modern-name-sentinel-unicode"
        pc = _planned([name], Inventory(tools={"echo": ECHO}))[name]
        assert pc.expect is Expect.ROUTED
        assert orjson.loads(pc.body) == CORPUS[name].request

    def test_param_header_needs_declaring_tool(self) -> None:
        """A case using Mcp-Param-Limit is skipped when the server's tool does not declare it."""
        name = "golden-modern-param-integer-numeric"
        pc = _planned([name], Inventory(tools={"lookup": LOOKUP}))[name]
        assert pc.skip == ("needs tool 'lookup' declaring x-mcp-header limit "
                           "(the server's 'lookup' does not)")

    def test_raw_whitespace_header_cannot_be_sent(self) -> None:
        """A header value with raw surrounding whitespace is skipped (HTTP/1.1 strips it)."""
        name = "negative-name-raw-whitespace"
        pc = _planned([name], Inventory())[name]
        assert pc.skip is not None and pc.skip.startswith("cannot be sent: Mcp-Name: ' padded'")

    def test_identical_duplicate_header_may_be_refused(self) -> None:
        """A golden case repeating a header line accepts a result or a -32020 rejection."""
        name = "golden-modern-identical-duplicate-header"
        assert _planned([name], Inventory())[name].expect is Expect.RESULT_OR_MISMATCH

    def test_response_side_cases_are_listed_as_not_probeable(self) -> None:
        """Response-side negatives are not planned but named."""
        cases = [CORPUS["golden-modern-list"], CORPUS["negative-missing-result-type"]]
        planned, unprobeable = plan_cases(cases, Era.MODERN, Inventory())
        assert [pc.name for pc in planned] == ["golden-modern-list"]
        assert unprobeable == ["negative-missing-result-type"]

    def test_legacy_case_drops_corpus_session_id(self) -> None:
        """A legacy case loses the corpus's session id (the live one is added when sending)."""
        pc = _planned(["golden-legacy-ping"], Inventory(), Era.LEGACY)["golden-legacy-ping"]
        assert pc.headers == HeaderMap((("Accept", "application/json, text/event-stream"),
                                        ("MCP-Protocol-Version", "2025-11-25")))

    def test_legacy_handshake_is_not_planned(self) -> None:
        """The corpus's initialize and initialized cases are the handshake, not plan entries."""
        names = ["golden-legacy-initialize", "golden-legacy-initialized-notification"]
        assert _planned(names, Inventory(), Era.LEGACY) == {}

    def test_legacy_extra_cases(self) -> None:
        """The probe adds an unknown-method and a bad-envelope case to the legacy era."""
        extra = {c.name: c for c in legacy_extra_cases()}
        assert sorted(extra) == ["probe-legacy-jsonrpc-version", "probe-legacy-method-not-found"]
        assert extra["probe-legacy-jsonrpc-version"].expected_rule == "request.envelope"


# --- the real SDK ---------------------------------------------------------------------------


class TestProbeRealSdk:
    """run_probe against the real mcp==2.3.0 server: every finding is a real one."""

    def test_only_known_sdk_faults_fail(self, sdk_report: ProbeReport) -> None:
        """The failed cases are exactly the SDK's genuine non-conformances, with their rules."""
        failed = {(str(r.era), r.name): (r.rule, r.code) for r in sdk_report.failed}
        assert failed == KNOWN_SDK_FAULTS

    def test_both_eras_were_probed(self, sdk_report: ProbeReport) -> None:
        """Each era has passing cases, and the legacy handshake ran."""
        modern, legacy = _by_name(sdk_report, "modern"), _by_name(sdk_report, "legacy")
        assert sum(r.passed for r in modern.values()) >= 40
        assert legacy["golden-legacy-initialize"].passed
        assert legacy["golden-legacy-initialized-notification"].http_status == 202

    def test_readme_shows_the_real_figures(self, sdk_report: ProbeReport) -> None:
        """The README's probe figures are this probe's (they went stale once, 69/71 and 127
        where the corpus had grown): its shown summary line and the prose."""
        readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
        summary = outcome(sdk_report).text.splitlines()[-1]
        shown = [line for line in readme.splitlines() if "probed cases passed, " in line]
        assert shown == [summary]
        probed = sdk_report.probed
        skipped = len(sdk_report.results) - len(probed)
        prose = (f"passes {sum(r.passed for r in probed)} of {len(probed)} probed cases in "
                 f"both eras ({skipped} skipped")
        assert prose in " ".join(readme.split())

    def test_header_mismatch_answered_400_32020(self, sdk_report: ProbeReport) -> None:
        """A header/body mismatch is reported with its rule, the status and the exact body."""
        r = _by_name(sdk_report, "modern")["negative-header-body-mismatch"]
        assert (r.passed, r.rule, r.code, r.http_status) == (
            True, "request.header.mismatch", -32020, 400)
        assert orjson.loads(r.body or "")["error"]["code"] == -32020

    def test_unsupported_version_and_missing_meta(self, sdk_report: ProbeReport) -> None:
        """Unsupported versions get -32022 and missing metadata -32602, both with HTTP 400."""
        modern = _by_name(sdk_report, "modern")
        got = {n: (modern[n].passed, modern[n].rule, modern[n].code, modern[n].http_status)
               for n in ("negative-unsupported-version", "negative-missing-client-capabilities")}
        assert got == {
            "negative-unsupported-version": (True, "request.version.unsupported", -32022, 400),
            "negative-missing-client-capabilities": (True, "request.meta.missing", -32602, 400),
        }

    def test_notification_and_unknown_method(self, sdk_report: ProbeReport) -> None:
        """A notification gets 202 with an empty body; an unknown method 404/-32601."""
        modern = _by_name(sdk_report, "modern")
        note = modern["golden-modern-notification"]
        unknown = modern["golden-modern-method-not-found"]
        assert (note.passed, note.http_status, note.body) == (True, 202, "")
        assert (unknown.passed, unknown.http_status, unknown.code) == (True, 404, -32601)

    def test_headerless_request_allowed_for_dual_era_server(self, sdk_report: ProbeReport) -> None:
        """A server MAY read a header-less request as 2025-03-26: the SDK's legacy refusal
        (400, -32600, no id) is judged as that, with the request's finding only."""
        r = _by_name(sdk_report, "modern")["negative-missing-version-header"]
        assert r.passed and (r.rule, r.code, r.http_status) == (
            "request.header.missing", -32020, 400)
        assert [f.rule for f in r.findings] == ["request.header.missing"]

    def test_tool_less_cases_are_skipped_with_reason(self, sdk_report: ProbeReport) -> None:
        """Cases needing tools the server lacks say so instead of failing."""
        r = _by_name(sdk_report, "modern")["golden-modern-input-required"]
        assert (r.skipped, r.passed, r.detail) == (
            True, False,
            "skipped: needs tool 'deploy' (the case expects a result of type 'input_required')")

    def test_legacy_resource_not_found_code_equivalence(self, sdk_report: ProbeReport) -> None:
        """In a legacy session -32602 for an unknown resource is accepted for -32002."""
        r = _by_name(sdk_report, "legacy")["golden-legacy-error-32002"]
        assert (r.passed, r.code) == (True, -32602)
        assert r.detail.endswith("(accepted for -32002: the revisions disagree on this code, "
                                 "see SEP-2164)")

    def test_legacy_batch_fault_evidence(self, sdk_report: ProbeReport) -> None:
        """The SDK's -32602 for a batch is reported with the exact body it sent."""
        r = _by_name(sdk_report, "legacy")["negative-legacy-batch"]
        body = orjson.loads(r.body or "")
        assert (r.http_status, body["id"], body["error"]["code"]) == (400, None, -32602)
        assert r.detail.startswith("response.expected-error.jsonrpc (origin): request.envelope "
                                   "is owed JSON-RPC error -32600, got error -32602")
        assert {str(f.strength) for f in r.findings if f.rule.startswith("response.")} == {
            "should"}


# --- the faulty server ----------------------------------------------------------------------


class TestProbeFaultyServer:
    """run_probe against a non-conformant aiohttp server: each fault under its exact rule."""

    def test_header_mismatch_500_without_body(self, faulty_report: ProbeReport) -> None:
        """A mismatch answered with a bare 500 is response.header-mismatch-unanswered (-32020)."""
        r = _by_name(faulty_report, "modern")["negative-header-body-mismatch"]
        assert (r.passed, r.rule, r.code, r.http_status, r.body) == (
            False, "response.header-mismatch-unanswered", -32020, 500, "")

    def test_notification_with_json_body(self, faulty_report: ProbeReport) -> None:
        """A notification answered with a JSON body is notification.response (-32600)."""
        r = _by_name(faulty_report, "modern")["golden-modern-notification"]
        assert (r.passed, r.rule, r.code, r.http_status, r.body) == (
            False, "notification.response", -32600, 202, '{"jsonrpc":"2.0","result":{}}')

    def test_result_without_result_type(self, faulty_report: ProbeReport) -> None:
        """A modern result without resultType is response.result-type.missing (-32600)."""
        modern = _by_name(faulty_report, "modern")
        for name in ("golden-modern-list", "golden-modern-call"):
            r = modern[name]
            assert (r.passed, r.rule, r.code, r.http_status) == (
                False, "response.result-type.missing", -32600, 200), name

    def test_conformant_answers_still_pass(self, faulty_report: ProbeReport) -> None:
        """What the faulty server does right is not reported."""
        modern = _by_name(faulty_report, "modern")
        assert modern["negative-unsupported-version"].passed
        assert modern["golden-modern-method-not-found"].passed

    def test_inventory_refusals_are_notes(self, faulty_report: ProbeReport) -> None:
        """List methods the server refuses are notes, not findings."""
        assert "modern inventory: prompts/list: HTTP 404 with JSON-RPC error -32601" in (
            faulty_report.notes)

    def test_failed_handshake_skips_the_legacy_era(self, faulty_report: ProbeReport) -> None:
        """No legacy handshake: initialize fails and every other legacy case is skipped."""
        legacy = list(_by_name(faulty_report, "legacy").values())
        # The bare 500 is a plain HTTP answer (no JSON-RPC rule fits it); the case fails
        # because no initialize result came.
        assert (legacy[0].name, legacy[0].passed, legacy[0].rule) == (
            "golden-legacy-initialize", False, None)
        assert "expected a result" in legacy[0].detail
        assert len(legacy) > 1
        assert all(r.skipped and r.detail.startswith("skipped: legacy handshake failed")
                   for r in legacy[1:])


class TestTransportErrors:
    """HttpClient's error boundary: httpx errors become UpstreamError or a failed case."""

    def test_unreachable_target_raises_upstream_error(self) -> None:
        """Nothing listening: one line naming the target and the reason."""
        url = f"http://127.0.0.1:{free_port()}/mcp"
        with pytest.raises(UpstreamError) as info:
            run_probe(url, eras=(Era.MODERN,))
        assert str(info.value) == f"cannot reach {url}: connection refused"

    def test_no_answer_after_contact_fails_the_case(self) -> None:
        """Once the target answered, a case that times out fails with the reason."""

        def handler(request: httpx.Request) -> httpx.Response:
            if request.headers.get("Mcp-Method") == "server/discover":
                return httpx.Response(200, json={"jsonrpc": "2.0", "id": 1, "result": {}})
            raise httpx.ReadTimeout("timed out", request=request)

        report = run_probe("http://probe.invalid/mcp", eras=(Era.MODERN,), timeout=2,
                           cases=[CORPUS["golden-modern-list"]],
                           transport=httpx.MockTransport(handler))
        r = report.results[0]
        assert (r.passed, r.http_status, r.detail) == (
            False, None, "no answer: http://probe.invalid/mcp: no answer within 2 s")

    def test_bad_target_is_input_error(self) -> None:
        """A target that is not an http(s) URL is bad input."""
        with pytest.raises(InputError, match="is not an http:// or https:// URL"):
            run_probe("ftp://example.org/mcp")


# --- the command ----------------------------------------------------------------------------


class TestProbeCommand:
    """mcp-tap probe: JSON report, exit codes 0/1/2, one-line errors."""

    def test_json_shape_and_exit_0(self, origin: str, capsys: pytest.CaptureFixture[str]) -> None:
        """The modern era of the real SDK passes: exit 0 and the documented JSON shape."""
        code = main(["probe", "--target", origin, "--era", "modern", "--json"])
        out = capsys.readouterr()
        report = orjson.loads(out.out)
        assert code == 0 and out.err == ""
        assert set(report) == {"target", "eras", "ok", "total", "passed", "failed", "skipped",
                               "notProbeable", "notes", "cases"}
        assert (report["target"], report["eras"], report["ok"], report["failed"]) == (
            origin, ["modern"], True, 0)
        assert set(report["cases"][0]) == {"name", "era", "passed", "skipped", "rule", "code",
                                           "httpStatus", "body", "detail", "findings", "request"}

    def test_failures_exit_1(self, faulty: str, capsys: pytest.CaptureFixture[str]) -> None:
        """A non-conformant server: exit 1, the failed case names on stderr."""
        code = main(["probe", "--target", faulty, "--era", "modern"])
        out = capsys.readouterr()
        assert code == 1
        assert "FAIL modern negative-header-body-mismatch: HTTP 500 " \
               "response.header-mismatch-unanswered (-32020)" in out.out
        assert out.err.startswith("mcp-tap: ") and "negative-header-body-mismatch" in out.err

    def test_legacy_sdk_faults_exit_1(
            self, origin: str, capsys: pytest.CaptureFixture[str]) -> None:
        """The SDK's legacy faults make the default (both eras) run exit 1."""
        code = main(["probe", "--target", origin])
        err = capsys.readouterr().err
        assert code == 1
        assert err == ("mcp-tap: 2 probed case(s) failed: negative-legacy-batch, "
                       "probe-legacy-jsonrpc-version\n")

    def test_unreachable_target_exit_2(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Nothing listening: exit 2 and exactly one line on stderr, no traceback."""
        url = f"http://127.0.0.1:{free_port()}/mcp"
        code = main(["probe", "--target", url])
        out = capsys.readouterr()
        assert code == 2 and out.out == ""
        assert out.err == f"mcp-tap: upstream error: cannot reach {url}: connection refused\n"

    @pytest.mark.parametrize("argv", [
        ["--header", "Mcp-Method: x"],
        ["--header", "nocolon"],
    ])
    def test_bad_header_exit_2(self, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
        """A bad --header is bad input: exit 2 and one line."""
        code = main(["probe", "--target", "http://127.0.0.1:1/mcp", *argv])
        err = capsys.readouterr().err
        assert code == 2 and err.startswith("mcp-tap: error: --header") and err.count("\n") == 1

    def test_bad_era_is_usage_error(self, capsys: pytest.CaptureFixture[str]) -> None:
        """An unknown --era is a usage error (exit 2)."""
        with pytest.raises(SystemExit) as info:
            main(["probe", "--target", "http://127.0.0.1:1/mcp", "--era", "future"])
        assert info.value.code == 2
        assert "invalid choice" in capsys.readouterr().err

    def test_operator_header_is_sent_and_redacted(
            self, origin: str, capsys: pytest.CaptureFixture[str]) -> None:
        """--header reaches the server, and the report shows it redacted."""
        code = main(["probe", "--target", origin, "--era", "modern", "--json",
                     "--header", "Authorization: Bearer s3cret"])
        out = capsys.readouterr().out
        assert code == 0 and "s3cret" not in out
        sent = orjson.loads(out)["cases"][0]["request"]["headers"]
        assert [name for name, _ in sent].count("Authorization") == 1

    def test_header_from_the_environment_is_sent_and_redacted(
            self, origin: str, capsys: pytest.CaptureFixture[str],
            monkeypatch: pytest.MonkeyPatch) -> None:
        """--header-env NAME=VAR sends the value; the report keeps the scheme, not the secret."""
        monkeypatch.setenv("PROBE_TOKEN", "Bearer env-s3cret")
        code = main(["probe", "--target", origin, "--era", "modern", "--json",
                     "--header-env", "Authorization=PROBE_TOKEN"])
        out = capsys.readouterr().out
        assert code == 0 and "env-s3cret" not in out
        sent = orjson.loads(out)["cases"][0]["request"]["headers"]
        assert [value for name, value in sent if name == "Authorization"] == ["Bearer [REDACTED]"]


    def test_secrets_echoed_by_the_server_are_scrubbed(
            self, capsys: pytest.CaptureFixture[str]) -> None:
        """An operator credential or cookie the server quotes back never reaches the report."""
        key, cookie = "sk-live-8f2b1c9d", "sess-77aa31"

        async def echoing(request: web.Request) -> web.Response:
            try:
                message = orjson.loads(await request.read())
            except orjson.JSONDecodeError:  # the corpus's parse-error cases
                message = {}
            message = message if isinstance(message, dict) else {}
            error = {"code": -32603, "message": f"key {request.headers['X-Api-Key']} "
                                                f"cookie {cookie} refused"}
            response = _json({"jsonrpc": "2.0", "id": message.get("id"), "error": error}, 500)
            response.headers["Set-Cookie"] = f"sid={cookie}"
            return response

        with run_faulty(echoing) as url:
            code = main(["probe", "--target", url, "--era", "modern", "--json",
                         "--header", f"X-Api-Key: {key}"])
        out = capsys.readouterr().out
        cases = orjson.loads(out)["cases"]
        assert code == 1
        failed = [c for c in cases if not c["passed"] and not c["skipped"]]
        # The secrets were really quoted back: the scrubbed text shows where they were.
        assert failed and all("key [REDACTED] cookie [REDACTED] refused" in c["body"]
                              for c in failed)
        assert key not in out and cookie not in out


def test_corpus_names_are_unique() -> None:
    """The plan keys results by case name, so corpus names must be unique."""
    assert len(CORPUS) == len(load_corpus())
