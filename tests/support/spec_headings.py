"""The headings of the published specification pages mcp-tap cites, as a snapshot in
``tests/data/spec_headings.json``, so a test can check every citation's page and section
on any machine (the pages themselves are not in this repository).

Regenerate from a copy of the published pages (the specification repository's
``docs/specification/<revision>/`` and ``schema/<revision>/schema.ts``, SEP-2243, the Tasks
extension draft, laid out as ``mcp_tap.core.citations`` names them)::

    .venv/bin/python tests/support/spec_headings.py --write SPEC_DIR
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

SNAPSHOT = Path(__file__).parents[1] / "data" / "spec_headings.json"
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_INTERFACE = re.compile(r"^export (?:interface|type) (\w+)", re.M)


def headings(path: Path) -> list[str]:
    """The Markdown headings of a page (outside code fences), or a schema's type names."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".ts":
        return _INTERFACE.findall(text)
    found: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        match = None if fenced else _HEADING.match(line)
        if match:
            found.append(match.group(2))
    return found


def snapshot(spec: Path) -> dict[str, list[str]]:
    """Every page under ``spec`` (relative path) -> its headings."""
    pages = sorted(p for p in spec.rglob("*") if p.suffix in (".md", ".mdx", ".ts"))
    return {str(p.relative_to(spec)): headings(p) for p in pages}


def load() -> dict[str, list[str]]:
    """The committed snapshot."""
    data: dict[str, list[str]] = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    return data


def main() -> None:
    """``--write SPEC_DIR``: write the snapshot from a copy of the published pages."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", metavar="SPEC_DIR", required=True, type=Path)
    args = parser.parse_args()
    SNAPSHOT.write_text(json.dumps(snapshot(args.write), indent=1, ensure_ascii=False) + "\n",
                        encoding="utf-8")


if __name__ == "__main__":
    main()
