"""NVIDIA driver and GPUs from layered sources: NVML -> kernel module files -> nvidia-smi -> PCI devices.

Each source is probed as a job of its own (see tfgpu.facts.probe.detect_facts); :func:`resolve_driver` is
the pure step that merges them and says which source each value came from.
"""

# Machine paths are strings re-based under ctx.root, in the machine's own path rules (ctx.paths: ntpath for Windows).
from __future__ import annotations

import re
import signal

from tfgpu.core.errors import clip_words
from tfgpu.facts.probe._ctx import Ctx
from tfgpu.facts.probe.parsers import (
    SMI_FIELDS,
    SMI_FIELDS_OLD,
    classify_smi_error,
    parse_lspci,
    parse_proc_driver_version,
    parse_smi_csv,
    parse_smi_table,
    parse_smi_xml,
    parse_sys_module_version,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the doctor's probe child runs this)
if TYPE_CHECKING:
    from typing import Any

#: Where the user-space driver libraries live (libnvidia-ml.so.<version> names the installed version).
_LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/lib/aarch64-linux-gnu",
             "/usr/lib/powerpc64le-linux-gnu", "/usr/lib/nvidia", "/usr/local/nvidia/lib64")
WSL_LIB = "/usr/lib/wsl/lib"


def probe_kernel_module(ctx: Ctx) -> dict[str, Any]:
    """The loaded kernel module's version (/sys/module/nvidia/version, /proc/driver/nvidia/version) and
    the user-space library's version (the libnvidia-ml.so.<version> file the driver package installed)."""
    out: dict[str, Any] = {"sys_module": None, "proc": None, "proc_open": None, "user_library": None,
                           "user_library_path": None, "wsl_lib": None}
    text = ctx.read("/sys/module/nvidia/version")
    if text is not None:
        out["sys_module"] = parse_sys_module_version(text)
    text = ctx.read("/proc/driver/nvidia/version")
    if text is not None and (parsed := parse_proc_driver_version(text)):
        out["proc"] = parsed["version"]
        out["proc_open"] = parsed["open"]
    for d in _LIB_DIRS:
        for name in ctx.listdir(d):
            if not name.startswith("libnvidia-ml.so."):
                continue  # a lib directory holds thousands of names
            m = re.fullmatch(r"libnvidia-ml\.so\.(\d+\.\d+(?:\.\d+)?)", name)
            if m:
                out["user_library"] = m.group(1)
                out["user_library_path"] = f"{d}/{name}"
                break
        if out["user_library"]:
            break
    wsl_names = ctx.listdir(WSL_LIB)
    if wsl_names:
        out["wsl_lib"] = {"path": WSL_LIB, "libcuda": "libcuda.so.1" in wsl_names or "libcuda.so" in wsl_names,
                          "libnvidia_ml": "libnvidia-ml.so.1" in wsl_names,
                          "nvidia_smi": "nvidia-smi" in wsl_names}
    return out


def find_nvidia_smi(ctx: Ctx, os_name: str) -> str | None:
    """nvidia-smi on PATH; else the Windows install dirs (%ProgramFiles%\\NVIDIA Corporation\\NVSMI, DCH
    drivers put it in System32) or WSL's /usr/lib/wsl/lib."""
    found = ctx.which("nvidia-smi")
    if found:
        return found
    candidates: list[str] = []
    if os_name == "windows":
        pf = ctx.env.get("ProgramFiles") or ctx.env.get("PROGRAMFILES") or r"C:\Program Files"
        sysroot = ctx.env.get("SystemRoot") or ctx.env.get("SYSTEMROOT") or r"C:\Windows"
        candidates = [ctx.paths.join(sysroot, "System32", "nvidia-smi.exe"),
                      ctx.paths.join(pf, "NVIDIA Corporation", "NVSMI", "nvidia-smi.exe")]
    else:
        candidates = [f"{WSL_LIB}/nvidia-smi"]
    for c in candidates:
        if ctx.exists(c):
            return str(ctx.path(c))
    return None


def probe_nvidia_smi(ctx: Ctx, os_name: str) -> dict[str, Any]:
    """Run nvidia-smi: the CSV query (several GPUs -> several lines) and the table (driver's CUDA version).

    Old drivers reject ``compute_cap`` -> query again without it. If the table does not parse, try
    ``-q -x``. Returns {"path", "driver_version", "cuda", "gpus", "error", "error_kind", "detail"}.
    """
    out: dict[str, Any] = {"path": None, "driver_version": None, "cuda": None, "smi_version": None, "libcuda": None,
                           "gpus": [], "error": None, "error_kind": None, "detail": None, "format": None}
    exe = find_nvidia_smi(ctx, os_name)
    if exe is None:
        out["error"] = "nvidia-smi: not found"
        out["error_kind"] = "not_found"
        return out
    out["path"] = ctx.unroot(exe)
    query = ["--query-gpu=" + ",".join(SMI_FIELDS), "--format=csv,noheader,nounits"]
    res = ctx.run([exe, *query])
    fields: tuple[str, ...] = SMI_FIELDS
    if not res.ok and not res.timed_out:
        kind, detail = classify_smi_error(res.stdout + "\n" + res.stderr)
        if kind == "invalid_field":
            fields = SMI_FIELDS_OLD
            res = ctx.run([exe, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"])
    if res.timed_out or res.returncode is None:
        out["error"] = f"nvidia-smi: timed out after {ctx.timeout:g} s" if res.timed_out else res.error
        out["error_kind"] = "timeout" if res.timed_out else "cannot_run"
        return out
    if not res.ok:
        kind, detail = classify_smi_error(res.stdout + "\n" + res.stderr)
        out["error"] = "nvidia-smi: " + clip_words(((res.stdout + "\n" + res.stderr).strip().splitlines()
                                                    or [_exit_status(res.returncode)])[0], 200)
        out["error_kind"] = kind
        out["detail"] = detail
        return out
    out["gpus"] = parse_smi_csv(res.stdout, fields)
    out["format"] = "csv"
    for g in out["gpus"]:
        dv = g.pop("driver_version", None)
        if dv and out["driver_version"] is None:
            out["driver_version"] = dv
    table = ctx.run([exe])
    if table.ok:
        parsed = parse_smi_table(table.stdout)
        out["cuda"] = parsed["cuda"]
        out["libcuda"] = False if parsed["cuda_na"] else None  # "CUDA Version: N/A": libcuda.so.1 does not load
        out["smi_version"] = parsed["smi_version"]
        out["driver_version"] = out["driver_version"] or parsed["driver_version"]
        if not out["gpus"]:
            out["gpus"] = parsed["gpus"]
            out["format"] = "table"
        if parsed["driver_version"] is None:
            xml = ctx.run([exe, "-q", "-x"])
            if xml.ok:
                px = parse_smi_xml(xml.stdout)
                out["cuda"] = out["cuda"] or px["cuda"]
                out["libcuda"] = False if px["cuda_na"] and not out["cuda"] else out["libcuda"]
                out["driver_version"] = out["driver_version"] or px["driver_version"]
                if not out["gpus"]:
                    out["gpus"] = px["gpus"]
                    out["format"] = "xml"
    if out["driver_version"] is None and not out["gpus"]:
        out["error"] = "nvidia-smi: output not understood"
        out["error_kind"] = "garbage"
    return out


def _exit_status(code: int | None) -> str:
    """How a program that printed nothing ended: "killed by signal SIGSEGV" (a crash) or "exited with 139"."""
    if code is not None and code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with {code}"


def probe_pci(ctx: Ctx) -> dict[str, Any]:
    """NVIDIA display devices on the PCI bus: /sys/bus/pci/devices (no program needed), then lspci for names.

    Tells "an NVIDIA GPU is present but no driver is loaded" from "there is no NVIDIA GPU".
    """
    out: dict[str, Any] = {"devices": [], "source": None, "error": None}
    sys_devs = []
    base = "/sys/bus/pci/devices"
    for slot in ctx.listdir(base):
        vendor = (ctx.read(f"{base}/{slot}/vendor") or "").strip().lower()
        klass = (ctx.read(f"{base}/{slot}/class") or "").strip().lower()
        if vendor == "0x10de" and klass.startswith("0x03"):
            device = (ctx.read(f"{base}/{slot}/device") or "").strip().lower().removeprefix("0x") or None
            sys_devs.append({"slot": slot, "class": klass, "name": None, "device_id": device})
    if ctx.listdir(base) and not sys_devs:
        out["source"] = "/sys/bus/pci/devices"  # the bus is readable and has no NVIDIA display device
        return out
    res = ctx.run(["lspci", "-nn"])  # names for the devices sysfs found, or the bus when sysfs is hidden
    if res.ok:
        out["devices"] = parse_lspci(res.stdout)
        out["source"] = "lspci -nn"
    elif sys_devs:
        out["devices"] = sys_devs
        out["source"] = "/sys/bus/pci/devices"
    else:
        out["error"] = res.describe()
        if ctx.listdir(base):
            out["source"] = "/sys/bus/pci/devices"
    return out


def _lib_version(nvml_version: str | None) -> str | None:
    """nvmlSystemGetNVMLVersion "12.550.54.15" -> "550.54.15" (the user-space library's driver version)."""
    if nvml_version and (m := re.fullmatch(r"\d+\.(\d+\.\d+(?:\.\d+)?)", nvml_version)):
        return m.group(1)
    return None


def resolve_driver(
    nvml: dict[str, Any] | None,
    kernel: dict[str, Any] | None,
    smi: dict[str, Any] | None,
    pci: dict[str, Any] | None,
    *,
    os_name: str,
    wsl: int | None,
) -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
    """Pure: merge the sources into (driver section, gpus, notes). None for a source = not probed."""
    nvml = nvml or {}
    kernel = kernel or {}
    smi = smi or {}
    notes: list[str] = []
    kmod = kernel.get("sys_module") or kernel.get("proc")
    user_lib = (
        kernel.get("user_library")
        or _lib_version(nvml.get("nvml_version"))
        or (smi.get("detail") if smi.get("error_kind") == "mismatch" else None)
    )
    driver = _driver_section(nvml, kernel, smi, kmod, user_lib)
    gpus = _merge_sources(driver, nvml, smi)
    if driver["version"] is None and kmod and wsl is None:
        driver["version"] = kmod
        driver["source"] = "kernel_module"
    pci_list = (pci or {}).get("devices") or []
    if not gpus and pci_list and driver["version"]:
        # a driver but neither NVML nor nvidia-smi answered: the PCI names are all we know (PCI order,
        # which need not be CUDA's device order; no compute capability)
        gpus.extend(_pci_gpus(pci_list))
    _join_pci_device_ids(gpus, pci_list)

    mismatch_error = nvml.get("error_kind") == "mismatch" or smi.get("error_kind") == "mismatch"
    if wsl is None and kmod and user_lib and kmod != user_lib:
        driver["mismatch"] = True
    if mismatch_error:
        driver["mismatch"] = True
    if driver["mismatch"]:
        driver["version"] = kmod or driver["version"]
        driver["source"] = "kernel_module" if kmod else driver["source"]
        driver["error"] = (
            f"Driver/library version mismatch: kernel module {kmod or 'unknown'}, user-space library "
            f"{user_lib or 'unknown'}; reboot (or reload the nvidia kernel module) after a driver update"
        )
        return driver, gpus, notes

    if driver["version"] is None:
        driver["error"] = _no_driver_error(nvml, kernel, smi, pci, os_name=os_name, wsl=wsl)
    if wsl == 2:
        notes.append("WSL2: the GPU driver is the Windows driver; /usr/lib/wsl/lib provides libcuda; "
                     "never install a Linux NVIDIA driver inside WSL")
        if smi.get("smi_version") and driver["version"] and smi["smi_version"] != driver["version"]:
            notes.append(f"WSL2: nvidia-smi {smi['smi_version']} reports Windows driver {driver['version']}")
    return driver, gpus, notes


def _driver_section(nvml: dict[str, Any], kernel: dict[str, Any], smi: dict[str, Any], kmod: str | None,
                    user_lib: str | None) -> dict[str, Any]:
    """Pure: the driver section before any source is chosen (version, cuda and source still None)."""
    return {
        "version": None, "cuda": None, "kernel_module": kmod, "user_library": user_lib, "mismatch": False,
        "source": None, "error": None, "libcuda": _libcuda(nvml, smi),
        "sources": {
            "nvml": {"ok": bool(nvml.get("ok")), "error": nvml.get("error")} if nvml else None,
            "sys_module": kernel.get("sys_module"),
            "proc_driver_version": kernel.get("proc"),
            "libnvidia_ml": kernel.get("user_library_path"),
            "nvidia_smi": ({"path": smi.get("path"), "ok": smi.get("error") is None, "error": smi.get("error"),
                            "format": smi.get("format")} if smi else None),
            "wsl_lib": kernel.get("wsl_lib"),
        },
    }


def _merge_sources(driver: dict[str, Any], nvml: dict[str, Any], smi: dict[str, Any]) -> list[dict[str, Any]]:
    """Set the driver's version, CUDA and source from NVML, then nvidia-smi; return the GPUs (NVML's, their
    holes filled from nvidia-smi, else nvidia-smi's)."""
    gpus: list[dict[str, Any]] = []
    if nvml.get("ok"):
        driver["version"] = nvml.get("driver_version")
        driver["cuda"] = nvml.get("cuda")
        driver["source"] = "nvml"
        gpus = [dict(g, source="nvml") for g in nvml.get("gpus", [])]
    if smi.get("driver_version") and driver["version"] is None:
        driver["version"] = smi["driver_version"]
        driver["source"] = "nvidia-smi"
    if driver["cuda"] is None and smi.get("cuda"):
        driver["cuda"] = smi["cuda"]
    if not gpus and smi.get("gpus"):
        gpus = [dict(g, source=f"nvidia-smi {smi.get('format') or ''}".strip()) for g in smi["gpus"]]
    elif gpus and smi.get("gpus"):  # fill holes NVML left (e.g. an old NVML without compute capability)
        by_index = {g.get("index"): g for g in smi["gpus"]}
        for g in gpus:
            other = by_index.get(g.get("index"), {})
            for key in ("compute_capability", "memory_mib", "uuid", "name", "pci_device_id", "pci_bus_id"):
                if g.get(key) is None and other.get(key) is not None:
                    g[key] = other[key]
    return gpus


def _pci_gpus(pci_list: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pure: GPU entries from the PCI devices alone (names from lspci, in PCI order)."""
    gpus = []
    for i, d in enumerate(pci_list):
        m = re.search(r"\[([^\]]+)\]\s*$", d.get("name") or "")
        gpus.append({"index": i, "name": m.group(1) if m else d.get("name"), "uuid": None,
                     "compute_capability": None, "memory_mib": None, "pci_bus_id": d.get("slot"),
                     "pci_device_id": d.get("device_id"), "source": "lspci"})
    return gpus


def _no_driver_error(nvml: dict[str, Any], kernel: dict[str, Any], smi: dict[str, Any], pci: dict[str, Any] | None,
                     *, os_name: str, wsl: int | None) -> str:
    """Pure: why no source found a driver version, in the words for this OS / WSL / PCI bus."""
    pci_devs = (pci or {}).get("devices") or []
    if os_name == "macos":
        return "macOS has no CUDA GPU support (NVIDIA drivers end at macOS 10.13 / CUDA 10.2)"
    if wsl == 1:
        return "WSL1 has no GPU support; convert the distribution to WSL2 (wsl --set-version <distro> 2)"
    if wsl == 2:
        wsl_lib = kernel.get("wsl_lib") or {}
        if not wsl_lib.get("libcuda"):
            return ("WSL2 without GPU passthrough (no libcuda in /usr/lib/wsl/lib): install or "
                    "update the NVIDIA driver on Windows; never install a Linux driver inside WSL")
        return (nvml.get("error") or smi.get("error")
                or "WSL2 GPU libraries are present but the Windows driver did not answer")
    if pci_devs:
        names = sorted({d.get("name") or d.get("device_id") or "?" for d in pci_devs})
        return (f"an NVIDIA GPU is present ({len(pci_devs)}x {', '.join(str(n) for n in names)}) "
                "but no NVIDIA driver is loaded")
    if pci is not None and pci.get("source"):
        return "no NVIDIA GPU found (no NVIDIA display device on the PCI bus) and no NVIDIA driver"
    reasons = [r for r in (nvml.get("error"), smi.get("error")) if r]
    return "no NVIDIA driver found" + (f" ({'; '.join(reasons)})" if reasons else "")

def _libcuda(nvml: dict[str, Any], smi: dict[str, Any]) -> bool | None:
    """Whether the driver's CUDA library (libcuda.so.1, nvcuda.dll) loads: NVML's answer when it gave one
    (nvmlSystemGetCudaDriverVersion_v2 fails with NVML_ERROR_LIBRARY_NOT_FOUND without it, NVML API reference,
    System Queries), else nvidia-smi's ("CUDA Version: N/A"); None when neither says."""
    if nvml.get("ok") and nvml.get("libcuda") is not None:
        return bool(nvml["libcuda"])
    return False if smi.get("libcuda") is False else None


def _bus_key(bus_id: Any) -> str | None:
    """"00000000:0C:00.0" (NVML, nvidia-smi), "0000:0c:00.0" (sysfs), "0c:00.0" (lspci) -> "0:0c:00.0"."""
    m = re.fullmatch(r"(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])", str(bus_id or "").strip())
    if not m:
        return None
    return f"{int(m.group(1) or '0', 16):x}:{m.group(2).lower()}:{m.group(3).lower()}.{m.group(4)}"


def _join_pci_device_ids(gpus: list[dict[str, Any]], pci_list: list[dict[str, Any]]) -> None:
    """Give a GPU record without a PCI device ID the one sysfs / lspci found at its bus address (or the
    only one, when there is one GPU and one NVIDIA display device)."""
    by_bus = {_bus_key(d.get("slot")): d.get("device_id") for d in pci_list if d.get("device_id")}
    for g in gpus:
        if g.get("pci_device_id"):
            continue
        found = by_bus.get(_bus_key(g.get("pci_bus_id")))
        if found is None and len(gpus) == 1 and len(pci_list) == 1:
            found = pci_list[0].get("device_id")
        if found:
            g["pci_device_id"] = found


def parse_visible_devices(value: str | None, gpus: list[dict[str, Any]]) -> dict[str, Any]:
    """CUDA_VISIBLE_DEVICES the way the CUDA runtime reads it: unset = all; empty = none; a list of
    indices / UUIDs (``GPU-...`` prefixes) where enumeration stops at the first invalid entry."""
    if value is None:
        return {"value": None, "visible": [g.get("index") for g in gpus], "hides_all": False}
    visible: list[int] = []
    for item in [x.strip() for x in value.split(",")]:
        if not item:
            break
        match = None
        if re.fullmatch(r"\d+", item):
            match = next((g for g in gpus if g.get("index") == int(item)), None)
        else:
            match = next((g for g in gpus if isinstance(g.get("uuid"), str) and g["uuid"].startswith(item)), None)
        if match is None:
            break  # the CUDA runtime ignores this entry and everything after it
        if match["index"] not in visible:
            visible.append(match["index"])
    return {"value": value, "visible": visible, "hides_all": value.strip() == "" or (bool(gpus) and not visible)}
