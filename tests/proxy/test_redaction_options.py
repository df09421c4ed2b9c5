"""Tests for the proxy's [redaction] options: patterns, allowed names, the digest key."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_tap.core.hashing import DigestKey
from mcp_tap.errors import InputError
from mcp_tap.proxy.options import TapOptions, load_options


def _load(tmp_path: Path, toml: str, env: dict[str, str] | None = None) -> TapOptions:
    config = tmp_path / "tap.toml"
    config.write_text(toml)
    return load_options(str(config), env=env or {}, listen="127.0.0.1:0", upstream="http://h")


class TestRedactionOptions:
    """[redaction]: operator patterns and allowlist reach the policy; typos are errors."""

    def test_patterns_and_allowed_names(self, tmp_path: Path) -> None:
        """extra_keys and allow_keys become the policy's patterns and allowed names."""
        opts = _load(tmp_path, '[redaction]\nextra_keys = ["tenant"]\nallow_keys = ["author"]\n')
        assert opts.redaction.extra_keys == {"tenant"}
        assert opts.redaction.allow_keys == {"author"}
        assert opts.digest_key is None  # each bundle draws its own

    def test_unknown_option_is_an_error(self, tmp_path: Path) -> None:
        """A misspelt option is named, not ignored."""
        with pytest.raises(InputError, match=r"unknown key redaction\.extra_key in \[redaction\]"):
            _load(tmp_path, '[redaction]\nextra_key = ["x"]\n')

    def test_unknown_environment_variable_is_an_error(self, tmp_path: Path) -> None:
        """MCP_TAP_REDACTION_ with no such option is a typo."""
        with pytest.raises(InputError, match="MCP_TAP_REDACTION_DIGESTKEY names no"):
            _load(tmp_path, "", {"MCP_TAP_REDACTION_DIGESTKEY": "x"})


class TestDigestKeyOption:
    """The operator's digest key: from a file or a named environment variable."""

    def test_key_file_less_one_newline(self, tmp_path: Path) -> None:
        """A key file's bytes are the key, less one trailing newline."""
        (tmp_path / "digest.key").write_bytes(b"0123456789abcdef-key\n")
        opts = _load(tmp_path, f'[redaction]\ndigest_key_file = "{tmp_path / "digest.key"}"\n')
        assert opts.digest_key == DigestKey(b"0123456789abcdef-key", "operator")

    def test_key_from_named_environment_variable(self, tmp_path: Path) -> None:
        """digest_key_env names the variable; the env override names it too."""
        env = {"MCP_TAP_REDACTION_DIGEST_KEY_ENV": "MY_KEY", "MY_KEY": "k" * 20}
        assert _load(tmp_path, "", env).digest_key == DigestKey(b"k" * 20, "operator")

    def test_missing_variable_is_one_line(self, tmp_path: Path) -> None:
        """A named variable that is not set is bad input, not an unkeyed bundle."""
        with pytest.raises(InputError, match="environment variable NOPE is not set"):
            _load(tmp_path, '[redaction]\ndigest_key_env = "NOPE"\n')

    def test_short_key_is_refused_without_showing_it(self, tmp_path: Path) -> None:
        """A key under 16 bytes is refused, and the message does not quote it."""
        with pytest.raises(InputError) as info:
            _load(tmp_path, "", {"MCP_TAP_REDACTION_DIGEST_KEY_ENV": "K", "K": "tiny-key"})
        assert "at least 16 bytes" in str(info.value) and "tiny-key" not in str(info.value)

    def test_file_and_variable_exclude_each_other(self, tmp_path: Path) -> None:
        """Two key sources are ambiguous."""
        with pytest.raises(InputError, match="exclude each other"):
            _load(tmp_path, '[redaction]\ndigest_key_file = "f"\ndigest_key_env = "V"\n')

    def test_missing_key_file_is_one_line(self, tmp_path: Path) -> None:
        """An unreadable key file is the usual one-line file error."""
        with pytest.raises(InputError, match="digest key file"):
            _load(tmp_path, f'[redaction]\ndigest_key_file = "{tmp_path / "nope"}"\n')
