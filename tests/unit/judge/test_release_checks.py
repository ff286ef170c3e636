"""The checks of one release (tfgpu.judge.release_checks): one small function per check id, in registry tables
that the verdict walks; each check names only its own id, on any machine."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tfgpu.facts.machine import Machine
from tfgpu.judge.release_checks import MACHINE_CHECKS, RECIPE_CHECKS, ReleaseContext, machine_blockers
from tfgpu.kb.knowledge import load_kb
from tfgpu.kb.versions import version

KB = load_kb()
RELEASES = [str(r.version) for r in KB.gpu_releases("linux")]

_machine = st.fixed_dictionaries({
    "platform": st.sampled_from([{"os": "linux"}, {"os": "linux", "wsl": 1}, {"os": "linux", "wsl": 2},
                                 {"os": "windows"}, {"os": "macos"}, {"os": "linux", "arch": "aarch64"}]),
    "cpu": st.sampled_from([{}, {"avx": True}, {"avx": False}]),
}, optional={
    "driver": st.sampled_from([{"version": None}, {"version": "550.54.14"},
                               {"version": "460.91.3", "kernel_module": "460.91.3", "user_library": "470.57.2"}]),
    "gpus": st.sampled_from([[], [{"index": 0, "name": "NVIDIA GeForce RTX 3090"}]]),
    "lspci_nvidia": st.sampled_from([[], [{}]]),
    "env": st.sampled_from([{}, {"CUDA_VISIBLE_DEVICES": ""}, {"CUDA_VISIBLE_DEVICES": "0"}]),
})


def test_each_check_id_is_in_the_tables_once() -> None:
    ids = [i for i, _check in MACHINE_CHECKS]
    assert len(ids) == len(set(ids))
    assert len({i for i, _c in RECIPE_CHECKS}) == len(RECIPE_CHECKS)


@settings(max_examples=150, deadline=None)
@given(facts=_machine, tf=st.sampled_from(RELEASES))
def test_a_machine_check_names_only_its_own_id(facts: dict[str, Any], tf: str) -> None:
    ctx = ReleaseContext(facts, KB, version(tf), Machine.from_facts(facts, KB))
    for check_id, check in MACHINE_CHECKS:
        assert {f.check for f in check(ctx)} <= {check_id}
    # the verdict's machine blockers are the table's, in its order
    assert [f.check for f in machine_blockers(ctx)] == [i for i, c in MACHINE_CHECKS for _f in c(ctx)]
