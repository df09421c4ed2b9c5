"""The candidate server: the one place replay touches the network."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Final

import httpx
import orjson

from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.redaction import Redactor
from mcp_tap.core.sse import SSEDecoder, SSEError, SSEEvent
from mcp_tap.errors import UpstreamError
from mcp_tap.probe.client import check_timeout
from mcp_tap.replay.model import (
    Answer,
    decode_event_data,
    encode_json,
)
from mcp_tap.urls import check_http_url, shown_url


class Target:
    """The candidate server: POSTs JSON-RPC bodies and reads whole answers (SSE decoded).

    The one place replay touches the network: every ``httpx`` error becomes
    :class:`UpstreamError` here.
    """

    def __init__(self, url: str, *, timeout: float = 30.0,
                 client: httpx.Client | None = None) -> None:
        """Talk to ``url``; ``client`` (for tests) replaces the default ``httpx.Client``."""
        self.url = check_http_url(url, "--target")
        check_timeout(timeout)
        self.timeout = timeout
        self._own = client is None
        self._client = client if client is not None else httpx.Client(
            timeout=httpx.Timeout(timeout), follow_redirects=False)

    def close(self) -> None:
        """Close the HTTP client (if this object opened it)."""
        if self._own:
            self._client.close()

    def post(self, headers: Sequence[tuple[str, str]], body: Any) -> Answer:
        """POST ``body`` as JSON with exactly ``headers``; return the whole answer, which
        must arrive within the timeout (a silent server is cut when one read has waited
        that long, a trickling one at the deadline)."""
        content = encode_json(body)
        # httpx's timeout bounds each read; a stream that trickles a byte now and then
        # would never end, so the whole answer has a deadline too.
        deadline = time.monotonic() + self.timeout
        try:
            with self._client.stream("POST", self.url, headers=list(headers),
                                     content=content) as response:
                status = response.status_code
                pairs = tuple((k, v) for k, v in response.headers.multi_items())
                chunks: list[bytes] = []
                for chunk in response.iter_bytes():
                    chunks.append(chunk)
                    if time.monotonic() > deadline:
                        raise UpstreamError(
                            f"{shown_url(self.url)}: timed out (the answer was still "
                            f"streaming after --timeout {self.timeout:g} s)")
                data = b"".join(chunks)
        except httpx.HTTPError as exc:
            raise UpstreamError(f"{shown_url(self.url)}: {_describe(exc)}") from exc
        return _answer(status, HeaderMap(pairs), data)

    def delete(self, headers: Sequence[tuple[str, str]]) -> None:
        """Send a DELETE (closing a legacy session); its answer is not judged."""
        try:
            self._client.delete(self.url, headers=list(headers))
        except httpx.HTTPError as exc:
            raise UpstreamError(f"{shown_url(self.url)}: {_describe(exc)}") from exc


def _describe(exc: httpx.HTTPError) -> str:
    text = str(exc).strip() or type(exc).__name__
    if isinstance(exc, httpx.ConnectError):
        return f"cannot connect ({text})"
    if isinstance(exc, httpx.TimeoutException):
        return f"timed out ({type(exc).__name__})"
    return text.splitlines()[0]


def _answer(status: int, headers: HeaderMap, data: bytes) -> Answer:
    """Decode an answer's body into JSON-RPC messages (and SSE events), redacted."""
    redactor = _REDACTOR
    if headers.content_type() == "text/event-stream":
        decoder = SSEDecoder()
        try:
            events = decoder.feed(data) + decoder.close()
        except SSEError:
            events = []
        redacted = tuple(
            SSEEvent(redactor.redact_text(e.data), e.event, e.id, e.retry) for e in events
        )
        messages = tuple(
            m for m in (decode_event_data(e.data) for e in redacted)
            if m is not None and not isinstance(m, str)
        )
        return Answer(status, headers, data, messages, redacted, len(data))
    if not data.strip():
        return Answer(status, headers, data, (), None, len(data))
    try:
        message = orjson.loads(data)
    except orjson.JSONDecodeError:
        return Answer(status, headers, data, (), None, len(data))
    return Answer(status, headers, data, (redactor.redact_message(message),), None, len(data))


_REDACTOR: Final = Redactor()
