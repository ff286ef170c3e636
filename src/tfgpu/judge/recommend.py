"""The one recommendation: the release (and command) the doctor, plan and create propose here, the CPU route
when no release can use a GPU, and the best alternative to a blocked target."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from tfgpu.core.record import record, replace
from tfgpu.facts.machine import Machine
from tfgpu.judge.findings import (
    BLOCKED,
    CAVEATS,
    READY,
    TargetVerdict,
)

if TYPE_CHECKING:
    from tfgpu.facts.document import Facts
    from tfgpu.kb.knowledge import KnowledgeBase
from tfgpu.judge.verdict import MACHINE_BLOCKERS, judge_series


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
    from tfgpu.backends.names import CONTAINER_BACKENDS

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
