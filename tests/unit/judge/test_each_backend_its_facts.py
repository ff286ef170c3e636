"""Each backend its own facts (issue 27, section 1, rule 4) and the best alternative searching everything (rule 3):
Anaconda's builds are judged by their own recipes (compiled with -march=nocona: no AVX; code for compute capability
3.0 up to 2.1; the cudatoolkit variant conda's solver takes, with its driver floor); the container route needs the
CPU features of the wheels in the image; a GPU that only an older release supports gets that release, and the CPU
route needs a CPU its wheels run."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfgpu.api.doctor import doctor_result
from tfgpu.facts.machine import Machine
from tfgpu.judge.findings import BLOCKED
from tfgpu.judge.release_checks import ReleaseContext, arch_build, recipes_judged
from tfgpu.judge.verdict import judge_release
from tfgpu.kb.knowledge import load_kb
from tfgpu.kb.versions import version

KB = load_kb()
K4200 = {"index": 0, "name": "Quadro K4200", "compute_capability": "3.0", "memory_mib": 4096}
TITAN_X = {"index": 0, "name": "GeForce GTX TITAN X", "compute_capability": "5.2", "memory_mib": 12288}


def _facts(*, avx: bool = True, gpu: dict[str, Any] | None = None, driver: str | None = "440.64",
           conda: bool = True) -> dict[str, Any]:
    return {"platform": {"os": "linux", "glibc": "2.27"}, "cpu": {"avx": avx},
            "python": {"current": "3.7.4", "interpreters": [{"version": "3.7.4", "path": "/usr/bin/python3.7"}]},
            "driver": {"version": driver, "source": "nvidia-smi"}, "gpus": [gpu or TITAN_X],
            "cuda_toolkits": [], "cudnn": [],
            "conda": {"kind": "conda", "path": "/opt/conda/bin/conda", "version": "4.8.3"} if conda else None}


def _by_backend(tv: Any) -> dict[str, Any]:
    return {b.recipe: b for b in tv.backends}


def test_anacondas_builds_need_no_avx_the_official_wheels_do() -> None:
    tv = judge_release(_facts(avx=False), KB, version("1.14.0"))
    rows = _by_backend(tv)
    assert not rows["conda-anaconda-tensorflow-gpu"].blockers
    assert [b.check for b in rows["pip-system-cuda-1x"].blockers][:1] == ["cpu.avx"]
    assert tv.verdict != BLOCKED
    assert tv.recipe == "conda-anaconda-tensorflow-gpu"


def test_conda_forges_builds_are_judged_by_the_official_wheels_cpu_rule() -> None:
    # no row of conda-forge's CPU flags: the official wheels' (AVX from 1.6) applies
    assert KB.cpu_requirement("avx", version("2.9.1"), "conda-forge") is not None
    assert KB.cpu_requirement("avx", version("2.9.1"), "anaconda") is None
    assert KB.cpu_requirement("avx", version("1.5.1")) is None


@pytest.mark.parametrize(("tf", "runs"), [("1.14.0", True), ("2.1.0", True), ("2.2.0", False), ("2.4.1", False)])
def test_anacondas_builds_carry_compute_capability_3_0_up_to_2_1(tf: str, runs: bool) -> None:
    rows = _by_backend(judge_release(_facts(gpu=K4200), KB, version(tf)))
    anaconda = rows["conda-anaconda-tensorflow-gpu"]
    assert (not any(b.check == "gpu.arch" for b in anaconda.blockers)) == runs
    pip = next(b for b in rows.values() if b.backend == "pip")
    assert any(b.check == "gpu.arch" for b in pip.blockers)  # the official wheels start at 3.5 from 1.5


def test_a_gpu_arch_finding_names_whose_build_it_judges() -> None:
    rows = _by_backend(judge_release(_facts(gpu=K4200), KB, version("2.2.0")))
    assert "Anaconda's builds" in rows["conda-anaconda-tensorflow-gpu"].blockers[0].summary


@pytest.mark.parametrize(("driver", "cuda"), [("418.39", "10.1"), ("410.72", "10.0"), ("396.26", "9.2"),
                                               ("384.81", "9.0"), ("375.26", "9.0")])
def test_anacondas_cudatoolkit_is_the_newest_the_driver_runs(driver: str, cuda: str) -> None:
    # conda's __cuda virtual package and the constraint Anaconda's cudatoolkit packages carry
    # (AnacondaRecipes/repodata-hotfixes#81): 1.14.0's variants 9.0, 9.2, 10.0 and 10.1
    m = Machine.from_facts(_facts(driver=driver), KB)
    ctx = ReleaseContext(_facts(driver=driver), KB, version("1.14.0"), m)
    build = KB.build_for("1.14.0", "linux")
    assert build is not None
    anaconda = next(rc for rc in recipes_judged(ctx, build) if arch_build(rc.recipe) == "anaconda")
    assert anaconda.cuda == cuda


def test_the_oldest_variant_is_judged_when_no_variant_fits_and_its_driver_floor_blocks() -> None:
    rows = _by_backend(judge_release(_facts(driver="375.26"), KB, version("1.14.0")))
    assert any(b.check == "driver.cuda" for b in rows["conda-anaconda-tensorflow-gpu"].blockers)


def test_the_container_route_needs_the_cpu_features_of_the_wheels_in_its_image() -> None:
    facts = _facts(avx=False) | {"containers": {"runtimes": [{"name": "docker", "version": "24.0.7", "daemon": {
        "reachable": True}, "runtimes": ["nvidia", "runc"]}], "toolkit": {"present": True}}}
    tv = judge_release(facts, KB, version("2.17.1"), backend="docker")
    assert tv.verdict == BLOCKED
    assert any(b.check == "cpu.avx" for b in tv.blockers)
    ok = judge_release(facts | {"cpu": {"avx": True}}, KB, version("2.17.1"), backend="docker")
    assert not any(b.check == "cpu.avx" for b in ok.blockers)


# --------------------------------------------------------------------------- the best alternative (rule 3)


def test_a_kepler_3_0_gpu_gets_a_release_that_supports_it_not_the_cpu_route() -> None:
    rec = doctor_result(_facts(gpu=K4200), KB, tf="2.4.1").recommendation
    assert rec is not None
    assert rec.backend != "cpu"
    assert version(rec.tf) < version("2.2")  # Anaconda's last builds with 3.0 code are 2.1's


def test_a_cpu_without_avx_gets_a_gpu_release_it_runs() -> None:
    # tensorflow#33038: TF 2.0's pip wheel dies with 'Illegal instruction'; a 1.14 GPU build ran on the machine
    rec = doctor_result(_facts(avx=False), KB, tf="2.0.0", backend="pip").recommendation
    assert rec is not None
    assert rec.backend == "conda"
    assert KB.cpu_requirement("avx", version(rec.tf), "anaconda") is None


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["3.11", "3.8", "3.6", "2.7"]))
def test_the_cpu_route_on_a_cpu_without_avx_is_a_release_before_1_6(python: str) -> None:
    facts = {"platform": {"os": "linux", "glibc": "2.27"}, "cpu": {"avx": False},
             "python": {"current": f"{python}.1"}, "driver": {"version": None}, "gpus": [], "lspci_nvidia": []}
    rec = doctor_result(facts, KB).recommendation
    assert rec is not None
    assert rec.backend == "cpu"
    assert KB.cpu_requirement("avx", KB.resolve_tf(rec.tf)) is None
    assert rec.command == f"tfgpu create --tf {rec.tf} --cpu"


def test_the_cpu_route_prefers_a_release_with_a_wheel_for_the_machines_python() -> None:
    facts = {"platform": {"os": "linux", "glibc": "2.27"}, "cpu": {"avx": True}, "python": {"current": "3.7.4"},
             "driver": {"version": None}, "gpus": [], "lspci_nvidia": []}
    rec = doctor_result(facts, KB).recommendation
    assert rec is not None
    assert rec.backend == "cpu"
    assert "3.7" in KB.pythons_for(KB.resolve_tf(rec.tf), "linux")
    newer = [s for s in KB.series("linux") if version(s) > version(rec.tf)]
    assert all("3.7" not in KB.pythons_for(KB.resolve_tf(s), "linux") for s in newer)
