"""Differential check of the judge: every finding of a fixed corpus, written to one file, so
two versions of ``mcp_tap/core`` can be compared byte for byte.

A refactoring or a speed-up of the judge must not change a single finding. This script
judges a fixed corpus with whatever ``mcp_tap`` is first on ``PYTHONPATH`` and writes, per
judgement, its label, era, method, a digest of the decoded response messages and every
finding (rule id, code, strength, boundary, place, message), one line each. The corpus:

* ``corpus``: every case of the shipped transcripts corpus (``mcp_tap/transcripts``), judged
  at ``origin`` and at ``egress``;
* ``proxy``: the proxy's own records of ``tests/data/proxy_exchanges.jsonl`` rebuilt as
  exchanges (ingress request, origin answer, JSON or SSE);
* ``bench``: the four exchanges of ``bench/judge_cost.py`` (passing traffic, both eras);
* ``fuzz``: ``tests/fuzz_judge_inputs.random_exchange`` (both eras, mutated messages,
  batches, broken JSON, SSE, truncation, every boundary);
* ``golden``: ``tests/fuzz_judge_inputs.harmless_variant`` (golden cases, reshuffled);
* ``gen``: this script's own exchanges, well-formed requests of both eras (some rejected:
  header mismatch, missing ``_meta``, unsupported version, removed method) answered with
  results, errors of every code and ``data`` shape, plain HTTP errors, empty and non-JSON
  bodies, SSE streams (progress in and out of order, log messages, change notifications,
  listen streams and their filters, server requests, messages after the response, no
  response at all) and 2025-03-26 batches;

and, for each SSE exchange judged with a request verdict, the stream again as a legacy
resumption (``check_sse_stream(..., resumed=True)``). Inputs are a function of ``--seed``
and their index only (``random.Random(f"{seed}:{target}:{index}")``).

Use it (from a worktree; the base tree is any commit, exported with ``git archive``)::

    git archive 008192c | (mkdir -p /tmp/judge-base && tar -x -C /tmp/judge-base)
    PYTHONPATH=/tmp/judge-base .venv/bin/python bench/judge_differential.py -o /tmp/base.txt
    PYTHONPATH=$PWD .venv/bin/python bench/judge_differential.py -o /tmp/new.txt
    cmp /tmp/base.txt /tmp/new.txt && echo identical

(The script, its generators in ``tests/support/fuzz_judge_inputs.py`` and ``bench/`` are this
tree's; only ``mcp_tap`` comes from ``PYTHONPATH``.) ``-n`` sets the number of generated
inputs per generated target (default 3000). It prints the number of judgements and findings.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "support"))

from mcp_tap.core.deepjson import dumps as deep_dumps  # noqa: E402
from mcp_tap.core.eras import (  # noqa: E402
    LEGACY_VERSIONS,
    META_CLIENT_CAPABILITIES,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    META_SUBSCRIPTION_ID,
    NAME_ROUTED_PARAMS,
    Era,
)
from mcp_tap.core.exchange import Exchange, Judgement, judge  # noqa: E402
from mcp_tap.core.findings import Finding  # noqa: E402
from mcp_tap.core.headers import HeaderMap  # noqa: E402
from mcp_tap.core.sse import SSEEvent, encode_event  # noqa: E402

MODERN = "2026-07-28"
Item = tuple[str, Exchange, str]  # label, exchange, where


def _json(value: Any) -> bytes:
    try:
        return orjson.dumps(value)
    except TypeError:
        return deep_dumps(value).encode()


# -- the corpus ---------------------------------------------------------------------------------


def corpus() -> Iterator[Item]:
    """The transcripts corpus, at origin and at egress."""
    from mcp_tap.transcripts import case_exchange, load_corpus

    for case in load_corpus():
        exchange = case_exchange(case)
        for where in ("origin", "egress"):
            yield f"corpus {case.name} {where}", exchange, where


def proxy() -> Iterator[Item]:
    """The proxy's records of tests/data/proxy_exchanges.jsonl, rebuilt."""
    path = HERE.parent / "tests" / "data" / "proxy_exchanges.jsonl"
    for n, line in enumerate(path.read_bytes().splitlines()):
        record = orjson.loads(line)
        ingress, origin = record["ingress"], record["origin"]
        events = None
        body = b""
        if origin.get("sse"):
            events = [SSEEvent(e["data"] if isinstance(e["data"], str) else
                               orjson.dumps(e["data"]).decode(), e.get("event"), e.get("id"))
                      for e in origin["sse"]]
            body = b"".join(encode_event(e.data, id=e.id) for e in events)
        elif origin.get("body") is not None:
            body = _json(origin["body"])
        legacy = record["era"] == "legacy"
        exchange = Exchange(
            request_headers=HeaderMap(tuple(tuple(p) for p in ingress["headers"])),
            request_body=_json(ingress["body"]) if "body" in ingress else b"",
            response_status=origin.get("status"),
            response_headers=HeaderMap(tuple(tuple(p) for p in origin.get("headers", ()))),
            response_body=body,
            legacy_session=legacy,
            negotiated_version="2025-11-25" if legacy else None,
            capabilities=frozenset({"tools", "prompts", "resources", "completions"}),
        )
        yield f"proxy {n}", exchange, "origin"
        if events is not None:
            yield f"proxy {n} events", Exchange(**{
                **{f: getattr(exchange, f) for f in exchange.__dataclass_fields__},
                "sse_events": events}), "origin"


def bench() -> Iterator[Item]:
    """The four exchanges of bench/judge_cost.py."""
    import judge_cost

    for kind, exchange in judge_cost.exchanges().items():
        yield f"bench {kind}", exchange, "origin"


def fuzz(seed: int, count: int) -> Iterator[Item]:
    """tests/fuzz_judge_inputs.random_exchange."""
    from fuzz_judge_inputs import random_exchange

    for i in range(count):
        exchange, where = random_exchange(random.Random(f"{seed}:fuzz:{i}"))
        yield f"fuzz {i}", exchange, where


def golden(seed: int, count: int) -> Iterator[Item]:
    """tests/fuzz_judge_inputs.harmless_variant."""
    from fuzz_judge_inputs import harmless_variant

    for i in range(count):
        name, exchange = harmless_variant(random.Random(f"{seed}:golden:{i}"))
        yield f"golden {i} {name}", exchange, "origin"


# -- this script's generator ------------------------------------------------------------------

_METHODS = ("tools/call", "tools/list", "resources/read", "resources/list", "prompts/get",
            "prompts/list", "completion/complete", "server/discover", "tasks/get",
            "subscriptions/listen", "ping", "initialize", "logging/setLevel",
            "notifications/cancelled", "notifications/initialized", "x/unknown")
_CODES = (-32700, -32600, -32601, -32602, -32603, -32020, -32021, -32022, -32002, -32042,
          -32050, -32099, -32000, -1, 0, 1, 400, True, "x", None, 1.5)
_STATUSES = (200, 200, 200, 200, 202, 400, 401, 403, 404, 405, 429, 500, 503)
_LISTEN_NOTES = ("notifications/subscriptions/acknowledged", "notifications/tools/list_changed",
                 "notifications/prompts/list_changed", "notifications/resources/list_changed",
                 "notifications/resources/updated", "notifications/cancelled",
                 "notifications/message", "notifications/progress")


def _request(rng: random.Random, modern: bool, version: str) -> dict[str, Any]:
    method = rng.choice(_METHODS)
    params: dict[str, Any] = {}
    if method in NAME_ROUTED_PARAMS:
        params[NAME_ROUTED_PARAMS[method]] = rng.choice(
            ["echo", "file:///a.txt", "t1", "ask"] * 3
            + [" echo", "echo\t", "\u00e9cho", "=?base64?ZWNobw==?=", "=?base64", "", 5])
    if method == "tools/call":
        params["arguments"] = rng.choice([{"text": "hi"}, {}, {"text": 3}])
    if method == "initialize":
        params.update(protocolVersion=version, capabilities={},
                      clientInfo={"name": "diff", "version": "1"})
    if method == "subscriptions/listen":
        params["notifications"] = rng.choice([
            {}, {"toolsListChanged": True}, {"promptsListChanged": True,
                                             "resourcesListChanged": rng.random() < 0.5},
            {"resourceSubscriptions": ["file:///a.txt"]}, "x"])
    if method == "completion/complete":
        params.update(ref={"type": "ref/prompt", "name": "p"},
                      argument={"name": "a", "value": "b"})
    if modern:
        meta: dict[str, Any] = {META_PROTOCOL_VERSION: version,
                                META_CLIENT_CAPABILITIES: rng.choice(
                                    [{}, {"elicitation": {}}, {"extensions": {"x/y": {}}},
                                     {"sampling": {}, "extensions": []}])}
        if rng.random() < 0.4:
            meta["progressToken"] = rng.choice([1, "p", "q", 2])
        if rng.random() < 0.3:
            meta[META_LOG_LEVEL] = "info"
        if rng.random() < 0.08:
            del meta[rng.choice(sorted(meta))]
        params["_meta"] = meta
    elif rng.random() < 0.3:
        params["_meta"] = {"progressToken": rng.choice([1, "p"])}
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if not method.startswith("notifications/"):
        msg["id"] = rng.choice([1, 7, "a", "1", 0, 2**40])
    if params or rng.random() < 0.5:
        msg["params"] = params
    if rng.random() < 0.04:
        msg["jsonrpc"] = rng.choice(["1.0", None])
    return msg


def _req_headers(rng: random.Random, modern: bool, version: str,
                 msg: dict[str, Any]) -> HeaderMap:
    pairs = [("Content-Type", "application/json"),
             ("Accept", rng.choice(["application/json, text/event-stream"] * 5 +
                                   ["application/json"]))]
    if modern or rng.random() < 0.7:
        pairs.append(("MCP-Protocol-Version",
                      version if rng.random() < 0.93 else rng.choice(["2099-01-01", MODERN])))
    method = msg["method"]
    if modern:
        if rng.random() < 0.95:
            pairs.append(("Mcp-Method", method if rng.random() < 0.93 else "tools/list"))
        routed = NAME_ROUTED_PARAMS.get(method)
        params = msg.get("params") or {}
        if routed and isinstance(params.get(routed), str) and rng.random() < 0.95:
            pairs.append(("Mcp-Name", params[routed] if rng.random() < 0.93 else "other"))
    else:
        pairs.append(("Mcp-Session-Id", "s-1"))
    if rng.random() < 0.05:
        pairs.append(("Mcp-Param-Text", rng.choice(["hi", "ho"])))
    if rng.random() < 0.25:
        pairs = _odd_headers(rng, pairs)
    return HeaderMap(tuple(pairs))


def _odd_headers(rng: random.Random, pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The routing headers written other ways: optional whitespace, the Base64 sentinel
    (canonical or not), a duplicate (equal or not), another letter case."""
    out = list(pairs)
    at = rng.randrange(len(out))
    name, value = out[at]
    roll = rng.random()
    if roll < 0.3:
        value = rng.choice([" ", "\t", "  ", ""]) + value + rng.choice([" ", "\t", ""])
    elif roll < 0.5:
        encoded = base64.b64encode(value.encode()).decode()
        value = rng.choice([f"=?base64?{encoded}?=", f"=?BASE64?{encoded}?=",
                            f"=?base64?{encoded}", f"=?base64?{encoded}x?=", "=?base64??="])
    elif roll < 0.7:
        out.append((name, rng.choice([value, value + "x", " " + value])))
    elif roll < 0.85:
        name = rng.choice([name.lower(), name.upper()])
    else:
        value = rng.choice([value + "\x7f", "\u00e9" + value, value + "\x00"])
    out[at] = (name, value)
    return out


def _result(rng: random.Random, method: str, modern: bool, version: str) -> Any:
    result: dict[str, Any]
    if method == "tools/list":
        result = {"tools": [{"name": "echo", "inputSchema": {"type": "object", "properties": {
            "text": {"type": "string"}}}}]}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "hi"}]}
        if rng.random() < 0.2:
            result["isError"] = rng.choice([True, "yes"])
        if rng.random() < 0.1:
            result["structuredContent"] = {"result": "hi"}
    elif method == "resources/read":
        result = {"contents": [{"uri": "file:///a.txt", "text": "a"}]}
    elif method == "resources/list":
        result = {"resources": [{"uri": "file:///a.txt", "name": "a"}]}
    elif method == "prompts/get":
        result = {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}]}
    elif method == "prompts/list":
        result = {"prompts": [{"name": "p"}]}
    elif method == "completion/complete":
        result = {"completion": {"values": ["a"]}}
    elif method == "server/discover":
        result = {"supportedVersions": [MODERN], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "s", "version": "1"}}
    elif method == "initialize":
        result = {"protocolVersion": rng.choice([version, MODERN, "2025-06-18"]),
                  "capabilities": {"tools": {}}, "serverInfo": {"name": "s", "version": "1"}}
    elif method == "tasks/get":
        result = {"taskId": "t1", "status": rng.choice(["working", "completed", "x"])}
    else:
        result = {}
    if modern:
        result["resultType"] = rng.choice(["complete"] * 6 + ["input_required", "x"])
        if rng.random() < 0.2:
            result.update(ttlMs=rng.choice([0, 60000, -1]),
                          cacheScope=rng.choice(["public", "private", "x"]))
    if rng.random() < 0.05:
        return rng.choice([[], "x", None, 3])
    return result


def _error(rng: random.Random) -> Any:
    code = rng.choice(_CODES)
    error: dict[str, Any] = {"code": code, "message": rng.choice(["bad", "", 5, None])}
    roll = rng.random()
    if code == -32022 and roll < 0.7:
        error["data"] = rng.choice([{"supported": [MODERN], "requested": "2099-01-01"},
                                    {"supported": "x", "requested": "y"},
                                    {"supported": [MODERN], "requested": 3},
                                    {"supported": [1]}, "x"])
    elif code == -32021 and roll < 0.7:
        error["data"] = rng.choice([{"requiredCapabilities": {"sampling": {}}},
                                    {"requiredCapabilities": []}, None])
    elif roll < 0.2:
        error["data"] = {"x": 1}
    if rng.random() < 0.04:
        return rng.choice(["boom", 5, [error]])
    if rng.random() < 0.05:
        del error["message"]
    return error


def _response(rng: random.Random, msg: dict[str, Any], modern: bool, version: str) -> Any:
    rid = msg.get("id")
    if rng.random() < 0.08:
        rid = rng.choice([str(rid), 99, None, "zz"])
    out: dict[str, Any] = {"jsonrpc": "2.0"}
    if rng.random() < 0.96:
        out["id"] = rid
    roll = rng.random()
    if roll < 0.6:
        out["result"] = _result(rng, msg["method"], modern, version)
    elif roll < 0.95:
        out["error"] = _error(rng)
    elif roll < 0.975:
        out["result"] = {}
        out["error"] = _error(rng)
    if rng.random() < 0.03:
        out["jsonrpc"] = rng.choice(["1.0", 2])
    if rng.random() < 0.02:
        return rng.choice([[out], "x", 1])
    return out


def _notification(rng: random.Random, msg: dict[str, Any], progress: list[float]) -> Any:
    meta = (msg.get("params") or {}).get("_meta") or {} if isinstance(
        msg.get("params"), dict) else {}
    roll = rng.random()
    if roll < 0.45:
        value = progress[-1] + rng.choice([1, 1, 1, 0.5, 0, -1]) if progress else rng.choice(
            [0, 1, 0.5])
        progress.append(value)
        token = meta.get("progressToken", 1) if isinstance(meta, dict) else 1
        params: dict[str, Any] = {"progressToken": token if rng.random() < 0.9 else "other",
                                  "progress": value if rng.random() < 0.95 else "x",
                                  "total": 10}
        return {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}
    if roll < 0.7:
        return {"jsonrpc": "2.0", "method": "notifications/message",
                "params": {"level": "info", "data": "x"}}
    if roll < 0.8:
        return {"jsonrpc": "2.0", "method": rng.choice(_LISTEN_NOTES)}
    if roll < 0.88:
        return {"jsonrpc": "2.0", "method": "sampling/createMessage", "id": 5,
                "params": {"messages": [], "maxTokens": 5}}
    if roll < 0.94:
        return {"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": msg.get("id")}}
    return rng.choice([{"jsonrpc": "2.0"}, {"x": 1}, "not json at all", [], ""])


def _listen_note(rng: random.Random, msg: dict[str, Any], first: bool) -> Any:
    method = "notifications/subscriptions/acknowledged" if first and rng.random() < 0.85 else \
        rng.choice(_LISTEN_NOTES)
    sub = msg.get("id") if rng.random() < 0.9 else rng.choice(["other", None])
    params: dict[str, Any] = {}
    if rng.random() < 0.95:
        params["_meta"] = {META_SUBSCRIPTION_ID: sub}
    if method == "notifications/resources/updated":
        params["uri"] = rng.choice(["file:///a.txt", "file:///b.txt"])
    return {"jsonrpc": "2.0", "method": method, "params": params}


def _sse_body(rng: random.Random, msg: dict[str, Any], modern: bool, version: str,
              batch: list[dict[str, Any]] | None) -> bytes:
    parts: list[Any] = []
    progress: list[float] = []
    listen = msg["method"] == "subscriptions/listen"
    if rng.random() < 0.2:
        parts.append("")  # a priming event
    for i in range(rng.choice([0, 0, 1, 1, 2, 3, 5])):
        parts.append(_listen_note(rng, msg, i == 0) if listen else
                     _notification(rng, msg, progress))
    if batch is not None:
        answers = [_response(rng, m, modern, version) for m in batch if "id" in m]
        rng.shuffle(answers)
        parts += answers[: len(answers) - (rng.random() < 0.15)]
    elif not listen and rng.random() < 0.92:
        parts.append(_response(rng, msg, modern, version))
    if rng.random() < 0.1:
        parts.append(_notification(rng, msg, progress))
    body = b": hello\n\n" if rng.random() < 0.1 else b""
    for i, part in enumerate(parts):
        data = part if isinstance(part, str) else _json(part).decode()
        body += encode_event(data, id=f"e{i}" if rng.random() < 0.3 else None)
    if rng.random() < 0.05:
        body += b"data: {\"jsonrpc\""  # cut off
    return body


def generated(seed: int, count: int) -> Iterator[Item]:
    """This script's exchanges: well-formed requests, every kind of answer."""
    for i in range(count):
        rng = random.Random(f"{seed}:gen:{i}")
        modern = rng.random() < 0.6
        version = MODERN if modern else rng.choice(LEGACY_VERSIONS[:3])
        msg = _request(rng, modern, version)
        batch = None
        if not modern and version == "2025-03-26" and rng.random() < 0.3:
            batch = [msg, _request(rng, modern, version), _request(rng, modern, version)]
        headers = _req_headers(rng, modern, version, msg)
        roll = rng.random()
        status = rng.choice(_STATUSES)
        response_headers: tuple[tuple[str, str], ...]
        if roll < 0.4:
            body = _json([_response(rng, m, modern, version) for m in batch if "id" in m]
                         if batch else _response(rng, msg, modern, version))
            response_headers = (("Content-Type", rng.choice(
                ["application/json"] * 8 + ["application/json; charset=utf-8", "text/plain"])),)
        elif roll < 0.75:
            body = _sse_body(rng, msg, modern, version, batch)
            response_headers = (("Content-Type", "text/event-stream"),)
        elif roll < 0.85:
            status = rng.choice([401, 403, 429, 500, 502, 503, 202, 204, 413])
            body = rng.choice([b"", b"Unauthorized", b"<html>oops</html>"])
            response_headers = (("Content-Type", rng.choice(["text/plain", "text/html", ""])),)
            if status == 401 and rng.random() < 0.6:
                response_headers += (("WWW-Authenticate",
                                      'Bearer resource_metadata="https://a/.well-known/x"'),)
        else:
            body = rng.choice([b"", b"   ", b"{", b"[1,", b"null", b"{}", b"\xff"])
            response_headers = (("Content-Type", rng.choice(["application/json", ""])),)
        if msg["method"] == "initialize" and not modern and rng.random() < 0.7:
            response_headers += (("Mcp-Session-Id", rng.choice(["s-1", "", "bad id"])),)
        if status == 200 and msg["method"].startswith("notifications/") and rng.random() < 0.6:
            status, body = 202, b""
        events = None
        if response_headers[0][1] == "text/event-stream" and rng.random() < 0.4:
            from mcp_tap.core.sse import SSEDecoder

            decoder = SSEDecoder()
            events = decoder.feed(body) + decoder.close()
        request = batch if batch else msg
        exchange = Exchange(
            request_headers=headers,
            request_body=_json(request),
            response_status=status,
            response_headers=HeaderMap(response_headers),
            response_body=body,
            era=rng.choice([None, None, None, Era.MODERN if modern else Era.LEGACY]),
            capabilities=frozenset(rng.sample(["tools", "resources", "prompts", "logging",
                                               "completions", "tasks"], k=rng.randint(0, 6))),
            tool_schemas=rng.choice([{}, {"echo": {"type": "object", "properties": {
                "text": {"type": "string", "x-mcp-header": "Text"}}}},
                {"echo": {"type": "object", "properties": {"text": {"type": "string"}}}}]),
            legacy_session=not modern,
            negotiated_version=None if modern else rng.choice([version, version, None]),
            sse_events=events,
        )
        yield f"gen {i}", exchange, rng.choice(["origin", "origin", "egress"])


# -- output ---------------------------------------------------------------------------------------


def _finding(f: Finding) -> str:
    return orjson.dumps([f.rule, f.code, str(f.strength), str(f.boundary), f.where,
                         f.message]).decode()


def _messages_digest(result: Judgement) -> str:
    h = hashlib.sha256()
    for m in (result.request_message, *result.response_messages):
        h.update(_json(m))
        h.update(b"\n")
    return h.hexdigest()[:16]


def _resumed(result: Judgement, exchange: Exchange, where: str) -> list[Finding] | None:
    """The stream judged again as a legacy resumption, when the exchange had one."""
    from mcp_tap.core.responses import check_sse_stream, decode_sse

    if result.request is None or result.context is None:
        return None
    if exchange.response_headers.content_type() != "text/event-stream":
        return None
    events = (list(exchange.sse_events) if exchange.sse_events is not None
              else decode_sse(exchange.response_body)[0])
    found, _ = check_sse_stream(result.request, exchange.response_status or 200, events,
                                result.context, where=where, resumed=True)
    return found


def run(items: Iterator[Item], out: Any) -> tuple[int, int]:
    """Judge every item and write its lines; the number of judgements and findings."""
    judged = findings = 0
    for label, exchange, where in items:
        result = judge(exchange, where=where)
        judged += 1
        findings += len(result.findings)
        out.write(f"{label}\t{result.era}\t{result.method!r}\t{_messages_digest(result)}\t"
                  f"{len(result.findings)}\n")
        for f in result.findings:
            out.write(f"  {_finding(f)}\n")
        resumed = _resumed(result, exchange, where)
        if resumed is not None:
            judged += 1
            findings += len(resumed)
            out.write(f"{label} resumed\t{len(resumed)}\n")
            for f in resumed:
                out.write(f"  {_finding(f)}\n")
    return judged, findings


def main() -> None:
    """Judge the corpus and write the findings file."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--out", required=True, help="the findings file to write")
    p.add_argument("-n", type=int, default=3000, help="inputs per generated target")
    p.add_argument("--seed", type=int, default=20261204)
    args = p.parse_args()
    with open(args.out, "w", encoding="utf-8", newline="\n") as out:
        judged = findings = 0
        for items in (corpus(), proxy(), bench(), generated(args.seed, args.n),
                      fuzz(args.seed, args.n), golden(args.seed, args.n)):
            j, f = run(items, out)
            judged += j
            findings += f
    print(f"{judged} judgements, {findings} findings -> {args.out}")


if __name__ == "__main__":
    main()
