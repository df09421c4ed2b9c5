"""The value objects of a command's output: an :class:`Outcome` with its :class:`Check`
cases and their :class:`Location` in the evidence (re-exported by :mod:`mcp_tap.outputs`,
and imported from here by the format modules, which that package imports)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Location:
    """Where a check's evidence is: a file (bundle segment or fixture), line, record seq.

    ``path`` is as the user named it (relative stays relative); ``exchange`` is the
    exchange id or record digest the check refers to.
    """

    path: str
    line: int | None = None
    seq: int | None = None
    exchange: str = ""


@dataclass(frozen=True, slots=True)
class Check:
    """One test case: passed, failed or skipped, with the finding and its evidence.

    ``rule`` is the catalog rule id the failure is a finding of (``None`` when the failure
    is not a rule's, e.g. a case that expected a rejection); ``strength`` is ``must`` or
    ``should`` (a SHOULD is a warning in SARIF).
    """

    name: str
    group: str
    passed: bool
    skipped: bool = False
    message: str = ""
    detail: str = ""
    rule: str | None = None
    strength: str = "must"
    locations: tuple[Location, ...] = ()


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one command run produced, in every form a format needs."""

    command: str
    headline: str
    ok: bool
    data: Any
    text: str
    checks: tuple[Check, ...] = ()
    facts: Mapping[str, str] = field(default_factory=dict)
    # The JSON on one line (the gate's decision, one object per line) instead of indented.
    compact: bool = False
    # The command's own SARIF rules, (id, one-line description), for failures that are no
    # catalog rule's (a diff's breaking change); each is a reporting rule at error level.
    rules: tuple[tuple[str, str], ...] = ()
