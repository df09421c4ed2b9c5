"""Redaction: secrets cross the tap untouched, and never reach the evidence files or the logs.

An in-process aiohttp origin echoes secrets back in ``Set-Cookie``, in JSON body fields and
inside SSE event data; the client sends them in ``Authorization``, ``Cookie``,
``X-Api-Key``, the query string and a ``password`` argument. Every byte under the evidence
directory and every captured log line is searched for every secret.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog
from aiohttp import web
from peers import parse_sse, raw_modern_request, sdk_call_tool
from taps import exchanges, hop_url, running_tap, tap_options

from mcp_tap.core.redaction import ArgumentPolicy, RedactionPolicy
from mcp_tap.logs import configure_logging

StartApp = Callable[[web.Application], Awaitable[str]]  # the `serve_app` fixture

# Distinct, greppable secrets: one per place a secret can travel.
SECRETS = {
    name: f"s3cr3t-{name}-7f41c2d9"
    for name in (
        "bearer",
        "cookie",
        "xapikey",
        "query",
        "password",  # client -> origin
        "setcookie",
        "apikey",
        "accesstoken",
        "ssekey",
        "ssetext",  # origin -> client
        "ssepassword",
        "notification",
        "mirrored",  # an argument mirrored as Mcp-Param-ApiKey ...
        "mirroredheader",  # ... and the header disagreeing with it
    )
}


@pytest.fixture
def captured_logs(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> Iterator[Callable[[], str]]:
    """mcp-tap's own JSON logging (as `mcp-tap proxy` configures it, redaction processor
    included) into a buffer, plus stdlib logging and anything printed."""
    previous = structlog.get_config()
    caplog.set_level(logging.DEBUG)
    configure_logging("debug")
    buffer = io.StringIO()
    # Only the sink changes: configure_logging binds sys.stderr, which pytest swaps per phase.
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=buffer))

    def text() -> str:
        # The tap's stack only: the test's own httpx client logs the secrets it sends.
        ours = [
            caplog.handler.format(r)
            for r in caplog.records
            if r.name.split(".")[0] in ("mcp_tap", "aiohttp", "asyncio")
        ]
        return "\n".join([buffer.getvalue(), *capsys.readouterr(), *ours])

    try:
        yield text
    finally:
        structlog.configure(**previous)


def _every_byte(root: Path) -> dict[Path, bytes]:
    files = {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
    assert files, f"no evidence under {root}"
    return files


def _assert_nowhere(secrets: list[str], files: dict[Path, bytes], logs: str) -> None:
    for secret in secrets:
        for path, data in files.items():
            assert secret.encode() not in data, f"{secret} leaked into {path}"
        assert secret not in logs, f"{secret} leaked into the logs"


def _sse(data: str) -> bytes:
    return f"event: message\ndata: {data}\n\n".encode()


def _secret_origin(seen: list[dict[str, Any]]) -> web.Application:
    s = SECRETS

    async def handler(request: web.Request) -> web.StreamResponse:
        message = await request.json()
        seen.append(
            {"headers": dict(request.headers), "query": dict(request.query), "message": message}
        )
        if "id" not in message:
            # A notification answered with a body: the finding quotes the body it got.
            return web.json_response({"access_token": s["notification"]}, status=200)
        if message["method"] == "tools/list":
            login = {
                "name": "login",
                "description": "Log in with an API key (mirrored as Mcp-Param-ApiKey).",
                "inputSchema": {
                    "type": "object",
                    "properties": {"apiKey": {"type": "string", "x-mcp-header": "ApiKey"}},
                },
            }
            listing = {"tools": [login], "ttlMs": 0, "cacheScope": "private"}
            return web.json_response(
                {
                    "jsonrpc": "2.0",
                    "id": message["id"],
                    "result": {**listing, "resultType": "complete"},
                }
            )
        tool = message["params"]["name"]
        result = {
            "content": [{"type": "text", "text": "ok"}],
            "isError": False,
            "resultType": "complete",
        }
        if tool == "login":  # a conforming server rejects the disagreeing header
            error = {"code": -32020, "message": "Mcp-Param-ApiKey does not match"}
            answer = {"jsonrpc": "2.0", "id": message["id"], "error": error}
            return web.json_response(answer, status=400)
        if tool == "json":
            result["structuredContent"] = {"apiKey": s["apikey"], "access_token": s["accesstoken"]}
            response = web.json_response({"jsonrpc": "2.0", "id": message["id"], "result": result})
            response.headers.add("Set-Cookie", f"session={s['setcookie']}; HttpOnly")
            return response
        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        stream.headers.add("Set-Cookie", f"session={s['setcookie']}; Path=/")
        await stream.prepare(request)
        log_event = {
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "info", "data": {"apiKey": s["ssekey"]}},
        }
        await stream.write(_sse(json.dumps(log_event)))
        await stream.write(_sse(f"token={s['ssetext']}"))  # not JSON: sse.event quotes it
        result["structuredContent"] = {"password": s["ssepassword"]}
        final = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        await stream.write(_sse(json.dumps(final)))
        await stream.write_eof()
        return stream

    app = web.Application()
    app.router.add_post("/mcp", handler)
    return app


async def test_secrets_never_reach_evidence_or_logs_and_still_reach_the_peers(
    tmp_path: Path, serve_app: StartApp, captured_logs: Callable[[], str]
) -> None:
    s = SECRETS
    seen: list[dict[str, Any]] = []
    base = await serve_app(_secret_origin(seen))
    evidence = tmp_path / "evidence"
    credentials = {
        "Authorization": f"Bearer {s['bearer']}",
        "Cookie": f"sid={s['cookie']}",
        "X-Api-Key": s["xapikey"],
    }

    def call(tool: str, request_id: int) -> tuple[dict[str, str], dict[str, Any]]:
        headers, body = raw_modern_request(
            "tools/call",
            {"name": tool, "arguments": {"user": "ada", "password": s["password"]}},
            request_id=request_id,
        )
        return {**headers, **credentials}, body

    async with (
        running_tap(tap_options(evidence, upstream=base)) as tap,
        httpx.AsyncClient(timeout=30) as client,
    ):
        url = hop_url(tap, path=f"/mcp?api_key={s['query']}&region=eu")
        as_json = await client.post(url, headers=call("json", 1)[0], json=call("json", 1)[1])
        as_sse = await client.post(url, headers=call("sse", 2)[0], json=call("sse", 2)[1])
        n_headers, n_body = raw_modern_request("notifications/roots/list_changed", request_id=None)
        notified = await client.post(url, headers={**n_headers, **credentials}, json=n_body)
        # A mirrored secret argument whose header disagrees: the finding must not quote either.
        l_headers, l_body = raw_modern_request("tools/list", request_id=3)
        listed = await client.post(url, headers={**l_headers, **credentials}, json=l_body)
        c_headers, c_body = raw_modern_request(
            "tools/call",
            {"name": "login", "arguments": {"apiKey": s["mirrored"]}},
            request_id=4,
            param_headers={"ApiKey": s["mirroredheader"]},
        )
        logged_in = await client.post(url, headers={**c_headers, **credentials}, json=c_body)
    recs = exchanges(tap)
    logs = captured_logs()

    # Transparency: every secret reached its peer unchanged.
    for request in seen:
        assert request["headers"]["Authorization"] == f"Bearer {s['bearer']}"
        assert request["headers"]["Cookie"] == f"sid={s['cookie']}"
        assert request["headers"]["X-Api-Key"] == s["xapikey"]
        assert request["query"]["api_key"] == s["query"]
    assert seen[0]["message"]["params"]["arguments"]["password"] == s["password"]
    assert as_json.headers["set-cookie"] == f"session={s['setcookie']}; HttpOnly"
    assert as_json.json()["result"]["structuredContent"] == {
        "apiKey": s["apikey"],
        "access_token": s["accesstoken"],
    }
    events = parse_sse(as_sse.text)
    assert as_sse.headers["set-cookie"] == f"session={s['setcookie']}; Path=/"
    assert events[0]["data"]["params"]["data"] == {"apiKey": s["ssekey"]}
    assert events[1]["data"] == f"token={s['ssetext']}"
    assert events[2]["data"]["result"]["structuredContent"] == {"password": s["ssepassword"]}
    assert notified.json() == {"access_token": s["notification"]}

    assert (listed.status_code, logged_in.status_code) == (200, 400)
    assert seen[-1]["headers"]["Mcp-Param-ApiKey"] == s["mirroredheader"]

    # The evidence is there and says what happened, with the secrets replaced.
    assert len(recs) == 5
    first, second, third, _, fifth = recs
    ingress = dict(first["ingress"]["headers"])
    assert ingress["Authorization"] == "Bearer [REDACTED]"
    assert ingress["Cookie"] == ingress["X-Api-Key"] == "[REDACTED]"
    assert first["ingress"]["body"]["params"]["arguments"] == {
        "user": "ada",
        "password": "[REDACTED]",
    }
    assert "region=eu" in first["ingress"]["path"]
    assert ["set-cookie", "[REDACTED]"] in [[k.lower(), v] for k, v in first["origin"]["headers"]]
    assert first["origin"]["body"]["result"]["structuredContent"] == {
        "apiKey": "[REDACTED]",
        "access_token": "[REDACTED]",
    }
    sse = second["origin"]["sse"]
    assert len(sse) == 3
    assert sse[0]["data"]["params"]["data"] == {"apiKey": "[REDACTED]"}
    assert sse[2]["data"]["result"]["structuredContent"] == {"password": "[REDACTED]"}
    assert "sse.event" in [f["rule"] for f in second["findings"]]
    assert "notification.response" in [f["rule"] for f in third["findings"]]
    assert [f["rule"] for f in fifth["findings"]] == ["request.header.mismatch"]
    assert fifth["findings"][0]["message"].startswith("Mcp-Param-ApiKey: ")
    assert ["Mcp-Param-ApiKey", "[REDACTED]"] in fifth["ingress"]["headers"]
    assert '"exchange"' in logs  # the logs were really captured

    _assert_nowhere(list(s.values()), _every_byte(evidence), logs)


async def test_argument_policy_hides_a_configured_argument(
    tmp_path: Path, origin_base: str, captured_logs: Callable[[], str]
) -> None:
    secret = "s3cr3t-lookup-query-0b9e"
    policy = RedactionPolicy(argument_policies=(ArgumentPolicy("tools/call", "lookup", "query"),))
    opts = replace(tap_options(tmp_path, upstream=origin_base), redaction=policy)
    async with running_tap(opts) as tap:
        result = await sdk_call_tool(
            hop_url(tap), "modern", "lookup", {"region": "eu-west", "query": secret}
        )
        echoed = await sdk_call_tool(hop_url(tap), "modern", "echo", {"text": "visible"})
    recs = exchanges(tap)
    logs = captured_logs()

    # The origin got the value (its answer echoes it) and the client got that answer.
    assert result["content"][0]["text"] == f"{secret} in eu-west (known region)"
    assert echoed["content"][0]["text"] == "visible"
    (call,) = [
        r
        for r in recs
        if r["method"] == "tools/call" and r["ingress"]["body"]["params"]["name"] == "lookup"
    ]
    arguments = call["ingress"]["body"]["params"]["arguments"]
    assert arguments == {"region": "eu-west", "query": "[REDACTED]"}
    # The policy is narrow: the mirrored region and other tools' arguments stay visible.
    headers = [[k.lower(), v] for k, v in call["ingress"]["headers"]]
    assert ["mcp-param-region", "eu-west"] in headers
    (other,) = [
        r
        for r in recs
        if r["method"] == "tools/call" and r["ingress"]["body"]["params"]["name"] == "echo"
    ]
    assert other["ingress"]["body"]["params"]["arguments"] == {"text": "visible"}
    # The request side never shows it. (The origin echoing it in its result text is content
    # the policy does not cover: argument policies apply to requests.)
    assert secret not in json.dumps(call["ingress"])
    assert secret not in logs
