"""Bad input to the offline commands and proxy options: one line, exit 2.

Every case runs the real entry point in-process and checks the exit code, that stderr is
exactly one ``mcp-tap: ...`` line naming the problem, and that no traceback escaped. None
of them needs a server: each is refused before a socket is opened, or against a port
nothing listens on.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from cli_runs import cli, exchange, refused
from peers import free_port
from releases import raw_bundle

from mcp_tap.errors import InputError
from mcp_tap.gate.policy import check_allow_fields
from mcp_tap.probe import MAX_TIMEOUT, check_timeout, run_probe
from mcp_tap.replay import ReplayOptions, replay

REPO_POLICY = Path(__file__).resolve().parents[2] / "config" / "policy.toml"
BAD_URLS = ("http://[::1", "http://127.0.0.1:0/mcp", "http://127.0.0.1:99999/mcp",
            "ftp://127.0.0.1/mcp", "http:///mcp")
BAD_TIMEOUTS = ("inf", "1e300", "nan", "-inf", "0", "-1", str(MAX_TIMEOUT + 1), "soon")


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    """A well-formed bundle of three exchanges recorded at hop ``edge``."""
    return raw_bundle(tmp_path / "ev", [exchange(f"e{i}") for i in range(3)])


class TestTargetUrl:
    """A malformed --target is bad input for probe and replay, never a traceback."""

    @pytest.mark.parametrize("url", BAD_URLS)
    def test_probe_refuses_a_malformed_target(
        self, url: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """probe refuses the URL before any request, naming --target."""
        refused(["probe", "--target", url], capsys, "is not an http:// or https:// URL")

    @pytest.mark.parametrize("url", BAD_URLS)
    def test_replay_refuses_a_malformed_target(
        self, url: str, bundle: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """replay refuses the URL before reading evidence or opening a socket."""
        refused(["replay", str(bundle), "--target", url], capsys,
                "is not an http:// or https:// URL")

    def test_replay_api_refuses_a_malformed_target(self) -> None:
        """The library entry point applies the same check."""
        with pytest.raises(InputError, match="port in 1-65535"):
            replay([exchange("e1")], ReplayOptions(target="http://127.0.0.1:99999/mcp"))


class TestCredentialsInMessages:
    """A user:password@ in the target never reaches stderr or the report."""

    def test_probe_hides_userinfo(self, capsys: pytest.CaptureFixture[str]) -> None:
        """probe's "cannot reach" line shows ***@ instead of the credentials."""
        url = f"http://user:hunter2@127.0.0.1:{free_port()}/mcp"
        err = refused(["probe", "--target", url], capsys, "cannot reach http://***@127.0.0.1:")
        assert "hunter2" not in err

    def test_probe_hides_userinfo_of_a_malformed_target(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Even an unparseable target is shown without its credentials."""
        err = refused(["probe", "--target", "http://user:hunter2@[::1"], capsys, "***@")
        assert "hunter2" not in err

    def test_replay_hides_userinfo(
        self, bundle: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """replay's upstream error shows ***@ instead of the credentials."""
        url = f"http://user:hunter2@127.0.0.1:{free_port()}/mcp"
        err = refused(["replay", str(bundle), "--target", url], capsys,
                      "upstream error: http://***@127.0.0.1:")
        assert "hunter2" not in err

    @pytest.mark.parametrize("fmt", ["text", "json", "junit", "sarif", "markdown"])
    def test_probe_hides_query_values(self, origin_url: str, fmt: str,
                                      capsys: pytest.CaptureFixture[str]) -> None:
        """A token in the target's query (``?token=``) is a credential too: the real SDK
        server is probed with it, and no output format shows it."""
        code, out, err = cli(["probe", "--target", f"{origin_url}?token=q-77aa-secret",
                              "--era", "modern", "--format", fmt], capsys)
        assert code == 0, err
        assert "q-77aa-secret" not in out + err
        if fmt in ("text", "json"):
            assert f"{origin_url}?token=***" in out

    def test_replay_hides_query_values(
        self, bundle: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """replay's upstream error shows the query's values as ***."""
        url = f"http://127.0.0.1:{free_port()}/mcp?api_key=q-77aa-secret"
        err = refused(["replay", str(bundle), "--target", url], capsys, "/mcp?api_key=***")
        assert "q-77aa-secret" not in err

    def test_probe_report_target_hides_userinfo(self) -> None:
        """The report's target field is the printable form of the URL."""
        import httpx

        def handler(request: httpx.Request) -> httpx.Response:
            return httpx.Response(404)

        report = run_probe("http://user:hunter2@probe.invalid/mcp", cases=[],
                           transport=httpx.MockTransport(handler))
        assert report.to_json()["target"] == "http://***@probe.invalid/mcp"


class TestTimeout:
    """--timeout takes finite seconds above 0 and at most 3600, in probe and replay alike."""

    @pytest.mark.parametrize("value", BAD_TIMEOUTS)
    def test_probe_refuses(self, value: str, capsys: pytest.CaptureFixture[str]) -> None:
        """probe refuses the value with argparse's one-line usage error."""
        refused(["probe", "--target", "http://127.0.0.1:9/mcp", f"--timeout={value}"], capsys,
                "argument --timeout: expected a number of seconds")

    @pytest.mark.parametrize("value", BAD_TIMEOUTS)
    def test_replay_refuses(
        self, value: str, bundle: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """replay refuses the value with the same rule and the same line."""
        refused(["replay", str(bundle), "--target", "http://127.0.0.1:9/mcp",
                 f"--timeout={value}"], capsys,
                "argument --timeout: expected a number of seconds")

    @pytest.mark.parametrize("value", [math.inf, 1e300, math.nan, 0.0, -1.0, MAX_TIMEOUT + 1])
    def test_library_rule(self, value: float) -> None:
        """check_timeout, run_probe and replay refuse the value with InputError."""
        with pytest.raises(InputError, match="--timeout must be a number of seconds"):
            check_timeout(value)
        with pytest.raises(InputError, match="--timeout must be a number of seconds"):
            run_probe("http://127.0.0.1:9/mcp", timeout=value, cases=[])
        with pytest.raises(InputError, match="--timeout must be a number of seconds"):
            replay([exchange("e1")], ReplayOptions(target="http://127.0.0.1:9/mcp",
                                                   timeout=value))

    def test_the_maximum_is_accepted(self) -> None:
        """3600 seconds itself is a usable timeout."""
        assert check_timeout(MAX_TIMEOUT) == MAX_TIMEOUT


class TestReplayHop:
    """--hop naming no recorded hop is bad input, not an empty success."""

    def test_unknown_hop(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """The line names the missing hop and the hops that exist."""
        ev = raw_bundle(tmp_path / "ev", [exchange("e1"), exchange("e2", hop="inner")])
        err = refused(["replay", str(ev), "--target", "http://127.0.0.1:9/mcp",
                       "--hop", "nosuchhop"], capsys, "--hop 'nosuchhop'")
        assert "hops in the evidence: edge, inner" in err


class TestReplayCorruptEvidence:
    """replay reads evidence as strictly as sdk-diff: a corrupt record is exit 2."""

    @pytest.mark.parametrize(("damage", "fragment"), [
        ("cut", "line 2: not valid JSON"),
        ("non-utf8", "line 2: not valid JSON"),
        ("truncated", "truncated segment: line 3 ends without a newline"),
    ])
    def test_corrupt_record(self, damage: str, fragment: str, bundle: Path,
                            capsys: pytest.CaptureFixture[str]) -> None:
        """replay and sdk-diff both refuse the bundle with the same line."""
        segment = bundle / "segment-000001.jsonl"
        lines = segment.read_bytes().split(b"\n")
        if damage == "cut":
            lines[1] = lines[1][:40]
        elif damage == "non-utf8":
            lines[1] = lines[1][:20] + b"\xff\xfe" + lines[1][20:]
        else:
            lines = lines[:-1]
            lines[-1] = lines[-1][:-10]
        segment.write_bytes(b"\n".join(lines))
        err = refused(["replay", str(bundle), "--target", f"http://127.0.0.1:{free_port()}/mcp"],
                      capsys, fragment)
        assert err == refused(["sdk-diff", str(bundle)], capsys, fragment)


class TestAttestGenerateKey:
    """--generate-ed25519-key does not combine with the attest arguments it would ignore."""

    @pytest.mark.parametrize("extra", [
        ["PAYLOAD"], ["--signer", "s"], ["--out", "OUT"], ["PAYLOAD", "--signer", "s"],
    ])
    def test_refused_and_no_key_written(self, extra: list[str], tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
        """Exit 2 names the ignored argument and writes neither the key nor the output."""
        payload = tmp_path / "payload.json"
        payload.write_bytes(b"{}")
        key, out = tmp_path / "k.pem", tmp_path / "out.json"
        argv = [str(payload) if a == "PAYLOAD" else str(out) if a == "OUT" else a
                for a in extra]
        shown = next(a for a in extra if a != "s").replace("OUT", "--out")
        err = refused(["attest", *argv, "--generate-ed25519-key", str(key)], capsys,
                      "--generate-ed25519-key only writes a new key")
        assert shown in err
        assert not key.exists() and not out.exists()

    def test_alone_still_works(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Without other attest arguments the key is written and exit is 0."""
        key = tmp_path / "k.pem"
        code, out, err = cli(["attest", "--generate-ed25519-key", str(key)], capsys)
        assert (code, err) == (0, "") and key.exists() and "public key: " in out


class TestSdkDiffAllow:
    """--allow follows the policy's sdk.allow_fields rule, and a path must be well formed."""

    @pytest.mark.parametrize(("value", "fragment"), [
        ("", "--allow must be a list of non-empty strings"),
        ("result..[[]", "sdk-diff: --allow 'result..[[]': not a path"),
        ("result.tools[[]", "sdk-diff: --allow 'result.tools[[]': not a path"),
    ])
    def test_refused(self, value: str, fragment: str, bundle: Path,
                     capsys: pytest.CaptureFixture[str]) -> None:
        """The value is refused with one line before any record is compared."""
        refused(["sdk-diff", str(bundle), f"--allow={value}"], capsys, fragment)

    @pytest.mark.parametrize("value", ["nextCursor", "result.tools[].futureHint",
                                       'result["odd key"][0]', "result", "a.b[c"])
    def test_accepted(self, value: str) -> None:
        """Last keys and well-formed full paths pass the check unchanged."""
        assert check_allow_fields([value], "--allow") == frozenset({value})


class TestTranscriptsEmptyFile:
    """A fixture file with no case is bad input, not "0/0 cases met their expectation"."""

    def test_empty_list(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """The line names the file."""
        fixture = tmp_path / "empty.json"
        fixture.write_bytes(b"[]")
        refused(["transcripts", str(fixture)], capsys, f"{fixture}: holds no case")


class TestEmptyPath:
    """An empty path is refused by name, never read as the current directory."""

    @pytest.mark.parametrize(("argv", "fragment"), [
        (["gate", "EV", "--policy", ""], "argument --policy: an empty path names no file"),
        (["gate", "EV", "--policy", "P", "--rollback", " "],
         "argument --rollback: an empty path names no file"),
        (["report", "EV", "--out", ""], "argument --out: an empty path names no file"),
        (["attest", "", "--hmac-key-env", "K", "--signer", "S"],
         "argument PAYLOAD: an empty path names no file"),
        (["transcripts", ""], "fixture file: an empty path names no file"),
        (["proxy", "--config", ""], "config file: an empty path names no file"),
        (["verify", ""], "an empty path names no evidence"),
        (["sdk-diff", " "], "an empty path names no evidence"),
        (["gate", "", "--policy", "POLICY"], "an empty path names no evidence"),
    ])
    def test_refused(self, argv: list[str], fragment: str, bundle: Path,
                     capsys: pytest.CaptureFixture[str]) -> None:
        """Each command names the empty argument in one line and exits 2."""
        names = {"EV": str(bundle), "POLICY": str(REPO_POLICY)}
        refused([names.get(a, a) for a in argv], capsys, fragment)


class TestUnreadableFiles:
    """A file that cannot be read is named with what it was for."""

    def test_bundle_json_that_is_a_directory(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A bundle whose bundle.json is a directory is named as such, not as 'no bundle.json'."""
        (tmp_path / "b" / "bundle.json").mkdir(parents=True)
        refused(["verify", str(tmp_path / "b")], capsys, f"{tmp_path}/b/bundle.json: not a file")

    @pytest.mark.parametrize(("argv", "fragment"), [
        (["gate", "EV", "--policy", "MISSING"], "cannot read policy MISSING: No such file"),
        (["attest", "MISSING", "--hmac-key-env", "K", "--signer", "S"],
         "cannot read payload MISSING: No such"),
        (["attest", "DIR", "--hmac-key-env", "K", "--signer", "S"],
         "cannot read payload DIR: Is a directory"),
        (["transcripts", "DIR"], "cannot read fixture file DIR: Is a directory"),
        (["proxy", "--config", "MISSING"], "cannot read config file MISSING: No such file"),
    ])
    def test_refused(self, argv: list[str], fragment: str, bundle: Path, tmp_path: Path,
                     capsys: pytest.CaptureFixture[str]) -> None:
        """One line: 'cannot read WHAT PATH: reason', exit 2."""
        names = {"EV": str(bundle), "MISSING": str(tmp_path / "missing"), "DIR": str(tmp_path)}
        argv = [names.get(a, a) for a in argv]
        for placeholder, real in names.items():
            fragment = fragment.replace(f" {placeholder}:", f" {real}:")
        refused(argv, capsys, fragment)
