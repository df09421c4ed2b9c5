"""structlog set-up: one JSON object per line on stderr, for the tap's own lines and for every
standard-library logger (aiohttp, asyncio, the OpenTelemetry exporter) alike.

The processor chain is :func:`processors`, a plain list: extend it with one line. Tracebacks
are rendered by structlog (``exception``: a list of ``{exc_type, exc_value, frames}``, frame
locals never included, since they can hold request data). Every field is documented in
``docs/logging.md``; secrets are redacted by :func:`redact_event` before rendering.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import MutableMapping
from typing import Any

import orjson
import structlog
from structlog.tracebacks import ExceptionDictTransformer
from structlog.typing import Processor

from mcp_tap.core.redaction import Redactor
from mcp_tap.errors import InputError

_REDACTOR = Redactor()


def redact_event(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> Any:
    """A structlog processor: redact denylisted keys anywhere in the event."""
    redacted = _REDACTOR.redact_json(dict(event_dict))
    return redacted


class _CurrentStderr:
    """Writes to whatever ``sys.stderr`` is at the time (tests and embedders swap it)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def _dumps(obj: Any, **_kw: Any) -> str:
    return orjson.dumps(obj, default=str).decode()


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


def _route_stdlib(level: int) -> None:
    """Send every standard-library log record through the same chain, as JSON on stderr."""
    handler = logging.StreamHandler(_CurrentStderr())
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[structlog.stdlib.add_logger_name, *processors()],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.JSONRenderer(serializer=_dumps),
            ],
        )
    )
    handler.set_name("mcp-tap-json")
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == "mcp-tap-json"]:
        root.removeHandler(old)
    # Other libraries' lines below WARNING stay out even at --log-level debug: they are
    # per-request chatter, and client libraries log URLs (with their queries) at INFO.
    handler.setLevel(max(level, logging.WARNING))
    root.addHandler(handler)
    root.setLevel(min(root.level or logging.WARNING, handler.level))


def configure_logging(level: str = "info") -> None:
    """Configure structlog to print one JSON object per line on stderr.

    ``level`` is one of :data:`LOG_LEVELS` (any case); anything else is an
    :class:`~mcp_tap.errors.InputError`.
    """
    if level.lower() not in LOG_LEVELS:
        raise InputError(f"log level {level!r} is not one of {', '.join(LOG_LEVELS)}")
    number = logging.getLevelNamesMapping()[level.upper()]
    structlog.configure(
        processors=[*processors(), structlog.processors.JSONRenderer(serializer=_dumps)],
        wrapper_class=structlog.make_filtering_bound_logger(number),
        logger_factory=structlog.PrintLoggerFactory(file=_CurrentStderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )
    _route_stdlib(number)
