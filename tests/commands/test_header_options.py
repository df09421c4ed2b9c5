"""The headers an operator adds to probe and replay requests: parsed strictly, never doubled."""

from __future__ import annotations

import argparse

import pytest

from mcp_tap.cli import main
from mcp_tap.errors import InputError
from mcp_tap.header_options import (
    add_header_options,
    header_from_env,
    headers_from_args,
    parse_header,
)


class TestParseHeader:
    """parse_header: 'NAME: VALUE' for --header."""

    def test_valid_header(self) -> None:
        """A well-formed header is split and trimmed."""
        assert parse_header("Authorization:  Bearer x ") == ("Authorization", "Bearer x")

    @pytest.mark.parametrize("text", ["no-colon", ": x"])
    def test_missing_name_is_input_error(self, text: str) -> None:
        """A header without a colon or without a name says what was expected."""
        with pytest.raises(InputError, match="expected 'NAME: VALUE'"):
            parse_header(text)

    def test_bad_name_is_input_error(self) -> None:
        """A name that is not an HTTP token is refused."""
        with pytest.raises(InputError, match=r"^--header bad name: not a valid header name$"):
            parse_header("bad name: x")

    @pytest.mark.parametrize("value", ["a\r\nX-B: b", "a\nb", "a\x00b"])
    def test_line_break_or_nul_is_input_error(self, value: str) -> None:
        """A value that could smuggle a second header is refused."""
        with pytest.raises(InputError, match="must not contain CR, LF or NUL"):
            parse_header(f"X-A: {value}")

    @pytest.mark.parametrize("name", ["Mcp-Method", "mcp-protocol-version", "Accept",
                                      "Mcp-Param-Region", "Mcp-Session-Id", "Mcp-Name",
                                      "Content-Type", "Host"])
    def test_header_the_command_sets_is_input_error(self, name: str) -> None:
        """Routing, session and framing headers are the command's own: a copy would be judged."""
        with pytest.raises(InputError, match=f"^--header {name}: this header is set by the "):
            parse_header(f"{name}: x")


class TestHeaderFromEnv:
    """header_from_env: NAME=ENVVAR for --header-env."""

    def test_reads_the_variable(self) -> None:
        """The value comes from the environment, trimmed."""
        assert header_from_env("Authorization=TOK", {"TOK": " Bearer t "}) == (
            "Authorization", "Bearer t")

    def test_unset_variable_is_input_error(self) -> None:
        """A variable that is not set is named in the error (its value never is)."""
        with pytest.raises(InputError, match=r"^--header-env Authorization: environment "
                                             r"variable TOK is not set$"):
            header_from_env("Authorization=TOK", {})

    @pytest.mark.parametrize("spec", ["Authorization", "=TOK", "Authorization="])
    def test_malformed_spec_is_input_error(self, spec: str) -> None:
        """A spec without NAME, '=' or ENVVAR says what was expected."""
        with pytest.raises(InputError, match="expected NAME=ENVVAR"):
            header_from_env(spec, {"TOK": "x"})

    def test_variable_value_is_checked_like_a_flag(self) -> None:
        """A variable holding a line break is refused as --header would be."""
        with pytest.raises(InputError, match="must not contain CR, LF or NUL"):
            header_from_env("X-A=TOK", {"TOK": "a\nX-B: b"})


class TestHeadersFromArgs:
    """headers_from_args: both options, in the order given."""

    def test_flags_then_environment(self) -> None:
        """--header pairs come first, then --header-env pairs."""
        parser = argparse.ArgumentParser()
        add_header_options(parser, "request")
        args = parser.parse_args(["--header-env", "Authorization=TOK", "--header", "X-A: 1",
                                  "--header", "X-B: 2"])
        assert headers_from_args(args, {"TOK": "Bearer t"}) == [
            ("X-A", "1"), ("X-B", "2"), ("Authorization", "Bearer t")]


class TestCommands:
    """probe and replay refuse a bad header before sending anything."""

    @pytest.mark.parametrize("command", [
        ["probe", "--target", "http://127.0.0.1:9/mcp"],
        ["replay", "nowhere", "--target", "http://127.0.0.1:9/mcp"],
    ])
    @pytest.mark.parametrize(("option", "message"), [
        (["--header", "Mcp-Method: tools/list"],
         "mcp-tap: error: --header Mcp-Method: this header is set by the command itself\n"),
        (["--header-env", "Authorization=MCP_TAP_TEST_UNSET"],
         "mcp-tap: error: --header-env Authorization: environment variable MCP_TAP_TEST_UNSET "
         "is not set\n"),
    ])
    def test_bad_header_exits_2_with_one_line(
            self, command: list[str], option: list[str], message: str,
            capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
        """Exit 2 and one line naming the header, for both commands."""
        monkeypatch.delenv("MCP_TAP_TEST_UNSET", raising=False)
        assert main([*command, *option]) == 2
        out, err = capsys.readouterr()
        assert (out, err) == ("", message)
