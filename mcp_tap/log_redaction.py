"""Secrets out of log lines: a structlog processor and a bridge for libraries' stdlib logging.

:func:`redact_event` runs before rendering: every field goes through the redactor (secret
names at any depth, key-value text and bearer credentials in string values), and URLs in
string fields lose their userinfo, path parameters and query.

:func:`route_library_logs` catches what aiohttp and asyncio log through :mod:`logging`
(``Error handling request`` with a traceback whose exception message may quote raw request
bytes, header values included). Such a record becomes one JSON line: the logger, the level,
the message *template* (never its arguments) and the exception's type (never its message or
traceback). Without it Python's last-resort handler prints the whole traceback to stderr.
"""

from __future__ import annotations

import logging
from collections.abc import MutableMapping
from typing import Any, Final

import structlog

from mcp_tap.core.redaction import Redactor, strip_url_secrets

_REDACTOR: Final = Redactor()
_MAX_TEMPLATE: Final = 200  # a message template is code, not data, but keep lines short


def redact_event(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> Any:
    """A structlog processor: redact secrets anywhere in the event, and URLs in its strings."""
    redacted = _REDACTOR.redact_json(dict(event_dict))
    if not isinstance(redacted, dict):  # pragma: no cover - a dict in is a dict out
        return redacted
    for key, value in redacted.items():
        if isinstance(value, str) and "://" in value:
            redacted[key] = strip_url_secrets(value)
    return redacted


class LibraryLogHandler(logging.Handler):
    """Renders a library's stdlib log record as one redaction-safe structlog line."""

    def emit(self, record: logging.LogRecord) -> None:
        """Log the record's logger, level, message template and exception type only."""
        try:
            template = record.msg if isinstance(record.msg, str) else type(record.msg).__name__
            fields: dict[str, Any] = {
                "logger": record.name,
                "message": template[:_MAX_TEMPLATE],
            }
            if record.exc_info and record.exc_info[0] is not None:
                fields["error"] = record.exc_info[0].__name__
            structlog.get_logger("mcp_tap.library").log(record.levelno, "library.log", **fields)
        except Exception:  # noqa: BLE001 - a log line must never raise into the library
            self.handleError(record)

    def handleError(self, record: logging.LogRecord) -> None:
        """Drop the record: the stdlib default would print a traceback to stderr."""


def route_library_logs(level: int = logging.WARNING) -> None:
    """Send every stdlib log record at ``level`` or above through :class:`LibraryLogHandler`.

    Replaces an earlier handler of this kind (calling it twice installs one).
    """
    root = logging.getLogger()
    for handler in list(root.handlers):
        if isinstance(handler, LibraryLogHandler):
            root.removeHandler(handler)
    handler = LibraryLogHandler(level)
    root.addHandler(handler)
    if root.level > level or root.level == logging.NOTSET:
        root.setLevel(level)
