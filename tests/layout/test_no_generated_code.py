"""Rules over the whole package's source, checked on its syntax trees (not by grep, which a
comment or a string would fool)."""

from __future__ import annotations

import ast
from pathlib import Path

import mcp_tap

_PACKAGE = Path(mcp_tap.__file__).parent
_FORBIDDEN = frozenset({"exec", "eval", "compile"})


def _calls_of_forbidden(tree: ast.AST) -> list[tuple[int, str]]:
    """Every call of exec, eval or compile as a builtin (a bare name or ``builtins.x``),
    and every mention of those builtins by name (``f = exec`` would hide a call)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in _FORBIDDEN:
            found.append((node.lineno, node.id))
        elif (isinstance(node, ast.Attribute) and node.attr in _FORBIDDEN
              and isinstance(node.value, ast.Name) and node.value.id == "builtins"):
            found.append((node.lineno, f"builtins.{node.attr}"))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "__import__")
              and any(isinstance(a, ast.Constant) and a.value in _FORBIDDEN
                      for a in node.args)):
            found.append((node.lineno, "getattr/__import__ of a forbidden builtin"))
    return found


def test_no_exec_eval_or_compile_in_the_package() -> None:
    """No generated code: nothing in mcp_tap runs source text (methods of other objects,
    such as ``re.compile`` or ``fastjsonschema.compile``, are not the builtins)."""
    sources = sorted(_PACKAGE.rglob("*.py"))
    assert len(sources) > 100  # the walk found the package
    offenders = [
        f"{path.relative_to(_PACKAGE)}:{line}: {name}"
        for path in sources
        for line, name in _calls_of_forbidden(ast.parse(path.read_text(), str(path)))
    ]
    assert offenders == []


def test_the_check_finds_each_form() -> None:
    """The walk above would catch each way of reaching the builtins."""
    source = ("exec('x')\nf = eval\nimport builtins\nbuiltins.compile('1', 'f', 'eval')\n"
              "getattr(builtins, 'exec')\nre.compile('x')\n")
    found = sorted(_calls_of_forbidden(ast.parse(source)))
    assert found == [(1, "exec"), (2, "eval"), (4, "builtins.compile"),
                     (5, "getattr/__import__ of a forbidden builtin")]
