"""The real MCP Python SDK (mcp==2.3.0) as a peer: the demo origin and the SDK client, on loopback.

These tests pin the wire behaviour that docs/sdk-notes.md describes and that the
conformance rules are built on. No mocks: a real origin subprocess, real HTTP.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from peers import (
    LEGACY_VERSION,
    MODERN_VERSION,
    Era,
    free_port,
    modern_meta,
    parse_sse,
    raw_modern_headers,
    raw_modern_request,
    run_origin,
    sdk_call_tool,
    sdk_list_tools,
    sdk_send_notification,
)

ERAS: tuple[Era, ...] = ("modern", "legacy")
REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def origin() -> Iterator[str]:
    """One demo origin subprocess for the whole module."""
    with run_origin() as url:
        yield url


def _post(url: str, headers: dict[str, str], body: Any) -> httpx.Response:
    with httpx.Client(timeout=30) as client:
        return client.post(url, headers=headers, json=body)


# --- the origin process -----------------------------------------------------------------


def test_origin_prints_ready_line_and_exits_zero_on_sigterm() -> None:
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcp_tap.demo.origin", "--listen", f"127.0.0.1:{port}"],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        assert line == f"origin listening on http://127.0.0.1:{port}/mcp\n"
        # It really listens once the line is out.
        headers, body = raw_modern_request("server/discover")
        assert _post(f"http://127.0.0.1:{port}/mcp", headers, body).status_code == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def test_origin_discover_names_modern_version_and_server(origin: str) -> None:
    headers, body = raw_modern_request("server/discover", request_id=7)
    response = _post(origin, headers, body)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    message = response.json()
    assert message["id"] == 7
    result = message["result"]
    assert result["supportedVersions"] == [MODERN_VERSION]
    assert result["resultType"] == "complete"
    assert result["ttlMs"] == 0
    assert result["cacheScope"] == "private"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "mcp-tap-demo-origin"
    assert {"tools", "prompts", "resources", "completions"} <= set(result["capabilities"])


# --- the SDK client in both eras ------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
async def test_sdk_client_lists_the_demo_tools(origin: str, era: Era) -> None:
    result = await sdk_list_tools(origin, era)
    tools = {tool["name"]: tool for tool in result["tools"]}
    assert set(tools) == {"echo", "add", "lookup", "slow_count"}
    region = tools["lookup"]["inputSchema"]["properties"]["region"]
    assert region["x-mcp-header"] == "Region"
    assert all(tool["inputSchema"]["type"] == "object" for tool in tools.values())


@pytest.mark.parametrize("era", ERAS)
async def test_sdk_client_calls_echo(origin: str, era: Era) -> None:
    result = await sdk_call_tool(origin, era, "echo", {"text": "héllo, tap"})
    assert result["isError"] is False
    assert result["content"] == [{"type": "text", "text": "héllo, tap"}]
    assert result["structuredContent"] == {"result": "héllo, tap"}


@pytest.mark.parametrize("era", ERAS)
async def test_sdk_client_calls_add(origin: str, era: Era) -> None:
    result = await sdk_call_tool(origin, era, "add", {"a": 40, "b": 2})
    assert result["isError"] is False
    assert result["content"] == [{"type": "text", "text": "42"}]
    assert result["structuredContent"] == {"result": 42}


async def test_sdk_results_carry_result_type_only_in_the_modern_era(origin: str) -> None:
    modern = await sdk_list_tools(origin, "modern")
    legacy = await sdk_list_tools(origin, "legacy")
    assert modern["resultType"] == "complete"
    assert modern["ttlMs"] == 0
    assert modern["cacheScope"] == "private"
    for key in ("resultType", "ttlMs", "cacheScope", "_meta"):
        assert key not in legacy


async def test_sdk_modern_client_sends_mirrored_headers_and_meta(origin: str) -> None:
    record: list[dict[str, Any]] = []
    result = await sdk_call_tool(
        origin, "modern", "lookup", {"region": "eu-west", "query": "q"}, record=record
    )
    assert result["content"][0]["text"] == "q in eu-west (known region)"
    assert [ex["request_body"]["method"] for ex in record] == ["tools/list", "tools/call"]
    call = record[-1]
    headers = call["request_headers"]
    assert headers["mcp-protocol-version"] == MODERN_VERSION
    assert headers["mcp-method"] == "tools/call"
    assert headers["mcp-name"] == "lookup"
    assert headers["mcp-param-region"] == "eu-west"
    assert "mcp-session-id" not in headers
    meta = call["request_body"]["params"]["_meta"]
    assert meta["io.modelcontextprotocol/protocolVersion"] == MODERN_VERSION
    assert meta["io.modelcontextprotocol/clientCapabilities"] == {}
    assert "io.modelcontextprotocol/clientInfo" in meta
    assert call["status"] == 200


async def test_sdk_legacy_client_handshakes_and_uses_a_session(origin: str) -> None:
    record: list[dict[str, Any]] = []
    await sdk_call_tool(origin, "legacy", "echo", {"text": "x"}, record=record)
    posts = [ex for ex in record if ex["http_method"] == "POST"]
    methods = [ex["request_body"]["method"] for ex in posts]
    assert methods == ["initialize", "notifications/initialized", "tools/list", "tools/call"]
    initialize = posts[0]
    assert "mcp-protocol-version" not in initialize["request_headers"]
    assert initialize["request_body"]["params"]["protocolVersion"] == LEGACY_VERSION
    session_id = initialize["response_headers"]["mcp-session-id"]
    assert session_id
    for ex in posts[1:]:
        assert ex["request_headers"]["mcp-session-id"] == session_id
        assert ex["request_headers"]["mcp-protocol-version"] == LEGACY_VERSION
        assert "mcp-method" not in ex["request_headers"]
    assert posts[1]["status"] == 202
    # The legacy client ends the session with DELETE. (It also opens the GET stream after
    # notifications/initialized, from a background task, so whether that GET went out
    # before the close is a race: only its headers are checked, when it is there.)
    assert {ex["http_method"] for ex in record} <= {"POST", "GET", "DELETE"}
    [delete] = [ex for ex in record if ex["http_method"] == "DELETE"]
    assert delete["request_headers"]["mcp-session-id"] == session_id
    assert delete["status"] == 200
    for get in (ex for ex in record if ex["http_method"] == "GET"):
        assert get["request_headers"]["mcp-session-id"] == session_id


@pytest.mark.parametrize("era", ERAS)
async def test_sdk_client_notification_gets_202(origin: str, era: Era) -> None:
    answer = await sdk_send_notification(origin, era)
    assert answer["status"] == 202
    assert answer["responseHeaders"]["content-length"] == "0"
    expected = MODERN_VERSION if era == "modern" else LEGACY_VERSION
    assert answer["protocolVersion"] == expected
    assert answer["requestHeaders"]["mcp-protocol-version"] == expected


async def test_sdk_auto_mode_probes_discover_then_goes_modern(origin: str) -> None:
    record: list[dict[str, Any]] = []
    result = await sdk_list_tools(origin, "auto", record=record)
    assert result["resultType"] == "complete"
    assert record[0]["request_body"]["method"] == "server/discover"
    assert record[0]["request_headers"]["mcp-method"] == "server/discover"
    assert "initialize" not in [ex["request_body"]["method"] for ex in record]


# --- raw modern requests --------------------------------------------------------------------


def test_raw_modern_tools_list(origin: str) -> None:
    headers, body = raw_modern_request("tools/list", request_id="6")
    response = _post(origin, headers, body)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    message = response.json()
    assert message["jsonrpc"] == "2.0"
    assert message["id"] == "6"  # same value and JSON type
    result = message["result"]
    assert result["resultType"] == "complete"
    assert isinstance(result["ttlMs"], int)
    assert result["ttlMs"] >= 0
    assert result["cacheScope"] in ("public", "private")
    assert "mcp-session-id" not in response.headers


def test_raw_modern_slow_count_streams_notifications_before_the_result(origin: str) -> None:
    n = 3
    headers, body = raw_modern_request(
        "tools/call",
        {"name": "slow_count", "arguments": {"n": n}},
        request_id=41,
        meta=modern_meta(progress_token="tok-1"),
    )
    response = _post(origin, headers, body)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["x-accel-buffering"] == "no"
    events = parse_sse(response.text)
    messages = [event["data"] for event in events]
    assert len(messages) == n + 1
    *notifications, final = messages
    assert [m["method"] for m in notifications] == ["notifications/progress"] * n
    assert [m["params"]["progress"] for m in notifications] == [1, 2, 3]
    assert all(m["params"]["progressToken"] == "tok-1" for m in notifications)
    assert all("id" not in m for m in notifications)
    assert final["id"] == 41
    assert final["result"]["content"][0]["text"] == f"counted to {n}"
    assert final["result"]["resultType"] == "complete"


def test_raw_modern_slow_count_without_opt_in_is_plain_json(origin: str) -> None:
    headers, body = raw_modern_request(
        "tools/call", {"name": "slow_count", "arguments": {"n": 2}}, request_id=42
    )
    response = _post(origin, headers, body)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json()["result"]["content"][0]["text"] == "counted to 2"


def test_raw_modern_log_opt_in_streams_log_messages(origin: str) -> None:
    headers, body = raw_modern_request(
        "tools/call",
        {"name": "slow_count", "arguments": {"n": 2}},
        request_id=43,
        meta=modern_meta(log_level="info"),
    )
    response = _post(origin, headers, body)
    assert response.headers["content-type"].startswith("text/event-stream")
    messages = [event["data"] for event in parse_sse(response.text)]
    assert [m.get("method") for m in messages[:-1]] == ["notifications/message"] * 2
    assert messages[-1]["id"] == 43


def test_raw_modern_notification_gets_202_and_empty_body(origin: str) -> None:
    headers, body = raw_modern_request("notifications/cancelled", {"requestId": 1}, request_id=None)
    assert "id" not in body
    response = _post(origin, headers, body)
    assert response.status_code == 202
    assert response.content == b""


@pytest.mark.parametrize("request_id", [17, "17"])
def test_raw_modern_method_header_mismatch_is_400_32020_same_id(
    origin: str, request_id: int | str
) -> None:
    _, body = raw_modern_request("tools/list", request_id=request_id)
    headers = raw_modern_headers("tools/call")
    response = _post(origin, headers, body)
    assert response.status_code == 400
    assert response.headers["content-type"] == "application/json"
    message = response.json()
    assert message["error"]["code"] == -32020
    assert message["id"] == request_id
    assert type(message["id"]) is type(request_id)
    assert "result" not in message


def test_raw_modern_name_header_mismatch_is_32020(origin: str) -> None:
    _, body = raw_modern_request(
        "tools/call", {"name": "echo", "arguments": {"text": "x"}}, request_id=18
    )
    response = _post(origin, raw_modern_headers("tools/call", "add"), body)
    assert response.status_code == 400
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": 18,
        "error": {
            "code": -32020,
            "message": "mcp-name header does not match the request body's 'name' parameter",
        },
    }


def test_raw_modern_param_header_mismatch_is_32020(origin: str) -> None:
    headers, body = raw_modern_request(
        "tools/call",
        {"name": "lookup", "arguments": {"region": "eu-west", "query": "q"}},
        request_id=19,
        param_headers={"Region": "us-east"},
    )
    response = _post(origin, headers, body)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32020
    assert response.json()["id"] == 19


def test_raw_modern_param_header_match_succeeds(origin: str) -> None:
    headers, body = raw_modern_request(
        "tools/call",
        {"name": "lookup", "arguments": {"region": "eu-west", "query": "q"}},
        param_headers={"Region": "eu-west"},
    )
    response = _post(origin, headers, body)
    assert response.status_code == 200
    assert response.json()["result"]["isError"] is False


def test_raw_modern_unsupported_version_is_400_32022_with_data(origin: str) -> None:
    version = "2099-01-01"
    _, body = raw_modern_request(
        "tools/list", request_id=20, meta=modern_meta(protocol_version=version)
    )
    headers = raw_modern_headers("tools/list", protocol_version=version)
    response = _post(origin, headers, body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == -32022
    assert error["data"] == {"supported": [MODERN_VERSION], "requested": version}


def test_raw_modern_header_mismatch_wins_over_unsupported_version(origin: str) -> None:
    version = "2099-01-01"
    _, body = raw_modern_request(
        "tools/list", request_id=21, meta=modern_meta(protocol_version=version)
    )
    response = _post(origin, raw_modern_headers("tools/list"), body)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32020


def test_raw_modern_missing_client_capabilities_is_400_32602(origin: str) -> None:
    _, body = raw_modern_request(
        "tools/list",
        request_id=22,
        meta={"io.modelcontextprotocol/protocolVersion": MODERN_VERSION},
    )
    response = _post(origin, raw_modern_headers("tools/list"), body)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32602
    assert response.json()["id"] == 22


def test_raw_modern_unknown_method_is_404_32601(origin: str) -> None:
    headers, body = raw_modern_request("foo/bar", request_id=23)
    response = _post(origin, headers, body)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == -32601


@pytest.mark.parametrize("verb", ["GET", "DELETE"])
def test_modern_get_and_delete_are_405(origin: str, verb: str) -> None:
    with httpx.Client(timeout=30) as client:
        response = client.request(verb, origin, headers={"MCP-Protocol-Version": MODERN_VERSION})
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"


def test_raw_legacy_initialize_assigns_a_session_and_results_lack_result_type(
    origin: str,
) -> None:
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": LEGACY_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }
    with httpx.Client(timeout=30) as client:
        response = client.post(origin, headers=accept, json=initialize)
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        session_id = response.headers["mcp-session-id"]
        [event] = parse_sse(response.text)
        assert event["data"]["result"]["protocolVersion"] == LEGACY_VERSION
        session = {**accept, "Mcp-Session-Id": session_id, "MCP-Protocol-Version": LEGACY_VERSION}
        listed = client.post(
            origin, headers=session, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        )
        [event] = parse_sse(listed.text)
        assert event["data"]["id"] == 2
        assert "tools" in event["data"]["result"]
        assert "resultType" not in event["data"]["result"]
        assert "ttlMs" not in event["data"]["result"]
        assert client.delete(origin, headers=session).status_code == 200
        gone = client.post(
            origin, headers=session, json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"}
        )
        assert gone.status_code == 404


# --- helpers --------------------------------------------------------------------------------


def test_parse_sse_handles_comments_crlf_ids_and_multiline_data() -> None:
    text = ': ping\r\n\r\nevent: message\r\nid: 7\r\ndata: {"a":\r\ndata: 1}\r\n\r\ndata:\n\n'
    assert parse_sse(text) == [
        {"event": "message", "id": "7", "data": {"a": 1}},
        {"event": "message", "id": None, "data": None},
    ]


def test_raw_modern_request_derives_mcp_name_from_the_body() -> None:
    headers, body = raw_modern_request("resources/read", {"uri": "demo://readme"})
    assert headers["Mcp-Name"] == "demo://readme"
    assert headers["Mcp-Method"] == "resources/read"
    assert (
        headers["MCP-Protocol-Version"]
        == body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"]
    )
    assert "Mcp-Name" not in raw_modern_request("tools/list")[0]
