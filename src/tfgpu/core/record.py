"""Immutable record classes for the doctor's path, built without :mod:`dataclasses`.

Why not dataclasses: importing them pulls in ``inspect`` (and ``ast``, ``dis``, ``tokenize``), and each
decorated class compiles its ``__init__``/``__repr__``/``__eq__``/``__hash__`` from generated source.
For the ~20 record classes `tfgpu doctor` loads that was ~40 ms of a ~170 ms start-up on a 2-core
machine (docs/dev/performance.md). Here the methods are closures over the field list, made
once per class; type checkers see the decorator as a dataclass transform (PEP 681), so mypy checks
constructor calls and frozenness exactly as before.

Semantics kept from dataclasses: fields in annotation order, defaults and ``field(default_factory=...,
compare=False, repr=False)``, keyword or positional construction, ``__eq__`` between instances of the
same class, ``__hash__`` for frozen records, assignment refused on frozen ones, ``__match_args__``,
pickling (records are plain objects with a ``__dict__``), ``functools.cached_property``.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy honours the name)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    from typing_extensions import dataclass_transform

    _T = TypeVar("_T")
else:
    def dataclass_transform(**_kwargs):
        return lambda decorator: decorator

__all__ = ["FrozenInstanceError", "field", "fields", "record", "replace"]

_MISSING: Any = object()


class FrozenInstanceError(AttributeError):
    """An assignment to a field of a frozen record."""


class _Field:
    __slots__ = ("compare", "default", "factory", "repr")

    def __init__(self, default: Any, factory: Callable[[], Any] | None, compare: bool, repr: bool) -> None:
        self.default = default
        self.factory = factory
        self.compare = compare
        self.repr = repr


def field(
    *, default: Any = _MISSING, default_factory: Callable[[], Any] | None = None, compare: bool = True,
    repr: bool = True,
) -> Any:
    """Per-field options, as :func:`dataclasses.field`."""
    if default is not _MISSING and default_factory is not None:
        msg = "cannot specify both default and default_factory"
        raise ValueError(msg)
    return _Field(default, default_factory, compare, repr)


def _frozen_setattr(self: object, name: str, value: object) -> None:
    msg = f"cannot assign to field {name!r} of a frozen {type(self).__name__}"
    raise FrozenInstanceError(msg)


def _frozen_delattr(self: object, name: str) -> None:
    msg = f"cannot delete field {name!r} of a frozen {type(self).__name__}"
    raise FrozenInstanceError(msg)


def _fields_of(cls: type) -> tuple[list[str], dict[str, Any], dict[str, Callable[[], Any]], list[str], list[str]]:
    """Read ``cls``'s own annotated fields: (names, defaults, factories, compared, shown). A ``field(...)``
    class attribute is replaced by its default (or removed when it has none)."""
    for base in cls.__mro__[1:]:
        if "__record_fields__" in base.__dict__:
            msg = f"{cls.__name__}: a record cannot inherit another record's fields ({base.__name__})"
            raise TypeError(msg)
    names: list[str] = []
    defaults: dict[str, Any] = {}
    factories: dict[str, Callable[[], Any]] = {}
    compared: list[str] = []
    shown: list[str] = []
    annotations = cls.__dict__.get("__annotations__")  # noqa: RUF063 - this class's own, not its bases'
    if annotations is None and sys.version_info >= (3, 14):  # pragma: no cover - lazily evaluated (PEP 649)
        annotations = cls.__annotations__
    for name, kind in (annotations or {}).items():
        if str(kind).startswith(("ClassVar", "typing.ClassVar")):
            continue
        value = cls.__dict__.get(name, _MISSING)
        spec = value if isinstance(value, _Field) else _Field(value, None, True, True)
        if isinstance(value, _Field):
            if value.default is _MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, value.default)
        if spec.factory is not None:
            factories[name] = spec.factory
        elif spec.default is not _MISSING:
            defaults[name] = spec.default
        elif defaults or factories:
            msg = f"{cls.__name__}: field {name!r} without a default follows one with a default"
            raise TypeError(msg)
        names.append(name)
        if spec.compare:
            compared.append(name)
        if spec.repr:
            shown.append(name)
    return names, defaults, factories, compared, shown


def _make_init(
    title: str, names: list[str], defaults: dict[str, Any], factories: dict[str, Callable[[], Any]],
    post_init: Callable[[Any], None] | None,
) -> Callable[..., None]:
    """The ``__init__`` of a record class called ``title`` with fields ``names``."""
    count = len(names)

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if len(args) > count:
            msg = f"{title}() takes {count} positional arguments but {len(args)} were given"
            raise TypeError(msg)
        state = self.__dict__
        for name, value in zip(names, args):
            state[name] = value
        for name in names[len(args):]:
            if name in kwargs:
                state[name] = kwargs.pop(name)
            elif name in defaults:
                state[name] = defaults[name]
            elif name in factories:
                state[name] = factories[name]()
            else:
                msg = f"{title}() missing required argument: {name!r}"
                raise TypeError(msg)
        if kwargs:
            name = next(iter(kwargs))
            msg = (f"{title}() got multiple values for argument {name!r}" if name in names
                   else f"{title}() got an unexpected keyword argument {name!r}")
            raise TypeError(msg)
        if post_init is not None:
            post_init(self)

    return __init__


def _make_value_methods(compared: list[str], shown: list[str]) -> dict[str, Any]:
    """``__repr__``, ``__eq__`` and ``__hash__`` over the fields ``shown`` (repr) and ``compared`` (eq, hash)."""

    def __repr__(self: Any) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in shown)
        return f"{type(self).__qualname__}({inner})"

    def __eq__(self: Any, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in compared)

    def __hash__(self: Any) -> int:
        return hash(tuple(getattr(self, name) for name in compared))

    return {"__repr__": __repr__, "__eq__": __eq__, "__hash__": __hash__}


def _build(cls: type[_T], frozen: bool) -> type[_T]:
    """Make ``cls`` a record class in place (the work of :func:`record`)."""
    names, defaults, factories, compared, shown = _fields_of(cls)
    # whether __init__ will only set the fields (ours, and no __post_init__): then replace() may copy them without it
    plain = "__init__" not in cls.__dict__ and getattr(cls, "__post_init__", None) is None
    value_methods = _make_value_methods(compared, shown)
    methods: dict[str, Any] = {
        "__init__": _make_init(cls.__name__, names, defaults, factories, getattr(cls, "__post_init__", None)),
        "__repr__": value_methods["__repr__"], "__eq__": value_methods["__eq__"],
    }
    if frozen:
        methods.update(__hash__=value_methods["__hash__"], __setattr__=_frozen_setattr, __delattr__=_frozen_delattr)
    elif "__hash__" not in cls.__dict__:
        methods["__hash__"] = None  # mutable and compared by value: unhashable, as dataclasses do
    for attr, fn in methods.items():
        own = cls.__dict__.get(attr, _MISSING)
        if own is not _MISSING and not (attr == "__hash__" and own is None):
            continue  # the class wrote its own
        if fn is not None:
            fn.__qualname__ = f"{cls.__qualname__}.{attr}"
        setattr(cls, attr, fn)
    setattr(cls, "__record_fields__", tuple(names))  # noqa: B010 - not a name mypy knows
    setattr(cls, "__record_plain__", plain)  # noqa: B010
    setattr(cls, "__match_args__", tuple(names))  # noqa: B010
    return cls


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def record(cls: type[_T] | None = None, /, *, frozen: bool = True) -> Any:
    """Make ``cls`` a record: ``@record`` (frozen) or ``@record(frozen=False)``."""
    if cls is None:
        return lambda c: _build(c, frozen)
    return _build(cls, frozen)


def fields(obj: object) -> tuple[str, ...]:
    """The field names of a record class or instance, in order."""
    names: tuple[str, ...] = getattr(obj, "__record_fields__", ())
    return names


def replace(obj: _T, /, **changes: Any) -> _T:
    """A copy of a record with some fields changed, as :func:`dataclasses.replace`. The copy's fields are set as
    ``__init__`` sets them, without calling it (the doctor copies ~250 records a run, and the call was half the
    cost); a class with a ``__post_init__`` is made through ``__init__``, which runs it."""
    cls = type(obj)
    values = {name: changes.pop(name) if name in changes else getattr(obj, name) for name in fields(obj)}
    if changes:
        msg = f"{cls.__name__} has no field {sorted(changes)[0]!r}"
        raise TypeError(msg)
    if not cls.__dict__.get("__record_plain__", False):  # the class's own: a subclass may have its own __init__
        return cls(**values)
    new: _T = object.__new__(cls)
    new.__dict__.update(values)
    return new
