"""The ``Mcp-Name`` / ``Mcp-Param-*`` header value codec: plain values and the Base64 sentinel.

A mirrored header carries a body value. Values that cannot travel raw in an HTTP field
(non-ASCII, control characters, leading or trailing whitespace, or a plain value that itself
looks like the sentinel) are sent as ``=?base64?{Base64(UTF-8)}?=``. The markers are
lowercase. Receivers decode exactly before comparing, and reject a malformed value with
-32020; :class:`SentinelError` says which of the four ways it was malformed.

Decisions where the rules are silent (see also the function docstrings):

* **Two notions of "safe".** :func:`is_safe_plain` is the *sender's* test and is deliberately
  stricter than what :func:`decode_header_value` accepts as plain: encoding is always
  allowed, so the encoder also wraps the empty string and anything starting with
  ``=?base64`` in any letter case. The decoder follows the receiver rules exactly.
* **Empty value.** The encoder wraps ``""`` as ``=?base64??=`` because many HTTP stacks drop
  or cannot distinguish an empty field from a missing one, and a missing mirrored header is
  a mismatch. The decoder still reads a raw empty value as ``""``: the rules do not list it
  as unsafe, and a receiver must not reject what the rules allow.
* **Uppercase marker.** ``=?BASE64?...?=`` is not the sentinel (the markers are lowercase,
  and the specification's edge-case table reads it as a literal), so it decodes to itself.
* **The sentinel pattern** is "starts with ``=?base64?`` and ends with ``?=``" (streamable
  HTTP "Value Encoding"). Only such a value is decoded, and fails as ``invalid-base64`` /
  ``invalid-utf8``. Anything else is a literal: ``=?base64?SGVsbG8=`` (no suffix) and
  ``=?base64`` are plain values (SEP-2243's "Base64 Decoding" table), so
  ``incomplete-sentinel`` is no longer raised by the decoder.
* **Optional whitespace.** HTTP strips spaces and tabs around a field value (RFC 9110 5.5):
  ``Mcp-Name:  foo `` carries ``foo`` (SEP-2243's "Header/Body Mismatch" table), so the
  decoder strips them before anything else. A body value with surrounding whitespace cannot
  travel raw; it must be encoded, and a raw header then mismatches it.
"""

from __future__ import annotations

import base64
import binascii
from typing import Final, Literal

SENTINEL_PREFIX: Final = "=?base64?"
SENTINEL_SUFFIX: Final = "?="

# The prefix without its final "?": a raw value starting with this "looks like the sentinel".
_LOOKALIKE: Final = SENTINEL_PREFIX[:-1]

SentinelReason = Literal["incomplete-sentinel", "invalid-base64", "invalid-utf8", "raw-unsafe"]

#: Every value :attr:`SentinelError.reason` can take, in the order the decoder checks them.
SENTINEL_REASONS: Final[tuple[SentinelReason, ...]] = (
    "incomplete-sentinel",
    "invalid-base64",
    "invalid-utf8",
    "raw-unsafe",
)


class SentinelError(ValueError):
    """A mirrored header value that cannot be decoded; ``reason`` names the defect."""

    def __init__(self, reason: SentinelReason, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason: SentinelReason = reason


def _printable_ascii(value: str) -> bool:
    """Return whether every character of ``value`` is in 0x20..0x7E (space through tilde)."""
    # For ASCII text, isprintable() is exactly 0x20..0x7E (space is printable, DEL is not).
    return value.isascii() and value.isprintable()


def _raw_defect(value: str) -> str | None:
    """Return why ``value`` may not travel raw under the receiver rules, or ``None``.

    The encoder also wraps values that match the sentinel pattern; that is its own test.
    """
    if not _printable_ascii(value):
        return "non-ASCII or control character in a plain value"
    # Only the space can be at an edge here: tab and other whitespace are control characters
    # or non-ASCII and were refused above.
    if value[:1] == " " or value[-1:] == " ":
        return "leading or trailing whitespace in a plain value"
    return None


def is_safe_plain(value: str) -> bool:
    """Return whether the encoder may send ``value`` unencoded.

    True for a non-empty string of printable ASCII (0x20-0x7E) with no leading or trailing
    space that does not start with ``=?base64`` in any letter case. Stricter than the
    receiver on purpose: the empty string and case variants of the marker are wrapped so
    that neither a stack that drops empty fields nor a receiver that matches the marker
    case-insensitively can misread them.
    """
    if not value or _raw_defect(value) is not None:
        return False
    if value[:1] in (" ", "\t") or value[-1:] in (" ", "\t"):
        return False
    return value[: len(_LOOKALIKE)].lower() != _LOOKALIKE


def encode_header_value(value: str) -> str:
    """Return ``value`` as a header value: unchanged if :func:`is_safe_plain`, else the sentinel.

    The sentinel is ``=?base64?`` + standard Base64 (with padding) of the exact UTF-8 bytes +
    ``?=``; nothing is trimmed or normalised first. Raises :class:`SentinelError` with reason
    ``invalid-utf8`` when ``value`` holds a lone surrogate, which has no UTF-8 form.
    """
    if is_safe_plain(value):
        return value
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise SentinelError("invalid-utf8", f"value has no UTF-8 form ({exc.reason})") from exc
    return SENTINEL_PREFIX + base64.b64encode(raw).decode("ascii") + SENTINEL_SUFFIX


def _decode_payload(payload: str) -> str:
    """Decode the Base64 text between the markers strictly, then its UTF-8 bytes."""
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        # ValueError too: b64decode refuses non-ASCII str input with a plain ValueError.
        raise SentinelError("invalid-base64", f"payload is not Base64 ({exc})") from exc
    # validate=True still accepts non-zero padding bits ("QR==" decodes like "QQ=="), so two
    # different headers could stand for one body value; only the canonical text is accepted.
    if base64.b64encode(data).decode("ascii") != payload:
        raise SentinelError("invalid-base64", "payload is not canonical Base64")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SentinelError("invalid-utf8", f"payload is not UTF-8 ({exc.reason})") from exc


def is_sentinel(raw: str) -> bool:
    """Whether a (whitespace-stripped) header value matches the sentinel pattern."""
    minimum = len(SENTINEL_PREFIX) + len(SENTINEL_SUFFIX)
    # The length check keeps "=?base64?=" from sharing its "?" between both markers.
    return len(raw) >= minimum and raw.startswith(SENTINEL_PREFIX) and raw.endswith(
        SENTINEL_SUFFIX
    )


def decode_header_value(raw: str) -> str:
    """Return the value a mirrored header stands for, or raise :class:`SentinelError`.

    Spaces and tabs around the field value are not part of it (RFC 9110 5.5). A value that
    starts with the lowercase ``=?base64?`` and ends with ``?=`` must hold canonical standard
    Base64 with padding (``invalid-base64``) of UTF-8 bytes (``invalid-utf8``). Any other
    value is a literal and must be printable ASCII (``raw-unsafe``). The empty value,
    ``=?base64?...`` without the suffix and uppercase ``=?BASE64?...?=`` decode to themselves.
    """
    raw = raw.strip(" \t")
    if is_sentinel(raw):
        return _decode_payload(raw[len(SENTINEL_PREFIX) : -len(SENTINEL_SUFFIX)])
    defect = _raw_defect(raw)
    if defect is not None:
        raise SentinelError("raw-unsafe", defect)
    return raw
