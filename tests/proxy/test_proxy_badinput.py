"""Bad input to ``mcp-tap proxy`` (and ``demo``): one line on stderr, exit 2, and an exit.

Every case runs the real command as a subprocess. ``subprocess.run``'s timeout is a hang
guard, not a timing assertion: a start-up failure that left the recording process (or a
thread) alive used to print its error and then never exit.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from peers import free_port

from mcp_tap.cli import build_parser
from mcp_tap.proxy.options import load_options

REPO_ROOT = Path(__file__).resolve().parents[2]
_HANG_GUARD_S = 120.0
_URL_RULE = "is not an http:// or https:// URL with a host and a port in 1-65535"
_DEAD_UPSTREAM = "http://127.0.0.1:9"  # never contacted: these runs fail before any request


def _tap(
    args: list[str], cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``mcp-tap ARGS`` with only the given ``MCP_TAP_*`` variables set."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("MCP_TAP_")}
    base.update(PYTHONPATH=str(REPO_ROOT), PYTHONUNBUFFERED="1", **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "mcp_tap", *args],
        cwd=cwd,
        env=base,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=_HANG_GUARD_S,
    )


def _one_error(done: subprocess.CompletedProcess[str]) -> str:
    """Check exit 2, nothing on stdout and exactly one stderr line; return that line."""
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("mcp-tap: error: "), done.stderr
    return done.stderr.removeprefix("mcp-tap: error: ").rstrip("\n")


def _proxy(*extra: str) -> list[str]:
    return ["proxy", "--listen", "127.0.0.1:0", "--upstream", _DEAD_UPSTREAM, "--admin", "",
            "--evidence", "evidence", *extra]


def _config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "tap.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.fixture
def held_port() -> Iterator[int]:
    """A loopback port another socket is listening on for the whole test."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


class TestNumericOptions:
    """Numeric options are checked in one place: zero where it stops recording, absurd
    sizes, NaN and infinity are one-line errors before anything starts."""

    @pytest.mark.parametrize(
        ("text", "env", "expected"),
        [
            (
                "[evidence]\nqueue_size = 0\n",
                {},
                "[evidence] queue_size must be an integer above 0 and at most 10000000, got 0",
            ),
            (
                "[evidence]\nmax_segment_bytes = 0\n",
                {},
                "[evidence] max_segment_bytes must be an integer above 0 and at most "
                "1099511627776, got 0",
            ),
            (
                "[evidence]\nmax_segment_age_s = 0\n",
                {},
                "[evidence] max_segment_age_s must be a number above 0 and at most "
                "1000000000, got 0",
            ),
            (
                "",
                {"MCP_TAP_EVIDENCE_QUEUE_SIZE": "0"},
                "MCP_TAP_EVIDENCE_QUEUE_SIZE: [evidence] queue_size must be an integer above 0 "
                "and at most 10000000, got '0'",
            ),
            (
                "[evidence]\nqueue_size = 99999999999999999999999\n",
                {},
                "[evidence] queue_size must be an integer above 0 and at most 10000000, "
                "got 99999999999999999999999",
            ),
            (
                "[upstream]\nconnect_timeout_s = nan\n",
                {},
                "[upstream] connect_timeout_s must be a number at least 0 and at most "
                "1000000000, got nan",
            ),
            (
                "",
                {"MCP_TAP_UPSTREAM_CONNECT_TIMEOUT_S": "nan"},
                "MCP_TAP_UPSTREAM_CONNECT_TIMEOUT_S: [upstream] connect_timeout_s must be a "
                "number at least 0 and at most 1000000000, got 'nan'",
            ),
            (
                "[upstream]\nidle_timeout_s = inf\n",
                {},
                "[upstream] idle_timeout_s must be a number at least 0 and at most "
                "1000000000, got inf",
            ),
            (
                "[recording]\nqueue_size = 0\n",
                {},
                "[recording] queue_size must be an integer above 0 and at most 10000000, got 0",
            ),
            (
                "[evidence]\nqueue_size = 2.5\n",
                {},
                "[evidence] queue_size must be an integer, got 2.5",
            ),
        ],
        ids=["queue-0", "segment-bytes-0", "segment-age-0", "env-queue-0", "queue-huge",
             "connect-nan", "env-connect-nan", "idle-inf", "recording-queue-0", "queue-float"],
    )
    def test_out_of_range_number_is_one_line(
        self, tmp_path: Path, text: str, env: dict[str, str], expected: str
    ) -> None:
        """The proxy names the option, the allowed range and the value, and exits 2."""
        done = _tap(_proxy("--config", _config(tmp_path, text)), tmp_path, env)
        assert _one_error(done) == expected
        assert not (tmp_path / "evidence").exists()


class TestUpstreamUrls:
    """An upstream URL is checked by the shared URL rule before anything starts."""

    @pytest.mark.parametrize(
        "url", ["http://127.0.0.1:99999", "http://[::1", "http://127.0.0.1:0", "ftp://h"]
    )
    def test_bad_upstream_flag_is_one_line(self, tmp_path: Path, url: str) -> None:
        """A port out of range, a broken IPv6 literal or another scheme is exit 2."""
        args = ["proxy", "--listen", "127.0.0.1:0", "--upstream", url, "--admin", ""]
        assert _one_error(_tap(args, tmp_path)) == f"--upstream: {url!r} {_URL_RULE}"

    def test_bad_hop_upstream_in_config_is_one_line(self, tmp_path: Path) -> None:
        """The same rule applies to a ``[[hop]]`` upstream, named by its hop."""
        config = _config(
            tmp_path,
            '[[hop]]\nname = "edge"\nlisten = "127.0.0.1:0"\nupstream = "http://127.0.0.1:99999"\n',
        )
        done = _tap(["proxy", "--config", config, "--admin", ""], tmp_path)
        assert _one_error(done) == f"[[hop]] edge upstream: 'http://127.0.0.1:99999' {_URL_RULE}"

    def test_trailing_slash_is_still_dropped(self) -> None:
        """A valid upstream keeps losing its trailing slash."""
        opts = load_options(None, env={}, listen="127.0.0.1:0", upstream="http://h:8/base/")
        assert opts.hops[0].upstream == "http://h:8/base"


class TestStartupFailures:
    """A start that fails stops what it started, exits 2 with one line and leaves no bundle."""

    @pytest.mark.parametrize("mode", ["process", "inline"])
    @pytest.mark.parametrize(
        ("text", "env", "expected"),
        [
            (
                '[upstream]\nca_file = "/nonexistent/ca.pem"\n',
                {},
                "upstream ca_file '/nonexistent/ca.pem': [Errno 2] No such file or directory",
            ),
            (
                "",
                {"MCP_TAP_UPSTREAM_CA_FILE": "/nonexistent"},
                "upstream ca_file '/nonexistent': [Errno 2] No such file or directory",
            ),
            (
                '[upstream]\nca_file = "garbage.pem"\n',
                {},
                "upstream ca_file 'garbage.pem': [X509: NO_CERTIFICATE_OR_CRL_FOUND]",
            ),
        ],
        ids=["config", "env", "garbage"],
    )
    def test_bad_ca_file_exits(
        self, tmp_path: Path, mode: str, text: str, env: dict[str, str], expected: str
    ) -> None:
        """An unusable CA file is reported once and the process exits in either mode."""
        (tmp_path / "garbage.pem").write_text("not a certificate\n", encoding="utf-8")
        env = {**env, "MCP_TAP_RECORDING_MODE": mode}
        done = _tap(_proxy("--config", _config(tmp_path, text)), tmp_path, env)
        assert _one_error(done).startswith(expected)
        assert not (tmp_path / "evidence").exists()

    @pytest.mark.parametrize("mode", ["process", "inline"])
    def test_listen_in_use_leaves_no_bundle(
        self, tmp_path: Path, held_port: int, mode: str
    ) -> None:
        """A taken listen port is one error line (no proxy.stopped) and no empty run-* bundle."""
        evidence = tmp_path / "evidence"
        evidence.mkdir()
        args = ["proxy", "--listen", f"127.0.0.1:{held_port}", "--upstream", _DEAD_UPSTREAM,
                "--admin", "", "--evidence", str(evidence)]
        done = _tap(args, tmp_path, {"MCP_TAP_RECORDING_MODE": mode})
        message = _one_error(done)
        assert message.startswith(f"hop tap: cannot listen on 127.0.0.1:{held_port} (")
        assert "address already in use" in message
        assert list(evidence.iterdir()) == []  # the directory was there before: it stays

    def test_unresolvable_listen_host(self, tmp_path: Path) -> None:
        """A listen host that does not resolve is one line and no evidence directory."""
        args = ["proxy", "--listen", "nohost.invalid:0", "--upstream", _DEAD_UPSTREAM,
                "--admin", "", "--evidence", "evidence"]
        message = _one_error(_tap(args, tmp_path))
        assert message.startswith("hop tap: cannot listen on nohost.invalid:0 (")
        assert not (tmp_path / "evidence").exists()

    def test_admin_on_the_listen_address(self, tmp_path: Path) -> None:
        """An admin listener on the hop's own address fails to bind: one line, no bundle."""
        port = free_port()
        args = ["proxy", "--listen", f"127.0.0.1:{port}", "--upstream", _DEAD_UPSTREAM,
                "--admin", f"127.0.0.1:{port}", "--evidence", "evidence"]
        message = _one_error(_tap(args, tmp_path))
        assert message.startswith(f"admin: cannot listen on 127.0.0.1:{port} (")
        assert not (tmp_path / "evidence").exists()

    def test_two_hops_on_one_address(self, tmp_path: Path) -> None:
        """The second of two hops on one address fails to bind: one line, no bundle."""
        port = free_port()
        hop = '[[hop]]\nname = "{}"\nlisten = "127.0.0.1:{}"\nupstream = "http://127.0.0.1:9"\n'
        config = _config(tmp_path, hop.format("a", port) + hop.format("b", port))
        args = ["proxy", "--config", config, "--admin", "", "--evidence", "evidence"]
        message = _one_error(_tap(args, tmp_path))
        assert message.startswith(f"hop b: cannot listen on 127.0.0.1:{port} (")
        assert not (tmp_path / "evidence").exists()


class TestLogLevel:
    """``--log-level`` takes the logging level names, in any case."""

    @pytest.mark.parametrize("command", ["proxy", "demo"])
    def test_unknown_level_is_a_usage_error(self, tmp_path: Path, command: str) -> None:
        """An unknown level is argparse's one-line usage error, exit 2."""
        done = _tap([command, "--log-level", "loud"], tmp_path)
        assert _one_error(done) == (
            "argument --log-level: invalid choice: 'loud' "
            "(choose from 'debug', 'info', 'warning', 'error', 'critical')"
        )

    def test_level_names_ignore_case(self) -> None:
        """``WARNING`` is read as ``warning``."""
        args = build_parser().parse_args(["proxy", "--log-level", "WARNING"])
        assert args.log_level == "warning"


class TestHopNames:
    """A hop name is non-empty and printable without whitespace, from a flag or a file."""

    @pytest.mark.parametrize("name", ["", "a\nb", "a b"])
    def test_bad_hop_flag(self, tmp_path: Path, name: str) -> None:
        """``--hop`` with an empty name or one with whitespace is exit 2."""
        done = _tap(_proxy("--hop", name), tmp_path)
        assert _one_error(done) == (
            f"--hop: {name!r} is not a hop name (non-empty, printable, no whitespace)"
        )

    @pytest.mark.parametrize(("toml_name", "name"), [('""', ""), ('"a\\nb"', "a\nb")])
    def test_bad_hop_name_in_config(self, tmp_path: Path, toml_name: str, name: str) -> None:
        """``[[hop]] name`` follows the same rule."""
        config = _config(
            tmp_path,
            f'[[hop]]\nname = {toml_name}\nlisten = "127.0.0.1:0"\nupstream = "http://h"\n',
        )
        done = _tap(["proxy", "--config", config, "--admin", ""], tmp_path)
        assert _one_error(done) == (
            f"[[hop]] #0 name: {name!r} is not a hop name (non-empty, printable, no whitespace)"
        )

    def test_hop_without_listen_and_upstream(self, tmp_path: Path) -> None:
        """``--hop`` alone would be ignored, so it is an error."""
        config = _config(tmp_path, '[[hop]]\nlisten = "127.0.0.1:0"\nupstream = "http://h"\n')
        done = _tap(["proxy", "--config", config, "--hop", "edge"], tmp_path)
        assert _one_error(done) == (
            "--hop names the hop of --listen and --upstream; give those too"
        )


class TestEmptyListenAndUpstream:
    """An empty ``--listen`` or ``--upstream`` is named as empty."""

    def test_empty_listen(self, tmp_path: Path) -> None:
        """``--listen ''`` says the listen address is empty."""
        done = _tap(["proxy", "--listen", "", "--upstream", _DEAD_UPSTREAM], tmp_path)
        assert _one_error(done) == "--listen is empty: give the HOST:PORT to listen on"

    def test_empty_upstream(self, tmp_path: Path) -> None:
        """``--upstream ''`` says the upstream is empty."""
        done = _tap(["proxy", "--listen", "127.0.0.1:0", "--upstream", ""], tmp_path)
        assert _one_error(done) == "--upstream is empty: give the http(s) URL to forward to"

    def test_non_ascii_port(self, tmp_path: Path) -> None:
        """A port of non-ASCII digits is not HOST:PORT (not a ValueError)."""
        done = _tap(["proxy", "--listen", "127.0.0.1:\u00b2", "--upstream", _DEAD_UPSTREAM],
                    tmp_path)
        assert _one_error(done) == "--listen: '127.0.0.1:\u00b2' is not HOST:PORT"


class TestEnvironmentOverrides:
    """``MCP_TAP_<SECTION>_<OPTION>`` with a known section must name a known option."""

    def test_unknown_option_of_a_known_section(self, tmp_path: Path) -> None:
        """A misspelt option is exit 2, naming the variable and the known ones."""
        done = _tap(_proxy(), tmp_path, {"MCP_TAP_UPSTREAM_VERIFYTLS": "false"})
        assert _one_error(done) == (
            "environment variable MCP_TAP_UPSTREAM_VERIFYTLS names no [upstream] option; "
            "known: MCP_TAP_UPSTREAM_CA_FILE, MCP_TAP_UPSTREAM_CONNECT_TIMEOUT_S, "
            "MCP_TAP_UPSTREAM_HOST, MCP_TAP_UPSTREAM_IDLE_TIMEOUT_S, "
            "MCP_TAP_UPSTREAM_KEEPALIVE_S, MCP_TAP_UPSTREAM_MAX_CONNECTIONS, "
            "MCP_TAP_UPSTREAM_POOL_SIZE, MCP_TAP_UPSTREAM_VERIFY_TLS"
        )

    def test_other_variables_are_left_alone(self) -> None:
        """Variables outside the option sections belong to other tools and are ignored."""
        env = {
            "MCP_TAP_ROLLBACK_KEY": "k",
            "MCP_TAP_SKIP_BROWSER": "1",
            "MCP_TAP_UPDATE_SCREENSHOT": "1",
            "MCP_TAP_RECORDING_MODE": "inline",
            "MCP_TAP_HOP_COMPARISON_WINDOW_S": "5",
        }
        opts = load_options(None, env=env, listen="127.0.0.1:0", upstream="http://h")
        assert opts.recording.mode == "inline"
        assert opts.hop_comparison.window_s == 5.0
