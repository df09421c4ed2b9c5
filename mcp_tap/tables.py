"""Strict configuration tables: every key of every table a file may hold is known.

The proxy config and the gate policy each declare the keys of each of their tables in one
mapping (table name -> allowed keys), and :func:`check_tables` walks a parsed TOML document
against it before any value is read: an unknown key -- a typo, or a key of a newer version
-- is one line naming the key, its table and the file (exit 2), never silently ignored.
A feature that adds a key adds it to its file's mapping, nothing else.

Table names are dotted paths: ``""`` is the top level, ``"health.baseline"`` a nested
table, and an array of tables (``[[hop]]``) is checked item by item under its own name.
A table mapped to None holds names of the user's choosing (a key ring) and is not checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mcp_tap.errors import InputError

__all__ = ["TableKeys", "check_tables"]

TableKeys = Mapping[str, frozenset[str] | None]
"""Table name (dotted; ``""`` the top level) -> its allowed keys (None: any key)."""


def _shown(name: str, index: int | None) -> str:
    if not name:
        return "the top level"
    return f"[[{name}]] #{index}" if index is not None else f"[{name}]"


def _check(table: Mapping[str, Any], name: str, index: int | None, tables: TableKeys,
           source: str) -> None:
    allowed = tables.get(name)
    if allowed is None:
        return
    for key in table:
        if key not in allowed:
            known = ", ".join(sorted(allowed)) or "none"
            dotted = f"{name}.{key}" if name else key
            raise InputError(f"{source}: unknown key {dotted} in {_shown(name, index)} "
                             f"(known: {known})")
    for key, value in table.items():
        child = f"{name}.{key}" if name else key
        if child not in tables:
            continue  # a value, not a table the mapping describes (its type is checked later)
        if isinstance(value, Mapping):
            _check(value, child, None, tables, source)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, Mapping):
                    _check(item, child, i, tables, source)


def check_tables(document: Mapping[str, Any], tables: TableKeys, source: str | Path) -> None:
    """Raise :class:`InputError` for the first key of ``document`` (a parsed TOML file) that
    its table does not allow; ``source`` names the file in the message."""
    _check(document, "", None, tables, str(source))
