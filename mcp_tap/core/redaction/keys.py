"""Which names are secret: canonical forms, the default patterns and the MCP allowlist.

A name is compared in its canonical form (:func:`canonical_key`): percent-decoded (repeatedly,
so ``%2574oken`` is ``token`` too), NFKC-normalised, casefolded, ASCII letters and digits
only. ``X-Api-Key``, ``x_api.key``, ``api%5Fkey`` and ``%74oken`` all reach their bare form.

A canonical name is secret when it *contains* one of the patterns (:data:`DEFAULT_PATTERNS`
plus operator additions), unless it *is* one of the allowlisted names (:data:`DEFAULT_ALLOW`
plus operator additions). Containment over-redacts on purpose (``author`` contains ``auth``,
``tokenCount`` contains ``token``): a hidden harmless value costs the evidence a detail, a
shown secret costs the operator a credential.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Iterable
from typing import Final
from urllib.parse import unquote

#: Substrings of a canonical name that mark its value as secret (issue 12's list first).
DEFAULT_PATTERNS: Final[tuple[str, ...]] = (
    "token",
    "secret",
    "password",
    "passwd",
    "pwd",
    "apikey",
    "auth",
    "credential",
    "privatekey",
    "session",
    "cookie",
    "signature",
    # Additions: credential names none of the above contains.
    "accesskey",  # AWS_ACCESS_KEY, accessKey
    "subscriptionkey",  # Ocp-Apim-Subscription-Key (Azure API Management)
    "passphrase",
    "jwt",
    "bearer",
    "csrf",
    "xsrf",
)

#: Canonical names that contain a pattern but name no secret, each for a reason given.
DEFAULT_ALLOW: Final[frozenset[str]] = frozenset(
    {
        # MCP schema (2025-11-25 and 2026-07-28): a progress notification's correlation id
        # chosen by the requester (not a credential; evidence needs it to pair progress with
        # its request) and the sampling token budget (a number).
        "progresstoken",
        "maxtokens",
        # The extension identifier "io.modelcontextprotocol/oauth-client-credentials": a
        # key of capabilities.extensions whose value is the extension's settings.
        "iomodelcontextprotocoloauthclientcredentials",
        # Challenges, not credentials (RFC 9110 11.6.1, 11.7.1): the realm, scope and
        # resource_metadata URL the authorization rules are judged on.
        "wwwauthenticate",
        "proxyauthenticate",
        # OAuth metadata the MCP authorization flow publishes (RFC 9728 protected resource
        # metadata, RFC 8414 authorization server metadata, RFC 7591 client metadata): URLs
        # and method names, public by definition.
        "authorizationservers",
        "authorizationendpoint",
        "tokenendpoint",
        "tokenendpointauthmethod",
        "tokenendpointauthmethodssupported",
        "tokenendpointauthsigningalgvaluessupported",
        "revocationendpointauthmethodssupported",
        "introspectionendpointauthmethodssupported",
        "authorizationresponseissparametersupported",
        "tokentype",
    }
)

#: ``Mcp-Session-Id`` (2025-11-25 transports, Session Management): the value SHOULD be
#: "cryptographically secure" and the client "MUST handle the session ID in a secure
#: manner" -- whoever holds it can act in the session. So evidence never shows it, but
#: replay and readers need to tell sessions apart: it becomes a keyed pseudonym.
SESSION_HEADER: Final = "mcpsessionid"

_ASCII_ALNUM: Final = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
_MAX_UNQUOTE: Final = 4  # %25 nested deeper than this is not a key anyone decodes


@functools.lru_cache(maxsize=8192)
def canonical_key(key: str) -> str:
    """Return the matching form of ``key``: percent-decoded, NFKC, casefolded, ASCII alnum.

    Cached because every key of every captured message goes through here; the bound keeps
    attacker-chosen keys from growing the cache.
    """
    for _ in range(_MAX_UNQUOTE):
        if "%" not in key:
            break
        decoded = unquote(key, errors="replace")
        if decoded == key:
            break
        key = decoded
    folded = unicodedata.normalize("NFKC", key).casefold()
    return "".join(ch for ch in folded if ch in _ASCII_ALNUM)


class KeyMatcher:
    """Decides whether a name is secret: pattern containment minus the allowlist."""

    def __init__(self, extra_patterns: Iterable[str] = (), extra_allow: Iterable[str] = ()) -> None:
        """Build a matcher for the defaults plus operator patterns and allowed names."""
        patterns = {*DEFAULT_PATTERNS, *(canonical_key(p) for p in extra_patterns)}
        self.patterns: tuple[str, ...] = tuple(sorted(p for p in patterns if p))
        self.allow: frozenset[str] = DEFAULT_ALLOW | frozenset(
            canonical_key(k) for k in extra_allow
        )
        self._cache: dict[str, bool] = {}

    def is_secret(self, canonical: str) -> bool:
        """Return whether a name in canonical form names a secret."""
        known = self._cache.get(canonical)
        if known is not None:
            return known
        secret = canonical not in self.allow and any(p in canonical for p in self.patterns)
        if len(self._cache) < 8192:  # attacker-chosen names must not grow memory
            self._cache[canonical] = secret
        return secret

    def is_secret_key(self, key: str) -> bool:
        """Return whether ``key`` (any spelling) names a secret."""
        return self.is_secret(canonical_key(key))
