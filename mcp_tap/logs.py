"""structlog set-up: one JSON object per line on stderr, for the tap's own lines and for every
standard-library logger (aiohttp, asyncio, the OpenTelemetry exporter) alike.

The processor chain is :func:`processors`, a plain list: extend it with one line. Tracebacks
are rendered by structlog (``exception``: a list of ``{exc_type, exc_value, frames}``, frame
locals never included, since they can hold request data). Every field is documented in
``docs/logging.md``; secrets are redacted by :func:`redact_event` before rendering.
"""

from __future__ import annotations

import argparse
import contextvars
import logging
import sys
import time
from datetime import UTC, datetime
from typing import Any

import orjson
import structlog
from structlog.tracebacks import ExceptionDictTransformer
from structlog.typing import Processor

from mcp_tap.errors import InputError
from mcp_tap.log_redaction import redact_event, redaction_is_noop, route_library_logs
from mcp_tap.outputs.printable import json_safe


class _CurrentStderr:
    """Writes to whatever ``sys.stderr`` is at the time (tests and embedders swap it).

    ``print`` writes a line and its newline in two calls, and on an unbuffered stderr
    (``PYTHONUNBUFFERED``, as in the image) each is its own write to a pipe the recording
    process shares: another process's line could land between them. So a line goes out
    whole, in one write.
    """

    def __init__(self) -> None:
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        if self._pending.endswith("\n"):
            line, self._pending = self._pending, ""
            sys.stderr.write(line)
        return len(text)

    def flush(self) -> None:
        if self._pending:
            line, self._pending = self._pending, ""
            sys.stderr.write(line)
        sys.stderr.flush()


def _dumps(obj: Any, **_kw: Any) -> str:
    # JSON escapes C0 controls itself; C1 and the bidi controls it leaves raw would still
    # reach a terminal that shows the log.
    return json_safe(orjson.dumps(obj, default=str).decode())


# ``exc_info`` -> ``exception`` as structured frames; no locals (they can hold secrets).
render_tracebacks = structlog.processors.ExceptionRenderer(
    ExceptionDictTransformer(show_locals=False, use_rich=False)
)


def processors() -> list[Processor]:
    """The processor chain every line runs through before it is rendered as JSON."""
    return [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        render_tracebacks,
        redact_event,
    ]


# The level names the proxy and the demo accept for --log-level (any case).
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


def add_log_level_option(parser: argparse.ArgumentParser, default: str, what: str) -> None:
    """Declare ``--log-level`` on a command's parser (one of :data:`LOG_LEVELS`, any case)."""
    parser.add_argument(
        "--log-level",
        default=default,
        type=str.lower,
        choices=LOG_LEVELS,
        help=f"{what}: {', '.join(LOG_LEVELS)} (default: {default})",
    )


def configure_logging(level: str = "info") -> None:
    """Configure structlog to print one JSON object per line on stderr.

    ``level`` is one of :data:`LOG_LEVELS` (any case); anything else is an
    :class:`~mcp_tap.errors.InputError`.
    """
    if level.lower() not in LOG_LEVELS:
        raise InputError(f"log level {level!r} is not one of {', '.join(LOG_LEVELS)}")
    number = logging.getLevelNamesMapping()[level.upper()]
    chain: list[Processor] = [
        *processors(), structlog.processors.JSONRenderer(serializer=_dumps)
    ]
    factory = structlog.PrintLoggerFactory(file=_CurrentStderr())  # type: ignore[arg-type]
    structlog.configure(
        processors=chain,
        wrapper_class=structlog.make_filtering_bound_logger(number),
        logger_factory=factory,
        cache_logger_on_first_use=False,
    )
    _INSTALLED.update(processors=tuple(chain), logger_factory=factory, level=number)
    # Libraries' own stdlib records (aiohttp, asyncio, the OTLP exporter) become one JSON
    # line each, without their arguments or traceback, which may quote request bytes.
    route_library_logs()


# What configure_logging installed last: a LineBatch renders lines itself only while it is
# still what structlog runs (a test or an embedder that reconfigures structlog gets its own).
_INSTALLED: dict[str, Any] = {}


class LineBatch:
    """Info lines for a hot path: the very lines :func:`configure_logging`'s chain makes.

    The chain's cost per call (a logger bound per call, five processors, the redaction
    walk, a flushed write) is paid in full only when it changes something: a line whose
    fields the redaction would leave alone (see
    :func:`~mcp_tap.log_redaction.redaction_is_noop`) is rendered directly, and while
    :meth:`hold` is on, lines are written together by :meth:`release` (the recording
    process writes the lines of one handed-over batch with one write). Under any other
    structlog configuration the line goes through structlog as usual.
    """

    def __init__(self, name: str) -> None:
        """Lines of the logger named ``name``."""
        self._name = name
        self._held: list[str] | None = None
        self._mode = _VIA_STRUCTLOG  # while held: decided once, at hold()
        # A caller's vouched fields, plus the ones this method itself sets from code.
        self._vouched: dict[frozenset[str], frozenset[str]] = {}

    def info(
        self,
        event: str,
        fields: dict[str, Any],
        bound: dict[str, Any],
        vouched: frozenset[str] = frozenset(),
    ) -> None:
        """Log ``event`` with ``fields`` at info level (``fields`` is taken over).

        ``bound`` is context for this line only, as if bound with
        ``structlog.contextvars.bound_contextvars``. ``vouched`` names fields whose values
        the caller's code made (never wire data): the check for something to redact skips
        their values (see :func:`~mcp_tap.log_redaction.redaction_is_noop`).
        """
        mode = self._mode if self._held is not None else _mode()
        if mode == _VIA_STRUCTLOG:
            with structlog.contextvars.bound_contextvars(**bound):
                structlog.get_logger(self._name).info(event, **fields)
            return
        if mode == _SILENT:
            return
        fields["event"] = event
        if fields.keys().isdisjoint(bound):
            fields.update(bound)  # what setdefault per key does when no key is taken
        else:
            for key, value in bound.items():
                fields.setdefault(key, value)
        if len(_copy_context()):  # an empty context merges nothing (the usual case)
            structlog.contextvars.merge_contextvars(None, "info", fields)
        fields["level"] = "info"
        fields["timestamp"] = _utc_stamp()
        stamped: Any = fields
        # The stamp is ours (digits and separators); every other field decides.
        if vouched:
            mine = self._vouched.get(vouched)
            if mine is None:
                mine = self._vouched[vouched] = frozenset({*vouched, "event", "level"})
            vouched = mine
        if not redaction_is_noop(stamped, "timestamp", vouched):  # (skip, vouched)
            stamped = redact_event(None, "info", stamped)
        line = json_safe(orjson.dumps(stamped, default=str).decode())  # _dumps
        if self._held is not None:
            self._held.append(line)
        else:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()

    def hold(self) -> None:
        """Keep lines until :meth:`release` (one write for many); how lines are made is
        decided here, for all of them (the logging set-up does not change mid-batch)."""
        if self._held is None:
            self._held = []
            self._mode = _mode()

    def release(self) -> None:
        """Write the lines held since :meth:`hold` and stop holding."""
        held, self._held = self._held, None
        if held:
            sys.stderr.write("\n".join(held) + "\n")
            sys.stderr.flush()


_VIA_STRUCTLOG, _SILENT, _DIRECT = range(3)
_copy_context = contextvars.copy_context
_stamped_second = [-1, ""]  # the last whole second stamped, and its text


def _utc_stamp() -> str:
    """What TimeStamper(fmt="iso", utc=True) writes, ``datetime.now(tz=UTC).isoformat()``
    with "Z" for "+00:00", with the date and time of day formatted once per second (the
    clock read and rounded as ``datetime.now`` reads and rounds it: to the microsecond,
    down)."""
    micros = time.time_ns() // 1000
    second = micros // 1_000_000
    if second != _stamped_second[0]:
        _stamped_second[:] = second, datetime.fromtimestamp(second, tz=UTC).isoformat()[:19]
    micros -= second * 1_000_000
    if not micros:
        return f"{_stamped_second[1]}Z"
    # printf-style pads the int without parsing a format spec per call (cheaper): UP031 off
    return "%s.%06dZ" % (_stamped_second[1], micros)  # noqa: UP031


def _mode() -> int:
    """How an info line is made under the current structlog configuration."""
    config = structlog.get_config()
    if (not _INSTALLED or config["logger_factory"] is not _INSTALLED["logger_factory"]
            # capture_logs swaps the processors inside the same list
            or tuple(config["processors"]) != _INSTALLED["processors"]):
        return _VIA_STRUCTLOG
    return _SILENT if _INSTALLED["level"] > logging.INFO else _DIRECT
