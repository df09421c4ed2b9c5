"""Logs: every line JSON, tracebacks rendered by structlog, standard-library loggers too."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import structlog

from mcp_tap import logs
from mcp_tap.logs import (
    LineBatch,
    configure_logging,
    processors,
    redact_event,
    render_tracebacks,
)


@pytest.fixture
def lines(capsys: pytest.CaptureFixture[str]) -> Iterator[Any]:
    """Configure logging, yield a reader of the JSON lines on stderr, then reset logging."""
    configure_logging("info")

    def read() -> list[dict[str, Any]]:
        err = capsys.readouterr().err
        return [json.loads(line) for line in err.splitlines()]

    yield read
    root = logging.getLogger()
    for handler in [h for h in root.handlers if h.get_name() == "mcp-tap-json"]:
        root.removeHandler(handler)
    root.setLevel(logging.WARNING)
    structlog.reset_defaults()


class TestChain:
    """The processor chain is a plain list."""

    def test_the_chain_is_a_list_with_tracebacks_before_redaction(self) -> None:
        """Tracebacks are rendered before the redactor sees the event."""
        chain = processors()
        assert isinstance(chain, list)
        assert chain.index(render_tracebacks) < chain.index(redact_event)


class TestLines:
    """What reaches stderr."""

    def test_an_exception_is_rendered_not_exc_info_true(self, lines: Any) -> None:
        """log.exception gives the traceback as structured frames, without locals."""
        log = structlog.get_logger("mcp_tap.test")
        secret_local = "s3cr3t-value"  # a local that must never reach the log
        try:
            raise ValueError(f"bad {len(secret_local)}")
        except ValueError:
            log.exception("evidence.internal_error", authorization="Bearer abc")
        (line,) = lines()
        assert "exc_info" not in line
        (exc,) = line["exception"]
        assert (exc["exc_type"], exc["exc_value"]) == ("ValueError", "bad 12")
        assert exc["frames"][-1]["name"] == ("test_an_exception_is_rendered_not_exc_info_true")
        assert "s3cr3t-value" not in json.dumps(line)
        assert line["authorization"] == "[REDACTED]"
        assert (line["level"], line["event"]) == ("error", "evidence.internal_error")

    def test_stdlib_records_are_json_with_their_logger(self, lines: Any) -> None:
        """An aiohttp error with a traceback is one JSON line naming its logger, its message
        template and the exception's type, never the traceback (it may quote request bytes)."""
        try:
            raise KeyError("k")
        except KeyError:
            logging.getLogger("aiohttp.server").exception("Error handling request")
        logging.getLogger("aiohttp.access").info("per-request chatter stays out")
        (line,) = lines()
        assert line["logger"] == "aiohttp.server"
        assert (line["event"], line["message"]) == ("library.log", "Error handling request")
        assert line["error"] == "KeyError" and "exception" not in line
        assert line["timestamp"].endswith("Z")

    def test_context_variables_reach_the_line(self, lines: Any) -> None:
        """Bound ids (exchange_id, trace_id) are merged into every line."""
        with structlog.contextvars.bound_contextvars(exchange_id="e1", trace_id="t1"):
            structlog.get_logger("mcp_tap.test").warning("evidence.lost", lost=1)
        (line,) = lines()
        assert (line["exchange_id"], line["trace_id"], line["lost"]) == ("e1", "t1", 1)

    def test_library_chatter_stays_out_even_at_debug(self, lines: Any) -> None:
        """A client library's INFO line (URLs with queries) is not written at debug level."""
        configure_logging("debug")
        logging.getLogger("httpx").info("HTTP Request: POST http://h/mcp?api_key=s3cr3t")
        structlog.get_logger("mcp_tap.test").debug("proxy.debug_line")
        assert [line["event"] for line in lines()] == ["proxy.debug_line"]


def _exchange_fields(method: str = "tools/list") -> dict[str, Any]:
    return {"hop": "tap", "era": "modern", "method": method, "http_method": "POST",
            "status": 200, "ms": 1.25, "findings": ["a.b"], "hop_findings": [],
            "tap_error": None}


class TestLineBatch:
    """The recorder's exchange lines: the chain's lines without the chain's cost."""

    def test_a_line_is_the_line_structlog_writes(self, lines: Any) -> None:
        """Same fields and values as the structlog chain (timestamp aside), the event's own
        fields first in the same order (context variables come in the context's order)."""
        ids = {"exchange_id": "e1", "trace_id": "t1"}
        LineBatch("mcp_tap.proxy").info("exchange", _exchange_fields(), ids)
        with structlog.contextvars.bound_contextvars(**ids):
            structlog.get_logger("mcp_tap.proxy").info("exchange", **_exchange_fields())
        fast, slow = lines()
        assert list(fast)[:10] == list(slow)[:10]
        assert fast.pop("timestamp").endswith("Z") and slow.pop("timestamp").endswith("Z")
        assert fast == slow

    def test_a_value_with_a_secret_is_redacted(self, lines: Any) -> None:
        """A wire-chosen method holding key-value text goes through the redaction."""
        LineBatch("mcp_tap.proxy").info("exchange", _exchange_fields("x?token=s3cr3t"), {})
        (line,) = lines()
        assert "s3cr3t" not in json.dumps(line)
        assert line["method"] == "x?token=[REDACTED]"

    def test_vouched_fields_skip_the_value_check_and_no_other(self, lines: Any) -> None:
        """A field the caller vouches for is written as given; a wire field next to it
        still goes through the redaction, and so do the vouched ones then."""
        batch = LineBatch("mcp_tap.proxy")
        batch.info("exchange", {**_exchange_fields(), "hop": "a:b"}, {}, frozenset({"hop"}))
        batch.info("exchange", {**_exchange_fields("x?token=s3cr3t"), "hop": "h?token=t0k3n"},
                   {}, frozenset({"hop"}))
        vouched, wire = lines()
        assert vouched["hop"] == "a:b" and vouched["method"] == "tools/list"
        assert "s3cr3t" not in json.dumps(wire) and "t0k3n" not in json.dumps(wire)

    def test_the_stamp_is_datetimes_isoformat(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The line's timestamp is what TimeStamper(fmt="iso", utc=True) writes for the same
        clock reading: microseconds rounded down, none written on a whole second."""
        for ns in (1_796_386_675_737_226_999, 1_796_386_676_000_000_000, 1_796_386_676_000_000_999,
                   1_796_386_676_000_001_000, 946_684_799_999_999_999):
            monkeypatch.setattr(logs.time, "time_ns", lambda ns=ns: ns)
            expected = datetime.fromtimestamp(ns // 10**9, tz=UTC).replace(
                microsecond=ns // 1000 % 10**6)
            assert logs._utc_stamp() == expected.isoformat().replace("+00:00", "Z")

    def test_held_lines_are_written_on_release(self, lines: Any) -> None:
        """Nothing reaches stderr between hold and release; then every line, in order."""
        batch = LineBatch("mcp_tap.proxy")
        batch.hold()
        for n in range(3):
            batch.info("exchange", {**_exchange_fields(), "status": n}, {})
        assert lines() == []
        batch.release()
        assert [line["status"] for line in lines()] == [0, 1, 2]

    def test_another_configuration_gets_the_line_through_structlog(self) -> None:
        """Under capture_logs (a reconfigured structlog) the line goes through structlog."""
        configure_logging("info")
        try:
            with structlog.testing.capture_logs() as captured:
                LineBatch("mcp_tap.proxy").info("exchange", _exchange_fields(), {"trace_id": "t"})
        finally:
            structlog.reset_defaults()
        assert [(c["event"], c["method"], c["log_level"]) for c in captured] == [
            ("exchange", "tools/list", "info")]

    def test_a_level_above_info_writes_nothing(self, capsys: pytest.CaptureFixture[str]) -> None:
        """--log-level warning drops the exchange line, as the filtering logger does."""
        configure_logging("warning")
        try:
            LineBatch("mcp_tap.proxy").info("exchange", _exchange_fields(), {})
        finally:
            structlog.reset_defaults()
        assert capsys.readouterr().err == ""
