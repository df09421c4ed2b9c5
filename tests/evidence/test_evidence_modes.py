"""Evidence and what is made from it are the owner's only: files 0600, directories 0700.

A real tap writes a bundle under evidence directories it creates itself (their parents
too); ``redact`` derives a bundle, ``export`` and ``report`` write files from it. Under the
usual umask 022 every file is 0600 and every directory the tools created 0700, as the
report (and a signing key file) always were.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_runs import cli
from peers import sdk_list_tools
from taps import hop_url, running_tap, tap_options

from mcp_tap.core.eras import Era


@pytest.fixture
def umask_022() -> Iterator[None]:
    """The usual umask, whatever the test runner's is."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def modes(root: Path) -> dict[str, int]:
    """Every path under ``root`` (itself included) -> its permission bits."""
    return {str(p.relative_to(root.parent)): stat.S_IMODE(p.stat().st_mode)
            for p in [root, *root.rglob("*")]}


async def test_evidence_and_outputs_are_private(tmp_path: Path, origin_base: str,
                                                umask_022: None,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """The tap's bundle (and the directories it made), the derived bundle, the export and
    the report."""
    evidence = tmp_path / "made" / "by" / "the-tap"
    async with running_tap(tap_options(evidence, upstream=origin_base)) as tap:
        await sdk_list_tools(hop_url(tap), Era.MODERN)
    (bundle,) = evidence.iterdir()
    policy = tmp_path / "stricter.toml"
    policy.write_text('[redaction]\nextra_keys = ["region"]\n')
    for argv in (["redact", str(bundle), "--policy", str(policy), "--out",
                  str(tmp_path / "derived")],
                 ["export", str(evidence), "--format", "jsonl", "--out", str(tmp_path / "x.jsonl")],
                 ["report", str(evidence), "--out", str(tmp_path / "r.html")]):
        code, _, err = cli(argv, capsys)
        assert code == 0, err
    found = {**modes(tmp_path / "made"), **modes(tmp_path / "derived")}
    assert any(name.endswith(".jsonl") for name in found)
    for name, mode in found.items():
        want = 0o700 if (tmp_path / name).is_dir() else 0o600
        assert mode == want, f"{name}: {mode:o}"
    assert stat.S_IMODE((tmp_path / "x.jsonl").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "r.html").stat().st_mode) == 0o600
