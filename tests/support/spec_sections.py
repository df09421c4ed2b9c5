"""The text of one cited section of a specification page, for checking a rule's quote.

A citation is ``<page> § <section>`` (see ``mcp_tap.core.citations``): the section is the
Markdown heading's text, its body running to the next heading of the same or a higher
level; ``schema.ts § interface Name`` is that type's doc comment and body; a page without a
section is the whole page. Text is normalised as a reader sees it: emphasis markers gone,
runs of whitespace one space.
"""

from __future__ import annotations

import re
from pathlib import Path

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_KEYWORDS = (
    ("must", re.compile(r"\b(MUST(?: NOT)?|REQUIRED|SHALL(?: NOT)?)\b")),
    ("should", re.compile(r"\b(SHOULD(?: NOT)?|(?:NOT )?RECOMMENDED)\b")),
    ("may", re.compile(r"\b(MAY|OPTIONAL)\b")),
)


def normalise(text: str) -> str:
    """Text as a reader sees it: no ``**``/``_``/backtick emphasis, one space per run."""
    text = text.replace("**", "").replace("`", "")
    text = re.sub(r"(?<![\w])_([^_\n]+)_(?![\w])", r"\1", text)
    text = re.sub(r"^\s*(?:[-*]|\d+\.)\s+", " ", text, flags=re.M)  # list markers
    text = re.sub(r"^\s*(?://|\*|/\*\*?|\*/)\s?", " ", text, flags=re.M)  # TS comments
    return re.sub(r"\s+", " ", text).strip()


def strength(sentence: str) -> str | None:
    """The RFC 2119 strength a sentence words: ``must``, ``should``, ``may``, or ``None``.

    The strongest keyword decides (a sentence that says MUST and MAY is a MUST)."""
    for name, pattern in _KEYWORDS:
        if pattern.search(sentence):
            return name
    return None


def section_text(spec: Path, page: str, section: str | None) -> str | None:
    """The normalised text of ``section`` of ``page`` under ``spec`` (``None`` if absent)."""
    path = spec / page
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8")
    if section is None:
        return normalise(text)
    if path.suffix == ".ts":
        return _interface(text, section.removeprefix("interface "))
    lines = text.splitlines()
    out: list[str] = []
    level = 0
    fenced = False
    for line in lines:
        if line.startswith("```"):
            fenced = not fenced
        match = None if fenced else _HEADING.match(line)
        if match and level:
            if len(match.group(1)) <= level:
                break
        elif match and match.group(2) == section:
            level = len(match.group(1))
            continue
        if level:
            out.append(line)
    return normalise("\n".join(out)) if level else None


def _interface(text: str, name: str) -> str | None:
    """A schema type's doc comment and body."""
    match = re.search(rf"^export (?:interface|type) {re.escape(name)}\b", text, re.M)
    if match is None:
        return None
    start = text.rfind("/**", 0, match.start())
    between = text[start:match.start()] if start >= 0 else ""
    doc = between if start >= 0 and "*/" in between and "export " not in between else ""
    end = text.find("\n}", match.start())
    body = text[match.start(): end if end >= 0 else len(text)]
    return normalise(doc + "\n" + body)
