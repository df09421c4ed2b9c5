"""Bundles no trusted key vouches for, read narrowly after the number screen
(mcp_tap.evidence.screen): verify reports and the gate decides exactly what the full parse
gives, whatever numbers the lines hold."""

from __future__ import annotations

import copy
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import msgspec
import orjson
import pytest
from gate_bundles import exchange
from hypothesis import given, settings
from hypothesis import strategies as st
from test_gate_fields import _varied

import mcp_tap.gate.scan as scanning
from mcp_tap.evidence import EvidenceWriter, verify_bundle
from mcp_tap.evidence.format import DIGEST_MEMBER, DIGEST_TAIL
from mcp_tap.evidence.screen import nesting_bounded, suspect_lines
from mcp_tap.gate import GateRequest, evaluate
from mcp_tap.gate.fields import decode_checked
from mcp_tap.gate.policy import Policy

# Tokens the writer cannot write (or writes otherwise), put in place of string sentinels.
_RAW = {
    "@u64+1@": b"18446744073709551616",  # orjson: a float; msgspec: an int
    "@i64-1@": b"-9223372036854775809",
    "@u64+2@": b"18446744073709551617",
    "@inf@": b"1e400",  # orjson rejects the line
    "@inf-spaced@": b" -1.5E+400 ",
    "@digits309@": b"9" * 309,  # too large for a double, no exponent
    "@digits300@": b"9" * 300,  # large, but a double
    "@tiny@": b"1.5e-7",  # an exponent orjson accepts
    "@time20@": b"17800000000000000000",
}


def reseal(bundle: Path) -> None:
    """Make an unsigned bundle whose lines were edited consistent again, as a holder of the
    disk can without a key: each line's digest, the next line's prev, the manifests' size,
    SHA-256 and chain heads and the closing summary's chain head."""
    renamed: dict[bytes, bytes] = {}  # old digest -> new
    head = b""
    for segment in sorted(bundle.glob("segment-*.jsonl")):
        first_prev = head
        lines = segment.read_bytes().split(b"\n")[:-1]
        for index, line in enumerate(lines):
            tail = len(line) - DIGEST_TAIL
            old = line[tail + len(DIGEST_MEMBER):-2]
            for before, after in renamed.items():
                line = line.replace(b'"prev":"' + before + b'"', b'"prev":"' + after + b'"')
            body = line[:tail]
            head = hashlib.sha256(body + b"}").hexdigest().encode()
            renamed[old] = head
            lines[index] = body + DIGEST_MEMBER + head + b'"}'
        data = b"\n".join(lines) + b"\n"
        segment.write_bytes(data)
        manifest = segment.with_name(segment.name.replace(".jsonl", ".manifest.json"))
        values = orjson.loads(manifest.read_bytes())
        values.update(bytes=len(data), fileSha256=hashlib.sha256(data).hexdigest(),
                      chainHead=head.decode(), prevSegmentChainHead=first_prev.decode())
        manifest.write_bytes(orjson.dumps(values))
    meta = orjson.loads((bundle / "bundle.json").read_bytes())
    meta["closed"]["chainHead"] = head.decode()
    (bundle / "bundle.json").write_bytes(orjson.dumps(meta))


# Numbers orjson reads (some otherwise than msgspec would), where the tallies read them.
_READ: list[tuple[tuple[str, ...], Any]] = [
    (("rpcId",), 2**63),  # the writer writes it; msgspec's int64 bound rejects it
    (("rpcId",), "@u64+1@"),
    (("rpcId",), "@i64-1@"),
    (("origin", "status"), "@u64+1@"),
    (("exchangeId",), "@u64+2@"),
    (("ingress", "receivedAt"), "@time20@"),
    (("origin", "endAt"), "@u64+1@"),
    (("egress", "sentAt"), "@u64+1@"),
    (("origin", "body", "id"), "@u64+1@"),
    (("client",), "@digits300@"),
    (("client",), "@tiny@"),
    (("ingress", "headers"), [["x", "@digits300@"], ["MCP-Protocol-Version", "@u64+1@"]]),
    (("findings",), [{"rule": "response.id", "where": "@u64+1@"}]),
    (("client",), "text ,e, 1e400 [1E5] : -2e-9"),  # a string: a false alarm only
]
# Numbers orjson rejects (the line is not valid JSON) in members the narrow parse skips.
_REJECTED: list[tuple[tuple[str, ...], Any]] = [
    (("client",), "@inf@"),
    (("client",), "@inf-spaced@"),
    (("client",), "@digits309@"),
    (("origin", "body", "result", "ttlMs"), "@inf@"),
    (("ingress", "headers"), [["MCP-Protocol-Version", "@inf@"]]),
    (("ingress", "headers"), [["x", "@digits309@"]]),
]


def _odd_numbers(odd: list[tuple[tuple[str, ...], Any]]) -> list[dict[str, Any]]:
    """The varied exchanges (without their gap) and exchanges with ``odd`` numbers."""
    records = [r for r in _varied() if r.get("kind") != "gap"]
    for n, (path, value) in enumerate(odd):
        record = exchange(200 + n)
        target = record
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        records.append(record)
    sse = exchange(230)  # an SSE answer whose id only orjson reads as a float
    body = sse["origin"].pop("body")
    body["id"] = "@u64+1@"
    sse["rpcId"] = "@u64+1@"
    sse["origin"]["sse"] = [{"at": "@u64+1@", "data": body}]
    records.append(sse)
    records.append({"kind": "hop-comparison", "box": "gw", "between": ["@u64+1@", "@u64+2@"],
                    "findings": [{"rule": "hop.body-changed", "boundary": "hop",
                                  "message": "m"}]})
    return records


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    with EvidenceWriter(path, max_segment_bytes=16_000) as writer:
        for record in records:
            assert writer.submit(copy.deepcopy(record))
    for segment in path.glob("segment-*.jsonl"):
        data = segment.read_bytes()
        for sentinel, token in _RAW.items():
            data = data.replace(json.dumps(sentinel).encode(), token)
        segment.write_bytes(data)
    reseal(path)
    return path


def _verified(bundle: Path, **kwargs: Any) -> tuple[Any, ...]:
    report = verify_bundle(bundle, **kwargs)
    return (report.ok, report.records, report.exchanges, report.chain_head, report.lost,
            [(p.kind, p.severity, p.message, p.segment, p.seq) for p in report.problems])


@pytest.mark.parametrize("odd", [_READ, _READ + _REJECTED])
def test_verify_reports_what_the_full_parse_reports(
        tmp_path: Path, odd: list[tuple[tuple[str, ...], Any]]) -> None:
    """verify of an unsigned bundle (narrow parse after the screen) against verify with a
    consumer that takes the fully parsed records."""
    bundle = _write(tmp_path / "b", _odd_numbers(odd))
    narrow = _verified(bundle)
    assert narrow == _verified(bundle, consumer=lambda _records: None)
    messages = [message for _kind, _sev, message, _seg, _seq in narrow[-1]]
    # Every number orjson rejects makes its line not valid JSON.
    assert sum("not valid JSON" in m for m in messages) == len(odd) - len(_READ)
    # Some numbers orjson reads are values no writer writes (a time past year 9999, a status
    # past 999, a number where a string belongs, a header value that is a number): the
    # evidence schema reports each, the same whichever parse read the line.
    schema = [m for m in messages if "evidence schema" in m]
    assert len(schema) == 7 and not narrow[0]
    assert any(m.endswith("at $.ingress.receivedAt") for m in schema)


@pytest.mark.parametrize("odd", [_READ, _READ + _REJECTED])
def test_gate_decides_what_the_full_parse_decides(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        odd: list[tuple[tuple[str, ...], Any]]) -> None:
    """The whole decision, integrity included, from the screened narrow parse and from the
    full parse of every line (a bundle that fails verification has its records read again,
    fully, for the tallies)."""
    bundle = _write(tmp_path / "b", _odd_numbers(odd))
    vouched: list[bool] = []

    def counted(line: bytes | memoryview) -> Any:
        view = decode_checked(line)
        vouched.append(view is not None)
        return view

    monkeypatch.setattr(scanning, "decode_checked", counted)
    request = GateRequest(evidence=(bundle,), policy=Policy())
    narrow = evaluate(request, workers=1).to_json()
    assert sum(vouched) > 60  # the ordinary lines were read narrowly
    monkeypatch.setattr(scanning, "decode_checked", lambda _line: None)
    assert narrow == evaluate(request, workers=1).to_json()


@pytest.mark.parametrize("token", [b"1e400", b"-1E+309", b"1.0e0400", b"9" * 309,
                                   b"1" * 308 + b".5", b"0.5e999", b"1e-5", b"\t-0.0e+1\r "])
def test_suspect_lines_find_every_huge_number(token: bytes) -> None:
    lines = [b'{"a":"x","b":[1,2.5,' + token + b'],"c":{"d":null}}', b'{"a":1}',
             b'{"e":' + token + b'}', b'{"f": \t' + token + b' \r}']
    block = b"\n".join(lines) + b"\n"
    starts = [block.index(line) for line in lines]
    found = suspect_lines(block)
    # A sampled run of digits may reach over a short line between two: a false alarm.
    assert found is not None and {starts[0], starts[2], starts[3]} <= found
    if len(token) < 300:
        assert found == {starts[0], starts[2], starts[3]}


def test_suspect_lines_leave_the_writers_lines() -> None:
    line = orjson.dumps(exchange(7))
    assert suspect_lines((line + b"\n") * 50) is None


def test_suspect_lines_leave_redaction_tags_with_one_e() -> None:
    """A legacy session's pseudonym tag whose hex holds a single ``e`` is no exponent."""
    record = exchange(7)
    tag = "[REDACTED:0123456789abcdef]"  # one e among the hex digits
    record["ingress"]["headers"] = [["mcp-session-id", tag]]
    record["note"] = {tag: [tag, "[REDACTED:e]"]}
    line = orjson.dumps(record)
    assert suspect_lines((line + b"\n") * 50) is None


def test_suspect_lines_name_each_of_many_lines() -> None:
    """Every line with an exponent is named, whichever its neighbours (the counting of
    lines goes forward from hit to hit)."""
    plain, huge = b'{"a":"[REDACTED:e1]","b":1}', b'{"a":[1,1e400],"b":{"c":2E+999}}'
    lines = [huge if n % 3 == 0 or n % 7 == 0 else plain for n in range(400)]
    block = b"\n".join(lines) + b"\n"
    starts, at = set(), 0
    for line in lines:
        if line is huge:
            starts.add(at)
        at += len(line) + 1
    assert suspect_lines(block) == starts


def test_nesting_bounded_where_msgspec_is_the_stricter() -> None:
    """Where nesting_bounded holds, msgspec rejects a line orjson rejects for its nesting."""
    if not nesting_bounded():
        pytest.skip("msgspec's nesting limit is not below orjson's here")
    for depth, orjson_takes_it in ((1023, True), (1024, False)):
        line = b'{"seq":0,"x":' + b"[" * depth + b"]" * depth + b"}"
        if orjson_takes_it:
            orjson.loads(line)
        else:
            with pytest.raises(orjson.JSONDecodeError):
                orjson.loads(line)
        with pytest.raises(RecursionError):
            _skip(line)


class _Skip(msgspec.Struct):
    """Decoding into this skips every member: msgspec checks syntax only."""


_skip = msgspec.json.Decoder(_Skip).decode

_DIGITS = st.text("0123456789", min_size=1, max_size=330)
_WS = st.sampled_from(["", "", " ", "\t", "\r", " \t "])


@st.composite
def _number(draw: st.DrawFn) -> str:
    whole = draw(_DIGITS).lstrip("0") or "0"
    text = ("-" if draw(st.booleans()) else "") + whole
    if draw(st.booleans()):
        text += "." + draw(_DIGITS)
    if draw(st.booleans()):
        text += draw(st.sampled_from("eE")) + draw(st.sampled_from(["", "+", "-"]))
        text += draw(st.text("0123456789", min_size=1, max_size=5))
    return draw(_WS) + text + draw(_WS)


_STRINGS = st.text(alphabet=st.sampled_from(list("e E0123456789.,:[]{}-+xabcdf\"\\\t")),
                   max_size=20).map(json.dumps)
_VALUES = st.recursive(
    _number() | _STRINGS | st.sampled_from(["true", "false", "null"]),
    lambda inner: (st.lists(inner, max_size=4).map(lambda v: "[" + ",".join(v) + "]")
                   | st.lists(st.tuples(_STRINGS, inner), max_size=4).map(
                       lambda kv: "{" + ",".join(f"{k}:{v}" for k, v in kv) + "}")),
    max_leaves=12)


@settings(max_examples=1500, deadline=None)
@given(st.lists(_VALUES, min_size=1, max_size=5))
def test_a_line_left_unscreened_parses_as_msgspec_skips_it(values: list[str]) -> None:
    """Any line the screen leaves, whose syntax msgspec's skip accepts, orjson accepts."""
    lines = [('{"v":' + value + ',"w":"e"}').encode() for value in values]
    block = b"\n".join(lines) + b"\n"
    suspects = suspect_lines(block) or set()
    start = 0
    for line in lines:
        if start not in suspects:
            try:
                _skip(line)
            except msgspec.DecodeError:
                pass
            else:
                orjson.loads(line)  # raises if the screen let a huge number through
        start += len(line) + 1


def test_raw_members_decode_as_the_full_parse_reads_them() -> None:
    """A result or findings text is decoded by orjson: an integer past 64 bits is the float
    the fully parsed record holds (msgspec would give an int), and a number too large for a
    double fails the narrow parse, as it fails the full one."""
    from mcp_tap.evidence.known import KnownValues

    known = KnownValues().get(msgspec.Raw(b'{"n":[18446744073709551616,-1,0.5]}'))
    assert known is not None
    assert known.value == orjson.loads(b'{"n":[18446744073709551616,-1,0.5]}')
    assert type(known.value["n"][0]) is float
    assert KnownValues().get(msgspec.Raw(b'[1e400]')) is None


_LINE = orjson.dumps({"kind": "exchange", "seq": 7, "prev": "ab" * 32, "digest": "cd" * 32,
                      "origin": {"status": 200, "body": {"jsonrpc": "2.0", "id": 1,
                                                         "result": {"x": [1, 2.5, None]}}},
                      "client": "127.0.0.1", "sizes": [12, 345], "at": 1780000000.25})


_NUMBERS = [m.span() for m in re.finditer(rb"(?<=[:,\[])[-0-9.]+", _LINE)]


@settings(max_examples=2000, deadline=None)
@given(st.sampled_from(_NUMBERS), _number(),
       st.lists(st.tuples(st.integers(0, len(_LINE)), st.integers(0, 3),
                          st.sampled_from([b"e", b"E", b"9" * 320, b"1e400", b"-", b"+",
                                           b".", b"0", b" ", b",", b"e9", b"E+99"])
                          | st.binary(max_size=3)), max_size=3))
def test_screened_lines_read_as_the_full_parse_reads_them(
        span: tuple[int, int], number: str, edits: list[tuple[int, int, bytes]]) -> None:
    """Whatever number stands in for one of a line's numbers and whatever bytes are cut or
    inserted, a line the screen clears and verify's narrow parse accepts is one the full
    parse accepts with the same chain fields."""
    from mcp_tap.evidence.head import line_head

    line = _LINE[:span[0]] + number.encode() + _LINE[span[1]:]
    for at, cut, insert in edits:
        line = line[:at] + insert + line[at + cut:]
    line = line.replace(b"\n", b" ")
    head = line_head(line)
    if head is None or suspect_lines(line + b"\n") is not None:
        return
    record = orjson.loads(line)  # raises if the narrow parse took a line orjson rejects
    assert (head.seq, head.prev, head.digest, head.kind) == tuple(
        record.get(k) for k in ("seq", "prev", "digest", "kind"))


def test_suspect_lines_leave_digests_and_literals() -> None:
    """The letters the screen deletes (hex digits but ``e``) leave a digest's ``e`` letters
    between its quotes, and ``true`` and ``false`` keep a letter: no false alarm."""
    line = (b'{"d":"68e78bf1fc7e3e0e","t":true,"f":false,"n":null,"x":[1.5,-2,3e],'
            b'"h":[["date","Fri, 04 Dec 2026 19:48:07 GMT"]],"s": [ 1 , 2.5 ]}')
    assert suspect_lines(line.replace(b"3e]", b"3]") + b"\n") is None
    assert suspect_lines(line + b"\n") == {0}  # "3e" (not JSON): the token's mark is seen
