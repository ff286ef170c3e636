"""What a matched line implies beyond its pattern: the CUDA or cuDNN version a library name asks for, whether
the machine's facts agree, and the cause and fix rewritten for them."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from tfgpu.judge.explain_catalog import Entry


def _cuda_of_soname(lib: str) -> str | None:
    """The CUDA release a library name pins, where the name says it (None when it does not).

    Up to CUDA 10.0 every library's soname carried the CUDA version (libcublas.so.10.0); from 10.1
    only cudart does (libcudart.so.10.1, then libcudart.so.11.0 for every 11.x, .so.12, .so.13).
    Windows DLLs: cudart64_100.dll = 10.0, cudart64_110.dll = 11.x, cudart64_12.dll = 12.x.
    """
    m = re.match(r"(?:lib)?(\w+?)\.so\.(\d+)(?:\.(\d+))?", lib)
    if m:
        name, major, minor = m.group(1), int(m.group(2)), m.group(3)
        if name == "cudart":
            if major >= 11:
                return f"{major}.x"
            return f"{major}.{minor or 0}"
        if minor is not None and (major, int(minor)) <= (10, 0) and major >= 7:
            return f"{major}.{minor}"
        return None
    m = re.match(r"(\w+?)64_(\d+)\.dll$", lib, re.IGNORECASE)
    if m:
        name, digits = m.group(1).lower(), m.group(2)
        if name == "cudart" or (name.startswith("cu") and len(digits) >= 2 and int(digits[:-1] or 0) <= 10):
            if len(digits) == 1 or (len(digits) == 2 and int(digits) >= 11):
                return f"{int(digits)}.x"
            major, minor = int(digits[:-1]), int(digits[-1])
            if major >= 11:
                return f"{major}.x"
            return f"{major}.{minor}"
    return None


def _cudnn_of_soname(lib: str) -> str | None:
    m = re.match(r"(?:lib)?cudnn[\w]*?(?:\.so\.(\d+)|64_(\d+)\.dll)", lib, re.IGNORECASE)
    if m:
        return m.group(1) or m.group(2)
    return None


def _version_matches(wanted: str, have: str) -> bool:
    if wanted.endswith(".x"):
        return have.split(".")[0] == wanted[:-2]
    return have.split(".")[:2] == wanted.split(".")[:2]


def _describe(items: Sequence[Mapping[str, Any]], label: str) -> str:
    parts = []
    for it in items:
        v = it.get("version")
        if not v:
            continue
        p = it.get("path")
        parts.append(f"{label} {v} ({p})" if p else f"{label} {v}")
    return ", ".join(dict.fromkeys(parts))


_CUINIT_WITH_DRIVER = frozenset({"cuda.cuinit_compat_not_supported", "cuda.cuinit_system_driver_mismatch"})


def refine_cause(entry: Entry, groups: Mapping[str, str], facts: Mapping[str, Any] | None) -> str | None:
    """A cause sentence specific to this machine, from the probe facts (None: nothing to add)."""
    if not facts:
        return None
    if entry.id.startswith("container."):  # what the container probes say about this machine (issue 19)
        from tfgpu.judge.containers import explain_cause

        return explain_cause(entry.id, groups, facts)
    lib = groups.get("lib") or ""
    toolkits = [t for t in facts.get("cuda_toolkits") or [] if isinstance(t, Mapping)]
    cudnns = [c for c in facts.get("cudnn") or [] if isinstance(c, Mapping)]
    driver = facts.get("driver") if isinstance(facts.get("driver"), Mapping) else None
    if entry.id.startswith(("dlopen.", "windows.cuda_dll")) or entry.id == "dlopen.import_time":
        cudnn_major = _cudnn_of_soname(lib) if "cudnn" in lib.lower() else None
        if cudnn_major:
            have = _describe(cudnns, "cuDNN")
            ok = [c for c in cudnns if str(c.get("version", "")).split(".")[0] == cudnn_major]
            if ok:
                where = ok[0].get("path") or "this machine"
                return (f"TensorFlow wants cuDNN {cudnn_major} ({lib}); cuDNN {ok[0].get('version')} is "
                        f"installed at {where} but the loader does not find it: put its lib directory on "
                        "LD_LIBRARY_PATH (PATH on Windows).")
            return (f"TensorFlow wants cuDNN {cudnn_major} ({lib}); "
                    + (f"installed here: {have}." if have else "no cuDNN was found on this machine."))
        if lib.startswith(("libcuda.", "nvcuda")):
            if driver and driver.get("version"):
                return (f"An NVIDIA driver {driver['version']} is installed, but {lib} is not on the "
                        "loader path of this process (container without --gpus, or a broken install).")
            err = f" ({driver['error']})" if driver and driver.get("error") else ""
            return f"No NVIDIA driver was found on this machine{err}, so there is no {lib}."
        wanted = _cuda_of_soname(lib)
        if wanted:
            have = _describe(toolkits, "CUDA")
            shown = wanted.replace(".x", "")
            ok = [t for t in toolkits if t.get("version") and _version_matches(wanted, str(t["version"]))]
            if ok:
                where = ok[0].get("path") or "this machine"
                return (f"TensorFlow wants CUDA {shown}'s libraries ({lib}); CUDA {ok[0].get('version')} "
                        f"is installed at {where} but the loader does not find it there: add its lib64 "
                        "directory to LD_LIBRARY_PATH (its bin directory to PATH on Windows).")
            return (f"TensorFlow wants CUDA {shown}'s libraries ({lib}); "
                    + (f"installed here: {have}." if have else "no CUDA toolkit was found on this machine."))
        return None
    if entry.id == "cuda.no_device_at_init":
        return _wsl_cause(facts)
    if entry.id == "cuda.driver_insufficient" and driver:
        if driver.get("version"):
            return (f"The driver here is {driver['version']}"
                    + (f", which supports CUDA up to {driver['cuda']}" if driver.get("cuda") else "")
                    + "; the CUDA runtime TensorFlow loaded is newer than that.")
        return None
    if entry.id == "cudnn.version_mismatch" and cudnns:
        return f"cuDNN installed here: {_describe(cudnns, 'cuDNN')}; TensorFlow needs >= {groups.get('compiled')}."
    # every cuInit failure that means "no usable driver/GPU here" (not the driver-mismatch ones, which
    # presuppose a driver): what the doctor knows about this machine's driver
    if (entry.id.startswith("cuda.cuinit") and entry.id not in _CUINIT_WITH_DRIVER) and driver is not None:
        gpus = facts.get("gpus")
        if not driver.get("version"):
            err = f": {driver['error']}" if driver.get("error") else ""
            return f"No NVIDIA driver is loaded on this machine{err}."
        if isinstance(gpus, list) and not gpus:
            return f"Driver {driver['version']} is installed but it reports no GPU."
    return None


def _wsl_cause(facts: Mapping[str, Any]) -> str | None:
    """Whether the machine the facts describe is WSL2, which decides the likely cause of a cuInit NO_DEVICE."""
    plat = facts.get("platform") if isinstance(facts.get("platform"), Mapping) else None
    if not plat or not plat.get("os"):
        return None
    if plat.get("wsl") == 2:
        return ("This machine runs WSL2: the libcuda.so.1 that was loaded is probably not the Windows driver's "
                "/usr/lib/wsl/lib/libcuda.so.1.")
    return "This machine is not WSL2: the causes after the WSL2 one apply (CUDA_VISIBLE_DEVICES, --gpus, the driver)."


#: Facts that one line states and another line's cause needs (first occurrence kept).
_CONTEXT = {
    "driver_hint": ("insufficient driver version", re.compile(r"possibly insufficient driver version: (?P<ver>[\d.]+)")),
    "cudnn_loaded": ("Loaded cuDNN version", re.compile(r"Loaded cuDNN version (?P<ver>\d+)")),
}


#: cuDNN could not start (handle, init, convolution algorithms, and the Check failed on them that aborts
#: TF 1.x): the findings a driver hint explains.
_CUDNN_INIT = re.compile(
    r"(?i)CUDNN_STATUS_(?:NOT_INITIALIZED|INTERNAL_ERROR|EXECUTION_FAILED|ARCH_MISMATCH)|cudnn handle"
    r"|DNN library (?:initialization failed|is not found)|convolution algorithm|GetConvolveAlgorithms"
)


#: Both wordings: ``7301 (compatibility version 7300) but source was compiled with 7004`` (TF <= 1.x)
#: and ``8.0.4 but source was compiled with: 8.1.0`` (TF >= 2).
_CUDNN_MISMATCH = re.compile(
    r"(?i)Loaded runtime CuDNN library:? (?P<loaded>\d[\d.]*)(?: \(compatibility version \d+\))?,? "
    r"but source was compiled with:? (?P<compiled>\d[\d.]*)"
)


def cudnn_version(text: str) -> tuple[int, ...]:
    """``"8.1.0"`` -> (8, 1, 0); cuDNN's integer form ``"7301"``/``"8904"`` -> (7, 3, 1)/(8, 9, 4);
    ``"5110"`` -> (5, 1, 10) (major*1000 + minor*100 + patch)."""
    text = text.strip(".")
    if "." in text:
        return tuple(int(p) for p in text.split(".") if p.isdigit())
    n = int(text)
    if n < 1000:  # a bare major ("8")
        return (n,)
    return (n // 1000, (n % 1000) // 100, n % 100)


def _dotted(v: tuple[int, ...]) -> str:
    return ".".join(str(p) for p in v)


def _cudnn_sentence(m: re.Match[str], loaded_line: tuple[int, str] | None) -> str:
    loaded, compiled = cudnn_version(m.group("loaded")), cudnn_version(m.group("compiled"))
    if loaded[:1] != compiled[:1]:
        rel = "a different major version, which never works"
    elif loaded < compiled:
        rel = "the loaded one is older"
    else:
        rel = "the loaded one is newer, but TensorFlow releases of that age accept only the same major.minor"
    out = (f"In this log cuDNN {_dotted(loaded)} is loaded at run time while TensorFlow was compiled with "
           f"cuDNN {_dotted(compiled)} ({rel}).")
    if loaded_line is not None:
        lineno, ver = loaded_line
        out += f" Line {lineno} reports cuDNN {_dotted(cudnn_version(ver))} loaded."
    return out


_SONAME = re.compile(r"\b(?:lib)?(?P<stem>[A-Za-z][A-Za-z_+-]*?)(?:\.so\.|64_)(?P<ver>\d+(?:\.\d+)*)")


def _library_versions(text: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for m in _SONAME.finditer(text):
        out.setdefault(m.group("stem").lower(), set()).add(m.group("ver"))
    return out


def _same_version(a: str, b: str) -> bool:
    pa, pb = a.split("."), b.split(".")
    n = min(len(pa), len(pb))
    return pa[:n] == pb[:n]


def consistent_with_line(text: str, line: str) -> str:
    """``text`` without the sentences that name another version of a library the log line names
    (a libcusolver.so.10 line is not told about libcusolver.so.11)."""
    have = _library_versions(line)
    if not have or (".so." not in text and "64_" not in text):
        return text
    sentences = re.split(r"(?<=[.;])\s+(?=[A-Z(])", text)
    kept = []
    for sentence in sentences:
        other = _library_versions(sentence)
        clash = any(stem in have and not any(_same_version(v, h) for v in vers for h in have[stem])
                    for stem, vers in other.items())
        if not clash:
            kept.append(sentence)
    return " ".join(kept) if kept else text


@functools.lru_cache(maxsize=64)
def implied_tensorflow(lib: str) -> tuple[str, tuple[str, ...]] | None:
    """What a library name asks for ("CUDA 10.0", "CUDA 11.x", "cuDNN 8") and the TensorFlow series built with it,
    oldest first (the knowledge base's tested build configurations, of Windows for a DLL); None when the name pins no
    version or no series matches."""
    low = lib.lower()
    cudnn = _cudnn_of_soname(lib) if "cudnn" in low else None
    cuda = None if cudnn else _cuda_of_soname(lib)
    if not cudnn and not cuda:
        return None
    from tfgpu.kb.knowledge import load_kb
    from tfgpu.kb.versions import normalize_cuda, series_of, version

    os_name = "windows" if low.endswith(".dll") else "linux"

    def wanted(built_cuda: str, built_cudnn: str) -> bool:
        if cudnn:
            return built_cudnn.split(".")[0] == cudnn
        assert cuda is not None
        if cuda.endswith(".x"):
            return built_cuda.split(".")[0] == cuda[:-2]
        return normalize_cuda(built_cuda) == cuda

    series = sorted({series_of(b.tf) for b in load_kb().builds if b.os == os_name and wanted(str(b.cuda), str(b.cudnn))},
                    key=version)
    if not series:
        return None
    return (f"cuDNN {cudnn}" if cudnn else f"CUDA {cuda}"), tuple(series)


def fill_versions(fix: str, lib: str) -> str:
    """A fix that says `tfgpu compat --tf VERSION` / `tfgpu create --tf VERSION`, with the versions the library name in
    the log implies filled in (issue 29: the log said CUDA 10.0, the fix said VERSION)."""
    if "--tf VERSION" not in fix or not lib:
        return fix
    implied = implied_tensorflow(lib)
    if implied is None:
        return fix
    label, series = implied
    newest = series[-1]
    exact_cuda = label.startswith("CUDA ") and not label.endswith(".x")
    compat = f"tfgpu compat --cuda {label[5:]}" if exact_cuda else f"tfgpu compat --tf {newest}"
    fix = fix.replace("tfgpu compat --tf VERSION", compat).replace("tfgpu create --tf VERSION", f"tfgpu create --tf {newest}")
    span = series[0] if len(series) == 1 else f"{series[0]}-{series[-1]}"
    return f"The log asks for {label}, which TensorFlow {span} {'uses' if len(series) == 1 else 'use'}. {fix}"
