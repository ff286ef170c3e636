"""What a release needs from the machine itself: the driver for its CUDA, the system CUDA and cuDNN that the
pip wheels up to 2.13 load, glibc, and the Jetson/ARM route. Pure."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from packaging.version import Version

from tfgpu.facts.machine import Machine
from tfgpu.facts.machine import maybe_version as _v
from tfgpu.judge.findings import Finding
from tfgpu.kb.versions import normalize_cuda, version

if TYPE_CHECKING:
    from tfgpu.kb.knowledge import KnowledgeBase
    from tfgpu.kb.records import Recipe, Release


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


def system_cudnn_serves(have: Version, want: Version, tf: Version, kb: KnowledgeBase) -> bool:
    """Does a loaded cuDNN ``have`` satisfy TensorFlow ``tf``, built with cuDNN ``want``? The check TensorFlow's
    own code makes (compat/rules.toml `cudnn-newer-minor`): the same major, and from 1.8 for cuDNN >= 7 the same
    or a newer minor; else the exact minor."""
    if have.major != want.major:
        return False
    if len(want.release) < 2:  # a build known by its cuDNN major only (compat/tensorflow.toml "7"): the major decides
        return True
    if want.major >= 7 and kb.rule("cudnn-newer-minor").holds(tf):
        return have.release[1:2] >= want.release[1:2]
    return have.release[1:2] == want.release[1:2]


def _cudnns_of_major(m: Machine, cudnn: str) -> list[tuple[dict[str, Any], Version]]:
    """The system cuDNNs of ``cudnn``'s major (one library name: libcudnn.so.N, cudnn64_N.dll), in the facts' order."""
    want = _v(cudnn)
    return [(c, have) for c, have in ((c, _v(c.get("version"))) for c in m.cudnns)
            if want is not None and have is not None and have.major == want.major]


def system_cudnn_installed(m: Machine, cudnn: str, tf: Version | None = None, kb: KnowledgeBase | None = None) -> bool:
    """Is a system cuDNN installed that serves ``cudnn`` (TensorFlow's rule when ``tf`` and ``kb`` are given, else the
    same major with at least the minor)?"""
    want = _v(cudnn)
    if want is None:
        return False
    if tf is not None and kb is not None:
        return any(system_cudnn_serves(have, want, tf, kb) for _c, have in _cudnns_of_major(m, cudnn))
    return any(have.release >= want.release[:2] for _c, have in _cudnns_of_major(m, cudnn))


def system_cudnn_minor_unstated(m: Machine, cudnn: str) -> bool:
    """Is a system cuDNN of ``cudnn``'s major given without its minor ("7", "8": a facts document written from
    a report)? Then whether it is new enough is unknown, not known to be too old."""
    return any("." not in str(c.get("version") or "") for c, _have in _cudnns_of_major(m, cudnn))


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
        return f"on a Jetson{release}, install NVIDIA's build for its JetPack: {jetson.fix(kb.sources('tensorflow'))}"
    return ("build TensorFlow from source for this CPU with CUDA, or run an NVIDIA container built for it "
            "(Grace Hopper, DGX Spark); tfgpu cannot create this environment")


def _system_library_findings(
    m: Machine, kb: KnowledgeBase, v: Version, cuda: str, cudnn: str,
) -> tuple[list[Finding], list[Finding]]:
    """pip installs up to 2.13 load the system CUDA (the built major.minor; from TF 2.5 any 11.x from 11.1, see
    system_cuda_serves) and a cuDNN TensorFlow's own check accepts (system_cudnn_serves). Returns (blockers,
    caveats): a library the facts do not describe at all (no cuda_toolkits / cudnn section) is a caveat to check,
    not a blocker; an empty section is "none installed"."""
    c_block, c_cav = _system_cuda_findings(m, kb, v, cuda)
    d_block, d_cav = _system_cudnn_findings(m, kb, v, cudnn)
    return c_block + d_block, c_cav + d_cav


def _conda_way(kb: KnowledgeBase, m: Machine, v: Version, what: str) -> str:
    """The fix's way out through conda when `tfgpu create --backend conda` accepts the release here, else the
    system install."""
    if conda_route(kb, v, m.os or "linux"):
        return f"use the conda backend{what}: tfgpu create --tf {v} --backend conda"
    return f"install it from NVIDIA's archive (TensorFlow {v} has no conda recipe on {m.os or 'linux'})"


def _system_cuda_findings(m: Machine, kb: KnowledgeBase, v: Version, cuda: str) -> tuple[list[Finding], list[Finding]]:
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
        return [], [Finding(
            "cuda.system_toolkit",
            f"pip's {kb.gpu_dist(v)} {v} loads the system CUDA {wanted} ({so}); the facts do not say which CUDA "
            "toolkits are installed", fix=f"check that CUDA {wanted} is installed, or {_conda_way(kb, m, v, '')}")]
    if not system_cuda_installed(m, cuda, v, kb):
        have = ", ".join(str(t.get("version")) for t in m.toolkits) or "none"
        return [Finding(
            "cuda.system_toolkit",
            f"pip's {kb.gpu_dist(v)} {v} loads the system CUDA {wanted} ({so}); installed here: {have} — TensorFlow "
            "would print \"Could not dlopen library\" and silently skip the GPU",
            fix=_conda_way(kb, m, v, f" (brings CUDA {cuda_n} into the environment)"))], []
    return [], _ptxas_findings(m, kb, v, cuda)


def _ptxas_findings(m: Machine, kb: KnowledgeBase, v: Version, cuda: str) -> list[Finding]:
    """The system CUDA that serves the wheel is also where XLA finds ptxas: a toolkit older than a GPU here
    (CUDA 11.0 knows compute capability up to 8.0, an RTX 30xx is 8.6; compat/cuda.toml `cc_max`) cannot compile
    PTX for it ("ptxas fatal: Value 'sm_86' is not defined"), and TensorFlow falls back to the driver's JIT."""
    from tfgpu.facts.machine import gpu_cc_of

    want = _v(normalize_cuda(cuda))
    serving = [(t, have) for t, have in ((t, _v(t.get("version"))) for t in m.toolkits)
               if want is not None and have is not None and system_cuda_serves(have, want, v, kb)]
    if not serving:
        return []
    tool, have = serving[0]
    row = kb.toolkit(f"{have.major}.{have.minor}")
    if row is None or not row.cc_max:
        return []
    newer = sorted({cc for g in m.gpus or () if (cc := gpu_cc_of(kb, g)) and version(cc) > version(row.cc_max)},
                   key=version)
    if not newer:
        return []
    knows = next((str(t.cuda) for t in sorted(kb.toolkits, key=lambda t: t.cuda)
                  if t.cuda.major == have.major and t.cc_max and version(t.cc_max) >= version(newer[-1])), None)
    return [Finding(
        "cuda.ptxas", f"the system CUDA {tool.get('version')}'s ptxas predates compute capability {', '.join(newer)} "
        f"(it knows up to {row.cc_max}): XLA cannot compile PTX for this GPU and TensorFlow falls back to the driver's "
        "JIT (slower start-up, 'ptxas fatal: Value sm_... is not defined')",
        fix=f"install CUDA {knows} or newer of the {have.major}.x series" if knows else "install a newer CUDA toolkit")]


def _system_cudnn_findings(m: Machine, kb: KnowledgeBase, v: Version, cudnn: str) -> tuple[list[Finding], list[Finding]]:
    if not m.cudnns_known:
        return [], [Finding(
            "cudnn.system",
            f"pip's {kb.gpu_dist(v)} {v} loads the system cuDNN {cudnn}; the facts do not say which cuDNN is installed",
            fix=f"check that cuDNN {cudnn} is installed, or {_conda_way(kb, m, v, '')}")]
    want = _v(cudnn)
    same = _cudnns_of_major(m, cudnn)
    serve = [c for c, have in same if want is not None and system_cudnn_serves(have, want, v, kb)]
    rule = ("this major" if want is None or len(want.release) < 2 else "the same or a newer minor"
            if want.major >= 7 and kb.rule("cudnn-newer-minor").holds(v) else "exactly this major.minor")
    if serve and len(serve) < len(same):  # one library name: the loader takes the first it finds
        others = [c for c, _h in same if c not in serve]
        lib = f"cudnn64_{want.major if want else '?'}.dll" if m.os == "windows" else f"libcudnn.so.{want.major if want else '?'}"
        return [], [Finding(
            "cudnn.system", f"pip's {kb.gpu_dist(v)} {v} needs cuDNN {cudnn} ({rule}); several cuDNNs here share the "
            f"name {lib}: {', '.join(str(c.get('version')) for c in serve)} would serve, "
            f"{', '.join(str(c.get('version')) for c in others)} would not, and TensorFlow loads the one the loader "
            "finds first (LD_LIBRARY_PATH, then the ldconfig cache; on Windows the first on PATH)",
            fix="remove the others, or put the one that serves first on LD_LIBRARY_PATH (PATH on Windows); or "
            + _conda_way(kb, m, v, ""))]
    if serve:
        return [], []
    have_text = ", ".join(str(c.get("version")) for c in m.cudnns) or "none"
    if system_cudnn_minor_unstated(m, cudnn):  # "cuDNN 8" in a report: the minor may well be enough
        return [], [Finding(
            "cudnn.system",
            f"pip's {kb.gpu_dist(v)} {v} loads the system cuDNN {cudnn}; installed here: {have_text} (minor not stated)",
            fix=f"check that the installed cuDNN is {cudnn} or newer, or {_conda_way(kb, m, v, '')}")]
    return [Finding("cudnn.system", f"pip's {kb.gpu_dist(v)} {v} loads the system cuDNN {cudnn} ({rule}); installed "
                    f"here: {have_text}", fix=_conda_way(kb, m, v, ""))], []


# --------------------------------------------------------------------------- which conda recipes exist


def recipe_conda_package(recipe: Recipe) -> tuple[str, str] | None:
    """(TensorFlow package, channel family) a conda recipe installs, read from its own packages and channels
    (compat/recipes.toml: "python={python},tensorflow-gpu={tf}" on defaults -> ("tensorflow-gpu", "anaconda"))."""
    conda_part = recipe.packages.partition("; pip:")[0]
    names = [spec.strip().split("=")[0].strip() for spec in conda_part.split(",")]
    package = next((n for n in names if n.startswith("tensorflow")), None)
    if package is None:
        return None
    return package, "conda-forge" if "conda-forge" in recipe.channels else "anaconda"


def recipe_available(kb: KnowledgeBase, recipe: Recipe, v: Version, os: str) -> bool:
    """Conda metapackages exist only for the versions the channel has."""
    if recipe.backend != "conda":
        return True
    # read once per recipe, keyed by what it is read from: every release judged asks it of each recipe
    forge = "conda-forge" in recipe.channels
    want = kb.derived("recipe_conda_package", f"{forge}|{recipe.packages}", lambda: recipe_conda_package(recipe))
    if want is None:
        return True
    rows = kb.conda_packages(name=want[0], v=v, os="windows" if os == "windows" else "linux")
    # Anaconda's channel goes by three names; conda-forge's builds are only conda-forge's
    same = ("anaconda", "defaults", "main") if want[1] == "anaconda" else (want[1],)
    return any(r.channel in same for r in rows)


def conda_route(kb: KnowledgeBase, v: Version, os: str) -> bool:
    """Whether a conda recipe (conda-forge's or Anaconda's build, or conda's CUDA beside pip's TensorFlow) can
    install release ``v`` on ``os``: what a fix may name as "--backend conda", which `tfgpu create` accepts then."""
    def find() -> bool:
        recipes = [r for r in kb.recipes_for(v, os) if r.gpu]
        if os == "wsl2":
            recipes += [r for r in kb.recipes_for(v, "linux") if r.gpu]
        return any(r.backend in ("conda", "conda+pip") and recipe_available(kb, r, v, os) for r in recipes)

    return kb.derived("conda_route", f"{v}/{os}", find)
