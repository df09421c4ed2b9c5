"""fast_init keeps a frozen slots dataclass's behaviour: only its __init__ is cheaper."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from mcp_tap.core.eras import Era
from mcp_tap.core.exchange import Judgement
from mcp_tap.core.fastinit import fast_init
from mcp_tap.core.jsonrpc import Classified, Kind
from mcp_tap.core.requests import RequestContext
from mcp_tap.core.sse import SSEEvent


@fast_init
@dataclasses.dataclass(frozen=True, slots=True)
class _Sample:
    a: int
    b: str = "b"
    c: dict[str, int] = dataclasses.field(default_factory=dict)


def test_defaults_factories_and_keywords_as_the_dataclass_made_them() -> None:
    one, two = _Sample(1), _Sample(1)
    assert one == _Sample(a=1, b="b", c={}) and one.c is not two.c
    assert _Sample(2, c={"x": 1}) == _Sample(2, "b", {"x": 1})
    assert dataclasses.replace(one, b="z") == _Sample(1, "z")
    with pytest.raises(TypeError):
        _Sample()  # type: ignore[call-arg]


def test_still_frozen_hashable_and_picklable() -> None:
    event = SSEEvent("d", id="1")
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.data = "x"  # type: ignore[misc]
    assert hash(event) == hash(SSEEvent("d", None, "1", None))
    assert pickle.loads(pickle.dumps(event)) == event
    assert Classified(Kind.REQUEST, {"x": 1}).problem == ""
    first, second = RequestContext(Era.MODERN), RequestContext(era=Era.MODERN)
    assert first == second and first.tool_schemas == {}
    assert first.tool_schemas is not second.tool_schemas
    assert Judgement(Era.LEGACY, None, (), None, ()).context is None


def test_refuses_what_it_cannot_copy() -> None:
    @dataclasses.dataclass
    class Plain:
        a: int

    with pytest.raises(TypeError):
        fast_init(Plain)
