"""NVML through nvidia-ml-py (`pynvml`), imported lazily, asked in a process or a thread with a deadline.

The doctor's console script asks it in a forked process of its own (tfgpu.facts.probe, ``isolate_nvml``), which
imports only this module and pynvml: nothing else here is imported at module level. Elsewhere (the library,
`tfgpu.doctor()` in a notebook) it runs in a daemon thread. Why a thread and not a fresh child Python (conda runs
its libcuda probe in one): that costs 50-150 ms of start-up, and NVML's failure modes we meet in practice
(library missing, driver not loaded, driver/library mismatch) are error codes, not crashes; a *hung*
call (a GPU fallen off the bus makes nvmlInit block for a long time) is bounded by the deadline and the
daemon thread is abandoned (it cannot block interpreter exit). A call that crashes the process outright
is the one case a thread does not cover; `TFGPU_PROBE_NVML=0` turns NVML off for such a machine, and the
other sources (/proc, nvidia-smi, lspci) still answer.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the doctor's probe child runs this)
if TYPE_CHECKING:
    from typing import Any

#: NVML return codes -> our short error kinds (values from pynvml: NVML_ERROR_*)
_KINDS = {
    "NVMLError_LibraryNotFound": "library_not_found",
    "NVMLError_DriverNotLoaded": "driver_not_loaded",
    "NVMLError_LibRmVersionMismatch": "mismatch",
    "NVMLError_NoPermission": "no_permission",
    "NVMLError_InsufficientPower": "insufficient_power",
    "NVMLError_GpuIsLost": "gpu_lost",
}


def cuda_int_to_version(n: int) -> str | None:
    """NVML/driver API integer (12040) -> "12.4"."""
    if n <= 0:
        return None
    return f"{n // 1000}.{(n % 1000) // 10}"


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def query_nvml() -> dict[str, Any]:
    """Ask NVML directly (blocking). Returns {"ok", "driver_version", "cuda", "nvml_version", "gpus",
    "error", "error_kind", "libcuda"}; never raises."""
    out: dict[str, Any] = {"ok": False, "driver_version": None, "cuda": None, "nvml_version": None,
                           "gpus": [], "error": None, "error_kind": None, "libcuda": None}
    try:
        import pynvml
    except ImportError as exc:  # nvidia-ml-py is a dependency, but be tolerant of a broken install
        out["error"] = f"pynvml not importable: {exc}"
        out["error_kind"] = "pynvml_missing"
        return out
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        out["error"] = f"NVML: {exc}"
        out["error_kind"] = _KINDS.get(type(exc).__name__, "other")
        return out
    except Exception as exc:  # a broken binding must not take doctor down
        out["error"] = f"NVML: {type(exc).__name__}: {exc}"
        out["error_kind"] = "other"
        return out
    try:
        _query_system(pynvml, out)
        count = int(pynvml.nvmlDeviceGetCount())
        for i in range(count):
            out["gpus"].append(_query_gpu(pynvml, i))
        out["ok"] = True
    except pynvml.NVMLError as exc:
        out["error"] = f"NVML: {exc}"
        out["error_kind"] = _KINDS.get(type(exc).__name__, "other")
    except Exception as exc:
        out["error"] = f"NVML: {type(exc).__name__}: {exc}"
        out["error_kind"] = "other"
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
    return out


def _query_system(pynvml: Any, out: dict[str, Any]) -> None:
    """Fill ``out`` with the driver version, NVML version, driver CUDA version and whether libcuda loads."""
    out["driver_version"] = _text(pynvml.nvmlSystemGetDriverVersion())
    for getter in ("nvmlSystemGetNVMLVersion",):
        try:
            out["nvml_version"] = _text(getattr(pynvml, getter)())
        except pynvml.NVMLError:
            pass
    try:
        out["cuda"] = cuda_int_to_version(int(pynvml.nvmlSystemGetCudaDriverVersion_v2()))
        out["libcuda"] = True
    except pynvml.NVMLError as exc:
        # v2 asks libcuda itself: NVML_ERROR_LIBRARY_NOT_FOUND when libcuda.so.1 / nvcuda.dll is missing (NVML
        # API reference, System Queries); v1 then answers "a known supported version" without it
        if _KINDS.get(type(exc).__name__) == "library_not_found":
            out["libcuda"] = False
        try:
            out["cuda"] = cuda_int_to_version(int(pynvml.nvmlSystemGetCudaDriverVersion()))
        except pynvml.NVMLError:
            pass


def _query_gpu(pynvml: Any, i: int) -> dict[str, Any]:
    """GPU ``i``'s entry; a field NVML refuses is left None and its error kept under "errors"."""
    gpu: dict[str, Any] = {"index": i, "name": None, "uuid": None, "compute_capability": None,
                           "memory_mib": None}
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(i)
    except pynvml.NVMLError as exc:
        gpu["error"] = f"NVML: {exc}"
        return gpu
    for key, call in (
        ("name", lambda h: _text(pynvml.nvmlDeviceGetName(h))),
        ("uuid", lambda h: _text(pynvml.nvmlDeviceGetUUID(h))),
        ("memory_mib", lambda h: int(pynvml.nvmlDeviceGetMemoryInfo(h).total) // (1024 * 1024)),
        ("compute_capability",
         lambda h: "{}.{}".format(*pynvml.nvmlDeviceGetCudaComputeCapability(h))),
    ):
        try:
            gpu[key] = call(handle)
        except pynvml.NVMLError as exc:
            gpu.setdefault("errors", {})[key] = str(exc)
    try:  # pciDeviceId = device << 16 | vendor (0x1E8110DE); busId "00000000:0C:00.0"
        pci = pynvml.nvmlDeviceGetPciInfo(handle)
        gpu["pci_device_id"] = f"{(int(pci.pciDeviceId) >> 16) & 0xFFFF:04x}" \
            if int(pci.pciDeviceId) & 0xFFFF == 0x10DE else None
        gpu["pci_bus_id"] = _text(pci.busId) or None
    except pynvml.NVMLError as exc:
        gpu.setdefault("errors", {})["pci"] = str(exc)
    return gpu


def probe_nvml(timeout: float) -> dict[str, Any]:
    """:func:`query_nvml` in a daemon thread; after ``timeout`` seconds give up and say so."""
    import threading

    box: list[dict[str, Any]] = []

    def work() -> None:
        try:
            box.append(query_nvml())
        except Exception as exc:  # a binding that breaks while reporting an error: a result, not a traceback
            box.append({"ok": False, "driver_version": None, "cuda": None, "nvml_version": None, "gpus": [],
                        "error": f"NVML: probe crashed: {type(exc).__name__}", "error_kind": "other"})

    thread = threading.Thread(target=work, name="tfgpu-nvml", daemon=True)
    thread.start()
    thread.join(timeout)
    if box:
        return box[0]
    return {"ok": False, "driver_version": None, "cuda": None, "nvml_version": None, "gpus": [],
            "error": f"NVML: timed out after {timeout:g} s", "error_kind": "timeout"}
