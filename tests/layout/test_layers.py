"""The package's layers: no import cycle between modules, and the import-linter contracts in
pyproject.toml (``[tool.importlinter]``, the ones ``lint-imports`` checks in CI) hold.

Both read the import graph grimp builds, where an import inside a function or under
``TYPE_CHECKING`` counts as much as one at the top of a module.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]


def import_cycles(graph: grimp.ImportGraph) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.find_modules_directly_imported_by(nxt)))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(frozenset(component))
    return found


def test_cycle_finder_finds_a_cycle() -> None:
    """The finder itself: a two-module cycle and a three-module one, and no false one."""
    graph = grimp.ImportGraph()
    for name in ("a", "b", "c", "d", "e", "f"):
        graph.add_module(name)
    graph.add_import(importer="a", imported="b")
    graph.add_import(importer="b", imported="a")
    graph.add_import(importer="c", imported="d")
    graph.add_import(importer="d", imported="e")
    graph.add_import(importer="e", imported="c")
    graph.add_import(importer="f", imported="a")
    assert sorted(map(sorted, import_cycles(graph))) == [["a", "b"], ["c", "d", "e"]]


def test_no_import_cycle() -> None:
    """No cycle in mcp_tap (imports in functions and under TYPE_CHECKING count)."""
    graph = grimp.build_graph("mcp_tap", cache_dir=None)
    assert [sorted(cycle) for cycle in import_cycles(graph)] == []


def test_import_contracts_hold() -> None:
    """``lint-imports`` (the CI step) keeps every contract in pyproject.toml."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports"), "--no-cache"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout
