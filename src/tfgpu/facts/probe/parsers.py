"""Pure parsers: the text a tool prints or a file holds -> plain values. No I/O, never raise on bad input.

Every parser here is tested against recorded real outputs under tests/data/probe*/ (see SOURCES.md there).
Formats vary by driver generation, so parse by labels and regexes, never by column offsets.
"""

from __future__ import annotations

import json
import re

from tfgpu.core.errors import clip_words
from tfgpu.core.pci import normalize_pci_device_id

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the doctor's probe child runs this)
if TYPE_CHECKING:
    from typing import Any

_NA = {"", "n/a", "[n/a]", "[not supported]", "not supported", "[unknown error]", "unknown error", "err!"}


def _na(value: str) -> str | None:
    value = value.strip()
    return None if value.lower() in _NA or value.lower().startswith("[requested functionality") else value


def _mib(value: str | None) -> int | None:
    if value is None:
        return None
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*(MiB|GiB|KiB|B)?\s*$", value)
    if not m:
        return None
    num = float(m.group(1))
    unit = m.group(2) or "MiB"
    factor = {"B": 1 / (1024 * 1024), "KiB": 1 / 1024, "MiB": 1.0, "GiB": 1024.0}[unit]
    return round(num * factor)


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value.strip())
    except ValueError:
        return None


def _cc(value: str | None) -> str | None:
    if value is None:
        return None
    m = re.match(r"^\s*(\d+)\.(\d+)\s*$", value)
    return f"{int(m.group(1))}.{int(m.group(2))}" if m else None


# --- nvidia-smi -------------------------------------------------------------------------------------------

#: The query tfgpu runs (`nvidia-smi --query-gpu=... --format=csv,noheader,nounits`).
SMI_FIELDS = ("index", "name", "uuid", "driver_version", "memory.total", "pci.device_id", "compute_cap")
#: compute_cap is unknown to drivers up to ~470: "Field "compute_cap" is not a valid field to query."
SMI_FIELDS_OLD = SMI_FIELDS[:-1]


def parse_smi_csv(text: str, fields: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """Rows of `nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]` as GPU records.

    With ``fields`` the output has no header; without, the first line is the header (units in
    brackets, e.g. ``memory.total [MiB]``, are dropped). Unknown fields are kept under their name.
    """
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return []
    if fields is None:
        header = [re.sub(r"\s*\[.*?\]\s*$", "", h.strip()) for h in lines[0].split(",")]
        lines = lines[1:]
    else:
        header = list(fields)
    import csv  # here, not at the top: most machines never need it (STYLE: lazy imports)
    import io

    gpus: list[dict[str, Any]] = []
    # NUL bytes: garbage output; Python < 3.11 csv raises "line contains NUL" on them
    for row in csv.reader(io.StringIO("\n".join(lines).replace("\x00", "")), skipinitialspace=True):
        if len(row) != len(header):
            continue  # not a data row (an error message, a truncated line)
        raw = {h: _na(v) for h, v in zip(header, row)}
        index = _int(raw.get("index"))
        if "index" in raw and index is None:
            continue
        gpu: dict[str, Any] = {
            "index": index if index is not None else len(gpus),
            "name": raw.get("name"),
            "uuid": raw.get("uuid") or raw.get("gpu_uuid"),
            "compute_capability": _cc(raw.get("compute_cap")),
            "memory_mib": _mib(raw.get("memory.total")),
        }
        if raw.get("driver_version"):
            gpu["driver_version"] = raw["driver_version"]
        if raw.get("pci.bus_id"):
            gpu["pci_bus_id"] = raw["pci.bus_id"]
        if device_id := normalize_pci_device_id(raw.get("pci.device_id")):
            gpu["pci_device_id"] = device_id  # "0x1E8110DE" (device << 16 | vendor) -> "1e81"
        gpus.append(gpu)
    return gpus


_TABLE_SMI = re.compile(r"NVIDIA-SMI\s+(\S+)")
# R610+ drivers print "KMD Version:" / "CUDA UMD Version:" where older ones print "Driver Version:" / "CUDA Version:"
# (sgl-project/sglang#27487: "| NVIDIA-SMI 610.43.02   KMD Version: 610.43.02   CUDA UMD Version: 13.3 |")
_TABLE_DRIVER = re.compile(r"(?:Driver|KMD) Version:\s*(\S+)")
_TABLE_CUDA = re.compile(r"CUDA (?:UMD )?Version:\s*(\S+)")
# a GPU row: "|   0  TITAN Xp            On   | 00000000:17:00.0 Off |" (the name may hold spaces)
_TABLE_GPU = re.compile(r"^\|\s+(\d+)\s+(.+?)\s+(On|Off|WDDM|TCC)\s+\|\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)")
_TABLE_MEM = re.compile(r"(\d+)MiB\s*/\s*(\d+)MiB")


def parse_smi_table(text: str) -> dict[str, Any]:
    """The default `nvidia-smi` table: driver version, CUDA version and GPU rows (names may be truncated).

    Returns {"smi_version", "driver_version", "cuda", "cuda_na", "gpus": [{"index", "name", "memory_mib",
    "pci_bus_id"}]}. Pre-410 drivers print no "CUDA Version"; WSL2 may print "CUDA Version: ERR!" (-> None); R610+
    drivers print "KMD Version" and "CUDA UMD Version" instead (both spellings are read). "CUDA Version: N/A" is
    nvidia-smi's answer when it cannot get the CUDA version from the driver's CUDA library, libcuda.so.1
    (``cuda_na``; recorded in pytorch#25117, driver 410.78 after the CUDA packages were purged).
    """
    out: dict[str, Any] = {"smi_version": None, "driver_version": None, "cuda": None, "cuda_na": False, "gpus": []}
    lines = text.splitlines()
    for line in lines[:8]:
        if out["smi_version"] is None and (m := _TABLE_SMI.search(line)):
            out["smi_version"] = m.group(1)
        if out["driver_version"] is None and (m := _TABLE_DRIVER.search(line)):
            out["driver_version"] = m.group(1)
        if out["cuda"] is None and (m := _TABLE_CUDA.search(line)):
            out["cuda"] = m.group(1) if re.fullmatch(r"\d+\.\d+", m.group(1)) else None
            out["cuda_na"] = m.group(1) == "N/A"
    in_processes = False
    for i, line in enumerate(lines):
        if "Processes:" in line or "MIG devices:" in line:
            in_processes = True
        if in_processes:
            continue
        m = _TABLE_GPU.match(line)
        if not m:
            continue
        gpu: dict[str, Any] = {"index": int(m.group(1)), "name": m.group(2).strip(), "memory_mib": None,
                               "pci_bus_id": m.group(4)}
        if i + 1 < len(lines) and (mm := _TABLE_MEM.search(lines[i + 1])):
            gpu["memory_mib"] = int(mm.group(2))
        out["gpus"].append(gpu)
    return out


def parse_smi_xml(text: str) -> dict[str, Any]:
    """`nvidia-smi -q -x`: driver version, CUDA version and GPUs (with UUID, memory; no compute capability
    before the `<compute_cap>`-less v10 dtd). Returns the same shape as :func:`parse_smi_table`."""
    import xml.etree.ElementTree as ET

    out: dict[str, Any] = {"driver_version": None, "cuda": None, "cuda_na": False, "gpus": [], "attached_gpus": None}
    try:
        # the DOCTYPE line names a dtd file; ElementTree ignores it without fetching anything
        root = ET.fromstring(text.strip().encode("utf-8", "replace"))
    except ET.ParseError:
        return out
    out["driver_version"] = _na(root.findtext("driver_version") or "")
    cuda = _na(root.findtext("cuda_version") or "")
    out["cuda"] = cuda if cuda and re.fullmatch(r"\d+\.\d+", cuda) else None
    out["cuda_na"] = (root.findtext("cuda_version") or "").strip() == "N/A"
    out["attached_gpus"] = _int(root.findtext("attached_gpus"))
    for i, gpu in enumerate(root.findall("gpu")):
        total = gpu.findtext("fb_memory_usage/total")
        out["gpus"].append({
            "index": i,
            "name": _na(gpu.findtext("product_name") or ""),
            "uuid": _na(gpu.findtext("uuid") or ""),
            "memory_mib": _mib(total),
            "compute_capability": _cc(gpu.findtext("compute_cap")),
            "pci_bus_id": gpu.get("id"),
            "pci_device_id": normalize_pci_device_id(gpu.findtext("pci/pci_device_id")),
        })
    return out


def classify_smi_error(text: str) -> tuple[str, str | None]:
    """Map a failing nvidia-smi's output to (kind, detail).

    kinds: "no_driver" (couldn't communicate), "mismatch" (Driver/library version mismatch; detail = the
    NVML library version when printed), "invalid_field" (old driver, e.g. compute_cap), "other".
    """
    if "Driver/library version mismatch" in text:
        m = re.search(r"NVML library version:\s*(\S+)", text)
        return "mismatch", m.group(1) if m else None
    if "couldn't communicate with the NVIDIA driver" in text or "Driver Not Loaded" in text:
        return "no_driver", None
    if m := re.search(r'Field "([^"]+)" is not a valid field to query', text):
        return "invalid_field", m.group(1)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return "other", clip_words(lines[0], 200) if lines else None


# --- kernel module, /proc ----------------------------------------------------------------------------------


def parse_proc_driver_version(text: str) -> dict[str, Any] | None:
    """`/proc/driver/nvidia/version` -> {"version", "open": bool, "arch"} (None when it does not parse)."""
    m = re.search(r"NVRM version:\s*NVIDIA UNIX (Open )?(?:Kernel Module for )?(\S+)\s+(?:Kernel Module\s+)?(\d+(?:\.\d+)+)",
                  text)
    if not m:
        return None
    return {"version": m.group(3), "open": bool(m.group(1)), "arch": m.group(2)}


def parse_sys_module_version(text: str) -> str | None:
    """`/sys/module/nvidia/version`: the bare version string (e.g. ``550.54.15``)."""
    value = text.strip()
    return value if re.fullmatch(r"\d+(?:\.\d+)+", value) else None


def parse_proc_version_wsl(text: str) -> int | None:
    """`/proc/version` -> 1 (WSL1: ``-Microsoft``), 2 (WSL2: ``microsoft-standard``), or None (not WSL)."""
    if re.search(r"microsoft-standard|WSL2", text):
        return 2
    if "Microsoft" in text or "microsoft" in text:
        return 1
    return None


def parse_lspci(text: str) -> list[dict[str, Any]]:
    """NVIDIA display devices (VGA / 3D / Display controller) from `lspci` or `lspci -nn` output.

    Bridges, audio functions and NVSwitches are not GPUs and are left out.
    """
    devices = []
    for line in text.splitlines():
        m = re.match(r"^\s*(\S+)\s+(VGA compatible controller|3D controller|Display controller)(?: \[[0-9a-f]{4}\])?:\s*(.*)$",
                     line)
        if not m:
            continue
        desc = m.group(3)
        if "NVIDIA" not in desc and "[10de:" not in desc:
            continue
        ids = re.search(r"\[(10de):([0-9a-f]{4})\]", desc)
        name = re.sub(r"\s*\[10de:[0-9a-f]{4}\]", "", desc)
        name = re.sub(r"\s*\(rev [0-9a-f]+\)\s*$", "", name).strip()
        devices.append({"slot": m.group(1), "class": m.group(2), "name": name,
                        "device_id": ids.group(2) if ids else None})
    return devices


# --- CUDA toolkit -----------------------------------------------------------------------------------------


def parse_nvcc_version(text: str) -> str | None:
    """`nvcc --version` -> "X.Y" from "Cuda compilation tools, release X.Y, VX.Y.Z"."""
    m = re.search(r"release (\d+\.\d+)", text)
    return m.group(1) if m else None


def parse_nvcc_full_version(text: str) -> str | None:
    m = re.search(r"release \d+\.\d+, V(\d+\.\d+\.\d+)", text)
    return m.group(1) if m else None


def parse_cuda_version_txt(text: str) -> str | None:
    """CUDA <= 10.x `version.txt`: "CUDA Version 10.1.243" -> "10.1.243"."""
    m = re.search(r"CUDA Version\s+(\d+\.\d+(?:\.\d+)?)", text)
    return m.group(1) if m else None


def parse_cuda_version_json(text: str) -> str | None:
    """CUDA >= 11 `version.json`: {"cuda": {"version": "12.6.3"}, ...}; falls back to cuda_cudart."""
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    for key in ("cuda", "cuda_cudart"):
        entry = doc.get(key)
        if (isinstance(entry, dict) and isinstance(entry.get("version"), str)
                and re.fullmatch(r"\d+\.\d+(?:\.\d+)*", entry["version"])):
            return str(entry["version"])
    return None


def parse_cudart_header(text: str) -> str | None:
    """`#define CUDART_VERSION 12060` (cuda_runtime_api.h) -> "12.6"."""
    m = re.search(r"#\s*define\s+CUDART_VERSION\s+(\d+)", text)
    if not m:
        return None
    n = int(m.group(1))
    if n < 1000:  # a header cut mid-number ("#define CUDART_VERSION 12" of 12060): no version, not "0.1"
        return None
    return f"{n // 1000}.{(n % 1000) // 10}"


# --- cuDNN ------------------------------------------------------------------------------------------------


def parse_cudnn_header(text: str) -> str | None:
    """cudnn_version.h (cuDNN >= 8) or cudnn.h (cuDNN <= 7): CUDNN_MAJOR/MINOR/PATCHLEVEL -> "8.9.7"."""
    parts = []
    for name in ("CUDNN_MAJOR", "CUDNN_MINOR", "CUDNN_PATCHLEVEL"):
        m = re.search(rf"#\s*define\s+{name}\s+(\d+)", text)
        if not m:
            return None
        parts.append(m.group(1))
    return ".".join(parts)


# --- loader -----------------------------------------------------------------------------------------------


def parse_ldconfig(text: str, *, containing: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """`ldconfig -p` -> [(soname, path)] (TAB or space indented lines ``name (flags) => path``).
    With ``containing``, only lines that contain one of those strings (a cache lists ~1000 libraries)."""
    out = []
    for line in text.splitlines():
        if containing and not any(c in line for c in containing):
            continue
        m = re.match(r"^\s+(\S+)\s+\(([^)]*)\)\s+=>\s+(\S.*?)\s*$", line)
        if m:
            out.append((m.group(1), m.group(3)))
    return out


_SONAME = re.compile(r"^lib(cudart|cudnn|cuda|nvidia-ml)\.so\.(\d+(?:\.\d+)*)$")


def soname_version(name: str) -> tuple[str, str] | None:
    """'libcudart.so.11.0' -> ('cudart', '11.0'); 'libcudnn.so.8' -> ('cudnn', '8'); others None."""
    m = _SONAME.match(name)
    return (m.group(1), m.group(2)) if m else None


# --- platform ---------------------------------------------------------------------------------------------


def parse_nv_tegra_release(text: str) -> dict[str, str] | None:
    """Jetson's `/etc/nv_tegra_release` first line, e.g. ``# R32 (release), REVISION: 7.6, GCID: 38171779,
    BOARD: t210ref, EABI: aarch64, DATE: ...`` -> {"l4t": "32.7.6", "board": "t210ref"}; None otherwise."""
    m = re.search(r"#\s*R(\d+)\s*\(release\),\s*REVISION:\s*(\d+(?:\.\d+)*)", text)
    if not m:
        return None
    board = re.search(r"BOARD:\s*([\w.-]+)", text)
    return {"l4t": f"{m.group(1)}.{m.group(2)}", "board": board.group(1) if board else ""}


def parse_os_release(text: str) -> dict[str, str]:
    """`/etc/os-release` key=value lines (values unquoted)."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Z_][A-Z0-9_]*)=(.*)$", line.strip())
        if m:
            value = m.group(2).strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            out[m.group(1)] = value
    return out


def parse_ldd_version(text: str) -> str | None:
    """`ldd --version` first line "ldd (Debian GLIBC 2.36-9+deb12u4) 2.36" -> "2.36" (musl -> None)."""
    first = text.splitlines()[0] if text.strip() else ""
    m = re.search(r"(?:GLIBC|GNU libc).*?\s(\d+\.\d+)\s*$", first)
    return m.group(1) if m else None


def parse_cpuinfo_flags(text: str) -> set[str] | None:
    """The first `flags` (x86) or `Features` (arm) line of /proc/cpuinfo as a set; None if there is none."""
    for line in text.splitlines():
        m = re.match(r"^(flags|Features)\s*:\s*(.*)$", line)
        if m:
            return set(m.group(2).split())
    return None


def parse_py_launcher(text: str) -> list[dict[str, Any]]:
    """`py -0p` (" -V:3.11 *        C:\\...\\python.exe") or old `py -0p` (" -3.8-64 C:\\...") lines ->
    [{"version", "path", "bits"}]; `py -0` (no paths) gives path None."""
    out = []
    for line in text.splitlines():
        m = re.match(r"^\s*-(?:V:)?(?:[\w.]+/)?(\d+\.\d+)(?:-(32|64|arm64))?\w*\s*\*?\s*(.*)$", line)
        if not m:
            continue
        path = m.group(3).strip() or None
        out.append({"version": m.group(1), "path": path, "bits": m.group(2)})
    return out


def executable_bits(head: bytes | None) -> int | None:
    """32 or 64 from the start of a program file: an ELF's class byte (EI_CLASS: 1 = 32-bit, 2 = 64-bit) or a
    PE's machine field (0x14c i386; 0x8664 x86-64, 0xaa64 ARM64); None for anything else (a shell-script
    wrapper, a Store alias, a truncated file). The ELF and PE layouts are the System V ABI's and Microsoft's
    PE format specification's."""
    if not head:
        return None
    if head[:4] == b"\x7fELF" and len(head) > 4:
        return {1: 32, 2: 64}.get(head[4])
    if head[:2] == b"MZ" and len(head) >= 0x40:
        offset = int.from_bytes(head[0x3C:0x40], "little")
        if offset + 6 <= len(head) and head[offset:offset + 4] == b"PE\0\0":
            machine = int.from_bytes(head[offset + 4:offset + 6], "little")
            return {0x14C: 32, 0x8664: 64, 0xAA64: 64}.get(machine)
    return None


def parse_version_output(text: str) -> str | None:
    """`conda --version` ("conda 23.7.0"), `mamba --version` (first line "mamba 1.5.8"), `micromamba
    --version` ("1.5.8") -> the first version-looking token."""
    m = re.search(r"(\d+\.\d+(?:\.\d+)*)", text)
    return m.group(1) if m else None


def parse_conda_info_json(text: str) -> dict[str, Any] | None:
    """`conda info --json`: {"conda_version", "envs", "virtual_pkgs"...} or None (not JSON: some conda
    versions printed the text form, conda/conda#12972)."""
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None
