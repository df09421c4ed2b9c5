"""The gate's cheaper parse (mcp_tap.gate.fields) for bundles signed by a trusted key: the
same decision as the full parse, and lines it cannot vouch for are parsed fully."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import msgspec
import orjson
import pytest
from gate_bundles import exchange

import mcp_tap.gate.scan as scanning
from mcp_tap.evidence import EvidenceWriter
from mcp_tap.evidence.view import Answer, Ingress, Origin, view_of
from mcp_tap.gate import GateRequest, evaluate
from mcp_tap.gate.fields import decode_checked, gate_record
from mcp_tap.gate.policy import EvidencePolicy, Policy
from mcp_tap.keys import ed25519_public_hex

KEY = bytes(range(40, 72))  # a deterministic, non-secret test key (raw Ed25519 seed)


def _varied() -> list[dict[str, Any]]:
    """Exchanges of every shape the tallies read: JSON and SSE answers, errors, 5xx, tap
    errors, legacy headers, findings, a hop comparison and a gap."""
    records: list[dict[str, Any]] = []
    for n in range(60):
        record = exchange(n, findings=("response.id",) if n % 7 == 0 else ())
        if n % 5 == 1:  # answered over SSE, with a progress event first
            body = record["origin"].pop("body")
            at = record["ingress"]["receivedAt"]
            record["origin"].update(contentType="text/event-stream", sse=[
                {"at": at + 0.01, "data": {"jsonrpc": "2.0", "method": "notifications/progress",
                                           "params": {"progress": 1}}},
                {"at": at + 0.02, "data": body}])
        elif n % 5 == 2:
            record["origin"]["body"] = {"jsonrpc": "2.0", "id": n,
                                        "error": {"code": -32601, "message": "no"}}
        elif n % 5 == 3:
            record["origin"]["status"] = 503
        elif n % 11 == 4:
            record["tapError"] = {"phase": "connect", "reason": "refused"}
            record["origin"] = None
        if n % 6 == 0:  # a legacy request: the revision comes from the header
            record["era"] = "legacy"
            record["ingress"]["body"]["params"] = {}
            record["ingress"]["headers"] = [["MCP-Protocol-Version", "2025-06-18"]]
        if n % 13 == 5:  # params by position
            record["ingress"]["body"]["params"] = [n, "x"]
        record["ingress"]["forwardedHeaders"] = [["x-skipped", "v" * n]]
        records.append(record)
    records.insert(20, {"kind": "hop-comparison", "box": "gw", "between": ["edge", "origin"],
                        "exchangeIds": ["x0019"], "findings": [
                            {"rule": "hop.body-changed", "boundary": "hop", "message": "m"}]})
    records.insert(40, {"kind": "gap", "lost": 2, "reason": "queue full"})
    return records


def _bundle(path: Path, records: list[dict[str, Any]]) -> Path:
    with EvidenceWriter(path, signing_key=KEY) as writer:
        for record in records:
            assert writer.submit(copy.deepcopy(record))
    return path


def _summaries(bundle: Path, policy: Policy) -> dict[str, Any]:
    decision = evaluate(GateRequest(evidence=(bundle,), policy=policy), workers=1)
    return {s.name: (s.passed, s.summary, [r.to_json() for r in s.reasons])
            for s in decision.sources if s.name != "integrity"}


def _full_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the gate parse every line fully (its narrow parse vouches for none)."""
    monkeypatch.setattr(scanning, "decode_checked", lambda _line: None)


def test_narrow_parse_same_decision_as_the_full_parse(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Signed by a trusted key or not, the gate decodes each line narrowly (the gap record
    is then parsed fully as well) and decides what parsing every line fully decides."""
    bundle = _bundle(tmp_path / "b", _varied())
    calls: list[bytes] = []

    def counted(line: bytes | memoryview) -> dict[str, Any] | None:
        calls.append(bytes(line))
        return decode_checked(line)

    monkeypatch.setattr(scanning, "decode_checked", counted)
    trusted = Policy(evidence=EvidencePolicy(
        trusted_keys=(bytes.fromhex(ed25519_public_hex(KEY)),), require_signed=True))
    fast = _summaries(bundle, trusted)
    assert len(calls) == 62  # every line
    screened = _summaries(bundle, Policy())
    assert len(calls) == 124  # no key trusted: every line again, after the number screen
    _full_parse(monkeypatch)
    full = _summaries(bundle, Policy())
    assert fast == screened == full
    assert fast["health"][1]["window"]["samples"] == 60


def test_odd_shapes_same_decision_as_the_full_parse(tmp_path: Path) -> None:
    """Members of unexpected JSON types (an object of events, a list for a view, answers
    that are not objects) are read by the trusted parse as the full parse reads them."""
    records = _varied()
    for n, record in enumerate(records):
        if record.get("kind") != "exchange":
            continue
        if n % 4 == 0:
            record["origin"] = {**(record["origin"] or {}), "sse": {"odd": 1}}
        elif n % 4 == 1:
            record["egress"] = [1]
            record["ingress"]["body"] = [record["ingress"]["body"]]
        elif n % 4 == 2 and isinstance(record["origin"], dict):
            record["origin"]["sse"] = [1, {"at": "x", "data": [2]}, {"data": {"error": None}}]
            record["origin"]["body"] = "text"
        if n % 5 == 3:  # findings that are not a list of findings
            odd: list[Any] = [{"rule": "response.id"}, None, "x", [1, {"no": "rule"}],
                              [{"rule": "response.id", "where": ["not", "a", "str"]}]]
            record["findings"] = odd[n % 25 // 5]
    bundle = _bundle(tmp_path / "b", records)
    trusted = Policy(evidence=EvidencePolicy(
        trusted_keys=(bytes.fromhex(ed25519_public_hex(KEY)),), require_signed=True))
    assert _summaries(bundle, trusted) == _summaries(bundle, Policy())


def test_lines_it_leaves_to_the_full_parse() -> None:
    line = orjson.dumps({"seq": 1, "prev": "", "digest": "d", "kind": "exchange",
                         "ingress": {"receivedAt": 1.0}})
    view = gate_record(line)
    assert view is not None
    assert (view.seq, view.prev, view.digest, view.kind) == (1, "", "d", "exchange")
    assert isinstance(view.ingress, Ingress) and view.ingress.receivedAt == 1.0
    for bad in (line.replace(b'"seq":1', b'"seq":-1'), line.replace(b'"seq":1', b'"seq":true'),
                line.replace(b'"prev":""', b'"x":1'), line.replace(b'"d"', b'"\xff"'),
                b"[1]", b"{"):
        assert gate_record(bad) is None, bad


def test_any_shape_reads_as_the_full_parse_reads_it() -> None:
    """A member of an unexpected JSON type is kept as that value (no reader takes it for
    the object it expected), exactly as the view of the fully parsed record holds it."""
    line = orjson.dumps({"seq": 1, "prev": "", "digest": "d", "kind": "exchange",
                         "ingress": {"receivedAt": 1.0}})
    for odd, member in ((b'[1]', "ingress"), (b'{"body":[{"id":1}]}', "ingress"),
                        (b'{"body":{"params":[1]}}', "ingress"), (b'"x"', "ingress")):
        shaped = line.replace(b'{"receivedAt":1.0}', odd)
        view = gate_record(shaped)
        assert view is not None, shaped
        full = view_of(orjson.loads(shaped))
        assert msgspec.to_builtins(getattr(view, member)) == msgspec.to_builtins(
            getattr(full, member))
    odd_events = orjson.dumps({"seq": 1, "prev": "", "digest": "d", "kind": "exchange",
                               "origin": {"sse": {"not": "a list"}, "body": [1]}})
    view = gate_record(odd_events)
    assert view is not None and isinstance(view.origin, Origin)
    assert view.origin.sse == {"not": "a list"} and view.origin.body == [1]


def test_raw_members_read_as_the_full_parse_reads_them() -> None:
    """The members the gate's parse leaves raw (a result, the request's headers) give the
    SDK differential what the full parse gives: the revision from a legacy header, the same
    split of a result, each distinct result decoded once and shared."""
    from mcp_tap.evidence.known import KnownJson
    from mcp_tap.sdkdiff.compare import remembered_split
    from mcp_tap.sdkdiff.records import _request_version

    record = exchange(3)
    record["ingress"]["body"]["params"] = {}
    record["ingress"]["headers"] = [["Host", "h"], ["MCP-Protocol-Version", "2025-06-18"]]
    record.update(seq=3, prev="p", digest="d")
    line = orjson.dumps(record)
    fast, other = gate_record(line), gate_record(line)
    assert fast is not None and other is not None
    assert _request_version(fast) == _request_version(view_of(record)) == "2025-06-18"
    assert isinstance(fast.origin, Origin) and isinstance(fast.origin.body, Answer)
    assert isinstance(other.origin, Origin) and isinstance(other.origin.body, Answer)
    known = fast.origin.body.result
    assert type(known) is KnownJson and other.origin.body.result is known
    assert known.value == record["origin"]["body"]["result"]
    result = record["origin"]["body"]["result"]
    assert remembered_split("tools/list", "2026-07-28", known, frozenset()) == (
        remembered_split("tools/list", "2026-07-28", result, frozenset()))
    broken = line.replace(b'"ttlMs":0', b'"ttlMs":1e400')
    assert gate_record(broken) is None  # a result msgspec rejects: the full parse judges it
    found = orjson.dumps({**record, "findings": [{"rule": "response.id", "code": 1}]})
    first, again = gate_record(found), gate_record(found)
    assert first is not None and again is not None
    assert type(first.findings) is KnownJson and again.findings is first.findings
    assert gate_record(found.replace(b'"code":1', b'"code":1e400')) is None
    none = gate_record(orjson.dumps({**record, "findings": []}))
    assert none is not None and not none.findings
