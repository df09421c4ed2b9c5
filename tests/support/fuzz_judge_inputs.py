"""Generated exchanges for the JSON-RPC judge, and the properties its verdicts must keep.

Shared by ``tests/core/test_fuzz_judge.py`` (hypothesis draws a seed) and ``bench/fuzz_judge.py``
(the long run). Two kinds of input, each a function of one ``random.Random``:

* :func:`random_exchange`: an exchange built from generated JSON-RPC messages, valid-ish
  (known methods, schema-shaped params and results, both eras' headers and ``_meta``) and
  mutated (wrong types, missing fields, huge numbers, deep nesting, odd Unicode, batches,
  broken JSON, SSE bodies, truncation). Property (:func:`check_findings`): ``judge`` raises
  nothing, every finding's rule is in the catalog with the strength the catalog gives it
  for the era (must or should: a MAY is never a finding), and its message is one line.
* :func:`harmless_variant`: a golden case of the transcripts corpus (which must give no
  finding) with changes that do not change its meaning: key order, JSON whitespace, the
  request id (an integer or a string, mirrored in the answer), header-name case.
  Property: still zero findings.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from typing import Any

import orjson

from mcp_tap.core.catalog import CATALOG
from mcp_tap.core.deepjson import dumps as deep_dumps
from mcp_tap.core.eras import (
    LEGACY_VERSIONS,
    META_CLIENT_CAPABILITIES,
    META_PROTOCOL_VERSION,
    META_SUBSCRIPTION_ID,
    MODERN_VERSIONS,
    NAME_ROUTED_PARAMS,
    Era,
)
from mcp_tap.core.exchange import Exchange, Judgement, judge
from mcp_tap.core.findings import Strength
from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.responses import decode_sse
from mcp_tap.core.sse import SSEEvent, encode_event
from mcp_tap.transcripts import Case, case_exchange, judge_alone, load_corpus

_METHODS = ("initialize", "notifications/initialized", "ping", "tools/list", "tools/call",
            "resources/list", "resources/read", "resources/subscribe", "prompts/list",
            "prompts/get", "completion/complete", "logging/setLevel", "server/discover",
            "tasks/get", "tasks/cancel", "tasks/update", "subscriptions/listen",
            "notifications/progress", "notifications/cancelled", "notifications/message",
            "sampling/createMessage", "elicitation/create", "roots/list", "x/unknown", "",
            "rpc.discover", "TOOLS/LIST")
_VERSIONS = (*MODERN_VERSIONS, *LEGACY_VERSIONS, "2099-01-01", "", "2026-07-28 ", "1")
_STRINGS = ("", "echo", "a b", "\u00e9\u4e2d\U0001f600", "\u202e\u0000", "x" * 300, "1",
            "file:///etc/passwd", "\ufeffbom", "=?base64?YQ==?=", "null", "\u0301\u0301",
            "\ud7ff\ue000", "Mcp-Name", " lead", "trail ", "12.50", "-0")
_NUMBERS = (0, 1, -1, 2**31, 2**53 + 1, 2**63, -(2**63) - 1, 2**70, 10**40, 0.5, -0.0,
            1e308, 3.0)
_KEYS = ("name", "arguments", "uri", "cursor", "_meta", "progressToken", "taskId", "level",
         "capabilities", "clientInfo", "protocolVersion", "text", "type", "content", "tools",
         "inputSchema", "isError", "resultType", "ttlMs", "cacheScope", "x", "")


def _scalar(rng: random.Random) -> Any:
    roll = rng.random()
    if roll < 0.35:
        return rng.choice(_STRINGS)
    if roll < 0.65:
        return rng.choice(_NUMBERS)
    return rng.choice([None, True, False, [], {}])


def _value(rng: random.Random, depth: int) -> Any:
    """A random JSON value of at most ``depth`` levels."""
    roll = rng.random()
    if depth <= 0 or roll < 0.45:
        return _scalar(rng)
    if roll < 0.8:
        return {rng.choice(_KEYS): _value(rng, depth - 1) for _ in range(rng.randint(0, 4))}
    return [_value(rng, depth - 1) for _ in range(rng.randint(0, 4))]


def _deep(rng: random.Random) -> Any:
    node: Any = _scalar(rng)
    for _ in range(rng.choice([50, 300, 1200, 3000])):
        node = [node] if rng.random() < 0.5 else {"a": node}
    return node


def _meta(rng: random.Random, version: str) -> dict[str, Any]:
    meta: dict[str, Any] = {META_PROTOCOL_VERSION: version,
                            META_CLIENT_CAPABILITIES: rng.choice([{}, {"elicitation": {}},
                                                                  {"extensions": {}}])}
    if rng.random() < 0.3:
        meta["progressToken"] = rng.choice([1, "p", None])
    if rng.random() < 0.2:
        del meta[rng.choice(sorted(meta))]
    return meta


def _params(rng: random.Random, method: str, modern: bool, version: str) -> Any:
    params: dict[str, Any] = {}
    if method in NAME_ROUTED_PARAMS:
        params[NAME_ROUTED_PARAMS[method]] = rng.choice(["echo", "file:///a", "t1", "a b", ""])
    if method == "tools/call":
        params["arguments"] = rng.choice([{"text": "hi"}, {}, {"n": 2**70}, _value(rng, 2)])
    if method == "initialize":
        params.update(protocolVersion=version, capabilities={},
                      clientInfo={"name": "fuzz", "version": "1"})
    if method == "notifications/progress":
        params.update(progressToken=1, progress=rng.choice([1, 0.5, -1, "x"]), total=10)
    if modern:
        params["_meta"] = _meta(rng, version)
    return params


def _message(rng: random.Random, modern: bool, version: str) -> Any:
    """A JSON-RPC request or notification (valid-ish for its era)."""
    method = rng.choice(_METHODS)
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if not method.startswith("notifications/") or rng.random() < 0.1:
        msg["id"] = rng.choice([1, 0, "a", "1", 2**63, -1, None, 1.5, True, [], "\u00e9"])
    if rng.random() < 0.9:
        msg["params"] = _params(rng, method, modern, version)
    return msg


def _result(rng: random.Random, method: str, modern: bool) -> Any:
    result: dict[str, Any] = {}
    if method == "tools/list":
        result["tools"] = [{"name": rng.choice(["echo", "", "a b"]), "inputSchema":
                            rng.choice([{"type": "object"}, {}, {"type": "string"}])}]
    elif method == "tools/call":
        result["content"] = [{"type": rng.choice(["text", "image", "x"]), "text": "hi"}]
        if rng.random() < 0.3:
            result["isError"] = rng.choice([True, False, "yes"])
    elif method == "initialize":
        result.update(protocolVersion=rng.choice(_VERSIONS), capabilities={},
                      serverInfo={"name": "s", "version": "1"})
    elif method == "server/discover":
        result.update(supportedVersions=list(MODERN_VERSIONS), capabilities={})
    if modern:
        result["resultType"] = rng.choice(["complete", "complete", "input_required", "x", 1])
        if rng.random() < 0.5:
            result.update(ttlMs=rng.choice([0, 60000, -1, None, "x"]),
                          cacheScope=rng.choice(["public", "private", "x"]))
    return result


def _answer(rng: random.Random, request: Any, modern: bool) -> Any:
    """A response to ``request`` (a result or an error), or a stray message."""
    rid = request.get("id") if isinstance(request, dict) else None
    method = request.get("method", "") if isinstance(request, dict) else ""
    roll = rng.random()
    if roll < 0.55:
        return {"jsonrpc": "2.0", "id": rid,
                "result": _result(rng, method if isinstance(method, str) else "", modern)}
    if roll < 0.85:
        error: dict[str, Any] = {"code": rng.choice([-32700, -32600, -32601, -32602, -32603,
                                                     -32020, -32021, -32022, -32002, 0, 1.5,
                                                     "x", 2**70]),
                                 "message": rng.choice(["bad", "", 5, "a\nb"])}
        if rng.random() < 0.3:
            error["data"] = _value(rng, 2)
        return {"jsonrpc": "2.0", "id": rid, "error": error}
    return _message(rng, modern, MODERN_VERSIONS[0])


def mutate(rng: random.Random, value: Any, depth: int = 0) -> Any:
    """Replace, drop or retype one node somewhere in ``value`` (a copy)."""
    if isinstance(value, dict) and value and rng.random() < 0.75 and depth < 20:
        out = dict(value)
        key = rng.choice(sorted(out, key=str))
        roll = rng.random()
        if roll < 0.25:
            del out[key]
        elif roll < 0.5:
            out[key] = rng.choice([_scalar(rng), _value(rng, 2), _deep(rng)])
        else:
            out[key] = mutate(rng, out[key], depth + 1)
        if rng.random() < 0.1:
            out[rng.choice(_KEYS)] = _scalar(rng)
        return out
    if isinstance(value, list) and value and rng.random() < 0.75 and depth < 20:
        out_list = list(value)
        at = rng.randrange(len(out_list))
        out_list[at] = mutate(rng, out_list[at], depth + 1)
        return out_list
    return rng.choice([_scalar(rng), _value(rng, 3), [value, value], {"x": value}])


def _dumps(value: Any) -> bytes:
    try:
        return orjson.dumps(value)
    except TypeError:  # too deep or an integer past 64 bits: the iterative writer
        return deep_dumps(value).encode()


def _text(rng: random.Random, value: Any) -> bytes:
    """The body bytes of a message: JSON, sometimes broken or padded."""
    data = _dumps(value)
    roll = rng.random()
    if roll < 0.05:
        return data[: rng.randrange(len(data) + 1)]
    if roll < 0.08:
        return rng.choice([b"", b" ", b"\xff\xfe", b"{\"a\":\"\\ud800\"}", b"NaN", b"[]",
                           b"\x00", data + b"x", b"\xef\xbb\xbf" + data])
    return data


def _sse(rng: random.Random, messages: list[Any]) -> bytes:
    out = b": primer\n\n" if rng.random() < 0.2 else b""
    for i, msg in enumerate(messages):
        data = _text(rng, msg).decode("utf-8", "replace")
        out += encode_event(data, id=str(i) if rng.random() < 0.3 else None)
        if rng.random() < 0.1:
            out += rng.choice([b"retry: 10\n\n", b"event: weird\ndata: x\n\n", b"data: {",
                               b"id: \x00\n\n", b":\n"])
    return out


def _headers(rng: random.Random, modern: bool, version: str, request: Any) -> HeaderMap:
    pairs: list[tuple[str, str]] = []
    if rng.random() < 0.9:
        pairs.append(("Accept", rng.choice(["application/json, text/event-stream",
                                            "application/json", "*/*", "text/event-stream",
                                            "application/json;q=0.9, text/event-stream"])))
    if rng.random() < 0.9:
        pairs.append(("Content-Type", rng.choice(["application/json", "text/plain",
                                                  "application/json; charset=utf-8"])))
    if modern or rng.random() < 0.5:
        pairs.append(("MCP-Protocol-Version", version))
    method = request.get("method") if isinstance(request, dict) else None
    if isinstance(method, str) and (modern or rng.random() < 0.3):
        pairs.append(("Mcp-Method", method if rng.random() < 0.9 else "tools/list"))
        params = request.get("params")
        routed = NAME_ROUTED_PARAMS.get(method)
        if routed and isinstance(params, dict) and isinstance(params.get(routed), str):
            pairs.append(("Mcp-Name", params[routed] if rng.random() < 0.9 else "other"))
    if not modern and rng.random() < 0.7:
        pairs.append(("Mcp-Session-Id", rng.choice(["s1", "", "\u00e9", "a b"])))
    if rng.random() < 0.15:
        pairs.append(("Origin", rng.choice(["http://evil.example", "http://127.0.0.1:3000",
                                            "null"])))
        pairs.append(("Host", rng.choice(["127.0.0.1:8080", "localhost", "example.com"])))
    if rng.random() < 0.1:
        pairs.append(("Mcp-Param-Text", rng.choice(["hi", "=?base64?aGk=?=", ""])))
    if rng.random() < 0.05:  # bytes a wire head may hold, as latin-1 text
        pairs.append(rng.choice([("Mcp-Method", "tools/\xe9"), ("MCP-Protocol-Version", "\xff"),
                                 ("Accept", "application/json\x00"), ("Mcp-Name", "\x7f"),
                                 ("mcp-protocol-version", "2026-07-28, 2025-11-25")]))
    if rng.random() < 0.1 and pairs:
        pairs.append(rng.choice(pairs))  # a duplicate
    rng.shuffle(pairs)
    return HeaderMap(tuple(pairs))


def random_exchange(rng: random.Random) -> tuple[Exchange, str]:
    """A generated exchange and the boundary (``where``) to judge it at."""
    modern = rng.random() < 0.6
    version = rng.choice(_VERSIONS) if rng.random() < 0.2 else (
        MODERN_VERSIONS[0] if modern else rng.choice(LEGACY_VERSIONS))
    request: Any = _message(rng, modern, version)
    if rng.random() < 0.1:
        request = [request, _message(rng, modern, version)]  # a batch
    if rng.random() < 0.35:
        request = mutate(rng, request)
    answers = [_answer(rng, request if isinstance(request, dict) else {}, modern)
               for _ in range(rng.choice([1, 1, 1, 2, 3]))]
    if rng.random() < 0.3:
        answers = [mutate(rng, a) for a in answers]
    sse = rng.random() < 0.35
    if sse:
        body = _sse(rng, answers)
        content_type = "text/event-stream"
    else:
        body = _text(rng, answers[0] if rng.random() < 0.9 else answers)
        content_type = rng.choice(["application/json", "application/json", "text/html", ""])
    events: list[SSEEvent] | None = None
    if sse and rng.random() < 0.2:  # events as the proxy hands them over, with odd fields
        events, _ = decode_sse(body)
        events += [SSEEvent(_text(rng, _value(rng, 2)).decode("utf-8", "replace"),
                            rng.choice([None, "message", "", "x"]),
                            rng.choice([None, "", "1", "\x00"]),
                            rng.choice([None, 0, -1, 2**40]))
                   for _ in range(rng.randint(0, 2))]
    response_pairs = [("Content-Type", content_type)] if content_type else []
    if rng.random() < 0.2:
        response_pairs.append(("Mcp-Session-Id", rng.choice(["s1", "", "\x7f"])))
    if rng.random() < 0.1:
        response_pairs.append(("WWW-Authenticate", 'Bearer resource_metadata="x"'))
    exchange = Exchange(
        request_headers=_headers(rng, modern, version, request),
        request_body=_text(rng, request),
        response_status=rng.choice([200, 200, 200, 202, 400, 401, 404, 405, 500, 204, None]),
        response_headers=HeaderMap(tuple(response_pairs)),
        response_body=body if rng.random() < 0.95 else b"",
        http_method=rng.choice(["POST"] * 8 + ["GET", "DELETE", "OPTIONS", "put"]),
        era=rng.choice([None, None, Era.MODERN, Era.LEGACY, Era.UNKNOWN]),
        capabilities=frozenset(rng.sample(["tools", "resources", "prompts", "logging",
                                           "completions", "tasks"], k=rng.randint(0, 3))),
        tool_schemas=rng.choice([{}, {"echo": {"type": "object", "properties": {
            "text": {"type": "string", "x-mcp-header": "Text"}}}}, {"echo": _value(rng, 3)}]),
        legacy_session=not modern and rng.random() < 0.7,
        negotiated_version=rng.choice([None, None, version, "2025-03-26"]),
        request_truncated=rng.random() < 0.03,
        response_truncated=rng.random() < 0.03,
        allowed_origins=rng.choice([None, None, ("http://127.0.0.1:3000",), ()]),
        sse_events=events,
    )
    return exchange, rng.choice(["origin", "origin", "egress", "ingress"])


def check_findings(result: Judgement) -> None:
    """Every finding names a catalog rule, at the catalog's strength for the era (never a
    MAY), with a one-line message."""
    for found in result.findings:
        rule = CATALOG.get(found.rule)
        assert rule is not None, f"rule {found.rule!r} is not in the catalog"
        assert found.strength in (Strength.MUST, Strength.SHOULD), found
        assert found.strength == rule.strength_in(result.era), (
            f"{found.rule}: strength {found.strength} but the catalog says "
            f"{rule.strength_in(result.era)} in the {result.era} era")
        assert "\n" not in found.message and "\r" not in found.message, (
            f"{found.rule}: a message of several lines: {found.message[:200]!r}")


def judge_random(rng: random.Random) -> int:
    """Judge one generated exchange and check the findings; the number of findings."""
    exchange, where = random_exchange(rng)
    result = judge(exchange, where=where)
    check_findings(result)
    return len(result.findings)


# -- harmless variants of golden cases ---------------------------------------------------------

GOLDEN: tuple[Case, ...] = tuple(c for c in load_corpus() if c.golden)


def _shuffled(rng: random.Random, value: Any) -> Any:
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {k: _shuffled(rng, value[k]) for k in keys}
    if isinstance(value, list):
        return [_shuffled(rng, v) for v in value]
    return value


def _spaced(rng: random.Random, value: Any) -> bytes:
    """JSON with insignificant whitespace (RFC 8259 section 2) in one of a few styles."""
    style = rng.randrange(4)
    if style == 0:
        return orjson.dumps(value)
    if style == 1:
        return json.dumps(value, ensure_ascii=False).encode()
    if style == 2:
        return json.dumps(value, separators=(" , ", " : "), ensure_ascii=False).encode() + b"\n"
    return b" \t" + json.dumps(value, indent=rng.choice([1, 2, "\t"])).encode() + b"\r\n"


def _new_id(rng: random.Random, old: Any) -> Any:
    while True:
        new = rng.choice([rng.randrange(2**31), str(rng.randrange(10**6)), "req-\u00e9",
                          rng.randrange(2**53), "0", "a b"])
        if new != old:
            return new


def _swap_id(value: Any, old: Any, new: Any) -> Any:
    """The answer with the request's id replaced: in a response to it, and in the
    subscription id of a listen stream's notifications (which is the request's id)."""
    def same(x: Any) -> bool:
        return type(x) is type(old) and x == old

    if isinstance(value, dict) and ("result" in value or "error" in value) and \
            same(value.get("id")):
        return {**value, "id": new}
    params = value.get("params") if isinstance(value, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    if isinstance(meta, dict) and same(meta.get(META_SUBSCRIPTION_ID)):
        return {**value, "params": {**params, "_meta": {**meta, META_SUBSCRIPTION_ID: new}}}
    return value


def harmless_variant(rng: random.Random) -> tuple[str, Exchange]:
    """A golden case with meaning-preserving changes: ``(case name, exchange)``."""
    case = GOLDEN[rng.randrange(len(GOLDEN))]
    request, body = case.request, case.response_body
    # (A raw string body keeps its bytes: its ids cannot be swapped.)
    if isinstance(request, dict) and "id" in request and not isinstance(body, str) \
            and rng.random() < 0.6:
        old = request["id"]
        new = _new_id(rng, old)
        request = {**request, "id": new}
        if isinstance(body, dict) and set(body) == {"sse"}:
            body = {"sse": [_swap_id(e, old, new) for e in body["sse"]]}
        else:
            body = _swap_id(body, old, new)
    if rng.random() < 0.7:
        request, body = _shuffled(rng, request), _shuffled(rng, body)
    headers = case.headers
    if rng.random() < 0.5:
        headers = HeaderMap(tuple((_recase(rng, k), v) for k, v in headers.pairs))
    case = replace(case, request=request, response_body=body, headers=headers)
    exchange = case_exchange(case)
    # The same values, written with other whitespace.
    if case.request is not None:
        exchange = replace(exchange, request_body=_spaced(rng, case.request))
    if isinstance(body, dict) and set(body) == {"sse"}:
        events = b"".join(encode_event(e if isinstance(e, str) else
                                       _spaced(rng, e).decode().replace("\n", " "))
                          for e in body["sse"])
        exchange = replace(exchange, response_body=events)
    elif body is not None and not isinstance(body, str):
        exchange = replace(exchange, response_body=_spaced(rng, body))
    return case.name, exchange


def _recase(rng: random.Random, name: str) -> str:
    return "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in name)


def judge_golden(rng: random.Random) -> str:
    """Judge one harmless variant of a golden case: it must give no finding."""
    name, exchange = harmless_variant(rng)
    result, found = judge_alone(exchange)  # judged as its case is (a fixture: nothing after it)
    check_findings(result)
    assert not found, (
        f"{name}: {[(f.rule, f.message) for f in found]}"[:600])
    return name
