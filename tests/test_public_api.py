"""The public API is what we mean it to be: names, the error tree, the command set."""

from __future__ import annotations

import subprocess
import sys

import mcp_tap
from mcp_tap import cli
from mcp_tap.errors import BundleFormatError, InputError, TapError, UpstreamError


class TestPackage:
    """The top-level package."""

    def test_exports(self) -> None:
        """The package exports the version and the error tree, nothing else."""
        assert sorted(mcp_tap.__all__) == [
            "BundleFormatError", "InputError", "TapError", "UpstreamError", "__version__",
        ]

    def test_error_tree(self) -> None:
        """The exception tree is shallow and rooted at TapError, as the docstring draws it."""
        assert issubclass(InputError, TapError)
        assert issubclass(BundleFormatError, InputError)
        assert issubclass(UpstreamError, TapError)
        assert not issubclass(UpstreamError, InputError)
        assert TapError.__bases__ == (Exception,)


class TestCommands:
    """The command-line contract of product.md."""

    def test_every_documented_command_exists(self) -> None:
        """Every command of the contract is offered by the parser."""
        parser = cli.build_parser()
        sub = next(a for a in parser._actions if a.dest == "command")  # argparse has no API
        offered = set(sub.choices)  # type: ignore[arg-type]
        assert {"proxy", "transcripts", "probe", "verify", "gate", "sdk-diff", "replay",
                "report", "attest", "demo"} <= offered

    def test_every_command_takes_json(self) -> None:
        """Every command except the long-running ones accepts --json."""
        parser = cli.build_parser()
        sub = next(a for a in parser._actions if a.dest == "command")
        for name, command in sub.choices.items():  # type: ignore[union-attr]
            if name in ("demo", "report"):
                continue
            flags = {o for a in command._actions for o in a.option_strings}
            assert "--json" in flags, name

    def test_closed_stdout_ends_quietly(self) -> None:
        """A reader that closes the pipe (`| head`) gets exit 1 and no traceback on stderr."""
        process = subprocess.Popen(
            [sys.executable, "-m", "mcp_tap", "transcripts", "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()  # before the first write: every write meets a closed pipe
        with process.stderr:
            err = process.stderr.read()
        assert (process.wait(timeout=60), err) == (1, b"")
