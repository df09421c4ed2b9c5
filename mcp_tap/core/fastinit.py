"""Cheaper construction for the frozen, slotted dataclasses the judge makes per exchange.

A frozen dataclass's generated ``__init__`` stores each field through
``object.__setattr__`` (a global look-up, an attribute look-up and a generic attribute
store per field), because the class's own ``__setattr__`` refuses every store; the judge
makes several such objects per exchange. Storing through each slot's descriptor
(``type(obj).field.__set__``) is cheaper, but still a call of a C wrapper per field:
under callgrind about 3,600 instructions for a six-field object.

:func:`fast_init` builds the object as an instance of a private *twin*: a plain class with
the same slots and nothing else, whose plain attribute stores are the interpreter's fast
slot store, then gives it its real class (``obj.__class__ = cls``; CPython allows that
between two classes of the same layout and slots). That happens in a generated
``__new__``; the class's ``__init__`` is ``object.__init__``. Everything else (frozen
assignment, ``__eq__``, ``__hash__``, ``__repr__``, ``dataclasses.replace``, defaults and
default factories, positional and keyword arguments) stays the dataclass's own; pickling
and copying call the class with the field values (``__reduce__``).

Calling the class still costs ``type.__call__``: it finds ``__new__`` in the class, calls
it, then calls ``__init__``. :func:`maker` hands out the same construction as a plain
function (same arguments, same object), for the few places that make one per exchange.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar, cast

T = TypeVar("T")

_MISSING = object()
_MAKERS: dict[type[Any], Callable[..., Any]] = {}


def fast_init(cls: type[T]) -> type[T]:
    """Give the frozen slots dataclass ``cls`` a construction that stores slots directly.

    Apply it on top of ``@dataclass(frozen=True, slots=True)``; a class with
    ``__post_init__``, ``InitVar``, keyword-only fields or a base class other than
    ``object`` is refused (not needed yet), and so is subclassing the result.
    """
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__name__} is not a frozen slots dataclass")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} has __post_init__")
    if cls.__bases__ != (object,):
        raise TypeError(f"{cls.__name__} has a base class: its layout is not only its slots")
    fields = dataclasses.fields(cast(Any, cls))
    if any(not f.init or f.kw_only for f in fields):
        raise TypeError(f"{cls.__name__} has a field outside the positional __init__")
    names = tuple(f.name for f in fields)
    if tuple(cls.__dict__["__slots__"]) != names:
        raise TypeError(f"{cls.__name__}'s slots are not its fields")
    # Same slots, same base, no __dict__ or __weakref__: a layout __class__ may switch from.
    twin = type(f"_{cls.__name__}Twin", (object,), {"__slots__": names})
    namespace: dict[str, Any] = {
        "_MISSING": _MISSING, "_new": object.__new__, "_twin": twin, "_cls": cls,
    }
    args: list[str] = []
    body: list[str] = ["    self = _new(_twin)"]
    for i, f in enumerate(fields):
        if f.default is not dataclasses.MISSING:
            namespace[f"_default{i}"] = f.default
            args.append(f"{f.name}=_default{i}")
            body.append(f"    self.{f.name} = {f.name}")
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"_factory{i}"] = f.default_factory
            args.append(f"{f.name}=_MISSING")
            body.append(f"    self.{f.name} = _factory{i}() if {f.name} is _MISSING else {f.name}")
        else:
            args.append(f.name)
            body.append(f"    self.{f.name} = {f.name}")
    body += ["    self.__class__ = _cls", "    return self"]
    source = f"def __new__(cls, {', '.join(args)}):\n" + "\n".join(body)
    exec(source, namespace)
    new = namespace["__new__"]
    # The same body without the class argument (the body names the class as _cls).
    exec(f"def make({', '.join(args)}):\n" + "\n".join(body), namespace)
    make = namespace["make"]
    make.__qualname__ = f"{cls.__qualname__}.make"
    make.__module__ = cls.__module__
    _MAKERS[cls] = make
    new.__qualname__ = f"{cls.__qualname__}.__new__"
    new.__module__ = cls.__module__
    new.__doc__ = cls.__init__.__doc__

    def __reduce__(self: Any) -> tuple[type[Any], tuple[Any, ...]]:
        return (type(self), tuple(getattr(self, name) for name in names))

    def __init_subclass__(subclass: type[Any], /, **kwargs: Any) -> None:
        raise TypeError(f"{cls.__name__} is built by fast_init and cannot be subclassed")

    __reduce__.__qualname__ = f"{cls.__qualname__}.__reduce__"
    setattr(cls, "__new__", staticmethod(new))  # noqa: B010 - methods replaced on purpose
    setattr(cls, "__init__", object.__init__)  # noqa: B010 - __new__ made the object
    setattr(cls, "__reduce__", __reduce__)  # noqa: B010
    setattr(cls, "__init_subclass__", classmethod(__init_subclass__))  # noqa: B010
    return cls


def maker(cls: type[T]) -> Callable[..., T]:
    """A plain function that builds ``cls`` (a :func:`fast_init` class) from the arguments
    the class takes: ``maker(C)(*args)`` is ``C(*args)`` without ``type.__call__``."""
    return cast(Callable[..., T], _MAKERS[cls])
