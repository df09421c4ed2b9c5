"""Every citation resolves for a reader who has only this repository (and a browser).

The rule catalog, ``docs/rules.md``, the report's spec column and the other docs cite the
published specification by its public address and section, RFCs by the RFC Editor's
address, and the tool's own rules by a page of ``docs/``. Nothing points at a path only the
developers' machines hold (``shared/spec/...``, ``product.md``). Page and heading of every
specification address are checked against ``tests/data/spec_headings.json`` (the published
pages' headings); every ``docs/`` link against the file and its headings.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import spec_headings

from mcp_tap.core.catalog import NOT_CHECKED, RULES, render_markdown
from mcp_tap.core.citations import SITE, Citation, citations, github_anchor, site_anchor

ROOT = Path(__file__).resolve().parents[2]
CITES = [r.cite for r in RULES] + [c for c, _, _ in NOT_CHECKED]
PRIVATE = re.compile(r"shared/spec|shared/docs|product\.md|mcp-wire-rules")
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def page_key(found: Citation) -> tuple[str, str | None]:
    """The snapshot page a public address names, and its anchor."""
    assert found.url is not None
    url, _, anchor = found.url.partition("#")
    if url.startswith(SITE + "/"):
        path = url.removeprefix(SITE + "/")
        page = path + ".ts" if path.endswith("/schema") else path + ".mdx"
        return page, anchor or None
    if "/seps/2243-" in url:
        return "sep-2243-http-standardization.md", anchor or None
    if "modelcontextprotocol/ext-tasks" in url:
        return "ext-tasks-draft.md", anchor or None
    raise AssertionError(f"no snapshot for {url}")


def anchors_of(page: str, heads: list[str]) -> set[str]:
    """The anchors a page's headings get where it is published."""
    if page.endswith("schema.ts"):
        return {h.lower() for h in heads}
    if page == "ext-tasks-draft.md":
        return {github_anchor(h) for h in heads}
    return {site_anchor(h) for h in heads}


def markdown_headings(path: Path) -> set[str]:
    """The GitHub anchors of a Markdown file's headings."""
    return {github_anchor(line.lstrip("#").strip()) for line in
            path.read_text(encoding="utf-8").splitlines() if re.match(r"#{1,6} ", line)}


@pytest.mark.parametrize("cite", CITES)
def test_every_citation_has_an_address_that_resolves(cite: str) -> None:
    """Each source: a public page whose anchor is one of its headings, an RFC section, or
    a docs/ page of this repository holding the heading."""
    published = spec_headings.load()
    for found in citations(cite):
        assert found.url is not None, found.text
        assert not PRIVATE.search(found.text + found.url), found
        if found.local:
            path, _, anchor = found.url.partition("#")
            assert (ROOT / path).is_file(), found.url
            text = render_markdown() if path == "docs/rules.md" else None
            heads = (markdown_headings(ROOT / path) if text is None else
                     {github_anchor(line.lstrip("#").strip()) for line in text.splitlines()
                      if line.startswith("#")})
            assert not anchor or anchor in heads, found.url
        elif found.url.startswith("https://www.rfc-editor.org/rfc/rfc"):
            assert re.fullmatch(r"https://www\.rfc-editor\.org/rfc/rfc\d+#section-[\d.]+",
                                found.url), found.url
        else:
            page, anchor = page_key(found)
            assert page in published, found.url
            assert anchor is None or anchor in anchors_of(page, published[page]), found.url


def test_site_anchors_match_the_sites_own_links() -> None:
    """The anchor rule, on headings whose published anchors the site itself links to."""
    assert site_anchor("`_meta`") == "meta"
    assert site_anchor("Protocol Version Header") == "protocol-version-header"
    assert site_anchor("Security and Trust & Safety") == "security-and-trust-%26-safety"
    flow = "2.10 Third-Party Authorization Flow"
    assert site_anchor(flow) == "2-10-third-party-authorization-flow"
    assert github_anchor("The tool's own rules") == "the-tools-own-rules"


@pytest.mark.parametrize("path", sorted([*ROOT.glob("docs/*.md"), ROOT / "README.md"]),
                         ids=lambda p: p.name)
def test_docs_cite_nothing_a_reader_lacks(path: Path) -> None:
    """No doc names a developer-only path, and every relative link resolves."""
    text = path.read_text(encoding="utf-8")
    assert not PRIVATE.search(text), PRIVATE.search(text)
    for target in _LINK.findall(text):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        file, _, anchor = target.partition("#")
        where = (path.parent / file) if file else path
        assert where.exists(), f"{path.name}: {target}"
        if anchor and where.suffix == ".md":
            assert anchor in markdown_headings(where), f"{path.name}: {target}"
