"""Pure planning: a resolved TensorFlow target + facts + installed tools -> a Plan (Steps of argv + why).

Nothing here touches the filesystem or starts a process: ``tools`` (what is installed) and the
default locations are handed in by the caller (``tfgpu.backends.detect.detect_tools``), so plans are
tested with plain values for every release x backend x OS of the knowledge base.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from tfgpu.backends.names import BACKENDS
from tfgpu.backends.steps import Step
from tfgpu.core.errors import UsageError
from tfgpu.core.tfnames import ALLOW_GROWTH
from tfgpu.kb.queries import pin_source_urls
from tfgpu.kb.versions import Target
from tfgpu.plan.activation import (
    _venv_nvidia_snippet,
    activation_lines,
    conda_activation_steps,
    nvidia_libpath_needed,
    nvidia_libpath_source,
)
from tfgpu.plan.channels import ANACONDA_TOS_SOURCE, anaconda_tos_note
from tfgpu.plan.choose import target_os
from tfgpu.plan.envspec import (
    _check_python_and_name,
    _interpreters,
    _join,
    _newest,
    _python_range,
    _recipe_parts,
    _split_specs,
    _xy,
    env_python,
    pins_for,
    series_of_str,
)
from tfgpu.plan.model import Plan
from tfgpu.plan.request import BuildRequest

if TYPE_CHECKING:
    from tfgpu.backends.runners import Choice
    from tfgpu.facts.document import Facts
    from tfgpu.judge.findings import Finding, TargetVerdict
    from tfgpu.kb.knowledge import KnowledgeBase
    from tfgpu.kb.records import Recipe


#: The pins tfgpu adds next to TensorFlow (``Pin``) live in compat/pins.toml (tfgpu.kb.knowledge.load_pins),
#: each with its evidence; ``nox -s recipes`` proves them by a real install (compat/verified.toml).


# --------------------------------------------------------------------------- small pure helpers


# --------------------------------------------------------------------------- activation scripts


# --------------------------------------------------------------------------- the planner


def resolve_target(kb: KnowledgeBase, facts: Facts, spec: str, *, backend: str = "auto") -> tuple[str, list[str]]:
    """What --tf means for plan, create and lock: ``latest`` is the release the doctor recommends here
    (tfgpu.judge.target.resolve_latest); a release or a series is returned as given (the planner picks a series'
    release by its verdict). Returns (target, notes). Raises NotReady when ``latest`` has nothing that will
    use a GPU here."""
    spec = spec.strip()
    if spec != "latest":
        return spec, []
    from tfgpu.judge.target import resolve_latest

    _, rec = resolve_latest(facts, kb, backend=backend)
    if rec is None:
        from tfgpu.core.errors import NotReady

        msg = "no TensorFlow release is ready to use a GPU on this machine"
        raise NotReady(msg, hint="run `tfgpu doctor` to see why; `--cpu` builds a CPU-only environment")
    return rec.tf, [f"latest: TensorFlow {rec.tf} is the newest release the verdict engine calls {rec.verdict}"]


def judge_for_plan(kb: KnowledgeBase, facts: Facts, tf: str, *, backend: str) -> TargetVerdict | None:
    """The target's verdict as the doctor judges it (a release as is; a series by its best release), or None
    when the knowledge base cannot place the target here (the planner then says why)."""
    from tfgpu.facts.machine import Machine
    from tfgpu.judge.verdict import judge_requested

    try:
        return judge_requested(facts, kb, tf, backend=backend, machine=Machine.from_facts(facts, kb))
    except (UsageError, InvalidVersion):
        return None


def plan_container(kb: KnowledgeBase, facts: Facts, tf: str, *, backend: str, image_ref: str | None,
                   smoke_script: str | None, cache_dir: str, name: str | None = None) -> Plan:
    """The plan of `tfgpu plan|create --backend docker|podman|apptainer|container`: the runner and image
    :func:`choose_image` picks (what tfgpu.plan.choose.choose, and so the doctor, picks), and the runner's steps:
    pull the image, run the smoke script in it with the GPU. The target is judged as the doctor judges it
    (a series by its newest release that can work here). Pure: ``smoke_script`` and ``cache_dir`` are handed in
    (no ``smoke_script``: a plan for another host, whose check step needs only the image).
    It lives here, not in tfgpu.judge.containers, because it judges the target with the verdicts, which judge the
    container route with tfgpu.judge.containers."""
    from tfgpu.backends.runners import CONTAINER, RUNNERS, ContainerRunner
    from tfgpu.facts.machine import Machine, resolve_version
    from tfgpu.judge.containers import choose_image, gpu_args_for, image_source_urls, judge_container
    from tfgpu.judge.findings import BLOCKED
    from tfgpu.kb.queries import container_images
    from tfgpu.kb.versions import version

    m = Machine.from_facts(facts, kb)
    v = resolve_version(kb, tf, m)
    tv = judge_for_plan(kb, facts, tf, backend=backend)
    if tv is not None and tv.verdict != BLOCKED and Target.parse(tf).is_series:
        v = version(tv.tf)  # a series: the newest release that works here, as the doctor says
    choice = choose_image(kb, facts, v, backend=backend, image_ref=image_ref)
    runner = next(r for r in RUNNERS[choice.backend] if isinstance(r, ContainerRunner))
    image = choice.recipe.id
    row = next((i for i in container_images(kb, v) if i.ref == image), None)
    verdict = judge_container(facts, kb, v, m, wanted=backend, image_ref=image_ref)
    notes = [f"{f.summary} — fix: {f.fix}" if f.fix else f.summary for f in verdict.blockers]
    notes += [c.summary for c in verdict.caveats]
    tfs = str(row.tf if row else v)
    # the target's verdict is this plan's when the doctor judged this image for it (an NGC image carries its
    # own patch of the series: 2.17.0 in 25.02 for a 2.17.1 target), or when the doctor blocks the target
    # before any container route (native Windows, macOS, Linux on ARM): then its blockers are the plan's
    judged = tv is not None and not image_ref and any(b.backend == CONTAINER and b.recipe == image
                                                      for b in tv.backends)
    machine_blocked = (tv is not None and tv.verdict == BLOCKED and not image_ref
                       and not any(b.backend == CONTAINER for b in tv.backends))
    blockers, caveats, reason = list(verdict.blockers), list(verdict.caveats), choice.reason
    if machine_blocked and tv is not None:
        blockers, caveats = list(tv.blockers), list(tv.caveats)
        notes = [f"{f.summary} — fix: {f.fix}" if f.fix else f.summary for f in blockers] + notes
        if not choice.blocked:
            reason += " — the container route is blocked on this machine (see the notes)"
    return Plan(
        tf=tfs, backend=choice.backend, backend_reason=reason,
        prefix=runner.target(image, cache_dir), name=name, python=choice.python, tool=choice.tool,
        steps=runner.steps(image, smoke_script=smoke_script, cache_dir=cache_dir,
                           gpu_args=gpu_args_for(facts, backend)),
        env_vars=dict([ALLOW_GROWTH]), notes=tuple(dict.fromkeys(notes)), recipe_id=image,
        sources=tuple(image_source_urls(kb, row)), env_python="python3",
        verdict=tv.verdict if (judged or machine_blocked) and tv is not None else "",
        blockers=tuple(blockers) if judged or machine_blocked else (),
        caveats=tuple(caveats) if judged or machine_blocked else ())


class _Said:
    """The notes and sources a plan gathers on its way, in the order the user reads them."""

    def __init__(self) -> None:
        self.notes: list[str] = []
        self.sources: list[str] = []

    def note(self, text: str, source: str = "") -> None:
        self.notes.append(text)
        if source:
            self.sources.append(source)


def plan_environment(kb: KnowledgeBase, facts: Facts, req: BuildRequest, *, tools: Mapping[str, str | None] | None = None,
                     home: str = "~/.local/share/tfgpu", conda_envs_dir: str | None = None,
                     engine_python: str | None = None) -> Plan:
    """Plan an environment for ``req.tf`` (a release or a series; resolve ``latest`` first: resolve_target).

    ``tools`` maps "uv", "mamba", "micromamba", "conda" and "pythonX.Y" to paths (None: absent);
    ``home`` is the tfgpu home (venvs go to home/envs/NAME); ``conda_envs_dir`` is where `conda -n`
    puts named environments. ``req.channels`` replace the recipe's channels (``req.channels_source`` says where
    they came from: --channel or the config file). ``req.prefer`` (the config file's ``[backends] prefer``)
    is tried first when the backend is auto; when it cannot build the target, auto decides and the
    plan says why. Raises UsageError when no recipe fits.
    """
    tools = dict(tools or {})
    _check_backends(req)
    os_name = target_os(facts)
    python = _check_python_and_name(req.python, req.name)
    said = _Said()
    v, verdict, choice = _release_and_choice(kb, facts, req, os_name, python, tools, said)
    recipe = choice.recipe
    wheel_pythons = _wheel_pythons(kb, v, recipe, os_name, said)
    v = _conda_series_release(kb, recipe, v, req, os_name)
    tfs = str(v)
    name = req.name if req.prefix is not None or req.name is not None else f"tf{tfs}"
    said.note("", recipe.source)
    if getattr(recipe, "confidence", "sourced") != "sourced":
        said.note(f"recipe {recipe.id} is {recipe.confidence}: {recipe.note}")
    conda_like = choice.backend in ("conda", "rattler")
    prefix, conda_named = req.prefix, False
    if prefix is None:
        assert name is not None
        conda_named = choice.backend == "conda" and bool(conda_envs_dir)
        prefix = _join(os_name, conda_envs_dir or "", name) if conda_named else _join(os_name, home, "envs", name)
    pip_reqs = _pip_requirements(kb, v, recipe, os_name, said)
    py_ver, conda_specs, chans, base_python = _python_and_channels(kb, facts, v, choice, python, wheel_pythons,
                                                                   tools, os_name, said)
    if req.channels and conda_like:
        chans = tuple(req.channels)
        said.note(f"channels from {req.channels_source}: {', '.join(chans)} "
                  f"(recipe: {', '.join(recipe.channels) or 'none'})")
    elif req.channels and req.channels_source == "--channel":
        said.note("--channel is not used: this plan installs from PyPI only")
    tos = anaconda_tos_note(kb, v, os_name, chans, recipe_id=recipe.id, recipe_channels=recipe.channels)
    if tos:
        said.note(tos, ANACONDA_TOS_SOURCE)
    from tfgpu.backends.runners import RECIPE_RUNNERS, PlannedBuild

    py_in_env = env_python(prefix, os_name, conda=conda_like)
    steps = RECIPE_RUNNERS[choice.backend].steps(PlannedBuild(
        recipe=recipe, tf=v, os=os_name, prefix=prefix, conda_name=name if conda_named else None, tool=choice.tool,
        tools=tools, channels=tuple(chans), conda_specs=tuple(conda_specs), pip_requirements=tuple(pip_reqs),
        python=py_ver, base_python=base_python, env_python=py_in_env, facts=facts, kb=kb,
        engine_python=engine_python or sys.executable,
        driver_cuda=engine_driver_cuda(facts, kb) if choice.backend == "rattler" else None,
        index_url=req.index_url, find_links=tuple(req.find_links), offline=req.offline))
    env_vars = _activation(kb, facts, v, recipe, steps, prefix, py_ver, os_name, conda_like, said)
    _closing_notes(kb, v, recipe, choice.tool, conda_like, os_name, said)
    return Plan(
        tf=tfs, backend=choice.backend, backend_reason=choice.reason, prefix=prefix, name=name,
        python=py_ver, steps=tuple(steps), env_vars=env_vars, notes=tuple(dict.fromkeys(n for n in said.notes if n)),
        recipe_id=recipe.id, sources=tuple(dict.fromkeys(s for s in said.sources if s)), tool=choice.tool,
        os=os_name, channels=tuple(chans), conda_specs=tuple(conda_specs), pip_requirements=tuple(pip_reqs),
        env_python=py_in_env, conda_named=conda_named,
        verdict=verdict.verdict if verdict is not None and verdict.tf == tfs else "",
        blockers=_judged(verdict, tfs, "blockers", choice.backend, recipe.id),
        caveats=_judged(verdict, tfs, "caveats", choice.backend, recipe.id),
    )


def _check_backends(req: BuildRequest) -> None:
    if req.backend not in BACKENDS:
        msg = f"unknown backend {req.backend!r}"
        raise UsageError(msg, hint=f"use one of: {', '.join(BACKENDS)}")
    if req.prefer and req.prefer != "auto" and req.prefer not in BACKENDS:
        msg = f"unknown preferred backend {req.prefer!r} ({req.prefer_source})"
        raise UsageError(msg, hint=f"use one of: {', '.join(BACKENDS)}")


def _release_and_choice(kb: KnowledgeBase, facts: Facts, req: BuildRequest, os_name: str, python: str | None,
                        tools: Mapping[str, str | None], said: _Said) -> tuple[Version, TargetVerdict | None, Choice]:
    """The release a release or series target means here (a series: the newest that works, as the doctor says)
    and the recipe and runner tfgpu.plan.choose picks for it."""
    from tfgpu.backends.runners import Preferences
    from tfgpu.plan.choose import choose

    tf = str(req.tf)
    verdict = judge_for_plan(kb, facts, tf, backend=req.backend)
    v = kb.resolve_tf(tf, os=os_name)  # an unknown release or a malformed one is refused here, with a hint
    if verdict is not None and verdict.verdict != "blocked" and Target.parse(tf).is_series:
        v = Version(verdict.tf)
    choice, prefer_note = choose(kb, facts, verdict if verdict is not None and verdict.tf == str(v) else None, v,
                                 os_name, tools, Preferences(backend=req.backend, python=python, prefer=req.prefer,
                                                             prefer_source=req.prefer_source))
    said.note(prefer_note)
    return v, verdict, choice


def _wheel_pythons(kb: KnowledgeBase, v: Version, recipe: Recipe, os_name: str, said: _Said) -> list[str]:
    """The Pythons the release's wheels exist for, narrowed by what a pip recipe pins (compat/pins.toml)."""
    wheel_pythons = kb.pythons_for(v, os_name)
    limit = kb.python_limit_for(v, recipe.id) if recipe.backend == "pip" else None
    if limit is not None:
        wheel_pythons = [p for p in wheel_pythons if p in limit.python]
        said.note(f"Python {', '.join(wheel_pythons)} only: {limit.why}", pin_source_urls(limit))
    return wheel_pythons


def _conda_series_release(kb: KnowledgeBase, recipe: Recipe, v: Version, req: BuildRequest, os_name: str) -> Version:
    """A series on a conda-only recipe: the newest release the recipe's channel is known to carry."""
    if recipe.backend != "conda" or not Target.parse(str(req.tf)).is_series:
        return v
    cf = "conda-forge" in recipe.channels
    known = [r.version for r in kb.conda_packages(None, None, os_name)
             if (r.channel == "conda-forge") == cf and _xy(str(r.version)) == _xy(str(v))]
    return max(known) if known and v not in known else v


def _pip_requirements(kb: KnowledgeBase, v: Version, recipe: Recipe, os_name: str, said: _Said) -> list[str]:
    """What pip installs: TensorFlow (as the recipe names it) and the release's pins."""
    tfs = str(v)
    pip_reqs: list[str] = []
    if recipe.backend == "pip":
        rel = kb.gpu_release(v, os_name)
        dist = rel.dist if rel else kb.gpu_dist(v)
        install_as = kb.install_as_for(v, recipe.id)
        tf_pip = install_as.install if install_as else tfs
        if install_as:
            said.note(f"installs {dist} {tf_pip} for {tfs}: {install_as.why}")
        pip_reqs.append(f"{dist}[and-cuda]=={tf_pip}" if "[and-cuda]" in recipe.packages else f"{dist}=={tf_pip}")
    elif recipe.backend == "conda+pip":
        for spec in _split_specs(_recipe_parts(recipe.packages)[1], "", tfs):
            if spec.split("=")[0].split("<")[0].strip() == "tensorflow":
                spec = f"tensorflow=={tfs}"  # the recipe may say tensorflow==2.11.* or <2.11: the user chose one
            pip_reqs.append(spec)
    if pip_reqs:
        for p in pins_for(v):
            pip_reqs.append(p.requirement)
            said.note(f"pin {p.requirement}: {p.why}" + (" (inferred)" if p.confidence != "sourced" else ""),
                      pin_source_urls(p))
    return pip_reqs


def _python_and_channels(kb: KnowledgeBase, facts: Facts, v: Version, choice: Choice, python: str | None,
                         wheel_pythons: list[str], tools: Mapping[str, str | None], os_name: str,
                         said: _Said) -> tuple[str, list[str], tuple[str, ...], str]:
    """The environment's Python and, for a conda environment, its specs and channels; for a venv the base
    interpreter it is made from. Returns (python X.Y, conda specs, channels, base interpreter)."""
    recipe = choice.recipe
    if choice.backend not in ("conda", "rattler"):
        return choice.python, [], (), _interpreters(facts, tools).get(choice.python) or f"python{choice.python}"
    cands = _conda_pythons(kb, v, recipe, choice, wheel_pythons, os_name, said)
    if python is not None:
        if cands and python not in cands:
            from tfgpu.backends.runners import python_range_text

            msg = (f"TensorFlow {v} supports Python {python_range_text(cands)} (recipe {recipe.id}); "
                   f"{python} is outside it")
            raise UsageError(msg, hint=f"use --python {cands[-1]}")
        py_ver = python
    else:
        if not cands:
            msg = f"no Python version is known for TensorFlow {v} with recipe {recipe.id}"
            raise UsageError(msg, hint="pass --python X.Y")
        py_ver = _newest(cands)
    if choice.python_from_conda:
        return py_ver, [f"python={py_ver}", "pip"], ("conda-forge",), ""
    conda_specs = _split_specs(_recipe_parts(recipe.packages)[0], py_ver, str(v))
    if recipe.backend == "conda+pip":
        conda_specs.append("pip")
    return py_ver, conda_specs, recipe.channels, ""


def _conda_pythons(kb: KnowledgeBase, v: Version, recipe: Recipe, choice: Choice, wheel_pythons: list[str],
                   os_name: str, said: _Said) -> list[str]:
    """The Pythons a conda environment for ``v`` can have: the channel's recorded builds, else the wheels'."""
    if choice.python_from_conda:
        return wheel_pythons
    if recipe.backend != "conda":
        rng = _python_range(recipe.python)
        return [p for p in wheel_pythons if not rng or p in rng] or wheel_pythons
    tfs = str(v)
    rows = [r for r in kb.conda_packages(None, v, os_name) if r.channel in ("anaconda", "defaults")
            or r.channel in recipe.channels]
    row_pythons = sorted({p for r in rows for p in r.python if
                          ("conda-forge" in recipe.channels) == (r.channel == "conda-forge")}, key=Version)
    if not rows:
        recorded = sorted({str(r.version) for r in kb.conda_packages(None, None, os_name)
                           if series_of_str(str(r.version)) == series_of_str(tfs)
                           and (r.channel == "conda-forge") == ("conda-forge" in recipe.channels)}, key=Version)
        said.note(f"tfgpu has no record of {tfs} on {', '.join(recipe.channels)}; the solver will say if it "
                  "is missing" + (f" (recorded for this series: {', '.join(recorded)})" if recorded else ""))
    return row_pythons or wheel_pythons


def _activation(kb: KnowledgeBase, facts: Facts, v: Version, recipe: Recipe, steps: list[Step], prefix: str,
                py_ver: str, os_name: str, conda_like: bool, said: _Said) -> dict[str, str]:
    """The variables the environment sets when activated, and the steps that write them (conda's activate.d,
    or appended to a venv's activate script, which has no activate.d). Returns the variables."""
    env_vars: dict[str, str] = {}
    act_lines, act_notes = activation_lines(recipe, facts, conda_like=conda_like, os_name=os_name)
    for n in act_notes:
        said.note(n)
    for line in act_lines:
        k, _, val = line.partition("=")
        env_vars[k] = val
    nvidia_fix = not conda_like and recipe.backend == "pip" and recipe.provides_cuda and nvidia_libpath_needed(kb, v)
    if conda_like:
        steps.extend(conda_activation_steps(act_lines, prefix, os_name))
    if not conda_like and (act_lines or nvidia_fix) and os_name != "windows":
        content = ""
        if act_lines:
            content += "\n# added by tfgpu\n" + "".join(f"export {line}\n" for line in act_lines)
        if nvidia_fix:
            content += _venv_nvidia_snippet(py_ver, kb)
            env_vars["LD_LIBRARY_PATH"] = (f"{prefix}/lib/python{py_ver}/site-packages/nvidia/*/lib "
                                           "(each directory, prepended)")
            said.note(f"TensorFlow {v} needs its nvidia/*/lib directories on LD_LIBRARY_PATH "
                      f"({nvidia_libpath_source(kb)}); bin/activate sets it", nvidia_libpath_source(kb))
        steps.append(Step((), "venvs have no activate.d: tfgpu appends the variables to bin/activate",
                          kind="append-file", path=_join(os_name, prefix, "bin", "activate"), content=content))
    if not conda_like and act_lines and os_name == "windows":
        content = "".join(f"set \"{line.partition('=')[0]}={line.partition('=')[2]}\"\r\n" for line in act_lines)
        steps.append(Step((), "venvs have no activate.d: tfgpu appends the variables to Scripts\\activate.bat",
                          kind="append-file", path=_join(os_name, prefix, "Scripts", "activate.bat"), content=content))
    return env_vars


def _closing_notes(kb: KnowledgeBase, v: Version, recipe: Recipe, tool: str, conda_like: bool, os_name: str,
                   said: _Said) -> None:
    if not recipe.provides_cuda:
        build = kb.build_for(v, os_name)
        if build is not None:
            said.note(f"recipe {recipe.id} uses the system's CUDA {build.cuda} and cuDNN {build.cudnn} "
                      "(install them system-wide; TensorFlow's tested build configuration)")
    if tool == "venv" and not conda_like:
        said.note("uv is not installed: python -m venv and pip are slower (https://docs.astral.sh/uv/)")
    if recipe.note:
        said.note(f"{recipe.id}: {recipe.note}")


def engine_driver_cuda(facts: Facts, kb: KnowledgeBase) -> str | None:
    """What the embedded engine is told of the driver (--driver-cuda): the newest CUDA it supports as the
    verdict derives it, "none" when the facts show no driver, None when the facts do not say (then the
    engine child probes the machine itself)."""
    if "driver" not in facts:
        return None
    from tfgpu.facts.machine import Machine

    m = Machine.from_facts(facts, kb)
    known = m.driver_cuda_version(kb) if m.driver is not None else None
    return str(known) if known else "none"


def _judged(verdict: TargetVerdict | None, tfs: str, kind: str, backend: str, recipe_id: str) -> tuple[Finding, ...]:
    """The blockers or caveats of the chosen recipe (else backend: pip, or conda for conda and rattler)."""
    if verdict is None or verdict.tf != tfs:
        return ()
    family = "pip" if backend == "pip" else "conda"
    mine = [b for b in verdict.backends if b.recipe == recipe_id] or [b for b in verdict.backends if b.backend == family]
    found: list[Finding] = list(getattr(mine[0], kind)) if mine else []
    # the target's own findings (no driver, a small GPU) are no backend's; "[pip: recipe] ..." ones are
    found += [f for f in getattr(verdict, kind) if f.summary not in {g.summary for g in found}
              and (not mine or not f.summary.startswith("["))]
    return tuple(found)


# --------------------------------------------------------------------------- the CPU route


# --------------------------------------------------------------------------- from a lockfile


# --------------------------------------------------------------------------- renderings


