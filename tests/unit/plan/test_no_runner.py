"""Found while measuring whether tfgpu's embedded conda engine could become an optional [rattler] extra (issue 31,
part 5): on a machine where only a conda recipe can run a release and nothing can run conda recipes (no conda,
mamba or micromamba, and no py-rattler: tfgpu on Python 3.9 today, or any install if the engine were optional),
the chooser falls back to the blocked pip recipe and the doctor still calls the target ready via pip, `tfgpu plan`
exits 0 and `tfgpu create` would build an environment that cannot use the GPU. py-rattler therefore stays a
required dependency (pyproject.toml) until this holds."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conftest import DATA
from tfgpu.api.doctor import doctor_result
from tfgpu.judge.findings import BLOCKED
from tfgpu.kb.knowledge import load_kb

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


@pytest.mark.xfail(strict=True, reason="open: with no runner for the viable (conda) recipe the chooser picks the blocked "
                                       "pip recipe and the target stays 'ready' (see the module docstring)")
def test_without_a_conda_runner_a_target_is_not_ready_through_a_blocked_recipe() -> None:
    target = doctor_result(_no_conda_machine(), KB, tf="2.2.0", tools=NO_CONDA_RUNNER).targets[0]
    chosen = next(b for b in target.backends if b.recipe == target.recipe_id)
    assert target.verdict == BLOCKED or chosen.viable
