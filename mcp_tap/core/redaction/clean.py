"""A JSON text that needs no redaction, recognised from its bytes without walking its parse.

The recorder redacts every JSON body it keeps, and most bodies hold nothing to redact: the
walk then returns the parsed value itself, after visiting every node in Python.
:class:`CleanJson` reaches the same verdict with a few passes in C over the text the value
was parsed from. It answers "clean" only when the walk (with no argument-policy targets,
collecting nothing) provably changes nothing:

* no backslash anywhere: no escape can spell a key (``pass\\u0077ord``), hide a quote or
  carry nested JSON inside a string, so every ``"`` delimits a string and a string's bytes
  are its value;
* ASCII only and no ``%``: a key's canonical form (:func:`~.keys.canonical_key`) is then its
  letters and digits, lower-cased (no percent-decoding, NFKC or casefolding to do);
* no ``=`` anywhere, no ``earer`` in any case, and no ``:`` inside any string: no string
  has the shape the walk gives the text pass (:func:`~.text.shaped`);
* every string that contains a secret pattern (the matcher's own, operator additions
  included) is one the matcher clears (the allowlist) or is never a key.

Anything else is answered "not known clean", and the caller walks.
"""

from __future__ import annotations

import re
from typing import Final

from mcp_tap.core.redaction.keys import KeyMatcher

_UPPER: Final = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_KEPT: Final = b"abcdefghijklmnopqrstuvwxyz0123456789" + _UPPER + b'":{}[]'
# Upper case folded to lower; every byte but letters, digits, quotes, ':' and brackets
# deleted. A string then holds its canonical form (plus any brackets it held), and a key's
# closing quote is followed by its ':'.
_FOLD: Final = bytes.maketrans(_UPPER, _UPPER.lower())
_NOT_KEPT: Final = bytes(b for b in range(256) if b not in _KEPT)
_NOT_BRACKET: Final = bytes(b for b in range(256) if b not in b"{}[]")
_BACKSLASH, _PERCENT, _EQUALS = b"\\%="
_MAX_CLEAN: Final = 8192  # strings remembered as clean; attacker-chosen ones start it over
# Texts shorter than this are walked: the check's fixed cost is a small message's walk.
CLEAN_CHECK_MIN: Final = 384
# Nesting this measures exactly (callers' limits sit far above; deeper texts are walked).
MAX_CLEAN_DEPTH: Final = 64


class CleanJson:
    """The verdict for one key matcher (its patterns, its allowlist)."""

    def __init__(self, matcher: KeyMatcher) -> None:
        """Judge keys with ``matcher`` (the redactor's)."""
        self._matcher = matcher
        self._pattern = re.compile(b"|".join(re.escape(p.encode("ascii"))
                                             for p in matcher.patterns))
        self._clean: set[bytes] = set()  # folded strings no pattern makes secret as keys

    def depth(self, text: bytes) -> int | None:
        """A bound of the nesting depth of ``text`` (JSON that orjson parsed) when
        redaction changes nothing in it; None when that is not known (then walk it).

        The bound is at least the walk's depth and at most :data:`MAX_CLEAN_DEPTH`.
        """
        # Bytes by value: ``b"x" in text`` first tries its operand as an integer and formats
        # (then drops) a TypeError; an int or find() goes straight to the search.
        if _BACKSLASH in text or _PERCENT in text or _EQUALS in text or not text.isascii():
            return None
        folded = text.translate(_FOLD, _NOT_KEPT)
        if folded.find(b"earer") >= 0:
            return None  # "earer" or "EARER" in the text (any case, any separators: more)
        parts = folded.split(b'"')
        if not len(parts) % 2:
            return None  # an unpaired quote: not what this was written for
        outside = b"".join(parts[0::2])
        if outside.count(b":") != folded.count(b":"):
            return None  # a ':' inside a string
        depth = _depth(outside.translate(None, _NOT_BRACKET))
        if depth is None:
            return None
        strings = parts[1::2]
        if self._clean.issuperset(strings):
            return depth  # the usual case: every string seen before (no set built)
        for string in set(strings) - self._clean:
            canonical = string.translate(None, b"{}[]")
            if self._pattern.search(canonical) is not None:
                if not self._matcher.is_secret(canonical.decode("ascii")):
                    pass  # allowlisted: harmless as a key too
                elif folded.find(b'"' + string + b'":') >= 0:
                    return None  # a secret key
                else:
                    continue  # a value spelling a pattern: harmless here, not as a key
            if len(self._clean) >= _MAX_CLEAN:
                self._clean.clear()
            self._clean.add(string)
        return depth


def _depth(brackets: bytes) -> int | None:
    """A bound of how deep the brackets (of JSON that parsed: balanced) nest."""
    if len(brackets) <= 2 * MAX_CLEAN_DEPTH:
        return len(brackets) // 2  # each level opens and closes a container
    # One level per pass: every innermost pair goes at once (replace does not rescan).
    brackets = brackets.replace(b"[", b"{").replace(b"]", b"}")
    depth = 0
    while brackets:
        if depth >= MAX_CLEAN_DEPTH:
            return None
        shorter = brackets.replace(b"{}", b"")
        if len(shorter) == len(brackets):
            return None  # unbalanced: not JSON that parsed
        brackets = shorter
        depth += 1
    return depth
