"""structlog set-up: JSON lines on stderr, secrets redacted by a processor before rendering."""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any

import orjson
import structlog

from mcp_tap.core.redaction import Redactor

_REDACTOR = Redactor()


def redact_event(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> Any:
    """A structlog processor: redact denylisted keys anywhere in the event."""
    redacted = _REDACTOR.redact_json(dict(event_dict))
    return redacted


def _dumps(obj: Any, **_kw: Any) -> str:
    return orjson.dumps(obj, default=str).decode()


def configure_logging(level: str = "info") -> None:
    """Configure structlog to print one JSON object per line on stderr."""
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            redact_event,
            structlog.processors.JSONRenderer(serializer=_dumps),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
        ),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
