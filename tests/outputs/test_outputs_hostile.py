"""Hostile names and messages reach no output raw.

A server's tool names and error messages carry ESC sequences (OSC 8, clear screen), a C1
CSI, CR/LF with a forged line, a bidi override, HTML and Markdown. ``probe`` against the
real hostile server (tests/support/hostile_server.py) and ``diff`` of bundles holding its
tool list are run in every format: text shows every control character escaped and the
forged line never starts a line; JUnit validates against the XSD (it was malformed XML);
the Markdown rendered by a CommonMark renderer (HTML allowed, as GitHub's step summary
allows it) holds no element the server wrote; JSON holds no raw C1 or bidi character.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from ci_outputs import junit, sarif
from cli_runs import cli
from gate_bundles import exchange, write_bundle, write_policy
from hostile_server import FORGED, HOSTILE, run_hostile
from markdown_it import MarkdownIt

from mcp_tap.outputs.printable import printable, printable_text

FORMATS = ["text", "json", "junit", "sarif", "markdown"]


def assert_safe(out: str, fmt: str) -> None:
    """No raw control character; the forged line never a line; each format well-formed."""
    assert all(ch == "\n" or ch.isprintable() for ch in out), repr(
        [ch for ch in out if ch != "\n" and not ch.isprintable()][:5])
    assert not any(line.lstrip().startswith(FORGED) for line in out.split("\n"))
    if fmt == "text":
        assert "\\x1b]8;;" in out and "\\r\\nFAKE LINE" in out  # shown, not obeyed
    elif fmt == "junit":
        junit(out)  # parses and validates: control characters made it malformed
    elif fmt == "sarif":
        sarif(out)
    elif fmt == "markdown":
        html = MarkdownIt("commonmark", {"html": True}).enable("table").render(out)
        assert "<img" not in html and "<a " not in html and "<code>tick</code>" not in html


@pytest.fixture(scope="module")
def hostile() -> str:
    """The hostile server's URL, one per module."""
    with run_hostile() as url:
        yield url  # type: ignore[misc]  # a generator fixture


@pytest.mark.parametrize("fmt", FORMATS)
def test_probe(hostile: str, fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    """probe's report of the hostile server, in each format, and its stderr line."""
    code, out, err = cli(["probe", "--target", hostile, "--era", "modern", "--format", fmt],
                         capsys)
    assert code == 1, err
    if fmt in ("text", "json", "junit"):  # the answer's body is shown: the hostile message
        assert "FAKE LINE" in out
    assert_safe(out, fmt)
    assert_safe(err, "stderr")


def _tools_list(n: int, name: str) -> dict[str, object]:
    return exchange(n, tool={"name": name, "description": name,
                             "inputSchema": {"type": "object"}})


@pytest.mark.parametrize("fmt", FORMATS)
def test_diff(tmp_path: Path, fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    """diff of a baseline listing the hostile tool and a candidate without it (breaking)."""
    baseline = write_bundle(tmp_path / "baseline", [_tools_list(n, HOSTILE) for n in range(3)])
    candidate = write_bundle(tmp_path / "candidate", [_tools_list(n, "echo") for n in range(3)])
    code, out, err = cli(["diff", str(baseline), str(candidate), "--format", fmt], capsys)
    assert code == 1, err
    assert "FAKE LINE" in out  # the removed tool is named, escaped
    assert_safe(out, fmt)
    if fmt == "markdown":
        html = MarkdownIt("commonmark", {"html": True}).enable("table").render(out)
        assert "&lt;img src=x onerror=alert(1)&gt;" in html  # shown as text


def test_printable() -> None:
    """The one escaping function: each class of character, and clean text unchanged."""
    assert printable("plain tool_name-1.2 é ✓") == "plain tool_name-1.2 é ✓"
    assert printable("a\x1b[2Jb\r\nc\td\x7fe\x9bf") == "a\\x1b[2Jb\\r\\nc\\td\\x7fe\\x9bf"
    assert printable("x\u202ey\u2028z\ud800") == "x\\u202ey\\u2028z\\ud800"
    assert printable_text("one\x1b\ntwo\n") == "one\\x1b\ntwo\n"


# A raw C0 control (LF aside), DEL, a C1 control in UTF-8, a line/paragraph separator or a
# bidi override, as bytes on the pipe.
RAW_BYTES = re.compile(rb"[\x00-\x09\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\xa8-\xae]")


def test_the_processes_write_no_raw_byte(hostile: str, tmp_path: Path) -> None:
    """``mcp-tap probe`` and ``mcp-tap diff`` as a terminal runs them (their own process,
    their logging included): no ESC, OSC, CR or other raw control byte on stdout or stderr,
    in any format; the hostile text is there, escaped."""
    baseline = write_bundle(tmp_path / "baseline", [_tools_list(n, HOSTILE) for n in range(3)])
    candidate = write_bundle(tmp_path / "candidate", [_tools_list(n, "echo") for n in range(3)])
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    runs = {"probe": ["probe", "--target", hostile], "diff": ["diff", str(baseline),
                                                              str(candidate)]}
    for name, argv in runs.items():
        for fmt in FORMATS:
            done = subprocess.run([sys.executable, "-m", "mcp_tap", *argv, "--format", fmt],
                                  capture_output=True, env=env, timeout=120, check=False)
            assert done.returncode == 1, (name, fmt, done.stderr)
            for stream in (done.stdout, done.stderr):
                assert RAW_BYTES.search(stream) is None, (name, fmt, stream[:400])
            if name == "diff" or fmt in ("text", "json", "junit"):  # where it is quoted
                assert b"FAKE LINE" in done.stdout, (name, fmt)
            if fmt == "text":
                assert b"\\x1b]8;;" in done.stdout and b"\\r\\nFAKE LINE" in done.stdout


@pytest.mark.parametrize("target,field", [("segment-000001.manifest.json", "fileSha256"),
                                          ("bundle.json", "bundleId")])
def test_verify_and_gate_quote_hostile_evidence_escaped(tmp_path: Path, target: str,
                                                        field: str) -> None:
    """A bundle whose manifest or bundle.json holds the hostile text where a digest or an
    id belongs: ``verify`` and ``gate`` (own processes, every format) quote it in their
    problems, escaped, and write no raw control byte."""
    bundle = write_bundle(tmp_path / "evidence" / "b", [_tools_list(n, "echo") for n in range(3)])
    data = orjson.loads((bundle / target).read_bytes())
    data[field] = HOSTILE
    (bundle / target).write_bytes(orjson.dumps(data))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    policy = str(write_policy(tmp_path))
    for argv in (["verify", str(bundle)], ["gate", str(bundle), "--policy", policy]):
        for fmt in FORMATS:
            done = subprocess.run([sys.executable, "-m", "mcp_tap", *argv, "--format", fmt],
                                  capture_output=True, env=env, timeout=120, check=False)
            assert done.returncode in (1, 3), (argv[0], fmt, done.stderr)
            for stream in (done.stdout, done.stderr):
                assert RAW_BYTES.search(stream) is None, (argv[0], fmt, stream[:400])
            if fmt == "text":
                assert b"\\x1b]8;;https://x.invalid/" in done.stdout, (argv[0], done.stdout)
