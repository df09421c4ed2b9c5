"""The real SDK through the tap: transparency and evidence, in both eras.

The real ``mcp==2.3.0`` server is the origin and the real SDK client talks to it through an
in-process tap. What the client gets through the tap must equal what it gets direct, and
the evidence must hold the three views (ingress, origin, egress) with digests of the exact
bytes and no false findings. In-process aiohttp origins cover what the SDK cannot show:
compressed bodies, duplicate headers, and streaming in both directions.
"""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from aiohttp import web
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import RootsListChangedNotification
from peers import Era, raw_modern_request, sdk_mode
from taps import TEST_DIGEST_KEY, exchanges, hop_url, running_tap, tap_options

from mcp_tap.core.hashing import body_digest
from mcp_tap.core.redaction import Redactor
from mcp_tap.proxy.options import EraOptions, RecordingOptions

_TIMEOUT = 30.0
StartApp = Callable[[web.Application], Awaitable[str]]  # the `serve_app` fixture


def sha256(data: bytes) -> str:
    """The body digest the tap records for ``data`` (under the tests' operator key)."""
    return body_digest(TEST_DIGEST_KEY, data)


# -- the SDK client, with every byte it sends and receives kept ------------------------------


@dataclass
class Seen:
    """One HTTP exchange as the SDK client's transport saw it (raw bytes, headers in order)."""

    request: httpx2.Request
    status: int
    headers: list[tuple[str, str]]
    body: bytearray = field(default_factory=bytearray)

    @property
    def message(self) -> Any:
        return json.loads(self.request.content) if self.request.content else None


class _TeeStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, sink: bytearray) -> None:
        self.inner, self.sink = inner, sink

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.inner:
            self.sink.extend(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class TeeTransport(httpx2.AsyncBaseTransport):
    """An httpx2 transport that keeps the raw (still encoded) bytes the client received."""

    def __init__(self) -> None:
        self.inner = httpx2.AsyncHTTPTransport()
        self.seen: list[Seen] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        seen = Seen(
            request,
            response.status_code,
            [(k.decode("latin-1"), v.decode("latin-1")) for k, v in response.headers.raw],
        )
        self.seen.append(seen)
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        return httpx2.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_TeeStream(response.stream, seen.body),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


def _dump(model: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = model.model_dump(by_alias=True, mode="json", exclude_unset=True)
    return dumped


async def sdk_session(url: str, era: Era, tee: TeeTransport) -> dict[str, Any]:
    """tools/list, tools/call answered as JSON (modern) and as SSE, and a notification."""
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    method = "notifications/roots/list_changed"
    async with (
        httpx2.AsyncClient(transport=tee, timeout=_TIMEOUT) as http,
        Client(
            streamable_http_client(url, http_client=http),
            mode=sdk_mode(era),
            read_timeout_seconds=_TIMEOUT,
        ) as client,
    ):
        listed = await client.list_tools()
        looked = await client.call_tool("lookup", {"region": "eu-west", "query": "q"})
        counted = await client.call_tool("slow_count", {"n": 3}, progress_callback=on_progress)
        await client.session.send_notification(RootsListChangedNotification())
        async with asyncio.timeout(_TIMEOUT):  # the notification POST is answered in the background
            while not any(s.message and s.message.get("method") == method for s in tee.seen):
                await asyncio.sleep(0.01)
    return {
        "tools": _dump(listed),
        "lookup": _dump(looked),
        "count": _dump(counted),
        "progress": progress,
    }


def _shape(tee: TeeTransport) -> list[tuple[str, str | None, int]]:
    """What crossed the wire, order-free (the legacy GET stream runs in the background)."""
    return sorted((s.request.method, (s.message or {}).get("method"), s.status) for s in tee.seen)


def _record_for(seen: Seen, records: list[dict[str, Any]]) -> dict[str, Any]:
    if seen.request.method == "POST":
        digest = sha256(seen.request.content)
        found = [r for r in records if r["ingress"]["bodyDigest"] == digest]
    else:
        found = [r for r in records if r["ingress"]["httpMethod"] == seen.request.method]
    assert len(found) == 1, (seen.request.method, seen.message)
    return found[0]


def _lower(pairs: list[list[str]] | list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(k.lower(), v) for k, v in pairs]


def _shown(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Headers as evidence shows them: the session id a keyed pseudonym, the rest as sent."""
    return _lower(Redactor(pseudonym_key=TEST_DIGEST_KEY.secret).redact_headers(pairs))


@pytest.mark.parametrize("recording", ["inline", "process"])
@pytest.mark.parametrize(
    ("era", "legacy_allowed"),
    [("modern", False), ("legacy", False), ("legacy", True)],
    ids=["modern", "legacy-not-allowlisted", "legacy-allowlisted"],
)
async def test_sdk_client_through_tap_equals_direct_and_evidence_holds(
    tmp_path: Path,
    origin_url: str,
    origin_base: str,
    era: Era,
    legacy_allowed: bool,
    recording: str,
) -> None:
    direct_tee = TeeTransport()
    direct = await sdk_session(origin_url, era, direct_tee)

    eras = EraOptions(legacy_allowed=legacy_allowed)
    opts = tap_options(
        tmp_path, upstream=origin_base, eras=eras, recording=RecordingOptions(mode=recording),
        digest_key=TEST_DIGEST_KEY,
    )
    tee = TeeTransport()
    async with running_tap(opts) as tap:
        through = await sdk_session(hop_url(tap), era, tee)
    recs = exchanges(tap)

    # Transparency: the SDK client's results and its HTTP conversation are the same.
    assert through == direct
    assert through["count"]["content"][0]["text"] == "counted to 3"
    assert [p[0] for p in through["progress"]] == [1.0, 2.0, 3.0]
    assert _shape(tee) == _shape(direct_tee)
    assert len(recs) == len(tee.seen)

    for seen in tee.seen:
        rec = _record_for(seen, recs)
        ingress, origin, egress = rec["ingress"], rec["origin"], rec["egress"]
        assert rec["era"] == era, (seen.request.method, seen.message)
        assert rec["hop"] == "tap"
        assert rec["tapError"] is None
        assert rec["method"] == (seen.message or {}).get("method")
        if seen.message and "id" in seen.message:
            assert rec["rpcId"] == seen.message["id"]
        # Ingress: every header the client sent, in order, and the digest of its exact bytes.
        assert ingress["httpMethod"] == seen.request.method
        sent = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in seen.request.headers.raw]
        assert _lower(ingress["headers"]) == _shown(sent)
        session = dict(_lower(sent)).get("mcp-session-id")
        assert session is None or session not in json.dumps(rec)
        assert ingress["bodyDigest"] == sha256(seen.request.content)
        assert ingress["bodySize"] == len(seen.request.content)
        if seen.message is not None:
            assert ingress["body"] == seen.message  # nothing in it is a secret
        # Origin and egress: status, headers as ordered pairs, digest of what the client got.
        assert origin["status"] == egress["status"] == seen.status
        assert all(isinstance(p, list) and len(p) == 2 for p in origin["headers"])
        assert _lower(egress["headers"]) == _shown(seen.headers)
        assert egress["bodyDigest"] == sha256(bytes(seen.body))
        assert egress["bodySize"] == len(seen.body)
        if seen.request.method != "GET":  # a GET stream is closed by the client, not the origin
            assert origin["bodyDigest"] == egress["bodyDigest"]
            assert origin["bodySize"] == len(seen.body)
        assert ingress["receivedAt"] <= ingress["forwardedAt"] <= origin["firstByteAt"]
        assert origin["firstByteAt"] <= origin["endAt"]
        assert egress["sentAt"] <= egress["endAt"]

    def one(method: str, name: str | None = None) -> tuple[Seen, dict[str, Any]]:
        for seen in tee.seen:
            msg = seen.message or {}
            if msg.get("method") == method and (name is None or msg["params"]["name"] == name):
                return seen, _record_for(seen, recs)
        raise AssertionError(f"no {method} {name}")

    # A tools/call answered as JSON (modern) or as SSE (legacy always streams).
    seen, rec = one("tools/call", "lookup")
    if era == "modern":
        assert rec["origin"]["contentType"] == "application/json"
        assert rec["origin"]["sse"] is None
        text = rec["origin"]["body"]["result"]["content"][0]["text"]
        assert text == "q in eu-west (known region)"
    else:
        assert rec["origin"]["contentType"] == "text/event-stream"
        assert rec["origin"]["body"] is None

    # slow_count streams: every event with its arrival time, in order, the final one last.
    seen, rec = one("tools/call", "slow_count")
    origin = rec["origin"]
    assert origin["contentType"] == "text/event-stream"
    events = origin["sse"]
    progress = [
        e["data"]["params"]["progress"]
        for e in events
        if e["data"].get("method") == "notifications/progress"
    ]
    assert progress == [1, 2, 3]
    assert events[-1]["data"]["id"] == rec["rpcId"]
    assert events[-1]["data"]["result"]["content"][0]["text"] == "counted to 3"
    times = [e["at"] for e in events]
    assert times == sorted(times)
    assert origin["firstByteAt"] <= times[0] and times[-1] <= origin["endAt"]
    assert all(e["event"] == "message" for e in events)

    # The notification: 202 and an empty body, recorded as such.
    seen, rec = one("notifications/roots/list_changed")
    assert rec["origin"]["status"] == 202 and seen.body == b""
    assert rec["egress"]["bodySize"] == 0
    assert rec["messageKind"] == "notification"

    # Findings: only genuine ones. The legacy SDK client uses the legacy era on an endpoint
    # that is not allowlisted, which is exactly `client.fallback-unproven`, once.
    found = [(r["method"], f["rule"]) for r in recs for f in r["findings"]]
    if era == "legacy" and not legacy_allowed:
        assert found == [("initialize", "client.fallback-unproven")]
        init = next(r for r in recs if r["method"] == "initialize")
        assert init["findings"][0]["boundary"] == "client"
    else:
        assert found == []


# -- in-process aiohttp origins ----------------------------------------------------------------


def _result(rpc_id: Any, text: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rpc_id,
        "result": {
            "content": [{"type": "text", "text": text}],
            "isError": False,
            "resultType": "complete",
        },
    }


async def test_compressed_body_passes_through_compressed_and_is_judged_decoded(
    tmp_path: Path, serve_app: StartApp
) -> None:
    sent: dict[str, Any] = {}

    async def handler(request: web.Request) -> web.Response:
        message = await request.json()
        sent["accept_encoding"] = request.headers.get("Accept-Encoding")
        plain = json.dumps(_result(message["id"], "squeezed " * 50)).encode()
        sent["plain"] = plain
        sent["gzip"] = gzip.compress(plain)
        return web.Response(
            body=sent["gzip"],
            headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
        )

    app = web.Application()
    app.router.add_post("/mcp", handler)
    base = await serve_app(app)
    headers, body = raw_modern_request(
        "tools/call", {"name": "echo", "arguments": {"text": "x"}}, request_id=5
    )
    async with (
        running_tap(tap_options(tmp_path, upstream=base, digest_key=TEST_DIGEST_KEY)) as tap,
        httpx.AsyncClient(timeout=_TIMEOUT) as client,
        client.stream(
            "POST", hop_url(tap), headers={**headers, "Accept-Encoding": "gzip"}, json=body
        ) as response,
    ):
        raw = b"".join([chunk async for chunk in response.aiter_raw()])
        got_encoding = response.headers.get("content-encoding")
    (rec,) = exchanges(tap)

    # The client got the origin's compressed bytes, untouched; the origin saw the client's
    # Accept-Encoding (the tap does not force identity).
    assert sent["accept_encoding"] == "gzip"
    assert got_encoding == "gzip"
    assert raw == sent["gzip"]
    assert gzip.decompress(raw) == sent["plain"]
    # Digests are over the wire bytes; the judged copy is the decoded body.
    assert rec["origin"]["bodyDigest"] == rec["egress"]["bodyDigest"] == sha256(raw)
    assert rec["origin"]["bodySize"] == len(raw)
    assert rec["origin"]["truncated"] is False
    assert rec["origin"]["body"] == json.loads(sent["plain"])
    assert rec["findings"] == []


async def test_duplicate_headers_and_order_are_kept_both_ways(
    tmp_path: Path, serve_app: StartApp
) -> None:
    seen: dict[str, Any] = {}
    response_headers = [
        ("X-Zulu", "1"),
        ("X-Dup", "one"),
        ("X-Alpha", "2"),
        ("X-Dup", "two"),
        ("Set-Cookie", "a=1"),
        ("Set-Cookie", "b=2"),
    ]

    async def handler(request: web.Request) -> web.Response:
        message = await request.json()
        seen["raw"] = [(k.decode(), v.decode()) for k, v in request.raw_headers]
        response = web.json_response(_result(message["id"], "ok"))
        for name, value in response_headers:
            response.headers.add(name, value)
        return response

    app = web.Application()
    app.router.add_post("/mcp", handler)
    base = await serve_app(app)
    headers, body = raw_modern_request("tools/call", {"name": "echo", "arguments": {"text": "x"}})
    request_headers = [
        *headers.items(),
        ("X-Req-Dup", "first"),
        ("X-Req-B", "b"),
        ("X-Req-Dup", "second"),
        ("X-Req-A", "a"),
    ]
    custom = {"x-req-dup", "x-req-b", "x-req-a"}
    mine = {k.lower() for k, _ in response_headers}
    async with (
        running_tap(tap_options(tmp_path, upstream=base, digest_key=TEST_DIGEST_KEY)) as tap,
        httpx.AsyncClient(timeout=_TIMEOUT) as client,
    ):
        response = await client.post(hop_url(tap), headers=request_headers, json=body)
    (rec,) = exchanges(tap)
    assert response.status_code == 200

    def only(pairs: Any, names: set[str]) -> list[tuple[str, str]]:
        return [(k, v) for k, v in pairs if k.lower() in names]

    expected_request = [(k, v) for k, v in request_headers if k.lower() in custom]
    assert only(seen["raw"], custom) == expected_request  # the origin got them in order
    assert only(rec["ingress"]["headers"], custom) == expected_request
    assert only(rec["ingress"]["forwardedHeaders"], custom) == expected_request
    client_got = [(k.decode(), v.decode()) for k, v in response.headers.raw]
    mine_seen = [(k, v) for k, v in response_headers if k.lower() != "set-cookie"]
    assert only(client_got, mine) == response_headers  # Set-Cookie reaches the client as is
    # In evidence, the same pairs in the same order; Set-Cookie values are redacted.
    for view in ("origin", "egress"):
        pairs = only(rec[view]["headers"], mine)
        assert [k for k, _ in pairs] == [k for k, _ in response_headers]
        assert only(pairs, {k.lower() for k, _ in mine_seen}) == mine_seen
        assert [v for k, v in pairs if k == "Set-Cookie"] == ["[REDACTED]", "[REDACTED]"]
    assert rec["findings"] == []


async def test_request_and_response_stream_through_without_buffering(
    tmp_path: Path, serve_app: StartApp
) -> None:
    """Each side waits for the other to have seen the first part: a buffering tap deadlocks."""
    headers, body = raw_modern_request(
        "tools/call", {"name": "echo", "arguments": {"text": "x" * 2000}}, request_id=9
    )
    # The origin streams a log message first: the request asks for them (logging page).
    body["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = "info"
    payload = json.dumps(body).encode()
    first_part, second_part = payload[:1000], payload[1000:]
    origin_has_first_part = asyncio.Event()
    client_has_first_event = asyncio.Event()
    progress = {
        "jsonrpc": "2.0",
        "method": "notifications/message",
        "params": {"level": "info", "data": "working"},
    }
    chunks_at_origin: list[bytes] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        async for chunk in request.content.iter_any():
            chunks_at_origin.append(chunk)
            if sum(map(len, chunks_at_origin)) >= len(first_part):
                origin_has_first_part.set()
        message = json.loads(b"".join(chunks_at_origin))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(f"event: message\ndata: {json.dumps(progress)}\n\n".encode())
        await client_has_first_event.wait()
        final = json.dumps(_result(message["id"], "done"))
        await response.write(f"event: message\ndata: {final}\n\n".encode())
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/mcp", handler)
    base = await serve_app(app)

    async def request_body() -> AsyncIterator[bytes]:
        yield first_part
        await origin_has_first_part.wait()  # the origin read it while the body is unfinished
        yield second_part

    received = bytearray()
    async with (
        running_tap(tap_options(tmp_path, upstream=base, digest_key=TEST_DIGEST_KEY)) as tap,
        asyncio.timeout(_TIMEOUT),  # a deadlock guard, not a timing assertion
        httpx.AsyncClient(timeout=_TIMEOUT) as client,
        client.stream("POST", hop_url(tap), headers=headers, content=request_body()) as response,
    ):
        async for chunk in response.aiter_raw():
            received.extend(chunk)
            if b"\n\n" in received:
                # The first event is here while the origin still holds the second.
                client_has_first_event.set()
    (rec,) = exchanges(tap)

    assert origin_has_first_part.is_set() and client_has_first_event.is_set()
    assert b"".join(chunks_at_origin) == payload
    assert rec["ingress"]["bodyDigest"] == sha256(payload)
    assert rec["ingress"]["body"] == body
    assert rec["egress"]["bodyDigest"] == sha256(bytes(received))
    events = rec["origin"]["sse"]
    assert [e["data"].get("method") for e in events] == ["notifications/message", None]
    assert events[1]["data"]["result"]["content"][0]["text"] == "done"
    # The second event came after the client had the first: the recorded times show it.
    assert events[0]["at"] < events[1]["at"]
    assert rec["findings"] == []
