"""The ``[redaction]`` table: secret name patterns, allowed names, argument policies, and
the operator's body-digest key (a file or an environment variable, never the key itself)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_tap.core.hashing import DigestKey
from mcp_tap.core.redaction import ArgumentPolicy, RedactionPolicy
from mcp_tap.errors import InputError
from mcp_tap.files import read_file

_REDACTION_KEYS = frozenset(
    {"extra_keys", "allow_keys", "argument", "digest_key_file", "digest_key_env"})
ARGUMENT_KEYS = frozenset({"method", "tool", "argument"})
"""The keys of one ``[[redaction.argument]]`` table."""
REDACTION_TABLES = {"redaction": _REDACTION_KEYS, "redaction.argument": ARGUMENT_KEYS}
"""The ``[redaction]`` tables' allowed keys (see :mod:`mcp_tap.tables`)."""


def _redaction(data: Any) -> RedactionPolicy:
    """``[redaction]``: secret name patterns, allowed names, argument policies."""
    if data is None:
        return RedactionPolicy()
    if not isinstance(data, dict):
        raise InputError("[redaction] must be a table")
    unknown = set(data) - _REDACTION_KEYS
    if unknown:
        raise InputError(f"[redaction] has unknown option(s): {', '.join(sorted(unknown))}")
    names: dict[str, list[str]] = {}
    for option in ("extra_keys", "allow_keys"):
        value = data.get(option, [])
        if not isinstance(value, list) or not all(isinstance(k, str) for k in value):
            raise InputError(f"[redaction] {option} must be a list of strings")
        names[option] = value
    policies: list[ArgumentPolicy] = []
    for i, item in enumerate(data.get("argument", [])):
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("method"), str)
            or not isinstance(item.get("argument"), str)
        ):
            raise InputError(f"[[redaction.argument]] #{i} needs string method and argument")
        tool = item.get("tool")
        if tool is not None and not isinstance(tool, str):
            raise InputError(f"[[redaction.argument]] #{i} tool must be a string")
        try:
            policies.append(ArgumentPolicy(item["method"], tool, item["argument"]))
        except ValueError as exc:
            raise InputError(f"[[redaction.argument]] #{i}: {exc}") from None
    try:
        return RedactionPolicy(
            extra_keys=frozenset(names["extra_keys"]),
            argument_policies=tuple(policies),
            allow_keys=frozenset(names["allow_keys"]),
        )
    except ValueError as exc:
        raise InputError(f"[redaction]: {exc}") from None


def redaction_policy(table: Any) -> RedactionPolicy:
    """Parse a ``[redaction]`` table (the proxy config's) into a policy; InputError if bad."""
    return _redaction(table)
_DIGEST_KEY_FILE_ENV = "MCP_TAP_REDACTION_DIGEST_KEY_FILE"
_DIGEST_KEY_ENV_ENV = "MCP_TAP_REDACTION_DIGEST_KEY_ENV"


def digest_key(data: Any, env: Mapping[str, str]) -> DigestKey | None:
    """The operator's body-digest key: ``[redaction] digest_key_file`` or ``digest_key_env``.

    Like ``attest``'s HMAC key: a file (one trailing newline ignored) or the name of an
    environment variable holding it, never the key itself in the config. Neither: ``None``,
    and each bundle draws its own key.
    """
    table = data if isinstance(data, dict) else {}
    path = env.get(_DIGEST_KEY_FILE_ENV, table.get("digest_key_file"))
    variable = env.get(_DIGEST_KEY_ENV_ENV, table.get("digest_key_env"))
    known = {_DIGEST_KEY_FILE_ENV, _DIGEST_KEY_ENV_ENV, variable}
    for name in sorted(env):  # a typo in a variable is an error, as in the other sections
        if name.startswith("MCP_TAP_REDACTION_") and name not in known:
            raise InputError(
                f"environment variable {name} names no [redaction] option; known: "
                f"{_DIGEST_KEY_ENV_ENV}, {_DIGEST_KEY_FILE_ENV}")
    if path is not None and variable is not None:
        raise InputError("[redaction] digest_key_file and digest_key_env exclude each other")
    if path is not None:
        if not isinstance(path, str):
            raise InputError("[redaction] digest_key_file must be a string")
        secret = read_file(path, "digest key file")
        for ending in (b"\r\n", b"\n"):
            if secret.endswith(ending):
                secret = secret[: -len(ending)]
                break
        where = f"digest key file {path}"
    elif variable is not None:
        if not isinstance(variable, str) or not variable:
            raise InputError("[redaction] digest_key_env must name an environment variable")
        value = env.get(variable)
        if value is None:
            raise InputError(f"[redaction] digest_key_env: environment variable {variable} "
                             "is not set")
        secret = value.encode("utf-8", "surrogateescape")
        where = f"environment variable {variable}"
    else:
        return None
    try:
        return DigestKey(secret, "operator")
    except ValueError as exc:
        raise InputError(f"{where}: {exc}") from None

