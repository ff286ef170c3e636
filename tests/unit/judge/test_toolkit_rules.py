"""The toolkit as well as the runtime (issue 27, section 1, rule 6), and fixes that name only a backend `create`
accepts (rule 5): each release's cuDNN rule is the one TensorFlow's code enforces (compat/rules.toml
`cudnn-newer-minor`); of several cuDNNs sharing a library name, which one loads decides; a system CUDA whose ptxas
predates the GPU is a caveat; a toolkit newer than the driver supports is a warning."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfgpu.api.doctor import doctor_result
from tfgpu.judge.findings import PASS, WARN
from tfgpu.judge.system import conda_route, system_cudnn_serves
from tfgpu.judge.verdict import judge_release
from tfgpu.kb.knowledge import load_kb
from tfgpu.kb.versions import version

KB = load_kb()


@pytest.mark.parametrize(("tf", "built", "loaded", "ok"), [
    ("1.7.1", "7.0", "7.1.2", False),  # tensorflow#36148: '(compatibility version 7100) but ... 7005 (7000)'
    ("1.7.1", "7.0", "7.0.5", True),
    ("1.12.0", "7.2", "7.4.1", True),  # from 1.8: the same or a newer minor of cuDNN >= 7
    ("1.15.0", "7.6", "7.5.1", False),  # tensorflow#38169: 'Loaded runtime CuDNN library: 7.5.1 but ... 7.6.0'
    ("2.4.1", "8.0", "8.1.0", True),
    ("2.4.1", "8.0", "7.6.5", False),
    ("2.4.1", "6.0", "6.1", False),  # before cuDNN 7 the minor is exact whatever the release
    ("1.5.1", "7", "7.0.5", True),  # a build known by its major only
])
def test_each_release_enforces_its_own_cudnn_rule(tf: str, built: str, loaded: str, ok: bool) -> None:
    assert system_cudnn_serves(version(loaded), version(built), version(tf), KB) is ok


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([str(r.version) for r in KB.gpu_releases("linux")]), st.integers(5, 9), st.integers(0, 9),
       st.integers(0, 9))
def test_the_cudnn_rule_never_accepts_another_major_or_an_older_minor(tf: str, major: int, built: int,
                                                                      loaded: int) -> None:
    ok = system_cudnn_serves(version(f"{major}.{loaded}"), version(f"{major}.{built}"), version(tf), KB)
    assert not ok or loaded >= built
    assert not system_cudnn_serves(version(f"{major + 1}.{loaded}"), version(f"{major}.{built}"), version(tf), KB)
    if loaded == built:
        assert ok


def _pip_facts(cudnns: list[str], toolkits: list[str], gpu: tuple[str, str] = ("GeForce GTX 1080", "6.1"),
               driver: str = "460.32.03") -> dict[str, Any]:
    return {"platform": {"os": "linux", "glibc": "2.27"}, "cpu": {"avx": True},
            "python": {"current": "3.7.4", "interpreters": [{"version": "3.7.4", "path": "/usr/bin/python3.7"}]},
            "driver": {"version": driver, "source": "nvidia-smi"},
            "gpus": [{"index": 0, "name": gpu[0], "compute_capability": gpu[1], "memory_mib": 8192}],
            "cuda_toolkits": [{"version": t, "path": f"/usr/local/cuda-{t}"} for t in toolkits],
            "cudnn": [{"version": c, "path": f"/opt/cudnn-{c}/include/cudnn.h"} for c in cudnns]}


def _pip(facts: dict[str, Any], tf: str) -> Any:
    return judge_release(facts, KB, version(tf), backend="pip")


def test_several_cudnns_of_one_name_are_a_caveat_when_only_some_serve() -> None:
    tv = _pip(_pip_facts(["7.6.5", "7.5.1"], ["10.1"]), "2.1.0")  # 2.1 needs cuDNN 7.6
    found = [c for c in tv.caveats if c.check == "cudnn.system"]
    assert len(found) == 1
    assert "7.6.5 would serve, 7.5.1 would not" in found[0].summary
    assert "libcudnn.so.7" in found[0].summary
    assert not [b for b in tv.blockers if b.check == "cudnn.system"]


def test_only_an_old_cudnn_blocks_and_only_a_new_one_passes() -> None:
    assert any(b.check == "cudnn.system" for b in _pip(_pip_facts(["7.5.1"], ["10.1"]), "2.1.0").blockers)
    tv = _pip(_pip_facts(["7.6.5"], ["10.1"]), "2.1.0")
    assert not any(f.check == "cudnn.system" for f in (*tv.blockers, *tv.caveats))


def test_a_system_cuda_whose_ptxas_predates_the_gpu_is_a_caveat() -> None:
    # CUDA 11.0 emits code up to compute capability 8.0; an RTX 3080 is 8.6 (added in CUDA 11.1)
    tv = _pip(_pip_facts(["8.0.5"], ["11.0"], gpu=("NVIDIA GeForce RTX 3080", "8.6")), "2.4.1")
    ptxas = [c for c in tv.caveats if c.check == "cuda.ptxas"]
    assert len(ptxas) == 1
    assert "8.6" in ptxas[0].summary
    assert ptxas[0].fix == "install CUDA 11.1 or newer of the 11.x series"
    assert ptxas[0].severity == "risky"
    newer = _pip(_pip_facts(["8.1.1"], ["11.2"], gpu=("NVIDIA GeForce RTX 3080", "8.6")), "2.5.0")
    assert not any(c.check == "cuda.ptxas" for c in newer.caveats)


def test_a_toolkit_newer_than_the_driver_is_a_warning_not_a_tick() -> None:
    checks = {c.id: c for c in doctor_result(_pip_facts([], ["12.6", "11.8"], driver="525.60.13"), KB).checks}
    assert checks["cuda.toolkit"].status == WARN
    assert "12.6 is newer than driver 525.60.13" in checks["cuda.toolkit"].summary
    ok = {c.id: c for c in doctor_result(_pip_facts([], ["11.8"], driver="525.60.13"), KB).checks}
    assert ok["cuda.toolkit"].status == PASS


_backend = re.compile(r"--backend (\w+)")


@settings(max_examples=120, deadline=None)
@given(st.sampled_from([str(r.version) for r in KB.gpu_releases("linux")]),
       st.sampled_from([[], ["9.0"], ["10.0"], ["11.2"]]), st.sampled_from([[], ["7.0"], ["8.1.0"]]))
def test_a_fix_names_only_a_backend_create_accepts_for_the_release(tf: str, toolkits: list[str],
                                                                   cudnns: list[str]) -> None:
    tv = judge_release(_pip_facts(cudnns, toolkits), KB, version(tf), backend="pip")
    for f in (*tv.blockers, *tv.caveats):
        for named in _backend.findall(f.fix):
            if named in ("conda", "rattler") and f"--tf {tf}" in f.fix:
                assert conda_route(KB, version(tf), "linux"), f.fix
                other = judge_release(_pip_facts(cudnns, toolkits), KB, version(tf), backend=named)
                assert not any(b.check == "tf.recipe" for b in other.blockers), f.fix


def test_a_release_without_a_conda_recipe_is_fixed_with_nvidias_installer() -> None:
    tv = _pip(_pip_facts([], []), "1.5.1")
    fixes = [b.fix for b in tv.blockers if b.check in ("cuda.system_toolkit", "cudnn.system")]
    assert fixes
    assert all("--backend" not in f and "NVIDIA's archive" in f for f in fixes)
