"""Driver state (issue 27, section 1, rule 1): a kernel module whose user-space library differs (the probe's flag,
NVML's or nvidia-smi's "Driver/library version mismatch", TensorFlow's "does not match DSO version") blocks with
"reboot, or reload the nvidia modules"; a driver whose CUDA library libcuda.so.1 does not load (nvidia-smi "CUDA
Version: N/A", NVML_ERROR_LIBRARY_NOT_FOUND from nvmlSystemGetCudaDriverVersion_v2) is not ready either; nor is
a driver NVML cannot reach ("Driver Not Loaded") beside a listed GPU."""

from __future__ import annotations

from typing import Any

import pynvml
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.probe_helpers import PROBE, FakeGpu, FakeNvmlLib, fake_nvml
from tfgpu.api.doctor import doctor_result
from tfgpu.facts.document import validate_facts
from tfgpu.facts.machine import Machine, driver_state
from tfgpu.facts.probe.driver import resolve_driver
from tfgpu.facts.probe.nvml import query_nvml
from tfgpu.facts.probe.parsers import parse_smi_table
from tfgpu.judge.findings import BLOCKED, FAIL
from tfgpu.judge.verdict import MACHINE_BLOCKERS, judge_release
from tfgpu.kb.knowledge import load_kb
from tfgpu.kb.versions import version

KB = load_kb()
SMI = PROBE / "nvidia-smi"
RTX3090 = {"index": 0, "name": "NVIDIA GeForce RTX 3090", "compute_capability": "8.6", "memory_mib": 24576}


def _facts(driver: dict[str, Any], gpus: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"schema": "tfgpu.facts/1", "platform": {"os": "linux", "glibc": "2.35"}, "cpu": {"avx": True},
            "driver": driver, "gpus": [RTX3090] if gpus is None else gpus, "cuda_toolkits": [], "cudnn": []}


# --------------------------------------------------------------------------- probes


def test_cuda_version_n_a_in_the_table_says_libcuda_does_not_load() -> None:
    parsed = parse_smi_table((SMI / "table-1gpu-gtx1080ti-410.78-cuda-na-TRUNCATED.txt").read_text())
    assert (parsed["driver_version"], parsed["cuda"], parsed["cuda_na"]) == ("410.78", None, True)
    assert [g["name"] for g in parsed["gpus"]] == ["GeForce GTX 108..."]


@pytest.mark.parametrize("name", ["table-8gpu-h100-550.90.07.txt", "table-1gpu-396.24-no-cuda-version-TRUNCATED.txt",
                                  "table-1gpu-wsl2-545.46-driver-546.80-cuda-ERR-TRUNCATED.txt"])
def test_a_cuda_version_a_missing_one_or_err_is_not_n_a(name: str) -> None:
    assert parse_smi_table((SMI / name).read_text())["cuda_na"] is False


def test_nvml_v2_library_not_found_means_no_libcuda() -> None:
    lib = FakeNvmlLib(cuda_v2_rc=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND,
                      gpus=[FakeGpu("NVIDIA GeForce RTX 3090", "GPU-1", 24576, (8, 6))])
    with fake_nvml(lib):
        out = query_nvml()
    assert out["ok"]
    assert out["libcuda"] is False
    assert out["cuda"] == "12.4"  # v1 still answers (NVML: "a known supported version number" without libcuda)
    drv, _gpus, _notes = resolve_driver(out, None, None, None, os_name="linux", wsl=None)
    assert drv["libcuda"] is False
    with fake_nvml(FakeNvmlLib(gpus=[FakeGpu("NVIDIA GeForce RTX 3090", "GPU-1", 24576, (8, 6))])):
        assert query_nvml()["libcuda"] is True


def test_nvidia_smi_n_a_reaches_the_driver_section() -> None:
    smi = {"driver_version": "410.78", "cuda": None, "libcuda": False, "gpus": [{"index": 0, "name": "GeForce GTX 108..."}],
           "format": "table"}
    drv, _gpus, _notes = resolve_driver(None, None, smi, None, os_name="linux", wsl=None)
    assert (drv["version"], drv["libcuda"]) == ("410.78", False)
    assert validate_facts(_facts(drv)) == []


# --------------------------------------------------------------------------- the machine


@pytest.mark.parametrize(("driver", "mismatch", "libcuda", "not_loaded"), [
    ({"version": "460.91.3", "error": "Failed to initialize NVML: Driver/library version mismatch"}, True, None, False),
    ({"version": "384.90", "error": "kernel version 384.90.0 does not match DSO version 384.111.0"}, True, None, False),
    ({"version": "450.66", "mismatch": True}, True, None, False),
    ({"version": "410.78", "libcuda": False}, False, False, False),
    ({"version": "410.78", "error": "nvidia-smi: CUDA Version: N/A"}, False, False, False),
    ({"version": "470.82.01", "error": "Could not load dynamic library 'libcuda.so.1'; dlerror: libcuda.so.1: "
                                       "cannot open shared object file"}, False, False, False),
    ({"version": "535.104.05", "error": "NVML: Driver Not Loaded"}, False, None, True),
    ({"version": "550.54.15", "libcuda": True}, False, True, False),
    ({"version": "550.54.15"}, False, None, False),
])
def test_the_machine_reads_the_driver_state(driver: dict[str, Any], mismatch: bool, libcuda: bool | None,
                                            not_loaded: bool) -> None:
    assert driver_state(driver) == {"driver_mismatch": mismatch, "libcuda": libcuda, "driver_not_loaded": not_loaded}
    m = Machine.from_facts(_facts(driver), KB)
    assert (m.driver_mismatch, m.libcuda, m.driver_not_loaded) == (mismatch, libcuda, not_loaded)


# --------------------------------------------------------------------------- the verdicts


def _checks(tv: Any) -> set[str]:
    return {b.check for b in tv.blockers}


def test_a_mismatch_known_only_from_nvml_blocks() -> None:
    facts = _facts({"version": "460.91.3", "error": "Failed to initialize NVML: Driver/library version mismatch"},
                   gpus=[])
    tv = judge_release(facts, KB, version("2.6.0"))
    assert tv.verdict == BLOCKED
    assert "driver.kernel_match" in _checks(tv)
    assert "reboot" in next(b.fix for b in tv.blockers if b.check == "driver.kernel_match")
    checks = doctor_result(facts, KB).checks
    assert any(c.id == "driver.kernel_match" and c.status == FAIL for c in checks)


def test_a_mismatch_with_no_driver_version_is_not_called_no_driver() -> None:
    tv = judge_release(_facts({"version": None, "mismatch": True, "error": "Driver/library version mismatch"}, gpus=[]),
                       KB, version("2.6.0"))
    assert _checks(tv) >= {"driver.kernel_match"}
    assert "driver.installed" not in _checks(tv)


def test_no_libcuda_blocks_beside_a_listed_gpu() -> None:
    facts = _facts({"version": "410.78", "libcuda": False})
    tv = judge_release(facts, KB, version("1.13.1"))
    assert tv.verdict == BLOCKED
    assert "driver.libcuda" in _checks(tv)
    result = doctor_result(facts, KB, tf="1.13.1")
    assert any(c.id == "driver.libcuda" and c.status == FAIL for c in result.checks)
    assert result.recommendation is not None
    assert result.recommendation.backend == "cpu"  # the machine blocks every release alike
    assert "libcuda.so.1" in (result.recommendation.why or "")


def test_nvml_driver_not_loaded_beside_a_gpu_blocks() -> None:
    tv = judge_release(_facts({"version": "535.104.05", "error": "NVML: Driver Not Loaded"}), KB, version("2.15.1"))
    assert "driver.installed" in _checks(tv)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([str(r.version) for r in KB.gpu_releases("linux")]),
       st.sampled_from([{"libcuda": False}, {"mismatch": True}, {"error": "Driver/library version mismatch"}]))
def test_a_broken_driver_blocks_every_release_as_a_machine_blocker(tf: str, state: dict[str, Any]) -> None:
    tv = judge_release(_facts({"version": "550.54.15", **state}), KB, version(tf))
    assert tv.verdict == BLOCKED
    assert _checks(tv) & MACHINE_BLOCKERS & {"driver.libcuda", "driver.kernel_match"}
