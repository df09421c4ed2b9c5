"""Raw negative requests through the tap, and the tap's own failures.

Raw ``httpx`` requests go through an in-process tap to the real SDK origin: each one is
forwarded untouched, answered by the SDK, and recorded with the exact rule id and code.
Then the tap's own failures: an unreachable, silent or resetting upstream, and a check that
raises; none of them may break the traffic or go unrecorded.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn

import httpx
import pytest
from aiohttp import web
from peers import free_port, modern_meta, raw_modern_request
from taps import exchanges, hop_url, running_tap, tap_options

from mcp_tap.proxy import recorder
from mcp_tap.proxy.options import TapOptions, UpstreamOptions
from mcp_tap.proxy.splice.answers import TAP_ERROR_HEADER

StartApp = Callable[[web.Application], Awaitable[str]]  # the `serve_app` fixture
Headers = list[tuple[str, str]] | list[tuple[bytes, bytes]]

_TIMEOUT = 30.0


async def _until(condition: Callable[[], bool]) -> None:
    """Wait for the tap to account for what it forwarded: a client can hold its whole
    answer a moment before the tap's handler records the exchange."""
    async with asyncio.timeout(_TIMEOUT):  # a hang guard, not a timing assertion
        while not condition():
            await asyncio.sleep(0.01)


def _findings(rec: dict[str, Any]) -> list[tuple[str, int | None]]:
    return [(f["rule"], f.get("code")) for f in rec["findings"]]


def _error(response: httpx.Response) -> tuple[int, Any, int | None]:
    """Status, JSON-RPC id and error code (``None`` for a result) of a JSON answer."""
    body = response.json()
    return response.status_code, body["id"], body["error"]["code"] if "error" in body else None


async def _send(url: str, headers: Headers, content: bytes) -> httpx.Response:
    async with httpx.AsyncClient(timeout=_TIMEOUT) as client:
        return await client.post(url, headers=headers, content=content)


def _pairs(headers: dict[str, str], **replace: str | None) -> list[tuple[str, str]]:
    """Headers as pairs, with some replaced (same position) or dropped (``None``)."""
    out = []
    for name, value in headers.items():
        new = replace.get(name.replace("-", "_"), value)
        if new is not None:
            out.append((name, new))
    return out


def _tools_list(request_id: Any = 1, **kw: Any) -> tuple[dict[str, str], dict[str, Any]]:
    return raw_modern_request("tools/list", request_id=request_id, **kw)


# Each case: (name, headers, body bytes, expected (status, id, code) from the SDK,
# expected findings in order).
def _cases() -> list[tuple[str, Headers, bytes, tuple[int, Any, int | None], list[Any]]]:
    cases: list[tuple[str, Headers, bytes, tuple[int, Any, int | None], list[Any]]] = []

    headers, body = _tools_list(7)
    cases.append(
        (
            "header-mismatch",
            _pairs(headers, Mcp_Method="tools/call"),
            json.dumps(body).encode(),
            (400, 7, -32020),
            # The SDK answers 400/-32020 with the id, so no response-side finding.
            [("request.header.mismatch", -32020)],
        )
    )

    headers, body = _tools_list(8, meta=modern_meta(protocol_version="2099-01-01"))
    cases.append(
        (
            "version-unsupported",
            _pairs(headers, MCP_Protocol_Version="2099-01-01"),
            json.dumps(body).encode(),
            (400, 8, -32022),
            [("request.version.unsupported", -32022)],
        )
    )

    meta = modern_meta()
    del meta["io.modelcontextprotocol/clientCapabilities"]
    headers, body = _tools_list("nine", meta=meta)
    cases.append(
        (
            "meta-missing",
            _pairs(headers),
            json.dumps(body).encode(),
            (400, "nine", -32602),
            [("request.meta.missing", -32602)],
        )
    )

    headers, body = _tools_list(10)
    body["id"] = True
    cases.append(
        (
            "bad-id-type",
            _pairs(headers),
            json.dumps(body).encode(),
            (400, None, -32600),
            [("request.envelope", -32600)],
        )
    )

    headers, _ = _tools_list(11)
    cases.append(
        (
            "not-json",
            _pairs(headers),
            b'{"jsonrpc": "2.0", "id": 11, "method": ',
            (400, None, -32700),
            [("request.parse", -32700)],
        )
    )

    headers, body = _tools_list(12)
    cases.append(
        (
            "duplicate-mcp-method",
            [*_pairs(headers), ("Mcp-Method", "tools/call")],
            json.dumps(body).encode(),
            (400, 12, -32020),
            [("request.header.duplicate", -32020)],
        )
    )

    # Raw UTF-8 bytes in Mcp-Name, not the sentinel encoding. The SDK reads header bytes as
    # latin-1 and accepts a raw value equal to the body (sdk-notes 10.3), so a body name equal
    # to the latin-1 reading is answered 200 only if the tap forwards the bytes untouched.
    raw_name = "z\u00fcri".encode()
    headers, body = raw_modern_request(
        "tools/call", {"name": raw_name.decode("latin-1"), "arguments": {}}, request_id=13
    )
    raw = [(k.encode(), v.encode()) for k, v in headers.items() if k != "Mcp-Name"]
    cases.append(
        (
            "raw-non-ascii-mcp-name",
            [*raw, (b"Mcp-Name", raw_name)],
            json.dumps(body).encode(),
            (200, 13, None),
            # Genuine SDK finding too: the rules owe a raw unsafe value 400/-32020.
            [("request.header.encoding", -32020), ("response.header-mismatch-unanswered", -32020)],
        )
    )

    headers, body = _tools_list(14)
    cases.append(
        (
            "missing-protocol-version",
            _pairs(headers, MCP_Protocol_Version=None),
            json.dumps(body).encode(),
            # The SDK routes it to its legacy transport: 400/-32600 "Missing session ID", id null.
            (400, None, -32600),
            # A server MAY treat a request without the header as 2025-03-26 (streamable-http
            # "Protocol Version Header"): that refusal is no finding, only the request is.
            [("request.header.missing", -32020)],
        )
    )
    return cases


CASES = _cases()


async def test_raw_negative_requests_are_each_recorded_with_the_right_rule(
    tmp_path: Path, origin_url: str, origin_base: str
) -> None:
    direct = [await _send(origin_url, headers, content) for _, headers, content, _, _ in CASES]
    async with running_tap(tap_options(tmp_path, upstream=origin_base)) as tap:
        through = [
            await _send(hop_url(tap), headers, content) for _, headers, content, _, _ in CASES
        ]
    recs = exchanges(tap)
    assert len(recs) == len(CASES)
    for (name, _, content, answer, expected), got, ref, rec in zip(
        CASES, through, direct, recs, strict=True
    ):
        # The tap forwarded the request as is and the client got the SDK's own answer.
        assert _error(got) == answer, name
        assert (got.status_code, got.content) == (ref.status_code, ref.content), name
        assert TAP_ERROR_HEADER not in got.headers, name
        assert rec["tapError"] is None, name
        assert rec["era"] == "modern", name
        assert rec["origin"]["status"] == rec["egress"]["status"] == answer[0], name
        assert rec["ingress"]["bodySize"] == len(content), name
        assert _findings(rec) == expected, name
    # The raw Mcp-Name bytes reached the evidence (latin-1 decoded, byte for byte).
    encoding = recs[[c[0] for c in CASES].index("raw-non-ascii-mcp-name")]
    raw_name = "z\u00fcri".encode().decode("latin-1")
    assert ["Mcp-Name", raw_name] in encoding["ingress"]["headers"]
    assert ["Mcp-Name", raw_name] in encoding["ingress"]["forwardedHeaders"]


async def test_param_header_mismatch_is_found_once_tools_list_taught_the_schema(
    tmp_path: Path, origin_base: str
) -> None:
    def lookup(request_id: int) -> tuple[list[tuple[str, str]], bytes]:
        headers, body = raw_modern_request(
            "tools/call",
            {"name": "lookup", "arguments": {"region": "eu-west", "query": "q"}},
            request_id=request_id,
            param_headers={"Region": "us-east"},
        )
        return _pairs(headers), json.dumps(body).encode()

    async with running_tap(tap_options(tmp_path, upstream=origin_base)) as tap:
        url = hop_url(tap)
        before = await _send(url, *lookup(1))
        headers, body = _tools_list(2)
        listed = await _send(url, _pairs(headers), json.dumps(body).encode())
        after = await _send(url, *lookup(3))
    first, listing, second = exchanges(tap)

    assert _error(before) == (400, 1, -32020)
    assert _error(after) == (400, 3, -32020)
    assert listed.status_code == 200
    region = listing["origin"]["body"]["result"]["tools"]
    assert any(t["name"] == "lookup" for t in region)
    # Before the listing the tap cannot know `region` is mirrored: it claims nothing.
    assert _findings(first) == []
    assert _findings(listing) == []
    assert _findings(second) == [("request.header.mismatch", -32020)]
    assert "Mcp-Param-Region" in second["findings"][0]["message"]


async def _forward_raw_header(
    evidence: Path, serve_app: StartApp, value: bytes
) -> tuple[bytes, dict[str, Any]]:
    """Send ``X-Raw: value`` through a tap; return the bytes the origin got and the record."""
    got: dict[str, bytes] = {}

    async def handler(request: web.Request) -> web.Response:
        got.update((k.decode("latin-1"), v) for k, v in request.raw_headers if k == b"X-Raw")
        return web.Response(status=202)

    app = web.Application()
    app.router.add_post("/mcp", handler)
    base = await serve_app(app)
    headers, body = raw_modern_request("notifications/roots/list_changed", request_id=None)
    raw = [(k.encode(), v.encode()) for k, v in headers.items()]
    async with running_tap(tap_options(evidence, upstream=base)) as tap:
        response = await _send(hop_url(tap), [*raw, (b"X-Raw", value)], json.dumps(body).encode())
    assert response.status_code == 202
    (rec,) = exchanges(tap)
    return got["X-Raw"], rec


async def test_non_utf8_header_bytes_are_recorded_as_really_forwarded(
    tmp_path: Path, serve_app: StartApp
) -> None:
    got, rec = await _forward_raw_header(tmp_path, serve_app, b"z\xfcri")
    ingress = dict((k, v) for k, v in rec["ingress"]["headers"] if k == "X-Raw")
    forwarded = dict((k, v) for k, v in rec["ingress"]["forwardedHeaders"] if k == "X-Raw")
    assert ingress["X-Raw"].encode("latin-1") == b"z\xfcri"  # what the client sent
    assert forwarded["X-Raw"].encode("latin-1") == got  # what the origin really got


async def test_non_utf8_header_bytes_pass_untouched(tmp_path: Path, serve_app: StartApp) -> None:
    got, _ = await _forward_raw_header(tmp_path, serve_app, b"z\xfcri")
    assert got == b"z\xfcri"


async def test_utf8_header_bytes_pass_untouched(tmp_path: Path, serve_app: StartApp) -> None:
    value = "z\u00fcri \u20ac".encode()
    got, rec = await _forward_raw_header(tmp_path, serve_app, value)
    assert got == value
    forwarded = [v for k, v in rec["ingress"]["forwardedHeaders"] if k == "X-Raw"]
    assert [v.encode("latin-1") for v in forwarded] == [value]


# -- the tap's own failures ------------------------------------------------------------------


def _valid_call(request_id: int = 1) -> tuple[dict[str, str], bytes]:
    headers, body = raw_modern_request(
        "tools/call", {"name": "echo", "arguments": {"text": "hi"}}, request_id=request_id
    )
    return headers, json.dumps(body).encode()


async def test_refused_upstream_gets_502_with_tap_error_header(tmp_path: Path) -> None:
    upstream = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    headers, content = _valid_call()
    async with running_tap(tap_options(tmp_path, upstream=upstream)) as tap:
        response = await _send(hop_url(tap), list(headers.items()), content)
        metrics = tap.metrics
    (rec,) = exchanges(tap)

    assert response.status_code == 502
    assert response.headers[TAP_ERROR_HEADER] == "upstream-unreachable"
    assert response.json() == {"tap": "mcp-tap", "hop": "tap", "error": "upstream-unreachable"}
    assert rec["tapError"]["status"] == 502
    assert rec["tapError"]["phase"] == "upstream-unreachable"
    assert rec["origin"] is None
    assert rec["egress"]["status"] == 502
    assert rec["ingress"]["bodySize"] == len(content)
    assert [f["rule"] for f in rec["findings"]] == ["tap.upstream-failure"]
    assert rec["findings"][0]["boundary"] == "tap"
    assert metrics.tap_errors.value(hop="tap", reason="upstream-unreachable") == 1


async def test_silent_upstream_gets_504_after_the_idle_timeout(
    tmp_path: Path, serve_app: StartApp
) -> None:
    release = asyncio.Event()
    arrived = asyncio.Event()

    async def silent(request: web.Request) -> web.Response:
        arrived.set()
        await release.wait()
        return web.Response(status=204)

    app = web.Application()
    app.router.add_post("/mcp", silent)
    base = await serve_app(app)
    headers, content = _valid_call()
    opts = _idle_tap(tmp_path, base)
    try:
        async with running_tap(opts) as tap:
            response = await _send(hop_url(tap), list(headers.items()), content)
    finally:
        release.set()
    (rec,) = exchanges(tap)

    assert arrived.is_set()
    assert response.status_code == 504
    assert response.headers[TAP_ERROR_HEADER] == "upstream-timeout"
    assert rec["tapError"]["status"] == 504
    assert rec["tapError"]["phase"] == "upstream-timeout"
    assert [f["rule"] for f in rec["findings"]] == ["tap.upstream-failure"]


def _idle_tap(evidence: Path, base: str) -> TapOptions:
    # `tap_options(upstream=...)` is the upstream URL, so the [upstream] section is replaced.
    opts = tap_options(evidence, upstream=base)
    return replace(opts, upstream=UpstreamOptions(idle_timeout_s=0.5))


def _sse(message: dict[str, Any]) -> bytes:
    return f"event: message\ndata: {json.dumps(message)}\n\n".encode()


_PROGRESS = {
    "jsonrpc": "2.0",
    "method": "notifications/message",
    "params": {"level": "info", "data": "step 1"},
}


async def _stream_until_broken(url: str) -> tuple[bytearray, BaseException | None]:
    headers, content = _valid_call()
    received = bytearray()
    async with httpx.AsyncClient(timeout=_TIMEOUT) as client:
        try:
            async with client.stream("POST", url, headers=headers, content=content) as response:
                assert response.status_code == 200
                async for chunk in response.aiter_raw():
                    received.extend(chunk)
        except httpx.TransportError as exc:
            return received, exc
    return received, None


async def test_upstream_reset_mid_stream_breaks_the_client_stream_and_is_recorded(
    tmp_path: Path, serve_app: StartApp
) -> None:
    async def resetting(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(_sse(_PROGRESS))
        assert request.transport is not None
        request.transport.abort()  # no final event, no end of the chunked body
        return response

    app = web.Application()
    app.router.add_post("/mcp", resetting)
    base = await serve_app(app)
    async with running_tap(tap_options(tmp_path, upstream=base)) as tap:
        received, error = await _stream_until_broken(hop_url(tap))
    (rec,) = exchanges(tap)

    # The client got what the origin sent, then a broken stream (not a clean end).
    assert bytes(received) == _sse(_PROGRESS)
    assert isinstance(error, httpx.RemoteProtocolError)
    assert rec["tapError"]["phase"] == "upstream-reset"
    assert rec["tapError"]["status"] is None  # the origin's 200 was already sent
    assert rec["origin"]["status"] == rec["egress"]["status"] == 200
    assert [e["data"] for e in rec["origin"]["sse"]] == [_PROGRESS]
    assert "tap.upstream-failure" in [f["rule"] for f in rec["findings"]]


async def test_upstream_idle_mid_stream_breaks_the_client_stream_and_is_recorded(
    tmp_path: Path, serve_app: StartApp
) -> None:
    release = asyncio.Event()

    async def stalling(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(_sse(_PROGRESS))
        await release.wait()
        return response

    app = web.Application()
    app.router.add_post("/mcp", stalling)
    base = await serve_app(app)
    opts = _idle_tap(tmp_path, base)
    try:
        async with running_tap(opts) as tap:
            received, error = await _stream_until_broken(hop_url(tap))
    finally:
        release.set()
    (rec,) = exchanges(tap)

    assert bytes(received) == _sse(_PROGRESS)
    assert isinstance(error, httpx.RemoteProtocolError)
    assert rec["tapError"]["phase"] == "upstream-idle-timeout"
    assert "tap.upstream-failure" in [f["rule"] for f in rec["findings"]]


async def test_a_check_that_raises_never_breaks_forwarding(
    tmp_path: Path, origin_url: str, origin_base: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_judge(*_: Any, **__: Any) -> NoReturn:
        raise RuntimeError("a bug in a check")

    monkeypatch.setattr(recorder, "judge", broken_judge)
    headers, body = _tools_list(21)
    content = json.dumps(body).encode()
    direct = await _send(origin_url, list(headers.items()), content)
    async with running_tap(tap_options(tmp_path, upstream=origin_base, admin=True)) as tap:
        through = await _send(hop_url(tap), list(headers.items()), content)
        await _until(lambda: tap.metrics.check_errors.value(hop="tap") >= 1)
        assert tap.admin_address is not None
        host, port = tap.admin_address
        async with httpx.AsyncClient(timeout=_TIMEOUT) as client:
            metrics = (await client.get(f"http://{host}:{port}/metrics")).text
    (rec,) = exchanges(tap)

    assert through.status_code == direct.status_code == 200
    assert through.content == direct.content  # forwarded unchanged, byte for byte
    assert through.headers["content-type"] == direct.headers["content-type"]
    assert [f["rule"] for f in rec["findings"]] == ["tap.internal-error"]
    assert "RuntimeError" in rec["findings"][0]["message"]
    assert rec["tapError"] is None
    assert rec["egress"]["status"] == 200
    assert 'mcptap_check_errors_total{hop="tap"} 1.0\n' in metrics
    assert 'mcptap_findings_total{hop="tap",rule="tap.internal-error"} 1.0\n' in metrics
