"""The redaction's one shape test (``text.shaped``, and ``header_shaped`` for plain header
values): what it lets through is what the walk leaves untouched, and no module re-types it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

import mcp_tap
from mcp_tap.core.redaction import Redactor
from mcp_tap.core.redaction.keys import KeyMatcher
from mcp_tap.core.redaction.text import header_shaped, redact_plain_text, shaped

# Text near the shapes: separators, the bearer letters in both cases, secret key names.
_PIECES = st.sampled_from(["=", ":", "earer", "EARER", "Bearer ", "b", "token", "api_key",
                           "x", " ", "\n", '"', "%3D", "é", "password", "abc123", ";"])
_TEXT = st.lists(_PIECES, max_size=12).map("".join) | st.text(max_size=40)
# The pass finds a bearer scheme in any case; the shape test in two (see the last test).
_MIXED_BEARER = re.compile(r"bearer", re.I)


def _as_written(text: str) -> bool:
    """The shape test as first written inline (the copies it replaces): ``earer`` in two
    cases only, so a bearer scheme in mixed case (``bEARer``) passed unredacted."""
    return "=" in text or ":" in text or "earer" in text or "EARER" in text


@settings(max_examples=400, deadline=None)
@given(_TEXT)
def test_the_shape_test_is_the_copies_and_any_case_of_bearer(text: str) -> None:
    assert shaped(text) is (_as_written(text) or _MIXED_BEARER.search(text) is not None
                            or "earer" in text.lower())
    assert not _as_written(text) or shaped(text)  # never less than the copies
    assert not header_shaped(text) or shaped(text)  # the header test only drops ":"
    assert header_shaped(text) is (shaped(text.replace(":", "")))


@settings(max_examples=400, deadline=None)
@given(_TEXT)
def test_what_the_shape_test_lets_through_the_pass_would_not_change(text: str) -> None:
    """A string without the shape is one the text pass leaves as it is."""
    matcher = KeyMatcher()
    if not shaped(text):
        assert redact_plain_text(text, matcher.is_secret_key) == text


def test_a_bearer_credential_in_mixed_case_is_redacted_everywhere() -> None:
    """``bEARer <credential>`` in a JSON string, a log field and a plain header value: the
    copies the shape test replaced let it through (neither ``earer`` nor ``EARER``)."""
    from mcp_tap.log_redaction import redact_event

    redactor = Redactor()
    walked = redactor.walk({"note": "see bEARer abcdef12345"}).value
    assert walked == {"note": "see bEARer [REDACTED]"}
    assert redactor.walk_plain({"note": "BeArEr abcdef12345"}).value["note"] != (
        "BeArEr abcdef12345")
    headers = redactor.redact_header_lists([("X-Note", "bEARer abcdef12345")])
    assert "abcdef12345" not in str(headers)
    logged = redact_event(None, "info", {"event": "x", "reason": "bEARer abcdef12345"})
    assert "abcdef12345" not in str(logged)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["name", "description", "title", "note"]), _TEXT,
                       max_size=4))
def test_the_walk_changes_only_shaped_strings(values: dict[str, str]) -> None:
    """Under plain keys, the walk (all three of its ways in) rebuilds exactly the shaped
    strings the pass changes, and leaves the rest the very same objects."""
    redactor = Redactor()
    message = {"jsonrpc": "2.0", "id": 1, "result": {"items": [values]}}
    for done in (redactor.walk(message), redactor.walk_plain(message)):
        out = done.value["result"]["items"][0]
        for key, text in values.items():
            if not shaped(text):
                assert out[key] is text
            else:
                assert out[key] == redact_plain_text(text, redactor.matcher.is_secret_key)


def _retyped(tree: ast.AST) -> list[int]:
    """Lines of a boolean test that spells out the shape test (``"earer" in x``)."""
    lines = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant)
                and node.left.value in ("earer", "EARER", "bearer")
                and isinstance(node.ops[0], ast.In)):
            lines.append(node.lineno)
    return lines


def test_no_module_retypes_the_shape_test() -> None:
    """The shape test is written once (text.py); everything else calls it."""
    package = Path(mcp_tap.__file__).parent
    home = package / "core" / "redaction" / "text.py"
    found = {
        str(path.relative_to(package)): lines
        for path in sorted(package.rglob("*.py"))
        if (lines := _retyped(ast.parse(path.read_text()))) and path != home
    }
    assert found == {}
    assert len(_retyped(ast.parse(home.read_text()))) == 2  # shaped and header_shaped


_KEYS = st.lists(st.sampled_from(["api", "_", "key", "Token", "%5F", "pass", "word", "name",
                                  "\uff21", "x", "-", "secret", "id", "Auth", "orization"]),
                 min_size=1, max_size=4).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(_KEYS, min_size=1, max_size=6))
def test_the_walks_key_cache_is_the_name_predicate(keys: list[str]) -> None:
    """The one "is this name secret" test is KeyMatcher.is_secret_key; the walk's per-
    spelling cache (Redactor._secret_key, read inline in the walk's loop and as
    _plain_keys) only remembers its answers, and the walk hides exactly those keys."""
    redactor = Redactor()
    matcher = redactor.matcher
    for key in keys:
        assert redactor._secret_key(key) is matcher.is_secret_key(key)
        assert redactor._keys[key] is matcher.is_secret_key(key)  # what the loop reads
    assert redactor._plain_keys == {k for k in keys if not matcher.is_secret_key(k)}
    value = {key: "v" for key in keys}
    out = Redactor().walk(value).value
    assert {k for k in keys if out[k] != "v"} == {k for k in keys if matcher.is_secret_key(k)}
