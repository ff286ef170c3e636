"""Parsers against recorded real outputs (tests/data/probe*/, provenance in SOURCES.md there)."""

from __future__ import annotations

import pytest

from tests.probe_helpers import PROBE, PROBE2, all_files
from tfgpu.facts.probe import parsers as P

SMI = PROBE / "nvidia-smi"


@pytest.mark.parametrize(
    ("fixture", "smi", "driver", "cuda", "names", "mem0"),
    [
        ("table-1gpu-titanxp-450.57-no-processes.txt", "450.57", "450.57", "11.0", ["TITAN Xp"], 12196),
        ("table-1gpu-396.24-no-cuda-version-TRUNCATED.txt", "396.24", "396.24", None, ["GeForce GTX 1070"], 8114),
        ("table-1gpu-geforce-err-525.125.06.txt", "525.125.06", "525.125.06", "12.0", ["NVIDIA GeForce ..."], 23028),
        ("table-1gpu-h100-mig-enabled-590.48.01.txt", "590.48.01", "590.48.01", "13.1", ["NVIDIA H100 80GB HBM3"],
         81559),
        ("table-1gpu-rtx2080super-windows-wddm-591.86.txt", "591.86", "591.86", "13.1",
         ["NVIDIA GeForce RTX 2080 ..."], 8192),
        # WSL2: the Linux-side nvidia-smi version differs from the Windows driver; CUDA Version: ERR!
        ("table-1gpu-wsl2-545.46-driver-546.80-cuda-ERR-TRUNCATED.txt", "545.46", "546.80", None,
         ["NVIDIA GeForce RTX 3060 ..."], 6144),
        ("table-4gpu-gtx680-331.62-TRUNCATED.txt", "331.62", "331.62", None, ["GeForce GTX 680"] * 3, 4095),
        ("table-8gpu-h100-550.90.07.txt", "550.90.07", "550.90.07", "12.4", ["NVIDIA H100 80GB HBM3"] * 8, 81559),
    ],
)
def test_smi_table(fixture: str, smi: str, driver: str, cuda: str | None, names: list[str], mem0: int) -> None:
    out = P.parse_smi_table((SMI / fixture).read_text())
    assert (out["smi_version"], out["driver_version"], out["cuda"]) == (smi, driver, cuda)
    assert [g["name"] for g in out["gpus"]] == names
    assert [g["index"] for g in out["gpus"]] == list(range(len(names)))
    assert out["gpus"][0]["memory_mib"] == mem0


def test_smi_csv_with_header_two_gpus() -> None:
    gpus = P.parse_smi_csv((SMI / "csv-2gpu-titanv-rtx5880ada-570.86.15.csv").read_text())
    assert [(g["index"], g["name"], g["compute_capability"], g["driver_version"]) for g in gpus] == [
        (0, "NVIDIA TITAN V", "7.0", "570.86.15"), (1, "NVIDIA RTX 5880 Ada Generation", "8.9", "570.86.15")]


@pytest.mark.parametrize("fixture", ["csv-query-gpu-allfields-1gpu-rtx2080super-595.71.05.csv",
                                     "csv-query-gpu-allfields-1gpu-windows-591.86.csv"])
def test_smi_csv_all_fields_units_and_na(fixture: str) -> None:
    (gpu,) = P.parse_smi_csv((SMI / fixture).read_text())
    assert gpu["name"] == "NVIDIA GeForce RTX 2080 SUPER"
    assert gpu["memory_mib"] == 8192  # "8192 MiB" with the unit in the value
    assert gpu["compute_capability"] == "7.5"
    assert gpu["uuid"].startswith("GPU-")


def test_smi_csv_noheader_nounits_with_recorded_field_list() -> None:
    # the field list of the recorded command (SOURCES.md), gpu_uuid instead of uuid
    fields = ("power.limit", "power.min_limit", "power.max_limit", "memory.total", "vbios_version", "driver_version",
              "name", "gpu_uuid", "power.draw", "temperature.gpu", "temperature.memory", "clocks.current.graphics",
              "clocks.sm", "clocks.mem", "utilization.gpu", "utilization.memory", "fan.speed",
              "pcie.link.width.current", "pstate")
    (gpu,) = P.parse_smi_csv((SMI / "csv-noheader-nounits-1gpu-rtx2080-440.64.csv").read_text(), fields)
    assert (gpu["name"], gpu["memory_mib"], gpu["driver_version"]) == ("GeForce RTX 2080", 7979, "440.64")
    assert gpu["uuid"] == "GPU-22b2c6ac-2d49-4863-197c-9c469071178a"


def test_smi_csv_compute_cap_only() -> None:
    (gpu,) = P.parse_smi_csv((SMI / "csv-compute-cap-1gpu-525.89.02.csv").read_text())
    assert gpu["compute_capability"] == "8.9"


@pytest.mark.parametrize(
    ("fixture", "driver", "cuda", "name", "mem", "attached"),
    [
        ("xml-1gpu-quadro-p400-418.43.xml", "418.43", "10.1", "Quadro P400", 1998, 1),
        ("xml-1gpu-tesla-t4-515.105.01.xml", "515.105.01", "11.7", "Tesla T4", 15360, 1),
        ("xml-1gpu-rtx3080-windows-wddm-536.40.xml", "536.40", "12.2", "NVIDIA GeForce RTX 3080", 10240, 1),
        ("xml-a100-sxm4-80gb-mig-535.54.03-attached4-first-gpu-only.xml", "535.54.03", "12.2",
         "NVIDIA A100-SXM4-80GB", 81920, 4),
    ],
)
def test_smi_xml(fixture: str, driver: str, cuda: str, name: str, mem: int, attached: int) -> None:
    out = P.parse_smi_xml((SMI / fixture).read_text())
    assert (out["driver_version"], out["cuda"], out["attached_gpus"]) == (driver, cuda, attached)
    assert out["gpus"][0]["name"] == name
    assert out["gpus"][0]["memory_mib"] == mem
    assert out["gpus"][0]["uuid"].startswith("GPU-")


@pytest.mark.parametrize(
    ("fixture", "kind", "detail"),
    [
        ("fail-couldnt-communicate.txt", "no_driver", None),
        ("fail-couldnt-communicate-wsl2-shutdown-driver-not-loaded.txt", "no_driver", None),
        ("fail-driver-library-mismatch-2021-no-nvml-line.txt", "mismatch", None),
        ("fail-driver-library-mismatch-nvml-550.144.txt", "mismatch", "550.144"),
        ("fail-driver-library-mismatch-nvml-570.124.txt", "mismatch", "570.124"),
        ("fail-compute-cap-not-valid-field.txt", "invalid_field", "compute_cap"),
    ],
)
def test_smi_errors(fixture: str, kind: str, detail: str | None) -> None:
    assert P.classify_smi_error((SMI / fixture).read_text()) == (kind, detail)


@pytest.mark.parametrize(
    ("fixture", "version", "is_open", "arch"),
    [
        ("driver-version-384.98-ubuntu.txt", "384.98", False, "x86_64"),
        ("driver-version-580.173.02-truenas.txt", "580.173.02", False, "x86_64"),
        ("driver-version-open-525.60.11-arch.txt", "525.60.11", True, "x86_64"),
        ("driver-version-open-565.57.01-ubuntu24.04.txt", "565.57.01", True, "x86_64"),
        ("driver-version-open-aarch64-jetson-l4t-35.3.1.txt", "35.3.1", True, "aarch64"),
    ],
)
def test_proc_driver_version(fixture: str, version: str, is_open: bool, arch: str) -> None:
    assert P.parse_proc_driver_version((PROBE / "proc" / fixture).read_text()) == {
        "version": version, "open": is_open, "arch": arch}


def test_proc_driver_version_absent_is_none() -> None:
    assert P.parse_proc_driver_version((PROBE / "proc" / "driver-version-absent-helper-vm.stderr.txt").read_text()) is None


@pytest.mark.parametrize(
    ("fixture", "wsl"),
    [
        ("version-wsl1-3.4.0-2016.txt", 1), ("version-wsl1-4.4.0-18985.txt", 1),
        ("version-wsl2-4.19.128-microsoft-standard.txt", 2), ("version-wsl2-5.4.72-microsoft-standard-WSL2.txt", 2),
        ("version-native-ubuntu-24.04-6.8.0-50.txt", None), ("version-native-ubuntu-22.04-5.15.0-130.txt", None),
        ("version-native-rhcos-4.17-el9.txt", None), ("version-helper-vm-debian12-custom-kernel.txt", None),
    ],
)
def test_proc_version_wsl(fixture: str, wsl: int | None) -> None:
    assert P.parse_proc_version_wsl((PROBE / "proc" / fixture).read_text()) == wsl


@pytest.mark.parametrize(
    ("fixture", "count", "name", "device_id"),
    [
        ("lspci-grep-vga-dell-r740-4x-tesla-m60-seed001.txt", 4, "NVIDIA Corporation GM204GL [Tesla M60]", None),
        ("lspci-grep-nvidia-dell-r740-4x-tesla-m60-seed001.txt", 4, "NVIDIA Corporation GM204GL [Tesla M60]", None),
        ("lspci-nn-azure-8x-a100-sxm4-80gb.txt", 8, "NVIDIA Corporation GA100 [A100 SXM4 80GB]", "20b2"),
        ("lspci-nn-qemu-vm-1x-a10.txt", 1, "NVIDIA Corporation GA102GL [A10]", "2236"),
        ("lspci-no-nvidia-helper-vm.txt", 0, None, None),
        ("lspci-nn-no-nvidia-helper-vm.txt", 0, None, None),
    ],
)
def test_lspci(fixture: str, count: int, name: str | None, device_id: str | None) -> None:
    devs = P.parse_lspci((PROBE / "lspci" / fixture).read_text())
    assert len(devs) == count  # NVSwitch bridges, the Matrox BMC VGA and virtio VGA are not NVIDIA GPUs
    if count:
        assert (devs[0]["name"], devs[0]["device_id"]) == (name, device_id)


@pytest.mark.parametrize(
    ("path", "short", "full"),
    [
        (PROBE / "cuda" / "nvcc-version-10.0.130.txt", "10.0", "10.0.130"),
        (PROBE / "cuda" / "nvcc-version-10.1.243.txt", "10.1", "10.1.243"),
        (PROBE / "cuda" / "nvcc-version-11.0.194.txt", "11.0", "11.0.194"),
        (PROBE / "cuda" / "nvcc-version-11.0.221.txt", "11.0", "11.0.221"),
        (PROBE / "cuda" / "nvcc-version-11.1.105.txt", "11.1", "11.1.105"),
        (PROBE / "cuda" / "nvcc-version-11.5.119-ubuntu22.04-distro.txt", "11.5", "11.5.119"),
        (PROBE2 / "nvcc-version-13.0.88-pip-wheels-this-machine.txt", "13.0", "13.0.88"),
    ],
)
def test_nvcc_version(path: object, short: str, full: str) -> None:
    text = path.read_text()  # type: ignore[attr-defined]
    assert (P.parse_nvcc_version(text), P.parse_nvcc_full_version(text)) == (short, full)


def test_cuda_version_json_and_cudart_headers() -> None:
    assert P.parse_cuda_version_json((PROBE / "cuda" / "version-12.6-windows.json").read_text()) == "12.6.3"
    assert P.parse_cudart_header((PROBE / "cuda" / "cuda_runtime_api-12.6-lines128-146.h").read_text()) == "12.6"
    assert P.parse_cudart_header((PROBE2 / "cuda_runtime_api-13.0-lines135-142.h").read_text()) == "13.0"


@pytest.mark.parametrize(
    ("fixture", "version"),
    [("cudnn-7.2.1-cudnn.h-first80lines.h", "7.2.1"), ("cudnn-8.2.1-cudnn_version.h", "8.2.1"),
     ("cudnn-9.6.0-cudnn_version.h", "9.6.0")],
)
def test_cudnn_headers(fixture: str, version: str) -> None:
    assert P.parse_cudnn_header((PROBE / "cudnn" / fixture).read_text()) == version


def test_ldconfig_tab_and_space_indented() -> None:
    assert P.parse_ldconfig((PROBE / "ld" / "ldconfig-p-grep-cudnn-cuda7.5-cudnn4-image.txt").read_text()) == [
        ("libcudnn.so.4", "/usr/lib/x86_64-linux-gnu/libcudnn.so.4")]
    head = P.parse_ldconfig((PROBE / "ld" / "ldconfig-p-head6-debian-12-helper-vm.txt").read_text())
    assert head[0] == ("libz3.so.4", "/lib/x86_64-linux-gnu/libz3.so.4")
    assert len(head) == 5
    mine = P.parse_ldconfig((PROBE2 / "ldconfig-p-grep-cudart-cuda13.0-this-machine.txt").read_text())
    assert ("libcudart.so.13", "/usr/local/cuda-13.0/lib/libcudart.so.13") in mine
    assert P.soname_version("libcudart.so.13") == ("cudart", "13")
    assert P.soname_version("libcudnn.so.4") == ("cudnn", "4")
    assert P.soname_version("libcudart.so") is None


def test_os_release_ldd_cpuinfo_py_launcher() -> None:
    osr = P.parse_os_release((PROBE / "os" / "os-release-ubuntu-22.04.5.txt").read_text())
    assert (osr["ID"], osr["VERSION_ID"]) == ("ubuntu", "22.04")
    assert P.parse_os_release((PROBE / "os" / "os-release-debian-12-helper-vm.txt").read_text())["ID"] == "debian"
    assert P.parse_ldd_version((PROBE / "os" / "ldd-version-debian-12-glibc-2.36.txt").read_text()) == "2.36"
    flags = P.parse_cpuinfo_flags((PROBE / "proc" / "cpuinfo-flags-line-helper-vm.txt").read_text())
    assert flags is not None
    assert {"avx", "avx2"} <= flags
    assert P.parse_py_launcher((PROBE / "python" / "py-0-old-launcher-3.8-32.txt").read_text()) == [
        {"version": "3.8", "path": None, "bits": "32"}]


def test_conda_info_text_is_not_json() -> None:
    # conda/conda#12972: `conda info --json` printed the text form; we must not crash on it
    assert P.parse_conda_info_json((PROBE / "conda" / "conda-info-text-23.7.0-cuda-12.0-virtual-pkg.txt").read_text()) is None


PARSERS = [P.parse_smi_table, P.parse_smi_xml, P.parse_smi_csv, P.classify_smi_error, P.parse_proc_driver_version,
           P.parse_sys_module_version, P.parse_proc_version_wsl, P.parse_lspci, P.parse_nvcc_version,
           P.parse_cuda_version_txt, P.parse_cuda_version_json, P.parse_cudart_header, P.parse_cudnn_header,
           P.parse_ldconfig, P.parse_os_release, P.parse_ldd_version, P.parse_cpuinfo_flags, P.parse_py_launcher,
           P.parse_version_output, P.parse_conda_info_json]


@pytest.mark.parametrize("parser", PARSERS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("text", ["", "\n\n", "garbage \x00\x01 ]]> {", b"\xff\xfe\x80 not utf-8".decode("utf-8", "replace"),
                                  '{"cuda": 5}', "<nvidia_smi_log><gpu></nvidia_smi_log"])
def test_garbage_and_empty_never_raise(parser: object, text: str) -> None:
    result = parser(text)  # type: ignore[operator]
    assert result in (None, [], {}, set(), ("other", None)) or isinstance(result, (dict, tuple))
    if isinstance(result, dict) and "gpus" in result:
        assert result["gpus"] == []


@pytest.mark.parametrize("fixture", all_files(PROBE) + all_files(PROBE2), ids=lambda p: p.name)
def test_every_fixture_through_every_parser_never_raises(fixture: object) -> None:
    text = fixture.read_bytes().decode("utf-8", "replace")  # type: ignore[attr-defined]
    for parser in PARSERS:
        parser(text)  # must not raise on any recorded output, whatever its kind


@pytest.mark.parametrize(("name", "expected"), [
    ("nv_tegra_release-r32.7.6-jetson-nano.txt", {"l4t": "32.7.6", "board": "t210ref"}),
    ("nv_tegra_release-r32.5.1-jetson-tx2.txt", {"l4t": "32.5.1", "board": "t186ref"}),
])
def test_nv_tegra_release(name, expected):
    assert P.parse_nv_tegra_release((PROBE / "os" / name).read_text()) == expected


@pytest.mark.parametrize("text", ["", "Ubuntu 22.04", "# R (release)", (PROBE / "os" / "os-release-ubuntu-22.04.5.txt").read_text()])
def test_nv_tegra_release_of_other_files_is_none(text):
    assert P.parse_nv_tegra_release(text) is None
