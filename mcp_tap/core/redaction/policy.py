"""What an operator adds to redaction: name patterns, allowed names, argument policies."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mcp_tap.core.redaction.keys import canonical_key

__all__ = ["ArgumentPolicy", "RedactionPolicy"]


@dataclass(frozen=True, slots=True)
class ArgumentPolicy:
    """Redact one argument of one JSON-RPC method, optionally only for one named target.

    ``method`` must equal the message's ``method``. ``tool`` (``None`` or ``"*"``: any) must
    equal ``params.name`` (the tool of ``tools/call``, the prompt of ``prompts/get``); a
    message without a ``params.name`` matches only the wildcard. The argument is looked up
    in ``params.arguments`` (for ``tools/call`` only there; for other methods in
    ``params.arguments`` when it is an object, else in ``params``), matching keys by
    :func:`canonical_key`.
    """

    method: str
    tool: str | None
    argument: str

    def __post_init__(self) -> None:
        """Refuse an argument name that canonicalises to nothing (it would match no key)."""
        if not canonical_key(self.argument):
            raise ValueError(f"argument name {self.argument!r} has no letters or digits")

    def matches(self, method: str, params: dict[str, Any]) -> bool:
        """Return whether this policy applies to a message with ``method`` and ``params``."""
        if method != self.method:
            return False
        return self.tool in (None, "*") or params.get("name") == self.tool

    def target(self, params: dict[str, Any]) -> dict[str, Any] | None:
        """Return the object holding the arguments of ``params``, or ``None`` if none."""
        arguments = params.get("arguments")
        if isinstance(arguments, dict):
            return arguments
        return None if self.method == "tools/call" else params


@dataclass(frozen=True, slots=True)
class RedactionPolicy:
    """Operator additions: secret name patterns, allowed names, argument policies.

    ``extra_keys`` are patterns like the defaults (a name *containing* one is secret);
    ``allow_keys`` are whole names that stay visible although they contain a pattern.
    """

    extra_keys: frozenset[str] = field(default_factory=frozenset)
    argument_policies: tuple[ArgumentPolicy, ...] = ()
    allow_keys: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        """Refuse a name that canonicalises to nothing (a configuration mistake)."""
        for key in (*self.extra_keys, *self.allow_keys):
            if not canonical_key(key):
                raise ValueError(f"redaction key {key!r} has no letters or digits")
