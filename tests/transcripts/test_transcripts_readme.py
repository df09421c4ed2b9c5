"""The README's figures for the shipped corpus are the corpus's: a newcomer who runs
``mcp-tap transcripts`` sees the numbers the README shows (they went stale once, 130 of
180). Adding cases means updating the README with the command's real output."""

from __future__ import annotations

import re
from pathlib import Path

from mcp_tap.transcripts import load_corpus

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_corpus_counts() -> None:
    """Every count of the corpus in the README, prose and the shown JSON, is its size."""
    text = README.read_text(encoding="utf-8")
    size = len(load_corpus())
    prose = [int(n) for n in re.findall(r"corpus (?:of )?\(?(\d+) golden and negative", text)]
    shown = [int(n) for n in re.findall(r'"(?:passed|total)": (\d+)', text)]
    assert len(prose) == 2 and len(shown) == 2
    assert set(prose) | set(shown) == {size}


def test_readme_says_to_activate_the_venv() -> None:
    """The examples run ``mcp-tap`` bare: the README says how it gets on PATH."""
    assert ". .venv/bin/activate" in README.read_text(encoding="utf-8")
