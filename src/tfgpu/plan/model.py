"""A plan, as a record: what `tfgpu plan` prints and `tfgpu create` runs -- the steps in order, what they install
and why (the verdict, notes, sources). Pure data (tfgpu.plan.planner makes it, tfgpu.build.execute runs it)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tfgpu.backends.steps import Step
from tfgpu.core.record import field, record

if TYPE_CHECKING:
    from tfgpu.judge.findings import Finding

PLAN_SCHEMA = "tfgpu.plan/1"


@record
class Plan:
    """One environment to build: its steps in order, what it installs, and why (the verdict, notes, sources)."""

    tf: str
    backend: str  # pip | conda | rattler
    backend_reason: str
    prefix: str
    name: str | None
    python: str
    steps: tuple[Step, ...]
    env_vars: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    recipe_id: str = ""
    sources: tuple[str, ...] = ()
    tool: str = ""  # uv | venv | mamba | micromamba | conda | rattler
    os: str = "linux"
    channels: tuple[str, ...] = ()
    conda_specs: tuple[str, ...] = ()
    pip_requirements: tuple[str, ...] = ()
    env_python: str = ""  # the new environment's interpreter
    conda_named: bool = False  # created with `-n NAME` in conda's envs directory
    verdict: str = ""  # the target's verdict here, as the doctor judges it ("" = not judged: from a lock)
    blockers: tuple[Finding, ...] = ()  # the chosen backend's blockers, as the doctor judges them
    caveats: tuple[Finding, ...] = ()
    cpu: bool = False  # the CPU route (--cpu): no CUDA, no nvidia-* wheels

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": PLAN_SCHEMA,
            "tf": self.tf,
            "backend": self.backend,
            "tool": self.tool,
            "backend_reason": self.backend_reason,
            "os": self.os,
            "name": self.name,
            "prefix": self.prefix,
            "python": self.python,
            "env_python": self.env_python,
            "recipe_id": self.recipe_id,
            "verdict": self.verdict,
            "blockers": [b.to_json() for b in self.blockers],
            "caveats": [c.to_json() for c in self.caveats],
            "cpu": self.cpu,
            "channels": list(self.channels),
            "conda_specs": list(self.conda_specs),
            "pip_requirements": list(self.pip_requirements),
            "steps": [s.to_json() for s in self.steps],
            "env_vars": dict(self.env_vars),
            "notes": list(self.notes),
            "sources": list(self.sources),
        }
