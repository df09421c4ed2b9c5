"""Header redaction, the part of :class:`~mcp_tap.core.redaction.redactor.Redactor` that
reads HTTP header pairs: values under secret names are redacted (``Authorization`` keeps a
registered auth scheme), ``Mcp-Session-Id`` becomes a keyed pseudonym (see
:data:`~mcp_tap.core.redaction.keys.SESSION_HEADER`), a challenge keeps its scheme and loses
only parameter values under secret names, and every other value gets the text pass when it
holds ``=`` or a bearer credential (a ``Referer`` with ``?token=``). ``Mcp-Param-{Name}``
mirrors a tool argument, so it is redacted when ``{Name}`` is secret or names an argument
under an argument policy (and, by its value, when it mirrors an argument that redaction hid
under another name: :meth:`~mcp_tap.core.redaction.redactor.Redactor.redact_mirrored`).
What a header name asks of its value is decided once per spelling.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from mcp_tap.core.hashing import hmac_sha256
from mcp_tap.core.redaction.keys import SESSION_HEADER, KeyMatcher, canonical_key
from mcp_tap.core.redaction.text import REDACTED, header_shaped, redact_plain_text

# Credentials in these headers start with an auth scheme that is worth keeping in evidence.
_AUTH_HEADERS: Final = frozenset({"authorization", "proxyauthorization"})
# Challenges (RFC 9110 11.6.1, 11.7.1) carry auth parameters, never a credential.
_CHALLENGE_HEADERS: Final = frozenset({"wwwauthenticate", "proxyauthenticate"})
# IANA HTTP Authentication Scheme Registry, plus AWS SigV4; only these count as a scheme, so
# a bare secret that happens to contain a space never has its first word kept.
_AUTH_SCHEMES: Final = frozenset(
    {
        "basic",
        "bearer",
        "concealed",
        "digest",
        "dpop",
        "gnap",
        "hoba",
        "mutual",
        "negotiate",
        "oauth",
        "privatetoken",
        "scram-sha-1",
        "scram-sha-256",
        "vapid",
        "aws4-hmac-sha256",
    }
)
MCP_PARAM: Final = "mcpparam"  # canonical prefix of Mcp-Param-{Name}
_PSEUDONYM_HEX: Final = 16  # 64 bits: distinct sessions of one bundle never collide in practice
_MAX_CACHED_NAMES: Final = 8192  # attacker-chosen header names must not grow memory
# What a header name (as spelt) asks of its value, decided once per spelling.
_PLAIN, _SESSION, _AUTH, _SECRET, _CHALLENGE = range(5)


class HeaderRedaction:
    """Header methods of the redactor (a base of :class:`Redactor`, which sets the state
    below and provides the text pass)."""

    matcher: KeyMatcher
    _argument_keys: frozenset[str]
    _header_kinds: dict[str, int]
    _pseudonym_key: bytes

    def _text_pass(self, text: str, found: set[str] | None) -> str:
        """The redactor's text pass over a string value (see :class:`Redactor`)."""
        raise NotImplementedError


    def redact_headers(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
        """Return ``pairs`` in order, duplicates kept, with sensitive header values redacted.

        ``Authorization`` / ``Proxy-Authorization`` keep a registered auth scheme
        (``Bearer [REDACTED]``); ``Mcp-Session-Id`` becomes ``[REDACTED:<keyed pseudonym>]``;
        every other sensitive value becomes ``[REDACTED]``.
        """
        out: list[tuple[str, str]] = []
        for name, value in pairs:
            out.append((name, self._header_value(name, value, None)))
        return out

    def redact_header_lists(self, pairs: Sequence[tuple[str, str]]) -> list[list[str]]:
        """:meth:`redact_headers` in the evidence's shape, ``[[name, value], ...]``."""
        value_of = self._header_value
        kinds = self._header_kinds
        # A plain header with nothing shaped is the usual pair: tested inline, no call.
        return [
            [name, value]
            if kinds.get(name) == _PLAIN
            and not header_shaped(value)
            else [name, value_of(name, value, None)]
            for name, value in pairs
        ]

    def _header_kind(self, name: str) -> int:
        """What ``name`` (as spelt) asks of its value (cached per spelling, bounded)."""
        kind = self._header_kinds.get(name)
        if kind is not None:
            return kind
        canonical = canonical_key(name)
        if canonical == SESSION_HEADER:
            kind = _SESSION
        elif self._sensitive_header(canonical):
            kind = _AUTH if canonical in _AUTH_HEADERS else _SECRET
        elif canonical in _CHALLENGE_HEADERS:
            kind = _CHALLENGE
        else:
            kind = _PLAIN
        if len(self._header_kinds) < _MAX_CACHED_NAMES:
            self._header_kinds[name] = kind
        return kind

    def _header_value(self, name: str, value: str, found: set[str] | None) -> str:
        kind = self._header_kind(name)
        if kind == _PLAIN:
            if header_shaped(value):
                return self._text_pass(value, found)
            return value
        if kind == _SESSION:
            return self.pseudonym(value)
        if kind != _CHALLENGE:
            if found is not None:
                found.update(_credential_forms(canonical_key(name), value))
            if kind == _AUTH:
                return _redact_credentials(value)
            return REDACTED
        # A challenge, "Bearer error=..., scope=...": the scheme is no key and the word after
        # it no credential; only parameter values under secret names are hidden.
        scheme, space, params = value.partition(" ")
        return scheme + space + redact_plain_text(
            params, self.matcher.is_secret_key, found, bearer_credentials=False)

    def pseudonym(self, value: str) -> str:
        """A stand-in for ``value`` that tells equal values apart from others, keyed."""
        mac = hmac_sha256(self._pseudonym_key, b"mcp-tap pseudonym\0" + value.encode(
            "utf-8", "surrogateescape"))
        return f"[REDACTED:{mac.hex()[:_PSEUDONYM_HEX]}]"

    def _sensitive_header(self, canonical: str) -> bool:
        """Return whether a header with canonical name ``canonical`` carries a secret."""
        if canonical.startswith(MCP_PARAM):
            mirrored = canonical[len(MCP_PARAM) :]
            return self.matcher.is_secret(mirrored) or mirrored in self._argument_keys
        return self.matcher.is_secret(canonical)


# Cookie attributes, not secrets: their values ("/", dates, "Lax") must not be scrubbed.
_COOKIE_ATTRIBUTES: Final = frozenset(
    {"path", "domain", "expires", "maxage", "samesite", "priority", "partitioned"})


def _credential_forms(canonical_name: str, value: str) -> set[str]:
    """The spellings of a redacted header's secret a message may quote.

    The whole value, the credential after an auth scheme (``Bearer <token>``), and for
    ``Cookie`` / ``Set-Cookie`` each cookie's value (``sid=<value>; Path=/``).
    """
    value = value.strip()
    forms = {value, value.partition(" ")[2].strip()}
    if canonical_name in ("cookie", "setcookie"):
        for piece in re.split(r"[;,]", value):
            key, _, cookie = piece.strip().partition("=")
            if canonical_key(key) not in _COOKIE_ATTRIBUTES:
                forms.add(cookie.strip().strip('"'))
    return forms


def _redact_credentials(value: str) -> str:
    """Redact an Authorization value, keeping a registered scheme name and nothing else."""
    scheme, space, credentials = value.strip().partition(" ")
    if space and credentials.strip() and scheme.lower() in _AUTH_SCHEMES:
        return f"{scheme} {REDACTED}"
    return REDACTED
