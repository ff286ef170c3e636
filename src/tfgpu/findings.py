"""What a judgement says, as records: the checks of a machine, the findings (blockers and caveats) of a
release, and the verdicts per backend and per release. tfgpu.verdict makes them, tfgpu.containers makes the
container route's, tfgpu.report renders them (``to_json()`` is the doctor JSON, schema tfgpu.doctor/1)."""

from __future__ import annotations

from typing import Any

from tfgpu._record import record
from tfgpu.versions import series_of, version

#: The status of a check (a line of the doctor's machine report).
PASS, WARN, FAIL, SKIP, ERROR = "pass", "warn", "fail", "skip", "error"
#: The verdict on a release here (README, "Verdicts").
READY, CAVEATS, BLOCKED = "ready", "caveats", "blocked"


@record
class Check:
    """One line of the doctor's machine report: its status, what was found, the evidence and the fix."""

    id: str
    status: str
    summary: str
    evidence: str = ""
    source: str = ""
    fix: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "status": self.status, "summary": self.summary,
                "evidence": self.evidence, "source": self.source, "fix": self.fix}


@record
class Finding:
    """A blocker or caveat of one target."""

    check: str
    summary: str
    fix: str = ""
    mitigated_by: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"check": self.check, "summary": self.summary, "fix": self.fix}
        if self.mitigated_by:
            out["mitigated_by"] = self.mitigated_by
        return out


@record
class BackendVerdict:
    """One recipe (or the container route's image) judged for one release here: viable or not, and why."""

    backend: str  # "pip" | "conda"
    recipe: str
    viable: bool
    blockers: tuple[Finding, ...] = ()
    caveats: tuple[Finding, ...] = ()
    cuda: str = ""
    cudnn: str = ""
    python: tuple[str, ...] = ()
    preference: int = 0  # among tied conda recipes, lower first (compat.Recipe.conda_preference)
    runtime: str = ""  # the container backend: docker | podman | apptainer | singularity ("" when none)

    def to_json(self) -> dict[str, Any]:
        out = {"backend": self.backend, "recipe": self.recipe, "viable": self.viable,
               "cuda": self.cuda, "cudnn": self.cudnn, "python": list(self.python),
               "blockers": [b.to_json() for b in self.blockers],
               "caveats": [c.to_json() for c in self.caveats]}
        if self.backend == "container":
            out["image"] = self.recipe
            out["runtime"] = self.runtime or None
        return out


@record
class TargetVerdict:
    """One release judged here: its verdict, the recipe tfgpu would build it with, and every recipe's judgement."""

    tf: str
    verdict: str
    backend: str | None
    recipe: str | None
    blockers: tuple[Finding, ...]
    caveats: tuple[Finding, ...]
    backends: tuple[BackendVerdict, ...] = ()
    requested: str = ""
    recipe_id: str | None = None  # the recipe `tfgpu plan` builds it with (tfgpu.choose); None: not chosen

    def to_json(self) -> dict[str, Any]:
        return {"tf": self.tf, "series": series_of(version(self.tf)), "verdict": self.verdict,
                "backend": self.backend, "recipe": self.recipe, "recipe_id": self.recipe_id,
                "blockers": [b.to_json() for b in self.blockers],
                "caveats": [c.to_json() for c in self.caveats],
                "backends": [b.to_json() for b in self.backends]}
