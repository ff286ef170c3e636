"""The environment verdict on environments built as trees (tfgpu.facts.environment reads them, tfgpu.judge.environment
judges them): the seed's tensorflow-gpu 1.14 beside CUDA 10.1, tensorflow#63362, an old cuDNN, NumPy 2 on TF 2.15,
two TensorFlows, a small GPU, and no TensorFlow at all."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.elf_builder import write_elf
from tfgpu.facts.environment import parse_build_info, probe_environment
from tfgpu.judge.environment import BROKEN, CPU_ONLY, GPU, judge_environment
from tfgpu.kb.knowledge import load_kb
from tfgpu.kb.sonames import load_sonames

CU12 = {"cuda_runtime": ["libcudart.so.12"], "cublas": ["libcublas.so.12", "libcublasLt.so.12"],
        "cufft": ["libcufft.so.11"], "curand": ["libcurand.so.10"], "cusolver": ["libcusolver.so.11"],
        "cusparse": ["libcusparse.so.12"], "cudnn": ["libcudnn.so.8"]}
ALL_NVIDIA_RUNPATH = ":".join(f"$ORIGIN/../nvidia/{p}/lib" for p in CU12)
DRIVER_MACHINE: dict[str, Any] = {"platform": {"os": "linux"}, "driver": {"version": "550.54.15"},
                                  "gpus": [{"index": 0, "name": "RTX 3080", "compute_capability": "8.6",
                                            "memory_mib": 10240}]}


def make_env(root: Path, *, tf: str = "2.16.1", dist: str = "tensorflow", py: str = "3.11", runpath: str | None = None,
             rpath: str | None = None, build_info: str = "", requires: tuple[str, ...] = (),
             nvidia: dict[str, list[str]] | None = None, dists: dict[str, str] | None = None,
             cudnn_wheel: str | None = None) -> Path:
    sp = root / "lib" / f"python{py}" / "site-packages"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "python3").write_text("#!/bin/sh\n")
    (root / "pyvenv.cfg").write_text(f"home = /usr/bin\nversion = {py}.7\n")
    meta = sp / f"{dist.replace('-', '_')}-{tf}.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {tf}\n"
                                   + "".join(f"Requires-Dist: {r}\n" for r in requires) + "\n")
    for name, version in (dists or {}).items():
        d = sp / f"{name.replace('-', '_')}-{version}.dist-info"
        d.mkdir()
        (d / "METADATA").write_text(f"Name: {name}\nVersion: {version}\n\n")
    bi = sp / "tensorflow" / "python" / "platform" / "build_info.py"
    bi.parent.mkdir(parents=True)
    bi.write_text(build_info or ("build_info = collections.OrderedDict([('cuda_compute_capabilities', ['sm_50', "
                                 "'sm_60', 'sm_70', 'sm_80', 'compute_90']), ('cuda_version', '12.3'), "
                                 "('cudnn_version', '8'), ('is_cuda_build', True), ('is_rocm_build', False)])\n"))
    write_elf(sp / "tensorflow" / "libtensorflow_framework.so.2", ["libc.so.6"], runpath=runpath, rpath=rpath,
              soname="libtensorflow_framework.so.2")
    for pkg, libs in (nvidia or {}).items():
        for lib in libs:
            (sp / "nvidia" / pkg / "lib").mkdir(parents=True, exist_ok=True)
            (sp / "nvidia" / pkg / "lib" / lib).write_bytes(b"")
    if cudnn_wheel:
        (sp / f"nvidia_cudnn_cu12-{cudnn_wheel}.dist-info").mkdir()
    return root


def judge(root: Path, machine: dict[str, Any] | None = None, shell: dict[str, str] | None = None) -> dict[str, Any]:
    doc = probe_environment(str(root), how="--prefix", shell_env=shell or {}, explicit=True, ld_cache=b"")
    assert doc is not None
    machine = machine or DRIVER_MACHINE
    if (machine.get("driver") or {}).get("version"):  # a machine with a driver: its libcuda.so.1 is in the cache
        doc["ld_cache"].append(["libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.1"])
    return judge_environment(doc, machine, load_kb(), load_sonames())


def ids(v: dict[str, Any]) -> list[str]:
    return [f["id"] for f in v["blockers"]]


def test_tf_2_16_1_without_the_library_path_is_cpu_only_and_names_63362(tmp_path: Path) -> None:
    env = make_env(tmp_path / "e", runpath="$ORIGIN/:$ORIGIN/../nvidia/cuda_runtime/lib", nvidia=CU12,
                   cudnn_wheel="8.9.7.29")
    v = judge(env)
    assert v["verdict"] == CPU_ONLY
    assert ids(v) == ["libs.not_on_search_path"]
    assert v["blockers"][0]["repair"] == {"kind": "activation", "nvidia_libpath": True}
    by = {lib["name"]: lib for lib in v["libraries"]}
    assert by["libcudart.so.12"]["via"] == "RUNPATH"
    assert by["libcudnn.so.8"]["status"] == "missing"
    assert v["fix"] == f"tfgpu fix --python {env}/bin/python3"


def test_tfgpu_activation_puts_the_wheels_on_the_path(tmp_path: Path) -> None:
    env = make_env(tmp_path / "e", runpath="$ORIGIN/:$ORIGIN/../nvidia/cuda_runtime/lib", nvidia=CU12,
                   cudnn_wheel="8.9.7.29")
    (env / "bin" / "activate").write_text(
        'VIRTUAL_ENV=x\n# added by tfgpu\nfor _tfgpu_d in "$VIRTUAL_ENV"/lib/python3.11/site-packages/nvidia/*/lib; do\n'
        '  [ -d "$_tfgpu_d" ] && LD_LIBRARY_PATH="$_tfgpu_d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"\ndone\n')
    v = judge(env)
    assert v["verdict"] == GPU, v["blockers"]
    by = {lib["name"]: lib for lib in v["libraries"]}
    assert by["libcudnn.so.8"]["via"] == "LD_LIBRARY_PATH"
    assert by["libcudnn.so.8"]["version"] == "8.9.7.29"


def test_an_older_cudnn_than_the_build_is_refused(tmp_path: Path) -> None:
    env = make_env(tmp_path / "e", runpath=ALL_NVIDIA_RUNPATH, nvidia=CU12, cudnn_wheel="8.6.0.163",
                   requires=("nvidia-cudnn-cu12 ==8.9.7.29 ; extra == 'and-cuda'",))
    v = judge(env)
    assert ids(v) == ["libs.cudnn_too_old"]
    assert v["verdict"] == CPU_ONLY
    assert v["blockers"][0]["repair"]["requirements"] == ["nvidia-cudnn-cu12==8.9.7.29"]


def test_the_seed_tf_1_14_beside_cuda_10_1(tmp_path: Path) -> None:
    cuda101 = tmp_path / "usr-local-cuda-10.1" / "lib64"
    cuda101.mkdir(parents=True)
    for lib in ("libcudart.so.10.1", "libcublas.so.10", "libcudnn.so.7"):
        (cuda101 / lib).write_bytes(b"")
    env = make_env(tmp_path / "e", tf="1.14.0", dist="tensorflow-gpu", py="3.7", rpath="$ORIGIN/",
                   build_info="is_cuda_build = True\ncuda_version_number = '10.0'\ncudnn_version_number = '7'\n",
                   dists={"numpy": "1.16.4", "protobuf": "3.8.0"})
    v = judge(env, shell={"LD_LIBRARY_PATH": str(cuda101)})
    assert v["verdict"] == CPU_ONLY
    missing = next(f for f in v["blockers"] if f["id"] == "libs.missing")
    assert "libcudart.so.10.0" in missing["summary"]
    assert "(CUDA 10.0)" in missing["summary"]
    assert f"{cuda101}/libcudart.so.10.1" in missing["summary"]  # what was found instead
    by = {lib["name"]: lib for lib in v["libraries"]}
    assert by["libcudnn.so.7"]["via"] == "LD_LIBRARY_PATH"  # the blog's log: libcudnn.so.7 opened


def test_numpy_2_with_tf_2_15_is_broken(tmp_path: Path) -> None:
    env = make_env(tmp_path / "e", tf="2.15.1", runpath=ALL_NVIDIA_RUNPATH, nvidia=CU12, cudnn_wheel="8.9.7.29",
                   requires=("numpy <2.0.0,>=1.23.5",), dists={"numpy": "2.1.0"})
    v = judge(env)
    assert v["verdict"] == BROKEN
    assert ids(v) == ["python.numpy"]
    assert v["blockers"][0]["repair"]["requirements"] == ["numpy<2.0.0,>=1.23.5"]


def test_tensorflow_beside_tensorflow_cpu(tmp_path: Path) -> None:
    env = make_env(tmp_path / "e", runpath=ALL_NVIDIA_RUNPATH, nvidia=CU12, cudnn_wheel="8.9.7.29",
                   dists={"tensorflow-cpu": "2.16.1"})
    v = judge(env)
    assert ids(v) == ["python.tf_conflict"]
    assert v["blockers"][0]["repair"] == {"kind": "replace", "remove": ["tensorflow-cpu"],
                                          "reinstall": "tensorflow==2.16.1"}


def test_legacy_keras_without_tf_keras(tmp_path: Path) -> None:
    env = make_env(tmp_path / "e", runpath=ALL_NVIDIA_RUNPATH, nvidia=CU12, cudnn_wheel="8.9.7.29")
    v = judge(env, shell={"TF_USE_LEGACY_KERAS": "1"})
    assert ids(v) == ["python.tf_keras"]
    assert v["blockers"][0]["repair"]["requirements"] == ["tf-keras~=2.16.0"]


def test_no_driver_and_a_small_gpu(tmp_path: Path) -> None:
    env = make_env(tmp_path / "e", runpath=ALL_NVIDIA_RUNPATH, nvidia=CU12, cudnn_wheel="8.9.7.29")
    small = {**DRIVER_MACHINE, "gpus": [{"index": 0, "name": "MX150", "compute_capability": "6.1", "memory_mib": 2048}]}
    v = judge(env, small)
    assert v["verdict"] == GPU
    assert [c["id"] for c in v["caveats"]] == ["gpu.memory_growth"]
    v = judge(env, {"platform": {"os": "linux"}, "gpus": []})
    assert ids(v) == ["driver.libcuda"]
    assert v["blockers"][0]["repair"]["kind"] == "none"


def test_an_old_driver_and_a_gpu_the_build_has_no_code_for(tmp_path: Path) -> None:
    env = make_env(tmp_path / "e", runpath=ALL_NVIDIA_RUNPATH + ":/drv", nvidia=CU12, cudnn_wheel="8.9.7.29")
    (tmp_path / "drv").mkdir()
    (tmp_path / "drv" / "libcuda.so.1").write_bytes(b"")
    machine = {"platform": {"os": "linux"}, "driver": {"version": "470.82.01"},
               "gpus": [{"index": 0, "name": "Tesla K80", "compute_capability": "3.7", "memory_mib": 11441}]}
    doc = probe_environment(str(env), how="x", shell_env={"LD_LIBRARY_PATH": str(tmp_path / "drv")}, explicit=True,
                            ld_cache=b"")
    assert doc is not None
    v = judge_environment(doc, machine, load_kb(), load_sonames())
    assert ids(v) == ["driver.too_old", "gpu.arch"]


def test_no_tensorflow_means_no_section_unless_named(tmp_path: Path) -> None:
    (tmp_path / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    assert probe_environment(str(tmp_path), how="x", shell_env={}, ld_cache=b"") is None
    named = probe_environment(str(tmp_path), how="x", shell_env={}, explicit=True, ld_cache=b"")
    assert named is not None
    assert judge_environment(named, DRIVER_MACHINE, load_kb(), load_sonames())["verdict"] == "no-tensorflow"


@pytest.mark.parametrize(("text", "expected"), [
    ("build_info = collections.OrderedDict([('cuda_version', '12.5.1'), ('is_cuda_build', True), "
     "('cuda_compute_capabilities', ['sm_60', 'compute_90'])])",
     {"cuda_version": "12.5.1", "is_cuda_build": True, "cuda_compute_capabilities": ["sm_60", "compute_90"]}),
    ("is_cuda_build = True\ncuda_version_number = '10.0'\ncudnn_version_number = '7'\n",
     {"is_cuda_build": True, "cuda_version_number": "10.0", "cudnn_version_number": "7"}),
    ("import os\nos.system('rm -rf /')\n", {}),
    # tensorflow_gpu-2.3.0-cp36-cp36m-win_amd64.whl's build_info.py (read from the wheel), abridged
    ("build_info = {'cuda_version': '64_101', 'cudnn_version': '64_7', 'cuda_compute_capabilities': ['sm_35', "
     "'compute_70'], 'is_rocm_build': False, 'is_cuda_build': True, 'cudart_dll_name': 'cudart64_101.dll'}",
     {"cuda_version": "64_101", "cudnn_version": "64_7", "cuda_compute_capabilities": ["sm_35", "compute_70"],
      "is_rocm_build": False, "is_cuda_build": True, "cudart_dll_name": "cudart64_101.dll"}),
])
def test_build_info_is_read_as_text_never_run(text: str, expected: dict[str, Any]) -> None:
    assert parse_build_info(text) == expected


# TensorFlow 2.21.0's libtensorflow_framework.so.2 RUNPATH names every nvidia/*/lib but cusolver's, which sits on
# libtensorflow_cc.so.2's; the loader (the framework's) does not read the latter (tests/data/envs/tf221-dsoloader.txt).
TF221_FRAMEWORK_RUNPATH = ":".join(f"$ORIGIN/../../nvidia/{p}/lib:$ORIGIN/../nvidia/{p}/lib"
                                   for p in ("nccl", "cuda_cupti", "cublas", "cudnn", "cufft", "cusparse", "cuda_runtime"))
TF221_CC_RUNPATH = "$ORIGIN/:$ORIGIN/../../nvidia/cusolver/lib:$ORIGIN/../nvidia/cusolver/lib"
TF221_BUILD_INFO = ("build_info = collections.OrderedDict([('cuda_compute_capabilities', ['sm_60', 'sm_70', 'sm_80', "
                    "'sm_89', 'compute_90']), ('cuda_version', '12.5.1'), ('cudnn_version', '9'), ('is_cuda_build', "
                    "True), ('is_rocm_build', False)])\n")
AND_CUDA_221 = ("nvidia-cublas-cu12<13.0,>=12.5.3.2; extra == 'and-cuda'",
                "nvidia-cusolver-cu12<12.0,>=11.6.3.83; extra == 'and-cuda'",
                "nvidia-cudnn-cu12<10.0,>=9.3.0.75; extra == 'and-cuda'")
CU12_9 = {**CU12, "cudnn": ["libcudnn.so.9"]}


def make_221(root: Path, *, wheels: bool) -> Path:
    env = make_env(root, tf="2.21.0", py="3.12", runpath=TF221_FRAMEWORK_RUNPATH, build_info=TF221_BUILD_INFO,
                   requires=AND_CUDA_221, nvidia=CU12_9 if wheels else None, cudnn_wheel="9.10.2.21" if wheels else None)
    write_elf(root / "lib" / "python3.12" / "site-packages" / "tensorflow" / "libtensorflow_cc.so.2",
              ["libtensorflow_framework.so.2"], runpath=TF221_CC_RUNPATH, soname="libtensorflow_cc.so.2")
    return env


def test_tf_2_21_with_its_wheels_misses_cusolver_the_framework_does_not_search(tmp_path: Path) -> None:
    v = judge(make_221(tmp_path / "e", wheels=True))
    by = {lib["name"]: lib for lib in v["libraries"]}
    assert "libcurand.so.10" not in by  # 2.14+ open no cuRAND (no GetCurandDsoHandle in the framework)
    assert by["libcusolver.so.11"]["status"] == "missing"
    assert by["libcusolver.so.11"]["runpath_of"] == "libtensorflow_cc.so.2"
    assert by["libcublas.so.12"]["via"] == "RUNPATH"
    assert v["verdict"] == CPU_ONLY
    assert ids(v) == ["libs.not_on_search_path"]
    assert "libtensorflow_cc.so.2's RUNPATH" in v["blockers"][0]["summary"]
    assert v["blockers"][0]["repair"] == {"kind": "activation", "nvidia_libpath": True}


def test_tf_2_21_with_the_activation_tfgpu_writes_uses_the_gpu(tmp_path: Path) -> None:
    env = make_221(tmp_path / "e", wheels=True)
    (env / "bin" / "activate").write_text(
        'VIRTUAL_ENV=x\nfor _tfgpu_d in "$VIRTUAL_ENV"/lib/python3.12/site-packages/nvidia/*/lib; do\n'
        '  [ -d "$_tfgpu_d" ] && LD_LIBRARY_PATH="$_tfgpu_d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"\ndone\n')
    v = judge(env)
    assert v["verdict"] == GPU, v["blockers"]
    assert {lib["name"]: lib["via"] for lib in v["libraries"]}["libcusolver.so.11"] == "LD_LIBRARY_PATH"


def test_tf_2_21_without_its_wheels_installs_them_and_the_library_path(tmp_path: Path) -> None:
    from tfgpu.plan.envfix import plan_fix

    env = make_221(tmp_path / "e", wheels=False)
    v = judge(env)
    assert ids(v) == ["libs.missing"]
    repair = v["blockers"][0]["repair"]
    assert repair["kind"] == "pip"
    assert repair["nvidia_libpath"] is True
    assert repair["off_runpath"] == ["cusolver"]
    doc = probe_environment(str(env), how="--prefix", shell_env={}, explicit=True, ld_cache=b"")
    assert doc is not None
    plan = plan_fix(v, doc, uv="/usr/bin/uv")
    assert [s.kind for s in plan.steps] == ["run", "append-file"]
    assert "nvidia-cusolver-cu12<12.0,>=11.6.3.83" in plan.steps[0].argv


def test_a_release_whose_framework_runpath_holds_every_wheel_needs_no_library_path(tmp_path: Path) -> None:
    env = make_env(tmp_path / "e", tf="2.18.1", py="3.12", runpath=ALL_NVIDIA_RUNPATH, build_info=TF221_BUILD_INFO,
                   requires=AND_CUDA_221)
    v = judge(env)
    assert ids(v) == ["libs.missing"]
    assert "nvidia_libpath" not in v["blockers"][0]["repair"]


@pytest.mark.parametrize(("tf", "curand"), [("1.14.0", True), ("2.2.0", True), ("2.13.1", True), ("2.14.0", False),
                                            ("2.16.1", False), ("2.21.0", False)])
def test_curand_is_opened_up_to_2_13_only(tf: str, curand: bool) -> None:
    from packaging.version import Version

    names = load_sonames().names_for(Version(tf), "12.3" if Version(tf) >= Version("2.14") else "11.2", "8")
    assert ("curand" in names) is curand
    assert names["cusolver"] == "libcusolver.so.11"
    assert load_sonames().wheel_dirs["cusolver"] == "cusolver"
