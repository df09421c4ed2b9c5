"""Tests for the Mcp-Name / Mcp-Param-* header value codec (mcp_tap.core.sentinel)."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_tap.core.sentinel import (
    SENTINEL_REASONS,
    SentinelError,
    decode_header_value,
    encode_header_value,
    is_safe_plain,
)


def _sentinel(payload: str) -> str:
    """Wrap an already-Base64 ``payload`` in the sentinel markers."""
    return f"=?base64?{payload}?="


def _b64(text: str) -> str:
    """Return the canonical standard Base64 of the UTF-8 of ``text``."""
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


# Any Unicode string UTF-8 can carry, biased towards the characters the codec cares about.
_ANY_TEXT = st.one_of(
    st.text(alphabet=st.characters(codec="utf-8")),
    st.text(alphabet=" \t=?base64BASE64?=abc\x7f\x00\u00e9"),
    st.sampled_from(["", " ", "=?base64?", "=?base64??=", "=?BASE64?QQ==?=", "=?Base64?x?="]),
)


class TestIsSafePlain:
    """is_safe_plain: the encoder's conservative test for sending a value unencoded."""

    @pytest.mark.parametrize("value", ["us-west1", "tools/call", "us west 1", "a?=", "x=?base64?"])
    def test_printable_ascii_is_safe(self, value: str) -> None:
        """Printable ASCII with no edge spaces and no marker prefix may travel raw."""
        assert is_safe_plain(value)

    @pytest.mark.parametrize(
        "value",
        ["", " x", "x ", "a\tb", "line1\nline2", "caf\u00e9", "\x7f", "=?base64?QQ==?=",
         "=?BASE64?QQ==?=", "=?Base64?x", "=?base64"],
    )
    def test_unsafe_values_are_not_safe(self, value: str) -> None:
        """Empty, edge whitespace, controls, non-ASCII and any-case marker prefixes are unsafe."""
        assert not is_safe_plain(value)


class TestEncodeHeaderValue:
    """encode_header_value: plain when safe, the lowercase Base64 sentinel otherwise."""

    def test_safe_value_is_unchanged(self) -> None:
        """A safe value is returned as it is."""
        assert encode_header_value("execute_sql") == "execute_sql"

    @pytest.mark.parametrize(
        ("value", "expected"),
        [
            (" us-west1 ", "=?base64?IHVzLXdlc3QxIA==?="),
            ("Hello, \u4e16\u754c", "=?base64?SGVsbG8sIOS4lueVjA==?="),
            ("line1\r\nline2", "=?base64?bGluZTENCmxpbmUy?="),
            ("\tindented", "=?base64?CWluZGVudGVk?="),
        ],
    )
    def test_unsafe_value_matches_specification_examples(self, value: str, expected: str) -> None:
        """Unsafe values encode exactly as the specification's examples show."""
        assert encode_header_value(value) == expected

    def test_empty_value_is_wrapped(self) -> None:
        """The empty string is sent as an empty sentinel, never as an empty field."""
        assert encode_header_value("") == "=?base64??="

    @pytest.mark.parametrize("value", ["=?base64?QQ==?=", "=?BASE64?QQ==?="])
    def test_sentinel_lookalike_is_wrapped_again(self, value: str) -> None:
        """A value that looks like the sentinel in any case is itself wrapped."""
        assert encode_header_value(value) == _sentinel(_b64(value))

    def test_lone_surrogate_is_refused(self) -> None:
        """A lone surrogate has no UTF-8 form and is refused as invalid-utf8."""
        with pytest.raises(SentinelError) as info:
            encode_header_value("\ud800")
        assert info.value.reason == "invalid-utf8"


class TestDecodeHeaderValue:
    """decode_header_value: exact decoding and the four rejection reasons."""

    def test_plain_value_decodes_to_itself(self) -> None:
        """A safe plain value is its own decoding."""
        assert decode_header_value("us west 1") == "us west 1"

    def test_sentinel_decodes_utf8(self) -> None:
        """A sentinel decodes to the exact UTF-8 text it carries."""
        assert decode_header_value("=?base64?5pel5pys6Kqe?=") == "\u65e5\u672c\u8a9e"

    def test_surrounding_whitespace_is_kept_through_sentinel(self) -> None:
        """The sentinel of '  x' decodes to '  x', whitespace included."""
        assert decode_header_value(_sentinel(_b64("  x"))) == "  x"

    def test_empty_sentinel_and_empty_plain_decode_to_empty(self) -> None:
        """Both the empty sentinel and a raw empty value stand for the empty string."""
        assert (decode_header_value("=?base64??="), decode_header_value("")) == ("", "")

    def test_uppercase_marker_is_a_literal(self) -> None:
        """An uppercase =?BASE64?...?= is not the sentinel and decodes to itself."""
        assert decode_header_value("=?BASE64?SGVsbG8=?=") == "=?BASE64?SGVsbG8=?="

    @pytest.mark.parametrize(
        "raw", ["=?base64?SGVsbG8=", "=?base64?", "=?base64?=", "=?base64??", "=?base64",
                "=?base64x?="]
    )
    def test_without_the_suffix_is_a_literal(self, raw: str) -> None:
        """A value not both starting with '=?base64?' and ending with its own '?=' is literal."""
        assert decode_header_value(raw) == raw

    @pytest.mark.parametrize(("raw", "value"), [("  foo ", "foo"), ("\tfoo\t", "foo"),
                                                (" =?base64?SGVsbG8=?= ", "Hello")])
    def test_optional_whitespace_is_not_part_of_the_value(self, raw: str, value: str) -> None:
        """Spaces and tabs around a field value are stripped first (RFC 9110 5.5)."""
        assert decode_header_value(raw) == value

    @pytest.mark.parametrize(
        "payload",
        [
            "SGVsbG8",  # missing padding
            "SGVs!!!bG8=",  # bad alphabet
            "SGVsbG8=A",  # data after padding
            "SGVs bG8=",  # whitespace inside
            "SGVsbG8-",  # URL-safe alphabet
            "\u00e9\u00e9\u00e9\u00e9",  # non-ASCII payload
            "QQ==?=",  # a second closing marker inside
        ],
    )
    def test_invalid_base64(self, payload: str) -> None:
        """Padding, alphabet and trailing-data defects are invalid Base64."""
        with pytest.raises(SentinelError) as info:
            decode_header_value(_sentinel(payload))
        assert info.value.reason == "invalid-base64"

    @pytest.mark.parametrize("payload", ["QR==", "QUJ="])
    def test_non_canonical_padding_bits_are_invalid(self, payload: str) -> None:
        """Base64 with non-zero padding bits decodes leniently elsewhere but is refused here."""
        assert base64.b64decode(payload, validate=True)  # the stdlib alone would accept it
        with pytest.raises(SentinelError) as info:
            decode_header_value(_sentinel(payload))
        assert info.value.reason == "invalid-base64"

    @pytest.mark.parametrize("raw_bytes", [b"\xff\xfe", b"\xc3", b"\xed\xa0\x80"])
    def test_invalid_utf8(self, raw_bytes: bytes) -> None:
        """Canonical Base64 of bytes that are not UTF-8 (surrogate encodings included) fails."""
        payload = base64.b64encode(raw_bytes).decode("ascii")
        with pytest.raises(SentinelError) as info:
            decode_header_value(_sentinel(payload))
        assert info.value.reason == "invalid-utf8"

    @pytest.mark.parametrize(
        "raw",
        ["a\tb", "line1\nline2", "caf\u00e9", "\x00"],
    )
    def test_raw_unsafe(self, raw: str) -> None:
        """Plain values with controls or non-ASCII inside fail."""
        with pytest.raises(SentinelError) as info:
            decode_header_value(raw)
        assert info.value.reason == "raw-unsafe"

    def test_error_is_a_value_error_with_known_reason(self) -> None:
        """SentinelError is a ValueError whose reason is one of the documented four."""
        with pytest.raises(ValueError, match="invalid-base64") as info:
            decode_header_value("=?base64?QR==?=")
        assert isinstance(info.value, SentinelError)
        assert info.value.reason in SENTINEL_REASONS


class TestRoundTrip:
    """encode_header_value and decode_header_value together, for any string."""

    @settings(deadline=None)
    @given(_ANY_TEXT)
    def test_decode_inverts_encode(self, value: str) -> None:
        """Decoding the encoding of any UTF-8-encodable string gives the string back."""
        assert decode_header_value(encode_header_value(value)) == value

    @settings(deadline=None)
    @given(_ANY_TEXT)
    def test_encoding_is_a_safe_header_value(self, value: str) -> None:
        """Every encoding is non-empty printable ASCII without surrounding whitespace."""
        encoded = encode_header_value(value)
        assert encoded
        assert all(" " <= ch <= "~" for ch in encoded)
        assert encoded == encoded.strip()
