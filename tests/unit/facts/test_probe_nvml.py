"""NVML through the real pynvml bindings, faked at its ctypes library (pynvml.nvmlLib)."""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
import time
from typing import Any

import pynvml
import pytest

from tests.conftest import DATA
from tests.probe_helpers import FakeGpu, FakeNvmlLib, fake_nvml
from tfgpu.facts.probe import detect_facts
from tfgpu.facts.probe.driver import resolve_driver
from tfgpu.facts.probe.nvml import probe_nvml, query_nvml


def test_library_not_found() -> None:
    with fake_nvml(None, load_error=True):
        out = query_nvml()
    assert (out["ok"], out["error_kind"]) == (False, "library_not_found")
    assert out["error"] == "NVML: NVML Shared Library Not Found"  # pynvml's own text for code 12


@pytest.mark.parametrize(
    ("code", "kind", "text"),
    [
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "driver_not_loaded", "Driver Not Loaded"),
        (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "mismatch", "RM has detected an NVML/RM version mismatch."),
    ],
)
def test_init_errors(code: int, kind: str, text: str) -> None:
    lib = FakeNvmlLib(init_rc=code)
    with fake_nvml(lib):
        out = query_nvml()
    assert (out["ok"], out["error_kind"], out["error"]) == (False, kind, f"NVML: {text}")
    assert lib.calls == ["nvmlInitWithFlags"]


def test_one_gpu() -> None:
    # 0x2684: AD102 [GeForce RTX 4090] in pci.ids (tests/data/pciids/SOURCES.md)
    lib = FakeNvmlLib(driver="550.54.15", cuda=12040, gpus=[FakeGpu("NVIDIA GeForce RTX 4090", "GPU-1", 24564, (8, 9),
                                                                    0x268410DE, "00000000:01:00.0")])
    with fake_nvml(lib):
        out = query_nvml()
    assert out["ok"]
    assert (out["driver_version"], out["cuda"], out["nvml_version"]) == ("550.54.15", "12.4", "12.550.54.15")
    assert out["gpus"] == [{"index": 0, "name": "NVIDIA GeForce RTX 4090", "uuid": "GPU-1",
                            "compute_capability": "8.9", "memory_mib": 24564, "pci_device_id": "2684",
                            "pci_bus_id": "00000000:01:00.0"}]
    assert "nvmlShutdown" in lib.calls


def test_gpu_without_pci_info_records_why() -> None:
    with fake_nvml(FakeNvmlLib(gpus=[FakeGpu("Tesla M60", "GPU-m60", 8129, (5, 2))])):
        out = query_nvml()
    (gpu,) = out["gpus"]
    assert "pci_device_id" not in gpu
    assert gpu["errors"]["pci"] == "Not Supported"
    assert gpu["compute_capability"] == "5.2"


def test_four_tesla_m60() -> None:
    # seed 001: "StreamExecutor device (0): Tesla M60, Compute Capability 5.2", four of them
    gpus = [FakeGpu("Tesla M60", f"GPU-m60-{i}", 8129, (5, 2)) for i in range(4)]
    with fake_nvml(FakeNvmlLib(driver="418.87.00", cuda=10010, gpus=gpus)):
        out = query_nvml()
    assert [g["index"] for g in out["gpus"]] == [0, 1, 2, 3]
    assert {g["compute_capability"] for g in out["gpus"]} == {"5.2"}
    assert out["cuda"] == "10.1"


def test_hung_nvml_is_bounded() -> None:
    release = threading.Event()
    lib = FakeNvmlLib()

    class Hanging(FakeNvmlLib):
        def __getattr__(self, name: str) -> Any:
            if name == "nvmlInitWithFlags":
                return lambda flags: release.wait(10) and 0
            return FakeNvmlLib.__getattr__(lib, name)

    with fake_nvml(Hanging()):
        t0 = time.monotonic()
        out = probe_nvml(0.3)
        elapsed = time.monotonic() - t0
        release.set()
        time.sleep(0.05)
    assert elapsed < 1.0
    assert out["error"] == "NVML: timed out after 0.3 s"


def test_mismatch_from_nvml_is_reported_with_kernel_and_library_versions() -> None:
    with fake_nvml(FakeNvmlLib(init_rc=pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH)):
        nvml = query_nvml()
    kernel = {"sys_module": "550.120", "proc": "550.120", "user_library": "550.144",
              "user_library_path": "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.144"}
    drv, gpus, _ = resolve_driver(nvml, kernel, None, None, os_name="linux", wsl=None)
    assert drv["mismatch"] is True
    assert (drv["kernel_module"], drv["user_library"], drv["version"]) == ("550.120", "550.144", "550.120")
    assert "reboot" in drv["error"]
    assert gpus == []


def test_detect_facts_with_fake_nvml_profile(tmp_path: Any) -> None:
    gpus = [FakeGpu("NVIDIA A10", "GPU-a", 23028, (8, 6)), FakeGpu("NVIDIA A10", "GPU-b", 23028, (8, 6))]
    env = {"PATH": str(tmp_path / "nobin"), "TFGPU_PROBE_NVML": "1", "CUDA_VISIBLE_DEVICES": "1"}
    with fake_nvml(FakeNvmlLib(driver="535.104.05", cuda=12020, gpus=gpus)):
        facts = detect_facts(root=tmp_path, env=env, timeout=1.0)
    assert facts["driver"]["version"] == "535.104.05"
    assert facts["driver"]["source"] == "nvml"
    assert facts["provenance"]["driver.version"] == "nvml"
    assert [(g["index"], g["visible"]) for g in facts["gpus"]] == [(0, False), (1, True)]
    assert facts["cuda_visible_devices"]["visible"] == [1]


def fork_only(test: Any) -> Any:
    """Linux only; the test process may hold threads of earlier tests (Python >= 3.12 warns on fork)."""
    test = pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")(test)
    return pytest.mark.skipif(not hasattr(os, "fork") or not sys.platform.startswith("linux"),
                              reason="NVML is isolated in a forked process on Linux only")(test)


def _without_timings(facts: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in facts.items() if k != "timings"}


@fork_only
def test_isolated_nvml_gives_the_same_facts(tmp_path: Any) -> None:
    gpus = [FakeGpu("NVIDIA A10", "GPU-a", 23028, (8, 6)), FakeGpu("NVIDIA H100 80GB HBM3", "GPU-b", 81559, (9, 0))]
    env = {"PATH": str(tmp_path / "nobin"), "TFGPU_PROBE_NVML": "1"}
    with fake_nvml(FakeNvmlLib(driver="550.90.07", cuda=12040, gpus=gpus)):
        here = detect_facts(root=tmp_path, env=env, timeout=5.0)
        isolated = detect_facts(root=tmp_path, env=env, timeout=5.0, isolate_nvml=True)
    assert isolated["driver"]["version"] == "550.90.07"
    assert _without_timings(isolated) == _without_timings(here)


@fork_only
def test_an_nvml_crash_is_contained_and_reported(tmp_path: Any) -> None:
    class Crashing(FakeNvmlLib):
        def __getattr__(self, name: str) -> Any:
            if name == "nvmlInitWithFlags":
                def crash(flags: int) -> int:
                    faulthandler.disable()
                    os.kill(os.getpid(), signal.SIGSEGV)  # a driver bug that kills the process
                    return 0
                return crash
            return FakeNvmlLib.__getattr__(self, name)

    (tmp_path / "proc/driver/nvidia").mkdir(parents=True)
    recorded = DATA / "probe" / "proc" / "driver-version-open-565.57.01-ubuntu24.04.txt"  # see SOURCES.md
    (tmp_path / "proc/driver/nvidia/version").write_text(recorded.read_text())
    env = {"PATH": str(tmp_path / "nobin"), "TFGPU_PROBE_NVML": "1"}
    with fake_nvml(Crashing()):
        facts = detect_facts(root=tmp_path, env=env, timeout=5.0, isolate_nvml=True)
    nvml = facts["driver"]["sources"]["nvml"]
    assert nvml["ok"] is False
    assert nvml["error"] == f"NVML: crashed: killed by signal {int(signal.SIGSEGV)}"
    assert facts["driver"]["version"] == "565.57.01"  # the kernel module still answers
    assert facts["driver"]["source"] != "nvml"


@fork_only
def test_a_hung_isolated_nvml_is_killed_at_the_deadline(tmp_path: Any) -> None:
    class Hanging(FakeNvmlLib):
        def __getattr__(self, name: str) -> Any:
            if name == "nvmlInitWithFlags":
                return lambda flags: time.sleep(30) or 0
            return FakeNvmlLib.__getattr__(self, name)

    env = {"PATH": str(tmp_path / "nobin"), "TFGPU_PROBE_NVML": "1"}
    t0 = time.monotonic()
    with fake_nvml(Hanging()):
        facts = detect_facts(root=tmp_path, env=env, timeout=0.5, isolate_nvml=True)
    assert time.monotonic() - t0 < 3.0
    assert facts["driver"]["sources"]["nvml"]["error"] == "NVML: timed out after 0.5 s"


@pytest.mark.real_subprocess
def test_the_nvml_process_stands_in_for_ctypes_util_until_it_is_needed() -> None:
    import subprocess

    code = ("import sys\n"
            "from tfgpu.facts.probe import _stub_ctypes_util\n"
            "_stub_ctypes_util()\n"
            "import pynvml\n"
            "heavy = sorted(m for m in ('shutil', 'tempfile', 'random') if m in sys.modules)\n"
            "from ctypes.util import find_library\n"
            "import ctypes.util as real\n"
            "print(heavy, bool(find_library('c')), 'shutil' in sys.modules, find_library('c') == real.find_library('c'))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.split() == ["[]", "True", "True", "True"]  # nothing heavy until find_library is called
