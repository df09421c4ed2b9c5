"""Cheaper construction for the frozen, slotted dataclasses the judge makes per exchange.

A frozen dataclass's generated ``__init__`` stores each field through
``object.__setattr__`` (a global look-up, an attribute look-up and a generic attribute
store per field), because the class's own ``__setattr__`` refuses every store; the judge
makes several such objects per exchange.

Each such class has a hand-written *maker*, a plain typed function next to it: it builds
the object as an instance of a private *twin* (a plain class with the same slots and
nothing else, whose attribute stores are the interpreter's fast slot store), then gives it
its real class (``obj.__class__ = cls``; CPython allows that between two classes of the
same layout and slots). Because the maker is an ordinary function with the class's
parameters, ``mypy --strict`` checks every call, positional ones included.

:func:`fast_init` ties the class to its maker: it checks the maker takes exactly the
class's fields, in order, with the same defaults (:data:`FACTORY` for a default factory),
(checked at import) and stores every field (:func:`check_stores`, run by the tests on
every such class); then calling the class calls the maker (its ``__init__`` is
``object.__init__``). Everything else (frozen assignment, ``__eq__``, ``__hash__``,
``__repr__``, ``dataclasses.replace``, positional and keyword arguments) stays the
dataclass's own; pickling and copying call the class with the field values
(``__reduce__``). Hot paths call the maker itself, without ``type.__call__``.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

T = TypeVar("T")
P = ParamSpec("P")


class _Factory:
    """The type of :data:`FACTORY`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "FACTORY"


FACTORY: Any = _Factory()
"""A maker parameter's default for a field with a ``default_factory``: the maker calls the
factory when it is given this (typed Any so it fits any parameter's annotation)."""

new_twin: Callable[[type[Any]], Any] = object.__new__
"""``object.__new__`` of a twin class, typed so a maker's stores into it type-check."""


def fast_init(make: Callable[P, T]) -> Callable[[type[T]], type[T]]:
    """A class decorator: calling the frozen slots dataclass it decorates calls ``make``,
    the class's hand-written maker (see the module docstring).

    Apply it on top of ``@dataclass(frozen=True, slots=True)``; a class with
    ``__post_init__``, ``InitVar``, keyword-only fields or a base class other than
    ``object`` is refused, and so is subclassing the result, and a maker whose parameters,
    defaults or stores are not the class's fields.
    """

    def decorate(cls: type[T]) -> type[T]:
        names = _checked_layout(cls)
        _check_maker(cls, names, make)

        def __new__(_cls: type[Any], *args: Any, **kwargs: Any) -> Any:
            return make(*args, **kwargs)

        def __reduce__(self: Any) -> tuple[type[Any], tuple[Any, ...]]:
            return (type(self), tuple(getattr(self, name) for name in names))

        def __init_subclass__(subclass: type[Any], /, **kwargs: Any) -> None:
            raise TypeError(f"{cls.__name__} is built by fast_init and cannot be subclassed")

        __new__.__qualname__ = f"{cls.__qualname__}.__new__"
        __new__.__doc__ = cls.__init__.__doc__
        __reduce__.__qualname__ = f"{cls.__qualname__}.__reduce__"
        setattr(cls, "__new__", staticmethod(__new__))  # noqa: B010 - replaced on purpose
        setattr(cls, "__init__", object.__init__)  # noqa: B010 - __new__ made the object
        setattr(cls, "__reduce__", __reduce__)  # noqa: B010
        setattr(cls, "__init_subclass__", classmethod(__init_subclass__))  # noqa: B010
        return cls

    return decorate


def _checked_layout(cls: type[Any]) -> tuple[str, ...]:
    """The field names of ``cls``, once it is known to be a class a twin can stand for."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__name__} is not a frozen slots dataclass")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} has __post_init__")
    if cls.__bases__ != (object,):
        raise TypeError(f"{cls.__name__} has a base class: its layout is not only its slots")
    fields = dataclasses.fields(cls)
    if any(not f.init or f.kw_only for f in fields):
        raise TypeError(f"{cls.__name__} has a field outside the positional __init__")
    names = tuple(f.name for f in fields)
    if tuple(cls.__dict__["__slots__"]) != names:
        raise TypeError(f"{cls.__name__}'s slots are not its fields")
    return names


def _check_maker(cls: type[Any], names: tuple[str, ...], make: Callable[..., Any]) -> None:
    """Refuse a maker whose parameters are not the class's fields (names, order, kinds and
    defaults); :func:`check_stores` checks what it stores."""
    fields = dataclasses.fields(cls)
    params = list(inspect.signature(make).parameters.values())
    if [p.name for p in params] != list(names) or any(
        p.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params
    ):
        raise TypeError(f"{make.__name__} does not take {cls.__name__}'s fields in order")
    for f, p in zip(fields, params, strict=True):
        if f.default is not dataclasses.MISSING:
            expected: Any = f.default
        elif f.default_factory is not dataclasses.MISSING:
            expected = FACTORY
        else:
            expected = inspect.Parameter.empty
        if p.default is not expected and p.default != expected:
            raise TypeError(f"{make.__name__}'s default for {f.name} is not {cls.__name__}'s")


def check_stores(cls: type[Any], make: Callable[..., Any]) -> None:
    """Raise TypeError unless ``make`` stores every field of ``cls`` as given (distinct
    markers in, the same markers out, an object of ``cls``) and calls each default factory.
    Run by the tests (at decoration time the class is not yet bound to its name, which the
    maker's last store reads): with :func:`fast_init`'s own check of the parameters, adding
    a field to a class, its maker or its twin and not to the others fails.
    """
    fields = dataclasses.fields(cls)
    names = [f.name for f in fields]
    markers = [object() for _ in names]
    made = make(*markers)
    if type(made) is not cls or [getattr(made, n) for n in names] != markers:
        raise TypeError(f"{make.__name__} does not store every field of {cls.__name__}")
    required = [m for m, g in zip(markers, fields, strict=True)
                if g.default is dataclasses.MISSING and g.default_factory is dataclasses.MISSING]
    for f in fields:
        if f.default_factory is not dataclasses.MISSING:
            built = getattr(make(*required), f.name)
            if built != f.default_factory() or built is getattr(make(*required), f.name):
                raise TypeError(f"{make.__name__} does not call {f.name}'s default factory")
