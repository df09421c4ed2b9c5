"""The text pass sees every character of a quoted value, whatever its escapes: a secret
after a raw newline, a control character or any JSON escape inside the string is redacted
with the rest of the string (the JSON is invalid, so the parse does not see it)."""

from __future__ import annotations

import pytest

from mcp_tap.core.redaction import Redactor

SECRET = "Zq9secretValue42"
# Every escape JSON allows, then raw control characters JSON does not.
PREFIXES = ['\\"', "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t", "\\u00e9",
            "\\ud83d\\ude00", "\\u2028", "\n", "\r\n", "\t", "\x00", "\x1f", "\u2028",
            '\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\n']


@pytest.mark.parametrize("prefix", PREFIXES, ids=repr)
@pytest.mark.parametrize("depth", [0, 3, 300])
def test_secret_after_any_escape_is_redacted(prefix: str, depth: int) -> None:
    """``{"password": "<prefix><secret>"}`` nested ``depth`` deep: the secret is gone."""
    inner = f'{{"password": "{prefix}{SECRET}", "n": 1}}'
    text = '{"a":[' * depth + inner + "]}" * depth
    out = Redactor().redact_text(text)
    assert SECRET not in out
    assert '"n": 1' in out or '"n":1' in out  # the pass stopped at the string's end


def test_unterminated_string_runs_to_the_end() -> None:
    """A string never closed (a cut body) hides everything after its key's quote."""
    out = Redactor().redact_text('{"params":{"token": "ab\\\n' + SECRET)
    assert SECRET not in out


def test_header_lines_keep_their_line_ends() -> None:
    """An unquoted value still ends at its line: the next line survives."""
    assert Redactor().redact_text("token: abc\nnext: 1") == "token: [REDACTED]\nnext: 1"
