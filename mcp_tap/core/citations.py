"""Where a rule comes from, as a reader can follow it: public addresses and the repo's docs.

A catalog rule's ``cite`` names its sources as ``page § section`` joined by ``; `` (see
:class:`~mcp_tap.core.catalog.Rule`). :func:`citations` turns each into a
:class:`Citation`: the text to show and the address that resolves for anyone holding only
this repository and a browser:

* a page of the published specification, ``<revision>/<path>.mdx § Heading`` →
  ``https://modelcontextprotocol.io/specification/<revision>/<path>#<anchor>``; the anchor
  is the heading as the site writes it (:func:`site_anchor`);
* its schema, ``<revision>/schema.ts § interface Name`` → the revision's schema reference
  page, ``.../specification/<revision>/schema#<name>``;
* SEP-2243 (``sep-2243-http-standardization.md``) → its page under
  ``https://modelcontextprotocol.io/seps/``; the Tasks extension draft
  (``ext-tasks-draft.md``) → its file in the ``modelcontextprotocol/ext-tasks`` repository
  (a GitHub heading anchor);
* ``RFC <n> § <section>`` → the RFC Editor's page of that section;
* the tool's own rules, ``docs/<page>.md § Heading`` → that page of this repository (a
  relative link with the GitHub anchor of the heading), and the older spelling
  ``product.md § Rule catalog`` / ``§ Architecture principles`` → the section of
  ``docs/rules.md`` that now holds that contract.

Pure: nothing here reads a file or the network (the tests check every address against a
snapshot of the published pages' headings and against ``docs/``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

__all__ = ["SITE", "Citation", "citations", "github_anchor", "site_anchor"]

SITE: Final = "https://modelcontextprotocol.io/specification"
_SEPS: Final = "https://modelcontextprotocol.io/seps"
_TASKS: Final = "https://github.com/modelcontextprotocol/ext-tasks/blob/main/specification/draft/tasks.md"
_RFC: Final = "https://www.rfc-editor.org/rfc/rfc{number}#section-{section}"
# The tool's own contract: the sections of docs/rules.md that hold what product.md held.
TOOL_PAGE: Final = "docs/rules.md"
_TOOL_SECTIONS: Final = {"Rule catalog": "The tool's own rules",
                         "Architecture principles": "The tool's own rules"}
_REVISION: Final = re.compile(r"^(\d{4}-\d\d-\d\d)/(.+)\.mdx$")
_SCHEMA: Final = re.compile(r"^(\d{4}-\d\d-\d\d)/schema\.ts$")
_RFC_CITE: Final = re.compile(r"^RFC (\d+)$")
_DOCS: Final = re.compile(r"^docs/[\w.-]+\.md$")


@dataclass(frozen=True, slots=True)
class Citation:
    """One source of a rule: ``text`` to show and ``url`` to follow (``None``: no address,
    the text is all there is). ``local`` addresses are relative to the repository root."""

    text: str
    url: str | None
    local: bool = False


def site_anchor(heading: str) -> str:
    """The anchor the specification site gives a heading: lower case, words joined by
    ``-``, ``.`` and ``/`` read as word breaks, ``&`` kept (escaped ``%26``), any other
    mark (backticks, underscores, parentheses) dropped: ``"`_meta`"`` → ``meta``,
    ``"Security & Endpoint"`` → ``security-%26-endpoint``, ``"2.10 Flow"`` → ``2-10-flow``
    (as the site's own links show)."""
    text = re.sub(r"[./]", " ", heading.lower())
    text = re.sub(r"[^a-z0-9&\s-]", "", text)
    return re.sub(r"\s+", "-", text.strip()).replace("&", "%26")


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, punctuation other than ``-``
    and ``_`` dropped, each space a ``-``."""
    text = re.sub(r"[^\w\s-]", "", heading.lower())
    return text.strip().replace(" ", "-")


def _one(part: str) -> Citation:
    page, _, section = (p.strip() for p in part.partition("§"))
    shown = f"{page} § {section}" if section else page
    found = _REVISION.match(page)
    if found:
        revision, path = found.groups()
        url = f"{SITE}/{revision}/{path}" + (f"#{site_anchor(section)}" if section else "")
        return Citation(f"MCP {revision} {path}" + (f" § {section}" if section else ""), url)
    found = _SCHEMA.match(page)
    if found:
        name = section.removeprefix("interface ").strip()
        return Citation(f"MCP {found.group(1)} schema § {name}",
                        f"{SITE}/{found.group(1)}/schema" + (f"#{name.lower()}" if name else ""))
    if page == "sep-2243-http-standardization.md":
        return Citation(f"SEP-2243 § {section}" if section else "SEP-2243",
                        f"{_SEPS}/2243-http-standardization"
                        + (f"#{site_anchor(section)}" if section else ""))
    if page == "ext-tasks-draft.md":
        return Citation(f"MCP Tasks extension § {section}" if section else "MCP Tasks extension",
                        _TASKS + (f"#{github_anchor(section)}" if section else ""))
    found = _RFC_CITE.match(page)
    if found and section:
        return Citation(shown, _RFC.format(number=found.group(1), section=section))
    if page == "product.md":
        section = _TOOL_SECTIONS.get(section, section)
        page, shown = TOOL_PAGE, f"{TOOL_PAGE} § {section}"
    if _DOCS.match(page):
        return Citation(shown, page + (f"#{github_anchor(section)}" if section else ""),
                        local=True)
    return Citation(shown, None)


def citations(cite: str) -> tuple[Citation, ...]:
    """Every source ``cite`` names, in order, each with its address (see the module doc)."""
    return tuple(_one(part) for part in cite.split(";") if part.strip())
