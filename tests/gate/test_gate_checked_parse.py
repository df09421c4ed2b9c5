"""The gate's parse with the evidence schema's check in the same decode
(:func:`mcp_tap.gate.fields.decode_checked`, :mod:`mcp_tap.evidence.view`): a line
decodes exactly when the view's decode and the schema's check (``line_problem``) both pass
it, and then holds what the view's decode holds (the headers aside: decoded, not raw)."""

from __future__ import annotations

import copy
import itertools
from typing import Any

import msgspec
import orjson
from gate_bundles import exchange

from mcp_tap.evidence.known import KnownJson
from mcp_tap.evidence.schema import MAX_TIME, line_problem
from mcp_tap.evidence.view import is_schema_checked
from mcp_tap.gate.fields import decode_checked, decode_view

# Values each place the schema (or the view) constrains may be given: in and out of range,
# every JSON type, integer and float forms.
_VALUES: list[Any] = [None, 0, 1, -1, 1.5, -0.5, 200, 999, 1000, MAX_TIME, int(MAX_TIME),
                      MAX_TIME * 2, int(MAX_TIME) + 1, 2**63, True, "x", "", [], {}, [1],
                      [["a", "b"]], [["a", 1]], [["a"]], [("a", "b", "c")], {"a": 1},
                      [{"at": 1.0}], [{"at": -1}], [{"at": "x"}], [1, {"at": 2}],
                      [{"rule": "r"}], [{"rule": "r", "strength": "may"}],
                      [{"rule": "r", "code": 2**63}], [{"rule": 1}], [{"boundary": "gate"}]]
_PLACES: list[tuple[str, ...]] = [
    ("findings",), ("ingress",), ("origin",), ("egress",),
    ("ingress", "receivedAt"), ("ingress", "forwardedAt"), ("ingress", "headers"),
    ("ingress", "forwardedHeaders"), ("ingress", "body"),
    ("origin", "status"), ("origin", "firstByteAt"), ("origin", "endAt"), ("origin", "sse"),
    ("origin", "headers"), ("origin", "body"),
    ("egress", "status"), ("egress", "sentAt"), ("egress", "endAt"), ("egress", "headers"),
    ("hop",), ("seq",), ("rpcId",),
]


def _lines() -> list[bytes]:
    base = exchange(3, findings=("response.id",))
    base.update(seq=3, prev="p", digest="d")
    base["ingress"]["headers"] = [["Host", "h"], ["MCP-Protocol-Version", "2025-06-18"]]
    lines = [orjson.dumps(base)]
    for place, value in itertools.product(_PLACES, _VALUES):
        record = copy.deepcopy(base)
        parent = record
        for key in place[:-1]:
            parent = parent[key]
        parent[place[-1]] = value
        lines.append(orjson.dumps(record))
    return lines


def _shown(value: Any) -> Any:
    if type(value) is KnownJson:  # a shared decoded value: its bytes say which
        return ["known", value.raw.decode()]
    if type(value) is msgspec.Raw:
        return ["raw", bytes(value).decode()]
    raise TypeError(type(value))


def _plain(record: Any) -> Any:
    value = msgspec.to_builtins(record, enc_hook=_shown)
    for member in ("ingress", "origin", "egress"):
        if isinstance(value.get(member), dict):
            for name in ("forwardedAt", "forwardedHeaders", "headers", "status", "sentAt"):
                value[member].pop(name, None)  # only the checked view reads these
    return value


def test_one_decode_is_the_view_and_the_schema() -> None:
    accepted = rejected = 0
    for line in _lines():
        checked = decode_checked(line)
        view = decode_view(line)
        passes = view is not None and line_problem(line) is None
        assert (checked is not None) == passes, line
        if checked is None:
            rejected += 1
            continue
        accepted += 1
        assert is_schema_checked(checked) and not is_schema_checked(view)
        # As JSON text: an integer time stays an integer (1 is not 1.0 there).
        assert orjson.dumps(_plain(checked)) == orjson.dumps(_plain(view)), line
    assert accepted > 50 and rejected > 50  # both outcomes are exercised
