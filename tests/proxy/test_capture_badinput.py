"""Bad input to diff, export, redact and serve: one line naming the problem, exit 2.

No server is needed: each case is refused before a socket is opened or a file written.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_runs import exchange, refused
from releases import raw_bundle


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    """A minimal readable bundle with one whole exchange."""
    return raw_bundle(tmp_path / "bundle", [exchange("e1")])


class TestEmptyAndUnreadable:
    """Empty paths are refused by name; unreadable files say what they were for."""

    @pytest.mark.parametrize(("argv", "fragment"), [
        (["diff", "", "EV"], "an empty path names no evidence"),
        (["diff", "EV", " "], "an empty path names no evidence"),
        (["export", "", "--format", "har"], "an empty path names no evidence"),
        (["export", "EV", "--format", "har", "--out", ""], "--out is empty"),
        (["redact", "EV", "--policy", "", "--out", "OUT"],
         "policy file: an empty path names no file"),
        (["redact", "EV", "--policy", "DIR", "--out", "OUT"],
         "cannot read policy file DIR: Is a directory"),
        (["redact", "EV", "--policy", "MISSING", "--out", "OUT"],
         "cannot read policy file MISSING: No such file"),
        (["serve", ""], "an empty path names no evidence"),
        (["serve", "EV", "--listen", ""], "--listen: '' is not HOST:PORT"),
        (["serve", "EV", "--listen", "127.0.0.1:99999"], "is not HOST:PORT"),
    ])
    def test_refused(self, argv: list[str], fragment: str, bundle: Path, tmp_path: Path,
                     capsys: pytest.CaptureFixture[str]) -> None:
        """One line, exit 2, nothing written."""
        names = {"EV": str(bundle), "DIR": str(tmp_path), "MISSING": str(tmp_path / "missing"),
                 "OUT": str(tmp_path / "out")}
        for placeholder, real in names.items():
            fragment = fragment.replace(f" {placeholder}:", f" {real}:")
        refused([names.get(a, a) for a in argv], capsys, fragment)
        assert not (tmp_path / "out").exists()

    def test_redact_needs_one_bundle(self, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
        """A directory of two bundles is not one source."""
        (tmp_path / "runs").mkdir()
        raw_bundle(tmp_path / "runs" / "a", [exchange("e1")])
        raw_bundle(tmp_path / "runs" / "b", [exchange("e2")])
        policy = tmp_path / "p.toml"
        policy.write_text("[redaction]\nextra_keys = [\"k\"]\n")
        refused(["redact", str(tmp_path / "runs"), "--policy", str(policy), "--out",
                 str(tmp_path / "out")], capsys, "holds 2 bundles; name one of them")
