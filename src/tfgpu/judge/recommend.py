"""The one recommendation: which release (and backend) the doctor, `plan`, `create` and `lock` propose here, for
the whole machine, for a target that works, and instead of a blocked one. :func:`recommend_for` decides;
tfgpu.plan.choose.recommendation adds the recipe and runner `tfgpu plan` picks, and every command that prints a
recommendation (the doctor's, and each "instead: ..." line) goes through that one function.

The order, for a blocked target: the asked release on another backend; then the best release of every series
the knowledge base knows (1.0 to the newest, every recipe: pip, conda-forge's and Anaconda's builds); then the
container route where a runtime can run it; then the CPU route, with a release whose CPU wheels this CPU runs.
Among releases, the newest whose caveats are all informational wins, else the newest with caveats."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from tfgpu.core.record import field, record, replace
from tfgpu.facts.machine import Machine
from tfgpu.judge.findings import (
    BLOCKED,
    TargetVerdict,
    usable_rank,
)
from tfgpu.kb.versions import version

if TYPE_CHECKING:
    from tfgpu.facts.document import Facts
    from tfgpu.kb.knowledge import KnowledgeBase
from tfgpu.judge.verdict import MACHINE_BLOCKERS, judge_newest_workable, judge_release, judge_series


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
    needs: str | None = None  # what to install first: no runner installed here can build the recipe (tfgpu.plan.choose)
    #: the release's verdict the recommendation was made from (None: the CPU route); not part of the JSON
    target: TargetVerdict | None = field(default=None, compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        """The doctor JSON's ``recommendation`` (schema tfgpu.doctor/1; the optional fields only when set)."""
        out: dict[str, Any] = {"tf": self.tf, "backend": self.backend, "recipe": self.recipe,
                               "recipe_id": self.recipe_id, "verdict": self.verdict, "command": self.command}
        for key in ("why", "instead_of", "why_not", "needs"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


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
    command names the backend asked for (the route's recipes say only "container"); any other is as it is. A route
    judged runnable through another runtime than the one asked for (apptainer installed, docker asked) is named
    ``--backend container``: that picks the runtime the route was judged with."""
    if rec.backend != "container":
        return rec
    box = next((b for b in (rec.target.backends if rec.target is not None else ()) if b.backend == "container"), None)
    runtime = getattr(box, "runtime", None)
    if backend != "container" and runtime and runtime != backend and (runtime, backend) != ("singularity", "apptainer"):
        backend = "container"
    return replace(rec, command=f"tfgpu create --tf {rec.tf} --backend {backend}")


def best_verdict(verdicts: Iterable[TargetVerdict]) -> TargetVerdict | None:
    """The release to recommend among ``verdicts`` (newest first): the newest that is ready or whose caveats are
    all informational, else the newest with caveats; None when every one is blocked."""
    ranked = [(usable_rank(tv), i, tv) for i, tv in enumerate(verdicts)]
    found = min((r for r in ranked if r[0] < 2), default=None, key=lambda r: (r[0], r[1]))
    return found[2] if found is not None else None


def recommend(facts: Facts, kb: KnowledgeBase, verdicts: list[TargetVerdict] | None = None,
              machine: Machine | None = None) -> Recommendation | None:
    """The newest release that will use the GPU here among ``verdicts`` (every series when None), by
    :func:`best_verdict`; None when none will."""
    machine = machine or Machine.from_facts(facts, kb)
    verdicts = verdicts if verdicts is not None else judge_series(facts, kb, machine=machine)
    best = best_verdict(verdicts)
    return _recommendation(best, machine) if best is not None else None


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
    """The CPU route (`tfgpu create --tf X --cpu`): the newest release whose CPU wheels this CPU can run (a CPU
    without AVX: a release before the wheels needed it, compat/tensorflow.toml `cpu_requirements`), with a wheel
    for one of the machine's Pythons where one has any."""
    series = kb.series("linux")  # the CPU builds follow the releases, not any OS's GPU builds
    runs = [s for s in series if machine.avx is not False or kb.cpu_requirement("avx", version(s + ".0")) is None]
    if not runs:
        return None
    fits = [s for s in runs if machine.pythons is None or machine.arm_linux  # (PyPI's aarch64 wheels: AWS's, 2.10+)
            or set(kb.pythons_for(kb.resolve_tf(s), "linux")) & set(machine.pythons)]
    tf = (fits or runs)[0]
    return Recommendation(tf=tf, backend="cpu", recipe="cpu", recipe_id="cpu", verdict="cpu",
                          command=f"tfgpu create --tf {tf} --cpu", why="; ".join(reasons))


def _every_series(facts: Facts, kb: KnowledgeBase, m: Machine, judged: Iterable[TargetVerdict]) -> list[TargetVerdict]:
    """Every series the knowledge base has a GPU build of (1.0 to the newest), newest first, each by its best
    release: those ``judged`` already (the doctor's table), the others judged now."""
    have = {str(version(t.tf).release[:2]): t for t in judged}
    out = []
    for series in kb.series(m.tf_os):
        key = str(version(series).release[:2])
        if key in have:
            out.append(have[key])
            continue
        releases = kb.gpu_versions_in(series, m.tf_os) or kb.gpu_versions_in(series, "linux")
        if releases:
            out.append(judge_newest_workable(facts, kb, releases, machine=m))
    return out


def _container_route(verdicts: Iterable[TargetVerdict]) -> TargetVerdict | None:
    """The newest release whose container route can run here (a runtime with GPU support, an image that fits):
    the last resort before the CPU route."""
    for tv in verdicts:  # a runtime the facts show (the route is never proposed on a machine without one)
        box = next((b for b in tv.backends if b.backend == "container" and b.viable and b.runtime), None)
        if box is not None:
            return replace(tv, verdict="caveats" if box.caveats else "ready", backend="container", recipe=box.recipe,
                           recipe_id=box.recipe, blockers=(), caveats=box.caveats)
    return None


def best_anywhere(facts: Facts, kb: KnowledgeBase, m: Machine,
                  series_verdicts: list[TargetVerdict]) -> Recommendation | None:
    """The best release the knowledge base knows for this machine: among the doctor's series first; when none of
    them will use the GPU, among every series (1.x too) and recipe; then the container route; then the CPU route
    (None only when no CPU build runs here either)."""
    best = best_verdict(series_verdicts)
    if best is None and not no_gpu_reasons(series_verdicts):
        everything = _every_series(facts, kb, m, series_verdicts)
        best = best_verdict(everything) or _container_route(everything)
    if best is not None:
        return _recommendation(best, m)
    reasons = no_gpu_reasons(series_verdicts) or ["no TensorFlow release tfgpu knows can use the GPU here "
                                                  "(tfgpu doctor lists each release's blockers)"]
    return cpu_recommendation(kb, m, reasons)


def recommend_for(facts: Facts, kb: KnowledgeBase, *, target: TargetVerdict | None = None,
                  series_verdicts: list[TargetVerdict] | None = None, backend: str = "auto",
                  machine: Machine | None = None) -> Recommendation | None:
    """The one recommendation (its release and backend; tfgpu.plan.choose.recommendation adds the runner): with no
    ``target``, the best release here (:func:`best_anywhere`); for a target that works, that target; for a blocked
    one, what works instead (:func:`recommend_instead`)."""
    m = machine or Machine.from_facts(facts, kb)
    if target is None:
        verdicts = series_verdicts if series_verdicts is not None else judge_series(facts, kb, backend=backend, machine=m)
        return best_anywhere(facts, kb, m, verdicts)
    if target.verdict != BLOCKED:
        return _recommendation(target, m)
    return recommend_instead(facts, kb, target, m, backend=backend)


def recommend_instead(facts: Facts, kb: KnowledgeBase, target: TargetVerdict, machine: Machine, *,
                      backend: str = "auto") -> Recommendation | None:
    """For a blocked --tf target: the asked release on another backend first (a pip release blocked by the system
    CUDA it loads may run through conda, which brings its own); a container ``backend`` (docker, podman, apptainer,
    container) looks for the best release of that route first (an image that works, e.g. 2.17.1-gpu when 2.18+'s
    images carry the wrong cuDNN); then the best anywhere (:func:`best_anywhere`)."""
    from tfgpu.backends.names import CONTAINER_BACKENDS

    m = machine
    instead = None
    if backend in CONTAINER_BACKENDS:
        rec = recommend(facts, kb, judge_series(facts, kb, backend=backend, machine=m), m)
        instead = for_container_backend(rec, backend) if rec is not None else None
    elif backend != "auto":
        other = judge_release(facts, kb, version(target.tf), machine=m)
        instead = _recommendation(other, m) if usable_rank(other) < 2 else None
    if instead is None:
        instead = best_anywhere(facts, kb, m, judge_series(facts, kb, machine=m))
    if instead is None:
        return None
    why_not = target.blockers[0].summary if target.blockers else None
    if why_not is not None and why_not.startswith("["):
        why_not = why_not.split("] ", 1)[-1]  # without the "[pip: recipe]" tag
    return replace(instead, instead_of=target.tf, why_not=why_not)


def _recommendation(tv: TargetVerdict, machine: Machine | None = None) -> Recommendation:
    return Recommendation(tf=tv.tf, backend=tv.backend, recipe=tv.recipe, recipe_id=tv.recipe_id or tv.recipe,
                          verdict=tv.verdict, command=create_command(tv, machine), target=tv)
