"""Every official 2026-07-28 example (shipped as test data under tests/data/spec-examples,
copied from the published specification's examples/) validates against its definition
in the shipped schema.json and, placed in an exchange that matches it, is judged golden.

Each example directory is named after its schema definition. How an example is placed:

- a client request: POSTed with the headers a conforming client sends (no answer);
- a result or a full response: answered to the matching example request (its id);
- a server notification: on the stream it belongs to (progress on the request stream of
  the token it names, a log message on a request that asked for logs, a listen-only
  notification on a listen stream that opted in to it, after the acknowledgement);
- a client notification: POSTed and answered 202;
- an input request (server-to-client): in an ``InputRequiredResult`` to a client that
  declared every capability; an input response: in a ``tools/call`` retry's
  ``inputResponses``;
- an error: answered to a request that owes it (with the status the code maps to); the
  request's own finding is the one expected, the answer adds none;
- a content block, a ``Tool`` or a ``Resource``: inside the result that carries it.

- a fragment (params, capabilities, contents, elicitation field schemas, sampling messages,
  preferences, roots): inside the message that carries it.

A definition no rule places is validated against its definition only (the test says so).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from mcp_tap.core import schema
from mcp_tap.core.exchange import Exchange, judge
from mcp_tap.core.findings import Boundary, Finding
from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.sse import encode_event

REVISION = "2026-07-28"
ROOT = Path(__file__).resolve().parents[1] / "data" / "spec-examples" / REVISION
PV = "io.modelcontextprotocol/protocolVersion"
CC = "io.modelcontextprotocol/clientCapabilities"
SUB = "io.modelcontextprotocol/subscriptionId"
LOG = "io.modelcontextprotocol/logLevel"
ALL_CAPS = {"elicitation": {"form": {}, "url": {}}, "sampling": {"tools": {}, "context": {}},
            "roots": {}}
EXAMPLES = sorted((d.name, f) for d in ROOT.iterdir() if d.is_dir() for f in d.glob("*.json"))
REQUESTS, RESULTS, NOTES = schema._methods(REVISION)
METHOD_OF_RESULT = {v: k for k, v in RESULTS.items()}
METHOD_OF_NOTE = {v: k for k, v in NOTES.items()}
CONTENT = {"TextContent", "ImageContent", "AudioContent", "ResourceLink", "EmbeddedResource"}
INPUT_REQUESTS = {"CreateMessageRequest", "ElicitRequest", "ListRootsRequest"}
INPUT_RESPONSES = {"CreateMessageResult", "ElicitResult", "ListRootsResult"}
ERRORS = {
    "HeaderMismatchError": 400,
    "MissingRequiredClientCapabilityError": 400,
    "UnsupportedProtocolVersionError": 400,
    "MethodNotFoundError": 404,
    "InvalidParamsError": 400,
    "InternalError": 500,
    "ParseError": 400,
}


def _load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _meta(caps: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {PV: REVISION, CC: caps if caps is not None else {}, **extra}


def _request(method: str, rid: Any = 1, params: dict[str, Any] | None = None,
             caps: dict[str, Any] | None = None) -> dict[str, Any]:
    """The example request of ``method`` when there is one (with ``rid``), else a minimal
    conforming one."""
    name = REQUESTS.get(method)
    folder = ROOT / name if name else None
    if params is None and folder is not None and folder.is_dir():
        message: dict[str, Any] = _load(sorted(folder.glob("*.json"))[0])
        message["id"] = rid
        if caps is not None:
            message["params"]["_meta"][CC] = caps
        return message
    body = dict(params or {})
    body.setdefault("_meta", _meta(caps))
    if method == "tools/call":
        body.setdefault("name", "get_weather")
    elif method in ("prompts/get",):
        body.setdefault("name", "code_review")
    elif method == "resources/read":
        body.setdefault("uri", "file:///project/src/main.rs")
    elif method == "subscriptions/listen":
        body.setdefault("notifications", {})
    elif method == "completion/complete":
        body.setdefault("ref", {"type": "ref/prompt", "name": "code_review"})
        body.setdefault("argument", {"name": "language", "value": "py"})
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": body}


def _headers(message: dict[str, Any]) -> HeaderMap:
    pairs = [("Accept", "application/json, text/event-stream"),
             ("Content-Type", "application/json")]
    if "method" in message and isinstance(message.get("params"), dict):
        meta = message["params"].get("_meta", {})
        if PV in meta:
            pairs.append(("MCP-Protocol-Version", meta[PV]))
            pairs.append(("Mcp-Method", message["method"]))
        for key in ("name", "uri", "taskId"):
            if "id" in message and key in message["params"] and message["method"] in (
                    "tools/call", "prompts/get", "resources/read", "tasks/get"):
                pairs.append(("Mcp-Name", str(message["params"][key])))
                break
    return HeaderMap.of(pairs)


def _judge(message: Any, status: int | None = None, answer: Any = None,
           stream: list[Any] | None = None, headers: HeaderMap | None = None) -> list[Finding]:
    if stream is not None:
        body = b"".join(encode_event(orjson.dumps(m).decode()) for m in stream)
        ctype = "text/event-stream"
    else:
        body = b"" if answer is None else orjson.dumps(answer)
        ctype = "application/json"
    raw = message if isinstance(message, bytes) else orjson.dumps(message)
    exchange = Exchange(
        request_headers=headers if headers is not None else _headers(message),
        request_body=raw,
        response_status=status,
        response_headers=HeaderMap.of({"Content-Type": ctype}) if status else HeaderMap(),
        response_body=body,
        capabilities=frozenset({"io.modelcontextprotocol/tasks"}),
    )
    return list(judge(exchange).findings)


def _answer(method: str, result: dict[str, Any], caps: dict[str, Any] | None = None,
            rid: Any = 1) -> list[Finding]:
    request = _request(method, rid, caps=caps)
    return _judge(request, 200, {"jsonrpc": "2.0", "id": request["id"], "result": result})


def _listen(note: dict[str, Any]) -> list[Finding]:
    meta = note.get("params", {}).get("_meta", {})
    sub = meta.get(SUB, "listen-1")
    uri = note.get("params", {}).get("uri", "file:///project/config.json")
    wanted = {"toolsListChanged": True, "promptsListChanged": True,
              "resourcesListChanged": True, "resourceSubscriptions": [uri]}
    request = _request("subscriptions/listen", sub, {"notifications": wanted})
    ack = {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
           "params": {"_meta": {SUB: sub}, "notifications": wanted}}
    if note["method"] == ack["method"]:
        request["id"] = note["params"]["_meta"][SUB]
        request["params"]["notifications"] = note["params"]["notifications"]
        return _judge(request, 200, stream=[note])
    placed = json.loads(json.dumps(note))
    placed.setdefault("params", {}).setdefault("_meta", {})[SUB] = sub
    return _judge(request, 200, stream=[ack, placed])


def _error(name: str, example: dict[str, Any]) -> list[Finding]:
    error = example.get("error", example)
    rid = example.get("id", 1)
    code = error["code"]
    if code == -32700:
        return _judge(b'{"jsonrpc": "2.0", "id": 1, "method": ', ERRORS[name],
                      {"jsonrpc": "2.0", "id": None, "error": error},
                      headers=_headers({}))
    if code == -32020:
        request = _request("tools/call", rid)
        headers = _headers(request)
        pairs = [(k, "foo" if k == "Mcp-Name" else v) for k, v in headers.pairs]
        return _judge(request, ERRORS[name], {"jsonrpc": "2.0", "id": rid, "error": error},
                      headers=HeaderMap.of(pairs))
    if code == -32022:
        request = _request("tools/list", rid, params={"_meta": _meta()})
        request["params"]["_meta"][PV] = error.get("data", {}).get("requested", "2099-01-01")
    elif code == -32021 and "extensions" in error["data"]["requiredCapabilities"]:
        request = _request("tasks/get", rid, params={"taskId": "t1", "_meta": _meta()})
    elif code == -32021:  # a capability a tool call needed, which the client did not declare
        request = _request("tools/call", rid)
    elif code == -32601:
        request = _request("tools/list", rid, params={"_meta": _meta()})
        request["method"] = "example/unknown"
    else:
        request = _request("tools/call", rid)
    return _judge(request, ERRORS[name], {"jsonrpc": "2.0", "id": rid, "error": error})


def placed(name: str, example: Any) -> list[Finding] | None:
    """The findings of ``example`` placed in its matching exchange; None when it is a
    fragment validated on its own."""
    if name in REQUESTS.values():
        return _judge(example)
    if name.endswith("ResultResponse"):
        method = METHOD_OF_RESULT[name[: -len("Response")]]
        return _answer(method, example["result"], rid=example["id"])
    if name == "InputRequiredResult":
        return _answer("tools/call", example, ALL_CAPS)
    if name in METHOD_OF_RESULT:
        return _answer(METHOD_OF_RESULT[name], example)
    if name in INPUT_REQUESTS:
        return _answer("tools/call", {"resultType": "input_required",
                                      "inputRequests": {"r": example}}, ALL_CAPS)
    if name in INPUT_RESPONSES or name == "InputResponses":
        responses = example if name == "InputResponses" else {"r": example}
        return _judge(_request("tools/call", params={"name": "get_weather",
                                                     "inputResponses": responses}))
    if name == "ProgressNotification":
        token = example["params"]["progressToken"]
        request = _request("tools/call", params={"name": "get_weather",
                                                 "_meta": _meta(progressToken=token)})
        done = {"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete", "content": []}}
        return _judge(request, 200, stream=[example, done])
    if name == "LoggingMessageNotification":
        request = _request("tools/call", params={"name": "get_weather",
                                                 "_meta": _meta(**{LOG: "debug"})})
        done = {"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete", "content": []}}
        return _judge(request, 200, stream=[example, done])
    if name == "CancelledNotification":
        return _judge(example, 202, headers=HeaderMap.of(
            {"Accept": "application/json, text/event-stream",
             "Content-Type": "application/json", "MCP-Protocol-Version": REVISION}))
    if name in METHOD_OF_NOTE:
        return _listen(example)
    if name in ERRORS:
        return _error(name, example)
    if name in CONTENT:
        return _answer("tools/call", {"resultType": "complete", "content": [example]})
    if name == "Tool":
        return _answer("tools/list", {"resultType": "complete", "tools": [example],
                                      "ttlMs": 0, "cacheScope": "public"})
    if name == "Resource":
        return _answer("resources/list", {"resultType": "complete", "resources": [example],
                                          "ttlMs": 0, "cacheScope": "public"})
    return _fragment(name, example)


_PARAMS_OF = {  # a request's params definition -> its method
    "CallToolRequestParams": "tools/call",
    "GetPromptRequestParams": "prompts/get",
    "CompleteRequestParams": "completion/complete",
    "PaginatedRequestParams": "tools/list",
}
_NOTE_PARAMS_OF = {  # a server notification's params definition -> its definition
    "ProgressNotificationParams": "ProgressNotification",
    "LoggingMessageNotificationParams": "LoggingMessageNotification",
    "ResourceUpdatedNotificationParams": "ResourceUpdatedNotification",
}
_FIELD_SCHEMAS = {"BooleanSchema", "NumberSchema", "StringSchema", "TitledMultiSelectEnumSchema",
                  "TitledSingleSelectEnumSchema", "UntitledMultiSelectEnumSchema",
                  "UntitledSingleSelectEnumSchema"}


def _sampling(**params: Any) -> dict[str, Any]:
    base = {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
            "maxTokens": 10}
    return {"method": "sampling/createMessage", "params": {**base, **params}}


def _ask(request: dict[str, Any]) -> list[Finding]:
    """One input request in an InputRequiredResult to a client that declared everything."""
    return _answer("tools/call", {"resultType": "input_required",
                                  "inputRequests": {"r": request}}, ALL_CAPS)


def _fragment(name: str, example: Any) -> list[Finding] | None:
    """A definition that is part of a message, placed in the message that carries it."""
    if name in _PARAMS_OF:
        params = json.loads(json.dumps(example))
        params.setdefault("_meta", _meta())
        return _judge(_request(_PARAMS_OF[name], params=params))
    if name in _NOTE_PARAMS_OF:
        definition = _NOTE_PARAMS_OF[name]
        return placed(definition, {"jsonrpc": "2.0", "method": METHOD_OF_NOTE[definition],
                                   "params": example})
    if name == "CancelledNotificationParams":
        return placed("CancelledNotification",
                      {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": example})
    if name in ("ElicitRequestFormParams", "ElicitRequestURLParams"):
        return _ask({"method": "elicitation/create", "params": example})
    if name == "CreateMessageRequestParams":
        return _ask({"method": "sampling/createMessage", "params": example})
    if name == "InputRequests":
        return _answer("tools/call", {"resultType": "input_required", "inputRequests": example},
                       ALL_CAPS)
    if name == "ModelPreferences":
        return _ask(_sampling(modelPreferences=example))
    if name == "SamplingMessage":
        return _ask(_sampling(messages=[example]))
    if name == "ToolUseContent":
        return _judge(_request("tools/call", params={"name": "get_weather", "inputResponses": {
            "r": {"role": "assistant", "content": [example], "model": "m",
                  "stopReason": "toolUse"}}}))
    if name == "ToolResultContent":
        return _ask(_sampling(messages=[{"role": "user", "content": [example]}]))
    if name in _FIELD_SCHEMAS:
        return _ask({"method": "elicitation/create", "params": {
            "message": "m", "requestedSchema": {"type": "object",
                                                "properties": {"field": example}}}})
    if name == "Root":
        return _judge(_request("tools/call", params={"name": "get_weather", "inputResponses": {
            "r": {"roots": [example]}}}))
    if name == "ClientCapabilities":
        return _judge(_request("tools/list", params={"_meta": _meta(example)}))
    if name == "ServerCapabilities":
        discover = _load(sorted((ROOT / "DiscoverResult").glob("*.json"))[0])
        return _answer("server/discover", {**discover, "capabilities": example})
    if name in ("TextResourceContents", "BlobResourceContents"):
        return _answer("resources/read", {"resultType": "complete", "contents": [example],
                                          "ttlMs": 0, "cacheScope": "private"})
    return None


# Examples the published text itself finds wrong: (definition, file) -> the exact finding
# (rule, code, strength) and why. Each is reported, never passed silently.
EXAMPLE_DEFECTS = {
    ("ReadResourceResultResponse", "read-resource-result-response.json"): (
        ("response.payload.caching", -32600, "must"),
        # resultType "complete" without ttlMs/cacheScope: server/utilities/caching "Cacheable
        # Results" says servers MUST include them on resources/read, and ReadResourceResult
        # requires both. The example validates only through the response union's
        # InputRequiredResult arm (whose fields are all optional but resultType), which its
        # own resultType rules out.
    ),
}


def test_examples_are_shipped() -> None:
    """The test data holds the published examples (88 definitions at the time of copying)."""
    assert len({name for name, _ in EXAMPLES}) >= 88


@pytest.mark.parametrize(("name", "path"), EXAMPLES, ids=[f"{n}/{p.name}" for n, p in EXAMPLES])
def test_example_validates(name: str, path: Path) -> None:
    """The example is a valid instance of its definition in the shipped schema.json."""
    assert schema.definition_problem(REVISION, name, _load(path)) == ""


@pytest.mark.parametrize(("name", "path"), EXAMPLES, ids=[f"{n}/{p.name}" for n, p in EXAMPLES])
def test_example_in_its_exchange_is_golden(name: str, path: Path) -> None:
    """Placed in a matching exchange the example draws no finding; an error example draws
    only the request-side finding of the request that owes it."""
    found = placed(name, _load(path))
    if found is None:
        pytest.skip(f"{name} is a fragment: validated against its definition only")
    defect = EXAMPLE_DEFECTS.get((name, path.name))
    if defect is not None:
        assert [(f.rule, f.code, str(f.strength)) for f in found] == [defect[0]]
    elif name in ERRORS:
        assert [f for f in found if f.boundary is not Boundary.REQUEST] == []
        assert all(f.code == _load(path).get("error", _load(path))["code"] for f in found)
    else:
        assert [(f.rule, f.message) for f in found] == []
