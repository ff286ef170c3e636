"""Judging one release, check by check: the machine's own blockers for a release (an OS, CPU or driver that no
backend can help with) and the checks of each recipe (its GPU code, its CUDA against the driver, pip's Python,
wheels and system libraries). One small function per check id, each in a registry table that the verdict walks
in order (tfgpu.judge.verdict assembles the results). Pure."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from packaging.version import Version

from tfgpu.core.errors import DataError
from tfgpu.core.record import field, record, replace
from tfgpu.facts.machine import Machine
from tfgpu.judge.findings import INFORMATIONAL, Finding
from tfgpu.judge.gpu_rules import BUILD_NAMES, gpu_findings
from tfgpu.judge.system import (
    _arm_fix,
    _glibc_findings,
    _system_library_findings,
    driver_findings,
    recipe_available,
)
from tfgpu.kb.versions import normalize_cuda, version

if TYPE_CHECKING:
    from tfgpu.facts.document import Facts
    from tfgpu.kb.knowledge import KnowledgeBase
    from tfgpu.kb.records import Build, Recipe, Release


@record
class ReleaseContext:
    """What the checks of one release read: the facts, the knowledge base, the release and the machine."""

    facts: Facts
    kb: KnowledgeBase
    v: Version
    m: Machine
    backend: str = "auto"
    #: what the recipes of the release share, worked out once: (CUDA, whose build) -> the GPU and driver findings
    shared: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def os(self) -> str:
        return self.m.os or "linux"


@record
class RecipeContext:
    """One recipe of the release under judgement: its backend name ("pip" | "conda"), the CUDA and cuDNN it
    brings here, whose binaries it installs ("pip": the official wheels, "conda-forge": the feedstock's), the
    tested build configuration and PyPI's release row (None: no wheel of the GPU package)."""

    recipe: Recipe
    name: str
    cuda: str
    cudnn: str
    arch_build: str
    build: Build
    rel: Release | None
    pythons: tuple[str, ...] = ()  # the Pythons it installs the release for (recipe_pythons)


# --------------------------------------------------------------------------- the machine's blockers


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


def check_macos(ctx: ReleaseContext) -> list[Finding]:
    if ctx.m.os != "macos":
        return []
    return [Finding("os.supported", "macOS has no CUDA GPU build of TensorFlow", fix="use Linux or WSL2 with an NVIDIA GPU")]


def check_windows_gpu(ctx: ReleaseContext) -> list[Finding]:
    if ctx.m.os != "windows" or not _after_windows_gpu(ctx.kb, ctx.v):
        return []
    last = last_windows_gpu_series(ctx.kb)
    return [Finding("os.windows_gpu", f"TensorFlow {ctx.v} has no GPU support on native Windows (GPU builds end at {last})",
                    fix=f"run tfgpu inside WSL2 for {ctx.v}, or use native Windows with --tf {last}")]


def check_wsl1(ctx: ReleaseContext) -> list[Finding]:
    return [Finding("os.wsl", "WSL1 has no GPU access", fix="wsl --set-version <distro> 2")] if ctx.m.wsl == 1 else []


def check_cpu_arch(ctx: ReleaseContext) -> list[Finding]:
    m = ctx.m
    if not m.arm_linux:
        return []
    return [Finding("cpu.arch", f"no official or conda-forge TensorFlow {ctx.v} build for Linux {m.arch} uses an "
                    "NVIDIA GPU (PyPI's are AWS's CPU-only tensorflow-cpu-aws)", fix=_arm_fix(m, ctx.kb))]


def check_driver_installed(ctx: ReleaseContext) -> list[Finding]:
    m = ctx.m
    if m.driver_known and m.driver is None and not m.driver_mismatch:
        if m.nvidia_pci:
            return [Finding("driver.installed", "an NVIDIA GPU is present but no driver is loaded",
                            fix="install the NVIDIA driver, then reboot")]
        return [Finding("driver.installed", "no NVIDIA driver (and no NVIDIA GPU found)",
                        fix="install an NVIDIA GPU and its driver; without one TensorFlow uses the CPU")]
    if m.driver is not None and m.driver_not_loaded and not m.driver_mismatch and (m.all_gpus or m.nvidia_pci):
        # files name a driver version, but NVML / nvidia-smi cannot reach the kernel driver
        return [Finding("driver.installed", f"NVIDIA driver {m.driver_text} is installed but does not answer "
                        f"({m.driver_error or 'NVML: Driver Not Loaded'})",
                        fix="load it (sudo modprobe nvidia) or reinstall it, then reboot")]
    return []


def check_driver_kernel_match(ctx: ReleaseContext) -> list[Finding]:
    """The driver's kernel module and its user-space libraries are of different versions (an upgrade without a
    reboot): NVML refuses ("Driver/library version mismatch") and CUDA finds no device. Known from both versions,
    or from the probe's flag and the error text alone."""
    m = ctx.m
    differ = bool(m.kernel_module and m.user_library and m.kernel_module != m.user_library)
    if not (differ or m.driver_mismatch):
        return []
    return [Finding("driver.kernel_match", "the driver's kernel module and user-space library differ"
                    + ("" if differ else f" ({m.driver_error or 'Driver/library version mismatch'})"),
                    fix="reboot (or reload the nvidia kernel modules)")]


def check_libcuda(ctx: ReleaseContext) -> list[Finding]:
    """The driver's CUDA library (libcuda.so.1; nvcuda.dll on Windows; /usr/lib/wsl/lib in WSL2) does not load:
    TensorFlow prints "Could not load dynamic library 'libcuda.so.1'" and uses the CPU. nvidia-smi shows it as
    "CUDA Version: N/A", NVML's nvmlSystemGetCudaDriverVersion_v2 as NVML_ERROR_LIBRARY_NOT_FOUND."""
    m = ctx.m
    if m.libcuda is not False or m.driver_mismatch or (m.driver_known and m.driver is None):
        return []  # a mismatch or a missing driver explains it already
    where = {"windows": "nvcuda.dll", "wsl2": "/usr/lib/wsl/lib/libcuda.so.1"}.get(m.os or "", "libcuda.so.1")
    fix = ("update or reinstall the NVIDIA driver on Windows, then `wsl --shutdown`" if m.os == "wsl2" else
           "reinstall the NVIDIA driver with its CUDA library (Ubuntu: the libnvidia-compute package of its "
           "branch), then reboot")
    return [Finding("driver.libcuda", f"the driver's CUDA library ({where}) is missing or does not load "
                    "(nvidia-smi: 'CUDA Version: N/A'): TensorFlow cannot use the GPU", fix=fix)]


def check_gpu_present(ctx: ReleaseContext) -> list[Finding]:
    m = ctx.m
    if m.driver is not None and m.all_gpus is not None and not m.all_gpus:
        return [Finding("gpu.present", "the driver reports no GPU", fix="check nvidia-smi")]
    return []


def check_visible_devices(ctx: ReleaseContext) -> list[Finding]:
    m = ctx.m
    if m.gpus is not None and m.all_gpus and not m.gpus:
        return [Finding("env.cuda_visible_devices", f"CUDA_VISIBLE_DEVICES={m.cuda_visible!r} hides every GPU",
                        fix="unset CUDA_VISIBLE_DEVICES")]
    return []


#: The machine's own blockers of a release, in the order the verdict lists them: (check id, check). Each check
#: returns its findings for the release (none: the machine passes it).
MACHINE_CHECKS: tuple[tuple[str, Callable[[ReleaseContext], list[Finding]]], ...] = (
    ("os.supported", check_macos),
    ("os.windows_gpu", check_windows_gpu),
    ("os.wsl", check_wsl1),
    ("cpu.arch", check_cpu_arch),
    ("driver.installed", check_driver_installed),
    ("driver.kernel_match", check_driver_kernel_match),
    ("driver.libcuda", check_libcuda),
    ("gpu.present", check_gpu_present),
    ("env.cuda_visible_devices", check_visible_devices),
)


def machine_blockers(ctx: ReleaseContext) -> list[Finding]:
    """Every blocker the machine itself puts on the release (no backend can help), in the table's order."""
    return [f for _id, check in MACHINE_CHECKS for f in check(ctx)]


def no_wheel_for_python(ctx: ReleaseContext) -> list[Finding]:
    """A release without a GPU build for this OS (native Windows after 2.10) still has CPU wheels on PyPI.
    When none of them fits the machine's Pythons, pip cannot install that release at all: a blocker of its
    own, which the missing GPU build hides (casebook: tensorflow#86879, Python 3.13 on Windows)."""
    m, kb, v = ctx.m, ctx.kb, ctx.v
    if m.pythons is None or m.tf_os not in ("linux", "windows"):
        return []
    wheels = kb.pythons_for(v, m.tf_os)
    if not wheels or set(wheels) & set(m.pythons):
        return []
    return [Finding("python.range", f"PyPI has no TensorFlow {v} wheel for Python {', '.join(m.pythons) or 'none'} "
                    f"on {m.tf_os} (wheels: Python {wheels[0]}-{wheels[-1]})",
                    fix=f"install Python {wheels[-1]} (e.g. uv python install {wheels[-1]})")]


# --------------------------------------------------------------------------- each recipe's checks


def recipe_pythons(ctx: ReleaseContext, recipe: Recipe) -> tuple[str, ...]:
    """The Pythons a recipe installs the release for: the release's, narrowed by what a pip recipe pins
    (compat/pins.toml)."""
    pythons = tuple(ctx.kb.pythons_for(ctx.v, ctx.m.tf_os))
    limit = ctx.kb.python_limit_for(ctx.v, recipe.id) if recipe.backend == "pip" else None
    if limit is not None:
        pythons = tuple(p for p in pythons if p in limit.python)
    return pythons


def check_cpu_features(ctx: ReleaseContext, rc: RecipeContext) -> tuple[list[Finding], list[Finding]]:
    """The CPU against the recipe's binaries: the official wheels need AVX from 1.6 (TF 1.6 release notes);
    Anaconda's builds are compiled with -march=nocona and need none (compat/tensorflow.toml `cpu_requirements`)."""
    if ctx.m.avx is not False or ctx.kb.cpu_requirement("avx", ctx.v, rc.arch_build) is None:
        return [], []
    return [Finding("cpu.avx", f"TensorFlow {ctx.v}'s {BUILD_NAMES.get(rc.arch_build, rc.arch_build)} need AVX; this CPU "
                    "has none ('Illegal instruction')",
                    fix="use a build without AVX (Anaconda's tensorflow-gpu 1.9-2.4: --backend conda), TF <= 1.5, or a "
                    "CPU with AVX")], []


def check_gpu_and_driver(ctx: ReleaseContext, rc: RecipeContext) -> tuple[list[Finding], list[Finding]]:
    """The GPUs against the recipe's binaries, and the driver against its CUDA (judged once per CUDA and
    build: the recipes of a release mostly share them). Minor-version compatibility (the driver's CUDA older than
    the libraries', same major) is informational for pip's wheels, whose binaries then carry SASS for every GPU
    here (else the rule blocks them): pip installs the nvidia-* wheels whatever the driver. A conda solver may
    refuse the newer CUDA (its __cuda virtual package), so there it stays a risk."""
    key = (rc.cuda, rc.arch_build)
    if key not in ctx.shared:
        g_block, g_cav, jit = gpu_findings(ctx.m, ctx.kb, ctx.v, rc.cuda, rc.arch_build)
        ctx.shared[key] = (g_block, g_cav, *driver_findings(ctx.m, ctx.kb, rc.cuda, jit))
    g_block, g_cav, d_block, d_cav = ctx.shared[key]
    if rc.name == "pip":
        d_cav = [replace(c, severity=INFORMATIONAL) if c.check == "driver.cuda" else c for c in d_cav]
    return g_block + d_block, g_cav + d_cav


def check_python(ctx: ReleaseContext, rc: RecipeContext) -> tuple[list[Finding], list[Finding]]:
    """pip installs into an interpreter of the machine: one the release has wheels for, 64-bit."""
    m, v = ctx.m, ctx.v
    pythons = rc.pythons
    if rc.name != "pip" or m.pythons is None or not pythons or set(pythons) & set(m.pythons):
        return [], []
    bits_32 = [p for p in pythons if p in m.pythons_32bit]
    if bits_32 and ctx.kb.rule("wheels-64-bit-only").holds(v):
        return [Finding(
            "python.bits",
            f"Python {bits_32[-1]} here is a 32-bit build, and TensorFlow's wheels are 64-bit only: pip finds "
            f"no TensorFlow {v} to install into it",
            fix=f"install the 64-bit Python {bits_32[-1]} (python.org's 64-bit installer, or uv python install "
            f"{bits_32[-1]}), or use the conda backend, which brings its own Python",
        )], []
    return [Finding(
        "python.range",
        f"pip needs Python {pythons[0]}-{pythons[-1]} for TensorFlow {v}; this machine has "
        f"{', '.join(m.pythons) or 'none'}",
        fix=f"install Python {pythons[-1]} (e.g. uv python install {pythons[-1]}), or use the conda backend, "
        "which brings its own Python",
    )], []


def check_wheels(ctx: ReleaseContext, rc: RecipeContext) -> tuple[list[Finding], list[Finding]]:
    """pip needs the GPU package's wheels on PyPI, and a glibc they install into and load with."""
    if rc.name != "pip":
        return [], []
    if rc.rel is None:
        return [Finding("tf.wheel", f"no {ctx.kb.gpu_dist(ctx.v)} {ctx.v} wheels on PyPI", fix="use the conda backend")], []
    if ctx.m.tf_os == "linux" and ctx.m.glibc:
        return _glibc_findings(ctx.m, ctx.kb, rc.rel), []
    return [], []


def check_system_libraries(ctx: ReleaseContext, rc: RecipeContext) -> tuple[list[Finding], list[Finding]]:
    """pip's wheels up to 2.13 load the system CUDA and cuDNN."""
    if rc.name != "pip" or rc.recipe.provides_cuda:
        return [], []
    return _system_library_findings(ctx.m, ctx.kb, ctx.v, rc.build.cuda, rc.build.cudnn)


#: Each recipe's checks, in the order their findings are listed: (check id prefix, check) -> (blockers, caveats).
RECIPE_CHECKS: tuple[tuple[str, Callable[[ReleaseContext, RecipeContext], tuple[list[Finding], list[Finding]]]], ...] = (
    ("cpu.avx", check_cpu_features),
    ("gpu/driver", check_gpu_and_driver),
    ("python", check_python),
    ("tf.wheel/glibc", check_wheels),
    ("cuda/cudnn", check_system_libraries),
)


def recipe_findings(ctx: ReleaseContext, rc: RecipeContext) -> tuple[list[Finding], list[Finding]]:
    """Every check of the table on one recipe: (blockers, caveats)."""
    blockers: list[Finding] = []
    caveats: list[Finding] = []
    for _id, check in RECIPE_CHECKS:
        b, c = check(ctx, rc)
        blockers += b
        caveats += c
    return blockers, caveats


# --------------------------------------------------------------------------- which recipes, and what they bring


def arch_build(recipe: Recipe) -> str:
    """Whose binaries a recipe installs: conda-forge's own builds, Anaconda's (the defaults channel), or the
    official wheels (pip and the conda+pip recipes). Each is judged by its own rows of compat/tf_archs.toml and
    compat/tensorflow.toml `cpu_requirements`, where it has them (else by the official wheels')."""
    if recipe.backend != "conda":
        return "pip"
    return "conda-forge" if "conda-forge" in recipe.channels else "anaconda"


def backend_name(recipe: Recipe) -> str:
    return "pip" if recipe.backend == "pip" else "conda"


def recipe_cuda(kb: KnowledgeBase, recipe: Recipe, v: Version, os: str, default_cuda: str, default_cudnn: str,
                driver_cuda: Version | None = None) -> tuple[str, str]:
    """The CUDA/cuDNN a recipe really brings (Anaconda's builds do not always use upstream's). Of a
    channel's CUDA variants of one release, the solver takes the newest the driver allows (conda's __cuda
    virtual package = the driver's CUDA; Anaconda's cudatoolkit packages carry that constraint since
    AnacondaRecipes/repodata-hotfixes#81, 2020): the newest variant <= ``driver_cuda``, else the oldest."""
    if recipe.backend == "conda":
        rows = kb.conda_packages(v=v, os="windows" if os == "windows" else "linux")
        forge = arch_build(recipe) == "conda-forge"
        rows = [r for r in rows if r.name in ("tensorflow-gpu", "tensorflow") and (r.cudatoolkit or r.cuda)
                and (r.channel == "conda-forge") == forge]  # each channel's own builds
        if rows:
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


def recipes_judged(ctx: ReleaseContext, build: Build) -> list[RecipeContext]:
    """The GPU recipes judged for the release under ``ctx.backend`` (those whose packages exist), each with
    what it brings here."""
    kb, m, v, os = ctx.kb, ctx.m, ctx.v, ctx.os
    driver_cuda = m.driver_cuda_version(kb)
    rel = kb.gpu_release(v, m.tf_os)
    out = []
    for recipe, name in _recipes_here(ctx):
        cuda, cudnn = recipe_cuda(kb, recipe, v, os, build.cuda, build.cudnn, driver_cuda)
        out.append(RecipeContext(recipe, name, cuda, cudnn, arch_build(recipe), build, rel, recipe_pythons(ctx, recipe)))
    return out


def recipe_cudas(ctx: ReleaseContext, build: Build) -> list[str]:
    """The CUDA each recipe of :func:`recipes_judged` brings here, and nothing else (the series shortcut asks it of
    every older patch release it skips)."""
    kb, v, os = ctx.kb, ctx.v, ctx.os
    driver_cuda = ctx.m.driver_cuda_version(kb)
    return [recipe_cuda(kb, recipe, v, os, build.cuda, build.cudnn, driver_cuda)[0] for recipe, _name in _recipes_here(ctx)]


def _recipes_here(ctx: ReleaseContext) -> list[tuple[Recipe, str]]:
    """The GPU recipes of the release judged under ``ctx.backend`` whose packages exist, with their backend name."""
    kb, v, os = ctx.kb, ctx.v, ctx.os
    recipes = [r for r in kb.recipes_for(v, os) if r.gpu]
    if os == "wsl2":  # Linux recipes work in WSL2 too; its own rows come first
        recipes += [r for r in kb.recipes_for(v, "linux") if r.gpu and r not in recipes]
    out = []
    for recipe in recipes:
        name = backend_name(recipe)
        if ctx.backend not in ("auto", name) and not (ctx.backend == "rattler" and name == "conda"):
            continue
        if recipe_available(kb, recipe, v, os):
            out.append((recipe, name))
    return out
