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
from collections.abc import Mapping, MutableMapping
from collections.abc import Set as AbstractSet
from typing import Any, Final

import structlog

from mcp_tap.core.redaction import Redactor, strip_url_secrets
from mcp_tap.core.redaction.text import shaped

_REDACTOR: Final = Redactor()
_MAX_TEMPLATE: Final = 200  # a message template is code, not data, but keep lines short
_CLEAN_KEYS: set[str] = set()  # field names known not to name a secret
_MAX_CLEAN_KEYS: Final = 1024  # field names are code's, but bounded all the same


def redact_event(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> Any:
    """A structlog processor: redact secrets anywhere in the event, and URLs in its strings."""
    redacted = _REDACTOR.redact_json(dict(event_dict))
    if not isinstance(redacted, dict):  # pragma: no cover - a dict in is a dict out
        return redacted
    for key, value in redacted.items():
        if isinstance(value, str) and "://" in value:
            redacted[key] = strip_url_secrets(value)
    return redacted


def redaction_is_noop(
    event_dict: Mapping[str, Any], skip: str = "", vouched: AbstractSet[str] = frozenset()
) -> bool:
    """Whether :func:`redact_event` would return ``event_dict`` unchanged (cheap, exact).

    True when no key names a secret and no string (top level or in a list) has the shape
    the text pass or the URL cut looks for; anything else (nested dicts) says False.
    ``skip`` names a field the caller vouches for, ``vouched`` more of them: fields whose
    values the caller's code made (rule ids, counts), not copied from the wire. Their
    names are checked all the same.
    """
    # The names' part of the verdict is a function of the names alone: remembered per
    # layout (a line's names in order, with skip and vouched), so a line of a known layout
    # costs a tuple and a look-up, then a test of the values that are not vouched for.
    layout = (tuple(event_dict), skip, vouched) if type(vouched) is frozenset else None
    wire = _LAYOUTS.get(layout, _UNKNOWN) if layout is not None else _UNKNOWN
    if wire is _UNKNOWN:
        if not _CLEAN_KEYS.issuperset(event_dict) and not _clean_keys(event_dict, skip):
            wire = None
        else:
            wire = tuple(key for key in event_dict if key != skip and key not in vouched)
        if layout is not None:
            if len(_LAYOUTS) >= _MAX_LAYOUTS:
                _LAYOUTS.clear()
            _LAYOUTS[layout] = wire
    if wire is None:
        return False
    for key in wire:
        value = event_dict[key]
        if isinstance(value, str):
            if shaped(value):
                return False
        elif isinstance(value, list):
            if any(not isinstance(v, str) or shaped(v) for v in value):
                return False
        elif value is not None and not isinstance(value, int | float):
            return False
    return True


# Layouts seen (see redaction_is_noop): the names of the fields whose values decide, or None
# when a name is secret. Names are code's, but bounded all the same.
_LAYOUTS: dict[Any, tuple[str, ...] | None] = {}
_MAX_LAYOUTS: Final = 64
_UNKNOWN: Final[Any] = object()


def _clean_keys(event_dict: Mapping[str, Any], skip: str) -> bool:
    """Whether no key but ``skip`` names a secret (remembering the keys that do not)."""
    for key in event_dict:
        if key in _CLEAN_KEYS:
            continue
        if _REDACTOR.is_sensitive_key(key):
            if key == skip:
                continue  # the caller vouches for it
            return False
        if len(_CLEAN_KEYS) < _MAX_CLEAN_KEYS:
            _CLEAN_KEYS.add(key)
    return True


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
