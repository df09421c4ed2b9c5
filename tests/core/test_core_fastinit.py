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


def test_copies_replace_and_the_real_class() -> None:
    """The object is of the dataclass itself; copies and replace keep every field."""
    import copy

    one = _Sample(1, "x", {"k": 2})
    assert type(one) is _Sample and isinstance(one, _Sample)
    assert copy.copy(one) == one and copy.deepcopy(one) == one
    assert copy.deepcopy(one).c is not one.c
    assert pickle.loads(pickle.dumps(one, protocol=2)) == one
    assert dataclasses.replace(one, c={}) == _Sample(1, "x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        one.a = 2  # type: ignore[misc]


def test_refuses_subclasses_and_bases() -> None:
    """A subclass or a base class could change the layout the construction relies on."""
    with pytest.raises(TypeError, match="cannot be subclassed"):
        class _Sub(_Sample):  # defining it is the test
            pass

    @dataclasses.dataclass(frozen=True, slots=True)
    class Base:
        a: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Derived(Base):
        b: int

    with pytest.raises(TypeError, match="base class"):
        fast_init(Derived)


def test_maker_builds_the_same_object() -> None:
    """maker(C)(...) equals C(...): same class, defaults and factories, keyword arguments."""
    from mcp_tap.core.fastinit import maker

    make = maker(_Sample)
    built = make(1, c={"x": 1})
    assert type(built) is _Sample and built == _Sample(1, "b", {"x": 1})
    assert make(1).c is not make(1).c and make(a=2) == _Sample(2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.a = 2  # type: ignore[misc]
    with pytest.raises(KeyError):
        maker(int)
