"""The fast path of ``verify``: a record line's chain fields without building the record.

``verify`` needs four members of each record (``seq``, ``prev``, ``digest``, ``kind``), and
the digest is over the line's bytes. :func:`line_head` gets those four with msgspec, which
checks the whole line's JSON syntax (every skipped member included) but builds Python
objects only for them, a fraction of a full parse's cost (docs/benchmark.md, "Figures the
code relies on").

msgspec does not check UTF-8 inside the members it skips, so :func:`line_head` does
(``isascii`` first: the writer's canonical JSON is almost always ASCII). Any line it cannot
vouch for -- not JSON, not an object, a chain field missing or of another type, an integer
past 64 bits, nesting past the recursion limit, invalid UTF-8 -- gives ``None``, and the
caller parses the line fully with orjson and reports it exactly as before. The fast path
decides only lines that the full parse accepts with the same four values (duplicate members:
the last one wins in both), with one exception it cannot see without reading every number:
a number too large for a double (``1e400``), which orjson rejects and msgspec skips over.
The writer never writes one (orjson writes no infinity); ``verify`` takes this fast path for
a bundle whose ``bundle.json`` verifies under a trusted key (the signed manifests cover
every byte of every segment, so a line altered to hold such a number fails verification
there), and for any other bundle on the lines its number screen
(:mod:`mcp_tap.evidence.screen`) clears.
"""

from __future__ import annotations

from typing import Annotated, Final

import msgspec

from mcp_tap.evidence.schema import CheckedRecord

# orjson reads an integer up to 2**64 - 1 as an int and a larger one as a float (which is
# then not a seq); msgspec bounds fit int64, so seq up to 2**63 - 1 is decided here.
_Seq = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]


class RecordHead(CheckedRecord, kw_only=True):
    """The chain fields of one stored record, decoded with the values the evidence schema
    constrains (:mod:`mcp_tap.evidence.schema`): a line holding an impossible value fails
    this decode and goes to the full parse, which reports it."""

    seq: _Seq
    prev: str
    digest: str
    kind: str


_decode: Final = msgspec.json.Decoder(RecordHead).decode
decode_head: Final = _decode
"""The chain fields of a line (bytes or a memoryview), raising one of
:data:`DECODE_ERRORS`; unlike :func:`line_head` it leaves the UTF-8 check to the caller."""
# RecursionError: msgspec's nesting limit (orjson's is 1024 levels; the full parse decides).
DECODE_ERRORS: Final = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)


def line_head(line: bytes) -> RecordHead | None:
    """The chain fields of a record line, or None when only a full parse can judge the line."""
    try:
        head = _decode(line)
    except DECODE_ERRORS:
        return None
    return head if valid_utf8(line) else None


def valid_utf8(line: bytes | memoryview) -> bool:
    """Whether ``line`` is valid UTF-8 (orjson rejects a line that is not; msgspec's
    partial decode may skip the bad bytes, so a fast path must check)."""
    if type(line) is bytes and line.isascii():
        return True
    try:
        str(line, "utf-8")
    except UnicodeDecodeError:
        return False
    return True


__all__ = ["DECODE_ERRORS", "RecordHead", "decode_head", "line_head", "valid_utf8"]
