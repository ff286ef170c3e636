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

from collections.abc import Iterable
from typing import TYPE_CHECKING

from packaging.version import Version

from tfgpu.core.record import replace
from tfgpu.core.tfnames import ALLOW_GROWTH, SMALL_GPU_MIB
from tfgpu.facts.machine import Machine, resolve_version
from tfgpu.judge.findings import (
    BLOCKED,
    CAVEATS,
    INFORMATIONAL,
    READY,
    BackendVerdict,
    Finding,
    TargetVerdict,
    graded_verdict,
    usable_rank,
)
from tfgpu.judge.release_checks import (
    ReleaseContext,
    machine_blockers,
    no_wheel_for_python,
    recipe_cudas,
    recipe_findings,
    recipes_judged,
)
from tfgpu.kb.knowledge import register_indexer
from tfgpu.kb.versions import series_of, version

if TYPE_CHECKING:
    from tfgpu.facts.document import Facts
    from tfgpu.kb.knowledge import KnowledgeBase
    from tfgpu.kb.records import Build



#: Blockers that come from the machine alone, whatever the release (judge_newest_workable stops at them).
MACHINE_BLOCKERS = frozenset({"os.supported", "os.wsl", "driver.installed", "driver.kernel_match", "driver.libcuda",
                              "gpu.present", "env.cuda_visible_devices", "cpu.arch"})


# --------------------------------------------------------------------------- per-target verdicts


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
    tv = graded_verdict(tv)
    return runnable_fixes(tv) if m.conda is None else tv


def runnable_hint(text: str) -> str:
    """A fix for a machine without mamba, micromamba or conda: `--backend conda` would stop and ask for
    one, tfgpu's embedded engine (`--backend rattler`) builds the same conda recipe."""
    return text.replace("--backend conda", "--backend rattler")


def runnable_fixes(tv: TargetVerdict) -> TargetVerdict:
    """``tv`` with every fix that says ``--backend conda`` saying :func:`runnable_hint`'s instead. What names no
    conda backend is kept as it is (most findings): no copy of a verdict or backend that would not change."""
    def needs(fs: tuple[Finding, ...]) -> bool:
        return any("--backend conda" in f.fix for f in fs)

    def fixed(fs: tuple[Finding, ...]) -> tuple[Finding, ...]:
        return tuple(replace(f, fix=runnable_hint(f.fix)) if "--backend conda" in f.fix else f for f in fs)

    backends = tuple(replace(b, blockers=fixed(b.blockers), caveats=fixed(b.caveats))
                     if needs(b.blockers) or needs(b.caveats) else b for b in tv.backends)
    if not (needs(tv.blockers) or needs(tv.caveats)) and all(b is c for b, c in zip(backends, tv.backends)):
        return tv
    return replace(tv, blockers=fixed(tv.blockers), caveats=fixed(tv.caveats), backends=backends)


def _judge_release(facts: Facts, kb: KnowledgeBase, v: Version, *, backend: str = "auto",
                   machine: Machine | None = None) -> TargetVerdict:
    """One release judged check by check (tfgpu.judge.release_checks: the machine's blockers, then each recipe's
    checks), then assembled: blocked, or the best recipe's verdict with the others' blockers as caveats. Its
    caveats are graded (informational or risky) when it is presented (:func:`_presented`)."""
    return _judge(ReleaseContext(facts, kb, v, machine or Machine.from_facts(facts, kb), backend))


def _judge(ctx: ReleaseContext) -> TargetVerdict:
    kb, v, backend = ctx.kb, ctx.v, ctx.backend
    blockers = machine_blockers(ctx)
    build = kb.build_for(v, ctx.m.tf_os)
    if build is None:
        blockers.append(Finding("tf.gpu_build", f"TensorFlow {v} has no GPU build for {ctx.m.tf_os}",
                                fix="choose another release: tfgpu compat"))
        blockers += no_wheel_for_python(ctx)
        return TargetVerdict(str(v), BLOCKED, None, None, tuple(blockers), (), (), str(v))
    verdicts = _judge_recipes(ctx, build)
    caveats = _release_caveats(ctx)
    if not verdicts:
        blockers.append(Finding(
            "tf.recipe", f"no {backend if backend != 'auto' else ''} recipe installs TensorFlow {v} with GPU support on "
            f"{ctx.os}".replace("  ", " "), fix="try --backend auto, or another release: tfgpu compat --tf " + series_of(v),
        ))
        return TargetVerdict(str(v), BLOCKED, None, None, tuple(blockers), tuple(caveats), (), str(v))
    if blockers or not any(b.viable for b in verdicts):
        return _blocked(ctx, blockers, caveats, verdicts)
    return _workable(ctx, caveats, verdicts)


def _judge_recipes(ctx: ReleaseContext, build: Build) -> list[BackendVerdict]:
    """Each recipe of the release judged by the checks of tfgpu.judge.release_checks.RECIPE_CHECKS; under a
    container backend (docker, podman, apptainer, container) the container route alone."""
    from tfgpu.backends.names import CONTAINER_BACKENDS

    if ctx.backend in CONTAINER_BACKENDS and ctx.os in ("linux", "wsl2") and not ctx.m.arm_linux:
        from tfgpu.judge.containers import judge_container

        return [judge_container(ctx.facts, ctx.kb, ctx.v, ctx.m, wanted=ctx.backend)]  # the route the user asked for
    out = []
    for rc in recipes_judged(ctx, build):
        b_block, b_cav = recipe_findings(ctx, rc)
        out.append(BackendVerdict(
            rc.name, rc.recipe.id, not b_block, tuple(b_block), tuple(b_cav), rc.cuda, rc.cudnn,
            rc.pythons, rc.recipe.conda_preference() if rc.name == "conda" else 0,
        ))
    return out


def _release_caveats(ctx: ReleaseContext) -> list[Finding]:
    """Caveats of the release whatever the recipe. Small GPUs: mitigated by the environment tfgpu makes, so it
    does not downgrade the verdict."""
    small = [g for g in (ctx.m.gpus or ()) if g.get("memory_mib") and int(g["memory_mib"]) <= SMALL_GPU_MIB]
    if not small:
        return []
    return [Finding(
        "gpu.memory", f"small GPU ({small[0].get('memory_mib')} MiB): TensorFlow's default allocation of nearly all "
        "memory ends in CUDNN_STATUS_INTERNAL_ERROR", fix=f"export {ALLOW_GROWTH[0]}={ALLOW_GROWTH[1]}",
        mitigated_by=f"{ALLOW_GROWTH[0]}={ALLOW_GROWTH[1]} in the environment tfgpu creates",
    )]


def _gpu_arch_blocked(ctx: ReleaseContext, verdicts: list[BackendVerdict]) -> bool:
    return ctx.backend == "auto" and any(f.check == "gpu.arch" for b in verdicts for f in b.blockers)


def _blocked(ctx: ReleaseContext, blockers: list[Finding], caveats: list[Finding],
             verdicts: list[BackendVerdict]) -> TargetVerdict:
    """A blocked release: the machine's blockers, then every backend's, deduplicated (the first backend's fix
    first); NVIDIA's container that runs on the GPU as a caveat when no wheel does."""
    from tfgpu.judge.containers import container_alternative

    if _gpu_arch_blocked(ctx, verdicts):
        alt = container_alternative(ctx.kb, ctx.m, ctx.v)
        if alt is not None:
            caveats.append(alt)
    seen: set[str] = set()
    merged = list(blockers)
    for b in verdicts:
        for f in b.blockers:
            key = f.check + f.summary
            if key not in seen:
                seen.add(key)
                merged.append(Finding(f.check, f"[{b.backend}: {b.recipe}] {f.summary}", f.fix))
    tf = str(ctx.v)
    return TargetVerdict(tf, BLOCKED, verdicts[0].backend, verdicts[0].recipe, tuple(merged), tuple(caveats),
                         tuple(verdicts), tf)


def _workable(ctx: ReleaseContext, caveats: list[Finding], verdicts: list[BackendVerdict]) -> TargetVerdict:
    """A release some recipe can build: the best recipe's verdict, the others' blockers as mitigated caveats."""
    from tfgpu.judge.containers import container_alternative

    best = rank_backends(b for b in verdicts if b.viable)[0]
    all_cav = list(best.caveats) + caveats
    if _gpu_arch_blocked(ctx, verdicts):
        alt = container_alternative(ctx.kb, ctx.m, ctx.v)
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
    tf = str(ctx.v)
    return TargetVerdict(tf, CAVEATS if unmitigated else READY, best.backend, best.recipe, (), tuple(all_cav),
                         tuple(verdicts), tf)


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
    ctx = ReleaseContext({}, kb, v, m, backend)
    return all(cuda_rules_out(m, kb, v, cuda) for cuda in recipe_cudas(ctx, build))


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
    from tfgpu.judge.gpu_rules import index_gpu_generations

    index_gpu_generations(kb)
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
        if usable_rank(tv) == 0:
            break  # nothing older can be better
        if tv.verdict == BLOCKED and any(b.check in MACHINE_BLOCKERS for b in tv.blockers):
            break  # the machine blocks every release alike: no older patch release can help
    pick = min(range(len(judged)), key=lambda i: (usable_rank(judged[i][1]), i))
    newest, (picked, best) = judged[0][1], judged[pick]
    if pick > 0:
        why = (newest.blockers or [c for c in newest.caveats if c.severity != INFORMATIONAL]
               or (Finding("", "it is not ready here"),))[0]
        best = replace(best, caveats=(*best.caveats, Finding(
            "tf.patch", f"TensorFlow {newest.tf}, the newest {series_of(version(newest.tf))} release, is "
            f"{newest.verdict} here ({why.summary}); {best.tf} is the newest release of the series that is {best.verdict}",
            fix=why.fix, mitigated_by=f"tfgpu recommends {best.tf}", severity=INFORMATIONAL)))
    return _presented(facts, kb, picked, best, backend=backend, machine=m)


