"""The design lesson's fixtures, judged as the lesson says, and the omitted-header rule.

A fixture written as the lesson writes it records only the headers it is about; an omitted
``Accept`` / ``Content-Type`` is judged as a conforming client sends it (docs/transcripts.md
"Headers a fixture omits"), and the owed answer is still judged.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from mcp_tap.core.exchange import judge
from mcp_tap.transcripts import assumed_headers, case_exchange, parse_case, run_case

LESSON = Path("/work/shared/seed/mcp-conformance-operations.zh.md")
if not LESSON.exists():  # the lesson lives beside the repo on the build machine
    LESSON = Path(__file__).resolve().parents[3] / "shared/seed/mcp-conformance-operations.zh.md"


def lesson_fixtures() -> list[dict[str, Any]]:
    """Every JSON object with a ``name`` in the lesson (its fixtures), in order."""
    text = LESSON.read_text(encoding="utf-8")
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    at = text.find("{")
    while at != -1:
        try:
            value, end = decoder.raw_decode(text, at)
        except ValueError:
            at = text.find("{", at + 1)
            continue
        if isinstance(value, dict) and "name" in value:
            found.append(value)
        at = text.find("{", end)
    return found


pytestmark = pytest.mark.skipif(not LESSON.exists(), reason="the design lesson is not here")


def test_lesson_has_fixtures() -> None:
    """The extraction finds the lesson's fixtures (golden-modern-list among them)."""
    assert "golden-modern-list" in [f["name"] for f in lesson_fixtures()]


def test_lesson_golden_judged_on_the_current_spec() -> None:
    """golden-modern-list: no transport-header finding (Accept / Content-Type assumed).

    Its `tools/list` result lacks `ttlMs` / `cacheScope`, which the current revision makes
    a MUST (2026-07-28 server/utilities/caching.mdx "Time-to-Live (TTL) Field"; schema.json
    ListToolsResult requires both): the spec wins over the lesson's older draft.
    """
    result = judge(case_exchange(parse_case(_lesson_golden())))
    assert [(f.rule, f.code, str(f.strength)) for f in result.findings] == [
        ("response.payload.caching", -32600, "must")]


def test_lesson_golden_with_caching_hints_is_golden() -> None:
    """The lesson's golden with the hints the current revision requires passes as golden."""
    data = _lesson_golden()
    data["responseBody"]["result"].update(ttlMs=0, cacheScope="private")
    result = run_case(parse_case(data))
    assert (result.passed, result.rule, result.detail) == (True, None, "accepted")


def _lesson_golden() -> dict[str, Any]:
    return copy.deepcopy(next(f for f in lesson_fixtures() if f["name"] == "golden-modern-list"))


def test_assumed_headers_reported() -> None:
    """The lesson's golden omits Accept and Content-Type: both assumed and listed."""
    result = run_case(parse_case(_lesson_golden()))
    assert result.to_json()["assumedHeaders"] == [
        ["Accept", "application/json, text/event-stream"], ["Content-Type", "application/json"]]


def test_given_accept_is_judged() -> None:
    """A fixture that gives Accept is judged on it: request.accept (must)."""
    data = _lesson_golden()
    data["headers"]["Accept"] = "application/json"
    judged = judge(case_exchange(parse_case(data)))
    found = [(f.rule, f.code, str(f.strength)) for f in judged.findings]
    assert found == [("request.accept", None, "must"),
                     ("response.payload.caching", -32600, "must")]
    assert assumed_headers(parse_case(data)) == (("Content-Type", "application/json"),)


def test_lesson_style_mismatch_answered_500_fails() -> None:
    """A lesson-style mismatch answered HTTP 500 without a body fails on the owed answer."""
    data = _lesson_golden()
    data.update(name="lesson-mismatch-500", responseStatus=500, responseBody=None,
                expectedErrorCode=-32020)
    data["headers"]["Mcp-Method"] = "tools/call"
    result = run_case(parse_case(data))
    assert not result.passed
    assert (result.rule, result.strength) == ("response.header-mismatch-unanswered", "must")


def test_lesson_style_mismatch_answered_400_passes() -> None:
    """The same mismatch answered 400 / -32020 under its id passes."""
    data = _lesson_golden()
    data.update(name="lesson-mismatch-400", responseStatus=400, expectedErrorCode=-32020,
                responseBody={"jsonrpc": "2.0", "id": 1,
                              "error": {"code": -32020, "message": "header mismatch"}})
    data["headers"]["Mcp-Method"] = "tools/call"
    result = run_case(parse_case(data))
    assert (result.passed, result.rule, result.code, result.strength) == (
        True, "request.header.mismatch", -32020, "must")
