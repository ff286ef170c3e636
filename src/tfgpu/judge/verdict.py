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

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from packaging.version import Version

from tfgpu.core.errors import DataError
from tfgpu.core.record import replace
from tfgpu.core.tfnames import ALLOW_GROWTH, SMALL_GPU_MIB
from tfgpu.facts.machine import Machine, resolve_version
from tfgpu.judge.findings import (
    BLOCKED,
    CAVEATS,
    READY,
    BackendVerdict,
    Finding,
    TargetVerdict,
)
from tfgpu.judge.gpu_rules import gpu_findings
from tfgpu.judge.system import _arm_fix, _glibc_findings, _system_library_findings, driver_findings
from tfgpu.kb.knowledge import register_indexer
from tfgpu.kb.versions import normalize_cuda, series_of, version

if TYPE_CHECKING:
    from tfgpu.facts.document import Facts
    from tfgpu.kb.knowledge import KnowledgeBase
    from tfgpu.kb.records import Build, Recipe



#: Blockers that come from the machine alone, whatever the release (judge_newest_workable stops at them).
MACHINE_BLOCKERS = frozenset({"os.supported", "os.wsl", "driver.installed", "driver.kernel_match", "gpu.present",
                              "env.cuda_visible_devices", "cpu.arch"})


# --------------------------------------------------------------------------- facts accessors


# --------------------------------------------------------------------------- environment checks


# --------------------------------------------------------------------------- per-target verdicts


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
        from tfgpu.judge.containers import judge_container

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
    from tfgpu.backends.names import CONTAINER_BACKENDS
    from tfgpu.judge.containers import container_alternative, judge_container

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
            "memory ends in CUDNN_STATUS_INTERNAL_ERROR", fix=f"export {ALLOW_GROWTH[0]}={ALLOW_GROWTH[1]}",
            mitigated_by=f"{ALLOW_GROWTH[0]}={ALLOW_GROWTH[1]} in the environment tfgpu creates",
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
    one of the GPUs (the first rule of tfgpu.judge.gpu_rules, which then blocks that recipe), or it has no recipe at
    all. A shortcut, never a different answer: :func:`judge_newest_workable` skips older patch releases that
    are blocked this way (on an H100, every patch of 1.15-2.11), as judging them would only find them blocked."""
    from tfgpu.backends.names import CONTAINER_BACKENDS
    from tfgpu.judge.gpu_rules import cuda_rules_out

    if backend in CONTAINER_BACKENDS:
        return False  # the container route is judged on its own terms
    build = kb.build_for(v, m.tf_os)
    if build is None:
        return True  # "no GPU build": blocked
    return all(cuda_rules_out(m, kb, v, cuda) for _r, _n, cuda, _c in _recipes_judged(kb, m, v, m.os or "linux",
                                                                                   build, backend))


def rank_backends(backends: Iterable[BackendVerdict]) -> list[BackendVerdict]:
    """The order recipes are recommended in (tfgpu.plan.choose follows it): viable ones first, fewest caveats
    first, the pip way before the conda way on a tie, then the conda recipes in their order of preference (the
    official docs' conda+pip, conda-forge's builds, Anaconda's); then the blocked ones, in the knowledge base's order."""
    items = list(backends)
    viable = sorted((b for b in items if b.viable),
                    key=lambda b: (len(b.caveats), 0 if b.backend == "pip" else 1, b.preference))
    return viable + [b for b in items if not b.viable]


def judge_requested(facts: Facts, kb: KnowledgeBase, tf: str, *, backend: str = "auto",
                    machine: Machine | None = None) -> TargetVerdict:
    """A release is judged as is; a series ("2.2") by its newest release that can work here."""
    m = machine or Machine.from_facts(facts, kb)
    v = resolve_version(kb, tf, m)
    if len(tf.strip().split(".")) == 2:
        releases = kb.gpu_versions_in(series_of(v), m.tf_os) or kb.gpu_versions_in(series_of(v), "linux")
        return judge_newest_workable(facts, kb, releases or [v], backend=backend, machine=m)
    return judge_release(facts, kb, v, backend=backend, machine=m)


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


