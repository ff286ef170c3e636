"""Pure verdicts: facts + knowledge base + request -> checks, per-target verdicts, a recommendation.

Nothing here touches the machine. ``facts`` is the probe document (schema tfgpu.facts/1); a
missing section means "unknown", never "absent". Every decision names the check it comes from,
the evidence and the fix, so the renderer only has to print.

Vocabulary (README, "Verdicts"):
- ready: tfgpu can build a working GPU environment for this release here, as the machine is;
- caveats: it will run, with named risks (minor-version compatibility, PTX JIT, ...);
- blocked: the machine must change (driver, OS, GPU, CPU), or no backend can provide it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from packaging.version import Version

from tfgpu._record import field, record, replace
from tfgpu.errors import DataError
from tfgpu.findings import BLOCKED as BLOCKED  # re-exported, with the records below: callers look here
from tfgpu.findings import CAVEATS as CAVEATS
from tfgpu.findings import ERROR as ERROR
from tfgpu.findings import FAIL as FAIL
from tfgpu.findings import PASS as PASS
from tfgpu.findings import READY as READY
from tfgpu.findings import SKIP as SKIP
from tfgpu.findings import WARN as WARN
from tfgpu.findings import BackendVerdict as BackendVerdict
from tfgpu.findings import Check as Check
from tfgpu.findings import Finding as Finding
from tfgpu.findings import TargetVerdict as TargetVerdict
from tfgpu.gpu_rules import gpu_findings
from tfgpu.knowledge import register_indexer
from tfgpu.machine import ARM_ARCHS as ARM_ARCHS
from tfgpu.machine import Machine as Machine
from tfgpu.machine import gpu_cc_of as gpu_cc_of
from tfgpu.machine import maybe_version as _v
from tfgpu.machine import resolve_version as resolve_version
from tfgpu.versions import normalize_cuda, series_of, version

if TYPE_CHECKING:
    from tfgpu.facts import Facts
    from tfgpu.knowledge import Build, KnowledgeBase, Recipe, Release


#: GPUs with at most this much memory get the memory-growth advice (seed 000: MX150 2 GB,
#: seed 002: CUDNN_STATUS_INTERNAL_ERROR / "Failed to get convolution algorithm" from TF
#: mapping nearly all GPU memory). tfgpu create sets TF_FORCE_GPU_ALLOW_GROWTH=true for them.
SMALL_GPU_MIB = 4096

ALLOW_GROWTH = "TF_FORCE_GPU_ALLOW_GROWTH=true"

#: Blockers that come from the machine alone, whatever the release (judge_newest_workable stops at them).
MACHINE_BLOCKERS = frozenset({"os.supported", "os.wsl", "driver.installed", "driver.kernel_match", "gpu.present",
                              "env.cuda_visible_devices", "cpu.arch"})


@record
class Recommendation:
    """What the doctor recommends here: a release and the command that builds it, or the CPU route
    (``backend`` "cpu"). ``instead_of`` and ``why_not`` are set when it replaces a blocked ``--tf`` target."""

    tf: str
    backend: str | None
    recipe: str | None
    recipe_id: str | None
    verdict: str  # ready | caveats, or "cpu" for the CPU route
    command: str
    why: str | None = None  # the CPU route: why no release can use a GPU here ("; "-joined, may be empty)
    instead_of: str | None = None  # the blocked --tf target this recommendation replaces
    why_not: str | None = None  # one line on why that target does not work here

    def to_json(self) -> dict[str, Any]:
        """The doctor JSON's ``recommendation`` (schema tfgpu.doctor/1; the optional fields only when set)."""
        out: dict[str, Any] = {"tf": self.tf, "backend": self.backend, "recipe": self.recipe,
                               "recipe_id": self.recipe_id, "verdict": self.verdict, "command": self.command}
        for key in ("why", "instead_of", "why_not"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


# --------------------------------------------------------------------------- facts accessors


# --------------------------------------------------------------------------- environment checks


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
                fix=f"export {ALLOW_GROWTH} (tfgpu create sets it in the environment)",
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


# --------------------------------------------------------------------------- per-target verdicts


def system_cuda_serves(have: Version, built: Version, tf: Version, kb: KnowledgeBase) -> bool:
    """Does a system CUDA toolkit ``have`` provide the libraries pip's TensorFlow ``tf`` (built with CUDA ``built``)
    loads? The same major.minor always; another minor of the same major where both rules of compat/rules.toml hold:
    `cuda-libraries-per-major` for the toolkit installed and the one TF was built with (from CUDA 11.1 the sonames
    carry the major only; CUDA 11.0 ships libcusolver.so.10) and `system-cuda-any-minor` for TF (2.5+; 2.4 loads
    libcusolver.so.10, which only CUDA 11.0 ships)."""
    if have.major != built.major:
        return False
    return have.minor == built.minor or (_any_minor_serves(built, tf, kb)
                                         and kb.rule("cuda-libraries-per-major").holds(have))


def _any_minor_serves(built: Version, tf: Version, kb: KnowledgeBase) -> bool:
    return kb.rule("cuda-libraries-per-major").holds(built) and kb.rule("system-cuda-any-minor").holds(tf)


def _first_minor_serving(major: int, kb: KnowledgeBase) -> int:
    """The lowest minor of CUDA ``major`` whose libraries serve programs built with its other minors (11 -> 1)."""
    rule = kb.rule("cuda-libraries-per-major")
    return next((m for m in range(100) if rule.holds(f"{major}.{m}")), 0)


def system_cuda_installed(m: Machine, cuda: str, tf: Version, kb: KnowledgeBase) -> bool:
    """Is a system CUDA toolkit installed that serves pip's TensorFlow ``tf``, built with CUDA ``cuda``?"""
    want = _v(normalize_cuda(cuda))
    return want is not None and any(
        have is not None and system_cuda_serves(have, want, tf, kb) for have in (_v(t.get("version")) for t in m.toolkits))


def system_cudnn_installed(m: Machine, cudnn: str) -> bool:
    """Is a system cuDNN installed of ``cudnn``'s major version with at least its minor?"""
    want = _v(cudnn)
    return want is not None and any(
        have is not None and have.major == want.major and have.release >= want.release[:2]
        for have in (_v(c.get("version")) for c in m.cudnns))


def system_cudnn_minor_unstated(m: Machine, cudnn: str) -> bool:
    """Is a system cuDNN of ``cudnn``'s major given without its minor ("7", "8": a facts document written from
    a report)? Then whether it is new enough is unknown, not known to be too old."""
    want = _v(cudnn)
    return want is not None and any(
        "." not in str(c.get("version") or "") and have is not None and have.major == want.major
        for c, have in ((c, _v(c.get("version"))) for c in m.cudnns))


def driver_findings(m: Machine, kb: KnowledgeBase, cuda: str, needs_ptx_jit: bool) -> tuple[list[Finding], list[Finding]]:
    """Can this driver run a CUDA ``cuda`` runtime? Returns (blockers, caveats)."""
    blockers: list[Finding] = []
    caveats: list[Finding] = []
    if m.driver is None:
        if not m.driver_known:  # as for an undescribed CUDA or cuDNN: said, not taken for fine
            caveats.append(Finding(
                "driver.unknown", f"the facts do not describe the NVIDIA driver: whether it runs CUDA {cuda} is not checked",
                fix="run tfgpu doctor on the machine itself (it reads the driver), or pass --driver VERSION"))
        return blockers, caveats  # a known missing driver: the machine-level blocker covers it
    want = _v(normalize_cuda(cuda))
    have = m.driver_cuda_version(kb)
    if want is None:
        return blockers, caveats
    if have is None:  # older than every driver floor in the CUDA table
        toolkit = kb.toolkit(cuda)
        floor_text = toolkit.min_driver_text("windows" if m.os in ("windows", "wsl2") else "linux") if toolkit else ""
        blockers.append(Finding(
            "driver.cuda",
            f"needs CUDA {want}; driver {m.driver_text} is older than every driver CUDA {want} supports"
            + (f" (>= {floor_text})" if floor_text else ""),
            fix=f"upgrade the NVIDIA driver to >= {floor_text}" if floor_text else "upgrade the NVIDIA driver",
        ))
        return blockers, caveats
    os_key = "windows" if m.os in ("windows", "wsl2") else "linux"  # WSL2 reports the Windows driver
    toolkit = kb.toolkit(cuda)
    floor = toolkit.min_driver_text(os_key) if toolkit else None
    if (have.major, have.minor) >= (want.major, want.minor):
        return blockers, caveats
    mc = kb.minor_compat(want.major)
    mc_floor = mc.min_driver(os_key) if mc else None
    upgrade = f"upgrade the NVIDIA driver to >= {floor}" if floor else f"upgrade the NVIDIA driver to one supporting CUDA {want}"
    # minor-version compatibility exists for the majors compat/cuda.toml has a row for (CUDA 11 onwards)
    if have.major == want.major and mc_floor is not None and m.driver >= mc_floor:
        if needs_ptx_jit:
            blockers.append(Finding(
                "driver.cuda",
                f"needs CUDA {want}; driver {m.driver_text} supports CUDA {have} and would run it only through minor-version "
                f"compatibility, which does not cover the PTX JIT this GPU needs",
                fix=upgrade,
            ))
        else:
            caveats.append(Finding(
                "driver.cuda",
                f"built with CUDA {want} (the CUDA libraries installed may be a newer {want.major}.x: `tfgpu create` "
                f"reports them); driver {m.driver_text} (CUDA {have}) runs CUDA {want.major}.x through minor-version compatibility "
                f"(driver >= {mc.min_driver_text(os_key) if mc else mc_floor}); not covered: "
                f"{mc.not_covered if mc else 'PTX JIT'}",
                fix=upgrade,
            ))
        return blockers, caveats
    blockers.append(Finding(
        "driver.cuda",
        f"needs CUDA {want}, which needs driver >= {floor or '?'}; this driver {m.driver_text} supports CUDA {have}",
        fix=upgrade,
    ))
    return blockers, caveats


def _glibc_findings(m: Machine, kb: KnowledgeBase, rel: Release) -> list[Finding]:
    """glibc against the wheels: the manylinux tag decides whether pip installs them; the highest GLIBC_
    symbol version their .so files need (read from the wheels, compat/wheels.toml) whether they load.
    Of the wheels for this machine's Pythons, the one needing the least glibc counts."""
    if m.glibc is None:
        return []
    fix = "use the conda backend, or a newer Linux distribution"
    if rel.glibc and m.glibc < rel.glibc:
        return [Finding(
            "glibc.manylinux", f"{rel.dist} {rel.version} wheels need glibc >= {rel.glibc} ({rel.linux_platform}); "
            f"this machine has {m.glibc}, so pip cannot install them", fix=fix)]
    # only when every wheel this machine could take was read: an unread tag may need less
    tags = [f"cp{p.replace('.', '')}" for p in (m.pythons if m.pythons is not None else rel.linux_pythons)
            if p in rel.linux_pythons]
    read_tags = {w.python for w in kb.wheel_facts(rel.dist, rel.version, "linux") if w.glibc is not None}
    read = kb.glibc_floor(rel.dist, rel.version, m.pythons) if tags and set(tags) <= read_tags else None
    if read is not None and read.glibc is not None and m.glibc < read.glibc:
        return [Finding(
            "glibc.symbols", f"{rel.dist} {rel.version} ({read.file}) needs glibc >= {read.glibc}: its shared objects "
            f"use GLIBC_{read.glibc} symbols although the wheel is tagged {rel.linux_platform or 'manylinux'}; "
            f"this machine has {m.glibc}, so pip installs it but `import tensorflow` fails "
            f"(version `GLIBC_{read.glibc}' not found)", fix=fix)]
    return []


def _arm_fix(m: Machine, kb: KnowledgeBase) -> str:
    jetson = kb.platform_build("jetson") if m.jetson else None
    if jetson is not None:  # NVIDIA's own wheels (compat/tensorflow.toml `platform_builds`)
        release = f" (this one runs L4T {m.l4t})" if m.l4t else ""
        return f"on a Jetson{release}, install NVIDIA's build for its JetPack: {jetson.fix(kb)}"
    return ("build TensorFlow from source for this CPU with CUDA, or run an NVIDIA container built for it "
            "(Grace Hopper, DGX Spark); tfgpu cannot create this environment")


def _recipe_cuda(kb: KnowledgeBase, recipe: Recipe, v: Version, os: str, default_cuda: str, default_cudnn: str,
                 driver_cuda: Version | None = None) -> tuple[str, str]:
    """The CUDA/cuDNN a recipe really brings (Anaconda's builds do not always use upstream's). Of a
    channel's CUDA variants of one release, the solver takes the newest the driver allows (conda's __cuda
    virtual package = the driver's CUDA): the newest variant <= ``driver_cuda``, else the oldest."""
    if recipe.backend == "conda":
        rows = kb.conda_packages(v=v, os="windows" if os == "windows" else "linux")
        forge = _arch_build(recipe) == "conda-forge"
        rows = [r for r in rows if r.name in ("tensorflow-gpu", "tensorflow") and (r.cudatoolkit or r.cuda)
                and (r.channel == "conda-forge") == forge]  # each channel's own builds
        if rows and forge:
            # a variant the feedstock dropped again (2.19.1's CUDA 12.9) has older builds than the variant
            # that replaced it: the solver takes the newest build, so the replacement is what installs
            rows = [r for r in rows if not r.raw.get("dropped")] or rows
            by_cuda = sorted(rows, key=lambda r: version(normalize_cuda(r.cuda or r.cudatoolkit)))
            allowed = [r for r in by_cuda if driver_cuda is None
                       or version(normalize_cuda(r.cuda or r.cudatoolkit)) <= driver_cuda]
            rows = [allowed[-1] if allowed else by_cuda[0]]
        if rows:
            r = rows[0]
            return (r.cudatoolkit or r.cuda or default_cuda), (r.cudnn or default_cudnn)
    return default_cuda, default_cudnn


def _arch_build(recipe: Recipe) -> str:
    """Whose binaries a recipe installs: conda-forge's own builds, or the official wheels (pip and the
    conda+pip recipes; Anaconda's builds are judged by the wheels' rows, compat/tf_archs.toml)."""
    return "conda-forge" if recipe.backend == "conda" and "conda-forge" in recipe.channels else "pip"


def _backend_name(recipe: Recipe) -> str:
    return "pip" if recipe.backend == "pip" else "conda"


def recipe_conda_package(recipe: Recipe) -> tuple[str, str] | None:
    """(TensorFlow package, channel family) a conda recipe installs, read from its own packages and channels
    (compat/recipes.toml: "python={python},tensorflow-gpu={tf}" on defaults -> ("tensorflow-gpu", "anaconda"))."""
    conda_part = recipe.packages.partition("; pip:")[0]
    names = [spec.strip().split("=")[0].strip() for spec in conda_part.split(",")]
    package = next((n for n in names if n.startswith("tensorflow")), None)
    if package is None:
        return None
    return package, "conda-forge" if "conda-forge" in recipe.channels else "anaconda"


def last_windows_gpu_series(kb: KnowledgeBase) -> str:
    """The last series with a native-Windows GPU build (2.10), from the tested build configurations (compat/
    tensorflow.toml's Windows GPU rows, which the knowledge base must have)."""
    series = kb.series("windows")
    if not series:
        msg = "compat/tensorflow.toml has no Windows GPU build rows"
        raise DataError(msg, hint="reinstall tfgpu: python3 -m pip install --force-reinstall tfgpu")
    return series[0]


def _after_windows_gpu(kb: KnowledgeBase, v: Version) -> bool:
    last = version(last_windows_gpu_series(kb))
    return v.release[:2] > last.release[:2]


def recipe_available(kb: KnowledgeBase, recipe: Recipe, v: Version, os: str) -> bool:
    """Conda metapackages exist only for the versions the channel has."""
    if recipe.backend != "conda":
        return True
    want = recipe_conda_package(recipe)
    if want is None:
        return True
    rows = kb.conda_packages(name=want[0], v=v, os="windows" if os == "windows" else "linux")
    # Anaconda's channel goes by three names; conda-forge's builds are only conda-forge's
    same = ("anaconda", "defaults", "main") if want[1] == "anaconda" else (want[1],)
    return any(r.channel in same for r in rows)


def judge_release(facts: Facts, kb: KnowledgeBase, v: Version, *, backend: str = "auto",
                  machine: Machine | None = None) -> TargetVerdict:
    """The verdict for one exact release on this machine, its fixes naming what runs here."""
    m = machine or Machine.from_facts(facts, kb)
    return _presented(facts, kb, v, _judge_release(facts, kb, v, backend=backend, machine=m), backend=backend, machine=m)


def _presented(facts: Facts, kb: KnowledgeBase, v: Version, tv: TargetVerdict, *, backend: str,
               machine: Machine) -> TargetVerdict:
    """A judged release as the doctor shows it, with what never changes its verdict: the container route
    after the recipes (backend auto, on Linux and WSL2 x86_64, for a release some recipe installs: shown, never
    ranked) and fixes that name what runs here (:func:`runnable_fixes`). judge_newest_workable adds them to
    the release a series settles on only, not to every patch release it tries."""
    m = machine
    if backend == "auto" and tv.backends and (m.os or "linux") in ("linux", "wsl2") and not m.arm_linux:
        from tfgpu.containers import judge_container

        tv = replace(tv, backends=(*tv.backends, judge_container(facts, kb, v, m, wanted="container")))
    return runnable_fixes(tv) if m.conda is None else tv


def runnable_hint(text: str) -> str:
    """A fix for a machine without mamba, micromamba or conda: `--backend conda` would stop and ask for
    one, tfgpu's embedded engine (`--backend rattler`) builds the same conda recipe."""
    return text.replace("--backend conda", "--backend rattler")


def runnable_fixes(tv: TargetVerdict) -> TargetVerdict:
    def fixed(fs: tuple[Finding, ...]) -> tuple[Finding, ...]:
        return tuple(replace(f, fix=runnable_hint(f.fix)) if "--backend conda" in f.fix else f for f in fs)

    return replace(tv, blockers=fixed(tv.blockers), caveats=fixed(tv.caveats),
                   backends=tuple(replace(b, blockers=fixed(b.blockers), caveats=fixed(b.caveats)) for b in tv.backends))


def _no_wheel_for_python(m: Machine, kb: KnowledgeBase, v: Version) -> Finding | None:
    """A release without a GPU build for this OS (native Windows after 2.10) still has CPU wheels on PyPI.
    When none of them fits the machine's Pythons, pip cannot install that release at all: a blocker of its
    own, which the missing GPU build hides (casebook: tensorflow#86879, Python 3.13 on Windows)."""
    if m.pythons is None or m.tf_os not in ("linux", "windows"):
        return None
    wheels = kb.pythons_for(v, m.tf_os)
    if not wheels or set(wheels) & set(m.pythons):
        return None
    return Finding("python.range", f"PyPI has no TensorFlow {v} wheel for Python {', '.join(m.pythons) or 'none'} "
                   f"on {m.tf_os} (wheels: Python {wheels[0]}-{wheels[-1]})",
                   fix=f"install Python {wheels[-1]} (e.g. uv python install {wheels[-1]})")


def _judge_release(facts: Facts, kb: KnowledgeBase, v: Version, *, backend: str = "auto",
                   machine: Machine | None = None) -> TargetVerdict:
    m = machine or Machine.from_facts(facts, kb)
    os = m.os or "linux"
    blockers: list[Finding] = []
    caveats: list[Finding] = []
    # -- machine-level blockers (no backend can help)
    if m.os == "macos":
        blockers.append(Finding("os.supported", "macOS has no CUDA GPU build of TensorFlow",
                                fix="use Linux or WSL2 with an NVIDIA GPU"))
    if m.os == "windows" and _after_windows_gpu(kb, v):
        last = last_windows_gpu_series(kb)
        blockers.append(Finding(
            "os.windows_gpu", f"TensorFlow {v} has no GPU support on native Windows (GPU builds end at {last})",
            fix=f"run tfgpu inside WSL2 for {v}, or use native Windows with --tf {last}",
        ))
    if m.wsl == 1:
        blockers.append(Finding("os.wsl", "WSL1 has no GPU access", fix="wsl --set-version <distro> 2"))
    if m.arm_linux:
        blockers.append(Finding("cpu.arch", f"no official or conda-forge TensorFlow {v} build for Linux {m.arch} uses an "
                                "NVIDIA GPU (PyPI's are AWS's CPU-only tensorflow-cpu-aws)", fix=_arm_fix(m, kb)))
    if m.avx is False and kb.cpu_requirement("avx", v) is not None:
        blockers.append(Finding("cpu.avx", f"TensorFlow {v}'s official wheels need AVX; this CPU has none ('Illegal instruction')",
                                fix="use TF <= 1.5 or a build without AVX"))
    if m.driver_known and m.driver is None:
        if m.nvidia_pci:
            blockers.append(Finding("driver.installed", "an NVIDIA GPU is present but no driver is loaded",
                                    fix="install the NVIDIA driver, then reboot"))
        else:
            blockers.append(Finding("driver.installed", "no NVIDIA driver (and no NVIDIA GPU found)",
                                    fix="install an NVIDIA GPU and its driver; without one TensorFlow uses the CPU"))
    if m.kernel_module and m.user_library and m.kernel_module != m.user_library:
        blockers.append(Finding("driver.kernel_match", "the driver's kernel module and user-space library differ",
                                fix="reboot (or reload the nvidia kernel modules)"))
    if m.driver is not None and m.all_gpus is not None and not m.all_gpus:
        blockers.append(Finding("gpu.present", "the driver reports no GPU", fix="check nvidia-smi"))
    elif m.gpus is not None and m.all_gpus and not m.gpus:
        blockers.append(Finding("env.cuda_visible_devices", f"CUDA_VISIBLE_DEVICES={m.cuda_visible!r} hides every GPU",
                                fix="unset CUDA_VISIBLE_DEVICES"))
    build = kb.build_for(v, m.tf_os)
    if build is None:
        blockers.append(Finding("tf.gpu_build", f"TensorFlow {v} has no GPU build for {m.tf_os}",
                                fix="choose another release: tfgpu compat"))
        no_wheel = _no_wheel_for_python(m, kb, v)
        if no_wheel is not None:
            blockers.append(no_wheel)
        return TargetVerdict(str(v), BLOCKED, None, None, tuple(blockers), tuple(caveats), (), str(v))
    # -- per backend
    from tfgpu.containers import container_alternative, judge_container
    from tfgpu.options import CONTAINER_BACKENDS

    container_v: BackendVerdict | None = None  # --backend docker|podman|apptainer|container: the route judged alone
    if backend in CONTAINER_BACKENDS and os in ("linux", "wsl2") and not m.arm_linux:
        container_v = judge_container(facts, kb, v, m, wanted=backend)
    rel = kb.gpu_release(v, m.tf_os)
    verdicts: list[BackendVerdict] = []
    per_cuda: dict[tuple[str, str], tuple[list[Finding], list[Finding], bool, list[Finding], list[Finding]]] = {}
    for recipe, name, cuda, cudnn in _recipes_judged(kb, m, v, os, build, backend):
        b_block: list[Finding] = []
        b_cav: list[Finding] = []
        judged = (cuda, _arch_build(recipe))
        if judged not in per_cuda:  # recipes of one release mostly share their CUDA: judge the GPUs once
            g_block, g_cav, jit = gpu_findings(m, kb, v, cuda, judged[1])
            per_cuda[judged] = (g_block, g_cav, jit, *driver_findings(m, kb, cuda, jit))
        g_block, g_cav, jit, d_block, d_cav = per_cuda[judged]
        b_block += g_block + d_block
        b_cav += g_cav + d_cav
        pythons = tuple(kb.pythons_for(v, m.tf_os))
        limit = kb.python_limit_for(v, recipe.id) if recipe.backend == "pip" else None
        if limit is not None:  # a package the recipe pins has wheels for fewer Pythons (compat/pins.toml)
            pythons = tuple(p for p in pythons if p in limit.python)
        if name == "pip":
            bits_32 = [p for p in pythons if p in m.pythons_32bit]
            if (m.pythons is not None and pythons and not set(pythons) & set(m.pythons) and bits_32
                    and kb.rule("wheels-64-bit-only").holds(v)):
                b_block.append(Finding(
                    "python.bits",
                    f"Python {bits_32[-1]} here is a 32-bit build, and TensorFlow's wheels are 64-bit only: pip finds "
                    f"no TensorFlow {v} to install into it",
                    fix=f"install the 64-bit Python {bits_32[-1]} (python.org's 64-bit installer, or uv python install "
                    f"{bits_32[-1]}), or use the conda backend, which brings its own Python",
                ))
            elif m.pythons is not None and pythons and not set(pythons) & set(m.pythons):
                b_block.append(Finding(
                    "python.range",
                    f"pip needs Python {pythons[0]}-{pythons[-1]} for TensorFlow {v}; this machine has "
                    f"{', '.join(m.pythons) or 'none'}",
                    fix=f"install Python {pythons[-1]} (e.g. uv python install {pythons[-1]}), or use the conda backend, "
                    "which brings its own Python",
                ))
            if rel is None:
                b_block.append(Finding("tf.wheel", f"no {kb.gpu_dist(v)} {v} wheels on PyPI",
                                       fix="use the conda backend"))
            elif m.tf_os == "linux" and m.glibc:
                b_block += _glibc_findings(m, kb, rel)
            if not recipe.provides_cuda:
                lib_block, lib_cav = _system_library_findings(m, kb, v, build.cuda, build.cudnn)
                b_block += lib_block
                b_cav += lib_cav
        verdicts.append(BackendVerdict(
            name, recipe.id, not b_block, tuple(b_block), tuple(b_cav), cuda, cudnn, pythons,
            recipe.conda_preference() if name == "conda" else 0,
        ))
    if backend in CONTAINER_BACKENDS and container_v is not None:
        verdicts = [container_v]  # judged alone: the user asked for the container route
    # small GPUs: mitigated by the environment tfgpu makes, so it does not downgrade the verdict
    small = [g for g in (m.gpus or ()) if g.get("memory_mib") and int(g["memory_mib"]) <= SMALL_GPU_MIB]
    if small:
        caveats.append(Finding(
            "gpu.memory", f"small GPU ({small[0].get('memory_mib')} MiB): TensorFlow's default allocation of nearly all "
            "memory ends in CUDNN_STATUS_INTERNAL_ERROR", fix=f"export {ALLOW_GROWTH}",
            mitigated_by=f"{ALLOW_GROWTH} in the environment tfgpu creates",
        ))
    if not verdicts:
        blockers.append(Finding(
            "tf.recipe", f"no {backend if backend != 'auto' else ''} recipe installs TensorFlow {v} with GPU support on {os}".replace("  ", " "),
            fix="try --backend auto, or another release: tfgpu compat --tf " + series_of(v),
        ))
        return TargetVerdict(str(v), BLOCKED, None, None, tuple(blockers), tuple(caveats), (), str(v))
    viable = [b for b in verdicts if b.viable]
    if blockers or not viable:
        if backend == "auto" and any(f.check == "gpu.arch" for b in verdicts for f in b.blockers):
            alt = container_alternative(kb, m, v)
            if alt is not None:
                caveats.append(alt)
        # every backend's blockers are the target's, deduplicated; the first backend's fix first
        seen: set[str] = set()
        merged = list(blockers)
        for b in verdicts:
            for f in b.blockers:
                key = f.check + f.summary
                if key not in seen:
                    seen.add(key)
                    merged.append(Finding(f.check, f"[{b.backend}: {b.recipe}] {f.summary}", f.fix))
        return TargetVerdict(str(v), BLOCKED, verdicts[0].backend, verdicts[0].recipe, tuple(merged),
                             tuple(caveats), tuple(verdicts), str(v))
    best = rank_backends(viable)[0]
    all_cav = list(best.caveats) + caveats
    if backend == "auto" and any(f.check == "gpu.arch" for b in verdicts for f in b.blockers):
        alt = container_alternative(kb, m, v)
        if alt is not None:
            all_cav.append(Finding(alt.check, alt.summary, alt.fix, mitigated_by=f"tfgpu uses the {best.backend} backend"))
    for b in verdicts:
        if not b.viable and b.backend != best.backend:
            all_cav.append(Finding(
                b.blockers[0].check, f"the {b.backend} way ({b.recipe}) would not work: {b.blockers[0].summary}",
                fix=f"use the {best.backend} backend (as recommended)",
                mitigated_by=f"tfgpu uses the {best.backend} backend",
            ))
    unmitigated = [c for c in all_cav if not c.mitigated_by]
    return TargetVerdict(str(v), CAVEATS if unmitigated else READY, best.backend, best.recipe, (),
                         tuple(all_cav), tuple(verdicts), str(v))


def _recipes_judged(kb: KnowledgeBase, m: Machine, v: Version, os: str, build: Build,
                    backend: str) -> Iterator[tuple[Recipe, str, str, str]]:
    """The GPU recipes judged for release ``v`` under ``backend`` (those whose packages exist), each with its
    backend name and the CUDA and cuDNN it brings here: (recipe, "pip" | "conda", cuda, cudnn)."""
    recipes = [r for r in kb.recipes_for(v, os) if r.gpu]
    if os == "wsl2":  # Linux recipes work in WSL2 too; its own rows come first
        recipes += [r for r in kb.recipes_for(v, "linux") if r.gpu and r not in recipes]
    driver_cuda = m.driver_cuda_version(kb)
    for recipe in recipes:
        name = _backend_name(recipe)
        if backend not in ("auto", name) and not (backend == "rattler" and name == "conda"):
            continue
        if not recipe_available(kb, recipe, v, os):
            continue
        cuda, cudnn = _recipe_cuda(kb, recipe, v, os, build.cuda, build.cudnn, driver_cuda)
        yield recipe, name, cuda, cudnn


def _blocked_by_cuda(kb: KnowledgeBase, m: Machine, v: Version, backend: str) -> bool:
    """Whether release ``v`` is certainly BLOCKED here because every recipe's CUDA is too new or too old for
    one of the GPUs (the first rule of tfgpu.gpu_rules, which then blocks that recipe), or it has no recipe at
    all. A shortcut, never a different answer: :func:`judge_newest_workable` skips older patch releases that
    are blocked this way (on an H100, every patch of 1.15-2.11), as judging them would only find them blocked."""
    from tfgpu.gpu_rules import cuda_rules_out
    from tfgpu.options import CONTAINER_BACKENDS

    if backend in CONTAINER_BACKENDS:
        return False  # the container route is judged on its own terms
    build = kb.build_for(v, m.tf_os)
    if build is None:
        return True  # "no GPU build": blocked
    return all(cuda_rules_out(m, kb, v, cuda) for _r, _n, cuda, _c in _recipes_judged(kb, m, v, m.os or "linux",
                                                                                   build, backend))


def rank_backends(backends: Iterable[BackendVerdict]) -> list[BackendVerdict]:
    """The order recipes are recommended in (tfgpu.choose follows it): viable ones first, fewest caveats
    first, the pip way before the conda way on a tie, then the conda recipes in their order of preference (the
    official docs' conda+pip, conda-forge's builds, Anaconda's); then the blocked ones, in the knowledge base's order."""
    items = list(backends)
    viable = sorted((b for b in items if b.viable),
                    key=lambda b: (len(b.caveats), 0 if b.backend == "pip" else 1, b.preference))
    return viable + [b for b in items if not b.viable]


def _system_library_findings(
    m: Machine, kb: KnowledgeBase, v: Version, cuda: str, cudnn: str,
) -> tuple[list[Finding], list[Finding]]:
    """pip installs up to 2.13 load the system CUDA (the built major.minor; from TF 2.5 any 11.x from 11.1, see
    system_cuda_serves) and a cuDNN of the built major with at least its minor. Returns (blockers, caveats):
    a library the facts do not describe at all (no cuda_toolkits / cudnn section) is a caveat to check, not a
    blocker; an empty section is "none installed"."""
    out: list[Finding] = []
    unknown: list[Finding] = []
    cuda_n = normalize_cuda(cuda)
    # CUDA 11's runtime is named by its major only (compat/rules.toml): libcudart.so.11.0 / cudart64_110.dll for
    # every 11.x (CUDA 12 dropped the ".0", but no pip TensorFlow loads a system CUDA 12)
    xy = f"{version(cuda_n).major}.0" if kb.rule("cuda-libraries-per-major").holds(cuda_n) else cuda_n
    so = f"cudart64_{xy.replace('.', '')}.dll" if m.os == "windows" else f"libcudart.so.{xy}"
    wanted = cuda_n
    if _any_minor_serves(version(cuda_n), v, kb):  # "11.x (11.1 or later)": CUDA 11.0 ships libcusolver.so.10
        major = version(cuda_n).major
        first = _first_minor_serving(major, kb)
        wanted = f"{major}.x" + (f" ({major}.{first} or later)" if first else "")
    if not m.toolkits_known:
        unknown.append(Finding(
            "cuda.system_toolkit",
            f"pip's {kb.gpu_dist(v)} {v} loads the system CUDA {wanted} ({so}); the facts do not say which CUDA "
            "toolkits are installed",
            fix=f"check that CUDA {wanted} is installed, or use the conda backend: tfgpu create --tf {v} --backend conda",
        ))
    elif not system_cuda_installed(m, cuda, v, kb):
        have = ", ".join(str(t.get("version")) for t in m.toolkits) or "none"
        out.append(Finding(
            "cuda.system_toolkit",
            f"pip's {kb.gpu_dist(v)} {v} loads the system CUDA {wanted} ({so}); installed here: {have} — TensorFlow "
            "would print \"Could not dlopen library\" and silently skip the GPU",
            fix=f"use the conda backend (brings CUDA {cuda_n} into the environment): tfgpu create --tf {v} --backend conda",
        ))
    if not m.cudnns_known:
        unknown.append(Finding(
            "cudnn.system",
            f"pip's {kb.gpu_dist(v)} {v} loads the system cuDNN {cudnn}; the facts do not say which cuDNN is installed",
            fix=f"check that cuDNN {cudnn} is installed, or use the conda backend: tfgpu create --tf {v} --backend conda",
        ))
    elif not system_cudnn_installed(m, cudnn):
        have = ", ".join(str(c.get("version")) for c in m.cudnns) or "none"
        if system_cudnn_minor_unstated(m, cudnn):  # "cuDNN 8" in a report: the minor may well be enough
            unknown.append(Finding(
                "cudnn.system",
                f"pip's {kb.gpu_dist(v)} {v} loads the system cuDNN {cudnn}; installed here: {have} (minor not stated)",
                fix=f"check that the installed cuDNN is {cudnn} or newer, or use the conda backend: "
                f"tfgpu create --tf {v} --backend conda",
            ))
        else:
            out.append(Finding(
                "cudnn.system",
                f"pip's {kb.gpu_dist(v)} {v} loads the system cuDNN {cudnn}; installed here: {have}",
                fix=f"use the conda backend: tfgpu create --tf {v} --backend conda",
            ))
    return out, unknown


def judge_requested(facts: Facts, kb: KnowledgeBase, tf: str, *, backend: str = "auto",
                    machine: Machine | None = None) -> TargetVerdict:
    """A release is judged as is; a series ("2.2") by its newest release that can work here."""
    m = machine or Machine.from_facts(facts, kb)
    v = resolve_version(kb, tf, m)
    if len(tf.strip().split(".")) == 2:
        releases = kb.gpu_versions_in(series_of(v), m.tf_os) or kb.gpu_versions_in(series_of(v), "linux")
        return judge_newest_workable(facts, kb, releases or [v], backend=backend, machine=m)
    return judge_release(facts, kb, v, backend=backend, machine=m)


def resolve_latest(facts: Facts, kb: KnowledgeBase, *, backend: str = "auto",
                   machine: Machine | None = None) -> tuple[str, Recommendation | None]:
    """What ``latest`` means, everywhere (doctor, plan, create, lock): the release the doctor recommends here,
    and that recommendation; when nothing will use a GPU, the newest GPU series and None (its verdict says why)."""
    m = machine or Machine.from_facts(facts, kb)
    rec = recommend(facts, kb, judge_series(facts, kb, backend=backend, machine=m), m)
    return (rec.tf, rec) if rec else (kb.series(m.tf_os)[0], None)


def judge_target(facts: Facts, kb: KnowledgeBase, tf: str, *, backend: str = "auto") -> TargetVerdict:
    """A release, a series or ``latest`` -> the target's verdict; ``requested`` is the release or series
    judged (``latest`` resolved)."""
    m = Machine.from_facts(facts, kb)
    if tf == "latest":
        tf, _ = resolve_latest(facts, kb, backend=backend, machine=m)
    return replace(judge_requested(facts, kb, tf, backend=backend, machine=m), requested=tf)


def judge_series(facts: Facts, kb: KnowledgeBase, *, backend: str = "auto",
                 machine: Machine | None = None) -> list[TargetVerdict]:
    """A verdict for the newest release of every 2.x series and the last 1.x, newest first."""
    m = machine or Machine.from_facts(facts, kb)
    out = []
    last_1x_done = False
    for series in kb.series(m.tf_os):
        if series.startswith("1."):
            if last_1x_done:
                continue
            last_1x_done = True
        releases = kb.gpu_versions_in(series, m.tf_os) or kb.gpu_versions_in(series, "linux")
        if not releases:
            continue
        out.append(judge_newest_workable(facts, kb, releases, backend=backend, machine=m))
    return out


def warm_up(kb: KnowledgeBase, os: str = "linux") -> None:
    """Build the knowledge base's indexes that verdicts use (releases by series, recipes, GPU code, Python
    ranges) by judging a machine about which nothing is known (the knowledge base caches them with its tables)."""
    judge_series({"platform": {"os": "linux", "wsl": 2} if os == "wsl2" else {"os": os}}, kb)


def _index_for_verdicts(kb: KnowledgeBase) -> None:
    for os in ("linux", "wsl2", "windows"):
        warm_up(kb, os)
        # every release, not only each series' newest: an older patch release is judged when the newest is
        # not ready here, and its look-ups (recipes, conda packages, GPU code) then come from the cache
        facts: Facts = {"platform": {"os": "linux", "wsl": 2} if os == "wsl2" else {"os": os}}
        m = Machine.from_facts(facts, kb)
        for series in kb.series(m.tf_os):
            for v in kb.gpu_versions_in(series, m.tf_os) or kb.gpu_versions_in(series, "linux"):
                _judge_release(facts, kb, v, machine=m)


register_indexer(_index_for_verdicts)  # the knowledge base fills these indexes before it caches itself


def judge_newest_workable(facts: Facts, kb: KnowledgeBase, releases: list[Version], *,
                          backend: str = "auto", machine: Machine | None = None) -> TargetVerdict:
    """A series by every one of its releases (newest first): the newest that is ready, else the newest with
    caveats, else the newest's verdict. An older patch release can be the better one: conda channels may
    only have it (Anaconda's tensorflow-gpu 2.2.0 but no 2.2.3), or conda-forge built it for an older CUDA
    (2.9.1 for CUDA 11.0, which driver 450.80.02 runs; 2.9.3 needs 11.2). When the pick is not the newest
    release, a mitigated ``tf.patch`` caveat says why."""
    m = machine or Machine.from_facts(facts, kb)
    judged: list[tuple[Version, TargetVerdict]] = []
    for v in releases:
        if judged and _blocked_by_cuda(kb, m, v, backend):
            continue  # an older release that would be judged blocked is never picked: no need to judge it
        tv = _judge_release(facts, kb, v, backend=backend, machine=m)  # presented once picked (_presented)
        judged.append((v, tv))
        if tv.verdict == READY:
            break  # nothing older can be better
        if tv.verdict == BLOCKED and any(b.check in MACHINE_BLOCKERS for b in tv.blockers):
            break  # the machine blocks every release alike: no older patch release can help
    pick = next((i for i, (_v, t) in enumerate(judged) if t.verdict == READY), None)
    if pick is None:
        pick = next((i for i, (_v, t) in enumerate(judged) if t.verdict == CAVEATS), 0)
    newest, (picked, best) = judged[0][1], judged[pick]
    if pick > 0:
        why = (newest.blockers or newest.caveats or (Finding("", "it is not ready here"),))[0]
        best = replace(best, caveats=(*best.caveats, Finding(
            "tf.patch", f"TensorFlow {newest.tf}, the newest {series_of(version(newest.tf))} release, is "
            f"{newest.verdict} here ({why.summary}); {best.tf} is the newest release of the series that is {best.verdict}",
            fix=why.fix, mitigated_by=f"tfgpu recommends {best.tf}")))
    return _presented(facts, kb, picked, best, backend=backend, machine=m)


def create_command(tv: TargetVerdict, machine: Machine | None = None) -> str:
    """The command that builds the target. The conda way on a machine without mamba, micromamba or conda
    is run by tfgpu's embedded engine (`--backend conda` would stop and ask for one)."""
    cmd = f"tfgpu create --tf {tv.tf}"
    if tv.backend:
        no_conda_tool = machine is not None and machine.conda is None
        cmd += f" --backend {'rattler' if tv.backend == 'conda' and no_conda_tool else tv.backend}"
    return cmd


def for_container_backend(rec: Recommendation, backend: str) -> Recommendation:
    """A recommendation of the container route under ``--backend docker|podman|apptainer|container``: its
    command names the backend asked for (the route's recipes say only "container"); any other is as it is."""
    return replace(rec, command=f"tfgpu create --tf {rec.tf} --backend {backend}") if rec.backend == "container" else rec


def recommend(facts: Facts, kb: KnowledgeBase, verdicts: list[TargetVerdict] | None = None,
              machine: Machine | None = None) -> Recommendation | None:
    """The newest release that will use the GPU here: ready first, else the newest with caveats."""
    verdicts = verdicts if verdicts is not None else judge_series(facts, kb)
    machine = machine or Machine.from_facts(facts, kb)
    for wanted in (READY, CAVEATS):
        for tv in verdicts:
            if tv.verdict == wanted:
                return _recommendation(tv, machine)
    return None


def no_gpu_reasons(verdicts: Iterable[TargetVerdict]) -> list[str]:
    """When no release can use a GPU here because of the machine itself (no driver, no GPU, an OS or CPU
    without GPU builds): its distinct reasons, each once. Empty when some release works or a release's own
    requirements block it (another release may do)."""
    items = list(verdicts)
    if not items or any(t.verdict != BLOCKED for t in items):
        return []
    if not all(any(b.check in MACHINE_BLOCKERS for b in t.blockers) for t in items):
        return []
    return list(dict.fromkeys(b.summary for t in items for b in t.blockers if b.check in MACHINE_BLOCKERS))


def cpu_recommendation(kb: KnowledgeBase, machine: Machine, reasons: Sequence[str] = ()) -> Recommendation | None:
    """The CPU route: the newest release as a CPU-only environment (`tfgpu create --tf X --cpu`)."""
    series = kb.series("linux")  # the CPU builds follow the releases, not any OS's GPU builds
    if not series:
        return None
    tf = series[0]
    return Recommendation(tf=tf, backend="cpu", recipe="cpu", recipe_id="cpu", verdict="cpu",
                          command=f"tfgpu create --tf {tf} --cpu", why="; ".join(reasons))


def recommend_instead(facts: Facts, kb: KnowledgeBase, blocked_tf: str,
                      machine: Machine | None = None, *, backend: str = "auto") -> Recommendation | None:
    """For a blocked --tf target: the best release that works here, else (no usable GPU) the CPU route. A
    container ``backend`` (docker, podman, apptainer, container) looks for the best release of that route
    first (an image that works, e.g. 2.17.1-gpu when 2.18+'s images carry the wrong cuDNN), then any."""
    from tfgpu.options import CONTAINER_BACKENDS

    machine = machine or Machine.from_facts(facts, kb)
    if backend in CONTAINER_BACKENDS:
        rec = recommend(facts, kb, judge_series(facts, kb, backend=backend, machine=machine), machine)
        if rec is not None:
            return replace(for_container_backend(rec, backend), instead_of=blocked_tf)
    verdicts = judge_series(facts, kb, machine=machine)
    rec = recommend(facts, kb, verdicts, machine)
    if rec is None:
        rec = cpu_recommendation(kb, machine, no_gpu_reasons(verdicts))
    return None if rec is None else replace(rec, instead_of=blocked_tf)


def _recommendation(tv: TargetVerdict, machine: Machine | None = None) -> Recommendation:
    return Recommendation(tf=tv.tf, backend=tv.backend, recipe=tv.recipe, recipe_id=tv.recipe_id or tv.recipe,
                          verdict=tv.verdict, command=create_command(tv, machine))


@record(frozen=False)
class DoctorResult:
    checks: list[Check]
    targets: list[TargetVerdict]
    recommendation: Recommendation | None
    target_requested: str | None = None
    notes: list[str] = field(default_factory=list)
    machine: Machine | None = None  # what the verdicts were judged on
    no_gpu: list[str] = field(default_factory=list)  # why no release can use a GPU here (each reason once)

    def exit_code(self, *, require_gpu: bool, strict: bool, machine: Machine | None = None) -> int:
        machine = machine or self.machine
        assert machine is not None
        if require_gpu and not (machine.has_gpu() and machine.driver is not None):
            return 1
        if self.target_requested is not None and any(t.verdict == BLOCKED for t in self.targets):
            return 1
        if strict:
            if any(c.status in (FAIL, WARN, ERROR) for c in self.checks):
                return 1
            if self.target_requested is not None and any(t.verdict != READY for t in self.targets):
                return 1
        return 0


def diagnose(facts: Facts, kb: KnowledgeBase, *, tf: str | None = None, backend: str = "auto") -> DoctorResult:
    """Everything `tfgpu doctor` says, as data."""
    m = Machine.from_facts(facts, kb)
    checks = machine_checks(m, kb)
    if tf is None:
        targets = judge_series(facts, kb, backend=backend, machine=m)
        rec = recommend(facts, kb, targets, m)
        reasons = no_gpu_reasons(targets)
        if rec is None and reasons:
            rec = cpu_recommendation(kb, m, reasons)
        return DoctorResult(checks, targets, rec, machine=m, no_gpu=reasons)
    if tf == "latest":
        tf_resolved, _ = resolve_latest(facts, kb, backend=backend, machine=m)
    else:
        tf_resolved = tf
    target = judge_requested(facts, kb, tf_resolved, backend=backend, machine=m)
    if target.verdict != BLOCKED:
        return DoctorResult(checks, [target], _recommendation(target, m), target_requested=tf, machine=m)
    # blocked: the best release that works here instead, with one line on why this one does not
    rec = recommend_instead(facts, kb, target.tf, m, backend=backend)
    if rec is not None and target.blockers:
        rec = replace(rec, why_not=re.sub(r"^\[[^\]]*\] ", "", target.blockers[0].summary))  # without the "[pip: recipe]" tag
    no_gpu = no_gpu_reasons([target])
    return DoctorResult(checks, [target], rec, target_requested=tf, machine=m, no_gpu=no_gpu)
