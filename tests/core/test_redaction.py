"""Tests for redaction before serialising, hashing, logging or writing (mcp_tap.core.redaction)."""

from __future__ import annotations

import copy
import string
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_tap.core.hashing import digest
from mcp_tap.core.redaction import (
    DEFAULT_ALLOW,
    DEFAULT_PATTERNS,
    REDACTED,
    ArgumentPolicy,
    KeyMatcher,
    RedactionPolicy,
    Redactor,
    canonical_key,
)

REQUIRED = {
    "authorization", "proxyauthorization", "cookie", "setcookie", "xapikey", "apikey",
    "accesstoken", "refreshtoken", "idtoken", "token", "password", "secret", "clientsecret",
    "registrationaccesstoken",
}
# Names that reached evidence or logs before the patterns (issue 12), in their wire spelling.
LEAKED = [
    "X-Access-Token", "X-Goog-Api-Key", "Private-Token", "X-Vault-Token",
    "Ocp-Apim-Subscription-Key", "X-Refresh-Token", "auth_token", "secret_key", "secretKey",
    "authToken", "credentials", "pwd", "api%5Fkey", "%74oken", "pass\u0077ord",
]
SECRET_NAMES = tuple(sorted(REQUIRED | {canonical_key(k) for k in LEAKED[:12]}))


def tool_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Return a tools/call request for tool ``name`` with ``arguments``."""
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def dumped(value: Any) -> str:
    """Serialise ``value`` the way evidence would (orjson)."""
    return orjson.dumps(value).decode("utf-8")


class TestCanonicalKey:
    """canonical_key: the one spelling keys are matched in."""

    @pytest.mark.parametrize("key", ["X-Api-Key", "x_api.key", "XAPIKEY", "x api key", "x-Api-KEY"])
    def test_separators_and_case_collapse(self, key: str) -> None:
        """Case and separators do not change the canonical form."""
        assert canonical_key(key) == "xapikey"

    def test_compatibility_forms_collapse(self) -> None:
        """Full-width letters and the long s reach the ASCII form through NFKC and casefold."""
        assert (canonical_key("\uff34\uff4f\uff4b\uff45\uff4e"), canonical_key("\u017fecret")) == (
            "token",
            "secret",
        )

    def test_non_ascii_is_dropped_and_digits_kept(self) -> None:
        """Only ASCII letters and digits remain."""
        assert canonical_key("caf\u00e9-2\u00b7x") == "caf2x"


class TestKeyMatcher:
    """KeyMatcher: pattern containment after canonicalisation, minus the allowlist."""

    def test_required_names_are_secret(self) -> None:
        """Every name the redaction rules require is secret."""
        assert all(KeyMatcher().is_secret(key) for key in REQUIRED)

    @pytest.mark.parametrize("name", LEAKED[:12])
    def test_names_that_leaked_before_are_secret(self, name: str) -> None:
        """The header and key names issue 12 found in evidence are secret now."""
        assert KeyMatcher().is_secret_key(name)

    @pytest.mark.parametrize("name", ["api%5Fkey", "%74oken", "%2574oken", "pass%77ord"])
    def test_percent_encoded_names_are_decoded(self, name: str) -> None:
        """Percent-encoding (nested too) does not hide a name."""
        assert KeyMatcher().is_secret_key(name)

    def test_patterns_are_canonical(self) -> None:
        """Patterns are stored in canonical form, or they could never match."""
        assert all(canonical_key(p) == p for p in DEFAULT_PATTERNS)
        assert all(canonical_key(k) == k for k in DEFAULT_ALLOW)

    @pytest.mark.parametrize(
        "name", ["progressToken", "maxTokens", "WWW-Authenticate", "authorization_servers",
                 "token_endpoint", "io.modelcontextprotocol/oauth-client-credentials"])
    def test_allowlisted_mcp_names_stay_visible(self, name: str) -> None:
        """Known-harmless MCP and OAuth-metadata names are not secret."""
        assert not KeyMatcher().is_secret_key(name)

    def test_harmless_protocol_keys_are_not_secret(self) -> None:
        """Keys evidence needs to judge the protocol stay visible."""
        assert not any(KeyMatcher().is_secret(k) for k in ("nextcursor", "cursor", "name", "uri"))

    def test_containment_over_redacts(self) -> None:
        """A name that merely contains a pattern is secret (the safe direction)."""
        assert KeyMatcher().is_secret_key("tokenCount") and KeyMatcher().is_secret_key("author")

    def test_operator_patterns_and_allowlist(self) -> None:
        """Operator patterns add secrets; operator allowed names remove them, exactly."""
        matcher = KeyMatcher(extra_patterns=["tenant-id"], extra_allow=["author"])
        assert matcher.is_secret_key("X-Tenant-ID-2") and not matcher.is_secret_key("Author")
        assert matcher.is_secret_key("authors")


class TestArgumentPolicy:
    """ArgumentPolicy: which messages and which argument it covers."""

    def test_named_tool_matches_only_that_tool(self) -> None:
        """A policy naming a tool matches that tool's calls only."""
        policy = ArgumentPolicy("tools/call", "search", "query")
        assert policy.matches("tools/call", {"name": "search"})
        assert not policy.matches("tools/call", {"name": "other"})
        assert not policy.matches("prompts/get", {"name": "search"})

    @pytest.mark.parametrize("tool", [None, "*"])
    def test_wildcard_matches_any_tool(self, tool: str | None) -> None:
        """None and '*' match every tool, and a call without a name."""
        policy = ArgumentPolicy("tools/call", tool, "query")
        assert policy.matches("tools/call", {"name": "x"})
        assert policy.matches("tools/call", {})

    def test_argument_without_letters_is_refused(self) -> None:
        """An argument name that canonicalises to nothing is a configuration error."""
        with pytest.raises(ValueError):
            ArgumentPolicy("tools/call", None, "--")


class TestRedactionPolicy:
    """RedactionPolicy: operator additions."""

    def test_defaults_are_empty(self) -> None:
        """The default policy adds nothing."""
        assert RedactionPolicy() == RedactionPolicy(frozenset(), ())

    def test_extra_key_without_letters_is_refused(self) -> None:
        """An extra key that canonicalises to nothing is a configuration error."""
        with pytest.raises(ValueError):
            RedactionPolicy(extra_keys=frozenset({"-_-"}))


class TestRedactorJson:
    """Redactor.redact_json: the denylist over any JSON value."""

    def test_nested_object_under_token_is_replaced_wholesale(self) -> None:
        """A denylisted key's object value is replaced as a whole, not walked into."""
        value = {"login": {"token": {"kind": "jwt", "raw": "abc.def"}, "user": "u"}}
        assert Redactor().redact_json(value) == {"login": {"token": REDACTED, "user": "u"}}

    def test_list_under_denylisted_key_is_replaced(self) -> None:
        """A denylisted key's list value is replaced as a whole."""
        assert Redactor().redact_json({"Set-Cookie": ["a=1", "b=2"]}) == {"Set-Cookie": REDACTED}

    @pytest.mark.parametrize("secret", [None, 0, False, 12.5, ""])
    def test_any_value_type_is_replaced(self, secret: Any) -> None:
        """Scalars of every JSON type under a denylisted key are replaced."""
        assert Redactor().redact_json({"password": secret}) == {"password": REDACTED}

    def test_denylisted_keys_inside_lists_are_found(self) -> None:
        """Objects inside arrays are searched too."""
        value = [{"a": 1}, [{"apiKey": "k"}]]
        assert Redactor().redact_json(value) == [{"a": 1}, [{"apiKey": REDACTED}]]

    def test_non_denylisted_keys_are_untouched(self) -> None:
        """Keys that name no secret are kept as they are, whatever their values say."""
        value = {"count": 3, "nextCursor": "c", "name": "secretary", "_meta": {"x": [1, 2]}}
        assert Redactor().redact_json(value) is value

    def test_input_is_not_mutated(self) -> None:
        """The input is left as it was; changed paths are copies, clean subtrees shared."""
        value: Any = {"a": [{"token": "t", "b": {"c": 1}}], "e": {"f": [1]}, "d": (1, 2)}
        before = copy.deepcopy(value)
        result = Redactor().redact_json(value)
        assert value == before
        assert result["a"] is not value["a"] and result["a"][0] is not value["a"][0]
        assert result["a"][0]["b"] is value["a"][0]["b"] and result["e"] is value["e"]

    def test_tuples_become_lists(self) -> None:
        """Tuples are copied as JSON arrays."""
        assert Redactor().redact_json({"a": (1, {"secret": 2})}) == {"a": [1, {"secret": REDACTED}]}

    def test_scalar_is_returned_as_is(self) -> None:
        """A bare scalar has no keys and comes back unchanged."""
        assert Redactor().redact_json("token") == "token"

    def test_deep_nesting_beyond_recursion_limit(self) -> None:
        """Nesting deeper than Python's recursion limit is handled without RecursionError."""
        value: Any = {"token": "t"}
        for _ in range(5000):
            value = {"a": [value]}
        result = Redactor().redact_json(value)
        for _ in range(5000):
            result = result["a"][0]
        assert result == {"token": REDACTED}

    def test_recursive_and_loop_walks_meet_correctly(self) -> None:
        """Secrets above, at and below the depth where the walk switches to a loop are found,
        clean siblings at every level are shared, and the depth is counted in full."""
        value: Any = {"password": "bottom", "n": [1]}
        clean = []
        for level in range(150):
            sibling = {"x": [level]}
            clean.append(sibling)
            value = {"a": value, "s": sibling, **({"token": "t"} if level % 49 == 0 else {})}
        done = Redactor().walk(value)
        assert done.depth == 151 + 1 and done.hits == 1 + 4  # levels 0, 49, 98, 147
        node = done.value
        for level in reversed(range(150)):
            assert node["s"] is clean[level]
            assert node.get("token", REDACTED) == REDACTED
            node = node["a"]
        assert node == {"password": REDACTED, "n": [1]}

    def test_extra_keys_any_spelling(self) -> None:
        """Operator keys are canonicalised, so any spelling of them is redacted."""
        redactor = Redactor(RedactionPolicy(extra_keys=frozenset({"X-Tenant-Secret"})))
        assert redactor.redact_json({"x_tenant.SECRET": "s"}) == {"x_tenant.SECRET": REDACTED}

    def test_redaction_happens_before_hashing(self) -> None:
        """The digest of redacted values no longer depends on the secret."""
        redactor = Redactor()
        first = digest(redactor.redact_json({"token": "one"}))
        assert first == digest(redactor.redact_json({"token": "two"}))


class TestRedactorMessage:
    """Redactor.redact_message: the denylist plus argument policies."""

    POLICY = RedactionPolicy(argument_policies=(ArgumentPolicy("tools/call", "search", "query"),))

    def test_named_tool_argument_is_redacted(self) -> None:
        """The policy argument of the named tool is redacted, other arguments are kept."""
        msg = tool_call("search", {"query": "my medical history", "limit": 5})
        result = Redactor(self.POLICY).redact_message(msg)
        assert result["params"]["arguments"] == {"query": REDACTED, "limit": 5}

    def test_other_tool_is_untouched(self) -> None:
        """The same argument of a different tool stays visible."""
        msg = tool_call("lookup", {"query": "weather"})
        assert Redactor(self.POLICY).redact_message(msg) == msg

    def test_input_message_is_not_mutated(self) -> None:
        """Applying argument policies never edits the caller's message."""
        msg = tool_call("search", {"query": "q", "token": "t"})
        before = copy.deepcopy(msg)
        Redactor(self.POLICY).redact_message(msg)
        assert msg == before

    def test_argument_spelling_variants_are_redacted(self) -> None:
        """Argument names are matched canonically, like denylisted keys."""
        msg = tool_call("search", {"Query": "q"})
        assert Redactor(self.POLICY).redact_message(msg)["params"]["arguments"] == {
            "Query": REDACTED
        }

    def test_wildcard_policy_covers_every_tool(self) -> None:
        """A wildcard tool policy redacts the argument of any tool."""
        redactor = Redactor(
            RedactionPolicy(argument_policies=(ArgumentPolicy("tools/call", "*", "ssn"),))
        )
        result = redactor.redact_message(tool_call("anything", {"ssn": "123"}))
        assert result["params"]["arguments"] == {"ssn": REDACTED}

    def test_other_method_uses_params_without_arguments(self) -> None:
        """For a method without params.arguments the argument is looked up in params."""
        redactor = Redactor(
            RedactionPolicy(argument_policies=(ArgumentPolicy("resources/read", None, "uri"),))
        )
        msg = {"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": {"uri": "s3://x"}}
        assert redactor.redact_message(msg)["params"] == {"uri": REDACTED}

    def test_prompt_arguments(self) -> None:
        """prompts/get arguments are found under params.arguments for the named prompt."""
        redactor = Redactor(
            RedactionPolicy(argument_policies=(ArgumentPolicy("prompts/get", "review", "code"),))
        )
        msg = {"jsonrpc": "2.0", "id": 3, "method": "prompts/get",
               "params": {"name": "review", "arguments": {"code": "x", "lang": "py"}}}
        result = redactor.redact_message(msg)
        assert result["params"]["arguments"] == {"code": REDACTED, "lang": "py"}

    def test_batch_messages_are_each_redacted(self) -> None:
        """Every message of a (legacy) batch gets the argument policies."""
        batch = [tool_call("search", {"query": "a"}), tool_call("search", {"query": "b"})]
        result = Redactor(self.POLICY).redact_message(batch)
        assert [m["params"]["arguments"]["query"] for m in result] == [REDACTED, REDACTED]

    def test_denylist_applies_to_messages_too(self) -> None:
        """Denylisted keys inside a message are redacted without any policy."""
        msg = tool_call("login", {"password": "hunter2"})
        assert Redactor().redact_message(msg)["params"]["arguments"] == {"password": REDACTED}

    def test_response_without_method_is_only_denylisted(self) -> None:
        """A response has no method, so argument policies never apply to it."""
        msg = {"jsonrpc": "2.0", "id": 1, "result": {"query": "q"}}
        assert Redactor(self.POLICY).redact_message(msg) == msg


class TestRedactorHeaders:
    """Redactor.redact_headers: header pairs in order with sensitive values redacted."""

    def test_order_duplicates_and_names_are_kept(self) -> None:
        """Pairs keep their order, duplicates and original name spelling."""
        pairs = [("Set-Cookie", "a=1"), ("X-Trace", "t"), ("set-cookie", "b=2"), ("X-Trace", "t")]
        assert Redactor().redact_headers(pairs) == [
            ("Set-Cookie", REDACTED), ("X-Trace", "t"), ("set-cookie", REDACTED), ("X-Trace", "t"),
        ]

    @pytest.mark.parametrize(
        ("value", "expected"),
        [
            ("Bearer abc.def.ghi", f"Bearer {REDACTED}"),
            ("basic dXNlcjpwYXNz", f"basic {REDACTED}"),
            ("abc.def.ghi", REDACTED),
            ("my secret words", REDACTED),
            ("Bearer", REDACTED),
            ("Bearer\tabc", REDACTED),
        ],
    )
    def test_authorization_keeps_only_a_registered_scheme(self, value: str, expected: str) -> None:
        """Only a registered auth scheme survives; no part of the credentials does."""
        result = Redactor().redact_headers([("Authorization", value)])
        assert result == [("Authorization", expected)]

    def test_proxy_authorization_keeps_scheme(self) -> None:
        """Proxy-Authorization is treated like Authorization."""
        result = Redactor().redact_headers([("Proxy-Authorization", "Basic Zm9vOmJhcg==")])
        assert result == [("Proxy-Authorization", f"Basic {REDACTED}")]

    def test_mirrored_denylisted_argument_is_redacted(self) -> None:
        """Mcp-Param-{Name} with a denylisted name is redacted, as the argument would be."""
        pairs = [("Mcp-Param-Api-Key", "k"), ("Mcp-Param-Region", "us-west1")]
        assert Redactor().redact_headers(pairs) == [
            ("Mcp-Param-Api-Key", REDACTED), ("Mcp-Param-Region", "us-west1"),
        ]

    def test_mirrored_policy_argument_is_redacted(self) -> None:
        """Mcp-Param-{Name} naming a policy argument is redacted, sentinel form included."""
        redactor = Redactor(
            RedactionPolicy(argument_policies=(ArgumentPolicy("tools/call", "search", "query"),))
        )
        assert redactor.redact_headers([("mcp-param-query", "=?base64?cQ==?=")]) == [
            ("mcp-param-query", REDACTED)
        ]

    def test_protocol_headers_are_untouched(self) -> None:
        """Headers evidence needs (method, name, version) stay visible."""
        pairs = [("Mcp-Method", "tools/call"), ("Mcp-Name", "search"),
                 ("MCP-Protocol-Version", "2026-07-28"), ("Content-Type", "a/b; charset=utf-8")]
        assert Redactor().redact_headers(pairs) == pairs

    def test_session_id_becomes_a_keyed_pseudonym(self) -> None:
        """One session id has one pseudonym per key, another id another; the id is gone."""
        key = b"k" * 32
        first = Redactor(pseudonym_key=key).redact_headers([("Mcp-Session-Id", "sess-1234")])
        again = Redactor(pseudonym_key=key).redact_headers([("mcp-session-id", "sess-1234")])
        other = Redactor(pseudonym_key=key).redact_headers([("Mcp-Session-Id", "sess-9999")])
        assert first[0][1] == again[0][1] != other[0][1]
        assert first[0][1].startswith("[REDACTED:") and "sess" not in first[0][1]
        assert Redactor(pseudonym_key=b"x" * 32).redact_headers(
            [("Mcp-Session-Id", "sess-1234")]) != first

    def test_a_challenge_keeps_its_parameters(self) -> None:
        """WWW-Authenticate is a challenge: its scheme and parameters stay, the 401 rules
        judge them; only a parameter under a secret name is hidden."""
        challenge = ('Bearer error="invalid_token", error_description="Missing Authorization'
                     ' header", resource_metadata="http://h/.well-known/oauth-protected-resource"')
        pairs = [("WWW-Authenticate", challenge),
                 ("Proxy-Authenticate", 'Bearer realm="r", token="s3cr3t"')]
        assert Redactor().redact_headers(pairs) == [
            ("WWW-Authenticate", challenge),
            ("Proxy-Authenticate", f'Bearer realm="r", token="{REDACTED}"'),
        ]

    def test_urls_in_any_header_lose_secret_parameters(self) -> None:
        """A Referer or Location carrying ?token= or ;jsessionid= is redacted in place."""
        pairs = [("Referer", "https://h/p;jsessionid=J1?x=1&access_token=abc"),
                 ("Location", "/cb?code=c&state=s")]
        assert Redactor().redact_headers(pairs) == [
            # A value runs to the next '&', ';' or ',': a '?' may be part of it.
            ("Referer", f"https://h/p;jsessionid={REDACTED}&access_token={REDACTED}"),
            ("Location", "/cb?code=c&state=s"),
        ]


class TestRedactorText:
    """Redactor.redact_text: JSON text structurally, other text by a regex pass."""

    def test_json_text_is_redacted_and_reserialised(self) -> None:
        """JSON text with a secret is redacted and written back compactly."""
        text = '{"jsonrpc": "2.0", "result": {"access_token": "abc", "n": 1}}'
        expected = '{"jsonrpc":"2.0","result":{"access_token":"[REDACTED]","n":1}}'
        assert Redactor().redact_text(text) == expected

    def test_clean_json_scalar_text_is_returned_unchanged(self) -> None:
        """A JSON scalar with nothing to redact keeps its exact spelling."""
        assert Redactor().redact_text(' "token" ') == ' "token" '

    def test_dropped_duplicate_of_a_harmless_key_does_not_smuggle_a_secret(self) -> None:
        """JSON objects are always written back, so a dropped duplicate's secret is gone."""
        result = Redactor().redact_text('{"x": {"token": "leak"}, "x": 1}')
        assert result == '{"x":1}'

    def test_nesting_orjson_cannot_write_is_written_iteratively(self) -> None:
        """JSON nested 600 deep with a secret at the bottom is redacted and written back."""
        text = '{"a":' * 600 + '{"token":"deep-secret"}' + "}" * 600
        result = Redactor().redact_text(text)
        assert "deep-secret" not in result and orjson.loads(result) == orjson.loads(
            text.replace('"deep-secret"', f'"{REDACTED}"'))

    @pytest.mark.parametrize("text, secret", [
        ('{"pass\\u0077ord": "pw-1", "x": [', "pw-1"),
        ("GET /x?api%5Fkey=k-1&%74oken=t-1 HTTP/1.1", "k-1"),
        ("GET /x?api%5Fkey=k-1&%74oken=t-1 HTTP/1.1", "t-1"),
        ("/mcp;token=p-1/next", "p-1"),
        ("user=bob&api+key=f-1&x=2", "f-1"),
        ("data: {\"secret_key\": \"e-1\"} ...", "e-1"),
        ("a-u thTO KEn-Value=w-1 rest", "w-1"),  # words of one key, split by spaces
        ("note p a s s w o r d=w-2", "w-2"),  # ... into as many as eight words
        ("\\u0074-\\u006f-ken=u-1", "u-1"),  # a bare key spelt with \u escapes
        ("x_se\\u0063\\u0052 Et_2=v-1", "v-1"),  # ... split by a space, too
    ])
    def test_escaped_and_encoded_keys_in_plain_text(self, text: str, secret: str) -> None:
        """JSON escapes, percent-encoding, form '+' and path parameters do not hide a key."""
        assert secret not in Redactor().redact_text(text)

    def test_userinfo_holding_url_marks_is_cut_whole(self) -> None:
        """A password holding '?', ';' or '#' is cut with the userinfo, not at the mark."""
        shown = Redactor().redact_reason("x http://u:p?w;#q@h/p")
        assert shown == f"x http://{REDACTED}@h/p" and "p?w" not in shown

    def test_url_secrets_are_cut_from_reasons(self) -> None:
        """A library error quoting a URL keeps scheme, host and path, not query or userinfo."""
        reason = "InvalidURL: http://u:pw@h:1/mcp;s=1?k=v#f is bad"
        assert Redactor().redact_reason(reason) == (
            f"InvalidURL: http://{REDACTED}@h:1/mcp;{REDACTED} is bad")

    def test_string_values_get_the_text_pass(self) -> None:
        """A URL or an error message in a JSON string loses the secret it quotes."""
        msg = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32000,
               "message": "login failed: password=hunter22", "data": {"uri": "h?token=t-9"}}}
        shown = orjson.dumps(Redactor().redact_message(msg)).decode()
        assert "hunter22" not in shown and "t-9" not in shown and '"code":-32000' in shown

    def test_duplicate_keys_do_not_smuggle_a_secret(self) -> None:
        """An earlier duplicate of a denylisted key is dropped with the re-serialisation."""
        result = Redactor().redact_text('{"token": "leak", "token": "[REDACTED]"}')
        assert "leak" not in result

    def test_argument_policies_apply_to_json_text(self) -> None:
        """JSON text is redacted as a message, argument policies included."""
        redactor = Redactor(
            RedactionPolicy(argument_policies=(ArgumentPolicy("tools/call", None, "query"),))
        )
        assert "private" not in redactor.redact_text(dumped(tool_call("t", {"query": "private"})))

    def test_json_that_orjson_refuses_is_still_structural(self) -> None:
        """JSON with a lone surrogate escape is redacted structurally via the stdlib parser."""
        result = Redactor().redact_text('{"a": "\\ud800", "secret": {"x": "nested-value"}}')
        assert result == '{"a":"\\ud800","secret":"[REDACTED]"}'

    def test_bearer_anywhere_in_text(self) -> None:
        """A bearer credential in free text is redacted."""
        text = "upstream said: use Bearer eyJhbGciOi.x-y_z/+= then retry"
        assert Redactor().redact_text(text) == f"upstream said: use Bearer {REDACTED} then retry"

    def test_header_like_lines(self) -> None:
        """A denylisted header-like line loses everything after the colon."""
        text = "Cookie: sid=abc; theme=dark\r\nX-Trace: t1\r\nAuthorization: Digest response=9"
        assert Redactor().redact_text(text) == (
            f"Cookie: {REDACTED}\r\nX-Trace: t1\r\nAuthorization: {REDACTED}"
        )

    def test_query_string_pairs(self) -> None:
        """Query and form pairs lose only the denylisted values."""
        text = "GET /cb?state=s&access_token=abc&api-key=k2 HTTP/1.1"
        assert Redactor().redact_text(text) == (
            f"GET /cb?state=s&access_token={REDACTED}&api-key={REDACTED} HTTP/1.1"
        )

    def test_harmless_key_does_not_hide_a_later_secret(self) -> None:
        """A non-denylisted key's value is not consumed, so a later secret is still found."""
        text = "see https://h/x?token=abc&page=2"
        assert Redactor().redact_text(text) == f"see https://h/x?token={REDACTED}&page=2"

    def test_truncated_json_quoted_pairs(self) -> None:
        """Truncated (invalid) JSON still loses quoted denylisted values, keeping the quotes."""
        text = '{"user": "bob", "password": "p \\" w", "Client-Secret": "c", "next": ['
        assert Redactor().redact_text(text) == (
            f'{{"user": "bob", "password": "{REDACTED}", "Client-Secret": "{REDACTED}", "next": ['
        )

    def test_escaped_json_inside_text(self) -> None:
        """A JSON-escaped key (JSON inside a string) still has its value redacted."""
        text = '"{\\"refresh_token\\": \\"rt-123\\"}" trailing'
        assert "rt-123" not in Redactor().redact_text(text)

    def test_plain_text_without_secrets_is_unchanged(self) -> None:
        """Text with no denylisted key or bearer credential comes back unchanged."""
        text = "error: upstream timed out after 30s (retry=3); see docs"
        assert Redactor().redact_text(text) == text


# --- properties --------------------------------------------------------------------------

_SEPARATORS = ["-", "_", ".", " "]
_SAFE_KEYS = st.sampled_from(["params", "arguments", "data", "items", "_meta", "value", "a"])
_SECRETS = st.text(alphabet=string.ascii_letters + string.digits, min_size=8, max_size=24).map(
    lambda tail: "SECRET-" + tail
)


@st.composite
def _key_variants(
    draw: st.DrawFn,
    separators: tuple[str, ...] = tuple(_SEPARATORS),
    bases: tuple[str, ...] = SECRET_NAMES,
) -> str:
    """Draw a denylisted key with random letter case and separators between letters."""
    base = draw(st.sampled_from(bases))
    out: list[str] = []
    for index, char in enumerate(base):
        if index and draw(st.booleans()):
            out.append(draw(st.sampled_from(separators)))
        out.append(char.upper() if draw(st.booleans()) else char)
    return "".join(out)


@st.composite
def _nested_secrets(draw: st.DrawFn) -> tuple[Any, str]:
    """Draw a JSON value hiding a secret under a denylisted key at a random depth."""
    secret = draw(_SECRETS)
    shape = draw(st.sampled_from(["scalar", "object", "list"]))
    inner: Any = {"scalar": secret, "object": {"v": secret}, "list": [secret, {"v": secret}]}[shape]
    node: Any = {draw(_key_variants()): inner, "visible": 1}
    for _ in range(draw(st.integers(min_value=0, max_value=8))):
        if draw(st.booleans()):
            node = {draw(_SAFE_KEYS): node, "sibling": "s"}
        else:
            position = draw(st.integers(min_value=0, max_value=2))
            siblings: list[Any] = [1, "x"]
            siblings.insert(position, node)
            node = siblings
    return node, secret


class TestRedactorRemovedValues:
    """Redactor.removed_values: the secrets a finding message might quote."""

    def test_header_credentials_in_every_spelling(self) -> None:
        """A bearer token, a whole api key and each cookie's value are collected."""
        pairs = [("Authorization", "Bearer tok-12345"), ("X-Api-Key", "k-abcdef"),
                 ("Set-Cookie", "sid=s-999888; Path=/; Max-Age=3600; HttpOnly"),
                 ("Content-Type", "application/json")]
        found = Redactor().removed_values([pairs])
        assert {"tok-12345", "Bearer tok-12345", "k-abcdef", "s-999888"} <= set(found)
        assert "3600" not in found and "application/json" not in found

    def test_message_values_longest_first(self) -> None:
        """Values under denylisted keys are collected, nested leaves included, longest first."""
        msg = tool_call("login", {"password": "hunter22", "token": {"a": "abcdefghij"},
                                  "user": "alice"})
        found = Redactor().removed_values([], [msg])
        assert found == ["abcdefghij", "hunter22"]

    def test_short_values_are_left_out(self) -> None:
        """A 3-character secret is not collected (replacing it would mangle every message)."""
        assert Redactor().removed_values([[("X-Api-Key", "abc")]]) == []


class TestRedactorScrub:
    """Redactor.scrub: secrets out of free text such as finding messages."""

    def test_raw_and_repr_spellings_are_replaced(self) -> None:
        """Both the raw value and its repr-escaped form become [REDACTED]."""
        secret = "p\u00e9\"x'ss"
        message = f"header says {secret!r}, body says {secret}"
        scrubbed = Redactor().scrub(message, [secret])
        assert scrubbed == "header says '[REDACTED]', body says [REDACTED]"

    def test_text_pass_still_applies(self) -> None:
        """A bearer credential not in the list is caught by redact_text's pass."""
        assert Redactor().scrub("got Bearer zzz-unknown", []) == "got Bearer [REDACTED]"


class TestRedactorProperties:
    """Redactor: no denylisted value survives, whatever the spelling or depth."""

    @settings(deadline=None)
    @given(_nested_secrets())
    def test_no_secret_survives_redact_json(self, drawn: tuple[Any, str]) -> None:
        """After redact_json the serialised value never contains the secret."""
        value, secret = drawn
        assert secret in dumped(value)
        assert secret not in dumped(Redactor().redact_json(value))

    @settings(deadline=None)
    @given(_nested_secrets())
    def test_no_secret_survives_redact_text_of_json(self, drawn: tuple[Any, str]) -> None:
        """redact_text of the JSON text never contains the secret."""
        value, secret = drawn
        assert secret not in Redactor().redact_text(dumped(value))

    @settings(deadline=None)
    @given(
        _key_variants(("-", "_", ".")),
        _SECRETS,
        st.sampled_from(["{k}={s}&x=1", "{k}: {s}", '"{k}": "{s}", "x": 1', "a;{k}={s};b"]),
    )
    def test_no_secret_survives_redact_text_of_plain_text(
        self, key: str, secret: str, template: str
    ) -> None:
        """The regex pass removes the secret from pairs with any spelling of the key."""
        text = template.format(k=key, s=secret)
        assert secret not in Redactor().redact_text(text)

    @settings(deadline=None)
    @given(
        st.one_of(
            _key_variants(("-", "_", ".")),
            # Authorization-like headers keep a scheme: give them extra attention.
            _key_variants(("-", "_", "."), ("authorization", "proxyauthorization")),
            _key_variants(("-",), ("mcpparamtoken", "mcpparampassword", "mcpparamapikey")),
        ),
        _SECRETS,
        st.sampled_from(
            ["{s}", "Bearer {s}", "Basic {s}", "bearer\t{s}", "{s} {s}", "Token {s}", " {s} "]
        ),
        st.lists(st.tuples(st.sampled_from(["X-Trace", "Accept"]), st.text(max_size=5)),
                 max_size=3),
    )
    def test_no_secret_survives_redact_headers(
        self, name: str, secret: str, template: str, noise: list[tuple[str, str]]
    ) -> None:
        """Any spelling of a denylisted header name loses every part of its secret value."""
        pairs = [*noise, (name, template.format(s=secret)), *noise]
        result = Redactor().redact_headers(pairs)
        assert [n for n, _ in result] == [n for n, _ in pairs]
        assert all(secret not in value for _, value in result)
        assert result[: len(noise)] == noise


def test_known_plain_keys_take_the_fast_loop_with_the_same_result() -> None:
    """Once every key of an object is known plain, its values alone are tested (one set
    test for the keys): shaped strings, nested containers and lists still get redacted,
    the second walk exactly as the first."""
    redactor = Redactor()
    message = {"a": "x?token=abc", "b": [{"c": "Bearer zzz"}, "k=v", {}], "d": {"e": {}},
               "n": 1, "f": None}
    first = redactor.walk_message(message)
    second = redactor.walk_message(message)
    assert first.value == second.value and first.hits == second.hits == 2
    assert first.depth == second.depth == 3
    assert "abc" not in str(second.value) and "zzz" not in str(second.value)
    assert redactor.walk_message({"a": "plain", "d": {"e": {}}}).depth == 2


_PLAIN_KEYS = st.sampled_from(["id", "name", "jsonrpc", "params", "_meta", "token", "password",
                               "x-api-key", "uri", "text", "items", "Authorization"])
_PLAIN_LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
    st.sampled_from(["2.0", "tools/list", "a=b", "https://h/x?token=abc", "Bearer xyz",
                     "bEARER", "plain", "k:v", "", "earer"]),
    st.text(max_size=8))
_PLAIN_VALUES = st.recursive(
    _PLAIN_LEAVES,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(_PLAIN_KEYS, inner, max_size=4),
                            st.tuples(inner)),
    max_leaves=25)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.dictionaries(_PLAIN_KEYS, _PLAIN_VALUES, max_size=5), max_size=4))
def test_walk_plain_answers_what_the_walk_answers(messages: list[dict[str, Any]]) -> None:
    """Redactor.walk_plain (the record's walk of small messages and SSE events): the walk's
    value, hits and depth, the very message back whenever the walk gives it back; keys are
    learnt the same way (each redactor sees the messages in turn, twice)."""
    fast, slow = Redactor(), Redactor()
    for message in messages + messages:
        got, expected = fast.walk_plain(message), slow.walk(message)
        assert (got.value, got.hits, got.depth) == (expected.value, expected.hits, expected.depth)
        assert (got.value is message) == (expected.value is message)
    assert fast._plain_keys == slow._plain_keys
