"""An environment spec written as TOML or JSON reads back as the same document, whatever its values hold (quotes,
newlines, control characters, non-ASCII, a lone surrogate from someone's facts file): every value is escaped for its
format (tfgpu.render.envspec)."""

from __future__ import annotations

import json
import sys
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.judge.test_envspec import base_spec
from tfgpu.render.envspec import spec_json, spec_toml, toml_string, validation_lines

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

text = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
keys = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=20)
scalars = st.one_of(text, st.booleans(), st.integers(-(2**63), 2**63 - 1))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
                      max_leaves=12)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(keys, values, max_size=6), st.dictionaries(keys, st.dictionaries(keys, values, max_size=4),
                                                                  max_size=4))
def test_property_toml_and_json_read_back_as_the_document(top: dict[str, Any], tables: dict[str, Any]) -> None:
    doc = {**{k: v for k, v in top.items() if not isinstance(v, dict)}, **tables}
    assert tomllib.loads(spec_toml(doc)) == doc
    assert json.loads(spec_json(doc)) == doc


def test_the_spec_reads_back_from_both_formats() -> None:
    spec = base_spec()
    spec["machine"]["gpus"][0]["name"] = 'RTX "3080"\n[evil]\nx = 1\x7f\x1b[31m'
    assert tomllib.loads(spec_toml(spec)) == spec
    assert json.loads(spec_json(spec)) == spec
    assert "\n[evil]" not in spec_toml(spec)


def test_a_lone_surrogate_becomes_a_replacement_character() -> None:
    value = toml_string("a\ud800b")
    assert tomllib.loads("x = " + value) == {"x": "a\ufffdb"}


def test_validation_lines_are_ordered_by_how_much_they_matter() -> None:
    doc = {"result": "blocked", "counts": {"blocking": 1, "risky": 1, "info": 1}, "environment": {"prefix": "/e"},
           "spec_file": "s.toml", "spec": base_spec(), "differences": [
               {"id": "tf.patch", "severity": "info", "summary": "patch", "fix": ""},
               {"id": "pin.range", "severity": "risky", "summary": "numpy", "fix": "pip install numpy"},
               {"id": "driver.none", "severity": "blocking", "summary": "no driver", "fix": "install one"}]}
    lines = [t for t, _ in validation_lines(doc)]
    assert lines[0].startswith("BLOCKED: /e against s.toml (tensorflow 2.16.1): 1 blocking, 1 risky, 1 informational")
    assert [line.split()[0] for line in lines[1:] if not line.strip().startswith("fix:")] == ["✗", "!", "·"]
