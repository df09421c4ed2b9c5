"""No planted secret survives anywhere: a property test through the real proxy process.

Hypothesis draws a secret, a key spelling (any pattern word, case, separators, prefixes,
percent-encoding, JSON ``\\u`` escapes) and a location: a request header, a JSON body at any
depth (deep past orjson's limits too), the query string, a path parameter, a form body, a
non-JSON body, a response header, a response body, SSE data (JSON and text), a JSON-RPC error
message or error data, a plain-text answer; a request head the tap refuses (past the head
limit: 431; a malformed header line: 400) with the secret as a cookie; a JSON string whose
secret follows every escape JSON allows, and a raw newline. Each example is one exchange through
``mcp-tap proxy`` (a real process, recording in its own process, admin listener on). The
origin learns what to answer from a nonce header, so the request of a response-side example
holds no secret.

Then nothing may hold any secret: no file under the evidence directory, not the proxy's
stderr, not ``/metrics``, not the output of ``verify``, ``report`` (and its page) or
``replay --json``. The plain SHA-256 of every body that crossed is in no file either, and a
redacted 4-digit password is brute-forced against every hex digest in the bundle, in vain.
``verify`` passes and every exchange is recorded (no gap), deep bodies included.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import signal
import socket
import string
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from aiohttp import web
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from peers import free_port
from taps import Lines

from mcp_tap.core.redaction import KeyMatcher

REPO_ROOT = Path(__file__).resolve().parents[2]
_TIMEOUT = 60.0
_MATCHER = KeyMatcher()

REQUEST_SIDE = ("request-header", "json-body", "query", "path-param", "form", "raw-request",
                "big-head", "bad-head", "escaped-string")
# Every escape JSON allows, before the secret in a string value: \" \\ \/ \b \f \n \r \t
# and \u (a BMP letter, a surrogate pair, U+2028); "json"-style plants add a raw newline
# (invalid JSON: then the text pass, not the parse, must see past it).
_ESCAPES = '\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\\u2028'
_HEAD_LIMIT = 65536  # the proxy's default listener.max_head_bytes
RESPONSE_SIDE = (
    "response-header", "response-json", "sse-json", "sse-text", "error-message", "error-data",
    "raw-response",
)
_BASES = (
    "token", "secret", "password", "passwd", "pwd", "apikey", "auth", "credential",
    "privatekey", "session", "cookie", "signature", "accesstoken", "clientsecret",
    "privatetoken", "vaulttoken", "subscriptionkey", "refreshtoken", "xapikey", "authtoken",
)
_PIN_BODY = '{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"unlock",' \
    '"arguments":{{"password":"{pin}"}}}}}}'


@dataclass
class Plant:
    """One planted secret: where, under which key spelling, with which value."""

    where: str
    key: str
    secret: str
    depth: int
    style: str


@dataclass
class Origin:
    """The aiohttp origin on its own thread; answers from the plan the nonce names."""

    plans: dict[str, Plant] = field(default_factory=dict)
    url: str = ""
    loop: asyncio.AbstractEventLoop | None = None
    runner: web.AppRunner | None = None


def _nest(key: str, secret: str, depth: int) -> str:
    """JSON text with ``key`` (already JSON-spelt) holding ``secret`` ``depth`` levels down."""
    return '{"a":[' * depth + f'{{"{key}":"{secret}","n":1}}' + "]}" * depth


def _answer(plan: Plant | None) -> web.StreamResponse:
    ok = '{"jsonrpc":"2.0","id":1,"result":{"content":[],"resultType":"complete"}}'
    if plan is None or plan.where not in RESPONSE_SIDE:
        return web.Response(body=ok.encode(), content_type="application/json")
    key, secret = plan.key, plan.secret
    if plan.where == "response-header":
        response = web.Response(body=ok.encode(), content_type="application/json")
        response.headers[key] = secret
        return response
    if plan.where == "response-json":
        body = '{"jsonrpc":"2.0","id":1,"result":' + _nest(key, secret, plan.depth) + "}"
        return web.Response(body=body.encode(), content_type="application/json")
    if plan.where in ("sse-json", "sse-text"):
        data = (
            '{"jsonrpc":"2.0","method":"notifications/message","params":'
            + _nest(key, secret, plan.depth) + "}"
            if plan.where == "sse-json"
            else f"{key}={secret}"
        )
        text = f"event: message\ndata: {data}\n\nevent: message\ndata: {ok}\n\n"
        return web.Response(body=text.encode(), content_type="text/event-stream")
    if plan.where == "error-message":
        message = f"upstream refused {key}={secret}" if plan.style == "eq" else f"{key}: {secret}"
        error = {"code": -32000, "message": message}
    elif plan.where == "error-data":
        error = {"code": -32000, "message": "refused",
                 "data": json.loads(_nest(key, secret, min(plan.depth, 50)))}
        if plan.style == "eq":
            error["data"] = f"see https://idp.example/cb?{key}={secret}&x=1"
    else:  # raw-response: not JSON, the key JSON-escaped or bare
        text = f'oops {{"{key}": "{secret}", ' if plan.style == "json" else f"{key}={secret}\n"
        return web.Response(text=text, content_type="text/plain")
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "error": error})
    return web.Response(body=body.encode(), content_type="application/json")


@pytest.fixture(scope="module")
def origin() -> Iterator[Origin]:
    """The planting origin on a thread of its own (the test itself is synchronous)."""
    state = Origin()
    ready = threading.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        await request.read()
        return _answer(state.plans.get(request.headers.get("X-Plant", "")))

    async def serve() -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", handler)
        state.runner = web.AppRunner(app, access_log=None)
        await state.runner.setup()
        site = web.TCPSite(state.runner, "127.0.0.1", 0)
        await site.start()
        host, port = state.runner.addresses[0][:2]
        state.url = f"http://{host}:{port}"
        ready.set()

    loop = asyncio.new_event_loop()
    state.loop = loop
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(serve(), loop).result(timeout=_TIMEOUT)
    assert ready.wait(_TIMEOUT)
    try:
        yield state
    finally:
        assert state.runner is not None
        asyncio.run_coroutine_threadsafe(state.runner.cleanup(), loop).result(timeout=_TIMEOUT)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


# -- strategies -----------------------------------------------------------------------------

_SECRETS = st.text(alphabet=string.ascii_letters + string.digits, min_size=12, max_size=20).map(
    lambda tail: "Zq9" + tail)


@st.composite
def _key_name(draw: st.DrawFn, separators: tuple[str, ...]) -> str:
    """A secret name in some spelling: case, separators, a prefix and a suffix."""
    base = draw(st.sampled_from(_BASES))
    letters = []
    for index, char in enumerate(base):
        if index and draw(st.integers(0, 5)) == 0:
            letters.append(draw(st.sampled_from(separators)))
        letters.append(char.upper() if draw(st.booleans()) else char)
    prefix = draw(st.sampled_from(["", "X-", "x_", "My", "upstream."]))
    suffix = draw(st.sampled_from(["", "-Value", "_2", "Id", ".raw"]))
    name = prefix + "".join(letters) + suffix
    assume(_MATCHER.is_secret_key(name))  # e.g. never progressToken
    return name


def _percent(draw: st.DrawFn, name: str) -> str:
    """``name`` with some characters percent-encoded (any hex case)."""
    out = []
    for char in name:
        if draw(st.integers(0, 3)) == 0:
            code = f"%{ord(char):02X}"
            out.append(code if draw(st.booleans()) else code.lower())
        else:
            out.append(quote(char, safe=""))
    return "".join(out)


def _json_escaped(draw: st.DrawFn, name: str) -> str:
    """``name`` spelt in JSON text with some letters as ``\\u`` escapes."""
    return "".join(
        f"\\u{ord(c):04x}" if c.isalpha() and draw(st.integers(0, 3)) == 0 else c for c in name)


@st.composite
def plants(draw: st.DrawFn) -> Plant:
    """A secret at one location under one key spelling."""
    where = draw(st.sampled_from(REQUEST_SIDE + RESPONSE_SIDE))
    header = where in ("request-header", "response-header", "big-head", "bad-head")
    name = draw(_key_name(("-", "_", ".") if header else ("-", "_", ".", " ")))
    if header:
        name = name.replace(" ", "-")
    elif where in ("query", "path-param", "form"):
        name = _percent(draw, name)
    elif where in ("json-body", "response-json", "sse-json", "raw-request", "raw-response",
                   "escaped-string"):
        name = _json_escaped(draw, name)
    depth = draw(st.one_of(st.integers(0, 5), st.sampled_from([250, 300, 1100])))
    style = draw(st.sampled_from(["eq", "colon", "json"]))
    return Plant(where, name, draw(_SECRETS), depth, style)


# -- the test -------------------------------------------------------------------------------


def _send(client: httpx.Client, url: str, plan: Plant, nonce: str) -> bytes:
    """Send one planted exchange; return the request body bytes that were sent."""
    headers = {"X-Plant": nonce, "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream"}
    path = "/mcp"
    body = '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}'
    key, secret = plan.key, plan.secret
    if plan.where == "request-header":
        headers[key] = secret
    elif plan.where == "json-body":
        body = ('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t",'
                f'"arguments":{_nest(key, secret, plan.depth)}}}}}')
    elif plan.where == "query":
        path = f"/mcp?page=2&{key}={secret}&x=1"
    elif plan.where == "path-param":
        path = f"/mcp;{key}={secret}/x"
    elif plan.where == "form":
        headers["Content-Type"] = "application/x-www-form-urlencoded"
        body = f"user=ada&{key}={secret}&remember=1"
    elif plan.where == "raw-request":
        body = f'{{"jsonrpc":"2.0","params":{{"{key}": "{secret}", "cut'
    elif plan.where == "escaped-string":
        raw_newline = "\n" if plan.style == "json" else ""
        body = ('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t",'
                f'"arguments":{_nest(key, _ESCAPES + raw_newline + secret, plan.depth)}}}}}')
    elif plan.where in ("big-head", "bad-head"):
        return _send_raw_head(url, plan, nonce)
    data = body.encode()
    response = client.post(url.removesuffix("/mcp") + path, headers=headers, content=data)
    assert response.status_code < 500, response.text
    return data + b"\0" + response.content


def _send_raw_head(url: str, plan: Plant, nonce: str) -> bytes:
    """A request head the tap refuses, holding the secret as a cookie (and, for
    ``style`` "colon", under the drawn header name too): past the head limit (431), or with a
    malformed header line (400). Raw bytes on a socket: no client library sends either."""
    host, port = url.removeprefix("http://").split("/")[0].rsplit(":", 1)
    lines = ["POST /mcp HTTP/1.1", f"Host: {host}:{port}", f"X-Plant: {nonce}",
             f"Cookie: theme=dark; {plan.key}={plan.secret}; lang=en"]
    if plan.style == "colon":
        lines.append(f"{plan.key}: {plan.secret}")
    if plan.where == "big-head":
        lines.append("X-Pad: " + "p" * _HEAD_LIMIT)
    else:
        lines.append("A Header With Spaces")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode()
    with socket.create_connection((host, int(port)), timeout=_TIMEOUT) as sock:
        sock.sendall(head)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    status = int(answer.split(b" ", 2)[1])
    assert status == (431 if plan.where == "big-head" else 400), answer[:200]
    return head + b"\0" + answer


def _run(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "mcp_tap", *args], cwd=REPO_ROOT, capture_output=True,
        timeout=300, env=_env(), check=False)
    return f"exit {done.returncode}\n{done.stdout.decode(errors='replace')}" \
        f"{done.stderr.decode(errors='replace')}"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_TAP_")}
    return dict(env, PYTHONPATH=str(REPO_ROOT), PYTHONUNBUFFERED="1")


def test_no_planted_secret_reaches_disk_logs_metrics_or_outputs(
    tmp_path: Path, origin: Origin
) -> None:
    """Secrets planted under drawn keys and locations are found in no output of any kind."""
    port, admin = free_port(), free_port()
    evidence = tmp_path / "evidence"
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcp_tap", "proxy", "--listen", f"127.0.0.1:{port}",
         "--upstream", origin.url, "--evidence", str(evidence), "--admin", f"127.0.0.1:{admin}",
         "--log-level", "debug"],
        cwd=REPO_ROOT, env=_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE)
    assert proc.stderr is not None
    stderr = Lines(proc.stderr)
    planted: list[Plant] = []
    crossed: list[bytes] = []  # request body + answer bytes of every exchange
    try:
        stderr.wait_for('"event":"proxy.started"', _TIMEOUT)
        url = f"http://127.0.0.1:{port}/mcp"
        with httpx.Client(timeout=_TIMEOUT) as client:

            @settings(max_examples=int(os.environ.get("SECRETS_PROPERTY_EXAMPLES", "80")),
                      deadline=None, database=None,
                      suppress_health_check=[HealthCheck.function_scoped_fixture,
                                             HealthCheck.filter_too_much])
            @given(plants())
            def one(plan: Plant) -> None:
                plant(plan)

            def plant(plan: Plant) -> None:
                nonce = f"n{len(planted)}"
                plan.secret += f"K{len(planted):03d}"  # unique, so a leak names its plan
                origin.plans[nonce] = plan
                crossed.append(_send(client, url, plan, nonce))
                planted.append(plan)

            one()
            # The refused heads and the escaped strings, every variant, whatever was drawn.
            for where, style, depth in [*((w, s, 0) for w in ("big-head", "bad-head")
                                          for s in ("eq", "colon")),
                                        *(("escaped-string", s, d) for s in ("json", "eq")
                                          for d in (0, 3, 300, 1100))]:
                plant(Plant(where, "Session-Token", "Zq9" + where.replace("-", ""), depth,
                            style))
            # A short secret, for the brute force below.
            pin_body = _PIN_BODY.format(pin="4711").encode()
            client.post(url, content=pin_body, headers={
                "Content-Type": "application/json", "Accept": "application/json"})
            metrics = client.get(f"http://127.0.0.1:{admin}/metrics").text
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=_TIMEOUT)
        log = stderr.join()
        proc.stderr.close()
    assert code == 0, log
    (bundle,) = [p for p in evidence.iterdir() if p.is_dir()]

    outputs = {
        "verify": _run("verify", str(bundle)),
        "report": _run("report", "--json", "--out", str(tmp_path / "r.html"), str(bundle)),
        "replay": _run("replay", "--json", "--target", origin.url + "/mcp", str(bundle)),
    }
    assert outputs["verify"].startswith("exit 0\nok: "), outputs["verify"]
    files = {p: p.read_bytes() for p in [*evidence.rglob("*"), tmp_path / "r.html"] if p.is_file()}
    recorded = [json.loads(line) for p, data in files.items() if p.suffix == ".jsonl"
                for line in data.splitlines()]
    assert [r["kind"] for r in recorded].count("exchange") == len(planted) + 1
    assert "gap" not in {r["kind"] for r in recorded}
    assert '"event":"exchange"' in log  # the logs were captured

    everything = {**{str(p): d for p, d in files.items()}, "stderr": log.encode(),
                  "metrics": metrics.encode(), **{k: v.encode() for k, v in outputs.items()}}
    for plan in planted:
        for where, data in everything.items():
            assert plan.secret.encode() not in data, f"{plan} leaked into {where}"
    # Digests: no unkeyed digest of any crossing byte string, and no 4-digit guess matches.
    hexes = set(re.findall(rb"[0-9a-f]{64}", b"\n".join(files.values())))
    assert hexes, "the bundle holds digests"
    for data in crossed:
        for part in data.split(b"\0"):
            assert hashlib.sha256(part).hexdigest().encode() not in hexes
    guesses = {hashlib.sha256(_PIN_BODY.format(pin=f"{n:04d}").encode()).hexdigest().encode()
               for n in range(10000)}
    assert not guesses & hexes
