"""Target and upstream URLs: one validator for every command, and a form safe to print.

A URL given on the command line or in config is checked here, once, before any socket is
opened: an ``http``/``https`` scheme, a host, and a port in 1-65535 when one is given. A
malformed URL (``http://[::1``, ``http://h:99999``) is bad input, never a traceback.
URLs that reach an error message or an output go through :func:`shown_url`, because
``user:password@`` is a credential, and so may a query value be.
"""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit

from mcp_tap.errors import InputError

__all__ = ["check_http_url", "shown_url"]


def _split(value: str) -> SplitResult | None:
    try:
        parts = urlsplit(value)
        port = parts.port  # raises ValueError when out of range or not a number
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    if port is not None and not 1 <= port <= 65535:
        return None
    if any(ch.isspace() or ord(ch) < 0x20 for ch in value):
        return None
    return parts


def check_http_url(value: str, what: str) -> str:
    """Return ``value`` when it is a usable http(s) URL; else raise :class:`InputError`.

    ``what`` names where the URL came from (``--target``, ``[[hop]] edge upstream``).
    """
    if _split(value) is None:
        raise InputError(
            f"{what}: {shown_url(value)!r} is not an http:// or https:// URL with a host "
            "and a port in 1-65535")
    return value


def _hidden_query(query: str) -> str:
    """Each query item's value as ``***``, its name kept (an item without ``=`` is all
    value). Which names are secret is the redaction policy's (above this layer); a shown URL
    only names a target, so every value goes, as every userinfo does."""
    return "&".join(f"{item.partition('=')[0]}=***" if "=" in item else "***"
                    for item in query.split("&") if item)


def shown_url(value: str) -> str:
    """``value`` with any ``user:password@`` replaced by ``***@`` and each query value by
    ``***`` (``?token=...`` is a credential too), for messages, outputs and logs."""
    try:
        parts = urlsplit(value)
    except ValueError:
        parts = None
    if parts is not None:
        if "@" not in parts.netloc and "?" not in value:
            return value
        if "@" in parts.netloc:
            parts = parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2])
        return parts._replace(query=_hidden_query(parts.query)).geturl()
    if "?" in value:  # unparseable: cut the query by hand
        value = value.partition("?")[0]
    if "@" in value and "://" in value:  # unparseable: cut the userinfo by hand
        scheme, _, rest = value.partition("://")
        return f"{scheme}://***@{rest.rpartition('@')[2]}"
    return value
