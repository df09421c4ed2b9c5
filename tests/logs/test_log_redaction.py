"""Tests for secrets in log lines: the structlog processor and the library-log bridge."""

from __future__ import annotations

import io
import json
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from peers import free_port

from mcp_tap.log_redaction import LibraryLogHandler, redact_event, route_library_logs
from mcp_tap.logs import configure_logging

REPO_ROOT = Path(__file__).resolve().parents[2]
SECRET = "s3cr3t-in-a-log-line-5be1"


@pytest.fixture
def json_logs() -> Iterator[io.StringIO]:
    """mcp-tap's logging as the proxy configures it, into a buffer."""
    previous = structlog.get_config()
    configure_logging("debug")
    buffer = io.StringIO()
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=buffer))
    try:
        yield buffer
    finally:
        structlog.configure(**previous)
        for handler in list(logging.getLogger().handlers):
            if isinstance(handler, LibraryLogHandler):
                logging.getLogger().removeHandler(handler)


class TestRedactEvent:
    """redact_event: secret names, key-value text and URLs in any field."""

    def test_secret_fields_and_urls_are_redacted(self) -> None:
        """A secret field, a URL's query and userinfo and a key=value string lose the secret."""
        event = {"event": "x", "apiKey": SECRET, "upstream": f"http://u:{SECRET}@h/p?t={SECRET}",
                 "detail": f"retry with password={SECRET}", "nested": {"auth": {"v": SECRET}}}
        shown = json.dumps(redact_event(None, "info", event))
        assert SECRET not in shown and "http://[REDACTED]@h/p?[REDACTED]" in shown

    def test_clean_event_is_unchanged(self) -> None:
        """An event with nothing secret comes out equal."""
        event = {"event": "exchange", "hop": "tap", "ms": 1.5, "findings": ["a"]}
        assert redact_event(None, "info", dict(event)) == event


class TestLibraryLogs:
    """route_library_logs: a library's log record is one JSON line without its data."""

    def test_exception_log_keeps_template_and_type_only(self, json_logs: io.StringIO) -> None:
        """aiohttp's 'Error handling request' with a traceback quoting bytes: no bytes shown."""
        try:
            raise ValueError(f"Invalid header value char: b'{SECRET}\\x01'")
        except ValueError:
            logging.getLogger("aiohttp.server").exception("Error handling request from %s",
                                                          SECRET)
        (line,) = json_logs.getvalue().splitlines()
        record = json.loads(line)
        assert record["event"] == "library.log" and record["error"] == "ValueError"
        assert record["logger"] == "aiohttp.server" and record["level"] == "error"
        assert record["message"] == "Error handling request from %s"
        assert SECRET not in line and "Traceback" not in line

    def test_installing_twice_leaves_one_handler(self) -> None:
        """Calling route_library_logs again replaces its handler."""
        route_library_logs()
        route_library_logs()
        ours = [h for h in logging.getLogger().handlers if isinstance(h, LibraryLogHandler)]
        assert len(ours) == 1
        logging.getLogger().removeHandler(ours[0])


def test_malformed_requests_put_no_traceback_or_bytes_on_stderr(
    origin_base: str, tmp_path: Path
) -> None:
    """A real proxy fed malformed heads writes only JSON lines, none quoting the bytes; the
    upstream's userinfo is not shown either."""
    port = free_port()
    upstream = origin_base.replace("http://", f"http://tap:{SECRET}@")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_TAP_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcp_tap", "proxy", "--listen", f"127.0.0.1:{port}",
         "--upstream", upstream, "--evidence", str(tmp_path), "--admin", ""],
        cwd=REPO_ROOT, env=dict(env, PYTHONPATH=str(REPO_ROOT)), stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.1)
        bad_heads = [
            f"POST /mcp HTTP/1.1\r\nHost: x\r\nX-Api-Key: {SECRET}\x01\r\n\r\n".encode(),
            f"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: {SECRET}\r\n\r\n".encode(),
            f"G\x00T /{SECRET} HTTP/1.1\r\n\r\n".encode(),
        ]
        for head in bad_heads:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
                conn.sendall(head)
                conn.settimeout(10)
                try:
                    status_line = conn.recv(65536).split(b"\r\n", 1)[0]
                    assert status_line.split(b" ")[1].startswith(b"4"), status_line
                except (ConnectionError, TimeoutError):
                    pass  # a closed connection is an answer too; stderr is what is judged
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=60)
    text = err.decode(errors="replace")
    # Not on a TTY, the proxy prints no human banner: every line is JSON, and neither the
    # upstream's userinfo nor the malformed bytes appear in any of them.
    assert SECRET not in text and "Traceback" not in text
    assert '"event":"proxy.started"' in text
    for line in text.splitlines():
        json.loads(line)
