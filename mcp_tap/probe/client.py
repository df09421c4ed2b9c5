"""The probe's transport: one httpx client bound to the target, the one place httpx errors
become :class:`~mcp_tap.errors.UpstreamError`; the timeout rule probe and replay share.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Final

import httpx

from mcp_tap.core.eras import (
    HEADER_SESSION_ID,
)
from mcp_tap.core.headers import HeaderMap
from mcp_tap.errors import InputError, UpstreamError
from mcp_tap.urls import shown_url

ACCEPT: Final = "application/json, text/event-stream"
"""The ``Accept`` value every Streamable HTTP POST carries."""


DEFAULT_TIMEOUT: Final = 10.0


# The longest wait for one answer an operator may ask for: beyond it a timeout is a typo
# (and an infinite or huge one overflows the socket layer).
MAX_TIMEOUT: Final = 3600.0
"""Seconds the probe waits for one answer (connect, each read, each write)."""


def check_timeout(value: float, what: str = "--timeout") -> float:
    """Return ``value`` when it is a usable timeout: finite, above 0, at most :data:`MAX_TIMEOUT`.

    Raises :class:`InputError` naming ``what`` otherwise (probe and replay share this rule).
    """
    if not (math.isfinite(value) and 0 < value <= MAX_TIMEOUT):
        raise InputError(f"{what} must be a number of seconds above 0 and at most "
                         f"{MAX_TIMEOUT:g}, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class Answer:
    """What the server sent back: status, headers and the whole body (SSE read to its end)."""

    status: int
    headers: HeaderMap
    body: bytes


def _reason(exc: httpx.HTTPError, timeout: float) -> str:
    """One line saying why a request got no answer."""
    text = " ".join(str(exc).split())
    if isinstance(exc, httpx.TimeoutException):
        return f"no answer within {timeout:g} s"
    if isinstance(exc, httpx.ConnectError):
        low = text.lower()
        if "refused" in low:
            return "connection refused"
        if "name or service not known" in low or "nodename" in low or "getaddrinfo" in low:
            return "host name not resolved"
        return text or "cannot connect"
    if isinstance(exc, httpx.RemoteProtocolError):
        return f"the server broke the connection ({text or 'no details'})"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class HttpClient:
    """A synchronous httpx client bound to one target; the probe's only transport.

    ``reached`` turns true after the first answer: before it, a transport error means the
    target is unreachable (the whole probe stops); after it, one case got no answer.
    """

    def __init__(
        self,
        target: str,
        *,
        headers: Sequence[tuple[str, str]] = (),
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """Open a client for ``target`` sending the operator ``headers`` on every request."""
        self.target = target
        self.extra_headers = tuple(headers)
        self.timeout = timeout
        self.reached = False
        self._client = httpx.Client(timeout=httpx.Timeout(timeout), transport=transport)

    def __enter__(self) -> HttpClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def wire_headers(self, headers: HeaderMap, *, session: str | None = None) -> HeaderMap:
        """The headers actually sent: transport headers, the case's, the session, the operator's."""
        pairs: list[tuple[str, str]] = []
        if "accept" not in headers:
            pairs.append(("Accept", ACCEPT))
        if "content-type" not in headers:
            pairs.append(("Content-Type", "application/json"))
        pairs += headers.pairs
        if session is not None:
            pairs.append((HEADER_SESSION_ID, session))
        pairs += self.extra_headers
        return HeaderMap(tuple(pairs))

    def send(self, method: str, headers: HeaderMap, body: bytes = b"") -> Answer:
        """Send one request with exactly ``headers`` (order and duplicates kept) and read it all."""
        # Bytes values: a raw non-ASCII header value (a negative case) must reach the wire as
        # its UTF-8 bytes, which httpx refuses to do for str values.
        raw = [(k.encode("ascii", "replace"), v.encode("utf-8")) for k, v in headers]
        try:
            response = self._client.request(method, self.target, headers=raw, content=body)
        except httpx.HTTPError as exc:
            what = _reason(exc, self.timeout)
            if not self.reached:
                raise UpstreamError(f"cannot reach {shown_url(self.target)}: {what}") from None
            raise UpstreamError(f"{shown_url(self.target)}: {what}") from None
        except httpx.InvalidURL as exc:
            raise InputError(f"--target {shown_url(self.target)!r}: {exc}") from None
        self.reached = True
        return Answer(response.status_code, HeaderMap(tuple(response.headers.multi_items())),
                      response.content)

    def post(self, headers: HeaderMap, body: bytes, *, session: str | None = None) -> Answer:
        """POST ``body`` with the case ``headers`` plus transport, session and operator headers."""
        return self.send("POST", self.wire_headers(headers, session=session), body)
