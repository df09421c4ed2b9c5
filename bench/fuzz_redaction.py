"""Long fuzz run of redaction and the SSE decoder (not part of CI: about a minute per target).

Seeded, structure-aware generation (reproducible with ``--seed``): JSON values of random
shape and depth (up to 3000 levels), mutated text (truncation, byte flips, inserted quotes,
escapes, percent-encoding, huge numbers, invalid UTF-8), header pairs, URLs and free text,
each with a secret planted under a secret key spelt some random way, and event streams cut
into random chunks. Per input, a crash is any exception; a *failure* is a broken property:

* redaction (``Redactor.redact_text``, ``redact_message``, ``redact_headers``,
  ``redact_reason``): the planted secret is gone from the output; JSON that orjson parses
  comes out as text that parses again; the input object is not mutated;
* SSE (``SSEDecoder``): the events do not depend on how the stream was chunked, and
  ``SSEError`` (a line or event over its limit) is the only exception.

Run: ``.venv/bin/python bench/fuzz_redaction.py --inputs 100000`` (per target). Exit 1 on
any crash or failure, with the seed and input index to replay it (``--only N``).
"""

from __future__ import annotations

import random
import string
import sys
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import orjson
from fuzz_runner import fuzz_parser, run_target

from mcp_tap.core.deepjson import dumps
from mcp_tap.core.redaction import DEFAULT_PATTERNS, KeyMatcher, Redactor
from mcp_tap.core.sse import SSEDecoder, SSEError

_MATCHER = KeyMatcher()
_SEPARATORS = ("-", "_", ".", " ", "")
_NAMES = (*DEFAULT_PATTERNS, "accesstoken", "clientsecret", "xapikey", "refreshtoken")


def secret_key(rng: random.Random) -> str:
    """A secret name in a random spelling (case, separators, prefix, suffix)."""
    while True:
        base = rng.choice(_NAMES)
        out = []
        for i, char in enumerate(base):
            if i and rng.random() < 0.2:
                out.append(rng.choice(_SEPARATORS))
            out.append(char.upper() if rng.random() < 0.5 else char)
        name = rng.choice(["", "x-", "My", "upstream_"]) + "".join(out) + rng.choice(
            ["", "Id", "-2", "_value"])
        if _MATCHER.is_secret_key(name):
            return name


def secret_value(rng: random.Random) -> str:
    """A planted secret: distinctive, alphanumeric, 14-24 characters."""
    return "Qz7" + "".join(rng.choices(string.ascii_letters + string.digits, k=rng.randint(11, 21)))


def json_value(rng: random.Random, depth: int) -> Any:
    """A random JSON value of at most ``depth`` levels."""
    roll = rng.random()
    if depth <= 0 or roll < 0.3:
        return rng.choice([None, True, False, 0, -1, 2**70, 1.5e300, "", "a=b", "x: y",
                           "Bearer q", "\u00e9\u4e2d", rng.random()])
    if roll < 0.65:
        return {rng.choice(["a", "b", "_meta", "params", "data", "uri", "k%20"]) + str(i):
                json_value(rng, depth - 1) for i in range(rng.randint(0, 4))}
    return [json_value(rng, depth - 1) for _ in range(rng.randint(0, 4))]


def planted_json(rng: random.Random) -> tuple[Any, str]:
    """A JSON value with a secret under a secret key somewhere (possibly very deep)."""
    secret = secret_value(rng)
    node: Any = {secret_key(rng): rng.choice([secret, [secret], {"v": secret}])}
    roll = rng.random()
    levels = (rng.randint(900, 3000) if roll < 0.01 else rng.randint(7, 300) if roll < 0.1
              else rng.randint(0, 6))
    for _ in range(levels):
        node = ({"a": node, "s": json_value(rng, 1)} if rng.random() < 0.5
                else [json_value(rng, 1), node])
    return node, secret


def mutate(rng: random.Random, text: str) -> str:
    """Mutate text the ways a broken peer or an attacker would."""
    for _ in range(rng.randint(0, 3)):
        if not text:
            break
        op = rng.randrange(6)
        at = rng.randrange(len(text))
        if op == 0:
            text = text[:at]
        elif op == 1:
            text = text[:at] + rng.choice(['"', "\\", "{", "]", "\u0000", "\ud800", "%"]) + \
                text[at:]
        elif op == 2:
            text = text[:at] + text[at + 1 :]
        elif op == 3:
            text = text[:at] + "9" * rng.randint(1, 500) + text[at:]
        elif op == 4:
            text = text + text[at:]
        else:
            text = text[:at] + "\n" + text[at:]
    return text


def plain_text(rng: random.Random) -> tuple[str, str]:
    """Non-JSON text holding a secret under a secret key: query, form, header-like, JSON-ish."""
    secret = secret_value(rng)
    key = secret_key(rng).replace(" ", rng.choice(["", "-", "+", " "]))
    spelled = rng.choice([
        key,
        "".join(quote(c, safe="") if rng.random() < 0.3 else c for c in key),
        "".join(f"%{ord(c):02x}" if rng.random() < 0.3 else c for c in key),
    ])
    escaped = "".join(f"\\u{ord(c):04x}" if rng.random() < 0.3 else c for c in key)
    if rng.random() < 0.2:  # a bare key spelt with escapes
        spelled = escaped
    template = rng.choice([
        "GET /p?x=1&{k}={s}&y=2 HTTP/1.1", "/mcp;{k}={s}/next", "user=ada&{k}={s}",
        "{k}: {s}\r\nOther: 1", '{{"{e}": "{s}", "cut', 'err \\"{e}\\": \\"{s}\\" end',
        "Bearer {s}", "note {k}={s}", "{k}={s}",
    ])
    return template.format(k=spelled, s=secret, e=escaped), secret


# -- targets --------------------------------------------------------------------------------


def redaction_input(rng: random.Random, redactor: Redactor) -> None:
    """One redaction input; raise AssertionError when a property breaks."""
    kind = rng.randrange(5)
    if kind == 0:
        value, secret = planted_json(rng)
        before = dumps(value) if rng.random() < 0.05 else None
        shown = redactor.redact_message(value)
        if before is not None:
            assert dumps(value) == before, "input mutated"
        text = orjson.dumps(shown) if _depth_ok(shown) else b""
        assert secret.encode() not in text, "secret survived redact_message"
    elif kind == 1:
        value, secret = planted_json(rng)
        try:
            text = orjson.dumps(value).decode()
        except TypeError:  # too deep for orjson to write: the iterative writer
            text = dumps(value)
        out = redactor.redact_text(text)
        assert secret not in out, "secret survived redact_text of JSON"
        try:
            orjson.loads(text)
        except orjson.JSONDecodeError:
            return
        orjson.loads(out)  # parseable in, parseable out
    elif kind == 2:
        text, secret = plain_text(rng)
        assert secret not in redactor.redact_text(text), f"secret survived: {text!r}"
        redactor.redact_text(mutate(rng, text))
        redactor.redact_reason(mutate(rng, f"ClientError: https://u:{secret}@h/p?{text}"))
    elif kind == 3:
        secret = secret_value(rng)
        name = secret_key(rng).replace(" ", "-")
        value = rng.choice(["{s}", "Bearer {s}", "Basic {s}", "a=1; sid={s}"]).format(s=secret)
        pairs = [("X-Trace", "t"), (name, value), ("Referer", f"https://h/?token={secret}")]
        assert all(secret not in v for _, v in redactor.redact_headers(pairs)), pairs
    else:
        value, _ = planted_json(rng)
        try:
            text = orjson.dumps(value).decode()
        except TypeError:
            return
        raw = mutate(rng, text).encode("utf-8", "surrogatepass")
        if rng.random() < 0.3:
            raw = raw.replace(b"a", b"\xff", 1)
        redactor.redact_text(raw.decode("utf-8", "replace"))


def _depth_ok(value: Any) -> bool:
    try:
        orjson.dumps(value)
    except TypeError:
        return False
    return True


def sse_stream(rng: random.Random) -> bytes:
    """A random event stream: fields, comments, BOM, every line ending, invalid UTF-8."""
    parts = [b"\xef\xbb\xbf"] if rng.random() < 0.1 else []
    eol = rng.choice([b"\n", b"\r\n", b"\r"])
    for _ in range(rng.randint(0, 12)):
        field = rng.choice([b"data", b"event", b"id", b"retry", b"", b"x", b"data ", b"ID"])
        value = rng.choice([b"", b" ", b" {\"a\":1}", b"5000", b"abc", b"\xff\xfe", b"\x00",
                            b":" * rng.randint(0, 3), bytes(rng.randrange(256) for _ in range(8))])
        sep = rng.choice([b":", b": ", b""])
        parts.append(field + sep + value + (eol if rng.random() < 0.9 else rng.choice(
            [b"\n", b"\r\n", b"\r"])))
        if rng.random() < 0.3:
            parts.append(eol)
    return b"".join(parts)


def _decode(stream: bytes, cuts: list[int]) -> tuple[list[Any], bool]:
    decoder = SSEDecoder(max_line=4096, max_event=16384)
    events = []
    start = 0
    for cut in [*cuts, len(stream)]:
        events += decoder.feed(stream[start:cut])
        start = cut
    events += decoder.close()
    return events, decoder.pending_incomplete


def sse_input(rng: random.Random, _redactor: Redactor) -> None:
    """One event stream, decoded whole and in random chunks: the same events."""
    stream = sse_stream(rng)
    cuts = sorted(rng.sample(range(len(stream) + 1), k=min(len(stream) + 1, rng.randint(0, 8))))
    try:
        whole = _decode(stream, [])
    except SSEError:
        return
    assert _decode(stream, cuts) == whole, f"chunking changed the events: {stream!r} {cuts}"


TARGETS: dict[str, Callable[[random.Random, Redactor], None]] = {
    "redaction": redaction_input,
    "sse": sse_input,
}


def main() -> int:
    """Run every target for ``--inputs`` inputs; print counts; exit 1 on any crash."""
    args = fuzz_parser(__doc__.splitlines()[0], TARGETS).parse_args()
    sys.setrecursionlimit(1000)  # the default: nothing may need more
    redactor = Redactor()
    bad = 0
    for name in args.target or sorted(TARGETS):
        target = TARGETS[name]

        def one(rng: random.Random, target: Callable[..., None] = target) -> None:
            target(rng, redactor)

        bad += run_target(name, one, args)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
