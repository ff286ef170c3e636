"""Found while measuring whether tfgpu's embedded conda engine could become an optional [rattler] extra (issue 31,
part 5): on a machine where only a conda recipe can run a release and nothing can run conda recipes (no conda,
mamba or micromamba, and no py-rattler: tfgpu on Python 3.9 today, or any install if the engine were optional),
the chooser fell back to the blocked pip recipe and the doctor still called the target ready via pip, `tfgpu plan`
exited 0 and `tfgpu create` would have built an environment that cannot use the GPU.

The rule (tfgpu.plan.choose, NoRunner): when the verdict holds a target workable, only the recipes it holds viable
may be chosen; when no installed runner can build any of them, plan refuses (exit 2) and says what to install, the
doctor's row names no recipe that plan builds (recipe_id null), and the recommendation says what to install first."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tests.conftest import DATA
from tfgpu.api.doctor import doctor_result
from tfgpu.judge.findings import BLOCKED
from tfgpu.kb.knowledge import load_kb
from tfgpu.plan.choose import NoRunner
from tfgpu.plan.planner import plan_environment
from tfgpu.plan.request import BuildRequest

KB = load_kb()


def _no_conda_machine() -> dict[str, Any]:
    """The MX150 laptop (driver 440.64: CUDA 10.2 at most, no system CUDA) without its conda."""
    facts = json.loads((DATA / "facts" / "mx150-laptop-ubuntu1804.json").read_text(encoding="utf-8"))
    facts.pop("conda", None)
    return facts


NO_CONDA_RUNNER = {"uv": "/usr/bin/uv", "rattler": None, "mamba": None, "micromamba": None, "conda": None,
                   "python3.6": "/usr/bin/python3.6"}


def test_with_the_engine_the_conda_recipe_is_chosen() -> None:
    """The machine as tfgpu sees it today on Python >= 3.10: the embedded engine runs the conda recipe."""
    target = doctor_result(_no_conda_machine(), KB, tf="2.2.0", tools={**NO_CONDA_RUNNER, "rattler": "embedded"}).targets[0]
    assert target.verdict != BLOCKED
    viable = {b.backend for b in target.backends if b.viable}
    assert "conda" in viable
    assert "pip" not in viable
    assert target.backend == "conda"


def test_without_a_conda_runner_a_target_is_not_ready_through_a_blocked_recipe() -> None:
    target = doctor_result(_no_conda_machine(), KB, tf="2.2.0", tools=NO_CONDA_RUNNER).targets[0]
    # recipe_id is what `tfgpu plan` builds: nothing here (None), never the blocked pip recipe
    chosen = next((b for b in target.backends if b.recipe == target.recipe_id), None)
    assert target.verdict == BLOCKED or chosen is None or chosen.viable
    assert target.recipe_id is None
    assert (target.backend, target.recipe) == ("conda", "conda-anaconda-tensorflow-gpu")  # the verdict's own recipe


def test_without_a_conda_runner_the_recommendation_says_what_to_install() -> None:
    rec = doctor_result(_no_conda_machine(), KB, tf="2.2.0", tools=NO_CONDA_RUNNER).recommendation
    assert rec is not None
    assert rec.backend == "conda"
    assert rec.recipe_id is None
    assert rec.needs is not None
    assert "micromamba" in rec.needs
    # the command works once a runner is installed: the choice is automatic then (never --backend pip, nor
    # --backend rattler, which this Python cannot run)
    assert rec.command == "tfgpu create --tf 2.2.0"
    assert rec.to_json()["needs"] == rec.needs


def test_without_a_conda_runner_plan_refuses_and_names_what_to_install() -> None:
    with pytest.raises(NoRunner) as info:
        plan_environment(KB, _no_conda_machine(), BuildRequest(tf="2.2.0"), tools=NO_CONDA_RUNNER, home="/h")
    assert "conda-anaconda-tensorflow-gpu" in info.value.message
    assert info.value.hint is not None
    assert "micromamba" in info.value.hint
    assert info.value.exit_code == 2


def test_the_series_view_never_shows_a_blocked_recipe_as_the_way_a_ready_release_is_built() -> None:
    result = doctor_result(_no_conda_machine(), KB, tools=NO_CONDA_RUNNER)
    for t in result.targets:
        if t.verdict != BLOCKED:
            mine = [b for b in t.backends if b.recipe == t.recipe]
            assert mine, (t.tf, t.recipe)
            assert mine[0].viable, (t.tf, t.recipe)
    rec = result.recommendation
    assert rec is not None
    assert rec.needs
    assert rec.command == f"tfgpu create --tf {rec.tf}"


def test_a_blocked_target_still_names_what_create_force_would_build() -> None:
    """A blocked verdict keeps the old order (blocked recipes last) so that `create --force` has something to build."""
    facts = _no_conda_machine()
    plan = plan_environment(KB, facts, BuildRequest(tf="2.2.0", backend="pip"), tools=NO_CONDA_RUNNER, home="/h")
    assert plan.recipe_id == "pip-system-cuda"
    assert plan.verdict == BLOCKED


def test_a_config_preferring_pip_falls_back_to_the_viable_recipe_with_a_note() -> None:
    tools = {**NO_CONDA_RUNNER, "rattler": "embedded"}
    plan = plan_environment(KB, _no_conda_machine(), BuildRequest(tf="2.2.0", prefer="pip"), tools=tools, home="/h",
                            engine_python="/usr/bin/python3")
    assert plan.recipe_id == "conda-anaconda-tensorflow-gpu"
    assert plan.backend == "rattler"
    assert any("config prefers backend pip, which cannot build this target" in n and "--backend pip does not build" in n
               for n in plan.notes)


def test_a_viable_pip_recipe_without_its_python_gets_a_conda_made_python_not_a_blocked_conda_recipe() -> None:
    """The same rule from the other side (casebook tf41990: a GTX 960M, no Python in 2.16's range): the verdict holds
    pip-and-cuda viable and conda-forge's build blocked for this GPU; the chooser used to build the blocked conda
    recipe (and call it "caveats"), now it runs the viable pip recipe in an interpreter the embedded engine makes."""
    from tests.casebook import load_cases

    case = next(c for c in load_cases() if c.id == "tf41990-docker-tf24-gtx960m-works")
    tools = {"uv": None, "rattler": "embedded", "mamba": None, "micromamba": None, "conda": None}
    result = doctor_result(copy.deepcopy(case.facts), KB, tf="2.16.2", tools=tools)
    target = result.targets[0]
    viable = {b.recipe for b in target.backends if b.viable}
    assert "conda-forge-tensorflow-cuda" not in viable
    assert target.recipe_id == "pip-and-cuda"
    assert target.recipe_id in viable
    plan = plan_environment(KB, copy.deepcopy(case.facts), BuildRequest(tf="2.16.2"), tools=tools, home="/h",
                            engine_python="/usr/bin/python3")
    assert (plan.recipe_id, plan.backend) == ("pip-and-cuda", "rattler")
    assert "rattler makes a conda-forge environment with that Python" in plan.backend_reason


def test_the_doctor_document_and_its_renderings_say_what_to_install() -> None:
    import io

    import jsonschema

    from tests import REPO
    from tfgpu.render.report import doctor_document, plain_log, render_human, step_summary

    facts = _no_conda_machine()
    doc = doctor_document(facts, doctor_result(facts, KB, tf="2.2.0", tools=NO_CONDA_RUNNER), data_version=KB.data_version)
    jsonschema.validate(doc, json.loads((REPO / "src/tfgpu/core/schemas/doctor.schema.json").read_text()))
    assert doc["recommendation"]["needs"].startswith("install micromamba")
    out = io.StringIO()
    render_human(doc, out, color=False)
    human = out.getvalue()
    assert "first: install micromamba" in human
    assert human.index("first: install micromamba") < human.index("tfgpu create --tf 2.2.0")
    assert "first: install micromamba" in plain_log(doc)
    assert "first: install micromamba" in step_summary(doc)
