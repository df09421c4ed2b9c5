"""Every rule's strength is the keyword of the sentence it cites (issue 27, class 8).

MUST / MUST NOT / REQUIRED / SHALL is ``must``, SHOULD / SHOULD NOT / RECOMMENDED is
``should``, and a MAY or OPTIONAL is never a finding. Each rule of the specification carries
the sentence its strength comes from (``Rule.quote``, ``Rule.legacy_quote``); where the
published pages are on this machine, the sentence is found in one of the rule's cited
sections.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import spec_headings
from spec_sections import normalise, section_text, strength

from mcp_tap.core.catalog import (
    CATALOG,
    MAY_ANSWERS,
    QUOTES,
    ROUND3_ADDED,
    ROUND3_NOT_CHECKED,
    RULES,
    SCHEMA_TRUTH,
    STRENGTH_BY_TOOL,
    Rule,
    markdown_sources,
    render_markdown,
)
from mcp_tap.core.findings import Boundary, Strength

SPEC = Path("/work/shared/spec")  # present on the project's machines, absent on a fresh CI box
CITE = re.compile(r"(?P<page>[\w./-]+\.(?:mdx|md|ts))(?: § (?P<section>.+))?")
# The tool's own boundaries: their rules are its contract (docs/rules.md), not a sentence.
TOOL_BOUNDARIES = {Boundary.SDK, Boundary.TAP, Boundary.GATE}
# Rules whose quote is from an RFC they cite (no copy of the RFC is on the machine).
FROM_RFC = {"response.unauthorized.challenge"}
SPEC_RULES = [
    r for r in RULES
    if r.boundary not in TOOL_BOUNDARIES and any(
        (m := CITE.fullmatch(p.strip())) and not m["page"].startswith(("docs/", "product.md"))
        for p in r.cite.split(";"))
]


def _sections(entry: Rule) -> list[str]:
    """The normalised text of each cited section of the specification on this machine."""
    out = []
    for part in entry.cite.split(";"):
        m = CITE.fullmatch(part.strip())
        if m is None or m["page"].startswith(("docs/", "product.md")):
            continue
        text = section_text(SPEC, m["page"], m["section"])
        assert text is not None, f"{entry.id}: {part.strip()} not found under {SPEC}"
        out.append(text)
    return out


def _expected(entry: Rule, quote: str) -> Strength | None:
    said = strength(quote)
    if entry.id in STRENGTH_BY_TOOL:
        # The tool's reading: one keyword weaker than the sentence it guards.
        assert said == "must" and entry.strength is Strength.SHOULD, entry.id
        return Strength.SHOULD
    if quote == SCHEMA_TRUTH:
        return Strength.MUST  # the normative schema: a message it rejects is none
    assert said != "may", f"{entry.id}: a MAY is never a finding ({quote!r})"
    assert said is not None, f"{entry.id}: the quote has no RFC 2119 keyword ({quote!r})"
    return Strength(said)


@pytest.mark.parametrize("entry", SPEC_RULES, ids=[r.id for r in SPEC_RULES])
def test_every_specification_rule_quotes_its_sentence(entry: Rule) -> None:
    """Each rule that cites the specification has the sentence its strength comes from."""
    assert entry.quote, f"{entry.id} has no quote"
    assert (entry.legacy_strength is None) == (not entry.legacy_quote), entry.id


@pytest.mark.parametrize("entry", SPEC_RULES, ids=[r.id for r in SPEC_RULES])
def test_strength_is_the_quoted_keyword(entry: Rule) -> None:
    """The quote's keyword is the rule's strength (its legacy quote's, its legacy one)."""
    assert _expected(entry, entry.quote) is entry.strength, (entry.id, entry.quote)
    if entry.legacy_quote:
        assert _expected(entry, entry.legacy_quote) is entry.legacy_strength, entry.id


@pytest.mark.skipif(not SPEC.is_dir(), reason="the specification pages are not on this machine")
@pytest.mark.parametrize("entry", SPEC_RULES, ids=[r.id for r in SPEC_RULES])
def test_quote_is_in_a_cited_section(entry: Rule) -> None:
    """The quote (and the legacy quote) stands in one of the rule's cited sections."""
    if entry.id in FROM_RFC:
        assert "RFC" in entry.cite
        return
    sections = _sections(entry)
    for quote in filter(None, (entry.quote, entry.legacy_quote)):
        wanted = normalise(quote)
        assert any(wanted in text for text in sections), (entry.id, quote)


def test_quotes_name_catalog_rules() -> None:
    """The quote table names rules of the catalog only, and the tool's readings are quoted."""
    ids = {r.id for r in RULES}
    assert sorted(set(QUOTES) - ids) == []
    assert sorted(set(STRENGTH_BY_TOOL) - set(QUOTES)) == []


def test_strength_keywords() -> None:
    """The keyword reader: the strongest keyword decides; MAY alone is may."""
    assert strength("servers MUST NOT send") == "must"
    assert strength("it is REQUIRED") == "must"
    assert strength("clients SHOULD NOT retry") == "should"
    assert strength("it is RECOMMENDED") == "should"
    assert strength("the body MAY comprise") == "may"
    assert strength("MAY support sending, but MUST support receiving") == "must"
    assert strength("no keyword here") is None


def test_doc_lists_each_sentence() -> None:
    """docs/rules.md shows the sentence behind each strength."""
    text = render_markdown()
    assert "## The sentence behind each strength" in text
    for entry in SPEC_RULES:
        assert f"- `{entry.id}` ({entry.strength}): " in text, entry.id


def test_may_answers_cite_published_headings() -> None:
    """Every source of the MAY-answers table names a published page and heading."""
    published = spec_headings.load()
    missing = []
    for cite, what, how in MAY_ANSWERS:
        assert what.strip() and how.strip()
        for part in cite.split(";"):
            m = CITE.fullmatch(part.strip())
            assert m is not None, part
            if m["section"] not in published.get(m["page"], []):
                missing.append(part.strip())
    assert missing == []


def test_round3_rules_listed() -> None:
    """docs/rules.md lists the rules classes 2, 3 and 9 added and the MAYs it allows."""
    text = render_markdown()
    for rid in ROUND3_ADDED:
        assert f"- `{rid}` ({CATALOG[rid].strength}):" in text
    assert "## MAYs about answers: never a finding" in text
    for cite, _, _ in ROUND3_NOT_CHECKED:
        assert markdown_sources(cite) in text
