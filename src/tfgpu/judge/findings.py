"""What a judgement says, as records: the checks of a machine, the findings (blockers and caveats) of a
release, and the verdicts per backend and per release. tfgpu.judge.verdict makes them, tfgpu.judge.containers makes the
container route's, tfgpu.render.report renders them (``to_json()`` is the doctor JSON, schema tfgpu.doctor/1)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tfgpu.core.record import record, replace
from tfgpu.kb.versions import series_of, version

#: The status of a check (a line of the doctor's machine report).
PASS, WARN, FAIL, SKIP, ERROR = "pass", "warn", "fail", "skip", "error"
#: The verdict on a release here (README, "Verdicts").
READY, CAVEATS, BLOCKED = "ready", "caveats", "blocked"
#: How much a caveat matters (the JSON's ``severity``): informational = the release runs as is (a mitigated
#: risk, minor-version compatibility where the binaries carry SASS for the GPU); risky = it may fail or needs
#: the user to act (PTX JIT at start-up, a GPU to hide, facts that leave a requirement unchecked).
INFORMATIONAL, RISKY = "informational", "risky"


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
    severity: str = ""  # a caveat's: INFORMATIONAL | RISKY ("" on a blocker; graded() fills it in)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"check": self.check, "summary": self.summary, "fix": self.fix}
        if self.mitigated_by:
            out["mitigated_by"] = self.mitigated_by
        if self.severity:
            out["severity"] = self.severity
        return out


def graded(caveats: tuple[Finding, ...]) -> tuple[Finding, ...]:
    """Caveats with their severity: the one a check gave, else informational when the environment tfgpu makes
    mitigates it, else risky."""
    if all(c.severity for c in caveats):
        return caveats
    return tuple(c if c.severity else replace(c, severity=INFORMATIONAL if c.mitigated_by else RISKY) for c in caveats)


def graded_verdict(tv: TargetVerdict) -> TargetVerdict:
    """A release's verdict with every caveat graded, its own and each backend's (the verdict as it is when every
    caveat has its severity already)."""
    if all(c.severity for c in tv.caveats) and all(c.severity for b in tv.backends for c in b.caveats):
        return tv
    return replace(tv, caveats=graded(tv.caveats),
                   backends=tuple(b if all(c.severity for c in b.caveats) else replace(b, caveats=graded(b.caveats))
                                  for b in tv.backends))


def usable_rank(tv: TargetVerdict) -> int:
    """How well a release will run here, for choosing among releases (lower is better): 0 ready, or caveats that
    are all informational; 1 caveats of which one is risky; 2 blocked."""
    if tv.verdict == BLOCKED:
        return 2
    if tv.verdict == READY or all(c.severity == INFORMATIONAL or c.mitigated_by for c in tv.caveats):
        return 0
    return 1


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
    recipe_id: str | None = None  # the recipe `tfgpu plan` builds it with (tfgpu.plan.choose); None: not chosen

    def to_json(self) -> dict[str, Any]:
        return {"tf": self.tf, "series": series_of(version(self.tf)), "verdict": self.verdict,
                "backend": self.backend, "recipe": self.recipe, "recipe_id": self.recipe_id,
                "blockers": [b.to_json() for b in self.blockers],
                "caveats": [c.to_json() for c in self.caveats],
                "backends": [b.to_json() for b in self.backends]}


def chosen_blockers(target: Mapping[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """A blocked target's blockers as shown: the machine's own and those of the backend auto would take (the
    first judged), plus one line summarising the other backends (every blocker stays in the JSON)."""
    backends = [b for b in target.get("backends") or [] if b.get("blockers")]
    if len(backends) < 2:
        return list(target.get("blockers") or []), ""
    first, rest = backends[0], backends[1:]
    own = {str(b.get("summary")) for b in first["blockers"]}
    every_backend = {str(b.get("summary")) for x in backends for b in x["blockers"]}
    # the machine's blockers (no driver, ...) are in the target list without a "[backend: recipe]" tag
    shown = [b for b in target.get("blockers") or [] if not str(b.get("summary", "")).startswith("[")
             and str(b.get("summary")) not in every_backend]
    shown += [dict(b) for b in first["blockers"] if str(b.get("summary")) in own]
    n = sum(len(x["blockers"]) for x in rest)
    names = ", ".join(f"{x.get('backend')} ({x.get('recipe')})" for x in rest)
    return shown, f"also blocked: {names}, {n} blocker(s); every one: tfgpu doctor --tf {target.get('tf')} --json"
