"""The number screen: which lines of a read may hold a number msgspec's skip lets through.

msgspec checks every number's syntax when it skips a member but not its value, so a number
too large for a double (``1e400``, or an integer part of 309 digits), which orjson rejects,
passes a decode that skips its member. Only such a number separates the two parses of a
line whose syntax and UTF-8 are checked (see :mod:`mcp_tap.evidence.head`), and it needs
an exponent or an integer part of at least 309 digits (without an exponent a number below
10**308 fits a double). :func:`suspect_lines` finds every line of a read that may hold
either, with two passes in C over the bytes, none per line:

* **exponents**: the read translated with digits, signs, points and whitespace deleted,
  with the lowercase letters ``a``-``d`` and ``f`` (the hex digits but ``e``, which fill the
  records' digests) deleted too, every byte but ``:`` that can stand right before or after
  a number token (``, [ ] }``) made ``,``, ``"`` and ``:`` kept, ``e`` and ``E`` made
  ``e`` and everything else but the newline made ``x``. A number token then becomes a lone
  ``e`` (it had an exponent) or nothing, and the whitespace around it vanishes, so a number
  with an exponent leaves ``,e,`` (an array element) or ``":e,`` (a member's value: the
  colon of a member always follows the closing quote of its name); a line without either
  holds a number with no exponent. Inside a string the same bytes are only a false alarm
  (that line is parsed fully): ``true`` and ``false`` keep a letter, and a digest keeps
  only its ``e`` letters between its quotes. The colon is told apart because a redaction
  tag, ``[REDACTED:<hex>]``, would otherwise pass for a number whenever its hex holds one
  ``e`` (38% of 16-digit pseudonyms: a legacy session's every record): ``xexxxxex:e,``
  has no quote before its colon. A line is found from the hits in one forward count of
  newlines, not one count from the start of the read per hit.
* **309 digits**: every 32nd byte of the read, digits made ``0``. A run of 309 digits
  covers at least 9 consecutive sampled bytes, so a line without ``0`` * 9 sampled in it
  has no such run (a false alarm needs 9 sampled digits in a row, 257 bytes: a digest
  holds 64).

Both are sound for any bytes; false alarms only cost a full parse. A writer's line never
has a 309-digit number, and an exponent only on a float below 1e-4 (orjson writes
``1e-05``), which no recorded time is.

Nesting is the one other limit the parses could disagree on: orjson rejects 1024 levels,
msgspec fails at Python's recursion limit, counted from the caller's depth, so on Python
3.11 with the limit at its default of 1000 (:func:`nesting_bounded`) msgspec is the
stricter; otherwise a line is decoded narrowly only if it holds fewer than 1024 brackets.
"""

from __future__ import annotations

import re
import sys
from heapq import merge
from typing import Final

ORJSON_DEPTH: Final = 1024  # nesting levels orjson rejects

# Deleted: what a number token is made of but its exponent mark, the whitespace that may
# stand around it, and the hex letters but ``e`` (a number holds none of them).
_DELETED: Final = b"0123456789+-. \t\rabcdf"
# What may stand right before or after a number (and whitespace) but the member colon,
# which is kept (with the quote before it) so a redaction tag's colon is told apart.
_EDGES: Final = b",[]}"
_KEPT: Final = b'":\n'


def _exponent_table() -> bytes:
    table = bytearray(b"x" * 256)
    for byte in _EDGES:
        table[byte] = ord(",")
    table[ord("e")] = table[ord("E")] = ord("e")
    for byte in _KEPT:
        table[byte] = byte
    return bytes(table)


def _digit_table() -> bytes:
    table = bytearray(b"x" * 256)
    for byte in b"0123456789":
        table[byte] = ord("0")
    return bytes(table)


_EXPONENTS: Final = _exponent_table()
_DIGITS: Final = _digit_table()
# The needles are found by the re module, faster than bytes.find for them, each on its own
# (a literal is searched for as one; their alternation was slower): docs/benchmark.md,
# "Figures the code relies on".
_IN_ARRAY: Final = re.compile(b",e,").finditer
_AS_MEMBER: Final = re.compile(b'":e,').finditer
_STRIDE: Final = 32
# 309 consecutive bytes hold at least 309 // 32 = 9 multiples of 32.
_RUN: Final = b"0" * (309 // _STRIDE)


def suspect_lines(block: bytes) -> set[int] | None:
    """The start offsets in ``block`` of the lines (newline-separated) that may hold a
    number with an exponent or an integer part of 309 digits or more; None when none may.
    """
    ordinals: set[int] = set()
    squeezed = block.translate(_EXPONENTS, _DELETED)
    # Hits come in order: each counts the newlines since the one before (linear in the read).
    line, counted = 0, 0
    for at in merge([m.start() for m in _IN_ARRAY(squeezed)],
                    [m.start() for m in _AS_MEMBER(squeezed)]):
        line += squeezed.count(b"\n", counted, at)
        counted = at
        ordinals.add(line)
    sampled = block[::_STRIDE].translate(_DIGITS)
    at = sampled.find(_RUN)
    line, counted = 0, 0
    while at >= 0:
        end = sampled.find(b"x", at)
        if end < 0:
            end = len(sampled)
        line += block.count(b"\n", counted, at * _STRIDE)
        counted = at * _STRIDE
        last = line + block.count(b"\n", counted, (end - 1) * _STRIDE)
        ordinals.update(range(line, last + 1))
        at = sampled.find(_RUN, end)
    if not ordinals:
        return None
    starts: set[int] = set()
    newline, ordinal, highest = -1, 0, max(ordinals)
    while ordinal <= highest:
        if ordinal in ordinals:
            starts.add(newline + 1)
        newline = block.find(b"\n", newline + 1)
        if newline < 0:
            break
        ordinal += 1
    return starts


def nesting_bounded() -> bool:
    """Whether msgspec's nesting limit is below orjson's (then a line msgspec decodes is
    never nested too deeply for orjson): Python 3.11's recursion limit, which msgspec
    counts against, at or below :data:`ORJSON_DEPTH` (from 3.12 it counts against a fixed
    C limit, past orjson's)."""
    return sys.version_info < (3, 12) and sys.getrecursionlimit() <= ORJSON_DEPTH


__all__ = ["ORJSON_DEPTH", "nesting_bounded", "suspect_lines"]
