"""fast_init keeps a frozen slots dataclass's behaviour: only its __init__ is cheaper."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from mcp_tap.core.eras import Era
from mcp_tap.core.exchange import Judgement
from mcp_tap.core.fastinit import FACTORY, check_stores, fast_init, new_twin
from mcp_tap.core.jsonrpc import Classified, Kind
from mcp_tap.core.requests import RequestContext
from mcp_tap.core.sse import SSEEvent


class _SampleTwin:
    __slots__ = ("a", "b", "c")


def _make_sample(a: int, b: str = "b", c: dict[str, int] = FACTORY) -> _Sample:
    made = new_twin(_SampleTwin)
    made.a = a
    made.b = b
    made.c = {} if c is FACTORY else c
    made.__class__ = _Sample
    built: _Sample = made
    return built


@fast_init(_make_sample)
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

    with pytest.raises(TypeError, match="not a frozen slots dataclass"):
        fast_init(_make_sample)(Plain)  # type: ignore[arg-type]


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
        fast_init(_make_sample)(Derived)  # type: ignore[arg-type]


def test_maker_builds_the_same_object() -> None:
    """The maker equals the class call: same class, defaults and factories, keywords."""
    built = _make_sample(1, c={"x": 1})
    assert type(built) is _Sample and built == _Sample(1, "b", {"x": 1})
    assert _make_sample(1).c is not _make_sample(1).c and _make_sample(a=2) == _Sample(2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.a = 2  # type: ignore[misc]


def _frozen(cls_name: str, **fields: object) -> type:
    """A fresh frozen slots dataclass with ``fields`` (name: default, or ... for none)."""
    namespace: dict[str, object] = {"__annotations__": {n: "object" for n in fields}}
    for name, default in fields.items():
        if default is not ...:
            namespace[name] = default
    return dataclasses.dataclass(frozen=True, slots=True)(type(cls_name, (), namespace))


def test_a_maker_that_is_not_the_fields_is_refused() -> None:
    """Adding a field to a class without adding it to its maker fails at import."""
    grown = _frozen("Grown", a=..., b="b", c=dataclasses.field(default_factory=dict), d=0)
    with pytest.raises(TypeError, match="does not take Grown's fields in order"):
        fast_init(_make_sample)(grown)
    renamed = _frozen("Renamed", a=..., b="b", z=dataclasses.field(default_factory=dict))
    with pytest.raises(TypeError, match="fields in order"):
        fast_init(_make_sample)(renamed)
    other_default = _frozen("OtherDefault", a=..., b="x",
                            c=dataclasses.field(default_factory=dict))
    with pytest.raises(TypeError, match="default for b"):
        fast_init(_make_sample)(other_default)


def test_a_maker_that_skips_a_store_is_refused() -> None:
    """A maker that takes every field but does not store one (or builds another class)."""
    same = _frozen("Same", a=..., b="b", c=dataclasses.field(default_factory=dict))

    def forgetful(a: object, b: object = "b", c: object = FACTORY) -> object:
        made = new_twin(_SampleTwin)
        made.a, made.b, made.c = a, a, {}
        made.__class__ = same
        return made

    fast_init(forgetful)(same)  # its parameters are right
    with pytest.raises(TypeError, match="does not store every field"):
        check_stores(same, forgetful)

    def no_factory(a: object, b: object = "b", c: object = FACTORY) -> object:
        made = new_twin(_SampleTwin)
        made.a, made.b, made.c = a, b, c
        made.__class__ = same
        return made

    with pytest.raises(TypeError, match="default factory"):
        check_stores(same, no_factory)
    check_stores(_Sample, _make_sample)


def test_every_per_exchange_class_is_tied_to_its_maker() -> None:
    """The judge's classes: each call builds through its hand-written maker."""
    from mcp_tap.core import exchange, jsonrpc, requests, response_message, sse

    pairs = [(jsonrpc.Classified, jsonrpc.make_classified),
             (requests.RequestContext, requests.make_request_context),
             (requests.RequestVerdict, requests.make_verdict),
             (response_message.ResponseContext, response_message.make_response_context),
             (sse.SSEEvent, sse.make_sse_event),
             (exchange.Exchange, exchange.make_exchange),
             (exchange.Judgement, exchange.make_judgement)]
    for cls, make in pairs:
        check_stores(cls, make)
        names = [f.name for f in dataclasses.fields(cls)]
        markers = [object() for _ in names]
        made = make(*markers)  # type: ignore[operator]
        assert type(made) is cls
        assert [getattr(made, n) for n in names] == markers
        assert cls(*markers) == made
