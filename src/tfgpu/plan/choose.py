"""Choose: a target's verdict + the installed tools + the user's preferences -> one recipe and who runs it.

This is the one place that picks a recipe. ``tfgpu doctor`` (its per-target rows and its recommendation),
``tfgpu plan``, ``tfgpu create`` and ``tfgpu lock`` all call :func:`choose`, so they cannot disagree.

Recipes are tried in the verdict's order (:func:`tfgpu.judge.verdict.rank_backends`: viable ones first, fewest
caveats first, pip before conda on a tie), then the blocked ones in the knowledge base's order (so that
``create --force`` still has something to build). Each recipe is offered to the runners of
:data:`RUNNERS`, an ordered table in the manner of cibuildwheel's platform modules and nox's
``uv|virtualenv`` fallback chain: the first runner that is available and can build the recipe wins.

Pure: ``tools`` (what is installed) is handed in by the caller (``tfgpu.backends.detect.detect_tools``, or
:func:`tools_from_facts` for the doctor).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from tfgpu.core.errors import UsageError
from tfgpu.core.record import replace
from tfgpu.kb.versions import series_of, version

if TYPE_CHECKING:
    from tfgpu.facts.document import Facts
    from tfgpu.facts.machine import Machine
    from tfgpu.judge.diagnose import DoctorResult
    from tfgpu.judge.findings import TargetVerdict
    from tfgpu.judge.recommend import Recommendation
    from tfgpu.kb.knowledge import KnowledgeBase
    from tfgpu.kb.records import Recipe

# The values --backend takes are the backend table's (tfgpu.backends.names, which the verdict reads too); the
# runners and their table are tfgpu.backends.runners (tfgpu.judge.containers uses it too).
from tfgpu.backends.names import BACKENDS, CONTAINER_BACKENDS
from tfgpu.backends.runners import (
    CONDA,
    CONDA_FAMILY,
    CONDA_TOOLS,
    CONTAINER,
    PIP,
    RATTLER,
    RUNNERS,
    Choice,
    Context,
    Preferences,
    Runner,
    conda_tool,
    first_able,
)


def interpreters(facts: Facts, tools: Mapping[str, str | None]) -> dict[str, str]:
    """Python X.Y -> path: the facts' interpreters (a version without a path, e.g. from TFGPU_PYTHONS, is
    run as ``pythonX.Y``), then what the caller found on PATH ("python3.11": path)."""
    found: dict[str, str] = {}
    py = facts.get("python") or {}
    for it in py.get("interpreters") or []:
        if isinstance(it, Mapping) and it.get("version") and it.get("bits") != 32:  # no TF wheel fits a 32-bit one
            try:
                xy = _xy(str(it["version"]))
            except InvalidVersion:  # a garbled version in a facts file is not fatal for planning
                continue
            found.setdefault(xy, str(it.get("path") or f"python{xy}"))
    for key, path in tools.items():
        if key.startswith("python") and path and re.fullmatch(r"python\d+\.\d+", key):
            found.setdefault(key[len("python"):], path)
    return found


def target_os(facts: Facts) -> str:
    """linux | wsl2 | windows | macos, from the facts' platform section (unknown -> this host)."""
    plat = facts.get("platform") or {}
    os_name = str(plat.get("os") or ("windows" if sys.platform == "win32" else
                                     "macos" if sys.platform == "darwin" else "linux"))
    if os_name == "linux" and plat.get("wsl") == 2:
        return "wsl2"
    return os_name


def tools_from_facts(facts: Facts) -> dict[str, str | None]:
    """The tools a facts document shows (the doctor does not look at PATH): its conda and interpreters."""
    tools: dict[str, str | None] = {"uv": None, "rattler": "embedded" if sys.version_info >= (3, 10) else None}
    for t in CONDA_TOOLS:
        tools[t] = None
    conda = facts.get("conda") or {}
    if isinstance(conda, Mapping) and conda.get("kind") in CONDA_TOOLS:
        tools[str(conda["kind"])] = str(conda.get("path") or conda["kind"])
    return tools


def _xy(text: str) -> str:
    # both memoized (the doctor asks for every interpreter once per target); version() refuses a 5,000-digit
    # number before converting it
    return series_of(version(str(text)))


# --------------------------------------------------------------------------- the order of recipes


def candidate_recipes(kb: KnowledgeBase, v: Version, os_name: str) -> list[Recipe]:
    """GPU recipes for ``v`` on ``os_name``; WSL2 also runs the Linux ones (its own first), as the verdict judges."""
    recipes = [r for r in kb.recipes_for(v, os_name) if r.gpu]
    if os_name == "wsl2":
        recipes += [r for r in kb.recipes_for(v, "linux") if r.gpu and r not in recipes]
    return recipes


def kb_order(kb: KnowledgeBase, facts: Facts, v: Version, os_name: str,
             recipes: Sequence[Recipe], *, machine: Machine | None = None) -> list[Recipe]:
    """The order without a verdict to go by: the pip recipe that brings its own CUDA (one that needs the
    system's CUDA only when that CUDA is installed, or when no conda recipe exists), then the conda
    recipes (the official docs' conda+pip first, then conda-forge's builds, then Anaconda's). ``machine``:
    ``facts`` read as a Machine, when the caller has it (else they are read here, when a recipe needs them)."""
    from tfgpu.facts.machine import Machine
    from tfgpu.judge.system import system_cuda_installed

    pips = sorted((r for r in recipes if r.backend == "pip"), key=lambda r: not r.provides_cuda)
    condas = sorted((r for r in recipes if r.backend in CONDA_FAMILY), key=lambda r: r.conda_preference())
    build = kb.build_for(v, os_name)
    cuda_here = None  # whether the system's CUDA is installed: asked once, and only when a recipe needs to know
    first = []
    for r in pips:
        if not r.provides_cuda and condas and build is not None:
            if cuda_here is None:
                cuda_here = system_cuda_installed(machine or Machine.from_facts(facts, kb), build.cuda, v, kb)
            if not cuda_here:
                continue
        first.append(r)
    return first + condas + [r for r in pips if r not in first]


def ranked_recipes(kb: KnowledgeBase, facts: Facts, verdict: TargetVerdict | None,
                   v: Version, os_name: str, *, machine: Machine | None = None) -> list[Recipe]:
    """The verdict's viable recipes in its order, then every other recipe in :func:`kb_order`. When the
    verdict says the release will work here, a conda recipe whose channel does not carry the release is
    left out, as the verdict leaves it out (the doctor names the release the plan builds)."""
    from tfgpu.judge.findings import BLOCKED
    from tfgpu.judge.system import recipe_available
    from tfgpu.judge.verdict import rank_backends

    recipes = candidate_recipes(kb, v, os_name)
    judged = verdict is not None and verdict.tf == str(v)
    if judged and verdict is not None and verdict.verdict != BLOCKED:
        recipes = [r for r in recipes if recipe_available(kb, r, v, os_name)]
    by_id = {r.id: r for r in recipes}
    first: list[Recipe] = []
    if judged and verdict is not None:
        first = [by_id[b.recipe] for b in rank_backends(verdict.backends) if b.viable and b.recipe in by_id]
    return first + [r for r in kb_order(kb, facts, v, os_name, recipes, machine=machine) if r not in first]


# --------------------------------------------------------------------------- choose


def _why_not_pip(verdict: TargetVerdict | None, recipe: Recipe) -> str:
    """Why the verdict put a conda recipe before the pip ones (for the plan's backend_reason)."""
    if verdict is None:
        return ""
    pips = [b for b in verdict.backends if b.backend == "pip"]
    if not pips:
        return ""
    blocked = [b for b in pips if not b.viable]
    if len(blocked) == len(pips):
        findings = [f for b in blocked for f in b.blockers]
        if findings and all(f.check.startswith("gpu.") for f in findings):
            return f"the official wheels cannot use this GPU ({findings[0].summary})"
        if findings:
            return f"the pip way would not work here ({findings[0].summary})"
        return ""
    mine = next((b for b in verdict.backends if b.recipe == recipe.id), None)
    if mine is not None and mine.viable and len(mine.caveats) < min(len(b.caveats) for b in pips):
        return f"it has fewer caveats here than the pip way ({pips[0].caveats[0].summary})" if pips[0].caveats else ""
    return ""


def _reason(runner: Runner, tool: str, recipe: Recipe, ctx: Context, prefs: Preferences, verdict: TargetVerdict | None,
            *, pip_without_python: bool, python: str) -> str:
    if runner.name == "pip":
        reason = (f"pip recipe {recipe.id}: a Python {python} interpreter is installed, "
                  f"{'uv' if tool == 'uv' else 'python -m venv (uv is not installed)'} makes the venv")
        return f"--backend pip: {reason}" if prefs.backend == "pip" else reason
    why_not = _why_not_pip(verdict, recipe)
    if prefs.backend != "auto":
        return f"--backend {prefs.backend}: conda recipe {recipe.id}, run with {tool}"
    if why_not:
        return f"{why_not}; conda recipe {recipe.id} carries what this machine needs, run with {tool}"
    if pip_without_python:
        return (f"no Python in {', '.join(ctx.wheel_pythons)} is installed for the pip recipe; "
                f"conda recipe {recipe.id} brings its own Python, run with {tool}")
    why = "no pip recipe applies"
    if tool == "rattler":
        why += "; no mamba, micromamba or conda is installed, so tfgpu's embedded engine (rattler) runs it"
    return f"{why}: conda recipe {recipe.id}, run with {tool}"


def _choose_one(kb: KnowledgeBase, facts: Facts, verdict: TargetVerdict | None, v: Version, os_name: str,
                tools: Mapping[str, str | None], prefs: Preferences, machine: Machine | None) -> Choice:
    if prefs.backend not in BACKENDS:
        msg = f"unknown backend {prefs.backend!r}"
        raise UsageError(msg, hint=f"use one of: {', '.join(BACKENDS)}")
    recipes = ranked_recipes(kb, facts, verdict, v, os_name, machine=machine)
    if not recipes:
        where = {"windows": "native Windows", "wsl2": "WSL2", "macos": "macOS"}.get(os_name, os_name)
        msg = f"tfgpu knows no GPU install recipe for TensorFlow {v} on {where}"
        from tfgpu.judge.release_checks import last_windows_gpu_series

        last = last_windows_gpu_series(kb)
        hint = (f"TensorFlow after {last} has no GPU build for native Windows: use WSL2, or --tf {last}"
                if os_name == "windows" else "see `tfgpu compat` for the versions with a recipe")
        raise UsageError(msg, hint=hint)
    ctx = Context(v=v, os=os_name, tools=tools, interpreters=interpreters(facts, tools),
                  wheel_pythons=tuple(kb.pythons_for(v, os_name)), python=prefs.python,
                  newest_python=kb.newest_python(os_name))
    runners = RUNNERS[prefs.backend]
    if prefs.backend == "auto":  # the embedded engine only when no conda tool is installed
        runners = (PIP, CONDA) if conda_tool(tools) else (PIP, RATTLER)
    usable = [r for r in recipes if any(run.runs(r) for run in runners)]
    if not usable:
        family = "pip" if prefs.backend == "pip" else "conda"
        msg = f"no {family} recipe for TensorFlow {v} on {os_name}"
        conda_way = "--backend conda" if conda_tool(tools) else "--backend rattler"  # what runs on this machine
        raise UsageError(msg, hint=f"use {conda_way}" if family == "pip" else "use --backend pip")
    viable = _viable_recipes(verdict, v)
    first = [r for r in usable if viable is None or r.id in viable]
    if viable is not None and not first:  # the workable recipes are of a family this backend does not build
        raise NoRunner(v, [r for r in recipes if r.id in viable], None, backend=prefs.backend)
    found = _first_runnable(kb, first, runners, ctx, prefs, verdict)
    if isinstance(found, Choice):
        return found
    if prefs.backend == "auto" and first and first[0].backend == "pip" and (
            viable is not None or not any(r.backend in CONDA_FAMILY for r in recipes)):
        # a pip recipe the verdict finds workable (or no conda recipe at all) and no interpreter for it: a
        # conda-made interpreter, then pip
        fallback = _conda_python(kb, first[0], ctx, tools)
        if fallback is not None:
            return fallback
    if viable is not None:  # the target works here, but not through a recipe the verdict blocks: say what to install
        raise NoRunner(v, first, found[0], backend=prefs.backend)
    rest = _first_runnable(kb, [r for r in usable if r not in first], runners, ctx, prefs, verdict,
                           pip_without_python=found[1])
    if isinstance(rest, Choice):
        return rest
    error = found[0] or rest[0]
    assert error is not None
    raise error


def _viable_recipes(verdict: TargetVerdict | None, v: Version) -> set[str] | None:
    """The recipes the verdict of release ``v`` finds workable (None: no verdict of ``v``, or it is blocked)."""
    if verdict is None or verdict.tf != str(v) or verdict.verdict == "blocked":
        return None
    return {b.recipe for b in verdict.backends if b.viable}


def _first_runnable(kb: KnowledgeBase, recipes: Sequence[Recipe], runners: Sequence[Runner], base_ctx: Context,
                    prefs: Preferences, verdict: TargetVerdict | None, *,
                    pip_without_python: bool = False) -> Choice | tuple[UsageError | None, bool]:
    """The first of ``recipes`` a runner can build (in order), else (the first refusal, whether pip was refused)."""
    first_error: UsageError | None = None
    for recipe in recipes:
        ctx = _recipe_context(kb, base_ctx, recipe)
        runner, refused = first_able(runners, recipe, ctx)
        for r, error in refused:
            first_error = first_error or error
            pip_without_python = pip_without_python or r is PIP
        if runner is not None:
            tool = runner.available(ctx) or runner.name
            python = PIP.python_for(ctx) or "" if runner is PIP else ""
            return Choice(recipe, runner.name, tool,
                          _reason(runner, tool, recipe, ctx, prefs, verdict,
                                  pip_without_python=pip_without_python, python=python), python=python)
    return first_error, pip_without_python


def _conda_python(kb: KnowledgeBase, recipe: Recipe, base_ctx: Context, tools: Mapping[str, str | None]) -> Choice | None:
    """A pip recipe with no interpreter for it here: conda (or the embedded engine) makes one, then pip."""
    ctx = _recipe_context(kb, base_ctx, recipe)
    runner = CONDA if conda_tool(tools) else RATTLER
    if runner.can_build(recipe, ctx) is not None:
        return None
    tool = runner.available(ctx) or runner.name
    return Choice(recipe, runner.name, tool,
                  f"no Python in {', '.join(ctx.wheel_pythons)} is installed: {tool} makes a conda-forge "
                  f"environment with that Python, then pip installs recipe {recipe.id}", python_from_conda=True)


class NoRunner(UsageError):
    """The verdict holds the target workable through recipes that nothing installed here can build (e.g. a conda
    recipe with no mamba, micromamba or conda, and no embedded engine on Python < 3.10). The chooser never falls
    back to a recipe the verdict blocks then: ``hint`` says what to install (the refusing runner's hint)."""

    def __init__(self, v: Version, recipes: Sequence[Recipe], refused: UsageError | None, *, backend: str) -> None:
        names = ", ".join(f"{r.id} ({r.backend})" for r in recipes) or "the container route"
        if refused is not None:
            why = f"which cannot be built here: {refused.message}"
        else:  # the recipes are of another family than the backend asked for
            why = f"which --backend {backend} does not build"
        msg = f"TensorFlow {v} works here only through {names}, {why}"
        hint = refused.hint if refused is not None and refused.hint else f"see `tfgpu doctor --tf {v}`"
        super().__init__(msg, hint=hint)



def _recipe_context(kb: KnowledgeBase, ctx: Context, recipe: Recipe) -> Context:
    """The context narrowed to the Pythons a pip recipe can install with (compat/pins.toml `pythons`:
    e.g. tensorflow[and-cuda] 2.14 pins tensorrt 8.5.3.1, which has wheels up to cp310 only)."""
    limit = kb.python_limit_for(ctx.v, recipe.id) if recipe.backend == "pip" else None
    if limit is None:
        return ctx
    return replace(ctx, wheel_pythons=tuple(p for p in ctx.wheel_pythons if p in limit.python))


def choose(kb: KnowledgeBase, facts: Facts, verdict: TargetVerdict | None, v: Version, os_name: str,
           tools: Mapping[str, str | None], prefs: Preferences, *, machine: Machine | None = None) -> tuple[Choice, str]:
    """The recipe and runner for TensorFlow ``v``, and a note when the config's preferred backend could not
    be used. ``verdict`` is the target's verdict judged with ``prefs.backend`` (None: the knowledge base's
    order). Raises UsageError when nothing can build it. ``machine``: ``facts`` read as a Machine, when the
    caller has it (the doctor chooses for every target of one machine; see :func:`kb_order`).

    A container backend (docker, podman, apptainer, container) chooses an image and the runtime of its row
    of :data:`RUNNERS` (tfgpu.judge.containers.choose_image, which `tfgpu plan|create` use too); a blocked route is
    still chosen, with ``Choice.blocked`` saying why."""
    if prefs.backend in CONTAINER_BACKENDS:
        from tfgpu.judge.containers import choose_image

        row = (next((b for b in verdict.backends if b.backend == CONTAINER), None)
               if verdict is not None and verdict.tf == str(v) else None)  # judged with prefs.backend
        return choose_image(kb, facts, v, backend=prefs.backend, image_ref=prefs.image, judged=row), ""
    if prefs.backend == "auto" and prefs.prefer and prefs.prefer != "auto":
        if prefs.prefer not in BACKENDS:
            msg = f"unknown preferred backend {prefs.prefer!r} ({prefs.prefer_source})"
            raise UsageError(msg, hint=f"use one of: {', '.join(BACKENDS)}")
        try:
            c = _choose_one(kb, facts, verdict, v, os_name, tools,
                            Preferences(backend=prefs.prefer, python=prefs.python), machine)
        except UsageError as exc:
            note = (f"{prefs.prefer_source} prefers backend {prefs.prefer}, which cannot build this target "
                    f"({exc.message}); tfgpu chose automatically")
            return _choose_one(kb, facts, verdict, v, os_name, tools, prefs, machine), note
        return replace(c, reason=f"{prefs.prefer_source} prefers {prefs.prefer}: {c.reason}"), ""
    return _choose_one(kb, facts, verdict, v, os_name, tools, prefs, machine), ""


# --------------------------------------------------------------------------- the doctor's recipes


def choose_for_target(kb: KnowledgeBase, facts: Facts, tv: TargetVerdict,
                      tools: Mapping[str, str | None], prefs: Preferences, *,
                      machine: Machine | None = None) -> Choice | None:
    """What `tfgpu plan --tf RELEASE` chooses for a judged target (None: nothing can build it here)."""
    return _choice_or_refusal(kb, facts, tv, tools, prefs, machine)[0]


def _choice_or_refusal(kb: KnowledgeBase, facts: Facts, tv: TargetVerdict, tools: Mapping[str, str | None],
                       prefs: Preferences, machine: Machine | None = None) -> tuple[Choice | None, NoRunner | None]:
    """:func:`choose_for_target`, and when the target works here but nothing installed can build it, why."""
    os_name = target_os(facts)
    try:
        v = kb.resolve_tf(tv.tf, os=os_name)  # as the planner resolves it: a release this OS lacks is refused
        return choose(kb, facts, tv, v, os_name, tools, prefs, machine=machine)[0], None
    except NoRunner as exc:
        return None, exc
    except (UsageError, InvalidVersion):
        return None, None


def with_choices(result: DoctorResult, kb: KnowledgeBase, facts: Facts,
                 tools: Mapping[str, str | None] | None = None, prefs: Preferences | None = None) -> DoctorResult:
    """The doctor's per-target recipes and its recommendation, as `tfgpu plan` would build them: each
    target names the recipe and backend :func:`choose` picks, and ``recipe_id`` (a blocked one too: what
    `tfgpu plan` would build, and its blockers say why it would not run); the recommendation is
    :func:`chosen_recommendation`'s, as every "instead: ..." line prints it."""
    from tfgpu.core.record import replace
    from tfgpu.facts.machine import Machine

    tools = tools_from_facts(facts) if tools is None else tools
    prefs = prefs or Preferences()
    if prefs.backend in CONTAINER_BACKENDS:
        return _with_container_choices(result, kb, facts, tools, prefs)
    machine = Machine.from_facts(facts, kb)  # read once for every target, not once per target that needs it
    targets = []
    for tv in result.targets:
        c = choose_for_target(kb, facts, tv, tools, prefs, machine=machine)
        if c is None:
            targets.append(tv)
            continue
        # a blocked target names what `tfgpu plan` would build for it too (and says why it would not run):
        # its backend, recipe and recipe_id, as for any other target (its blockers say which backend has which)
        targets.append(replace(tv, backend="pip" if c.recipe.backend == "pip" and not c.python_from_conda
                               else "conda", recipe=c.recipe.id, recipe_id=c.recipe.id))
    result.targets = targets
    result.recommendation = chosen_recommendation(kb, facts, result.recommendation, tools, prefs, machine=machine)
    return result


def chosen_recommendation(kb: KnowledgeBase, facts: Facts, rec: Recommendation | None,
                          tools: Mapping[str, str | None], prefs: Preferences, *,
                          machine: Machine | None = None) -> Recommendation | None:
    """A recommendation (tfgpu.judge.recommend.recommend_for) with the recipe and runner :func:`choose` picks for
    its release: its command is the one `tfgpu create` accepts here. The target itself is chosen with the user's
    preferences; a release recommended instead of a blocked target as ``--backend auto`` chooses it. ``machine``: as
    for :func:`choose`."""
    from tfgpu.core.record import replace

    if rec is None or rec.target is None or rec.backend == "cpu":
        return rec
    tv = rec.target
    if rec.backend == CONTAINER:  # the container route: the command asks for the backend asked for, its image
        if prefs.backend not in CONTAINER_BACKENDS:
            return rec
        from tfgpu.judge.recommend import for_container_backend

        c = choose_for_target(kb, facts, tv, tools, prefs)
        rec = for_container_backend(rec, prefs.backend)
        return rec if c is None else replace(rec, recipe=c.recipe.id, recipe_id=c.recipe.id)
    if rec.instead_of is not None:
        prefs = Preferences(backend="auto", prefer=prefs.prefer, prefer_source=prefs.prefer_source)
    c, no_runner = _choice_or_refusal(kb, facts, tv, tools, prefs, machine)
    if (c is None and no_runner is not None and tv.verdict != "blocked" and prefs.backend == "auto"
            and _lists_interpreters(facts)):
        # it works here, but nothing installed builds it yet (plan would refuse): no recipe plan builds, the command
        # that builds it once the runner is installed (the choice is automatic then), and what to install first.
        # Facts that do not list the machine's interpreters cannot say one is missing: the recipe stands then
        return replace(rec, recipe_id=None, command=f"tfgpu create --tf {rec.tf}",
                       needs=no_runner.hint or no_runner.message)
    if c is None or tv.verdict == "blocked":
        return rec
    # a pip recipe run in a conda-made Python is what --backend auto builds (an explicit --backend conda or rattler
    # takes the conda recipes only)
    backend = "" if c.python_from_conda and prefs.backend == "auto" else f" --backend {c.backend}"
    return replace(rec, backend="pip" if c.recipe.backend == "pip" and not c.python_from_conda else "conda",
                   recipe=c.recipe.id, recipe_id=c.recipe.id, command=f"tfgpu create --tf {rec.tf}{backend}")


def _lists_interpreters(facts: Facts) -> bool:
    """Whether the facts list the machine's interpreters, the current one among them (a probe's do; a hand-made or
    recorded one may name only the current Python, which `create` would use)."""
    py = facts.get("python")
    if not (isinstance(py, Mapping) and isinstance(py.get("interpreters"), list)):
        return False
    current = str(py.get("current") or "")
    return not current or any(isinstance(it, Mapping) and str(it.get("version") or "") == current
                              for it in py["interpreters"])


def recommendation(kb: KnowledgeBase, facts: Facts, *, target: TargetVerdict | None = None, backend: str = "auto",
                   tools: Mapping[str, str | None] | None = None, prefs: Preferences | None = None) -> Recommendation | None:
    """The one recommendation, as the doctor prints it: the best release here (no ``target``), the target itself
    when it works, else what works instead. `tfgpu plan` and `tfgpu create` print it under a blocked target
    ("instead: ..."), the doctor in its last line; all of them call this (or, the doctor, its two halves:
    tfgpu.judge.recommend.recommend_for, then :func:`chosen_recommendation`)."""
    from tfgpu.judge.recommend import recommend_for

    rec = recommend_for(facts, kb, target=target, backend=backend)
    tools = tools_from_facts(facts) if tools is None else tools
    return chosen_recommendation(kb, facts, rec, tools, prefs or Preferences(backend=backend))


def _with_container_choices(result: DoctorResult, kb: KnowledgeBase, facts: Facts, tools: Mapping[str, str | None],
                            prefs: Preferences) -> DoctorResult:
    """--backend docker|podman|apptainer|container: each judged target names the image :func:`choose` picks
    (``recipe_id``, as `tfgpu plan` builds it) and the recommendation's command asks for the same backend. A
    recommendation the verdict makes instead (a pip or conda release where the container route is blocked)
    is chosen as ``--backend auto`` chooses it, and its command says so."""
    targets = []
    for tv in result.targets:
        c = choose_for_target(kb, facts, tv, tools, prefs)
        if c is not None:
            tv = replace(tv, recipe_id=c.recipe.id)
        targets.append(tv)
    result.targets = targets
    result.recommendation = chosen_recommendation(kb, facts, result.recommendation, tools, prefs)
    return result
