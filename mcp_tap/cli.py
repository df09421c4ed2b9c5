"""The ``mcp-tap`` entry point: one parser, one module per command, one error boundary.

Each command module in :mod:`mcp_tap.commands` exposes ``NAME``, ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int``. Errors mcp-tap raises on purpose become
one line on stderr and exit code 2; nothing reaches the user as a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from types import ModuleType

from mcp_tap import __version__
from mcp_tap.errors import InputError, TapError, UpstreamError

# Command modules, in the order `--help` lists them.
COMMANDS: tuple[str, ...] = (
    "proxy",
    "demo",
    "transcripts",
    "probe",
    "verify",
    "gate",
    "attest",
    "sdk_diff",
    "replay",
    "report",
    "diff",
    "export",
    "redact",
    "serve",
)

EXIT_OK = 0
EXIT_NO = 1
EXIT_BAD_INPUT = 2


class _Parser(argparse.ArgumentParser):
    """An argparse parser whose usage errors are one line and exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]  # argparse returns NoReturn
        sys.stderr.write(f"mcp-tap: error: {message}\n")
        raise SystemExit(EXIT_BAD_INPUT)


def _load(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(f"mcp_tap.commands.{name}")
    except ModuleNotFoundError as exc:
        # A command whose module is not present yet is simply not offered.
        if exc.name == f"mcp_tap.commands.{name}":
            return None
        raise


def build_parser() -> argparse.ArgumentParser:
    """Build the full ``mcp-tap`` argument parser."""
    parser = _Parser(prog="mcp-tap", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--version", action="version", version=f"mcp-tap {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in COMMANDS:
        module = _load(name)
        if module is None:
            continue
        cmd = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(cmd)
        cmd.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``mcp-tap`` with ``argv`` and return the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args._run(args)
        sys.stdout.flush()  # inside the boundary: a closed pipe is reported here, not at exit
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_NO
    except InputError as exc:
        sys.stderr.write(f"mcp-tap: error: {exc}\n")
        return EXIT_BAD_INPUT
    except UpstreamError as exc:
        sys.stderr.write(f"mcp-tap: upstream error: {exc}\n")
        return EXIT_BAD_INPUT
    except TapError as exc:
        sys.stderr.write(f"mcp-tap: error: {exc}\n")
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130
    return code


def _silence_stdout() -> None:
    """The reader of stdout went away (``| head``): stop quietly, as other tools do.

    Stdout is pointed at ``/dev/null`` so the interpreter's last flush of what is still
    buffered does not print an "Exception ignored" message on the way out.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a real file (a test's capture)
        pass
