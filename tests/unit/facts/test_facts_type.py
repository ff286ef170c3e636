"""Issue 17, item 7: the facts sections the verdict, the chooser and the planner read are one typed seam
(tfgpu.facts.document.Facts); the type names exactly the schema's sections, and those modules take it."""

from __future__ import annotations

import inspect
import json

from tests import REPO, TESTS
from tfgpu.facts.document import Facts, as_facts, load_facts_file
from tfgpu.facts.machine import Machine
from tfgpu.judge.diagnose import diagnose
from tfgpu.judge.recommend import recommend
from tfgpu.judge.target import judge_target
from tfgpu.plan import choose, envspec
from tfgpu.plan import planner as plan

SCHEMA = REPO / "src/tfgpu/core/schemas/facts.schema.json"


def test_the_facts_type_names_the_schema_sections():
    properties = json.loads(SCHEMA.read_text(encoding="utf-8"))["properties"]
    assert set(Facts.__annotations__) == set(properties)
    assert not Facts.__required_keys__  # a facts file from a bug report holds what its machine could tell


def test_verdict_choose_and_plan_take_typed_facts():
    for fn in (Machine.from_facts, diagnose, judge_target, recommend,
               choose.choose, choose.ranked_recipes, choose.target_os, plan.resolve_target, envspec.small_gpu):
        assert inspect.signature(fn).parameters["facts"].annotation == "Facts", fn.__qualname__


def test_as_facts_is_the_document_itself():
    doc = load_facts_file(TESTS / "data/facts/r740-4x-tesla-m60.json")
    assert as_facts(doc) is doc
