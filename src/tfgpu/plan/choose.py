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
from tfgpu.kb.versions import version

if TYPE_CHECKING:
    from tfgpu.facts.document import Facts
    from tfgpu.judge.diagnose import DoctorResult
    from tfgpu.judge.findings import TargetVerdict
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
    v = version(str(text))  # memoized; refuses a 5,000-digit number before converting it
    return f"{v.major}.{v.minor}"


# --------------------------------------------------------------------------- the order of recipes


def candidate_recipes(kb: KnowledgeBase, v: Version, os_name: str) -> list[Recipe]:
    """GPU recipes for ``v`` on ``os_name``; WSL2 also runs the Linux ones (its own first), as the verdict judges."""
    recipes = [r for r in kb.recipes_for(v, os_name) if r.gpu]
    if os_name == "wsl2":
        recipes += [r for r in kb.recipes_for(v, "linux") if r.gpu and r not in recipes]
    return recipes


def kb_order(kb: KnowledgeBase, facts: Facts, v: Version, os_name: str,
             recipes: Sequence[Recipe]) -> list[Recipe]:
    """The order without a verdict to go by: the pip recipe that brings its own CUDA (one that needs the
    system's CUDA only when that CUDA is installed, or when no conda recipe exists), then the conda
    recipes (the official docs' conda+pip first, then conda-forge's builds, then Anaconda's)."""
    from tfgpu.facts.machine import Machine
    from tfgpu.judge.system import system_cuda_installed

    pips = sorted((r for r in recipes if r.backend == "pip"), key=lambda r: not r.provides_cuda)
    condas = sorted((r for r in recipes if r.backend in CONDA_FAMILY), key=lambda r: r.conda_preference())
    build = kb.build_for(v, os_name)
    first = [r for r in pips if r.provides_cuda or not condas or build is None
             or system_cuda_installed(Machine.from_facts(facts, kb), build.cuda, v, kb)]
    return first + condas + [r for r in pips if r not in first]


def ranked_recipes(kb: KnowledgeBase, facts: Facts, verdict: TargetVerdict | None,
                   v: Version, os_name: str) -> list[Recipe]:
    """The verdict's viable recipes in its order, then every other recipe in :func:`kb_order`. When the
    verdict says the release will work here, a conda recipe whose channel does not carry the release is
    left out, as the verdict leaves it out (the doctor names the release the plan builds)."""
    from tfgpu.judge.findings import BLOCKED
    from tfgpu.judge.verdict import rank_backends, recipe_available

    recipes = candidate_recipes(kb, v, os_name)
    judged = verdict is not None and verdict.tf == str(v)
    if judged and verdict is not None and verdict.verdict != BLOCKED:
        recipes = [r for r in recipes if recipe_available(kb, r, v, os_name)]
    by_id = {r.id: r for r in recipes}
    first: list[Recipe] = []
    if judged and verdict is not None:
        first = [by_id[b.recipe] for b in rank_backends(verdict.backends) if b.viable and b.recipe in by_id]
    return first + [r for r in kb_order(kb, facts, v, os_name, recipes) if r not in first]


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
                tools: Mapping[str, str | None], prefs: Preferences) -> Choice:
    if prefs.backend not in BACKENDS:
        msg = f"unknown backend {prefs.backend!r}"
        raise UsageError(msg, hint=f"use one of: {', '.join(BACKENDS)}")
    recipes = ranked_recipes(kb, facts, verdict, v, os_name)
    if not recipes:
        where = {"windows": "native Windows", "wsl2": "WSL2", "macos": "macOS"}.get(os_name, os_name)
        msg = f"tfgpu knows no GPU install recipe for TensorFlow {v} on {where}"
        from tfgpu.judge.verdict import last_windows_gpu_series

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
    first_error: UsageError | None = None
    pip_without_python = False
    base_ctx = ctx
    for recipe in usable:
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
    if prefs.backend == "auto" and not any(r.backend in CONDA_FAMILY for r in recipes):
        # a pip recipe and no interpreter for it: a conda-made interpreter, then pip
        recipe = usable[0]
        ctx = _recipe_context(kb, base_ctx, recipe)
        runner = CONDA if conda_tool(tools) else RATTLER
        if runner.can_build(recipe, ctx) is None:
            tool = runner.available(ctx) or runner.name
            return Choice(recipe, runner.name, tool,
                          f"no Python in {', '.join(ctx.wheel_pythons)} is installed: {tool} makes a conda-forge "
                          f"environment with that Python, then pip installs recipe {recipe.id}",
                          python_from_conda=True)
    assert first_error is not None
    raise first_error


def _recipe_context(kb: KnowledgeBase, ctx: Context, recipe: Recipe) -> Context:
    """The context narrowed to the Pythons a pip recipe can install with (compat/pins.toml `pythons`:
    e.g. tensorflow[and-cuda] 2.14 pins tensorrt 8.5.3.1, which has wheels up to cp310 only)."""
    limit = kb.python_limit_for(ctx.v, recipe.id) if recipe.backend == "pip" else None
    if limit is None:
        return ctx
    return replace(ctx, wheel_pythons=tuple(p for p in ctx.wheel_pythons if p in limit.python))


def choose(kb: KnowledgeBase, facts: Facts, verdict: TargetVerdict | None, v: Version, os_name: str,
           tools: Mapping[str, str | None], prefs: Preferences) -> tuple[Choice, str]:
    """The recipe and runner for TensorFlow ``v``, and a note when the config's preferred backend could not
    be used. ``verdict`` is the target's verdict judged with ``prefs.backend`` (None: the knowledge base's
    order). Raises UsageError when nothing can build it.

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
                            Preferences(backend=prefs.prefer, python=prefs.python))
        except UsageError as exc:
            note = (f"{prefs.prefer_source} prefers backend {prefs.prefer}, which cannot build this target "
                    f"({exc.message}); tfgpu chose automatically")
            return _choose_one(kb, facts, verdict, v, os_name, tools, prefs), note
        return replace(c, reason=f"{prefs.prefer_source} prefers {prefs.prefer}: {c.reason}"), ""
    return _choose_one(kb, facts, verdict, v, os_name, tools, prefs), ""


# --------------------------------------------------------------------------- the doctor's recipes


def choose_for_target(kb: KnowledgeBase, facts: Facts, tv: TargetVerdict,
                      tools: Mapping[str, str | None], prefs: Preferences) -> Choice | None:
    """What `tfgpu plan --tf RELEASE` chooses for a judged target (None: nothing can build it here)."""
    os_name = target_os(facts)
    try:
        v = kb.resolve_tf(tv.tf, os=os_name)  # as the planner resolves it: a release this OS lacks is refused
        return choose(kb, facts, tv, v, os_name, tools, prefs)[0]
    except (UsageError, InvalidVersion):
        return None


def with_choices(result: DoctorResult, kb: KnowledgeBase, facts: Facts,
                 tools: Mapping[str, str | None] | None = None, prefs: Preferences | None = None) -> DoctorResult:
    """The doctor's per-target recipes and its recommendation, as `tfgpu plan` would build them: each
    target names the recipe and backend :func:`choose` picks, and ``recipe_id`` (a blocked one too: what
    `tfgpu plan` would build, and its blockers say why it would not run)."""
    from tfgpu.core.record import replace
    from tfgpu.judge.findings import BLOCKED
    from tfgpu.judge.recommend import create_command

    tools = tools_from_facts(facts) if tools is None else tools
    prefs = prefs or Preferences()
    if prefs.backend in CONTAINER_BACKENDS:
        return _with_container_choices(result, kb, facts, tools, prefs)
    targets = []
    runner: dict[str, str] = {}
    for tv in result.targets:
        c = choose_for_target(kb, facts, tv, tools, prefs)
        if c is None:
            targets.append(tv)
            continue
        # a blocked target names what `tfgpu plan` would build for it too (and says why it would not run):
        # its backend, recipe and recipe_id, as for any other target (its blockers say which backend has which)
        targets.append(replace(tv, backend="pip" if c.recipe.backend == "pip" and not c.python_from_conda
                               else "conda", recipe=c.recipe.id, recipe_id=c.recipe.id))
        if tv.verdict != BLOCKED:
            runner[tv.tf] = c.backend
    result.targets = targets
    rec = result.recommendation
    if rec is not None and rec.backend != "cpu":
        chosen = next((t for t in targets if t.tf == rec.tf), None)
        if chosen is not None and chosen.tf in runner:
            rec = replace(rec, backend=chosen.backend, recipe=chosen.recipe, recipe_id=chosen.recipe_id,
                          command=f"tfgpu create --tf {chosen.tf} --backend {runner[chosen.tf]}")
        elif chosen is not None:
            rec = replace(rec, command=create_command(chosen, result.machine))
        result.recommendation = rec
    return result


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
    rec = result.recommendation
    if rec is None or rec.backend == "cpu":
        return result
    if rec.backend == CONTAINER:
        from tfgpu.judge.recommend import for_container_backend

        chosen = next((t for t in targets if t.tf == rec.tf), None)
        rec = for_container_backend(rec, prefs.backend)
        if chosen is not None and chosen.recipe_id:
            rec = replace(rec, recipe=chosen.recipe_id, recipe_id=chosen.recipe_id)
    # else: the verdict recommends a pip or conda release instead (the container route is blocked here); its
    # command is the verdict's, which names that recipe's backend (was: --backend of the request, wrongly)
    result.recommendation = rec
    return result
