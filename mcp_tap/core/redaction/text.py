"""Redaction of text that is not (or no longer) JSON: bodies, query strings, messages, URLs.

The pass is conservative: ``Bearer <credential>`` anywhere, and the value after ``key:``,
``key=`` or ``"key": "..."`` when the key names a secret. Keys are found however they are
spelt on the wire: percent-encoded (``api%5Fkey=``, ``%74oken=``, decoded by
:func:`~mcp_tap.core.redaction.keys.canonical_key`), JSON-escaped inside quotes
(``"pass\\u0077ord": ...``), form-encoded (``api+key=``), as path parameters (``;token=``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

REDACTED: Final = "[REDACTED]"


def shaped(text: str) -> bool:
    """Whether the text pass may change ``text``: it holds a key's separator (``=`` or
    ``:``) or a bearer scheme's letters in any case (the pass finds ``bEARer <credential>``
    too). The redaction's one shape test (cheap, no regex): a string value without this
    shape is left as it is. tests/core/test_redaction_shape.py ties it to the pass.
    """
    return "=" in text or ":" in text or "earer" in text.lower()


def header_shaped(value: str) -> bool:
    """:func:`shaped` for the value of a plain header (one not named secret): ``:`` does
    not count there, a header value being one value, not ``key: value`` lines (a Date or
    a URL would otherwise go through the pass for nothing)."""
    return "=" in value or "earer" in value.lower()

# A bearer credential anywhere.
_BEARER: Final = re.compile(r"\b(?P<scheme>bearer)(?P<space>[ \t]+)(?P<cred>[^\s,;\"'<>]+)", re.I)
# A key followed by ':' or '='. Only the key and separator are matched, so a value under a
# harmless key is never consumed and a later secret on the line is still found. A quoted key
# may hold escapes (\u0077, \/) but not an escaped quote of its own kind.
_KEY: Final = re.compile(
    r"""
    (?<![A-Za-z0-9_.\-\\%+])              # a key starts here, not in the middle of one
    (?:
        (?P<q>\\?["'])(?P<qkey>(?:[^"'\\\r\n]|\\[^"'\r\n]){1,256})(?P=q)   # "key" or \"key\"
      | (?P<bkey>(?:[A-Za-z0-9%]|\\u[0-9A-Fa-f]{4})(?:[A-Za-z0-9_.\-%+]|\\u[0-9A-Fa-f]{4})*)
                                                                      # bare key (\u too)
    )
    [ \t]*(?:(?P<colon>:)|=)[ \t]*
    """,
    re.VERBOSE,
)
# The value after the separator: a quoted string (also an escaped one inside a JSON string),
# else (':') the rest of the line, since header-like lines ("Cookie: a=1; b=2") hold one
# value up to the line end, else ('=') up to the next delimiter of a query string, a form
# body or a path parameter. A quoted value runs to its closing quote whatever it holds: a
# raw newline or any other control character (invalid JSON, so this pass sees it) and every
# escape JSON allows (``\\\\``, ``\\"``, ``\\n``, ``\\u2028`` ...), so no character of the
# string is left after a newline; a string never closed runs to the end of the text.
_QUOTED: Final = re.compile(
    r""""(?:[^"\\]|\\[\s\S])*(?:"|\\?\Z)|'[^']*(?:'|\Z)|\\"(?:[^"\\]|\\[^"])*(?:\\"|\\?\Z)""")
_REST_OF_LINE: Final = re.compile(r"[^\r\n]*")
_UNTIL_DELIMITER: Final = re.compile(r"[^\s&;,]*")
_ESCAPE: Final = re.compile(r"\\u([0-9A-Fa-f]{4})|\\(.)")

# URLs in free text (tap error reasons, log fields): scheme://authority/path;params?query#frag
_URL: Final = re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s\"'<>\\]+")

def unescape_key(key: str) -> str:
    """A quoted key with JSON escapes resolved (``pass\\u0077ord`` -> ``password``)."""
    if "\\" not in key:
        return key
    return _ESCAPE.sub(lambda m: chr(int(m[1], 16)) if m[1] else m[2], key)


def redact_plain_text(
    text: str,
    is_secret_key: Callable[[str], bool],
    found: set[str] | None = None,
    *,
    bearer_credentials: bool = True,
) -> str:
    """Return ``text`` with bearer credentials and values under secret keys redacted.

    ``is_secret_key`` takes a key as spelt (escapes resolved); ``found`` collects what was
    removed (for scrubbing finding messages that quote it). ``bearer_credentials=False``
    leaves ``Bearer <word>`` alone: in a challenge (``WWW-Authenticate: Bearer error=...``)
    the word after the scheme is an auth parameter, not a credential.
    """
    if not bearer_credentials:
        pass
    elif found is None:
        text = _BEARER.sub(lambda m: f"{m['scheme']}{m['space']}{REDACTED}", text)
    else:
        def bearer(m: re.Match[str]) -> str:
            found.add(m["cred"])
            return f"{m['scheme']}{m['space']}{REDACTED}"

        text = _BEARER.sub(bearer, text)
    parts: list[str] = []
    done = 0  # text[:done] is already in parts
    for match in _KEY.finditer(text):
        if match.start() < done:
            continue  # this "key" sits inside a value that was just redacted
        key = unescape_key(match["qkey"] if match["qkey"] is not None else match["bkey"])
        if not is_secret_key(key) and not (
            match["bkey"] is not None and _spaced_key_is_secret(text, match.start(), key,
                                                                is_secret_key)
        ):
            continue
        start = match.end()
        quoted = _QUOTED.match(text, start)
        if quoted is not None:
            end = quoted.end()
            quote = '\\"' if text.startswith('\\"', start) else text[start]
            replacement = f"{quote}{REDACTED}{quote}"
            value = text[start + len(quote) : end - len(quote)]
        else:
            rest = _REST_OF_LINE if match["colon"] else _UNTIL_DELIMITER
            stop = rest.match(text, start)
            end = stop.end() if stop is not None else start
            replacement = REDACTED
            value = text[start:end]
        if end == start or value == REDACTED:
            continue  # an empty value hides nothing
        if found is not None:
            found.add(value)
        parts.append(text[done:start])
        parts.append(replacement)
        done = end
    if not parts:
        return text
    parts.append(text[done:])
    return "".join(parts)


def _spaced_key_is_secret(
    text: str, start: int, key: str, is_secret_key: Callable[[str], bool]
) -> bool:
    """Whether the words before a bare key make it secret (``api key=``, ``Auth Token:``)."""
    before = _WORDS_BEFORE.search(text, max(0, start - 256), start)
    if before is None:
        return False
    words = before[0].split()
    return any(
        is_secret_key(unescape_key("".join(words[-n:])) + key) for n in range(1, len(words) + 1)
    )


# Up to eight words, each followed by one space or tab, that end where a bare key starts.
_WORD: Final = r"(?:[A-Za-z0-9%]|\\u[0-9A-Fa-f]{4})(?:[A-Za-z0-9_.\-%+]|\\u[0-9A-Fa-f]{4})*"
_WORDS_BEFORE: Final = re.compile(rf"(?:{_WORD}[ \t]){{1,8}}\Z")


def strip_url_secrets(text: str) -> str:
    """Return ``text`` with every URL's userinfo, path parameters, query and fragment cut.

    For tap error reasons and log fields: an upstream URL there is context, and its query
    string or ``user:password@`` may be a credential. What remains is scheme, host, port and
    path; a cut part is shown as ``[REDACTED]`` so a reader knows something was there.
    """
    if "://" not in text:
        return text
    return _URL.sub(_shown_url, text)


def _shown_url(match: re.Match[str]) -> str:
    url = match[0]
    scheme, _, rest = url.partition("://")
    userinfo = ""
    authority = rest.partition("/")[0]
    if "@" in authority:  # before the marks: a password may hold ';', '?' or '#'
        userinfo = f"{REDACTED}@"
        rest = rest[authority.rindex("@") + 1 :]
    cut = _FIRST_MARK.search(rest)
    tail = ""
    if cut is not None:
        rest, tail = rest[: cut.start()], f"{cut[0]}{REDACTED}"
    return f"{scheme}://{userinfo}{rest}{tail}"


_FIRST_MARK: Final = re.compile(r"[;?#]")
