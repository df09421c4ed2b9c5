"""The clean-text fast path (core/redaction/clean.py) says "clean" only when the walk agrees.

For any JSON text: when :class:`CleanJson` answers a depth, walking the parsed value changes
nothing, hides nothing, and nests no deeper than that depth; and ``walk_message_text``
returns what ``walk_message`` returns. Texts with secrets spelt in the ways that slipped
past redaction before (escapes, percent-encoding, nested JSON, compatibility forms) are
never called clean.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_tap.core.redaction import RedactionPolicy, Redactor
from mcp_tap.core.redaction.clean import CLEAN_CHECK_MIN, MAX_CLEAN_DEPTH, CleanJson
from mcp_tap.core.redaction.keys import KeyMatcher

_FULLWIDTH = "\uff54\uff4f\uff4b\uff45\uff4e"  # NFKC: "token"
_KEYS = st.sampled_from([
    "name", "type", "description", "inputSchema", "properties", "n", "items", "id", "result",
    "token", "Api-Key", "x_api.key", "progressToken", "maxTokens", "author", "pwd", "PASSWORD",
    "sessionId", "tokenEndpoint", "secretKey", "a:b", "api%5Fkey", "%74oken", _FULLWIDTH,
    "pass\\u0077ord", "k=v", "bearer", "Private-Token", "credentials", "",
]) | st.text(max_size=12)
_STRINGS = st.sampled_from([
    "plain", "a token here", "Bearer abc", "key=value", "https://h/x?token=1", "x:y",
    '{"token": "abc"}', "{\"password\":\"p\"}", "[1, {\"secret\": 2}]", "tok\\u0065n", _FULLWIDTH,
]) | st.text(max_size=20)
_SCALARS = st.none() | st.booleans() | st.integers(-10**6, 10**6) | _STRINGS
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(_KEYS, inner, max_size=5),
    max_leaves=40,
)


def _texts(value: Any) -> list[bytes]:
    """The spellings a server might send for ``value``."""
    return [orjson.dumps(value), json.dumps(value).encode(),
            json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"),
            json.dumps(value, indent=1).encode(),
            json.dumps(value, separators=(",", " : ")).encode()]


def _agrees(redactor: Redactor, text: bytes) -> None:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return
    walked = redactor.walk_message(value)
    depth = CleanJson(redactor.matcher).depth(text)
    if depth is not None:
        assert walked.value is value and walked.hits == 0
        assert walked.depth <= depth <= MAX_CLEAN_DEPTH
    fast = redactor.walk_message_text(value, text)
    assert fast.value == walked.value and fast.hits == walked.hits


@settings(max_examples=400, deadline=None)
@given(_JSON)
def test_clean_only_when_the_walk_changes_nothing(value: Any) -> None:
    redactor = Redactor()
    for text in _texts(value):
        _agrees(redactor, text)


@settings(max_examples=150, deadline=None)
@given(_JSON, st.sampled_from(["author", "internal", "nam"]))
def test_operator_patterns_and_allowlist_count(value: Any, extra: str) -> None:
    redactor = Redactor(RedactionPolicy(extra_keys=frozenset({extra}),
                                        allow_keys=frozenset({"sessionId"})))
    for text in _texts(value):
        _agrees(redactor, text)


_PADDING = '"description":"' + "x" * CLEAN_CHECK_MIN + '"'


@pytest.mark.parametrize("key", [
    "pass\\u0077ord", "%74oken", "api%5Fkey", _FULLWIDTH, "Api-Key", "X_ACCESS_TOKEN",
    "my.secret", "refresh token",
])
def test_secret_key_spellings_are_never_clean(key: str) -> None:
    text = ('{' + _PADDING + ',"nested":{"' + key + '":"s3cr3t"}}').encode()
    assert CleanJson(KeyMatcher()).depth(text) is None
    redactor = Redactor()
    done = redactor.walk_message_text(orjson.loads(text), text)
    assert "s3cr3t" not in orjson.dumps(done.value).decode()


@pytest.mark.parametrize("value", [
    '{\\"token\\":\\"s3cr3t\\"}',  # nested JSON in a string
    "https://h/x?token=s3cr3t",
    "token: s3cr3t",
    "Bearer s3cr3t",
])
def test_values_the_text_pass_redacts_are_never_clean(value: str) -> None:
    text = ('{' + _PADDING + ',"note":"' + value + '"}').encode()
    assert CleanJson(KeyMatcher()).depth(text) is None
    done = Redactor().walk_message_text(orjson.loads(text), text)
    assert "s3cr3t" not in orjson.dumps(done.value).decode()


def test_a_clean_body_is_returned_as_parsed() -> None:
    text = ('{' + _PADDING + ',"progressToken":"p-1","tools":[{"name":"a token counter"}]}'
            ).encode()
    value = orjson.loads(text)
    done = Redactor().walk_message_text(value, text)
    assert done.value is value and done.hits == 0


def test_argument_policies_always_walk() -> None:
    from mcp_tap.core.redaction import ArgumentPolicy

    policy = RedactionPolicy(argument_policies=(ArgumentPolicy("tools/call", None, "pin"),))
    text = ('{"method":"tools/call","params":{"name":"t","arguments":{"pin":"4242"}},'
            + _PADDING + '}').encode()
    done = Redactor(policy).walk_message_text(orjson.loads(text), text)
    assert done.value["params"]["arguments"]["pin"] == "[REDACTED]"


def test_deep_text_is_walked() -> None:
    deep = b"[" * (MAX_CLEAN_DEPTH + 5) + b"]" * (MAX_CLEAN_DEPTH + 5)
    assert CleanJson(KeyMatcher()).depth(deep) is None
    wide = b"[" + b",".join([b"[[]]"] * 200) + b"]"
    assert CleanJson(KeyMatcher()).depth(wide) == 3


# -- a message's one container member, judged by its JSON and remembered ------------------

_ENVELOPE_KEYS = st.sampled_from(["jsonrpc", "id", "result", "error", "token", "a:b", "method"])
_PAD_MEMBER = {"description": "x" * CLEAN_CHECK_MIN}


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_ENVELOPE_KEYS, _SCALARS, max_size=3), _ENVELOPE_KEYS,
       st.lists(_JSON, min_size=1, max_size=3))
def test_member_verdicts_agree_with_the_walk(scalars: dict[str, Any], key: str,
                                             members: list[Any]) -> None:
    # One redactor for every message: the second time a member is seen its verdict comes
    # from memory, and must still be the walk's.
    redactor = Redactor()
    for _ in range(2):
        for member in members:
            message = {**scalars, key: [_PAD_MEMBER, member]}
            for text in _texts(message):
                _agrees(redactor, text)
                value = orjson.loads(text)
                fast = redactor.walk_message_text(value, text)
                walked = redactor.walk_message(value)
                if fast.value is value:
                    assert walked.value is value and walked.depth <= fast.depth


def test_a_list_answer_is_checked_once_whatever_its_id() -> None:
    redactor = Redactor()
    result = {"tools": [{"name": "a token counter", "description": "x" * CLEAN_CHECK_MIN}]}
    for rpc_id in range(3):
        text = orjson.dumps({"jsonrpc": "2.0", "id": rpc_id, "result": result})
        value = orjson.loads(text)
        done = redactor.walk_message_text(value, text)
        assert done.value is value and done.hits == 0
    assert list(redactor._clean_members.values()) == [3]  # one member remembered


@pytest.mark.parametrize("message", [
    {"jsonrpc": "2.0", "id": "https://h/x?token=s3cr3t", "result": {"d": "x" * 400}},
    {"jsonrpc": "2.0", "id": 1, "token": "s3cr3t", "result": {"d": "x" * 400}},
    {"jsonrpc": "2.0", "id": 1, "result": {"d": "x" * 400, "api_key": "s3cr3t"}},
    {"jsonrpc": "2.0", "id": 1, "result": {"d": "x" * 400, "note": "Bearer s3cr3t"}},
])
def test_secrets_around_and_in_a_remembered_member_are_redacted(message: Any) -> None:
    redactor = Redactor()
    for _ in range(2):  # the second time from the remembered verdict
        text = orjson.dumps(message)
        done = redactor.walk_message_text(orjson.loads(text), text)
        assert "s3cr3t" not in orjson.dumps(done.value).decode()


def test_the_judges_json_of_a_result_is_used_only_for_that_very_result() -> None:
    from mcp_tap.core.deepjson import WrittenJson

    redactor = Redactor()
    left = WrittenJson()
    clean = {"tools": [{"name": "n", "description": "x" * CLEAN_CHECK_MIN}]}
    secret = {"api_key": "s3cr3t", "description": "x" * CLEAN_CHECK_MIN}
    # A JSON text written for another (clean) value must not vouch for this one.
    left.result, left.json = clean, orjson.dumps(clean)
    text = orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": secret})
    done = redactor.walk_message_text(orjson.loads(text), text, left)
    assert "s3cr3t" not in orjson.dumps(done.value).decode()
    # The judge's JSON of this very result is what the check reads.
    message = {"jsonrpc": "2.0", "id": 2, "result": clean}
    done = redactor.walk_message_text(message, orjson.dumps(message), left)
    assert done.value is message and orjson.dumps(clean) in redactor._clean_members


def test_the_judges_json_travels_in_its_judgement_not_beside_it() -> None:
    """Each judgement carries the JSON it wrote of its own result (no shared slot): judged
    one after the other, the first still holds its own, and a tap on another thread could
    not swap them."""
    from mcp_tap.core.eras import Era
    from mcp_tap.core.exchange import Exchange, judge
    from mcp_tap.core.headers import HeaderMap

    headers = HeaderMap.of({"Content-Type": "application/json",
                            "Accept": "application/json, text/event-stream"})
    judged = []
    for n in (1, 2):
        request = {"jsonrpc": "2.0", "id": n, "method": "tools/list"}
        answer = {"jsonrpc": "2.0", "id": n, "result": {"tools": [], "n": n}}
        judged.append(judge(Exchange(headers, orjson.dumps(request), 200, headers,
                                     orjson.dumps(answer), era=Era.LEGACY)))
    for n, j in zip((1, 2), judged, strict=True):
        assert j.context is not None and j.context.written is not None
        result = j.response_messages[0]["result"]
        assert j.context.written.result is result
        assert j.context.written.json == orjson.dumps({"tools": [], "n": n})
