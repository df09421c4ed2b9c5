"""Any JSON is recordable: deep nesting, huge numbers, invalid UTF-8, through the real proxy.

orjson writes at most 254 levels and parses at most 1024; a body between those used to become
an "unserialisable record" gap that failed ``verify`` for the whole bundle. Each shape here
crosses the tap byte for byte, is recorded (redacted: the secret at the bottom is gone) as one
exchange record, and the bundle verifies.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import pytest
from aiohttp import web
from taps import hop_url, records, running_tap, tap_options

from mcp_tap.cli import main
from mcp_tap.evidence import read_bundle

StartApp = Callable[[web.Application], Awaitable[str]]
SECRET = "s3cr3t-at-the-bottom-91c0"


def _deep(depth: int) -> bytes:
    """A JSON-RPC request whose arguments nest ``depth`` objects with a token at the bottom."""
    inner = '{"a":' * depth + f'{{"token":"{SECRET}"}}' + "}" * depth
    return ('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":'
            + inner + "}}").encode()


def _echo_origin() -> web.Application:
    """Answers with the request body as the result (JSON), or as SSE data when asked."""

    async def handler(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        answer = b'{"jsonrpc":"2.0","id":1,"result":' + body + b"}"
        if request.headers.get("X-As") == "sse":
            stream = b"event: message\ndata: " + answer + b"\n\n"
            return web.Response(body=stream, content_type="text/event-stream")
        return web.Response(body=answer, content_type="application/json")

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/mcp", handler)
    return app


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(_deep(250), id="deep-250"),
        pytest.param(_deep(1000), id="deep-1000"),  # orjson parses it, cannot write it
        pytest.param(_deep(5000), id="deep-5000"),
        pytest.param(_deep(100000), id="deep-100000"),
        pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"n":1e400,"m":'
                     + b"9" * 400 + b',"token":"' + SECRET.encode() + b'"}}', id="huge-numbers"),
        pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"s":"\xff\xfe",'
                     b'"token":"' + SECRET.encode() + b'"}}', id="invalid-utf8"),
    ],
)
@pytest.mark.parametrize("shape", ["json", "sse"])
async def test_any_json_is_recorded_redacted_and_the_bundle_verifies(
    tmp_path: Path, serve_app: StartApp, capsys: pytest.CaptureFixture[str], body: bytes,
    shape: str,
) -> None:
    base = await serve_app(_echo_origin())
    evidence = tmp_path / "evidence"
    opts = tap_options(evidence, upstream=base)
    async with running_tap(opts) as tap, httpx.AsyncClient(timeout=60) as client:
        answer = await client.post(
            hop_url(tap), content=body,
            headers={"Content-Type": "application/json", "X-As": shape,
                     "Accept": "application/json, text/event-stream"})
        recs = records(tap)

    # Byte for byte through the tap.
    assert answer.status_code == 200
    expected = b'{"jsonrpc":"2.0","id":1,"result":' + body + b"}"
    assert answer.content == (expected if shape == "json" else
                              b"event: message\ndata: " + expected + b"\n\n")
    # One exchange record, no gap, the secret nowhere, and the bundle verifies.
    assert [r["kind"] for r in recs] == ["exchange"]
    (bundle,) = [p for p in evidence.iterdir() if p.is_dir()]
    for path in bundle.iterdir():
        assert SECRET.encode() not in path.read_bytes(), path
    capsys.readouterr()
    assert main(["verify", str(bundle)]) == 0
    assert capsys.readouterr().out.startswith("ok: ")
    (rec,) = read_bundle(bundle).records
    ingress = rec["ingress"]
    assert ingress["bodySize"] == len(body)
    assert "raw" in ingress["body"] or "params" in ingress["body"]
    if body in (_deep(250), _deep(1000)):  # parsed and redacted structurally, stored as text
        assert ingress["bodyNote"].startswith("JSON nested ")
        assert ingress["body"]["raw"] == body.decode().replace(SECRET, "[REDACTED]")
        origin = rec["origin"]
        note = origin.get("bodyNote") if shape == "json" else origin["sse"][0].get("note")
        assert note is not None and note.startswith("JSON nested ")
