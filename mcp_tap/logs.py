"""structlog set-up: JSON lines on stderr, secrets redacted by a processor before rendering."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import MutableMapping
from typing import Any

import orjson
import structlog

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
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            redact_event,
            structlog.processors.JSONRenderer(serializer=_dumps),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        logger_factory=structlog.PrintLoggerFactory(file=_CurrentStderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )
