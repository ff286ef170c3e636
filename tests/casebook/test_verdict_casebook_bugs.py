"""Verdict bugs the casebook (tests/cases/) found, one test each, on plain facts documents.

Each test names the case(s) that showed the bug; the facts here are reduced to what the rule needs."""

from __future__ import annotations

from typing import Any

import pytest
from packaging.version import Version

from tfgpu.facts.machine import Machine, _apply_cvd
from tfgpu.judge.findings import TargetVerdict
from tfgpu.judge.system import system_cuda_installed, system_cuda_serves
from tfgpu.judge.target import judge_target
from tfgpu.kb.knowledge import load_kb
from tfgpu.plan.planner import plan_environment
from tfgpu.plan.request import BuildRequest

KB = load_kb()
HOME = "/home/u/.local/share/tfgpu"
TOOLS_ALL: dict[str, str | None] = {"uv": "/usr/bin/uv", "mamba": "/opt/mamba/bin/mamba",
                                     "micromamba": None, "conda": "/opt/conda/bin/conda"}


def linux_facts(*, gpu: tuple[str, str] = ("GeForce GTX 1070", "6.1"), driver: str = "460.32.03", python: str = "3.8",
                cuda: list[str] | None = None, cudnn: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "schema": "tfgpu.facts/1",
        "platform": {"os": "linux", "glibc": "2.31"},
        "python": {"current": python},
        "driver": {"version": driver, "cuda": None},
        "gpus": [{"index": 0, "name": gpu[0], "compute_capability": gpu[1], "memory_mib": 8192}],
        "cuda_toolkits": [{"version": v, "path": f"/usr/local/cuda-{v}"} for v in (cuda or [])],
        "cudnn": [{"version": v, "path": "/usr/lib/x86_64-linux-gnu"} for v in (cudnn or [])],
    }
    facts.update(extra)
    return facts


def checks(target: TargetVerdict) -> set[str]:
    return {b.check for b in target.blockers}


# --------------------------------------------------------------------------- system CUDA 11.x for TF >= 2.5
# tensorflow#45263 (2.5.0 on CUDA 11.1 works, 2.4.1 does not), #56235 (CUDA 11.4), #49862 (CUDA 11.2).


@pytest.mark.parametrize(("have", "built", "tf", "serves"), [
    ("11.1", "11.2", "2.5.0", True),   # the sonames are libcudart.so.11.0, libcublas.so.11, ...
    ("11.4", "11.2", "2.9.3", True),
    ("11.8", "11.2", "2.10.1", True),  # a newer minor serves too
    ("11.2", "11.8", "2.13.1", True),
    ("11.1", "11.0", "2.4.1", False),  # 2.4 loads libcusolver.so.10, only CUDA 11.0 ships it
    ("11.0", "11.0", "2.4.0", True),
    ("10.2", "10.1", "2.3.0", False),  # CUDA 10 sonames carry the minor (libcudart.so.10.1)
    ("12.2", "11.8", "2.13.0", False),
])
def test_a_system_cuda_serves_pip_tf_by_soname(have: str, built: str, tf: str, serves: bool) -> None:
    assert system_cuda_serves(Version(have), Version(built), Version(tf), KB) is serves


def test_tf25_pip_runs_on_a_system_cuda_11_1_and_tf24_does_not() -> None:
    ok = judge_target(linux_facts(cuda=["11.1"], cudnn=["8.1.0"]), KB, "2.5.0", backend="pip")
    assert ok.verdict in ("ready", "caveats"), ok.blockers
    bad = judge_target(linux_facts(cuda=["11.1"], cudnn=["8.0.4"]), KB, "2.4.1", backend="pip")
    assert bad.verdict == "blocked"
    assert "cuda.system_toolkit" in checks(bad)


def test_the_plan_keeps_pip_where_the_doctor_does() -> None:
    """One rule for both: the plan's auto mode leaves pip for conda only when the system CUDA cannot serve."""
    facts = linux_facts(cuda=["11.1"], cudnn=["8.1.0"])
    assert system_cuda_installed(Machine.from_facts(facts, KB), "11.2", Version("2.5.0"), KB)
    assert not system_cuda_installed(Machine.from_facts(facts, KB), "11.0", Version("2.4.1"), KB)
    facts["python"] = {"current": "3.8.10", "interpreters": [{"version": "3.8.10", "path": "/usr/bin/python3.8"}]}
    plan = plan_environment(KB, facts, BuildRequest(tf="2.5.0"), tools=TOOLS_ALL, home=HOME)
    assert plan.recipe_id == "pip-system-cuda"


# --------------------------------------------------------------------------- MIG slices in CUDA_VISIBLE_DEVICES
# pytorch/serve#1237 (MIG-GPU-<uuid>/<gi>/<ci>), NVIDIA/k8s-device-plugin#960.

A100 = {"index": 0, "name": "A100-SXM4-40GB", "compute_capability": "8.0", "uuid": "GPU-6482a92e-d06b-dc68-c272-e3d8f7ecabbf"}
T4 = {"index": 1, "name": "Tesla T4", "compute_capability": "7.5", "uuid": "GPU-11111111-2222-3333-4444-555555555555"}


def test_a_mig_device_named_by_its_gpu_uuid_makes_that_gpu_visible() -> None:
    assert _apply_cvd([T4, A100], "MIG-GPU-6482a92e-d06b-dc68-c272-e3d8f7ecabbf/7/0", KB) == (A100,)


def test_an_r470_mig_uuid_stands_for_the_first_gpu_that_can_be_partitioned() -> None:
    assert _apply_cvd([T4, A100], "MIG-c9b9e8b4-6e9a-5b7e-9f45-0d1c2b3a4f5e", KB) == (A100,)
    assert _apply_cvd([T4], "MIG-c9b9e8b4-6e9a-5b7e-9f45-0d1c2b3a4f5e", KB) == ()  # no MIG-capable GPU: hidden


def test_one_mig_device_per_process_and_plain_entries_keep_their_meaning() -> None:
    assert _apply_cvd([A100, T4], "MIG-GPU-6482a92e-d06b-dc68-c272-e3d8f7ecabbf/7/0,1", KB) == (A100,)
    assert _apply_cvd([A100, T4], "1,MIG-GPU-6482a92e-d06b-dc68-c272-e3d8f7ecabbf/7/0", KB) == (T4,)
    assert _apply_cvd([A100, T4], "", KB) == ()


def test_a_mig_slice_in_cuda_visible_devices_does_not_block() -> None:
    facts = linux_facts(gpu=("A100-SXM4-40GB", "8.0"), driver="470.57.02", python="3.9",
                        env={"CUDA_VISIBLE_DEVICES": "MIG-GPU-6482a92e-d06b-dc68-c272-e3d8f7ecabbf/7/0"})
    facts["gpus"][0]["uuid"] = A100["uuid"]
    target = judge_target(facts, KB, "2.11", backend="auto")
    assert "env.cuda_visible_devices" not in checks(target)
    assert target.verdict in ("ready", "caveats"), target.blockers


# --------------------------------------------------------------------------- PTX of every listed arch (TF <= 2.2)
# tensorflow#36758: a GeForce MX110 (5.0) runs the 2.0.1 GPU image after minutes of start-up (JIT from PTX).


def test_a_row_may_list_several_ptx_targets() -> None:
    row = next(a for a in KB.archs if Version("2.0.1") in a.tf and a.os == "linux" and a.build == "pip")
    assert row.ptx == "7.0"
    assert row.ptx_all == ("3.5", "3.7", "5.2", "6.0", "6.1", "7.0")


def test_maxwell_5_0_jit_compiles_from_older_ptx_on_tf_2_0_but_not_on_2_3() -> None:
    facts = linux_facts(gpu=("GeForce MX110", "5.0"), driver="435.21", python="3.6", cuda=["10.0"], cudnn=["7.6.5"])
    old = judge_target(facts, KB, "2.0.1", backend="pip")
    assert old.verdict == "caveats", old.blockers
    assert any(c.check == "gpu.ptx_jit" and "compute_37" in c.summary for c in old.caveats)
    facts["cuda_toolkits"] = [{"version": "10.1", "path": "/usr/local/cuda-10.1"}]
    new = judge_target(facts, KB, "2.3.0", backend="pip")  # 2.3 keeps PTX for 7.0 only (RELEASE.md 2.3)
    assert new.verdict == "blocked"
    assert "gpu.arch" in checks(new)


def test_a_gpu_below_every_ptx_target_is_still_blocked() -> None:
    facts = linux_facts(gpu=("Quadro K4200", "3.0"), driver="418.87.00", python="3.6", cuda=["10.0"], cudnn=["7.6.5"])
    target = judge_target(facts, KB, "2.0.0", backend="pip")
    assert target.verdict == "blocked"
    assert "gpu.arch" in checks(target)


# --------------------------------------------------------------------------- pip with system CUDA for 2.11-2.13
# tensorflow#61689, #66750 (2.13 on CUDA 12), #59413 (2.11 on CUDA 12), #61873 (2.12 on Python 3.7).


def test_pip_tf_2_13_names_the_missing_cuda_11_instead_of_lacking_a_recipe() -> None:
    target = judge_target(linux_facts(gpu=("NVIDIA GeForce RTX 2080 SUPER", "7.5"), driver="525.60.13",
                                      cuda=["12.0"], cudnn=["8.9.4"]), KB, "2.13.0", backend="pip")
    assert target.verdict == "blocked"
    assert "cuda.system_toolkit" in checks(target)
    assert "tf.recipe" not in checks(target)


def test_pip_tf_2_13_with_cuda_11_8_and_cudnn_8_6_is_ready() -> None:
    target = judge_target(linux_facts(gpu=("NVIDIA GeForce RTX 2080 SUPER", "7.5"), driver="525.60.13",
                                      cuda=["11.8"], cudnn=["8.6.0"]), KB, "2.13.0", backend="pip")
    assert target.verdict in ("ready", "caveats"), target.blockers


def test_pip_tf_2_12_on_python_3_7_names_python() -> None:
    target = judge_target(linux_facts(python="3.7", cuda=["11.8"], cudnn=["8.6.0"], driver="525.60.13"),
                          KB, "2.12.0", backend="pip")
    assert "python.range" in checks(target)


# --------------------------------------------------------------------------- system CUDA/cuDNN left undescribed
# matifali/dockerdl#7 (an image built on CUDA 11.7.1: the thread names the CUDA version, not the cuDNN),
# tensorflow#36476 (NVIDIA's CUDA 10.0 image, cuDNN not named): a facts document without a "cudnn" (or
# "cuda_toolkits") section does not say that none is installed. The probe always writes both sections.


def test_a_cudnn_section_left_out_is_a_caveat_to_check_not_a_missing_library() -> None:
    facts = linux_facts(gpu=("NVIDIA GeForce RTX 2080 SUPER", "7.5"), driver="525.60.13", cuda=["11.7"])
    del facts["cudnn"]
    target = judge_target(facts, KB, "2.13.0", backend="pip")
    assert target.verdict == "caveats", target.blockers
    assert "cudnn.system" in {c.check for c in target.caveats}


def test_an_empty_cudnn_section_still_says_none_is_installed() -> None:
    target = judge_target(linux_facts(gpu=("NVIDIA GeForce RTX 2080 SUPER", "7.5"), driver="525.60.13",
                                      cuda=["11.7"], cudnn=[]), KB, "2.13.0", backend="pip")
    assert target.verdict == "blocked"
    assert "cudnn.system" in checks(target)


def test_a_toolkit_section_left_out_is_a_caveat_and_a_wrong_toolkit_still_blocks() -> None:
    # cuDNN 7.6.5: the 1.15 wheels were built against cuDNN 7.6 (compat/tensorflow.toml corrections, read from
    # the wheel), so the cuDNN check passes and only the toolkit is in question
    unknown = linux_facts(driver="410.48", python="3.7", cudnn=["7.6.5"])
    del unknown["cuda_toolkits"]
    target = judge_target(unknown, KB, "1.15.2", backend="pip")
    assert "cuda.system_toolkit" not in checks(target)
    assert "cuda.system_toolkit" in {c.check for c in target.caveats}
    wrong = judge_target(linux_facts(driver="410.48", python="3.7", cuda=["10.1"], cudnn=["7.6.5"]), KB, "1.15.2",
                         backend="pip")
    assert "cuda.system_toolkit" in checks(wrong)


# --------------------------------------------------------------------------- no GPU build, and no wheel for this Python
# tensorflow#86879 (Windows, Python 3.13, TF 2.18.0: pip finds no wheel at all). After 2.10 native Windows
# has no GPU build; the missing GPU build used to end the judgement before the Python was looked at.


def windows_facts(python: str) -> dict[str, Any]:
    facts = linux_facts(python=python, driver="561.09")
    facts["platform"] = {"os": "windows"}
    return facts


@pytest.mark.parametrize(("python", "named"), [("3.13", True), ("3.12", False), ("3.9", False)])
def test_native_windows_without_a_gpu_build_still_names_a_python_without_wheels(python: str, named: bool) -> None:
    target = judge_target(windows_facts(python), KB, "2.18.0")
    assert target.verdict == "blocked"
    assert "os.windows_gpu" in checks(target)
    assert ("python.range" in checks(target)) is named
    if named:
        finding = next(b for b in target.blockers if b.check == "python.range")
        assert "3.9-3.12" in finding.summary
        assert "3.12" in finding.fix


def test_a_machine_whose_pythons_are_unknown_gets_no_python_blocker_without_a_gpu_build() -> None:
    facts = windows_facts("3.13")
    del facts["python"]
    assert "python.range" not in checks(judge_target(facts, KB, "2.18.0"))


# --------------------------------------------------------------------------- a cuDNN given by its major only
# tensorflow#23726 (Windows, "CUDA 10.0 and cuDNN 7"): tfgpu read "7" as 7.0 and reported it older than the
# 7.2 that 1.12 loads. A facts document written from a report often names only the major: the minor is
# unknown, a caveat to check, while a different major or a stated minor that is too old still blocks.


@pytest.mark.parametrize(("cudnn", "blocks", "warns"), [
    (["8"], False, True),       # minor not stated: maybe 8.1 or newer
    (["7"], True, False),       # the wrong major
    (["8.0.5"], True, False),   # a stated minor below 8.1
    (["8.1.1"], False, False),  # enough
    (["7", "8"], False, True),  # the 8 might be enough
])
def test_a_cudnn_given_by_its_major_alone_is_checked_not_blocked(cudnn: list[str], blocks: bool, warns: bool) -> None:
    target = judge_target(linux_facts(cuda=["11.2"], cudnn=cudnn), KB, "2.5.0", backend="pip")
    assert ("cudnn.system" in checks(target)) is blocks
    assert ("cudnn.system" in {c.check for c in target.caveats}) is warns
