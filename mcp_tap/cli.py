"""The ``mcp-tap`` entry point: one parser, one module per command, one error boundary.

Each command module in :mod:`mcp_tap.commands` exposes ``NAME``, ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int``. Only the module of the command being
run is imported (the others' names and help are read from their source text), so ``--help`` and
``--version`` start fast.
Errors mcp-tap raises on purpose become one line on stderr and exit code 2; nothing reaches
the user as a traceback.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from mcp_tap.errors import InputError, TapError, UpstreamError
from mcp_tap.outputs.printable import printable_lines
from mcp_tap.version import __version__

# Command modules, in the order `--help` lists them.
COMMANDS: tuple[str, ...] = (
    "proxy",
    "demo",
    "transcripts",
    "probe",
    "verify",
    "gate",
    "gate_server",
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
# The gate holds: not enough (or no attested rollback) evidence to decide either way.
EXIT_HOLD = 3


class _Parser(argparse.ArgumentParser):
    """An argparse parser whose usage errors are one line and exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]  # argparse returns NoReturn
        sys.stderr.write(printable_lines([f"mcp-tap: error: {message}"]))
        raise SystemExit(EXIT_BAD_INPUT)


def _load(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(f"mcp_tap.commands.{name}")
    except ModuleNotFoundError as exc:
        # A command whose module is not present yet is simply not offered.
        if exc.name == f"mcp_tap.commands.{name}":
            return None
        raise


# `NAME = "..."` / `HELP = "..."`: one string literal on one line, at the top of the module.
_CONSTANT = re.compile(r'^(NAME|HELP) = ("(?:[^"\\\n]|\\.)*")$', re.MULTILINE)


def describe(module_name: str) -> tuple[str, str] | None:
    """A command module's ``(NAME, HELP)``, read from its source without importing it.

    Importing a command imports what it runs (aiohttp, the schema models): seconds. The
    two constants are one-line string literals in every command module, so they are read
    from the source text; a module that spells them otherwise is imported instead.
    """
    spec = importlib.util.find_spec(f"mcp_tap.commands.{module_name}")
    if spec is None or spec.origin is None:
        return None  # a command whose module is not present yet is simply not offered
    try:
        source = Path(spec.origin).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        source = ""
    found = {key: ast.literal_eval(literal) for key, literal in _CONSTANT.findall(source)}
    if isinstance(found.get("NAME"), str) and isinstance(found.get("HELP"), str):
        return found["NAME"], found["HELP"]
    module = _load(module_name)
    return None if module is None else (module.NAME, module.HELP)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """Build the ``mcp-tap`` argument parser.

    With ``only`` (a command name), only that command's module is imported and its
    arguments declared; the others are listed by name and help. ``None`` builds them all.
    """
    parser = _Parser(prog="mcp-tap", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--version", action="version", version=f"mcp-tap {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for module_name in COMMANDS:
        described = describe(module_name)
        if described is None:
            continue
        name, help_text = described
        cmd = sub.add_parser(name, help=help_text, description=help_text)
        if only is not None and name != only:
            continue
        module = _load(module_name)
        if module is None:
            continue
        module.add_arguments(cmd)
        cmd.set_defaults(_run=module.run)
    return parser


def _command_of(argv: Sequence[str]) -> str:
    """The command ``argv`` names: its first word that is not an option ("" for none)."""
    return next((word for word in argv if not word.startswith("-")), "")


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``mcp-tap`` with ``argv`` and return the process exit code."""
    words = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(only=_command_of(words))
    args = parser.parse_args(words)
    try:
        code: int = args._run(args)
        sys.stdout.flush()  # inside the boundary: a closed pipe is reported here, not at exit
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_NO
    except InputError as exc:
        sys.stderr.write(printable_lines([f"mcp-tap: error: {exc}"]))
        return EXIT_BAD_INPUT
    except UpstreamError as exc:
        sys.stderr.write(printable_lines([f"mcp-tap: upstream error: {exc}"]))
        return EXIT_BAD_INPUT
    except TapError as exc:
        sys.stderr.write(printable_lines([f"mcp-tap: error: {exc}"]))
        return EXIT_BAD_INPUT
    except OSError as exc:
        # The boundary for what a command did not translate itself (a file it could not
        # read or write): one line, bad input, never a traceback.
        where = f" {exc.filename}" if exc.filename else ""
        sys.stderr.write(printable_lines([f"mcp-tap: error:{where}: {exc.strerror or exc}"]))
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
