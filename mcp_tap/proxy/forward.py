"""Transparent forwarding: every method and path, bytes untouched, streamed both ways.

Only hop-by-hop headers (and those named in ``Connection``) are dropped; order, case and
duplicates are kept. ``Host`` is set for the upstream (routing needs it) and a
``traceparent`` is added when absent (configurable). Nothing is buffered: request chunks go
upstream as they arrive, response chunks (SSE included) go to the client as they arrive.
When the tap itself fails it answers 502/504 with ``X-Mcp-Tap-Error`` so nobody mistakes
the answer for the origin's.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import secrets
import time
from collections.abc import AsyncIterator, Callable
from itertools import chain
from typing import Any

import aiohttp
import structlog
from aiohttp import hdrs, web
from multidict import CIMultiDict
from yarl import URL

from mcp_tap.core.headers import HeaderMap, media_type
from mcp_tap.core.sse import SSEDecoder, SSEError
from mcp_tap.proxy.capture import BodyCapture
from mcp_tap.proxy.metrics import Metrics
from mcp_tap.proxy.options import TapOptions, TracingOptions
from mcp_tap.proxy.recorder import Captured, ExchangeRecorder, TimedEvent
from mcp_tap.proxy.tracing import root_flags

log = structlog.get_logger("mcp_tap.proxy")

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "proxy-connection",
    }
)
TAP_ERROR_HEADER = "X-Mcp-Tap-Error"
# Headers aiohttp's client would add to a forwarded request (the tap adds nothing).
_NO_AUTO_HEADERS = ("User-Agent", "Accept", "Accept-Encoding", "Content-Type")
_CHUNK = 64 * 1024


def _drop_set(pairs: tuple[tuple[str, str], ...]) -> frozenset[str]:
    named = {
        token.strip().lower()
        for name, value in pairs
        if name.lower() == "connection"
        for token in value.split(",")
        if token.strip()
    }
    return HOP_BY_HOP | named


def _decode_raw(raw: tuple[tuple[bytes, bytes], ...]) -> HeaderMap:
    # latin-1 maps every byte, so non-ASCII header bytes survive to evidence and back.
    return HeaderMap(tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in raw))


def _for_aiohttp(value: str) -> str:
    """The str aiohttp must be given to put the header bytes ``value`` stands for on the wire.

    aiohttp writes header strings as UTF-8, so a value that came in as (latin-1 decoded)
    UTF-8 bytes is handed over UTF-8 decoded, and the same bytes go out. Bytes that are not
    UTF-8 cannot be written as they are; the egress view then records what really went out.
    """
    if value.isascii():
        return value
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return value


def _as_written(value: str) -> str:
    """The latin-1 form of the bytes aiohttp writes for the header bytes ``value`` stands for."""
    return value if value.isascii() else _for_aiohttp(value).encode().decode("latin-1")


def _as_sent(headers: CIMultiDict[str]) -> HeaderMap:
    """Headers aiohttp wrote (as UTF-8), in the evidence's latin-1 form of the wire bytes."""
    wire = ((k.encode(), v.encode()) for k, v in headers.items())
    return HeaderMap(tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in wire))


_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")


def _traceparent(headers: HeaderMap, options: TracingOptions) -> tuple[str, str | None]:
    """The trace id of the request's ``traceparent`` and a header to add when it has none.

    A W3C-valid header gives its trace id. An invalid one (bad hex, all-zero ids, version
    ``ff``) is left alone, untouched and unused: pairing on it could join strangers' requests.
    """
    values = headers.get_all("traceparent")
    if values:
        m = _TRACEPARENT.fullmatch(values[0].strip())
        valid = (
            len(values) == 1
            and m is not None
            and m.group(1) != "ff"
            and m.group(2) != "0" * 32
            and m.group(3) != "0" * 16
        )
        return (m.group(2) if valid and m else ""), None
    return _new_traceparent(options)


def _new_traceparent(options: TracingOptions) -> tuple[str, str]:
    """A fresh trace id and the ``traceparent`` header that carries it.

    The sampled flag is set only when the tap itself records the trace (:func:`root_flags`):
    a parent-based sampler downstream must not be told to keep what nobody chose to keep.
    """
    ids = secrets.token_hex(24)  # one read of the system's randomness for both ids
    trace_id = ids[:32]
    return trace_id, f"00-{trace_id}-{ids[32:]}-{root_flags(options, trace_id)}"


_DROP_INGRESS = HOP_BY_HOP | {"host"}  # Host is set for the upstream instead


def _is_ascii(raw: tuple[tuple[bytes, bytes], ...]) -> bool:
    """Whether every header name and value is ASCII (then no header needs re-encoding)."""
    return b"".join(chain.from_iterable(raw)).isascii()


def _decoded(
    decoder: SSEDecoder, chunk: bytes, arrived: float, cap: Captured, max_events: int
) -> bool:
    """Feed one forwarded chunk to the SSE decoder; False once the stream is not valid SSE."""
    try:
        for event in decoder.feed(chunk):
            if len(cap.sse) < max_events:
                cap.sse.append(TimedEvent(arrived, event))
            else:
                cap.sse_dropped += 1
    except SSEError:
        cap.sse_incomplete = True
        return False
    return True


def _first(pairs: tuple[tuple[str, str], ...], lower: list[str], name: str) -> str:
    """The first value of (lowercase) ``name``, "" when absent."""
    return pairs[lower.index(name)][1] if name in lower else ""


def _kept(
    pairs: tuple[tuple[str, str], ...], lower: list[str], drop: frozenset[str]
) -> tuple[tuple[str, str], ...]:
    """``pairs`` minus the names in ``drop`` and those the ``Connection`` header names."""
    if "connection" in lower:
        drop = drop | _drop_set(pairs)
    return tuple([p for p, name in zip(pairs, lower, strict=True) if name not in drop])


class Forwarder:
    """The aiohttp handler of one hop."""

    def __init__(
        self,
        hop: str,
        upstream: str,
        options: TapOptions,
        session: aiohttp.ClientSession,
        recorder: ExchangeRecorder,
        clock: Callable[[], float] = time.time,
        metrics: Metrics | None = None,
    ) -> None:
        self.hop = hop
        self.metrics = Metrics() if metrics is None else metrics
        self.upstream = upstream
        self.options = options
        self.session = session
        self.recorder = recorder
        self.clock = clock
        self._host = URL(upstream).raw_authority
        up_opts = options.upstream
        self._timeout = aiohttp.ClientTimeout(
            total=None,
            sock_connect=up_opts.connect_timeout_s or None,
            sock_read=up_opts.idle_timeout_s or None,
        )
        # aiohttp must add none of its default headers. Given per request, the names are
        # turned into a set on every request; a session that skips them already needs none.
        skipped = {name.lower() for name in session.skip_auto_headers}
        self._skip_auto_headers: tuple[str, ...] | None = (
            None if skipped >= {n.lower() for n in _NO_AUTO_HEADERS} else _NO_AUTO_HEADERS
        )
        self.in_flight: set[asyncio.Task[Any]] = set()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Forward one request and its answer; record the exchange when it is over."""
        task = asyncio.current_task()
        if task is not None:
            self.in_flight.add(task)
        try:
            return await self._handle(request)
        finally:
            if task is not None:
                self.in_flight.discard(task)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        received = self.clock()
        raw = request.raw_headers
        raw_headers = _decode_raw(raw)
        pairs = raw_headers.pairs
        lower = [name.lower() for name, _ in pairs]  # every lookup below reads this once
        if "traceparent" in lower:
            trace_id, new_traceparent = _traceparent(raw_headers, self.options.tracing)
        else:
            trace_id, new_traceparent = _new_traceparent(self.options.tracing)
        kept = (("Host", self._host), *_kept(pairs, lower, _DROP_INGRESS))
        if new_traceparent and self.options.tracing.add_traceparent:
            kept = (*kept, ("traceparent", new_traceparent))
        else:
            trace_id = trace_id if not new_traceparent else ""
        # Evidence of what really goes upstream (differs only for non-UTF-8 header bytes).
        forwarded = HeaderMap(
            kept if _is_ascii(raw) else tuple((k, _as_written(v)) for k, v in kept)
        )
        capture_cap = self.options.capture.max_body_bytes
        cap = Captured(
            hop=self.hop,
            upstream=self.upstream,
            client=request.remote or "",
            user_agent=_first(pairs, lower, "user-agent"),
            http_method=request.method,
            path=request.raw_path,
            request_headers=raw_headers,
            forwarded_headers=forwarded,
            request=BodyCapture(capture_cap, _first(pairs, lower, "content-encoding")),
            received_at=received,
            trace_id=trace_id,
        )
        if not request.body_exists:
            cap.request.end()
        try:
            self.metrics.exchange_began(self.hop)
            self.recorder.begin(cap)
            return await self._forward(request, cap)
        except asyncio.CancelledError:
            cap.client_gone = True  # aiohttp cancels the handler when the client hangs up
            raise
        finally:
            _settle_request_body(request, cap.request)
            self.metrics.exchange_ended(self.hop, cap.egress_status)
            try:
                self.recorder.record(cap)
            except Exception as exc:  # noqa: BLE001 - evidence must never break traffic
                log.error("record.failed", hop=self.hop, error=type(exc).__name__)

    def _request_data(
        self, request: web.Request, capture: BodyCapture
    ) -> bytes | AsyncIterator[bytes]:
        """What aiohttp sends upstream as the request body: streamed, or the bytes already here.

        A small body with a ``Content-Length`` has usually arrived whole with its headers; then
        it goes upstream as bytes (aiohttp sends them with the headers, without the machinery
        of a streamed body). The framing stays the client's: the same ``Content-Length`` is
        forwarded. Nothing is waited for: a body not here in full is streamed as it arrives.
        """
        content = request.content
        size = request.content_length
        if (
            size is not None
            and size <= _CHUNK
            and content.is_eof()
            and content.exception() is None
            and hdrs.TRANSFER_ENCODING not in request.headers
        ):
            body = content.read_nowait()
            if content.at_eof() and len(body) == size:
                capture.feed(body)
                capture.end()
                return body
            return self._body(request, capture, body)
        return self._body(request, capture)

    async def _body(
        self, request: web.Request, capture: BodyCapture, first: bytes = b""
    ) -> AsyncIterator[bytes]:
        if first:
            capture.feed(first)
            yield first
        async for chunk in request.content.iter_any():
            capture.feed(chunk)
            yield chunk
        capture.end()

    async def _forward(self, request: web.Request, cap: Captured) -> web.StreamResponse:
        pairs = cap.forwarded_headers.pairs
        headers: CIMultiDict[str] = CIMultiDict(
            pairs
            if _is_ascii(request.raw_headers)
            else [(name, _for_aiohttp(value)) for name, value in pairs]
        )
        has_body = request.body_exists
        url = URL(self.upstream + request.raw_path, encoded=True)
        cap.forwarded_at = self.clock()
        try:
            upstream_cm = self.session.request(
                request.method,
                url,
                headers=headers,
                data=self._request_data(request, cap.request) if has_body else None,
                allow_redirects=False,
                timeout=self._timeout,
                skip_auto_headers=self._skip_auto_headers,
            )
            upstream = await upstream_cm.__aenter__()
        except TimeoutError:
            return await self._tap_error(
                request, cap, 504, "upstream-timeout", "the upstream did not answer in time"
            )
        except aiohttp.ClientError as exc:
            return await self._tap_error(
                request, cap, 502, "upstream-unreachable", f"{type(exc).__name__}: {exc}"
            )
        try:
            return await self._relay(request, cap, upstream)
        finally:
            await upstream_cm.__aexit__(None, None, None)

    async def _relay(
        self, request: web.Request, cap: Captured, upstream: aiohttp.ClientResponse
    ) -> web.StreamResponse:
        cap.first_byte_at = self.clock()
        cap.status = upstream.status
        raw = upstream.raw_headers
        cap.response_headers = _decode_raw(raw)
        pairs = cap.response_headers.pairs
        lower = [name.lower() for name, _ in pairs]
        out_headers = _kept(pairs, lower, HOP_BY_HOP)
        ascii_only = _is_ascii(raw)
        response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
        if ascii_only:
            response.headers.extend(out_headers)
        else:
            for name, value in out_headers:
                response.headers.add(name, _for_aiohttp(value))
        # A forwarded Content-Length keeps the origin's framing (aiohttp chunks without one).
        capture = BodyCapture(
            self.options.capture.max_body_bytes, _first(pairs, lower, "content-encoding")
        )
        cap.response = capture
        sse = media_type(_first(pairs, lower, "content-type")) == "text/event-stream"
        decoder = SSEDecoder() if sse and capture.encoding in ("", "identity") else None
        max_events = self.options.capture.max_sse_events
        pending: bytes | None = None  # a chunk taken from the origin, not yet sent on
        cap.egress_status = upstream.status
        try:
            await response.prepare(request)
        except (ConnectionResetError, aiohttp.ClientConnectionError):
            cap.client_gone = True
            return response
        cap.sent_at = self.clock()
        cap.egress_headers = _as_sent(response.headers)
        try:
            async for chunk in upstream.content.iter_any():
                pending = chunk
                arrived = self.clock() if decoder is not None else 0.0
                try:
                    await response.write(chunk)
                except (ConnectionResetError, aiohttp.ClientConnectionError):
                    cap.client_gone = True  # Closing the upstream below cancels the request.
                    break
                finally:
                    # Decoded once sent, so judging never delays an event (events are still
                    # stamped with their arrival); a chunk that could not be sent is decoded
                    # too: the origin did send it.
                    if decoder is not None and not _decoded(decoder, chunk, arrived, cap,
                                                            max_events):
                        decoder = None
                # Fed once sent: until a send fails, the origin's digest is the egress digest.
                capture.feed(chunk)
                pending = None
                cap.egress_bytes += len(chunk)
            else:
                if decoder is not None:
                    for event in decoder.close():
                        cap.sse.append(TimedEvent(self.clock(), event))
                    cap.sse_incomplete = decoder.pending_incomplete and not cap.sse
                capture.end()
                try:
                    await response.write_eof()
                except (ConnectionResetError, aiohttp.ClientConnectionError):
                    # The origin's answer is whole; only its last frame did not reach a
                    # client that had already left (a send that failed closed the transport).
                    cap.client_gone = True
        except asyncio.CancelledError:
            cap.client_gone = True  # the client disconnected; leaving closes the upstream
            raise
        except TimeoutError:
            cap.tap_error = {
                "status": None,
                "phase": "upstream-idle-timeout",
                "reason": "the upstream stream was idle past the timeout",
            }
        except aiohttp.ClientError as exc:
            cap.tap_error = {
                "status": None,
                "phase": "upstream-reset",
                "reason": f"{type(exc).__name__} mid-stream",
            }
        finally:
            cap.end_at = self.clock()
            cap.egress_end_at = cap.end_at
            cap.egress_digest = capture.digest  # every byte sent on, none that was not
            if pending is not None:
                capture.feed(pending)  # the origin did send it
        if cap.tap_error is not None and request.transport is not None:
            # Headers are gone already: the only honest signal left is a broken stream.
            request.transport.close()
        return response

    async def _tap_error(
        self, request: web.Request, cap: Captured, status: int, phase: str, reason: str
    ) -> web.StreamResponse:
        cap.tap_error = {"status": status, "phase": phase, "reason": reason}
        cap.end_at = self.clock()
        body = (f'{{"tap":"mcp-tap","hop":"{self.hop}","error":"{phase}"}}').encode()
        response = web.Response(
            status=status,
            body=body,
            content_type="application/json",
            headers={TAP_ERROR_HEADER: phase},
        )
        cap.egress_status = status
        cap.egress_headers = HeaderMap(
            ((TAP_ERROR_HEADER, phase), ("Content-Type", "application/json"))
        )
        cap.egress_digest = hashlib.sha256(body).hexdigest()
        cap.egress_bytes = len(body)
        cap.sent_at = cap.egress_end_at = self.clock()
        # Drain what the client sent so the digest covers it, without holding it.
        if request.body_exists and not cap.request.ended:
            async for chunk in request.content.iter_any():
                cap.request.feed(chunk)
            cap.request.end()
        return response


def _settle_request_body(request: web.Request, capture: BodyCapture) -> None:
    """Take in request bytes the upstream client left unread but the client did send.

    An origin may answer before aiohttp has pulled the last (empty) read that marks the end
    of the forwarded body; what is already buffered belongs to the capture. A body the client
    never finished sending stays marked as not ended, so nobody judges half of it.
    """
    content = request.content
    while not capture.ended:
        try:
            chunk = content.read_nowait()
        except (RuntimeError, OSError):  # a reader still waits on it, or the client left
            return
        if chunk:
            capture.feed(chunk)
        elif content.at_eof():
            capture.end()
        else:
            return
