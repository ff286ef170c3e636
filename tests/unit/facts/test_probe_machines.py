"""Machine profiles: tmp_path trees + scripts on PATH that print recorded real outputs."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.probe_helpers import (
    PROBE,
    PROBE2,
    R740_CUDA,
    FakeGpu,
    FakeNvmlLib,
    Profile,
    fake_nvml,
    r740_profile,
)
from tfgpu.facts.document import validate_facts
from tfgpu.facts.probe import detect_facts
from tfgpu.facts.probe._ctx import Ctx
from tfgpu.facts.probe.driver import find_nvidia_smi, parse_visible_devices

SMI = PROBE / "nvidia-smi"
pytestmark = pytest.mark.real_subprocess


def _smi(p: Profile, csv: Path | None, table: Path | None, *, csv_rc: int = 0) -> None:
    p.program("nvidia-smi", {"--query-gpu=*": (csv, csv_rc), "-q -x": (None, 9)}, default=(table, 0))


def test_r740_four_tesla_m60_cuda101_tf114(tmp_path: Path) -> None:
    """Seed 001 (tests/data/probe/machines/r740-4x-tesla-m60-tf114.toml): real lspci lines from the seed;
    nvcc 10.1.243 and the cuDNN 7 header are the stand-ins that machine file names; LD_LIBRARY_PATH is
    the seed's; the driver file is the 384.98 stand-in (the seed only has a screenshot)."""
    p = r740_profile(tmp_path)
    cuda = R740_CUDA
    p.file("/proc/driver/nvidia/version", fixture=PROBE / "proc" / "driver-version-384.98-ubuntu.txt")
    p.dist("/home/dell2/anaconda3/envs/tf/lib/python3.6/site-packages", "tensorflow-gpu", "1.14.0")
    p.file("/home/dell2/anaconda3/envs/tf/conda-meta/python-3.6.10-h0371630_0.json", "{}")
    p.env["CONDA_PREFIX"] = "/home/dell2/anaconda3/envs/tf"
    facts = detect_facts(root=tmp_path, env=p.env, timeout=2.0)
    assert validate_facts(json.loads(json.dumps(facts))) == []
    assert facts["platform"]["os"] == "linux"
    assert facts["platform"]["distro"] == "ubuntu 22.04"
    assert facts["driver"]["version"] == "384.98"
    assert facts["driver"]["source"] == "kernel_module"
    assert [g["name"] for g in facts["gpus"]] == ["Tesla M60"] * 4
    assert len(facts["lspci_nvidia"]) == 4
    (tk,) = facts["cuda_toolkits"]
    assert (tk["version"], tk["path"], tk["source"]) == ("10.1", cuda, "nvcc --version")
    assert tk["libcudart"] == ["libcudart.so.10.1"]
    assert {"kind": "cudart", "name": "libcudart.so.10.1", "version": "10.1", "path": f"{cuda}/lib64/libcudart.so.10.1",
            "source": "LD_LIBRARY_PATH"} in facts["libraries"]["libcudart"]
    assert [(c["version"], c["source"]) for c in facts["cudnn"]] == [("7.2.1", "cudnn.h")]
    assert facts["tensorflow"][0]["distribution"] == "tensorflow-gpu"
    assert facts["tensorflow"][0]["version"] == "1.14.0"
    # (the profile tree has no python3.6 file, only its conda-meta record: no header says its word size)
    assert {"version": "3.6.10", "path": "/home/dell2/anaconda3/envs/tf/bin/python3.6", "source": "conda",
            "bits": None} in \
        facts["python"]["interpreters"]


def test_mx150_laptop_conda_env(tmp_path: Path) -> None:
    """Seed 000 (machines/mx150-laptop-ubuntu1804-tf22-conda.toml): GeForce MX150 2 GB (NVML faked with the
    seed's GPU; CC 6.1 per NVIDIA's list), conda env with cudatoolkit 10.1 + cudnn 7.6.5 + tensorflow-gpu 2.2.0,
    a system cuDNN on LD_LIBRARY_PATH that shadows the env's copy."""
    p = Profile(tmp_path)
    env_prefix = "/home/u/anaconda3/envs/tf-gpu"
    p.file(f"{env_prefix}/conda-meta/cudnn-7.6.5-cuda10.1_0.json", "{}")
    p.file(f"{env_prefix}/conda-meta/cudatoolkit-10.1.243-h6bb024c_0.json", "{}")
    p.file(f"{env_prefix}/conda-meta/python-3.8.5-h7579374_1.json", "{}")
    p.file(f"{env_prefix}/lib/libcudart.so.10.1")
    p.file(f"{env_prefix}/lib/libcudnn.so.7")
    p.file("/usr/local/cuda-10.0/lib64/libcudnn.so.7")
    p.dist(f"{env_prefix}/lib/python3.8/site-packages", "tensorflow-gpu", "2.2.0")
    p.file("/home/u/anaconda3/conda-meta/conda-4.8.3-py37_0.json", "{}")
    p.program("conda", where=tmp_path / "home/u/anaconda3/bin")
    p.env.update({"CONDA_PREFIX": env_prefix, "CONDA_EXE": "/home/u/anaconda3/bin/conda", "HOME": "/home/u",
                  "LD_LIBRARY_PATH": "/usr/local/cuda-10.0/lib64", "TFGPU_PROBE_NVML": "1"})
    with fake_nvml(FakeNvmlLib(driver="450.57", cuda=11000, gpus=[FakeGpu("GeForce MX150", "GPU-mx", 2048, (6, 1))])):
        facts = detect_facts(root=tmp_path, env=p.env, timeout=2.0)
    assert facts["gpus"][0]["name"] == "GeForce MX150"
    assert facts["gpus"][0]["memory_mib"] == 2048
    assert facts["conda"]["kind"] == "conda"
    assert facts["conda"]["version"] == "4.8.3"
    assert env_prefix in facts["conda"]["envs"]
    assert facts["tensorflow"] == [{"distribution": "tensorflow-gpu", "version": "2.2.0",
                                    "path": f"{env_prefix}/lib/python3.8/site-packages/tensorflow_gpu-2.2.0.dist-info"}]
    conda_cudnn = next(c for c in facts["cudnn"] if c["source"] == "conda package")
    assert conda_cudnn["version"] == "7.6.5"
    assert conda_cudnn["shadowing"]["by"] == "/usr/local/cuda-10.0/lib64/libcudnn.so.7"
    assert any("shadows" in n for n in facts["notes"])
    assert validate_facts(json.loads(json.dumps(facts))) == []


@pytest.mark.parametrize(
    ("csv", "csv_rc", "table", "expect"),
    [
        (SMI / "fail-couldnt-communicate.txt", 9, None, "no NVIDIA GPU found"),
        (SMI / "fail-driver-library-mismatch-nvml-550.144.txt", 18, None, "Driver/library version mismatch"),
    ],
)
def test_nvidia_smi_failures(tmp_path: Path, csv: Path, csv_rc: int, table: Path | None, expect: str) -> None:
    p = Profile(tmp_path)
    _smi(p, csv, table, csv_rc=csv_rc)
    p.program("lspci", default=(PROBE / "lspci" / "lspci-nn-no-nvidia-helper-vm.txt", 0))
    facts = detect_facts(root=tmp_path, env=p.env, timeout=2.0)
    assert expect in facts["driver"]["error"]
    if "mismatch" in expect:
        assert facts["driver"]["mismatch"]
        assert facts["driver"]["user_library"] == "550.144"


def test_gpu_present_but_no_driver(tmp_path: Path) -> None:
    p = Profile(tmp_path)
    _smi(p, SMI / "fail-couldnt-communicate.txt", None, csv_rc=9)
    p.program("lspci", default=(PROBE / "lspci" / "lspci-nn-qemu-vm-1x-a10.txt", 0))
    facts = detect_facts(root=tmp_path, env=p.env, timeout=2.0)
    assert facts["driver"]["error"] == ("an NVIDIA GPU is present (1x NVIDIA Corporation GA102GL [A10]) "
                                        "but no NVIDIA driver is loaded")
    assert facts["gpus"] == []
    assert facts["lspci_nvidia"][0]["device_id"] == "2236"


def test_old_driver_without_compute_cap_falls_back(tmp_path: Path) -> None:
    p = Profile(tmp_path)
    p.program("nvidia-smi", {"--query-gpu=*compute_cap*": (SMI / "fail-compute-cap-not-valid-field.txt", 6),
                             "--query-gpu=*": (None, 0)},
              default=(SMI / "table-1gpu-titanxp-450.57-no-processes.txt", 0))
    facts = detect_facts(root=tmp_path, env=p.env, timeout=2.0)
    assert facts["driver"]["version"] == "450.57"
    assert facts["driver"]["cuda"] == "11.0"
    assert facts["gpus"][0]["name"] == "TITAN Xp"
    assert facts["gpus"][0]["source"] == "nvidia-smi table"


def test_several_gpus_from_csv_and_wsl2_note(tmp_path: Path) -> None:
    p = Profile(tmp_path)
    p.file("/proc/version", fixture=PROBE / "proc" / "version-wsl2-5.4.72-microsoft-standard-WSL2.txt")
    p.file("/usr/lib/wsl/lib/libcuda.so.1")
    _smi(p, SMI / "csv-2gpu-titanv-rtx5880ada-570.86.15.csv", SMI / "table-1gpu-wsl2-545.46-driver-546.80-cuda-ERR-TRUNCATED.txt")
    facts = detect_facts(root=tmp_path, env=p.env, timeout=2.0)
    assert facts["platform"]["wsl"] == 2
    # the header row of the recorded csv is not a data row under our noheader field list: the table is used
    assert facts["driver"]["version"] == "546.80"
    assert facts["driver"]["cuda"] is None
    assert any("never install a Linux NVIDIA driver" in n for n in facts["notes"])
    assert facts["driver"]["mismatch"] is False


def test_wsl2_without_passthrough(tmp_path: Path) -> None:
    p = Profile(tmp_path)
    p.file("/proc/version", fixture=PROBE / "proc" / "version-wsl2-4.19.128-microsoft-standard.txt")
    facts = detect_facts(root=tmp_path, env=p.env, timeout=2.0)
    assert "install or update the NVIDIA driver on Windows" in facts["driver"]["error"]


def test_hung_nvidia_smi_is_bounded(tmp_path: Path) -> None:
    p = Profile(tmp_path)
    p.program("nvidia-smi", script="#!/bin/sh\nexec /bin/sleep 30\n")
    t0 = time.monotonic()
    facts = detect_facts(root=tmp_path, env=p.env, timeout=0.5)
    assert time.monotonic() - t0 < 1.5
    assert facts["driver"]["sources"]["nvidia_smi"]["error"] == "nvidia-smi: timed out after 0.5 s"


def test_env_timeout_override_and_garbage_outputs(tmp_path: Path) -> None:
    p = Profile(tmp_path)
    p.program("nvidia-smi", script="#!/bin/sh\nprintf '\\377\\376 garbage \\000\\n'\n")
    p.program("lspci", script="#!/bin/sh\nexit 0\n")
    p.program("ldconfig", script="#!/bin/sh\nprintf '\\377\\376\\n'\n")
    p.file("/proc/cpuinfo", b"\xff\xfe not cpuinfo")
    p.file("/etc/os-release", b"\xff=\xfe")
    p.env["TFGPU_PROBE_TIMEOUT"] = "1.5"
    facts = detect_facts(root=tmp_path, env=p.env, timeout=9.0)
    assert facts["probe"]["timeout"] == 1.5
    assert facts["driver"]["sources"]["nvidia_smi"]["error"] == "nvidia-smi: output not understood"
    assert facts["cpu"]["avx"] is None
    assert facts["errors"] == {}


def test_macos_profile(tmp_path: Path) -> None:
    (tmp_path / "System/Library/CoreServices").mkdir(parents=True)
    facts = detect_facts(root=tmp_path, env={"PATH": ""}, timeout=1.0)
    assert facts["platform"]["os"] == "macos"
    assert facts["driver"]["error"].startswith("macOS has no CUDA GPU support")


def test_windows_nvidia_smi_locations(tmp_path: Path) -> None:
    ctx = Ctx(root=tmp_path, env={"PATH": "", "SystemRoot": r"C:\Windows", "ProgramFiles": r"C:\Program Files"},
              timeout=1.0)
    assert find_nvidia_smi(ctx, "windows") is None
    exe = tmp_path / "C" / "Program Files" / "NVIDIA Corporation" / "NVSMI" / "nvidia-smi.exe"
    exe.parent.mkdir(parents=True)
    exe.write_text("")
    assert find_nvidia_smi(ctx, "windows") == str(exe)


@pytest.mark.parametrize(
    ("value", "visible", "hides_all"),
    [(None, [0, 1], False), ("", [], True), ("1", [1], False), ("1,0", [1, 0], False), ("0,7,1", [0], False),
     ("GPU-b", [1], False), ("-1", [], True)],
)
def test_cuda_visible_devices(value: str | None, visible: list[int], hides_all: bool) -> None:
    gpus = [{"index": 0, "uuid": "GPU-aaaa"}, {"index": 1, "uuid": "GPU-bbbb"}]
    out = parse_visible_devices(value, gpus)
    assert (out["visible"], out["hides_all"]) == (visible, hides_all)


def test_this_machine_cuda_13_toolkit_and_no_driver() -> None:
    """The dev machine: CUDA 13.0 from pip wheels under /usr/local/cuda-13.0, /usr/local/bin/nvcc is a
    wrapper script (tests/data/probe2/nvcc-wrapper-script-this-machine.sh), no driver, no GPU."""
    if not Path("/usr/local/cuda-13.0/dist-info").is_dir():
        pytest.skip("not the tfgpu development machine")
    import os

    t0 = time.monotonic()
    facts = detect_facts()
    elapsed = time.monotonic() - t0
    tk = next(t for t in facts["cuda_toolkits"] if t["path"] == "/usr/local/cuda-13.0")
    assert tk["version"] == "13.0"
    assert tk["full_version"] == "13.0.96"
    if "/usr/local/bin" in os.environ.get("PATH", "").split(":"):
        assert "nvcc on PATH" in tk["found_via"]
        assert tk["nvcc_version"] == "13.0"
    assert "libcudart.so.13" in tk["libcudart"]
    assert facts["driver"]["version"] is None
    assert facts["driver"]["error"]
    assert facts["gpus"] == []
    assert validate_facts(json.loads(json.dumps(facts))) == []
    assert elapsed < 1.0, facts["timings"]


def test_this_machine_probe2_wrapper_fixture_is_followed(tmp_path: Path) -> None:
    """A profile with this machine's recorded nvcc wrapper script on PATH: the toolkit it execs is found."""
    p = Profile(tmp_path)
    cuda = tmp_path / "usr/local/cuda-13.0"
    p.program("nvcc", default=(PROBE2 / "nvcc-version-13.0.88-pip-wheels-this-machine.txt", 0), where=cuda / "bin")
    p.file("/usr/local/cuda-13.0/dist-info/nvidia_cuda_runtime-13.0.96.dist-info/METADATA", "Name: nvidia-cuda-runtime\n")
    wrapper = (PROBE2 / "nvcc-wrapper-script-this-machine.sh").read_text().replace("/usr/local/cuda-13.0", str(cuda))
    p.program("nvcc", script=wrapper, where=tmp_path / "usr/local/bin")
    p.env["PATH"] = f"{p.bin}:{tmp_path}/usr/local/bin"
    facts = detect_facts(root=tmp_path, env=p.env, timeout=2.0)
    (tk,) = facts["cuda_toolkits"]
    assert (tk["path"], tk["version"], tk["source"]) == ("/usr/local/cuda-13.0", "13.0", "dist-info")
    assert tk["nvcc_on_path"] == "/usr/local/bin/nvcc"
    assert tk["nvcc_version"] == "13.0"


def test_nvml_is_not_imported_where_no_nvidia_driver_can_be(tmp_path: Path) -> None:
    """No kernel module, device node or WSL driver: NVML is skipped (pynvml + ctypes cost ~70 ms) and
    the report says why; the other sources still tell "no driver"."""
    p = Profile(tmp_path)
    p.env.pop("TFGPU_PROBE_NVML")
    env = {**p.env}
    import tfgpu.facts.probe._ctx as ctx_mod

    real_native = ctx_mod.Ctx.native
    try:
        ctx_mod.Ctx.native = property(lambda self: True)  # type: ignore[assignment,method-assign]
        facts = detect_facts(root=tmp_path, env=env, timeout=2.0)
    finally:
        ctx_mod.Ctx.native = real_native  # type: ignore[method-assign]
    assert "no NVIDIA kernel module" in facts["driver"]["sources"]["nvml"]["error"]
    assert facts["driver"]["version"] is None


def test_nvidia_smi_runs_only_when_nvml_left_something_out(tmp_path: Path) -> None:
    """nvidia-smi initialises NVML itself (slow on real GPU machines): it is the fallback, run only when
    NVML did not give the driver and every GPU's compute capability and memory."""
    p = Profile(tmp_path)
    marker = tmp_path / "smi-ran"
    p.program("nvidia-smi", script=f"#!/bin/sh\n: > {marker}\nexit 9\n")
    p.env["TFGPU_PROBE_NVML"] = "1"
    with fake_nvml(FakeNvmlLib(driver="550.54.15", cuda=12040, gpus=[FakeGpu("NVIDIA A100-SXM4-80GB", "GPU-a",
                                                                          81920, (8, 0))])):
        facts = detect_facts(root=tmp_path, env=p.env, timeout=2.0)
    assert facts["driver"]["version"] == "550.54.15"
    assert not marker.exists()
    assert "NVML answered" in facts["driver"]["sources"]["nvidia_smi"]["skipped"]
    with fake_nvml(None, load_error=True):
        facts = detect_facts(root=tmp_path, env=p.env, timeout=2.0)
    assert marker.exists()
    assert facts["driver"]["sources"]["nvidia_smi"]["ok"] is False


def test_jetson_nano_is_read_as_a_jetson_with_its_l4t_release(tmp_path: Path) -> None:
    """A Jetson Nano (L4T R32.7.6, recorded /etc/nv_tegra_release): no /proc/driver/nvidia (the integrated
    GPU has no discrete driver), no `uname` on the profile's PATH, so the architecture comes from the
    Jetson file. The doctor must say: no official GPU build, NVIDIA's JetPack wheels instead."""
    from tfgpu.judge.diagnose import diagnose
    from tfgpu.kb.knowledge import load_kb

    p = Profile(tmp_path)
    p.file("/etc/os-release", fixture=PROBE / "os" / "os-release-ubuntu-22.04.5.txt")
    p.file("/etc/nv_tegra_release", fixture=PROBE / "os" / "nv_tegra_release-r32.7.6-jetson-nano.txt")
    facts = detect_facts(root=tmp_path, env=p.env, timeout=2.0)
    assert validate_facts(json.loads(json.dumps(facts))) == []
    assert facts["platform"]["jetson"] == {"l4t": "32.7.6", "board": "t210ref"}
    assert facts["platform"]["arch"] == "aarch64"
    result = diagnose(facts, load_kb())
    check = next(c for c in result.checks if c.id == "cpu.arch")
    assert check.status == "fail"
    assert "L4T 32.7.6" in check.fix
    assert "developer.download.nvidia.com/compute/redist/jp" in check.fix
    assert result.recommendation is not None
    assert result.recommendation.backend == "cpu"
