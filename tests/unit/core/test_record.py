"""tfgpu.core.record: the dataclass replacement on the doctor's path behaves as dataclasses do."""

from __future__ import annotations

import copy
import dataclasses
import functools
import pickle

import pytest

from tfgpu.core.record import FrozenInstanceError, field, fields, record, replace


@record
class Point:
    x: int
    y: int = 0
    tags: tuple[str, ...] = ()
    raw: dict[str, int] = field(compare=False, repr=False, default_factory=dict)

    @property
    def norm1(self) -> int:
        return abs(self.x) + abs(self.y)


@dataclasses.dataclass(frozen=True)
class PointDC:
    x: int
    y: int = 0
    tags: tuple[str, ...] = ()
    raw: dict[str, int] = dataclasses.field(compare=False, repr=False, default_factory=dict)


@record(frozen=False)
class Log:
    name: str
    lines: list[str] = field(default_factory=list)


@record
class Cached:
    n: int

    @functools.cached_property
    def square(self) -> int:
        return self.n * self.n


ARGS = [((1,), {}), ((1, 2), {}), ((), {"x": 3, "y": 4}), ((5,), {"tags": ("a",)}), ((1, 2, ("b",), {"k": 1}), {})]


@pytest.mark.parametrize(("args", "kwargs"), ARGS)
def test_construction_equality_hash_and_repr_match_dataclasses(args: tuple, kwargs: dict) -> None:
    ours, theirs = Point(*args, **kwargs), PointDC(*args, **kwargs)
    assert (ours.x, ours.y, ours.tags, ours.raw) == (theirs.x, theirs.y, theirs.tags, theirs.raw)
    assert repr(ours) == repr(theirs).replace("PointDC", "Point")
    assert hash(ours) == hash(Point(*args, **kwargs))
    assert ours == Point(*args, **kwargs)


def test_compare_false_fields_are_left_out_of_eq_and_hash() -> None:
    a, b = Point(1, raw={"a": 1}), Point(1, raw={"b": 2})
    assert a == b
    assert hash(a) == hash(b)
    assert a != Point(2)
    assert a != PointDC(1)  # another class is never equal, as with dataclasses


def test_default_factory_gives_each_instance_its_own_value() -> None:
    a, b = Log("a"), Log("b")
    a.lines.append("x")
    assert b.lines == []
    assert Point(1).raw is not Point(1).raw


def test_frozen_records_refuse_assignment_and_deletion() -> None:
    p = Point(1)
    with pytest.raises(FrozenInstanceError, match="frozen Point"):
        p.x = 2  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del p.y  # type: ignore[misc]
    assert p.x == 1


def test_mutable_records_assign_and_are_unhashable() -> None:
    log = Log("a")
    log.name = "b"
    assert log == Log("b")
    with pytest.raises(TypeError, match="unhashable"):
        hash(log)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: Point(), "missing required argument: 'x'"),  # type: ignore[call-arg]
        (lambda: Point(1, 2, (), {}, 5), "takes 4 positional arguments but 5 were given"),  # type: ignore[call-arg]
        (lambda: Point(1, z=2), "unexpected keyword argument 'z'"),  # type: ignore[call-arg]
        (lambda: Point(1, x=2), "multiple values for argument 'x'"),  # type: ignore[misc]
    ],
)
def test_bad_construction_is_a_type_error_as_with_dataclasses(call: object, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        call()  # type: ignore[operator]


def test_a_field_without_default_after_one_with_default_is_refused() -> None:
    with pytest.raises(TypeError, match="without a default follows"):
        @record
        class Bad:
            a: int = 1
            b: int  # type: ignore[misc]


def test_records_pickle_copy_and_cache_properties() -> None:
    p = Point(1, 2, ("t",), {"k": 3})
    back = pickle.loads(pickle.dumps(p))
    assert back == p
    assert back.raw == {"k": 3}
    assert copy.deepcopy(p) == p
    c = Cached(4)
    assert c.square == 16
    assert pickle.loads(pickle.dumps(c)).n == 4


def test_replace_and_fields() -> None:
    p = Point(1, 2)
    assert replace(p, y=5) == Point(1, 5)
    assert p.y == 2
    assert fields(p) == ("x", "y", "tags", "raw")
    assert Point.__match_args__ == ("x", "y", "tags", "raw")  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="no field 'w'"):
        replace(p, w=1)  # type: ignore[call-arg]


def test_replace_runs_a_post_init_and_keeps_cached_values_out() -> None:
    seen: list[int] = []

    @record
    class Checked:
        n: int

        def __post_init__(self) -> None:
            seen.append(self.n)

    assert replace(Checked(1), n=2) == Checked(2)
    assert seen == [1, 2, 2]  # the copy went through __init__
    c = Cached(3)
    assert c.square == 9
    assert replace(c, n=4).square == 16  # a copy has the fields only, not what a cached property kept
    assert replace(Point(1, raw={"k": 1})).raw == {"k": 1}


def test_methods_and_properties_of_the_class_are_kept() -> None:
    assert Point(3, -4).norm1 == 7
    assert Point.__init__.__qualname__ == "Point.__init__"


def test_defaults_stay_readable_on_the_class() -> None:
    assert Point.y == 0
    assert not hasattr(Point, "raw")  # a factory leaves no class attribute, as with dataclasses
