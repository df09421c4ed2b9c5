"""Every module the prose names exists: the package trees in README.md and
docs/architecture.md, each ``mcp_tap/...`` path and each dotted ``mcp_tap.x.y`` name in
README.md, docs/*.md and bench/README.md."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = (ROOT / "README.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").glob("*.md")))
TREES = (ROOT / "README.md", ROOT / "docs" / "architecture.md")

# (Not after a colon: `git show REV:mcp_tap/...` names a file of another revision.)
_PATH = re.compile(r"(?<![:\w])mcp_tap/[\w/]*[\w.]*\w|(?<![:\w])mcp_tap/")
_DOTTED = re.compile(r"(?<![\w./-])mcp_tap(?:\.[A-Za-z_]\w*)+")
# Dotted names that are no module: the pytest fixture's methods (README, "pytest plugin").
NOT_MODULES = frozenset({"mcp_tap.tap", "mcp_tap.serve"})
# docs/observability.md names span attributes (mcp_tap.hop, mcp_tap.finding.rule, ...).
ATTRIBUTE_DOCS = frozenset({"observability.md"})
_TREE_ENTRY = re.compile(r"^( {2}| {4})([\w.]+(?:/|\.py))(?:\s|$)")


def tree_paths(text: str) -> list[str]:
    """The entries of each ``mcp_tap/`` tree drawn in a code block: a name two spaces in is
    in the package, four spaces in is in the folder above it; deeper lines are notes."""
    found: list[str] = []
    in_tree = False
    folder = ""
    for line in text.splitlines():
        if line.startswith("```"):
            in_tree = False
            continue
        if line.rstrip() == "mcp_tap/":
            in_tree = True
            continue
        entry = _TREE_ENTRY.match(line) if in_tree else None
        if entry is None:
            continue
        indent, name = entry.groups()
        if len(indent) == 2:
            folder = name if name.endswith("/") else ""
            found.append(f"mcp_tap/{name}")
        elif folder:
            found.append(f"mcp_tap/{folder}{name}")
    return found


@cache
def defined_names(module: Path) -> frozenset[str]:
    """The names a module defines at its top level and in its classes."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return frozenset(names)


def module_file(parts: list[str]) -> Path | None:
    """The file of the dotted module ``parts`` (a package's ``__init__.py``), or None."""
    base = ROOT.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def dotted_exists(name: str) -> bool:
    """A module, or a name (``Class`` or ``Class.attr``) defined in one."""
    parts = name.split(".")
    if module_file(parts) is not None:
        return True
    for cut in (1, 2):
        module = module_file(parts[:-cut]) if len(parts) > cut else None
        if module is not None and parts[-cut] in defined_names(module):
            return True
    return False


def test_tree_parser_reads_entries_not_notes() -> None:
    """Top-level entries, a folder's entries, and no word of a note or a later block."""
    text = ("```\nmcp_tap/\n  core/          the core\n    hashing.py   digests,\n"
            "                 body.py (a note)\n  cli.py         entry\n```\n  other.py\n")
    assert tree_paths(text) == ["mcp_tap/core/", "mcp_tap/core/hashing.py", "mcp_tap/cli.py"]


def test_trees_name_existing_modules() -> None:
    """Every entry of the package trees is a file or folder of the package."""
    missing = [f"{doc.name}: {path}" for doc in TREES
               for path in tree_paths(doc.read_text(encoding="utf-8"))
               if not (ROOT / path).exists()]
    assert missing == []


def test_named_paths_exist() -> None:
    """Every ``mcp_tap/...`` path named in the docs exists."""
    missing = [f"{doc.relative_to(ROOT)}: {path}" for doc in DOCS
               for path in _PATH.findall(doc.read_text(encoding="utf-8"))
               if not (ROOT / path).exists()]
    assert missing == []


def test_named_modules_exist() -> None:
    """Every dotted ``mcp_tap.x.y`` name in the docs is a module or a name defined in one."""
    missing = [f"{doc.relative_to(ROOT)}: {name}" for doc in DOCS
               if doc.name not in ATTRIBUTE_DOCS
               for name in _DOTTED.findall(doc.read_text(encoding="utf-8"))
               if name not in NOT_MODULES and not dotted_exists(name)]
    assert missing == []
