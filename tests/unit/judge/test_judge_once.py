"""The doctor's speed-ups change no verdict (issue 17, "Keep" the doctor budgets).

A series is judged by its patch releases (tfgpu.judge.verdict.judge_newest_workable); the container route and the fixes
that name what runs here are added to the release it settles on only (_presented), and the GPU rules, the container
runtime, the images' findings and the container alternative are worked out once per machine. So each series'
verdict must be exactly its picked release judged on its own, and judging another machine in between must not
leak into the next machine's verdicts.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tests.conftest import DATA
from tfgpu.judge.findings import TargetVerdict
from tfgpu.judge.verdict import judge_release, judge_series
from tfgpu.kb.knowledge import load_kb
from tfgpu.kb.versions import version

KB = load_kb()


def seed(name: str) -> dict[str, Any]:
    facts: dict[str, Any] = json.loads((DATA / "facts" / name).read_text())
    return facts


def with_gpus(facts: dict[str, Any], gpus: list[tuple[str, str]], driver: str, *, conda: bool) -> dict[str, Any]:
    out = copy.deepcopy(facts)
    out["gpus"] = [{"index": i, "name": name, "compute_capability": cc, "memory_mib": 81559, "uuid": f"GPU-{i}"}
                   for i, (name, cc) in enumerate(gpus)]
    out["driver"] = {**(out.get("driver") or {}), "version": driver, "error": None}
    if not conda:
        out["conda"] = None
    return out


M60 = seed("r740-4x-tesla-m60.json")
MACHINES = {
    "mx150": seed("mx150-laptop-ubuntu1804.json"),
    "4x-m60": M60,
    "windows-gtx1080": seed("windows-gtx1080.json"),
    "8x-h100": with_gpus(M60, [("NVIDIA H100 80GB HBM3", "9.0")] * 8, "550.90.07", conda=False),
    "8x-h100+t4-conda": with_gpus(M60, [("NVIDIA H100 80GB HBM3", "9.0")] * 8 + [("Tesla T4", "7.5")], "550.90.07",
                                  conda=True),
    "rtx5090": with_gpus(M60, [("NVIDIA GeForce RTX 5090", "12.0")], "580.65.06", conda=False),
}


def without_patch_note(tv: TargetVerdict) -> tuple[Any, ...]:
    """A verdict without the tf.patch caveat (which only a series has: why not its newest release)."""
    return (tv.tf, tv.verdict, tv.backend, tv.recipe, tv.blockers,
            tuple(c for c in tv.caveats if c.check != "tf.patch"), tv.backends)


@pytest.mark.parametrize("name", sorted(MACHINES))
def test_each_series_is_its_picked_release_judged_on_its_own(name: str) -> None:
    facts = MACHINES[name]
    for tv in judge_series(facts, KB):
        alone = judge_release(facts, KB, version(tv.tf))
        assert without_patch_note(tv) == without_patch_note(alone), (name, tv.tf)


def test_what_is_worked_out_once_per_machine_does_not_leak_into_the_next_machine() -> None:
    first = {name: judge_series(facts, KB) for name, facts in MACHINES.items()}
    again = {name: judge_series(facts, KB) for name, facts in reversed(MACHINES.items())}
    assert again == first
    assert first["8x-h100"] != first["rtx5090"]  # the machines' GPUs are judged differently
    assert first["8x-h100"] != first["8x-h100+t4-conda"]
