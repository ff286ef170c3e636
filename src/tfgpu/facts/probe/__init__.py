"""Read the machine into one JSON-serialisable facts document (schema "tfgpu.facts/1"), fast and safely.

Public entry point: :func:`detect_facts`. Nothing is probed at import time; nothing raises because
something is absent; nothing needs root. Every probe is bounded by ``timeout``; they take turns in one thread, and
one that stalls gets company (tfgpu.facts.probe._ctx.run_concurrently), so a hung probe holds up only itself.
"""

from __future__ import annotations

import os
import time

# Importing the package is cheap (the doctor's console script imports it before its probe child forks):
# detect_facts imports the probes and threading when it runs (never pathlib: machine paths are strings).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from pathlib import Path
    from typing import Any

    from tfgpu.facts.probe._ctx import Ctx

SCHEMA = "tfgpu.facts/1"
DEFAULT_TIMEOUT = 2.0

#: Environment variables that change what CUDA/TensorFlow see; reported verbatim in facts["env"].
ENV_VARS = ("CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "CONDA_PREFIX",
            "VIRTUAL_ENV", "TF_FORCE_GPU_ALLOW_GROWTH", "XLA_FLAGS", "NVIDIA_VISIBLE_DEVICES")

#: Paths whose absence means NVML cannot work on Linux (the kernel module's files, its device
#: nodes, WSL2's driver libraries).
_NVML_SIGNS = ("/proc/driver/nvidia", "/sys/module/nvidia", "/dev/nvidiactl", "/dev/nvidia0", "/dev/dxg",
               "/usr/lib/wsl/lib/libnvidia-ml.so.1")

__all__ = ["DEFAULT_TIMEOUT", "SCHEMA", "detect_facts"]


def _timeout_from(env: Mapping[str, str], timeout: float) -> float:
    raw = env.get("TFGPU_PROBE_TIMEOUT")
    if raw:
        try:
            value = float(raw)
            if 0 < value <= 3600:  # inf or 1e308 would overflow the clocks it is added to
                return value
        except ValueError:
            pass
    return timeout


def _nvml_complete(nvml: dict[str, Any] | None) -> bool:
    """NVML gave everything nvidia-smi would: the driver, and every GPU with its compute capability."""
    if not nvml or not nvml.get("ok") or not nvml.get("driver_version"):
        return False
    gpus = nvml.get("gpus") or []
    return all(g.get("compute_capability") and g.get("memory_mib") for g in gpus)


def _stub_ctypes_util() -> None:
    """In the NVML process only: pynvml imports ``ctypes.util.find_library`` but never calls it, and
    ctypes.util pulls in shutil, tempfile and random (~15-25 ms of the doctor on 2 cores). A stand-in
    module whose find_library imports the real one on first use keeps the behaviour and drops the cost."""
    import sys
    import types

    if "ctypes.util" in sys.modules:
        return
    stub = types.ModuleType("ctypes.util", "stand-in until find_library is called (tfgpu.facts.probe)")

    def find_library(name: str) -> str | None:
        if sys.modules.get("ctypes.util") is stub:
            del sys.modules["ctypes.util"]
        import ctypes.util

        return ctypes.util.find_library(name)

    stub.find_library = find_library  # type: ignore[attr-defined]
    sys.modules["ctypes.util"] = stub


def _nvml_caller(timeout: float, *, isolate: bool, env: Mapping[str, str]) -> Callable[[], dict[str, Any]]:
    """How the NVML job gets its answer: from a forked process started now (before any probe thread
    exists), or from tfgpu.facts.probe.nvml's deadline-bounded thread in this process."""
    if isolate:
        from tfgpu.facts.probe import _child

        if _child.fork_enabled(env):
            def in_child() -> dict[str, Any]:
                _stub_ctypes_util()
                from tfgpu.facts.probe.nvml import query_nvml

                return query_nvml()

            def failed(why: str) -> dict[str, Any]:
                return {"ok": False, "driver_version": None, "cuda": None, "nvml_version": None, "gpus": [],
                        "error": f"NVML: {why}", "error_kind": "timeout" if why.startswith("timed out") else "crash"}

            return _child.start(in_child, failed, timeout)

    from tfgpu.facts.probe.nvml import probe_nvml

    return lambda: probe_nvml(timeout)


def detect_facts(
    *, root: Path | str = "/", env: Mapping[str, str] | None = None, timeout: float = DEFAULT_TIMEOUT,
    isolate_nvml: bool = False, environment: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Probe the machine (or the profile tree at ``root``) and return the facts document.

    ``env`` replaces ``os.environ`` (PATH from it is used to find programs). ``timeout`` bounds every
    probe (``TFGPU_PROBE_TIMEOUT`` overrides it); a probe that does not finish in time leaves its section
    with the error "timed out after N s". ``TFGPU_PROBE_NVML`` = 0 / 1 turns NVML off / on (default: on
    only when probing this machine, i.e. ``root`` is /). ``isolate_nvml`` (the console script) runs NVML
    in a forked process of its own on Linux: it then runs in parallel with the other probes instead of
    taking turns with them on the GIL, and a call that hangs or crashes (a GPU fallen off the bus) is
    killed or contained there and reported as this probe's error. ``environment`` names the Python environment
    to read (``{"prefix": P, "how": ..., "explicit": bool}``, tfgpu.facts.environment); without it the active
    one is read when probing this machine. Its section is added only when it holds a TensorFlow (or was named).
    """
    env = dict(os.environ if env is None else env)
    timeout = _timeout_from(env, timeout)
    t0 = time.monotonic()
    # On this machine NVML's process (isolate_nvml) forks before the probes import anything: importing pynvml is
    # the longest step of a GPU machine's probing, and it then overlaps the imports below
    native = os.fspath(root) in ("/", os.sep)
    early = None
    if native:
        os_name = native_os()
        use_nvml, nvml_skipped = _nvml_choice(True, os.path.exists, env, os_name)
        if use_nvml:
            early = _nvml_caller(timeout, isolate=isolate_nvml, env=env)

    from tfgpu.core.record import replace
    from tfgpu.facts.probe import cuda, system
    from tfgpu.facts.probe._ctx import Ctx, run_concurrently

    ctx = Ctx(root=os.fspath(root), env=env, timeout=timeout)
    os_name = system.detect_os(ctx)
    ctx = replace(ctx, os_name=os_name)  # machine paths follow the machine's rules from here on (Ctx.paths)
    if not native:
        use_nvml, nvml_skipped = _nvml_choice(ctx.native, ctx.exists, env, os_name)

    site_dirs = cuda.site_packages_dirs(ctx)
    jobs: dict[str, Any] = {
        "platform": lambda: system.probe_platform(ctx),
        "python": lambda: system.probe_python(ctx, os_name),
        "conda": lambda: system.probe_conda(ctx),
        "distributions": lambda: system.probe_distributions(ctx, site_dirs),
        "cuda_toolkits": lambda: cuda.probe_toolkits(ctx, os_name),
        "libraries": lambda: cuda.probe_libraries(ctx, site_dirs),
    }
    target = _target_environment(ctx, env, environment)
    if target is not None:
        jobs["environment"] = _environment_job(target, env)
    jobs.update(_driver_jobs(ctx, env, os_name, timeout, use_nvml=use_nvml, isolate_nvml=isolate_nvml,
                             nvml_call=early))
    results, timings, errors = run_concurrently(jobs, timeout)
    return _document(ctx, env, os_name, root, timeout, t0, site_dirs, results, timings, errors,
                     smi_ran="nvidia_smi" in jobs, use_nvml=use_nvml, nvml_skipped=nvml_skipped)


def _document(
    ctx: Ctx, env: Mapping[str, str], os_name: str, root: Path | str, timeout: float, t0: float,
    site_dirs: list[str], results: dict[str, Any], timings: dict[str, float], errors: dict[str, str], *,
    smi_ran: bool, use_nvml: bool, nvml_skipped: str | None,
) -> dict[str, Any]:
    """The facts document from the probe jobs' results (a job that failed leaves its section empty, with
    its error); cuDNN is probed here, after the others, from what they found."""
    plat_cpu = results.get("platform") or {
        "platform": {"os": os_name, "arch": None, "distro": None, "glibc": None, "wsl": None, "container": False,
                     "error": errors.get("platform")},
        "cpu": {"avx": None, "avx2": None, "error": errors.get("platform")}}
    platform, cpu = plat_cpu["platform"], plat_cpu["cpu"]
    drv, gpus, notes, visible = _resolve_gpus(results, errors, env, os_name, platform, smi_ran=smi_ran,
                                              use_nvml=use_nvml, nvml_skipped=nvml_skipped)
    pci = results.get("pci")
    toolkits = results.get("cuda_toolkits") or []
    libraries = results.get("libraries") or {"libcudart": [], "libcudnn": [], "ldconfig_error": None}
    dists = results.get("distributions") or {"tensorflow": [], "pip_nvidia": []}
    cudnn = _timed_cudnn(ctx, toolkits, libraries, site_dirs, dists["pip_nvidia"], timings, errors)
    python = results.get("python") or {"current": None, "interpreters": [], "error": errors.get("python")}
    conda = (results.get("conda") or {}).get("conda") or {"kind": None, "path": None, "version": None,
                                                          "error": errors.get("conda")}
    if os_name == "macos":
        notes.append(platform.get("note") or "macOS has no CUDA GPU support")
    if any(s.get("shadowing") for s in cudnn):
        notes.append("a system cuDNN on LD_LIBRARY_PATH shadows the environment's own cuDNN")

    facts: dict[str, Any] = {
        "schema": SCHEMA,
        "platform": platform,
        "cpu": cpu,
        "python": python,
        "driver": drv,
        "gpus": gpus,
        "cuda_visible_devices": visible,
        "lspci_nvidia": (pci or {}).get("devices", []),
        "cuda_toolkits": toolkits,
        "libraries": {"libcudart": libraries["libcudart"], "libcudnn": libraries["libcudnn"]},
        "cudnn": cudnn,
        "pip_nvidia": dists["pip_nvidia"],
        "conda": conda,
        "env": {k: env.get(k) for k in ENV_VARS},
        "tensorflow": dists["tensorflow"],
        "containers": results.get("containers") or {
            "runtimes": [], "docker_group": None, "toolkit": None,
            "error": errors.get("containers") or ("not probed on " + os_name if os_name != "linux" else None)},
        "notes": notes,
        "provenance": _provenance(platform, cpu, drv, gpus, toolkits, pci, ctx.native),
        "timings": {**timings, "total": round(time.monotonic() - t0, 4)},
        "errors": errors,
        "probe": {"root": str(root), "timeout": timeout, "nvml": use_nvml},
    }
    if libraries.get("ldconfig_error"):
        facts["errors"]["ldconfig"] = libraries["ldconfig_error"]
    if results.get("environment") is not None:  # only with a TensorFlow (or named): else the facts stay as they were
        facts["environment"] = results["environment"]
    return facts


def native_os() -> str:
    """This machine's OS: linux | windows | macos, or sys.platform's name for another (tfgpu.facts.probe.system.detect_os
    answers this for this machine; here it is known before the probes are imported)."""
    import sys

    return {"linux": "linux", "win32": "windows", "darwin": "macos"}.get(sys.platform, sys.platform)


def _nvml_choice(native: bool, exists: Callable[[str], bool], env: Mapping[str, str],
                 os_name: str) -> tuple[bool, str | None]:
    """Whether NVML is probed (``TFGPU_PROBE_NVML``, else only on this machine), and why not when this
    Linux machine has no sign of an NVIDIA driver (``exists``: whether a machine path exists)."""
    nvml_mode = env.get("TFGPU_PROBE_NVML", "").strip().lower()
    use_nvml = nvml_mode in ("1", "true", "yes", "on") or (nvml_mode == "" and native)
    use_nvml = use_nvml and os_name in ("linux", "windows")
    if use_nvml and nvml_mode == "" and os_name == "linux" and not any(exists(p) for p in _NVML_SIGNS):
        # No NVIDIA kernel module, device node or WSL driver: NVML cannot initialise, and importing
        # pynvml (+ ctypes) alone costs ~70 ms of the doctor's start-up. The other sources say why.
        return False, "not probed: no NVIDIA kernel module, device node or WSL driver on this machine"
    return use_nvml, None


def _target_environment(ctx: Ctx, env: Mapping[str, str],
                        environment: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The Python environment to read: the one named, else (this machine only) the active one, else None."""
    target = dict(environment) if environment else None
    if target is None and ctx.native:
        import sys

        from tfgpu.facts.environment import locate

        prefix, how = locate(env=env, own_prefix=sys.prefix)
        target = {"prefix": prefix, "how": how, "explicit": False} if prefix else None
    return target


def _environment_job(target: dict[str, Any], env: Mapping[str, str]) -> Callable[[], dict[str, Any] | None]:
    """The job that reads the environment ``target`` names."""
    def environment_job() -> dict[str, Any] | None:
        from tfgpu.facts.environment import probe_environment

        return probe_environment(str(target["prefix"]), how=str(target.get("how") or ""), shell_env=env,
                                 explicit=bool(target.get("explicit")))

    return environment_job


def _driver_jobs(ctx: Ctx, env: Mapping[str, str], os_name: str, timeout: float, *, use_nvml: bool,
                 isolate_nvml: bool, nvml_call: Callable[[], dict[str, Any]] | None = None,
                 ) -> dict[str, Callable[[], Any]]:
    """The driver's jobs this OS has: NVML (its process forked now, when isolated), nvidia-smi (only when NVML
    left something unanswered), and on Linux the kernel module, the PCI bus and the container runtimes."""
    import threading

    from tfgpu.facts.probe import driver

    jobs: dict[str, Callable[[], Any]] = {}
    # NVML and nvidia-smi last: the jobs take turns (tfgpu.facts.probe._ctx.run_concurrently), and NVML's process
    # has the others' time to answer before its job waits for it
    if os_name == "linux":
        jobs["kernel_module"] = lambda: driver.probe_kernel_module(ctx)
        jobs["pci"] = lambda: driver.probe_pci(ctx)

        def containers_job() -> dict[str, Any]:
            from tfgpu.facts.probe.containers import probe_containers

            return probe_containers(ctx, uid=os.geteuid() if ctx.native and hasattr(os, "geteuid") else None)

        jobs["containers"] = containers_job
    nvml_box: dict[str, Any] = {}
    nvml_done = threading.Event()
    if use_nvml:
        nvml_call = nvml_call or _nvml_caller(timeout, isolate=isolate_nvml, env=env)

        def nvml_job() -> dict[str, Any]:
            try:
                nvml_box["result"] = nvml_call()
                return nvml_box["result"]  # type: ignore[no-any-return]
            finally:
                nvml_done.set()

        jobs["nvml"] = nvml_job
    if os_name in ("linux", "windows"):
        def smi_job() -> dict[str, Any] | None:
            # nvidia-smi initialises NVML itself (often 0.1-1 s on a real GPU machine): the fallback runs
            # only when NVML did not answer with the driver and every GPU's compute capability
            if use_nvml:
                nvml_done.wait(timeout)
                if _nvml_complete(nvml_box.get("result")):
                    return None
            return driver.probe_nvidia_smi(ctx, os_name)

        jobs["nvidia_smi"] = smi_job
    return jobs


def _failed_source(errors: Mapping[str, str], name: str) -> dict[str, Any] | None:
    """Pure: the source section for a job that crashed or timed out; None when it did neither."""
    if name in errors:
        return {"ok": False, "error": f"{name}: {errors[name]}", "error_kind": "timeout"
                if "timed out" in errors[name] else "crash", "gpus": []}
    return None


def _resolve_gpus(
    results: Mapping[str, Any], errors: Mapping[str, str], env: Mapping[str, str], os_name: str,
    platform: Mapping[str, Any], *, smi_ran: bool, use_nvml: bool, nvml_skipped: str | None,
) -> tuple[dict[str, Any], list[dict[str, Any]], list[str], dict[str, Any]]:
    """Pure: the driver section, the GPUs (each marked visible or not), the notes and CUDA_VISIBLE_DEVICES's
    reading, from the driver jobs' results."""
    from tfgpu.facts.probe import driver

    nvml = results.get("nvml") or _failed_source(errors, "nvml")
    smi = results.get("nvidia_smi") or _failed_source(errors, "nvidia_smi")
    kernel = results.get("kernel_module")
    pci = results.get("pci")
    drv, gpus, notes = driver.resolve_driver(nvml, kernel, smi, pci, os_name=os_name, wsl=platform.get("wsl"))
    if smi_ran and "nvidia_smi" not in errors and results.get("nvidia_smi") is None:
        drv["sources"]["nvidia_smi"] = {"ok": None, "error": None,
                                        "skipped": "not run: NVML answered (driver, GPUs, compute capability)"}
    if not use_nvml and drv["sources"]["nvml"] is None:
        drv["sources"]["nvml"] = {"ok": False,
                                  "error": nvml_skipped or "not probed (TFGPU_PROBE_NVML=0 or not this machine)"}
    visible = driver.parse_visible_devices(env.get("CUDA_VISIBLE_DEVICES"), gpus)
    for g in gpus:
        g["visible"] = g.get("index") in visible["visible"]
    if visible["value"] is not None and visible["hides_all"]:
        notes.append(f"CUDA_VISIBLE_DEVICES={visible['value']!r} hides every GPU from CUDA and TensorFlow")
    return drv, gpus, notes, visible


def _timed_cudnn(ctx: Ctx, toolkits: list[dict[str, Any]], libraries: dict[str, Any], site_dirs: list[str],
                 pip_nvidia: list[dict[str, Any]], timings: dict[str, float], errors: dict[str, str],
                 ) -> list[dict[str, Any]]:
    """cuDNN's versions (after the other probes: it reads what they found), its time in ``timings`` and a
    crash in ``errors``."""
    from tfgpu.facts.probe import cuda

    t_cudnn = time.monotonic()
    try:
        cudnn = cuda.probe_cudnn(ctx, toolkits, libraries, site_dirs, pip_nvidia)
    except Exception as exc:
        cudnn, errors["cudnn"] = [], f"probe crashed: {type(exc).__name__}: {exc}"
    timings["cudnn"] = round(time.monotonic() - t_cudnn, 4)
    return cudnn

def _provenance(platform: dict[str, Any], cpu: dict[str, Any], drv: dict[str, Any], gpus: list[dict[str, Any]],
                toolkits: list[dict[str, Any]], pci: dict[str, Any] | None, native: bool) -> dict[str, Any]:
    prov: dict[str, Any] = {
        "driver.version": drv.get("source"),
        "driver.cuda": ("nvml" if drv.get("source") == "nvml" and drv.get("cuda") else
                        "nvidia-smi" if drv.get("cuda") else None),
        "driver.kernel_module": ("/sys/module/nvidia/version" if drv["sources"].get("sys_module") else
                                 "/proc/driver/nvidia/version" if drv["sources"].get("proc_driver_version")
                                 else None),
        "driver.user_library": drv["sources"].get("libnvidia_ml") or ("nvml" if drv.get("user_library") else None),
        "gpus": sorted({g.get("source", "") for g in gpus}) or None,
        "cpu": cpu.get("source"),
        "platform.distro": "/etc/os-release" if platform.get("distro") and platform["os"] == "linux" else None,
        "platform.glibc": ("os.confstr" if native else "ldd --version") if platform.get("glibc") else None,
        "platform.wsl": "/proc/version" if platform.get("wsl") else None,
        "lspci_nvidia": (pci or {}).get("source"),
    }
    for i, t in enumerate(toolkits):
        prov[f"cuda_toolkits[{i}].version"] = t.get("source")
    return prov
