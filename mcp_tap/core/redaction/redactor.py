"""The redactor: secrets out of JSON, headers, text and URLs before anything is kept.

Which names are secret is :mod:`~mcp_tap.core.redaction.keys`'s business (canonical names,
patterns, the allowlist); how text that is not JSON is searched is
:mod:`~mcp_tap.core.redaction.text`'s. This module walks values:

* JSON at any depth, iteratively (orjson parses 1024 levels, the stdlib more than Python's
  recursion limit allows). The value under a secret key is replaced wholesale by
  :data:`REDACTED`, whatever its type. String values shaped like key-value text (holding
  ``=``, ``:`` or ``bearer``: query strings, URLs, error messages, embedded JSON) get the
  text pass too, so ``"uri": "https://h/x?token=abc"`` loses ``abc``.
* Clean subtrees are shared, not copied: a container is copied only when something inside
  it changed, so the result of a message with nothing to redact *is* the message. Nothing
  is ever mutated; callers must not mutate what they pass in while they hold the result.
* Headers: :mod:`~mcp_tap.core.redaction.headers` (:class:`Redactor`'s base class).
* JSON text with nothing to redact is returned unchanged, byte for byte.
"""

from __future__ import annotations

import json
import secrets as _secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from mcp_tap.core import deepjson
from mcp_tap.core.redaction.clean import CLEAN_CHECK_MIN, CleanJson
from mcp_tap.core.redaction.headers import MCP_PARAM, HeaderRedaction
from mcp_tap.core.redaction.keys import SESSION_HEADER, KeyMatcher, canonical_key
from mcp_tap.core.redaction.policy import RedactionPolicy
from mcp_tap.core.redaction.text import REDACTED, redact_plain_text, shaped, strip_url_secrets
from mcp_tap.core.sentinel import SentinelError, decode_header_value

_CONTAINERS: Final = (dict, list, tuple)
_RECURSE: Final = 100  # levels walked recursively; deeper ones by a loop (no recursion limit)
_MAX_CACHED_KEYS: Final = 8192  # attacker-chosen keys must not grow memory
# String values whose text pass is remembered (tool descriptions, schemas, URIs repeat from
# one answer to the next); longer ones are not worth holding, and a full cache starts over.
_MAX_CACHED_TEXTS: Final = 4096
_MAX_CACHED_TEXT_CHARS: Final = 2048
# Messages whose member verdict is remembered (see Redactor._clean_member): up to this long,
# and at most this many bytes of members remembered (then the memory starts over).
_MAX_MEMBER: Final = 256 * 1024
_MAX_MEMBER_BYTES: Final = 4 * 1024 * 1024
_new = object.__new__
_UNSEEN: Final[Any] = object()  # no verdict remembered (a verdict may be None)


@dataclass(slots=True)
class Redacted:
    """What one walk produced: the value, how many things were hidden, how deep it nests."""

    value: Any
    hits: int
    depth: int


class Redactor(HeaderRedaction):
    """Applies the default patterns plus a :class:`RedactionPolicy` to JSON, headers and text.

    ``pseudonym_key`` keys the session pseudonyms (the bundle's digest key in the proxy, so
    one session has one pseudonym across a bundle); without one a random key is drawn, and
    pseudonyms are then stable for this redactor only. Every method returns a new value (or
    the input itself when nothing changed) and never mutates its input.
    """

    def __init__(
        self, policy: RedactionPolicy | None = None, pseudonym_key: bytes | None = None
    ) -> None:
        """Build a redactor for ``policy`` (``None``: the defaults only)."""
        self.policy = policy if policy is not None else RedactionPolicy()
        self.matcher = KeyMatcher(self.policy.extra_keys, self.policy.allow_keys)
        self._argument_keys = frozenset(
            canonical_key(p.argument) for p in self.policy.argument_policies
        )
        self._keys: dict[str, bool] = {}
        self._plain_keys: set[str] = set()  # the keys of _keys that name nothing secret
        self._texts: dict[str, str] = {}  # string value -> its text pass (found=None only)
        self._header_kinds: dict[str, int] = {}
        self._clean_json = CleanJson(self.matcher)
        # The clean check's verdict on a message member's JSON (see _clean_member), bounded.
        self._clean_members: dict[bytes, int | None] = {}
        self._member_bytes = 0
        self._pseudonym_key = (
            pseudonym_key if pseudonym_key is not None else _secrets.token_bytes(32)
        )

    def is_sensitive_key(self, key: str) -> bool:
        """Return whether the value under ``key`` (any spelling) is redacted."""
        return self.matcher.is_secret_key(key)

    # -- JSON ---------------------------------------------------------------------------

    def redact_json(self, value: Any) -> Any:
        """Return ``value`` (JSON-shaped) with every secret redacted; clean parts shared.

        Tuples become lists. A bare string gets the text pass.
        """
        return self.walk(value).value

    def redact_message(self, msg: Any) -> Any:
        """Return a JSON-RPC message (or batch) redacted: the patterns + argument policies."""
        return self.walk(msg, self._policy_targets(msg)).value

    def walk_message(self, msg: Any) -> Redacted:
        """:meth:`redact_message` with the hit count and nesting depth of the result."""
        return self.walk(msg, self._policy_targets(msg) if self.policy.argument_policies
                         else None)

    def walk_message_text(
        self, msg: Any, text: bytes, written: deepjson.WrittenJson | None = None,
    ) -> Redacted:
        """:meth:`walk_message` for a message orjson parsed from ``text``.

        ``written``: what the judge of this message wrote as JSON (its judgement's
        ``ResponseContext.written``), reused when it is this message's result.

        When the text shows nothing redaction could change (see
        :class:`~mcp_tap.core.redaction.clean.CleanJson`), ``msg`` itself comes back with no
        walk (``depth`` then a bound: at least the walk's, at most
        ``clean.MAX_CLEAN_DEPTH`` + 1). A text shorter than :data:`CLEAN_CHECK_MIN` is
        walked (a small message walks faster than its text is checked).
        """
        targets = self._policy_targets(msg) if self.policy.argument_policies else None
        if targets is None and len(text) >= CLEAN_CHECK_MIN:
            depth = (self._clean_member(msg, written)
                     if type(msg) is dict and len(text) <= _MAX_MEMBER else None)
            if depth is None:
                depth = self._clean_json.depth(text)
            if depth is not None:
                done: Redacted = _new(Redacted)  # Redacted(msg, 0, depth) without type.__call__
                done.value, done.hits, done.depth = msg, 0, depth
                return done
        elif targets is None:
            return self.walk_plain(msg)
        return self.walk(msg, targets)

    def walk_plain(self, value: Any) -> Redacted:
        """:meth:`walk` of ``value`` with no targets, collecting nothing: the same answer,
        reached without building anything when nothing in it is redacted (see
        :meth:`_plain_depth`), by the walk otherwise."""
        if type(value) is dict:
            depth = self._plain_depth(value, 1)
            if depth >= 0:
                done: Redacted = _new(Redacted)  # Redacted(value, 0, depth), no type.__call__
                done.value, done.hits, done.depth = value, 0, depth
                return done
        return self.walk(value)

    def _plain_depth(self, node: dict[Any, Any] | list[Any], level: int) -> int:
        """The depth the walk reports for the non-empty container ``node`` at ``level`` when
        it provably changes nothing there: every key known plain and no string with the shape
        the text pass looks at (nor a tuple or another type the walk would look at twice);
        -1 when that is not so (then the walk decides). Read only: nothing is remembered."""
        if level > _RECURSE:
            return -1  # the walk's loop, for deep values
        if type(node) is dict:
            if not self._plain_keys.issuperset(node):
                return -1  # a key not known plain: the walk tests (and remembers) it
            values: Any = node.values()
        else:
            values = node
        depth = level
        for child in values:
            kind = type(child)
            if kind is str:
                if shaped(child):
                    return -1
            elif kind is dict or kind is list:
                if child:
                    inner = self._plain_depth(child, level + 1)
                    if inner < 0:
                        return -1
                    if inner > depth:
                        depth = inner
            elif not (kind is int or kind is float or kind is bool or child is None):
                return -1
        return depth

    def _clean_member(
        self, msg: dict[Any, Any], written_by_judge: deepjson.WrittenJson | None,
    ) -> int | None:
        """A bound of the walk's depth of a message whose one container member (a response's
        ``result``) is known clean by its JSON, scalar members needing nothing; else None.

        The walk of a member depends on the member's value alone, and list answers
        (``tools/list`` and the like) repeat their ``result`` under every new id: the
        verdict on the member's JSON is remembered (bounded), so such an answer is checked
        once, not per exchange. A miss costs the member's serialisation and a look-up.
        """
        plain = self._plain_keys
        member: Any = None
        for key, value in msg.items():
            kind = type(value)
            if key not in plain and (type(key) is not str or self._secret_key(key)):
                return None  # a key the walk would hide (or one not yet known plain)
            if kind is str:
                if shaped(value):  # the text pass might change it: the walk decides
                    return None
            elif kind is dict or kind is list:
                if member is not None or not value:
                    return None  # two containers, or an empty one: the text check decides
                member = value
            elif not (kind is int or kind is float or kind is bool or value is None):
                return None
        if member is None:
            return None
        if written_by_judge is not None and written_by_judge.result is member:
            written: bytes = written_by_judge.json  # the judge wrote this very result
        else:
            try:
                written = orjson.dumps(member)
            except TypeError:  # nested past orjson's limit
                return None
        known = self._clean_members
        depth = known.get(written, _UNSEEN)
        if depth is _UNSEEN:
            depth = self._clean_json.depth(written)
            self._member_bytes += len(written)
            if self._member_bytes > _MAX_MEMBER_BYTES:
                known.clear()
                self._member_bytes = len(written)
            known[written] = depth
        return None if depth is None else depth + 1  # the member sits one level down

    def walk(
        self,
        value: Any,
        targets: dict[int, frozenset[str]] | None = None,
        found: set[str] | None = None,
    ) -> Redacted:
        """Redact ``value``; ``targets`` maps ``id(dict)`` to argument names to hide there.

        ``found`` collects the scalar values removed (for :meth:`removed_values`). A
        container is rebuilt only when a child changed. The first :data:`_RECURSE` levels
        are walked recursively (the fast way in Python); deeper subtrees by a loop, so no
        nesting reaches the recursion limit.
        """
        if isinstance(value, str):
            shown = self._string(value, found)
            return Redacted(shown, int(shown is not value), 0)
        if not isinstance(value, _CONTAINERS):
            return Redacted(value, 0, 0)
        acc = [0, 0]  # hits, depth
        done: Redacted = _new(Redacted)  # Redacted(...) without type.__call__ (per message)
        done.value = self._node(value, 1, targets, found, acc)
        done.hits, done.depth = acc
        return done

    def _node(
        self,
        node: Any,
        level: int,
        targets: dict[int, frozenset[str]] | None,
        found: set[str] | None,
        acc: list[int],
    ) -> Any:
        """One non-empty container at ``level``, redacted (``node`` itself when clean)."""
        if level > _RECURSE:
            done = self._walk_loop(node, targets, found)
            acc[0] += done.hits
            acc[1] = max(acc[1], level - 1 + done.depth)
            return done.value
        if level > acc[1]:
            acc[1] = level
        changes: dict[Any, Any] | None = None
        # The hot loop of the recorder: one loop for dicts (keys tested) and lists, exact
        # types tested first, the key cache read inline; the same decisions as _walk_loop.
        known = self._keys
        keyed = isinstance(node, dict)
        if keyed:
            # Every key known (in C, one set test) to name nothing secret, and no argument
            # policy here: the values alone decide (the loop minus its per-key tests).
            plain = targets is None and self._plain_keys.issuperset(node)
            hidden = targets.get(id(node)) if targets else None
            items: Any = node.items()
        else:  # a list or tuple: no keys to test
            plain, hidden, items = True, None, enumerate(node)
        for slot, child in items:
            if not plain and isinstance(slot, str):
                secret = known.get(slot)
                if secret is None:
                    secret = self._secret_key(slot)
                if secret or (hidden is not None and canonical_key(slot) in hidden):
                    if child != REDACTED:
                        if found is not None:
                            _collect_leaves(child, found)
                        changes = changes or {}
                        changes[slot] = REDACTED
                        acc[0] += 1
                    continue
            # _child's scalar cases inline (no call for the usual leaf).
            kind = type(child)
            if kind is str:
                if not shaped(child):
                    continue
                new = self._child(child, level, targets, found, acc)
            elif kind is int or kind is float or kind is bool or child is None:
                continue
            elif kind is dict or kind is list:
                if not child:
                    continue
                new = self._node(child, level + 1, targets, found, acc)
            else:
                new = self._child(child, level, targets, found, acc)
            if new is not child:
                changes = changes or {}
                changes[slot] = new
        if keyed:
            return {**node, **changes} if changes else node
        if changes is None and not isinstance(node, tuple):
            return node
        result = list(node)
        for index, new in (changes or {}).items():
            result[index] = new
        return result

    def _child(
        self,
        child: Any,
        level: int,
        targets: dict[int, frozenset[str]] | None,
        found: set[str] | None,
        acc: list[int],
    ) -> Any:
        """A value under a key that is not secret (or in a list), redacted."""
        kind = type(child)
        if kind is str:
            if shaped(child):
                new = self._string(child, found)
                if new is not child:
                    acc[0] += 1
                return new
            return child
        if kind is int or kind is float or kind is bool or child is None:
            return child
        if isinstance(child, _CONTAINERS):
            if child:
                return self._node(child, level + 1, targets, found, acc)
            return [] if isinstance(child, tuple) else child
        if isinstance(child, str) and shaped(child):
            new = self._string(child, found)
            if new is not child:
                acc[0] += 1
            return new
        return child

    def _secret_key(self, key: str) -> bool:
        """Whether a key as spelt names a secret (cached per spelling, bounded)."""
        known = self._keys.get(key)
        if known is None:
            known = self.matcher.is_secret(canonical_key(key))
            if len(self._keys) < _MAX_CACHED_KEYS:
                self._keys[key] = known
                if not known:
                    self._plain_keys.add(key)
        return known

    def _walk_loop(
        self,
        value: Any,
        targets: dict[int, frozenset[str]] | None,
        found: set[str] | None,
    ) -> Redacted:
        """:meth:`walk` for a deep container: post-order with an explicit stack."""
        hits = 0
        depth = 1
        # Frame: [container, iterator over (slot, child), changes (slot -> new), slot in parent]
        stack: list[list[Any]] = [[value, _items(value), None, None]]
        while stack:
            frame = stack[-1]
            node = frame[0]
            hidden = targets.get(id(node)) if targets else None
            is_dict = isinstance(node, dict)
            for slot, child in frame[1]:
                if (
                    is_dict
                    and isinstance(slot, str)
                    and (
                        self._secret_key(slot)
                        or (hidden is not None and canonical_key(slot) in hidden)
                    )
                ):
                    if child != REDACTED:
                        if found is not None:
                            _collect_leaves(child, found)
                        frame[2] = frame[2] or {}
                        frame[2][slot] = REDACTED
                        hits += 1
                    continue
                if isinstance(child, dict | list | tuple):
                    if child:
                        stack.append([child, _items(child), None, slot])
                        depth = max(depth, len(stack))
                        break
                    if isinstance(child, tuple):
                        frame[2] = frame[2] or {}
                        frame[2][slot] = []
                elif isinstance(child, str) and shaped(child):
                    shown = self._string(child, found)
                    if shown is not child:
                        frame[2] = frame[2] or {}
                        frame[2][slot] = shown
                        hits += 1
            else:
                stack.pop()
                changes = frame[2]
                result: Any = node
                if changes is not None or isinstance(node, tuple):
                    if is_dict:
                        result = {**node, **changes} if changes else node
                    else:
                        result = list(node)
                        for index, new in (changes or {}).items():
                            result[index] = new
                if stack and result is not node:
                    parent = stack[-1]
                    parent[2] = parent[2] or {}
                    parent[2][frame[3]] = result
                elif not stack:
                    return Redacted(result, hits, depth)
        raise AssertionError("unreachable")  # pragma: no cover - the root frame returns

    def _string(self, text: str, found: set[str] | None) -> str:
        """A string value: the text pass (the same object back when nothing changed)."""
        shown = self._text_pass(text, found)
        return text if shown == text else shown

    def _text_pass(self, text: str, found: set[str] | None) -> str:
        """:func:`redact_plain_text` with this redactor's matcher."""
        if found is None and len(text) <= _MAX_CACHED_TEXT_CHARS:
            # The pass depends on the text and the matcher only: remembered per value.
            shown = self._texts.get(text)
            if shown is None:
                shown = redact_plain_text(text, self.matcher.is_secret_key)
                if len(self._texts) >= _MAX_CACHED_TEXTS:
                    self._texts.clear()
                self._texts[text] = shown
            return shown
        return redact_plain_text(text, self.matcher.is_secret_key, found)

    def _policy_targets(self, msg: Any) -> dict[int, frozenset[str]] | None:
        """The argument objects the policies name in ``msg`` (a message or batch)."""
        policies = self.policy.argument_policies
        if not policies:
            return None
        targets: dict[int, set[str]] = {}
        for item in msg if isinstance(msg, list) else [msg]:
            if not isinstance(item, dict):
                continue
            method = item.get("method")
            params = item.get("params")
            if not isinstance(method, str) or not isinstance(params, dict):
                continue
            for policy in policies:
                if policy.matches(method, params):
                    target = policy.target(params)
                    if target is not None:
                        targets.setdefault(id(target), set()).add(canonical_key(policy.argument))
        return {k: frozenset(v) for k, v in targets.items()} or None

    # -- text ---------------------------------------------------------------------------

    def redact_text(self, text: str) -> str:
        """Return ``text`` (a body or SSE ``data``) with secrets redacted.

        JSON is parsed, redacted as a message and re-serialised compactly; JSON with nothing
        to redact is returned unchanged. Text orjson refuses but the stdlib accepts (``NaN``,
        lone surrogate escapes, huge integers, deep nesting) is still redacted structurally.
        JSON that cannot be written back with orjson (nested past 254 levels, say) is written
        by :func:`mcp_tap.core.deepjson.dumps`. Other text gets the regex pass.
        """
        stdlib = False
        try:
            parsed = orjson.loads(text)
        except orjson.JSONDecodeError:
            try:
                parsed = json.loads(text)
            except (ValueError, RecursionError):
                return self.redact_plain(text)
            stdlib = True
        done = self.walk(parsed, self._policy_targets(parsed))
        # An object is always written back: '{"x":{"token":"a"},"x":1}' parses to a clean
        # value, yet its text still holds "a" under the dropped duplicate.
        if not done.hits and not isinstance(parsed, dict | list):
            return text
        if not stdlib and deepjson.fits_orjson(done.value, done.depth):
            return orjson.dumps(done.value).decode("utf-8")
        # What only the stdlib parses (NaN, 1e400, huge ints, lone surrogates) is written back
        # as the stdlib would, not turned into orjson's null.
        return deepjson.dumps(done.value)

    def redact_plain(self, text: str, found: set[str] | None = None) -> str:
        """The regex pass alone (text known not to be JSON)."""
        return redact_plain_text(text, self.matcher.is_secret_key, found)

    def redact_url(self, target: str) -> str:
        """A request target or URL with secret query and path parameters redacted."""
        if "=" not in target:
            return target
        return redact_plain_text(target, self.matcher.is_secret_key)

    def redact_reason(self, text: str) -> str:
        """Free text from a library (an error reason): URLs cut to their path, then the pass."""
        return self.redact_plain(strip_url_secrets(text))

    # -- what finding messages may quote ------------------------------------------------

    def removed_values(
        self, header_lists: Sequence[Sequence[tuple[str, str]]], messages: Sequence[Any] = ()
    ) -> list[str]:
        """Return the values redaction removes from these headers and JSON-RPC messages.

        Longest first, so that :meth:`scrub` replaces a secret containing another whole;
        values shorter than 4 characters are left out (replacing ``1`` everywhere would
        mangle a message without hiding anything).
        """
        found: set[str] = set()
        for pairs in header_lists:
            for name, value in pairs:
                if canonical_key(name) == SESSION_HEADER:
                    found.add(value.strip())
                else:
                    self._header_value(name, value, found)
        for message in messages:
            self.walk(message, self._policy_targets(message), found)
        return sorted((v for v in found if len(v) >= 4), key=len, reverse=True)

    def redact_mirrored(self, pairs: list[list[str]], message: Any) -> list[list[str]]:
        """``pairs`` (a request's redacted ``[[name, value], ...]``) with every
        ``Mcp-Param-*`` value that mirrors an argument redaction hides in ``message``
        redacted too; ``pairs`` itself when there is none (never mutated).

        A tool declares the header name (``x-mcp-header``), which need not be the argument's
        name nor secret-sounding (``tenant_key`` mirrored as ``Mcp-Param-Tenant``), so the
        mirror is found by its value: the header's decoded value (sentinel Base64 or raw)
        equal to a value the walk of the request removed (an argument policy's, a secret
        key's). The caller asks only when the body lost something.
        """
        params = [i for i, (name, _) in enumerate(pairs)
                  if canonical_key(name).startswith(MCP_PARAM)]
        if not params:
            return pairs
        found: set[str] = set()
        self.walk(message, self._policy_targets(message), found)
        if not found:
            return pairs
        out = pairs
        for index in params:
            name, value = pairs[index]
            try:
                decoded = decode_header_value(value)
            except SentinelError:
                decoded = value.strip(" \t")
            if decoded in found or value.strip(" \t") in found:
                if out is pairs:
                    out = list(pairs)
                out[index] = [name, REDACTED]
        return out

    def scrub(self, text: str, secrets: Sequence[str]) -> str:
        """Return ``text`` (a finding message, a detail line) with ``secrets`` replaced.

        Messages quote wire values, raw or ``repr``-escaped; both spellings are replaced by
        :data:`REDACTED`, then the text gets :meth:`redact_text`'s pass as well.
        """
        for value in secrets:
            text = text.replace(value, REDACTED).replace(repr(value)[1:-1], REDACTED)
        return self.redact_text(text)


def _items(node: Any) -> Any:
    """An iterator over a container's (slot, child) pairs."""
    return iter(node.items()) if isinstance(node, dict) else enumerate(node)


def _collect_leaves(value: Any, out: set[str]) -> None:
    """Add the string form of every scalar in ``value`` to ``out`` (iteratively)."""
    leaves = [value]
    while leaves:
        item = leaves.pop()
        if isinstance(item, dict):
            leaves.extend(item.values())
        elif isinstance(item, list | tuple):
            leaves.extend(item)
        elif item is not None and not isinstance(item, bool):
            out.add(str(item))
