"""Redaction: secrets are removed before anything is serialised, hashed, logged or written.

Keys are compared in a canonical form (:func:`canonical_key`), and the denylist is stored in
that form, so ``X-Api-Key``, ``x_api.key``, ``apiKey`` and ``api-key`` are one key. The
value under a denylisted key is replaced wholesale by :data:`REDACTED`, whatever its type
(a nested object or list included). Operators add keys and method-specific argument
policies through :class:`RedactionPolicy`.

Decisions where the rules are silent:

* Matching is on the *whole* canonical key, never a substring: ``tokenCount`` and
  ``nextCursor`` stay visible, ``token`` and ``Token`` do not.
* :func:`canonical_key` applies NFKC before casefolding, then keeps ASCII letters and
  digits only. Every denylisted word is ASCII, so dropping other characters can only make
  more keys collapse onto a denylisted form (over-redaction, the safe direction); NFKC makes
  compatibility spellings (full-width letters, the long s) collapse too.
* Headers: ``Mcp-Param-{Name}`` mirrors a tool argument, so it is redacted when ``{Name}``
  is denylisted or names an argument under an argument policy (for any tool, since the
  header alone does not say which tool it belongs to). ``Mcp-Session-Id`` is not redacted:
  evidence needs it to judge session rules.
* JSON text is redacted structurally and re-serialised compactly; text with nothing to
  redact is returned unchanged, byte for byte. String *values* are not scanned for secrets
  in JSON; only non-JSON text gets the regex pass.
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

REDACTED: Final = "[REDACTED]"

#: Canonical forms of the keys whose values never leave the tap.
DEFAULT_DENYLIST: Final[frozenset[str]] = frozenset(
    {
        # The minimum the rules require.
        "authorization",
        "proxyauthorization",
        "cookie",
        "setcookie",
        "xapikey",
        "apikey",
        "accesstoken",
        "refreshtoken",
        "idtoken",
        "token",
        "password",
        "secret",
        "clientsecret",
        "registrationaccesstoken",
        # Additions: common credential headers and fields with no other meaning.
        "xauthtoken",  # X-Auth-Token header (OpenStack, many API gateways)
        "xamzsecuritytoken",  # AWS temporary-credential header
        "xcsrftoken",  # anti-CSRF token tied to a session
        "sessiontoken",
        "privatekey",
        "passwd",
        "apisecret",
        "clientassertion",  # OAuth private_key_jwt client authentication
    }
)

# Credentials in these headers start with an auth scheme that is worth keeping in evidence.
_AUTH_HEADERS: Final = frozenset({"authorization", "proxyauthorization"})
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
_MCP_PARAM: Final = "mcpparam"  # canonical prefix of Mcp-Param-{Name}

_ASCII_ALNUM: Final = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")


@functools.lru_cache(maxsize=4096)
def canonical_key(key: str) -> str:
    """Return the matching form of ``key``: NFKC, casefolded, ASCII letters and digits only.

    Cached because every key of every captured message goes through here; the bound keeps
    attacker-chosen keys from growing the cache.
    """
    folded = unicodedata.normalize("NFKC", key).casefold()
    return "".join(ch for ch in folded if ch in _ASCII_ALNUM)


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
    """Operator additions: extra denylisted keys (any spelling) and argument policies."""

    extra_keys: frozenset[str] = field(default_factory=frozenset)
    argument_policies: tuple[ArgumentPolicy, ...] = ()

    def __post_init__(self) -> None:
        """Refuse an extra key that canonicalises to nothing (a configuration mistake)."""
        for key in self.extra_keys:
            if not canonical_key(key):
                raise ValueError(f"redaction key {key!r} has no letters or digits")


# Non-JSON text: a bearer credential anywhere.
_BEARER: Final = re.compile(r"\b(?P<scheme>bearer)(?P<space>[ \t]+)(?P<cred>[^\s,;\"'<>]+)", re.I)
# Non-JSON text: a key followed by ':' or '='. Only the key and separator are matched, so a
# value under a harmless key is never consumed and a later secret on the line is still found.
_KEY: Final = re.compile(
    r"""
    (?<![A-Za-z0-9_.\-\\])                 # a key starts here, not in the middle of one
    (?:
        (?P<q>\\?["'])(?P<qkey>[^"'\\\r\n]{1,256})(?P=q)   # "key", 'key' or \"key\"
      | (?P<bkey>[A-Za-z0-9][A-Za-z0-9_.\-]*)               # bare key
    )
    [ \t]*(?:(?P<colon>:)|=)[ \t]*
    """,
    re.VERBOSE,
)
# The value after the separator: a quoted string, else (':') the rest of the line, since
# header-like lines ("Cookie: a=1; b=2") hold one value up to the line end, else ('=') up to
# the next delimiter of a query string or form body.
_QUOTED: Final = re.compile(r""""(?:[^"\\\r\n]|\\.)*"|'[^'\r\n]*'""")
_REST_OF_LINE: Final = re.compile(r"[^\r\n]*")
_UNTIL_DELIMITER: Final = re.compile(r"[^\s&;,]*")


class Redactor:
    """Applies the default denylist plus a :class:`RedactionPolicy` to JSON, headers and text.

    Every method returns a new value and never mutates its input.
    """

    def __init__(self, policy: RedactionPolicy | None = None) -> None:
        """Build a redactor for ``policy`` (``None``: the default denylist only)."""
        self.policy = policy if policy is not None else RedactionPolicy()
        self.denylist: frozenset[str] = DEFAULT_DENYLIST | frozenset(
            canonical_key(key) for key in self.policy.extra_keys
        )
        self._argument_keys = frozenset(
            canonical_key(p.argument) for p in self.policy.argument_policies
        )

    def is_sensitive_key(self, key: str) -> bool:
        """Return whether the value under ``key`` (any spelling) is redacted."""
        return canonical_key(key) in self.denylist

    def redact_json(self, value: Any) -> Any:
        """Return a copy of a JSON-shaped ``value`` with every denylisted key's value redacted.

        Dicts and lists (tuples become lists) are copied at every depth; scalars are shared.
        """
        return self._redact_tree(value)[0]

    def redact_message(self, msg: Any) -> Any:
        """Return a redacted copy of a JSON-RPC message (or batch): denylist + argument policies."""
        return self._redact_message(msg)[0]

    def redact_headers(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
        """Return ``pairs`` in order, duplicates kept, with sensitive header values redacted.

        ``Authorization`` / ``Proxy-Authorization`` keep a registered auth scheme
        (``Bearer [REDACTED]``); every other sensitive value becomes ``[REDACTED]``.
        """
        out: list[tuple[str, str]] = []
        for name, value in pairs:
            canonical = canonical_key(name)
            if not self._sensitive_header(canonical):
                out.append((name, value))
            elif canonical in _AUTH_HEADERS:
                out.append((name, _redact_credentials(value)))
            else:
                out.append((name, REDACTED))
        return out

    def redact_text(self, text: str) -> str:
        """Return ``text`` (a body or SSE ``data``) with secrets redacted.

        JSON is parsed, redacted as a message and re-serialised compactly with orjson; JSON
        with nothing to redact is returned unchanged. Text orjson refuses but the stdlib
        accepts (``NaN``, lone surrogate escapes, nesting over 1024) is still redacted
        structurally and re-serialised by the stdlib. Other text gets a conservative regex
        pass: ``Bearer <credential>`` anywhere, and the value after ``key:`` / ``key=`` /
        ``"key": "..."`` for denylisted keys.
        """
        try:
            parsed = orjson.loads(text)
        except orjson.JSONDecodeError:
            try:
                parsed = json.loads(text)
            except (ValueError, RecursionError):
                return self._redact_plain_text(text)
            redacted, hits = self._redact_message(parsed)
            if not hits:
                return text
            # ensure_ascii keeps a lone surrogate escaped: raw, it could not be UTF-8 encoded.
            return json.dumps(redacted, separators=(",", ":"))
        redacted, hits = self._redact_message(parsed)
        # Hits, not equality: '{"token":"a","token":"[REDACTED]"}' parses to an already
        # redacted dict, yet its text still holds "a" and must be re-serialised.
        if not hits:
            return text
        return orjson.dumps(redacted).decode("utf-8")

    def removed_values(
        self, header_lists: Sequence[Sequence[tuple[str, str]]], messages: Sequence[Any] = ()
    ) -> list[str]:
        """Return the values redaction removes from these headers and JSON-RPC messages.

        Longest first, so that :meth:`scrub` replaces a secret containing another whole;
        values shorter than 4 characters are left out (replacing ``1`` everywhere would
        mangle a message without hiding anything).
        """
        found: set[str] = set()
        for pairs in header_lists:
            for (name, value), (_, shown) in zip(pairs, self.redact_headers(pairs), strict=True):
                if shown != value:
                    found.update(_credential_forms(name, value))
        for message in messages:
            _collect_removed(message, self.redact_message(message), found)
        return sorted((v for v in found if len(v) >= 4), key=len, reverse=True)

    def scrub(self, text: str, secrets: Sequence[str]) -> str:
        """Return ``text`` (a finding message, a detail line) with ``secrets`` replaced.

        Messages quote wire values, raw or ``repr``-escaped; both spellings are replaced by
        :data:`REDACTED`, then the text gets :meth:`redact_text`'s pass as well.
        """
        for value in secrets:
            text = text.replace(value, REDACTED).replace(repr(value)[1:-1], REDACTED)
        return self.redact_text(text)

    def _sensitive_header(self, canonical: str) -> bool:
        """Return whether a header with canonical name ``canonical`` carries a secret."""
        if canonical in self.denylist:
            return True
        if canonical.startswith(_MCP_PARAM):
            mirrored = canonical[len(_MCP_PARAM) :]
            return mirrored in self.denylist or mirrored in self._argument_keys
        return False

    def _redact_tree(self, value: Any) -> tuple[Any, int]:
        """Copy ``value`` redacting denylisted keys; return the copy and the number of hits.

        Iterative, not recursive: orjson parses nesting deeper than Python's recursion limit.
        """
        root = _empty_like(value)
        if root is None:
            return value, 0
        hits = 0
        stack: list[tuple[Any, Any]] = [(value, root)]
        while stack:
            source, target = stack.pop()
            if isinstance(source, dict):
                for key, item in source.items():
                    if isinstance(key, str) and canonical_key(key) in self.denylist:
                        target[key] = REDACTED
                        hits += 1
                    else:
                        target[key] = _copy_slot(item, stack)
            else:
                for item in source:
                    target.append(_copy_slot(item, stack))
        return root, hits

    def _redact_message(self, msg: Any) -> tuple[Any, int]:
        """Redact a message or batch; return the copy and the number of hits."""
        result, hits = self._redact_tree(msg)
        if self.policy.argument_policies:
            # The copy is ours alone, so the argument policies may edit it in place.
            batch = result if isinstance(result, list) else [result]
            for item in batch:
                hits += self._apply_argument_policies(item)
        return result, hits

    def _apply_argument_policies(self, msg: Any) -> int:
        """Redact policy arguments in one (already copied) message; return the hits."""
        if not isinstance(msg, dict):
            return 0
        method = msg.get("method")
        params = msg.get("params")
        if not isinstance(method, str) or not isinstance(params, dict):
            return 0
        hits = 0
        for policy in self.policy.argument_policies:
            if not policy.matches(method, params):
                continue
            target = policy.target(params)
            if target is None:
                continue
            wanted = canonical_key(policy.argument)
            for key in target:
                if isinstance(key, str) and canonical_key(key) == wanted:
                    target[key] = REDACTED
                    hits += 1
        return hits

    def _redact_plain_text(self, text: str) -> str:
        """The regex pass for text that is not JSON."""
        text = _BEARER.sub(lambda m: f"{m['scheme']}{m['space']}{REDACTED}", text)
        parts: list[str] = []
        done = 0  # text[:done] is already in parts
        for match in _KEY.finditer(text):
            if match.start() < done:
                continue  # this "key" sits inside a value that was just redacted
            key = match["qkey"] if match["qkey"] is not None else match["bkey"]
            if not self.is_sensitive_key(key):
                continue
            start = match.end()
            quoted = _QUOTED.match(text, start)
            if quoted is not None:
                end = quoted.end()
                quote = text[start]
                replacement = f"{quote}{REDACTED}{quote}"
            else:
                rest = _REST_OF_LINE if match["colon"] else _UNTIL_DELIMITER
                found = rest.match(text, start)
                end = found.end() if found is not None else start
                replacement = REDACTED
            if end == start:
                continue  # an empty value hides nothing
            parts.append(text[done:start])
            parts.append(replacement)
            done = end
        parts.append(text[done:])
        return "".join(parts)


# Cookie attributes, not secrets: their values ("/", dates, "Lax") must not be scrubbed.
_COOKIE_ATTRIBUTES: Final = frozenset(
    {"path", "domain", "expires", "maxage", "samesite", "priority", "partitioned"})


def _credential_forms(name: str, value: str) -> set[str]:
    """The spellings of a redacted header's secret a message may quote.

    The whole value, the credential after an auth scheme (``Bearer <token>``), and for
    ``Cookie`` / ``Set-Cookie`` each cookie's value (``sid=<value>; Path=/``).
    """
    value = value.strip()
    forms = {value, value.partition(" ")[2].strip()}
    if canonical_key(name) in ("cookie", "setcookie"):
        for piece in re.split(r"[;,]", value):
            key, _, cookie = piece.strip().partition("=")
            if canonical_key(key) not in _COOKIE_ATTRIBUTES:
                forms.add(cookie.strip().strip('"'))
    return forms


def _collect_removed(original: Any, redacted: Any, out: set[str]) -> None:
    """Collect the string forms of the values ``redacted`` replaced in ``original``.

    Iterative, not recursive: orjson parses nesting deeper than Python's recursion limit.
    """
    pairs = [(original, redacted)]
    while pairs:
        was, shown = pairs.pop()
        if isinstance(shown, str) and shown == REDACTED and was != REDACTED:
            leaves = [was]
            while leaves:
                value = leaves.pop()
                if isinstance(value, dict):
                    leaves.extend(value.values())
                elif isinstance(value, list):
                    leaves.extend(value)
                elif value is not None and not isinstance(value, bool):
                    out.add(str(value))
        elif isinstance(was, dict) and isinstance(shown, dict):
            pairs.extend((value, shown.get(key)) for key, value in was.items())
        elif isinstance(was, list) and isinstance(shown, list):
            pairs.extend(zip(was, shown, strict=False))


def _empty_like(value: Any) -> dict[Any, Any] | list[Any] | None:
    """Return an empty container of the JSON kind of ``value``, or ``None`` for a scalar."""
    if isinstance(value, dict):
        return {}
    if isinstance(value, list | tuple):
        return []
    return None


def _copy_slot(item: Any, stack: list[tuple[Any, Any]]) -> Any:
    """Return what goes into a copied container for ``item``, queueing containers to fill."""
    child = _empty_like(item)
    if child is None:
        return item
    stack.append((item, child))
    return child


def _redact_credentials(value: str) -> str:
    """Redact an Authorization value, keeping a registered scheme name and nothing else."""
    scheme, space, credentials = value.strip().partition(" ")
    if space and credentials.strip() and scheme.lower() in _AUTH_SCHEMES:
        return f"{scheme} {REDACTED}"
    return REDACTED
