"""Headers an operator adds to every request that ``probe`` and ``replay`` send.

They exist for authentication: evidence is redacted, so a replay has no credentials of its
own, and a probed server may sit behind a gateway. ``--header 'NAME: VALUE'`` gives the value
on the command line; ``--header-env NAME=ENVVAR`` reads it from the environment so the secret
stays out of the process list and the shell history. Both are repeatable.

The headers these commands set themselves (the MCP headers and the HTTP framing) are refused:
a second copy would be a duplicate the server judges, changing the very verdicts reported.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping
from typing import Final

from mcp_tap.core.eras import (
    HEADER_METHOD,
    HEADER_NAME,
    HEADER_PARAM_PREFIX,
    HEADER_PROTOCOL_VERSION,
    HEADER_SESSION_ID,
)
from mcp_tap.errors import InputError

__all__ = ["add_header_options", "header_from_env", "headers_from_args", "parse_header"]

_TOKEN: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110 field-name token

_SET_BY_THE_COMMAND: Final = frozenset({
    "accept", "content-type", "content-length", "host", "transfer-encoding", "connection",
    HEADER_PROTOCOL_VERSION.lower(), HEADER_METHOD.lower(), HEADER_NAME.lower(),
    HEADER_SESSION_ID.lower(),
})


def add_header_options(parser: argparse.ArgumentParser, requests: str) -> None:
    """Declare ``--header`` and ``--header-env``; ``requests`` names what they are added to."""
    parser.add_argument("--header", action="append", default=[], metavar="'NAME: VALUE'",
                        help=f"add this header to every {requests} (e.g. authentication); "
                        "repeatable")
    parser.add_argument("--header-env", action="append", default=[], metavar="NAME=ENVVAR",
                        help="add header NAME with the value of environment variable ENVVAR "
                        "(keeps the secret out of the process list); repeatable")


def headers_from_args(args: argparse.Namespace, env: Mapping[str, str]) -> list[tuple[str, str]]:
    """The headers ``--header`` and ``--header-env`` asked for, in that order (InputError)."""
    headers = [parse_header(text) for text in args.header]
    headers += [header_from_env(spec, env) for spec in args.header_env]
    return headers


def parse_header(text: str) -> tuple[str, str]:
    """Parse ``'Name: value'`` into a header pair; InputError when it is not a usable header."""
    name, sep, value = text.partition(":")
    name, value = name.strip(), value.strip()
    if not sep or not name:
        raise InputError(f"--header {text!r}: expected 'NAME: VALUE'")
    return check_header(name, value, f"--header {name}")


def header_from_env(spec: str, env: Mapping[str, str]) -> tuple[str, str]:
    """Parse ``NAME=ENVVAR`` into a header whose value is read from ``env[ENVVAR]``."""
    name, sep, var = spec.partition("=")
    name, var = name.strip(), var.strip()
    if not sep or not name or not var:
        raise InputError(f"--header-env {spec!r}: expected NAME=ENVVAR")
    value = env.get(var)
    if value is None:
        raise InputError(f"--header-env {name}: environment variable {var} is not set")
    return check_header(name, value.strip(), f"--header-env {name}")


def check_header(name: str, value: str, what: str) -> tuple[str, str]:
    """Return ``(name, value)`` when it is a header the operator may add; ``what`` names it."""
    if not _TOKEN.fullmatch(name):
        raise InputError(f"{what}: not a valid header name")
    lowered = name.lower()
    if lowered in _SET_BY_THE_COMMAND or lowered.startswith(HEADER_PARAM_PREFIX.lower()):
        raise InputError(f"{what}: this header is set by the command itself")
    if any(ch in value for ch in "\r\n\x00"):
        raise InputError(f"{what}: the value must not contain CR, LF or NUL")
    return name, value
