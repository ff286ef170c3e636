"""Verdicts: pure facts + tables -> checks, target verdicts, recommendation.

Cases are generated from the knowledge base (every toolkit's driver floor, every architecture row,
every series) plus named scenarios for the seeds' machines (tests/data/facts/SOURCES.md).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from packaging.version import Version

from tests.conftest import DATA
from tfgpu.facts.machine import Machine
from tfgpu.judge.checks import machine_checks
from tfgpu.judge.diagnose import diagnose
from tfgpu.judge.findings import BLOCKED, CAVEATS, READY
from tfgpu.judge.recommend import recommend
from tfgpu.judge.target import judge_target
from tfgpu.judge.verdict import judge_release
from tfgpu.kb.knowledge import load_kb
from tfgpu.kb.versions import normalize_cuda

KB = load_kb()


def base_facts(**changes: Any) -> dict[str, Any]:
    """A healthy Linux workstation: RTX 3090 (8.6), a new driver, Python 3.8-3.12."""
    facts: dict[str, Any] = {
        "schema": "tfgpu.facts/1",
        "platform": {"os": "linux", "arch": "x86_64", "distro": "ubuntu 22.04", "glibc": "2.35", "wsl": None,
                     "container": False},
        "cpu": {"avx": True, "avx2": True},
        "python": {"current": "3.11.7", "interpreters": [
            {"version": v, "path": f"/usr/bin/python{v}"} for v in ("3.7.17", "3.8.18", "3.9.18", "3.10.13", "3.12.1")]},
        "driver": {"version": "580.65.06", "cuda": "13.0", "kernel_module": "580.65.06", "source": "nvml", "error": None},
        "gpus": [{"index": 0, "name": "NVIDIA GeForce RTX 3090", "compute_capability": "8.6", "memory_mib": 24576,
                  "uuid": "GPU-1"}],
        "cuda_toolkits": [], "cudnn": [], "conda": None,
        "env": {"CUDA_VISIBLE_DEVICES": None, "LD_LIBRARY_PATH": None},
        "tensorflow": [],
    }
    for key, value in changes.items():
        section, _, field = key.partition("__")
        if field:
            facts[section][field] = value
        else:
            facts[section] = value
    return facts


def seed(name: str) -> dict[str, Any]:
    return json.loads((DATA / "facts" / name).read_text())


def blockers_of(tv: Any) -> set[str]:
    return {b.check for b in tv.blockers}


def caveats_of(tv: Any) -> set[str]:
    return {c.check for c in tv.caveats if not c.mitigated_by}


def findings_of(tv: Any) -> set[str]:
    """Every blocker and caveat of the target and of each backend considered."""
    out = blockers_of(tv) | caveats_of(tv)
    for b in tv.backends:
        out |= {f.check for f in b.blockers} | {f.check for f in b.caveats}
    return out


# --------------------------------------------------------------------------- the seeds' machines


def test_seed_r740_tf114_by_pip_is_not_ready_with_libcudart_10_0_and_the_conda_alternative():
    facts = seed("r740-4x-tesla-m60.json")
    tv = judge_release(facts, KB, Version("1.14.0"), backend="pip")
    assert tv.verdict == BLOCKED
    text = " ".join(b.summary + " " + b.fix for b in tv.blockers)
    assert "libcudart.so.10.0" in text
    assert "installed here: 10.1" in text
    assert "--backend conda" in text
    auto = judge_release(facts, KB, Version("1.14.0"))
    assert auto.verdict == READY
    assert auto.backend == "conda"
    assert any("libcudart.so.10.0" in c.summary for c in auto.caveats)


def test_seed_r740_has_the_ld_library_path_hazard_and_the_doctor_recommends_conda_for_old_tf():
    result = diagnose(seed("r740-4x-tesla-m60.json"), KB)
    checks = {c.id: c for c in result.checks}
    assert checks["env.ld_library_path"].status == "warn"
    assert "/usr/local/cuda-10.1/lib64" in checks["env.ld_library_path"].evidence
    # driver 418 supports CUDA 10.1: every TF that needs CUDA >= 10.2 is blocked by the driver
    by_tf = {Version(t.tf): t for t in result.targets}
    assert all(t.verdict == BLOCKED for v, t in by_tf.items() if v >= Version("2.5"))
    assert by_tf[Version("2.2.3")].verdict != BLOCKED
    # Anaconda built tensorflow-gpu 2.4.1 with cudatoolkit 10.1 (compat/conda.toml), which driver 418 runs
    assert result.recommendation is not None
    assert result.recommendation.tf == "2.4.1"
    assert result.recommendation.backend == "conda"


def test_seed_mx150_tf22_through_conda_is_ready_with_the_memory_growth_caveat():
    tv = judge_release(seed("mx150-laptop-ubuntu1804.json"), KB, Version("2.2.0"), backend="conda")
    assert tv.verdict == READY
    assert tv.backend == "conda"
    mem = [c for c in tv.caveats if c.check == "gpu.memory"]
    assert mem
    assert "TF_FORCE_GPU_ALLOW_GROWTH=true" in mem[0].fix
    assert mem[0].mitigated_by


def test_seed_windows_gtx1080_native_up_to_210_wsl2_beyond():
    facts = seed("windows-gtx1080.json")
    result = diagnose(facts, KB)
    assert result.recommendation is not None
    assert result.recommendation.tf.startswith("2.10")
    for tf in ("2.11", "2.15", "2.20"):
        tv = judge_target(facts, KB, tf)
        assert tv.verdict == BLOCKED
        assert any("WSL2" in b.fix for b in tv.blockers)
    wsl = copy.deepcopy(facts)
    wsl["platform"].update(os="linux", wsl=2, glibc="2.35")
    wsl["python"]["interpreters"].append({"version": "3.11.4", "path": "/usr/bin/python3.11"})
    assert judge_target(wsl, KB, "2.15").verdict in (READY, CAVEATS)
    checks = {c.id: c for c in machine_checks(Machine.from_facts(wsl), KB)}
    assert "never install a Linux NVIDIA driver" in checks["os.wsl"].fix


def test_seed_windows_flags_tensorflow_and_tensorflow_gpu_together():
    facts = seed("windows-gtx1080.json")
    facts["tensorflow"].append({"distribution": "tensorflow", "version": "2.1.0"})
    checks = {c.id: c for c in machine_checks(Machine.from_facts(facts), KB)}
    assert checks["tf.conflict"].status == "fail"


# --------------------------------------------------------------------------- drivers, generated


def _newest_release_per_cuda() -> list[tuple[str, str]]:
    """(series, cuda) for every Linux series, newest first."""
    out = []
    for series in KB.series("linux"):
        build = KB.build_for(series + ".0", "linux")
        assert build is not None
        out.append((series, normalize_cuda(build.cuda)))
    return out


@pytest.mark.parametrize(("series", "cuda"), _newest_release_per_cuda())
def test_driver_at_the_toolkit_floor_passes_and_just_below_does_not(series, cuda):
    toolkit = KB.toolkit(cuda)
    if toolkit is None or toolkit.linux_min_driver is None:
        pytest.skip(f"no Linux driver floor recorded for CUDA {cuda}")
    v = KB.resolve_tf(series)
    if not KB.recipes_for(v, "linux", "pip"):
        pytest.skip(f"no pip recipe for {v} (conda recipes may bring another CUDA)")
    gpu = {"index": 0, "name": "Tesla V100", "compute_capability": "7.0", "memory_mib": 16384}
    # the pip recipes use exactly the CUDA of the tested build configuration
    at = base_facts(driver={"version": str(toolkit.linux_min_driver), "cuda": cuda}, gpus=[gpu])
    tv = judge_release(at, KB, v, backend="pip")
    assert "driver.cuda" not in findings_of(tv), (series, tv)
    floor = toolkit.linux_min_driver
    below_version = f"{floor.major}.{floor.minor - 1}" if floor.minor else f"{floor.major - 1}.99"
    below_cuda = f"{Version(cuda).major}.{Version(cuda).minor - 1}" if Version(cuda).minor else f"{Version(cuda).major - 1}.2"
    below = base_facts(driver={"version": below_version, "cuda": below_cuda}, gpus=[gpu])
    tvb = judge_release(below, KB, v, backend="pip")
    assert "driver.cuda" in findings_of(tvb), (series, below_version, tvb)


def test_driver_470_cannot_run_tf215_which_needs_cuda_12():
    facts = base_facts(driver={"version": "470.82.01", "cuda": "11.4"})
    tv = judge_release(facts, KB, KB.resolve_tf("2.15"))
    assert tv.verdict == BLOCKED
    (finding,) = [b for b in tv.blockers if b.check == "driver.cuda"]
    assert "CUDA 12" in finding.summary
    toolkit = KB.toolkit(KB.build_for(KB.resolve_tf("2.15")).cuda)
    assert f"upgrade the NVIDIA driver to >= {toolkit.raw['linux_min_driver']}" in finding.fix


def test_minor_version_compatibility_is_a_caveat_naming_what_it_does_not_cover():
    # driver 525.60.13 (CUDA 12.0) with TF 2.16 (CUDA 12.3): runs under minor-version compatibility
    facts = base_facts(driver={"version": "525.60.13", "cuda": "12.0"})
    tv = judge_release(facts, KB, KB.resolve_tf("2.16"), backend="pip")
    assert tv.verdict == CAVEATS
    (finding,) = [c for c in tv.caveats if c.check == "driver.cuda"]
    assert "minor-version compatibility" in finding.summary
    assert "PTX" in finding.summary


def test_minor_version_compatibility_does_not_cover_ptx_jit():
    # a Hopper GPU (9.0) on TF 2.15 (SASS up to 8.0 and compute_80 PTX, read from the wheel) needs PTX JIT:
    # not covered -> blocked
    facts = base_facts(driver={"version": "525.60.13", "cuda": "12.0"},
                       gpus=[{"index": 0, "name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0",
                              "memory_mib": 81559}])
    tv = judge_release(facts, KB, KB.resolve_tf("2.15"), backend="pip")
    assert tv.verdict == BLOCKED
    assert any(b.check == "driver.cuda" and "PTX JIT" in b.summary for b in tv.blockers)


# --------------------------------------------------------------------------- GPU architectures, generated


def _arch_cases() -> list[tuple[str, str]]:
    cases = []
    for row in KB.archs:
        if row.os != "linux" or row.build != "pip":
            continue
        spec = str(row.tf)
        releases = [r.version for r in KB.gpu_releases("linux") if r.version in row.tf]
        if releases:
            cases.append((spec, str(max(releases))))
    return cases


def _conda_forge_cases() -> list[tuple[str, str, str]]:
    """Each conda-forge row with the newest conda-forge build it covers (release, CUDA variant)."""
    cases = []
    for row in KB.archs:
        if row.build != "conda-forge":
            continue
        builds = [(p.version, p.cuda) for p in KB.conda_packages(name="tensorflow", os="linux")
                  if p.channel == "conda-forge" and p.cuda and p.version in row.tf and not p.raw.get("dropped")
                  and (row.cuda is None or Version(normalize_cuda(p.cuda)) in row.cuda)]
        if builds:
            release, cuda = max(builds, key=lambda b: (b[0], Version(normalize_cuda(b[1]))))
            cases.append((f"{row.tf} cuda{row.cuda}", str(release), cuda))
    return cases


def _conda_forge_verdict(facts: dict[str, Any], release: str, cuda: str) -> Any:
    tv = judge_release(facts, KB, Version(release), backend="conda")
    return next(b for b in tv.backends if b.recipe == "conda-forge-tensorflow-cuda" and b.cuda == cuda)


@pytest.mark.parametrize(("spec", "release", "cuda"), _conda_forge_cases())
def test_conda_forge_builds_are_judged_by_their_own_gpu_code(spec, release, cuda):
    archs = KB.archs_for(Version(release), "linux", "conda-forge", cuda)
    assert archs is not None
    assert archs.build == "conda-forge", spec
    toolkit = KB.toolkit(cuda)
    assert toolkit is not None
    # a driver whose CUDA is this variant's: conda's __cuda makes the solver take exactly this build
    driver = {"version": toolkit.min_driver_text("linux"), "cuda": normalize_cuda(cuda)}
    highest = max(archs.sass, key=Version)  # the newest GPU the build has machine code for
    facts = base_facts(driver=driver, gpus=[{"index": 0, "name": "GPU", "compute_capability": highest,
                                            "memory_mib": 16000}])
    bv = _conda_forge_verdict(facts, release, cuda)
    assert not [f for f in bv.blockers + bv.caveats if f.check.startswith("gpu.")], (spec, highest, bv)


def test_rtx_50_series_is_recommended_conda_forges_build_with_sm_120():
    # conda-forge/tensorflow-feedstock 13015ae: 2.19.1 builds carry sm_120 (the official wheels do not)
    result = diagnose(gpu_facts("NVIDIA GeForce RTX 5090", "12.0", driver="581.29"), KB)
    assert result.recommendation is not None
    assert result.recommendation.backend == "conda"
    assert Version(result.recommendation.tf) >= Version("2.19.1")
    pip_2_20 = judge_release(gpu_facts("NVIDIA GeForce RTX 5090", "12.0"), KB, KB.resolve_tf("2.20"), backend="pip")
    fix = " ".join(b.fix for b in pip_2_20.blockers)
    # no conda tool in these facts: the fix names the embedded engine, which runs here (issue 18)
    assert "tfgpu create --tf 2.19.1 --backend rattler" in fix


@pytest.mark.parametrize(("spec", "release"), _arch_cases())
def test_gpu_at_the_lowest_sass_target_passes_and_below_it_is_blocked(spec, release):
    v = Version(release)
    archs = KB.archs_for(v, "linux")
    assert archs is not None
    lowest = min(archs.sass, key=Version)
    build = KB.build_for(v, "linux")
    assert build is not None
    toolkit = KB.toolkit(build.cuda)
    driver = {"version": "580.65.06", "cuda": "13.0"}
    ok = base_facts(driver=driver, gpus=[{"index": 0, "name": "GPU", "compute_capability": lowest, "memory_mib": 16000}])
    tv = judge_release(ok, KB, v, backend="pip")  # the official wheels' rows (conda-forge: the test above)
    assert "gpu.arch" not in findings_of(tv), (release, lowest, tv.blockers)
    lower = Version(lowest)
    below = f"{lower.major}.{lower.minor - 1}" if lower.minor else f"{lower.major - 1}.7"
    if toolkit and toolkit.cc_min and Version(below) < Version(toolkit.cc_min):
        below = str(Version(toolkit.cc_min))
        if Version(below) >= lower:
            pytest.skip("the toolkit floor equals the lowest SASS target")
    bad = base_facts(driver=driver, gpus=[{"index": 0, "name": "GPU", "compute_capability": below, "memory_mib": 16000}])
    tvb = judge_release(bad, KB, v, backend="pip")
    if archs.ptx and Version(archs.ptx) <= Version(below):
        pytest.skip("PTX covers the lower capability")
    assert "gpu.arch" in findings_of(tvb), (release, below)


def test_kepler_with_recent_tensorflow_is_blocked():
    facts = base_facts(gpus=[{"index": 0, "name": "Tesla K40c", "compute_capability": "3.5", "memory_mib": 11441}],
                       driver={"version": "470.256.02", "cuda": "11.4"})
    tv = judge_release(facts, KB, KB.resolve_tf("2.20"))
    assert tv.verdict == BLOCKED
    assert "gpu.arch" in blockers_of(tv)


@pytest.mark.parametrize(("name", "cc"), [
    ("NVIDIA GeForce RTX 3090", "8.6"), ("NVIDIA GeForce RTX 4090", "8.9"),
    ("NVIDIA H100 80GB HBM3", "9.0"), ("NVIDIA GeForce RTX 5090", "12.0"),
])
def test_tf22_with_cuda_101_and_cudnn_76_on_new_gpus_is_blocked_realistically(name, cc):
    facts = base_facts(gpus=[{"index": 0, "name": name, "compute_capability": cc, "memory_mib": 24000}])
    for backend in ("conda", "pip"):
        tv = judge_release(facts, KB, Version("2.2.0"), backend=backend)
        assert tv.verdict == BLOCKED
        arch = [b for b in tv.blockers if b.check == "gpu.arch"]
        assert arch, tv.blockers
        assert "CUDA 10.1" in arch[0].summary
        if cc == "12.0":  # no official wheel runs on RTX 50-series (tensorflow#99592); conda-forge's 2.19.1 does
            assert "tfgpu create --tf 2.19.1 --backend rattler" in arch[0].fix  # no conda tool in the facts
        else:
            assert "TensorFlow >=" in arch[0].fix


def test_new_gpu_without_sass_in_the_build_gets_the_ptx_jit_caveat():
    # TF 2.15's wheels carry SASS up to sm_80 and compute_80 PTX (read from the wheel); an H100 (9.0)
    # JIT-compiles from that PTX
    facts = gpu_facts("NVIDIA H100 80GB HBM3", "9.0")
    tv = judge_release(facts, KB, KB.resolve_tf("2.15"), backend="pip")
    assert tv.verdict == CAVEATS
    assert "gpu.ptx_jit" in caveats_of(tv)


def gpu_facts(name: str, cc: str, driver: str = "580.65.06") -> dict[str, Any]:
    return base_facts(gpus=[{"index": 0, "name": name, "compute_capability": cc, "memory_mib": 32607,
                             "uuid": "GPU-1"}], driver={"version": driver, "cuda": "13.0", "kernel_module": driver,
                                                        "source": "nvml", "error": None})


@pytest.mark.parametrize("tf", ["2.16", "2.17", "2.19", "2.20", "2.21"])
def test_rtx_50_series_is_blocked_where_the_wheels_ptx_does_not_load(tf):
    # tensorflow#99592, #101746, #97387, #89272: CUDA_ERROR_INVALID_PTX on compute capability 12.0
    facts = gpu_facts("NVIDIA GeForce RTX 5090", "12.0")
    v = KB.resolve_tf(tf)
    tv = judge_release(facts, KB, v, backend="pip")
    assert tv.verdict == BLOCKED
    text = " ".join(b.summary + " " + b.fix for b in tv.blockers if b.check == "gpu.arch")
    assert "CUDA_ERROR_INVALID_PTX" in text or "newer than CUDA" in text, tv.blockers
    assert "tfgpu create --tf 2.19.1 --backend rattler" in text  # no wheel runs on it; conda-forge's build does (no conda tool here: the embedded engine)
    assert "use TensorFlow >=" not in text
    if tf in ("2.20", "2.21"):  # pip brings CUDA 12.8+, which knows 12.0: the PTX is the problem
        assert "CUDA_ERROR_INVALID_PTX" in text


def test_rtx_50_series_no_official_wheel_of_any_release_is_ready():
    result = diagnose(gpu_facts("NVIDIA GeForce RTX 5080", "12.0"), KB)
    for t in result.targets:
        assert all(not b.viable for b in t.backends if b.backend == "pip"), t.tf


def test_hopper_runs_the_sm90_sass_of_the_2_20_wheels():
    # 2.16+ wheels carry sm_90 SASS (read from the wheels: compat/tf_archs.toml)
    tv = judge_release(gpu_facts("NVIDIA H100 80GB HBM3", "9.0"), KB, KB.resolve_tf("2.20"), backend="pip")
    assert "gpu.ptx_jit" not in caveats_of(tv)
    assert "gpu.arch" not in blockers_of(tv)


@pytest.mark.parametrize(("name", "cc"), [("NVIDIA B200", "10.0")])
def test_newer_gpus_without_a_reported_ptx_failure_keep_the_jit_caveat(name, cc):
    v = KB.resolve_tf("2.20")
    tv = judge_release(gpu_facts(name, cc), KB, v, backend="pip")
    assert tv.verdict == CAVEATS, tv.blockers
    assert "gpu.ptx_jit" in caveats_of(tv)


@pytest.mark.parametrize(("tf", "cc", "native"), [
    ("2.15", "7.5", True), ("2.15", "8.6", True),   # 2.15: sm_50..sm_80 + compute_80 (read from the wheel)
    ("2.15", "9.0", False),
    ("2.16", "8.6", True), ("2.16", "8.9", True),   # 2.16: sm_80 runs on 8.x
    ("2.16", "9.0", True),                          # 2.16: sm_90 SASS (read from the wheel)
    ("2.17", "5.2", None), ("2.17", "8.9", True),   # 2.17: Maxwell removed, sm_89 added (release notes)
])
def test_gpu_code_per_release_follows_the_build_configurations(tf, cc, native):
    facts = gpu_facts("GPU", cc)
    tv = judge_release(facts, KB, KB.resolve_tf(tf), backend="pip")
    jit = "gpu.ptx_jit" in caveats_of(tv)
    arch_blocked = "gpu.arch" in blockers_of(tv)
    if native is None:
        assert arch_blocked
    else:
        assert not arch_blocked
        assert jit is (not native)


# --------------------------------------------------------------------------- Python, OS, CPU, glibc


def test_no_python_in_range_blocks_pip_but_not_conda():
    facts = base_facts(python={"current": "3.12.1", "interpreters": []})
    v = KB.resolve_tf("2.10")
    pip = judge_release(facts, KB, v, backend="pip")
    assert pip.verdict == BLOCKED
    assert "python.range" in blockers_of(pip)
    assert any("conda backend" in b.fix for b in pip.blockers if b.check == "python.range")
    conda = judge_release(facts, KB, v, backend="conda")
    assert "python.range" not in blockers_of(conda)
    assert conda.verdict != BLOCKED


def test_macos_has_no_cuda_gpu():
    facts = base_facts(platform={"os": "darwin", "arch": "arm64"}, driver={"version": None}, gpus=[])
    result = diagnose(facts, KB)
    checks = {c.id: c for c in result.checks}
    assert checks["os.supported"].status == "fail"
    assert result.recommendation is not None
    assert result.recommendation.backend == "cpu"
    assert all(t.verdict == BLOCKED for t in result.targets)


@pytest.mark.parametrize("series", KB.series("linux")[:6])
def test_native_windows_gpu_ends_at_210(series):
    facts = base_facts(platform={"os": "windows", "arch": "AMD64"})
    tv = judge_target(facts, KB, series)
    if Version(series) >= Version("2.11"):
        assert tv.verdict == BLOCKED
        assert any(b.check == "os.windows_gpu" for b in tv.blockers)
    else:
        assert not any(b.check == "os.windows_gpu" for b in tv.blockers)


def test_cpu_without_avx_blocks_official_wheels():
    facts = base_facts(cpu={"avx": False, "avx2": False})
    tv = judge_release(facts, KB, KB.resolve_tf("2.15"))
    assert tv.verdict == BLOCKED
    assert "cpu.avx" in blockers_of(tv)
    assert "Illegal instruction" in next(b.summary for b in tv.blockers if b.check == "cpu.avx")


def test_glibc_older_than_the_wheel_floor_blocks_pip():
    v = KB.resolve_tf("2.21")
    rel = KB.gpu_release(v)
    assert rel is not None
    assert rel.glibc is not None
    old = f"{rel.glibc.major}.{rel.glibc.minor - 1}"
    tv = judge_release(base_facts(platform={"os": "linux", "glibc": old}), KB, v, backend="pip")
    assert tv.verdict == BLOCKED
    assert "glibc.manylinux" in blockers_of(tv)
    ok = judge_release(base_facts(platform={"os": "linux", "glibc": str(rel.glibc)}), KB, v, backend="pip")
    assert "glibc.manylinux" not in blockers_of(ok)


# --------------------------------------------------------------------------- system CUDA for pip <= 2.13


def test_pip_up_to_213_needs_the_exact_system_cuda_and_214_does_not():
    v = KB.resolve_tf("2.10")
    build = KB.build_for(v)
    assert build is not None
    missing = judge_release(base_facts(), KB, v, backend="pip")
    assert "cuda.system_toolkit" in blockers_of(missing)
    have = base_facts(cuda_toolkits=[{"version": build.cuda, "path": f"/usr/local/cuda-{build.cuda}"}],
                      cudnn=[{"version": build.cudnn + ".0", "path": "/usr/include/cudnn_version.h"}])
    assert "cuda.system_toolkit" not in blockers_of(judge_release(have, KB, v, backend="pip"))
    new = judge_release(base_facts(), KB, KB.resolve_tf("2.15"), backend="pip")
    assert "cuda.system_toolkit" not in blockers_of(new)


# --------------------------------------------------------------------------- environment hazards and absence


def test_empty_cuda_visible_devices_hides_every_gpu():
    facts = base_facts(env={"CUDA_VISIBLE_DEVICES": "", "LD_LIBRARY_PATH": None})
    result = diagnose(facts, KB, tf="2.15")
    checks = {c.id: c for c in result.checks}
    assert checks["env.cuda_visible_devices"].status == "fail"
    assert result.targets[0].verdict == BLOCKED


def test_cuda_visible_devices_selects_by_index():
    facts = base_facts(gpus=[{"index": i, "name": "Tesla M60", "compute_capability": "5.2", "memory_mib": 8129}
                             for i in range(4)],
                       env={"CUDA_VISIBLE_DEVICES": "1,3"})
    m = Machine.from_facts(facts)
    assert [g["index"] for g in m.gpus or ()] == [1, 3]


def test_driver_kernel_user_mismatch_blocks_until_reboot():
    facts = base_facts(driver={"version": "550.54.15", "cuda": "12.4", "kernel_module": "550.54.14",
                               "user_library": "550.54.15"})
    tv = judge_release(facts, KB, KB.resolve_tf("2.15"))
    assert tv.verdict == BLOCKED
    assert "driver.kernel_match" in blockers_of(tv)
    assert "reboot" in next(b.fix for b in tv.blockers if b.check == "driver.kernel_match")


def test_gpu_without_driver_is_told_apart_from_no_gpu():
    with_gpu = base_facts(driver={"version": None, "error": "NVML Shared Library Not Found"}, gpus=[],
                          lspci_nvidia=[{"slot": "01:00.0", "class": "VGA compatible controller",
                                         "name": "NVIDIA Corporation GA102 [GeForce RTX 3090]"}])
    without = base_facts(driver={"version": None, "error": "NVML Shared Library Not Found"}, gpus=[],
                         lspci_nvidia=[])
    a = {c.id: c for c in machine_checks(Machine.from_facts(with_gpu), KB)}["driver.installed"]
    b = {c.id: c for c in machine_checks(Machine.from_facts(without), KB)}["driver.installed"]
    assert "an NVIDIA GPU is present" in a.summary
    assert "but no NVIDIA driver is loaded" in a.summary
    assert "install the NVIDIA driver" in a.fix
    assert "no NVIDIA driver" in b.summary
    assert a.summary != b.summary


def test_small_gpu_memory_growth_advice_is_a_check_warning():
    facts = base_facts(gpus=[{"index": 0, "name": "GeForce MX150", "compute_capability": "6.1", "memory_mib": 2002}])
    checks = {c.id: c for c in machine_checks(Machine.from_facts(facts), KB)}
    assert checks["gpu.memory"].status == "warn"
    assert "TF_FORCE_GPU_ALLOW_GROWTH=true" in checks["gpu.memory"].fix


def test_partial_facts_mean_unknown_not_absent():
    result = diagnose({"schema": "tfgpu.facts/1", "platform": {"os": "linux"}}, KB)
    checks = {c.id: c for c in result.checks}
    assert checks["driver.installed"].status == "skip"
    assert checks["gpu.present"].status == "skip"
    assert any(t.verdict != BLOCKED for t in result.targets)


# --------------------------------------------------------------------------- every series, both OSes


@pytest.mark.parametrize("os_name", ["linux", "windows"])
@pytest.mark.parametrize("series", KB.series("linux"))
def test_every_series_gets_a_consistent_verdict(series, os_name):
    facts = base_facts(platform={"os": os_name, "glibc": "2.35" if os_name == "linux" else None})
    tv = judge_target(facts, KB, series)
    assert tv.verdict in (READY, CAVEATS, BLOCKED)
    if tv.verdict == BLOCKED:
        assert tv.blockers
        assert all(b.fix for b in tv.blockers)
    else:
        assert tv.backend in ("pip", "conda")
        assert not tv.blockers


def test_recommendation_is_the_newest_ready_release():
    facts = base_facts()
    result = diagnose(facts, KB)
    rec = recommend(facts, KB, result.targets)
    assert rec is not None
    ready = [Version(t.tf) for t in result.targets if t.verdict == READY]
    assert Version(rec.tf) == max(ready)
    assert rec.command == f"tfgpu create --tf {rec.tf} --backend {rec.backend}"


def test_doctor_exit_codes_for_gating_flags():
    facts = base_facts(driver={"version": None}, gpus=[])
    m = Machine.from_facts(facts)
    plain = diagnose(facts, KB)
    assert plain.exit_code(require_gpu=False, strict=False, machine=m) == 0
    assert plain.exit_code(require_gpu=True, strict=False, machine=m) == 1
    targeted = diagnose(facts, KB, tf="2.15")
    assert targeted.exit_code(require_gpu=False, strict=False, machine=m) == 1
    healthy = base_facts()
    ok = diagnose(healthy, KB, tf="2.17")
    assert ok.exit_code(require_gpu=True, strict=False, machine=Machine.from_facts(healthy)) == 0


def test_wsl2_uses_the_windows_driver_floors_and_linux_recipes():
    v = KB.resolve_tf("2.15")
    build = KB.build_for(v)
    toolkit = KB.toolkit(build.cuda)
    win_floor = toolkit.min_driver_text("windows")
    facts = base_facts(platform={"os": "linux", "wsl": 2, "glibc": "2.35"},
                       driver={"version": win_floor, "cuda": None})
    tv = judge_release(facts, KB, v, backend="pip")
    assert "driver.cuda" not in findings_of(tv)
    pascal = copy.deepcopy(facts)
    pascal["gpus"] = [{"index": 0, "name": "NVIDIA GeForce GTX 1080", "compute_capability": "6.1", "memory_mib": 8192}]
    old = judge_target(pascal, KB, "2.2")
    assert old.verdict == READY
    assert old.recipe.startswith("conda-anaconda")


def test_driver_older_than_every_floor_is_blocked():
    facts = base_facts(driver={"version": "300.10", "cuda": None})
    tv = judge_release(facts, KB, Version("1.15.0"), backend="conda")
    assert tv.verdict == BLOCKED
    assert any(b.check == "driver.cuda" and "older than every driver" in b.summary for b in tv.blockers), tv.blockers


@pytest.mark.parametrize(("conda", "flag"), [(None, "--backend rattler"),
                                             ({"kind": "mamba", "path": "/opt/mamba/bin/mamba"}, "--backend conda")])
def test_a_conda_recommendation_runs_with_the_embedded_engine_when_no_conda_tool_exists(conda, flag):
    facts = gpu_facts("NVIDIA GeForce RTX 5090", "12.0", driver="581.29")
    facts["conda"] = conda
    rec = diagnose(facts, KB).recommendation
    assert rec is not None
    assert rec.backend == "conda"  # the JSON field keeps naming the ecosystem
    assert rec.command == f"tfgpu create --tf {rec.tf} {flag}"


def _arm(driver: str, name: str, cc: str) -> dict[str, Any]:
    facts = gpu_facts(name, cc, driver=driver)
    facts["platform"] = {**facts["platform"], "arch": "aarch64"}
    facts["cpu"] = {"avx": None, "avx2": None}  # the probe leaves AVX unknown on ARM
    return facts


@pytest.mark.parametrize(("driver", "name", "cc", "jetson"), [
    ("35.3.1", "Orin", "8.7", True),  # Jetson: the driver carries the L4T release (tests/data/probe/proc fixture)
    ("550.54.15", "NVIDIA GH200 480GB", "9.0", False),  # Grace Hopper: an ARM server with a data-center driver
])
def test_arm_linux_has_no_official_gpu_build(driver, name, cc, jetson):
    facts = _arm(driver, name, cc)
    result = diagnose(facts, KB)
    assert result.recommendation is not None
    assert result.recommendation.backend == "cpu"
    check = next(c for c in result.checks if c.id == "cpu.arch")
    assert check.status == "fail"
    assert ("developer.download.nvidia.com/compute/redist/jp" in check.fix) is jetson
    for t in result.targets:
        assert t.verdict == BLOCKED
        assert t.blockers[0].check == "cpu.arch", t.blockers[0]


def test_the_jetson_fix_is_compat_data_with_its_source():
    """NVIDIA's Jetson wheels are a row of compat/tensorflow.toml (not a string in the verdict), cited."""
    row = KB.platform_build("jetson")
    assert row is not None
    url = KB.sources("tensorflow")[row.source]["url"]
    assert url.startswith("https://docs.nvidia.com/")
    check = next(c for c in diagnose(_arm("35.3.1", "Orin", "8.7"), KB).checks if c.id == "cpu.arch")
    assert row.text in check.fix
    assert url in check.fix


def test_x86_64_and_macos_arm_get_no_arch_finding():
    assert "cpu.arch" not in {c.id for c in diagnose(base_facts(), KB).checks}
    mac = base_facts(platform={"os": "darwin", "arch": "arm64"}, driver={"version": None}, gpus=[])
    assert "cpu.arch" not in {c.id for c in diagnose(mac, KB).checks}  # macOS has its own finding


@pytest.mark.parametrize(("driver", "reported", "variant"), [
    ("570.86.10", None, "12.8"),     # CUDA 12.9 needs >= 575.51.03: the solver's __cuda=12.8 takes the 12.8 build
    # a newer driver: the newest variant still built. The 12.9 variant (393c877) was reverted to 12.8 at
    # 2cc3b12 with a higher build number, which the solver prefers (compat/conda.toml `dropped`)
    ("580.65.06", "13.0", "12.8"),
])
def test_conda_forge_variant_is_the_newest_the_driver_allows(driver, reported, variant):
    facts = gpu_facts("NVIDIA GeForce RTX 5090", "12.0", driver=driver)
    facts["driver"]["cuda"] = reported
    tv = judge_release(facts, KB, Version("2.19.1"), backend="conda")
    forge = next(b for b in tv.backends if b.recipe == "conda-forge-tensorflow-cuda")
    assert forge.cuda == variant
    assert forge.viable, forge.blockers


def test_rtx_50_series_on_native_windows_is_sent_to_wsl2_for_conda_forges_build():
    facts = gpu_facts("NVIDIA GeForce RTX 5080", "12.0", driver="581.29")
    facts["platform"] = {"os": "windows", "arch": "AMD64"}
    tv = judge_release(facts, KB, KB.resolve_tf("2.10"), backend="pip")
    fixes = " ".join(b.fix for b in tv.blockers if b.check == "gpu.arch")
    assert "inside WSL2" in fixes
    # no conda tool in these facts: the fix names the embedded engine, which runs here (issue 18)
    assert "tfgpu create --tf 2.19.1 --backend rattler" in fixes
