"""Text safe to print: the one place control characters are escaped for every output.

Tool names, error messages, bodies and headers come from servers and clients, and a
command prints them. Raw, an ``ESC`` starts a terminal escape sequence (colours, cursor
moves, an OSC 8 hyperlink or an OSC 52 clipboard write), a ``CR`` moves back over a line
already printed and a ``LF`` starts a line of the attacker's choosing ("FAKE LINE: every
source passed"). :func:`printable` writes each such character as a visible escape
(``\\x1b``, ``\\r``, ``\\n``, ``\\u202e``) so what a server sent is shown, never obeyed:

* C0 controls, ``DEL`` and C1 controls (``\\x9b`` is a one-byte CSI on some terminals);
* Unicode line and paragraph separators and the bidirectional overrides and isolates,
  which reorder what a reader sees (the "Trojan Source" characters);
* lone surrogates and the noncharacters ``U+FFFE`` / ``U+FFFF`` (not encodable, and not
  allowed in XML).

Every text format goes through it: each line a command builds (:func:`printable_lines`),
the whole text output once more (:func:`~mcp_tap.outputs.render`, so a line a builder missed
still cannot carry a control character), error lines, JUnit XML values (XML 1.0 forbids
most of these characters) and Markdown cells; JSON output escapes the ones JSON leaves raw
(:func:`json_safe`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

__all__ = ["json_safe", "printable", "printable_lines", "printable_text"]

_UNSAFE: Final = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
    "\ud800-\udfff\ufffe\uffff]")
_NAMED: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# What JSON leaves raw (it escapes C0 itself): C1, separators, bidi controls.
_JSON_RAW: Final = re.compile(
    "[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    char = match[0]
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every control character escaped (see the module docstring): one line,
    shown as sent, safe on a terminal and in XML. Clean text is returned as is."""
    if text.isprintable():  # False for every character escaped here: the common case
        return text
    return _UNSAFE.sub(_escape, text)


def printable_lines(lines: Iterable[str]) -> str:
    """Each of ``lines`` :func:`printable`, each ending in a newline: a text output whose
    line structure is the builder's, never the data's."""
    return "".join(printable(line) + "\n" for line in lines)


def printable_text(text: str) -> str:
    """A whole text output with its newlines kept and every other control character
    escaped (the last guard: :func:`~mcp_tap.outputs.render` applies it to every text)."""
    if text.isprintable():
        return text
    return "\n".join(printable(piece) for piece in text.split("\n"))


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match[0]):04x}"


def json_safe(text: str) -> str:
    """JSON text with the characters JSON encoders leave raw escaped as ``\\uXXXX`` (they
    can only occur inside strings, where the escape means the same character)."""
    if text.isascii():  # every character escaped here is outside ASCII: the common case
        return text
    return _JSON_RAW.sub(_json_escape, text)
