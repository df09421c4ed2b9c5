"""Tests for the rule catalog (mcp_tap.core.catalog), its generated doc and its coverage."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import spec_headings

from mcp_tap.core.catalog import (
    ADDED_FROM_REVIEW,
    CATALOG,
    NOT_CHECKED,
    RULES,
    Rule,
    finding,
    markdown_sources,
    render_markdown,
    rule,
)
from mcp_tap.core.eras import Era
from mcp_tap.core.findings import Boundary, Strength
from mcp_tap.transcripts import load_corpus

ROOT = Path(__file__).resolve().parents[2]
RULES_DOC = ROOT / "docs" / "rules.md"
WIRE_BOUNDARIES = {Boundary.REQUEST, Boundary.RESPONSE}
WIRE_RULES = [r for r in RULES if r.boundary in WIRE_BOUNDARIES]
KNOWN_CODES = {-32700, -32600, -32601, -32602, -32603, -32020, -32021, -32022}
RULE_ID = re.compile(r"[a-z][a-z0-9-]*(\.[a-z][a-z0-9-]*)+")
SPEC = Path("/work/shared/spec")  # present on the project's machines, absent on a fresh CI box
CITE = re.compile(r"(?P<page>[\w./-]+\.(?:mdx|md|ts))(?: § (?P<section>.+))?")

# Request/response rules that no shipped transcript case expects, each with the reason it
# cannot (or need not) be expressed as a fixture. Keep it small: a rule listed here still
# has direct unit tests in tests/core/ (see TestUnitTestCoverage).
CORPUS_EXEMPTIONS: dict[str, str] = {}


def corpus_expected_rules() -> set[str]:
    """Every rule id some shipped corpus case expects."""
    return {c.expected_rule for c in load_corpus() if c.expected_rule is not None}


class TestRenderMarkdown:
    """render_markdown: docs/rules.md is generated from the catalog and never drifts."""

    def test_doc_matches_catalog(self) -> None:
        """docs/rules.md equals render_markdown() (regenerate: python -m mcp_tap.core.catalog)."""
        assert RULES_DOC.read_text(encoding="utf-8") == render_markdown()

    def test_module_prints_the_doc(self) -> None:
        """python -m mcp_tap.core.catalog prints exactly render_markdown()."""
        out = subprocess.run(
            [sys.executable, "-m", "mcp_tap.core.catalog"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
            encoding="utf-8",
        )
        assert out.stdout == render_markdown()

    def test_one_row_per_rule(self) -> None:
        """Every rule has exactly one table row with its boundary and code (— for none)."""
        text = render_markdown()
        for r in RULES:
            rows = [line for line in text.splitlines() if line.startswith(f"| `{r.id}` |")]
            assert len(rows) == 1, r.id
            code = "—" if r.code is None else str(r.code)
            assert rows[0].startswith(f"| `{r.id}` | {r.boundary} | {code} | {r.strength}")
            assert rows[0].endswith(f" | {markdown_sources(r.cite)} |")

    def test_summaries_do_not_break_the_table(self) -> None:
        """No summary or citation holds a pipe or a line break, which would break the row."""
        bad = [r.id for r in RULES if any(c in t for t in (r.summary, r.cite) for c in "|\n")]
        assert bad == []

    def test_doc_lists_added_and_unchecked(self) -> None:
        """The doc lists the rules the review added and the MUSTs not checked, with reasons."""
        text = render_markdown()
        assert "## MUSTs not checked" in text
        for rid in ADDED_FROM_REVIEW:
            assert f"- `{rid}` ({CATALOG[rid].strength}):" in text
        for cite, what, why in NOT_CHECKED:
            assert f"| {markdown_sources(cite)} | {what} | {why} |" in text


class TestRules:
    """RULES and CATALOG: unique, well-formed, stable ids."""

    def test_ids_unique(self) -> None:
        """No rule id appears twice."""
        dupes = [rid for rid, n in Counter(r.id for r in RULES).items() if n > 1]
        assert dupes == []
        assert len(CATALOG) == len(RULES)

    @pytest.mark.parametrize("entry", RULES, ids=[r.id for r in RULES])
    def test_id_dotted_lower_case(self, entry: Rule) -> None:
        """Every id is dotted lower-case (segments of a-z, 0-9 and hyphens)."""
        rid = entry.id
        assert RULE_ID.fullmatch(rid), rid

    @pytest.mark.parametrize("entry", RULES, ids=[r.id for r in RULES])
    def test_entry_fields(self, entry: Rule) -> None:
        """Boundary is a Boundary, the code is absent or a known JSON-RPC code, a summary exists."""
        assert isinstance(entry.boundary, Boundary)
        code = entry.code
        assert code is None or code in KNOWN_CODES
        assert entry.summary.strip()

    def test_request_rules_without_codes(self) -> None:
        """Request rules without a JSON-RPC code are exactly those no server answer is owed for."""
        assert sorted(r.id for r in RULES if r.boundary is Boundary.REQUEST and r.code is None) == [
            "request.accept",
            "request.version.invalid",
        ]

    def test_product_catalog_ids_kept(self) -> None:
        """The ids product.md shipped are all still in the catalog (ids are never renamed)."""
        shipped = {
            "request.envelope",
            "request.meta.missing",
            "request.header.missing",
            "request.header.duplicate",
            "request.header.encoding",
            "request.header.mismatch",
            "request.version.unsupported",
            "request.legacy-leak",
            "response.envelope",
            "response.id",
            "response.exclusivity",
            "response.error.shape",
            "response.error.reserved",
            "response.http-status",
            "response.header-mismatch-unanswered",
            "response.result-type.missing",
            "response.result-type.unknown",
            "response.payload.tools-list",
            "response.payload.completion",
            "response.payload.task",
            "response.payload.input-required",
            "response.payload.caching",
            "notification.response",
            "sse.event",
            "sse.id",
            "sse.unterminated",
            "hop.error-collapse",
            "hop.body-changed",
            "hop.status-changed",
            "hop.header-changed",
            "hop.sse-buffered",
            "client.downgrade",
            "client.fallback-unproven",
            "sdk.dropped",
            "sdk.changed",
            "sdk.synthesized",
        }
        assert sorted(shipped - CATALOG.keys()) == []

    @pytest.mark.parametrize(
        ("rid", "code"),
        [
            ("request.header.mismatch", -32020),
            ("request.version.unsupported", -32022),
            ("request.meta.missing", -32602),
            ("request.method.removed", -32601),
            ("response.header-mismatch-unanswered", -32020),
            ("sse.unterminated", None),
        ],
    )
    def test_codes(self, rid: str, code: int | None) -> None:
        """The codes the wire rules fix are the catalog's."""
        assert rule(rid).code == code


class TestCitations:
    """Every rule cites where it comes from; the pages and sections exist."""

    @staticmethod
    def _parts(cite: str) -> list[str]:
        return [p.strip() for p in cite.split(";")]

    @pytest.mark.parametrize("entry", RULES, ids=[r.id for r in RULES])
    def test_cited_with_strength(self, entry: Rule) -> None:
        """Every rule has a citation and a strength; every part is `page § section` or an RFC."""
        assert isinstance(entry.strength, Strength)
        assert entry.cite.strip(), entry.id
        for part in self._parts(entry.cite):
            assert CITE.fullmatch(part) or part.startswith("RFC "), part

    def test_wire_rules_cite_the_specification(self) -> None:
        """Request, response and client rules cite a page of the specification first."""
        for r in RULES:
            if r.boundary in (*WIRE_BOUNDARIES, Boundary.CLIENT):
                first = CITE.fullmatch(self._parts(r.cite)[0])
                assert first is not None, r.id
                assert not first["page"].startswith(("product.md", "docs/")), r.id

    def test_pages_and_sections_exist(self) -> None:
        """Each cited page of the specification holds the cited heading (checked against
        tests/data/spec_headings.json, the published pages' headings)."""
        published = spec_headings.load()
        cites = [p for r in RULES for p in self._parts(r.cite)]
        cites += [p for c, _, _ in NOT_CHECKED for p in self._parts(c)]
        missing = []
        for part in cites:
            m = CITE.fullmatch(part)
            if m is None or m["page"].startswith(("docs/", "product.md")):
                continue
            heads = published.get(m["page"])
            section = (m["section"] or "").removeprefix("interface ")
            if heads is None or (section and section not in heads):
                missing.append(part)
        assert missing == []

    @pytest.mark.skipif(not SPEC.is_dir(), reason="the specification pages are not on this machine")
    def test_snapshot_is_the_published_pages(self) -> None:
        """Where a copy of the published pages is at hand, the snapshot is exactly theirs."""
        assert spec_headings.snapshot(SPEC) == spec_headings.load()

    def test_legacy_strength(self) -> None:
        """A rule the legacy revision words as a SHOULD is a warning in legacy exchanges only."""
        r = rule("sse.unterminated")
        assert r.strength_in(Era.MODERN) is Strength.MUST
        assert r.strength_in(Era.LEGACY) is Strength.SHOULD
        assert finding("sse.unterminated", "m", era=Era.LEGACY).strength is Strength.SHOULD
        assert finding("sse.unterminated", "m", era=Era.MODERN).strength is Strength.MUST


class TestFinding:
    """finding / rule: catalog lookups that make findings."""

    def test_finding_uses_catalog(self) -> None:
        """A finding carries the rule's code and boundary."""
        f = finding("response.id", "msg", "egress")
        assert (f.rule, f.code, f.boundary, f.message, f.where, f.strength) == (
            "response.id",
            -32600,
            Boundary.RESPONSE,
            "msg",
            "egress",
            Strength.MUST,
        )

    def test_should_rule_is_a_warning(self) -> None:
        """A SHOULD rule's finding carries strength should, in JSON too."""
        f = finding("response.payload.tool-names-unique", "m")
        assert f.strength is Strength.SHOULD
        assert f.to_json()["strength"] == "should"

    def test_old_evidence_without_strength(self) -> None:
        """A finding recorded before strengths existed reads back as must."""
        data = finding("response.id", "m").to_json()
        del data["strength"]
        assert type(finding("response.id", "m")).from_json(data).strength is Strength.MUST

    def test_code_override(self) -> None:
        """An explicit code overrides the catalog's."""
        assert finding("response.expected-error", "m", code=-32022).code == -32022

    def test_unknown_id(self) -> None:
        """An unknown rule id is a programming error."""
        with pytest.raises(KeyError):
            finding("request.nope", "m")
        with pytest.raises(KeyError):
            rule("request.nope")

    def test_json_round_trip(self) -> None:
        """A finding survives its JSON shape."""
        f = finding("request.header.mismatch", "m", "ingress")
        assert type(f).from_json(f.to_json()) == f


class TestCorpusCoverage:
    """Every request/response rule is expected by a shipped corpus case, or exempted."""

    def test_every_wire_rule_expected_or_exempt(self) -> None:
        """Each rule of boundary request/response is a corpus expectedRule or listed exempt."""
        covered = corpus_expected_rules()
        allowed = covered | CORPUS_EXEMPTIONS.keys()
        missing = [r.id for r in WIRE_RULES if r.id not in allowed]
        assert missing == []

    def test_exemptions_are_current(self) -> None:
        """Exemptions name wire rules the corpus does not cover, each with a reason."""
        covered = corpus_expected_rules()
        wire_ids = {r.id for r in WIRE_RULES}
        for rid, reason in CORPUS_EXEMPTIONS.items():
            assert rid in wire_ids, f"{rid} is not a request/response rule"
            assert rid not in covered, f"{rid} is covered by the corpus now: drop the exemption"
            assert reason.strip(), f"{rid} needs a reason"

    def test_corpus_rules_exist(self) -> None:
        """Every rule a corpus case expects is in the catalog."""
        assert sorted(corpus_expected_rules() - CATALOG.keys()) == []


class TestUnitTestCoverage:
    """Every request/response rule id is asserted by a direct unit test of the core."""

    def test_every_wire_rule_named_in_core_tests(self) -> None:
        """Each rule id appears quoted in some test file of the core's folder, tests/core/."""
        core_tests = sorted((ROOT / "tests" / "core").rglob("test_*.py"))
        text = "\n".join(p.read_text(encoding="utf-8") for p in core_tests)
        missing = [r.id for r in WIRE_RULES if f'"{r.id}"' not in text]
        assert missing == []
