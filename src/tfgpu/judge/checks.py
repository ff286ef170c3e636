"""The machine report: one check per line of the doctor's first table (driver, GPUs, environment, TensorFlow
here, CPU build), each with its evidence and fix. Pure."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tfgpu.facts.machine import Machine, gpu_cc_of
from tfgpu.facts.machine import maybe_version as _v
from tfgpu.judge.findings import (
    FAIL,
    PASS,
    SKIP,
    WARN,
    Check,
)

if TYPE_CHECKING:
    from tfgpu.kb.knowledge import KnowledgeBase
from tfgpu.core.tfnames import ALLOW_GROWTH, SMALL_GPU_MIB
from tfgpu.judge.system import _arm_fix
from tfgpu.judge.verdict import last_windows_gpu_series


def machine_checks(m: Machine, kb: KnowledgeBase) -> list[Check]:
    """Checks that do not depend on a target release, in report order."""
    out: list[Check] = []
    add = out.append
    # -- platform
    if m.os is None:
        add(Check("os.supported", SKIP, "operating system unknown", fix="run tfgpu doctor on the machine"))
    elif m.os == "macos":
        mac = kb.series("macos")  # compat/tensorflow.toml's macOS GPU rows: 1.0 and 1.1
        since = f" (none since TF {mac[0]})" if mac else ""
        add(Check("os.supported", FAIL, f"macOS has no CUDA GPU support in TensorFlow{since}",
                  source=f"tensorflow.toml (macOS GPU table ends at {mac[0] if mac else 'none'})",
                  fix="use a Linux machine or WSL2 with an NVIDIA GPU; on Apple silicon see tensorflow-metal"))
    elif m.os == "windows":
        last = last_windows_gpu_series(kb)
        add(Check("os.supported", WARN, f"native Windows: TensorFlow's GPU builds end at {last}",
                  source=f"tensorflow.toml (Windows GPU table ends at {last})",
                  fix=f"for newer TF run tfgpu inside WSL2 (wsl --install), or use --tf {last}"))
    elif m.os == "wsl2":
        add(Check("os.wsl", PASS, "WSL2: the Windows NVIDIA driver provides CUDA inside Linux",
                  source="platform probe",
                  fix="never install a Linux NVIDIA driver inside the WSL2 distribution"))
    elif m.wsl == 1:
        add(Check("os.wsl", FAIL, "WSL1 has no GPU access", fix="convert the distribution: wsl --set-version <distro> 2"))
    else:
        add(Check("os.supported", PASS, f"{m.os}"))
    # -- CPU
    if m.arm_linux:
        add(Check("cpu.arch", FAIL, f"{m.arch}: TensorFlow's Linux {m.arch} builds on PyPI and conda-forge are CPU-only",
                  source="platform probe", fix=_arm_fix(m, kb)))
    if m.avx is False:
        since = str(kb.cpu_floor("avx").tf).removeprefix(">=")  # compat/tensorflow.toml cpu_requirements
        add(Check("cpu.avx", FAIL, f"this CPU has no AVX: official TensorFlow >= {since} wheels die with 'Illegal "
                  "instruction'", source="cpu flags",
                  fix="use a CPU with AVX, an older TensorFlow, or a TensorFlow built from source without AVX"))
    elif m.avx is True:
        add(Check("cpu.avx", PASS, "CPU supports AVX", source="cpu flags"))
    else:
        add(Check("cpu.avx", SKIP, "CPU flags unknown"))
    if m.glibc is not None:
        add(Check("glibc.version", PASS, f"glibc {m.glibc}", source="platform probe"))
    # -- driver and GPUs
    out.extend(_driver_checks(m, kb))
    out.extend(_gpu_checks(m, kb))
    # -- CUDA and cuDNN on the system (only pip recipes up to 2.13 use them)
    and_cuda = kb.and_cuda_from()  # compat/releases.toml: the first release with pip's [and-cuda] extra (2.14.0)
    since = f"{and_cuda.major}.{and_cuda.minor}" if and_cuda else "?"
    if m.toolkits:
        versions = ", ".join(f"{t.get('version')} ({t.get('path')})" for t in m.toolkits)
        add(Check("cuda.toolkit", PASS, f"CUDA toolkit(s): {versions}",
                  source=", ".join(sorted({str(t.get('source')) for t in m.toolkits})),
                  fix=f"only pip installs of TF < {since} use a system CUDA; conda and TF >= {since} bring their own"))
    else:
        add(Check("cuda.toolkit", PASS if m.driver_known else SKIP, "no system CUDA toolkit (fine: conda recipes and "
                  f"TF >= {since} pip wheels bring their own)"))
    if m.cudnns:
        versions = ", ".join(f"{c.get('version')} ({c.get('path')})" for c in m.cudnns)
        add(Check("cudnn.system", PASS, f"cuDNN: {versions}", source=", ".join(sorted({str(c.get('source')) for c in m.cudnns}))))
    # -- environment hazards
    out.extend(_env_checks(m))
    # -- Python and conda
    if m.pythons is not None:
        add(Check("python.interpreters", PASS, f"Python interpreters: {', '.join(m.pythons) or 'none'}",
                  source="python probe"))
    if m.conda:
        add(Check("env.conda", PASS, f"{m.conda.get('kind')} {m.conda.get('version') or ''}".strip(),
                  evidence=str(m.conda.get("path") or "")))
    else:
        add(Check("env.conda", PASS, "no conda/mamba/micromamba: tfgpu's embedded conda engine (rattler) will be used",
                  source="conda probe"))
    out.extend(_tf_checks(m, kb))
    out.extend(_cpu_build_checks(m, kb))
    return out


def _driver_checks(m: Machine, kb: KnowledgeBase) -> list[Check]:
    if not m.driver_known:
        return [Check("driver.installed", SKIP, "driver unknown (not in the facts)")]
    out = []
    if m.driver is None:
        if m.nvidia_pci:
            summary = f"an NVIDIA GPU is present ({m.nvidia_pci} device(s) on PCI) but no NVIDIA driver is loaded"
            fix = ("install the NVIDIA driver with your distribution's tools (e.g. `sudo ubuntu-drivers install`), "
                   "then reboot")
        elif m.os == "wsl2":
            summary = "no NVIDIA driver visible inside WSL2"
            fix = "install or update the NVIDIA driver on Windows (not inside WSL2), then `wsl --shutdown`"
        else:
            summary = "no NVIDIA driver"
            fix = "if this machine has an NVIDIA GPU, install the NVIDIA driver; otherwise TensorFlow can only use the CPU"
        out.append(Check("driver.installed", FAIL, summary, evidence=m.driver_error, source="driver probe", fix=fix))
        return out
    cuda = m.driver_cuda_version(kb)
    overridden = m.driver_source == "override"
    out.append(Check("driver.installed", PASS, f"NVIDIA driver {m.driver_text}" + (f" (CUDA {cuda})" if cuda else "")
                     + (" [override]" if overridden else ""), source="override" if overridden else "driver probe"))
    if m.kernel_module and m.user_library and m.kernel_module != m.user_library:
        out.append(Check(
            "driver.kernel_match", FAIL,
            f"kernel module {m.kernel_module} does not match the user-space driver {m.user_library}",
            evidence="NVML: Driver/library version mismatch", source="driver probe",
            fix="reboot (or unload and reload the nvidia kernel modules) after the driver upgrade",
        ))
    return out


def _gpu_checks(m: Machine, kb: KnowledgeBase) -> list[Check]:
    if m.all_gpus is None:
        return [Check("gpu.present", SKIP, "GPUs unknown (not in the facts)")]
    out: list[Check] = []
    if not m.all_gpus:
        if m.driver is None:
            return out  # driver.installed already explains it
        return [Check("gpu.present", FAIL, "the driver reports no GPU", source="driver probe",
                      fix="check `nvidia-smi`; in a container run with --gpus all")]
    for g in m.all_gpus:
        cc = gpu_cc_of(kb, g)
        arch = kb.arch_name(cc) if cc else None
        mem = g.get("memory_mib")
        desc = f"GPU {g.get('index')}: {g.get('name') or 'unknown model'}" + (f", compute capability {cc}" if cc else "") + (
            f" ({arch})" if arch else "") + (f", {mem} MiB" if mem else "")
        if cc and not g.get("compute_capability"):  # the tables' answer, not the machine's: say which table
            by_id = g.get("pci_device_id") and kb.gpu_cc_by_id(g.get("pci_device_id"))
            desc += (f" (from PCI device ID {g.get('pci_device_id')}, compat/gpus.toml)" if by_id
                     else " (from its model name, compat/gpus.toml)")
        out.append(Check(f"gpu.{g.get('index')}", PASS, desc, source=str(g.get("source") or "gpu probe")))
        if mem and int(mem) <= SMALL_GPU_MIB:
            out.append(Check(
                "gpu.memory", WARN,
                f"GPU {g.get('index')} has {mem} MiB: TensorFlow maps nearly all GPU memory by default, which ends in "
                "CUDNN_STATUS_INTERNAL_ERROR / 'Failed to get convolution algorithm' on small GPUs",
                fix=f"export {ALLOW_GROWTH[0]}={ALLOW_GROWTH[1]} (tfgpu create sets it in the environment)",
            ))
    if m.cuda_visible is not None and m.gpus is not None and len(m.gpus) < len(m.all_gpus):
        status = FAIL if not m.gpus else WARN
        out.append(Check(
            "env.cuda_visible_devices", status,
            f"CUDA_VISIBLE_DEVICES={m.cuda_visible!r} hides {len(m.all_gpus) - len(m.gpus)} of {len(m.all_gpus)} GPU(s)",
            source="environment", fix="unset CUDA_VISIBLE_DEVICES (or list the GPUs you want, e.g. 0,1)",
        ))
    return out


def _env_checks(m: Machine) -> list[Check]:
    out = []
    if m.ld_library_path:
        hits = [p for p in m.ld_library_path.split(":") if p and any(
            k in p.lower() for k in ("cuda", "cudnn"))]
        if hits:
            out.append(Check(
                "env.ld_library_path", WARN,
                "LD_LIBRARY_PATH puts a system CUDA/cuDNN first; it can shadow an environment's own libraries",
                evidence=":".join(hits), source="environment",
                fix="unset LD_LIBRARY_PATH inside tfgpu environments (their activation scripts set what they need)",
            ))
    return out


def _tf_checks(m: Machine, kb: KnowledgeBase) -> list[Check]:
    if m.tensorflow is None:
        return []
    dists = {str(t.get("distribution")): str(t.get("version")) for t in m.tensorflow}
    if not dists:
        return [Check("tf.installed", PASS, "no TensorFlow in this environment (tfgpu create makes a separate one)")]
    out = [Check("tf.installed", PASS, "TensorFlow here: " + ", ".join(f"{k} {v}" for k, v in dists.items()),
                 source="installed distributions")]
    cpu_and_gpu = {"tensorflow", "tensorflow-gpu"} <= set(dists) or {"tensorflow-cpu", "tensorflow-gpu"} <= set(dists)
    if cpu_and_gpu:
        out.append(Check(
            "tf.conflict", FAIL, "tensorflow and tensorflow-gpu are installed together: whichever was installed last "
            "wins the shared files, and the GPU build may be gone",
            evidence=", ".join(f"{k}=={v}" for k, v in dists.items()),
            fix="use a fresh environment: tfgpu create --tf VERSION",
        ))
    gpu = _v(dists.get("tensorflow-gpu"))
    placeholder = kb.placeholder_from("tensorflow-gpu")  # compat/releases.toml: 2.12.0
    if gpu is not None and placeholder is not None and gpu >= placeholder:
        out.append(Check("tf.placeholder", FAIL, f"tensorflow-gpu {gpu} is an empty placeholder that raises an error",
                         fix="pip uninstall tensorflow-gpu && pip install 'tensorflow[and-cuda]'"))
    return out


def _cpu_build_checks(m: Machine, kb: KnowledgeBase) -> list[Check]:
    """An installed TensorFlow whose wheels are CPU-only builds, as read from the wheels (compat/wheels.toml:
    `tensorflow` 1.15.2+ and 2.0.x, while 1.15.0 is a CUDA build; native Windows from 2.11)."""
    out = []
    for t in m.tensorflow or ():
        dist, ver = str(t.get("distribution") or ""), _v(t.get("version"))
        if dist not in ("tensorflow", "tensorflow-gpu") or ver is None:
            continue
        if kb.cuda_build(dist, ver, m.tf_os) is False:
            out.append(Check(
                "tf.cpu_build", WARN, f"{dist} {ver} is a CPU-only build: its wheel carries no CUDA code "
                "(build_info.py and its shared objects, read from the wheel)", source="compat/wheels.toml",
                fix="tfgpu create --tf VERSION makes an environment with a GPU build"))
    return out
