"""Tests for transcript fixtures (mcp_tap.transcripts) and the `mcp-tap transcripts` command."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from mcp_tap.cli import main
from mcp_tap.core.eras import Era
from mcp_tap.errors import InputError
from mcp_tap.transcripts import (
    case_exchange,
    load_bytes,
    load_corpus,
    load_file,
    parse_case,
    report,
    response_bytes,
    run_case,
    run_cases,
)

MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}
GOLDEN: dict[str, Any] = {
    "name": "tmp-golden-call",
    "era": "modern",
    "headers": {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "echo",
    },
    "request": {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "hi"}, "_meta": META},
    },
    "responseStatus": 200,
    "responseBody": {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"resultType": "complete", "content": [{"type": "text", "text": "hi"}]},
    },
}
HEX64 = re.compile(r"[0-9a-f]{64}")


def case(**changes: Any) -> dict[str, Any]:
    """A deep copy of the golden case with top-level keys changed (None deletes a key)."""
    data = copy.deepcopy(GOLDEN)
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return data


def write(tmp_path: Path, content: Any, name: str = "cases.json") -> Path:
    """Write a fixture file (JSON value, or raw text/bytes as they are)."""
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_bytes(orjson.dumps(content))
    return path


def digest_of(data: dict[str, Any]) -> str:
    """The evidence digest run_case reports for a fixture object."""
    return run_case(parse_case(data)).evidence_digest


class TestCorpus:
    """The shipped corpus: every case meets its expectation, both eras, unique names."""

    def test_every_case_passes(self) -> None:
        """Every shipped case meets its expectation."""
        failed = [(r.name, r.detail) for r in run_cases(load_corpus()) if not r.passed]
        assert failed == []

    def test_size_and_eras(self) -> None:
        """At least 50 cases, with golden and negative cases in both eras."""
        cases = load_corpus()
        assert len(cases) >= 50
        for era in (Era.MODERN, Era.LEGACY):
            assert any(c.era is era and c.golden for c in cases), era
            assert any(c.era is era and not c.golden for c in cases), era

    def test_names_unique(self) -> None:
        """No two corpus cases share a name."""
        names = [c.name for c in load_corpus()]
        assert len(names) == len(set(names))

    def test_negative_cases_report_their_rule(self) -> None:
        """A passing negative case reports the expected rule (and code when one is expected)."""
        cases = {c.name: c for c in load_corpus()}
        for r in run_cases(cases.values()):
            c = cases[r.name]
            if c.golden:
                assert (r.rule, r.code) == (None, None), r.name
                continue
            if c.expected_rule is not None:
                assert r.rule == c.expected_rule, r.name
            if c.expected_code is not None:
                assert r.code == c.expected_code, r.name


class TestParseCase:
    """parse_case: the fixture format, including the extensions beyond product.md."""

    def test_golden_defaults(self) -> None:
        """A minimal case is modern, golden, without capabilities or schemas."""
        c = parse_case({"name": "n", "request": {"jsonrpc": "2.0", "method": "x"}})
        assert c.era is Era.MODERN
        assert c.golden
        assert c.capabilities == frozenset()
        assert c.tool_schemas == {}
        assert c.protocol_version is None
        assert c.response_status is None

    def test_extensions(self) -> None:
        """toolSchemas, protocolVersion and description are accepted."""
        c = parse_case(
            case(
                toolSchemas={"echo": {"type": "object"}},
                protocolVersion="2025-11-25",
                description="why this case exists",
                capabilities=["io.modelcontextprotocol/tasks"],
            )
        )
        assert c.tool_schemas == {"echo": {"type": "object"}}
        assert c.protocol_version == "2025-11-25"
        assert c.capabilities == frozenset({"io.modelcontextprotocol/tasks"})

    def test_header_pairs_keep_duplicates(self) -> None:
        """headers as a pair list keeps duplicates in order."""
        c = parse_case(case(headers=[["Mcp-Method", "a"], ["mcp-method", "a"]]))
        assert c.headers.get_all("MCP-METHOD") == ["a", "a"]

    def test_expected_rule_alone(self) -> None:
        """A rule without a JSON-RPC code is expected by expectedRule alone."""
        c = parse_case(case(expectedRule="sse.unterminated"))
        assert not c.golden
        assert c.expected_code is None

    @pytest.mark.parametrize(
        ("data", "fragment"),
        [
            ([], "must be a JSON object"),
            (case(surprise=1), "unknown key"),
            (case(name=""), "name"),
            (case(name=5), "name"),
            (case(era="future"), "era"),
            (case(era="unknown"), "era"),
            (case(request=None), "request is required"),
            (case(responseStatus="200"), "responseStatus"),
            (case(responseStatus=True), "responseStatus"),
            (case(responseStatus=42), "responseStatus"),
            (case(expectedErrorCode="-32020"), "expectedErrorCode"),
            (case(expectedErrorCode=False), "expectedErrorCode"),
            (case(expectedRule="request.nope"), "not in the rule catalog"),
            (case(capabilities="tasks"), "capabilities"),
            (case(capabilities=[1]), "capabilities"),
            (case(headers={"A": 1}), "headers"),
            (case(headers=[["A"]]), "headers"),
            (case(headers="A: b"), "headers"),
            (case(responseHeaders=[["A", "b", "c"]]), "responseHeaders"),
            (case(responseBody={"sse": "data"}), "sse"),
            (case(toolSchemas=[]), "toolSchemas"),
            (case(protocolVersion=20251125), "protocolVersion"),
        ],
    )
    def test_malformed(self, data: Any, fragment: str) -> None:
        """Each malformed fixture raises ValueError saying what is wrong."""
        with pytest.raises(ValueError, match=re.escape(fragment)):
            parse_case(data)


class TestLoad:
    """load_bytes / load_file: one object or a list per file; errors name the file."""

    def test_single_object(self) -> None:
        """A file may hold one case object."""
        assert [c.name for c in load_bytes(orjson.dumps(GOLDEN), "x.json")] == ["tmp-golden-call"]

    def test_list(self) -> None:
        """A file may hold a list of cases; each records its source."""
        cases = load_bytes(orjson.dumps([GOLDEN, case(name="second")]), "x.json")
        assert [c.name for c in cases] == ["tmp-golden-call", "second"]
        assert {c.source for c in cases} == {"x.json"}

    def test_bad_json(self) -> None:
        """Bad JSON is an InputError naming the file."""
        with pytest.raises(InputError, match=r"^x\.json: not valid JSON"):
            load_bytes(b"[{", "x.json")

    def test_bad_case_names_index(self) -> None:
        """A malformed case is an InputError naming the file and the case index."""
        with pytest.raises(InputError, match=r"^x\.json: case #1: unknown key"):
            load_bytes(orjson.dumps([GOLDEN, case(surprise=1)]), "x.json")

    def test_missing_file(self, tmp_path: Path) -> None:
        """An unreadable file is an InputError naming it."""
        with pytest.raises(InputError, match="cannot read"):
            load_file(tmp_path / "absent.json")


class TestResponseBytes:
    """response_bytes: what a case's responseBody becomes on the wire."""

    def test_json_body(self) -> None:
        """A JSON body gets Content-Type application/json."""
        headers, body = response_bytes(parse_case(GOLDEN))
        assert headers.content_type() == "application/json"
        assert orjson.loads(body) == GOLDEN["responseBody"]

    def test_sse_body(self) -> None:
        """An sse list becomes one event per item; a string item is the raw data text."""
        c = parse_case(case(responseBody={"sse": [{"jsonrpc": "2.0", "method": "x"}, "raw"]}))
        headers, body = response_bytes(c)
        assert headers.content_type() == "text/event-stream"
        assert body == b'data: {"jsonrpc":"2.0","method":"x"}\n\ndata: raw\n\n'

    def test_explicit_content_type_kept(self) -> None:
        """A content type the case gives is not replaced."""
        c = parse_case(case(responseHeaders={"content-type": "text/plain"}))
        headers, _ = response_bytes(c)
        assert headers.get_all("Content-Type") == ["text/plain"]

    def test_null_body(self) -> None:
        """A null body is empty, with no content type."""
        headers, body = response_bytes(parse_case(case(responseBody=None)))
        assert body == b""
        assert "content-type" not in headers

    def test_raw_string_body(self) -> None:
        """A string body is sent as those exact bytes."""
        _, body = response_bytes(parse_case(case(responseBody="<html>")))
        assert body == b"<html>"


class TestCaseExchange:
    """case_exchange: the exchange the core judges."""

    def test_modern(self) -> None:
        """A modern case is judged in the modern era, outside a legacy session."""
        ex = case_exchange(parse_case(GOLDEN))
        assert ex.era is Era.MODERN
        assert not ex.legacy_session
        assert orjson.loads(ex.request_body) == GOLDEN["request"]

    def test_legacy(self) -> None:
        """A legacy case runs in a legacy session with its negotiated version."""
        ex = case_exchange(parse_case(case(era="legacy", protocolVersion="2025-03-26")))
        assert ex.era is Era.LEGACY
        assert ex.legacy_session
        assert ex.negotiated_version == "2025-03-26"

    def test_raw_request(self) -> None:
        """A string request is sent as raw bytes."""
        assert case_exchange(parse_case(case(request="{oops"))).request_body == b"{oops"


class TestRunCase:
    """run_case: whether the engine's verdict meets the case's expectation."""

    def test_golden_passes(self) -> None:
        """A conforming golden case passes with no rule."""
        r = run_case(parse_case(GOLDEN))
        assert (r.passed, r.rule, r.code, r.detail) == (True, None, None, "accepted")

    def test_golden_with_finding_fails(self) -> None:
        """A golden case the engine rejects fails and shows the finding."""
        r = run_case(parse_case(case(responseStatus=500)))
        assert not r.passed
        assert r.rule == "response.http-status"
        assert "response.http-status" in r.detail

    def test_mismatch_answered_500_fails(self) -> None:
        """A mismatch answered HTTP 500 without a body fails, though the rejection matched."""
        mismatch = {**GOLDEN["headers"], "Mcp-Name": "other"}
        r = run_case(parse_case(case(
            headers=mismatch, responseStatus=500, responseBody=None,
            expectedErrorCode=-32020, expectedRule="request.header.mismatch")))
        assert not r.passed
        assert (r.rule, r.strength) == ("response.header-mismatch-unanswered", "must")
        assert r.detail.startswith("request.header.mismatch as expected, but the answer broke")

    def test_mismatch_answered_as_owed_passes(self) -> None:
        """The same mismatch answered 400 with -32020 and the request's id passes."""
        mismatch = {**GOLDEN["headers"], "Mcp-Name": "other"}
        body = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32020, "message": "mismatch"}}
        r = run_case(parse_case(case(
            headers=mismatch, responseStatus=400, responseBody=body,
            expectedErrorCode=-32020, expectedRule="request.header.mismatch")))
        assert (r.passed, r.rule, r.code, r.strength) == (
            True, "request.header.mismatch", -32020, "must")

    def test_negative_accepted_fails(self) -> None:
        """A negative case the engine accepts fails."""
        r = run_case(parse_case(case(expectedErrorCode=-32020)))
        assert not r.passed
        assert r.detail == "accepted, but the case expects a rejection"

    def test_wrong_rule_fails(self) -> None:
        """A finding with the right code but another rule does not meet expectedRule."""
        data = case(
            headers={"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call"},
            responseStatus=400,
            expectedErrorCode=-32020,
            expectedRule="request.header.mismatch",
            responseBody={"jsonrpc": "2.0", "id": 1, "error": {"code": -32020, "message": "x"}},
        )
        r = run_case(parse_case(data))
        assert not r.passed
        assert r.rule == "request.header.missing"
        assert r.detail.startswith("expected request.header.mismatch")

    def test_secrets_quoted_by_findings_are_scrubbed(self) -> None:
        """A mismatched secret argument is reported without quoting either value."""
        header_secret, body_secret = "hdr-sekrit-123", "body-sekrit-456"
        data = case(
            headers={"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call",
                     "Mcp-Name": "login", "Mcp-Param-ApiKey": header_secret},
            request={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                     "params": {"name": "login", "arguments": {"apiKey": body_secret},
                                "_meta": META}},
            toolSchemas={"login": {"type": "object", "properties": {
                "apiKey": {"type": "string", "x-mcp-header": "ApiKey"}}}},
            responseStatus=400,
            responseBody={"jsonrpc": "2.0", "id": 1,
                          "error": {"code": -32020, "message": "header mismatch"}},
            expectedErrorCode=-32020,
            expectedRule="request.header.mismatch",
        )
        r = run_case(parse_case(data))
        assert (r.passed, r.rule, r.code) == (True, "request.header.mismatch", -32020)
        shown = orjson.dumps(r.to_json()).decode() + "".join(f.message for f in r.findings)
        assert "Mcp-Param-ApiKey" in r.detail and "[REDACTED]" in r.detail
        assert header_secret not in shown and body_secret not in shown

    def test_code_and_rule_met(self) -> None:
        """A matching finding passes and is the one reported."""
        data = case(
            headers={"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call"},
            responseStatus=400,
            expectedErrorCode=-32020,
            expectedRule="request.header.missing",
            responseBody={"jsonrpc": "2.0", "id": 1, "error": {"code": -32020, "message": "x"}},
        )
        r = run_case(parse_case(data))
        assert (r.passed, r.rule, r.code) == (True, "request.header.missing", -32020)

    def test_rule_without_code(self) -> None:
        """expectedRule alone matches a rule that has no JSON-RPC code."""
        body = {
            "sse": [
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/message",
                    "params": {"level": "info", "data": "x"},
                }
            ]
        }
        r = run_case(parse_case(case(responseBody=body, expectedRule="sse.unterminated")))
        assert (r.passed, r.rule, r.code) == (True, "sse.unterminated", None)

    def test_duplicate_names(self) -> None:
        """Two cases with one name are an input error."""
        cases = [parse_case(GOLDEN, "a.json"), parse_case(GOLDEN, "b.json")]
        with pytest.raises(InputError, match="duplicate case name"):
            run_cases(cases)

    def test_report(self) -> None:
        """report() counts passes and lists each case's JSON entry."""
        results = run_cases([parse_case(GOLDEN), parse_case(case(name="bad", responseStatus=500))])
        out = report(results)
        assert (out["passed"], out["total"]) == (1, 2)
        assert [c["name"] for c in out["cases"]] == ["tmp-golden-call", "bad"]


class TestEvidenceDigest:
    """evidenceDigest: a stable SHA-256 over the redacted case."""

    def test_hex_and_stable(self) -> None:
        """The digest is 64 lowercase hex and the same on every run."""
        first = digest_of(GOLDEN)
        assert HEX64.fullmatch(first)
        assert digest_of(copy.deepcopy(GOLDEN)) == first

    def test_key_order_irrelevant(self) -> None:
        """Reordering the fixture's keys changes nothing."""
        assert digest_of(dict(reversed(list(GOLDEN.items())))) == digest_of(GOLDEN)

    @pytest.mark.parametrize(
        "changes",
        [
            {"name": "other"},
            {"responseStatus": 500},
            {"era": "legacy"},
            {"headers": {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call"}},
            {"request": {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}},
            {"responseBody": None},
            {"responseHeaders": {"X-Extra": "1"}},
            {"expectedErrorCode": -32020},
            {"expectedRule": "sse.unterminated"},
            {"capabilities": ["io.modelcontextprotocol/tasks"]},
            {"toolSchemas": {"echo": {"type": "object"}}},
            {"protocolVersion": "2025-11-25"},
        ],
    )
    def test_changes_with_the_case(self, changes: dict[str, Any]) -> None:
        """Changing any judged part of the case changes the digest."""
        assert digest_of(case(**changes)) != digest_of(GOLDEN)

    def test_secret_not_in_digest(self) -> None:
        """Two cases differing only in a secret header value have one digest."""
        headers = dict(GOLDEN["headers"])
        one = case(headers={**headers, "Authorization": "Bearer s3cr3t"})
        two = case(headers={**headers, "Authorization": "Bearer another-secret"})
        assert digest_of(one) == digest_of(two)
        assert digest_of(one) != digest_of(GOLDEN)

    def test_secret_argument_not_in_digest(self) -> None:
        """A secret under a denylisted argument key does not reach the digest."""

        def with_password(value: str) -> dict[str, Any]:
            data = case()
            data["request"]["params"]["arguments"]["password"] = value
            return data

        assert digest_of(with_password("hunter2")) == digest_of(with_password("letmein"))


class TestTranscriptsCommand:
    """`mcp-tap transcripts`: the CLI contract (JSON shape, exit codes, one-line errors)."""

    def test_corpus_json(self, capsys: pytest.CaptureFixture[str]) -> None:
        """--json prints passed/total/cases with the documented keys and exits 0."""
        assert main(["transcripts", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert set(out) == {"passed", "total", "cases"}
        assert out["passed"] == out["total"] == len(load_corpus())
        assert out["total"] >= 50
        for entry in out["cases"]:
            assert set(entry) == {
                "name", "passed", "rule", "code", "strength", "detail", "evidenceDigest",
                "assumedHeaders"}
            assert entry["passed"] is True
            assert entry["strength"] in ((None,) if entry["rule"] is None else ("must", "should"))
            assert HEX64.fullmatch(entry["evidenceDigest"])

    def test_digests_stable_across_runs(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Two runs report the same digests."""
        main(["transcripts", "--json"])
        first = json.loads(capsys.readouterr().out)
        main(["transcripts", "--json"])
        second = json.loads(capsys.readouterr().out)
        assert [c["evidenceDigest"] for c in first["cases"]] == [
            c["evidenceDigest"] for c in second["cases"]
        ]

    def test_text_output(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Without --json a summary line counts the cases."""
        assert main(["transcripts"]) == 0
        out = capsys.readouterr().out
        n = len(load_corpus())
        assert out.rstrip().endswith(f"{n}/{n} cases met their expectation")

    def test_given_file(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Given files are judged instead of the corpus."""
        path = write(tmp_path, [GOLDEN])
        assert main(["transcripts", "--json", str(path)]) == 0
        out = json.loads(capsys.readouterr().out)
        assert [c["name"] for c in out["cases"]] == ["tmp-golden-call"]

    def test_wrong_expectation_exits_1(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A case whose expectation is wrong exits 1 and is named on stderr."""
        path = write(tmp_path, [GOLDEN, case(name="tmp-wrong", expectedErrorCode=-32022)])
        assert main(["transcripts", "--json", str(path)]) == 1
        captured = capsys.readouterr()
        out = json.loads(captured.out)
        assert (out["passed"], out["total"]) == (1, 2)
        assert "tmp-wrong" in captured.err
        assert "tmp-golden-call" not in captured.err

    @pytest.mark.parametrize(
        "content",
        [
            '[{"name": ',
            b"\xff\xfe",
            [case(surprise=True)],
            [case(responseStatus="200")],
            [case(headers=["not", "pairs"])],
            [case(expectedErrorCode=True)],
            [case(capabilities="x")],
            [case(expectedRule="no.such-rule")],
            [GOLDEN, GOLDEN],
            "7",
        ],
        ids=[
            "bad-json",
            "not-utf8",
            "unknown-key",
            "status-type",
            "headers-type",
            "code-type",
            "capabilities-type",
            "unknown-rule",
            "duplicate-names",
            "scalar",
        ],
    )
    def test_malformed_exits_2(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], content: Any
    ) -> None:
        """A malformed fixture exits 2 with one error line naming the file, no traceback."""
        path = write(tmp_path, content, "broken-fixture.json")
        assert main(["transcripts", str(path)]) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        lines = captured.err.splitlines()
        assert len(lines) == 1, captured.err
        assert lines[0].startswith("mcp-tap: error: ")
        assert "broken-fixture.json" in lines[0]
        assert "Traceback" not in captured.err

    def test_missing_file_exits_2(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A missing fixture file exits 2 with one line naming it."""
        assert main(["transcripts", str(tmp_path / "absent.json")]) == 2
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1
        assert "absent.json" in err
