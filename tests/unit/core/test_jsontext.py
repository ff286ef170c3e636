"""tfgpu.core.jsontext.dumps_indented writes exactly what json.dumps(obj, indent=2) writes, and fails as it does."""

from __future__ import annotations

import enum
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfgpu.core.jsontext import dumps_indented

DATA = Path(__file__).resolve().parents[2] / "data"

_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=2),  # lone surrogates
)
_keys = st.one_of(st.text(max_size=8), st.integers(-5, 5), st.booleans(), st.none(),
                  st.floats(allow_nan=False, allow_infinity=True))
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.tuples(inner, inner),
                            st.dictionaries(_keys, inner, max_size=4)),
    max_leaves=30,
)


def _same(obj: Any) -> None:
    for ascii_only in (True, False):
        assert dumps_indented(obj, ensure_ascii=ascii_only) == json.dumps(obj, indent=2, ensure_ascii=ascii_only)


@settings(max_examples=300, deadline=None)
@given(_values)
def test_any_json_value_is_written_byte_for_byte_as_json_writes_it(obj: Any) -> None:
    _same(obj)


class Level(enum.IntEnum):
    LOW = 1


class Kind(str, enum.Enum):
    PIP = "pip"


class Name(str):
    pass


@pytest.mark.parametrize("obj", [
    {}, [], [[]], [{}], {"a": {}}, {"a": [[], {}]}, (), "x", 3, 2.5, None, True,
    [math.nan, math.inf, -math.inf, 1e300, -0.0], {3: "three", 2.5: "x", True: 1, None: 2, False: 0},
    [Level.LOW, {Level.LOW: Level.LOW}], {Name("k"): Name("v")}, [Kind.PIP], {"é\u2028": "\ud800"},
])
def test_the_awkward_cases(obj: Any) -> None:
    _same(obj)


@pytest.mark.parametrize("name", sorted(p.name for p in (DATA / "facts").glob("*.json")))
def test_recorded_facts_documents(name: str) -> None:
    _same(json.loads((DATA / "facts" / name).read_text(encoding="utf-8")))


def test_the_doctors_document_of_a_recorded_machine() -> None:
    from tfgpu.api.doctor import doctor_report

    doc, _ = doctor_report(facts_file=DATA / "facts" / "r740-4x-tesla-m60.json")
    assert len(json.dumps(doc)) > 10_000
    _same(doc)


def test_what_json_refuses_it_refuses_the_same_way() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        dumps_indented({"a": object()})
    with pytest.raises(TypeError, match="keys must be str"):
        dumps_indented({("a", 1): 1})
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        dumps_indented(loop)
