"""Reusable test helpers around the real MCP Python SDK (``mcp==2.3.0``) as a peer.

Not a conftest: import what you need (``from tests.peers import run_origin, ...`` or
``from peers import ...`` when ``tests`` is on ``sys.path``).

* :func:`run_origin` starts the demo origin (``python -m mcp_tap.demo.origin``) in a
  subprocess on a free loopback port and yields its endpoint URL.
* ``sdk_*`` coroutines drive the REAL SDK client (``mcp.Client``) against a URL, in the
  ``"modern"`` era (``mode="2026-07-28"``: adopt the version directly, no probe), the
  ``"legacy"`` era (``mode="legacy"``: ``initialize`` handshake, ``Mcp-Session-Id``) or
  ``"auto"`` (``mode="auto"``: ``server/discover`` probe, fall back to ``initialize``).
  They return plain JSON-able dicts; pass ``record=[]`` to also get every HTTP exchange
  the SDK client made (request headers and body, response status and headers).
* ``raw_modern_*`` / :func:`modern_meta` build correct raw 2026-07-28 requests for
  ``httpx``; :func:`parse_sse` decodes a ``text/event-stream`` body.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import RootsListChangedNotification
from ports import free_port, wait_listening

__all__ = [
    "ACCEPT",
    "LEGACY_VERSION",
    "MODERN_VERSION",
    "Era",
    "free_port",
    "modern_meta",
    "parse_sse",
    "raw_modern_headers",
    "raw_modern_request",
    "run_origin",
    "sdk_call_tool",
    "sdk_list_tools",
    "sdk_mode",
    "sdk_send_notification",
    "stop_process",
]

Era = Literal["modern", "legacy", "auto"]
"""Which era the SDK client speaks: see :func:`sdk_mode`."""

MODERN_VERSION = "2026-07-28"
"""The modern protocol revision the SDK (and the demo origin) serves."""

LEGACY_VERSION = "2025-11-25"
"""The newest handshake-era revision; what the SDK client proposes in ``initialize``."""

ACCEPT = "application/json, text/event-stream"
"""The ``Accept`` value every Streamable HTTP POST must carry."""

PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
LOG_LEVEL_KEY = "io.modelcontextprotocol/logLevel"

_NAME_PARAM = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
_REPO_ROOT = Path(__file__).resolve().parents[2]
_SUPPORT = Path(__file__).resolve().parent  # the test helpers, candidate_origin among them
_SDK_TIMEOUT_SECONDS = 30.0


@contextlib.contextmanager
def run_origin(
    port: int | None = None,
    *,
    json_response: bool = False,
    startup_timeout: float = 15.0,
    module: str = "mcp_tap.demo.origin",
) -> Iterator[str]:
    """Run the demo origin in a subprocess and yield ``http://127.0.0.1:PORT/mcp``.

    ``module`` runs another origin with the same ``--listen`` flag instead (e.g.
    ``candidate_origin`` from this directory).

    Waits (polling, at most ``startup_timeout`` seconds) until the port accepts
    connections; raises ``RuntimeError`` with the child's output if it exits or never
    listens. On exit sends SIGTERM, waits up to 10 s, then kills.
    """
    chosen = free_port() if port is None else port
    cmd = [sys.executable, "-m", module, "--listen", f"127.0.0.1:{chosen}"]
    if json_response:
        cmd.append("--json-response")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(_REPO_ROOT), str(_SUPPORT), env.get("PYTHONPATH")]))
    env.setdefault("PYTHONUNBUFFERED", "1")
    proc = subprocess.Popen(
        cmd,
        cwd=_REPO_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        if not wait_listening(chosen, proc, startup_timeout):
            if proc.poll() is not None:
                output = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
                raise RuntimeError(f"demo origin exited with {proc.returncode}: {output}")
            raise RuntimeError(
                f"demo origin did not listen on 127.0.0.1:{chosen} within {startup_timeout} s")
        yield f"http://127.0.0.1:{chosen}/mcp"
    finally:
        stop_process(proc)


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM a peer subprocess, wait up to 10 s, then kill it; close its output pipe."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
    if proc.stdout is not None:
        proc.stdout.close()


def sdk_mode(era: Era) -> str:
    """Map an era to the SDK ``Client(mode=...)`` value.

    ``"modern"`` → ``"2026-07-28"`` (a version pin: adopt directly, no ``server/discover``
    probe); ``"legacy"`` → ``"legacy"`` (``initialize`` handshake); ``"auto"`` → ``"auto"``
    (probe ``server/discover``, fall back to ``initialize`` on any error but -32022 with a
    disjoint version list).
    """
    if era == "modern":
        return MODERN_VERSION
    if era in ("legacy", "auto"):
        return era
    raise ValueError(f"era must be 'modern', 'legacy' or 'auto', got {era!r}")


def _json_or_none(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


class _Recorder:
    """httpx2 event hooks that append one dict per HTTP exchange the SDK client makes."""

    def __init__(self, sink: list[dict[str, Any]] | None) -> None:
        self.exchanges: list[dict[str, Any]] = [] if sink is None else sink

    async def on_request(self, request: httpx2.Request) -> None:
        self.exchanges.append(
            {
                "http_method": request.method,
                "url": str(request.url),
                "request_headers": {k.lower(): v for k, v in request.headers.items()},
                "request_body": _json_or_none(request.content),
                "status": None,
                "response_headers": None,
            }
        )

    async def on_response(self, response: httpx2.Response) -> None:
        for exchange in reversed(self.exchanges):
            if (
                exchange["status"] is None
                and exchange["url"] == str(response.request.url)
                and exchange["request_body"] == _json_or_none(response.request.content)
            ):
                exchange["status"] = response.status_code
                exchange["response_headers"] = {k.lower(): v for k, v in response.headers.items()}
                return

    def http_client(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            timeout=httpx2.Timeout(_SDK_TIMEOUT_SECONDS),
            event_hooks={"request": [self.on_request], "response": [self.on_response]},
        )


def _dump(model: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = model.model_dump(by_alias=True, mode="json", exclude_unset=True)
    return dumped


@contextlib.asynccontextmanager
async def _sdk_client(url: str, era: Era, recorder: _Recorder) -> Any:
    async with recorder.http_client() as http:
        transport = streamable_http_client(url, http_client=http)
        client = Client(transport, mode=sdk_mode(era), read_timeout_seconds=_SDK_TIMEOUT_SECONDS)
        async with client:
            yield client


async def sdk_list_tools(
    url: str, era: Era, *, record: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """List tools with the real SDK client; return the ``ListToolsResult`` as a wire-shaped dict.

    The dict is the SDK's parsed model dumped by alias (``inputSchema``, ``resultType``...),
    so fields the SDK drops while parsing are absent even if they were on the wire; use
    ``record`` (or a raw request) to see the wire itself.
    """
    recorder = _Recorder(record)
    with anyio.fail_after(_SDK_TIMEOUT_SECONDS):
        async with _sdk_client(url, era, recorder) as client:
            result = await client.list_tools()
            return _dump(result)


async def sdk_call_tool(
    url: str,
    era: Era,
    name: str,
    arguments: Mapping[str, Any] | None = None,
    *,
    list_first: bool = True,
    record: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Call tool ``name`` with the real SDK client; return the ``CallToolResult`` as a dict.

    With ``list_first`` (the default) the client lists tools before the call, which is
    what makes a modern SDK client mirror ``x-mcp-header`` arguments as ``Mcp-Param-*``
    headers (it reads the annotations from its last listing). A tool error comes back as
    ``isError: true``; a JSON-RPC error raises ``mcp.shared.exceptions.MCPError``.
    """
    recorder = _Recorder(record)
    with anyio.fail_after(_SDK_TIMEOUT_SECONDS):
        async with _sdk_client(url, era, recorder) as client:
            if list_first:
                await client.list_tools()
            result = await client.call_tool(name, dict(arguments or {}))
            return _dump(result)


async def sdk_send_notification(
    url: str, era: Era, *, record: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Send ``notifications/roots/list_changed`` with the real SDK client session.

    Uses ``ClientSession.send_notification`` (the non-deprecated low-level path; the
    ``Client.send_roots_list_changed`` wrapper warns ``MCPDeprecationWarning``). Waits
    until the server answered the notification POST and returns
    ``{"era", "protocolVersion", "method", "status", "responseHeaders", "requestHeaders",
    "requestBody"}`` for that POST.
    """
    recorder = _Recorder(record)
    method = "notifications/roots/list_changed"
    with anyio.fail_after(_SDK_TIMEOUT_SECONDS):
        async with _sdk_client(url, era, recorder) as client:
            await client.session.send_notification(RootsListChangedNotification())
            while True:
                answered = [
                    ex
                    for ex in recorder.exchanges
                    if isinstance(ex["request_body"], dict)
                    and ex["request_body"].get("method") == method
                    and ex["status"] is not None
                ]
                if answered:
                    break
                await anyio.sleep(0.01)
            exchange = answered[-1]
            return {
                "era": era,
                "protocolVersion": client.protocol_version,
                "method": method,
                "status": exchange["status"],
                "responseHeaders": exchange["response_headers"],
                "requestHeaders": exchange["request_headers"],
                "requestBody": exchange["request_body"],
            }


def modern_meta(
    *,
    protocol_version: str = MODERN_VERSION,
    capabilities: Mapping[str, Any] | None = None,
    client_info: Mapping[str, Any] | None = None,
    progress_token: str | int | None = None,
    log_level: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``params._meta`` a 2026-07-28 request must carry.

    Always the namespaced protocol version and client capabilities (``{}`` by default).
    Optional: ``client_info`` (``io.modelcontextprotocol/clientInfo``), ``progress_token``
    (``progressToken``: asks for progress notifications), ``log_level``
    (``io.modelcontextprotocol/logLevel``: opts in to log notifications), and ``extra``
    keys copied verbatim last (so they can also override or add malformed values).
    """
    meta: dict[str, Any] = {
        PROTOCOL_VERSION_KEY: protocol_version,
        CLIENT_CAPABILITIES_KEY: dict(capabilities or {}),
    }
    if client_info is not None:
        meta[CLIENT_INFO_KEY] = dict(client_info)
    if progress_token is not None:
        meta["progressToken"] = progress_token
    if log_level is not None:
        meta[LOG_LEVEL_KEY] = log_level
    meta.update(extra or {})
    return meta


def raw_modern_headers(
    method: str,
    name: str | None = None,
    *,
    params: Mapping[str, str] | None = None,
    protocol_version: str = MODERN_VERSION,
) -> dict[str, str]:
    """Headers of a correct raw 2026-07-28 POST for ``method``.

    ``Accept``, ``Content-Type``, ``MCP-Protocol-Version``, ``Mcp-Method``; ``Mcp-Name``
    when ``name`` is given (the tool/prompt name or resource URI, sent verbatim: pass
    only header-safe values); ``Mcp-Param-{K}: V`` for each ``params`` item.
    """
    headers = {
        "Accept": ACCEPT,
        "Content-Type": "application/json",
        "MCP-Protocol-Version": protocol_version,
        "Mcp-Method": method,
    }
    if name is not None:
        headers["Mcp-Name"] = name
    for key, value in (params or {}).items():
        headers[f"Mcp-Param-{key}"] = value
    return headers


def raw_modern_request(
    method: str,
    params: Mapping[str, Any] | None = None,
    *,
    request_id: int | str | None = 1,
    meta: Mapping[str, Any] | None = None,
    param_headers: Mapping[str, str] | None = None,
) -> tuple[dict[str, str], dict[str, Any]]:
    """A matching ``(headers, body)`` pair for a raw 2026-07-28 request or notification.

    ``Mcp-Name`` is derived from the body (``params.name`` for ``tools/call`` and
    ``prompts/get``, ``params.uri`` for ``resources/read``). ``request_id=None`` builds a
    notification (no ``id``). ``meta`` replaces the default :func:`modern_meta`.
    """
    body_params: dict[str, Any] = dict(params or {})
    body_params["_meta"] = dict(meta) if meta is not None else modern_meta()
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": body_params}
    if request_id is not None:
        body["id"] = request_id
    key = _NAME_PARAM.get(method)
    name = body_params.get(key) if key is not None else None
    headers = raw_modern_headers(
        method, name if isinstance(name, str) else None, params=param_headers
    )
    return headers, body


def parse_sse(text: str) -> list[dict[str, Any]]:
    """Decode a ``text/event-stream`` body into its events, in order.

    Each event is ``{"event": str, "id": str | None, "data": Any}`` where ``data`` is the
    JSON-decoded data field (or the raw string if it is not JSON, ``None`` if empty).
    Comment lines (``:`` keep-alives) are skipped; CRLF and LF line ends are accepted.
    """
    events: list[dict[str, Any]] = []
    event_type = "message"
    event_id: str | None = None
    data_lines: list[str] = []
    seen_field = False
    for line in [*text.replace("\r\n", "\n").replace("\r", "\n").split("\n"), ""]:
        if line == "":
            if seen_field:
                raw = "\n".join(data_lines)
                data: Any
                if not raw:
                    data = None
                else:
                    try:
                        data = json.loads(raw)
                    except ValueError:
                        data = raw
                events.append({"event": event_type, "id": event_id, "data": data})
            event_type, event_id, data_lines, seen_field = "message", None, [], False
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        seen_field = True
        if field == "data":
            data_lines.append(value)
        elif field == "event":
            event_type = value
        elif field == "id":
            event_id = value
    return events
