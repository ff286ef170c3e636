"""What a release needs from the machine itself: the driver for its CUDA, the system CUDA and cuDNN that the
pip wheels up to 2.13 load, glibc, and the Jetson/ARM route. Pure."""

from __future__ import annotations

from typing import TYPE_CHECKING

from packaging.version import Version

from tfgpu.facts.machine import Machine
from tfgpu.facts.machine import maybe_version as _v
from tfgpu.judge.findings import Finding
from tfgpu.kb.versions import normalize_cuda, version

if TYPE_CHECKING:
    from tfgpu.kb.knowledge import KnowledgeBase
    from tfgpu.kb.records import Release


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
        return f"on a Jetson{release}, install NVIDIA's build for its JetPack: {jetson.fix(kb.sources('tensorflow'))}"
    return ("build TensorFlow from source for this CPU with CUDA, or run an NVIDIA container built for it "
            "(Grace Hopper, DGX Spark); tfgpu cannot create this environment")


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
