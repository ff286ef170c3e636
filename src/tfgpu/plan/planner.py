"""Pure planning: a resolved TensorFlow target + facts + installed tools -> a Plan (Steps of argv + why).

Nothing here touches the filesystem or starts a process: ``tools`` (what is installed) and the
default locations are handed in by the caller (``tfgpu.backends.detect.detect_tools``), so plans are
tested with plain values for every release x backend x OS of the knowledge base.
"""

from __future__ import annotations

import posixpath
import re
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion, Version

from tfgpu.backends.names import BACKENDS
from tfgpu.backends.steps import Step
from tfgpu.core.errors import InputError, UsageError
from tfgpu.kb.queries import load_pins, pin_source_urls
from tfgpu.kb.records import Pin
from tfgpu.plan.choose import CONDA_TOOLS as CONDA_TOOLS
from tfgpu.plan.choose import target_os as target_os
from tfgpu.plan.model import Plan

if TYPE_CHECKING:
    from tfgpu.backends.lockfiles import Lock, LockedPackage
    from tfgpu.facts.document import Facts
    from tfgpu.judge.findings import Finding, TargetVerdict
    from tfgpu.kb.knowledge import KnowledgeBase

#: GPUs with at most this much memory get TF_FORCE_GPU_ALLOW_GROWTH=true: TensorFlow maps nearly all GPU
#: memory by default; a 2 GB MX150 and a GTX 1080 failed with cuDNN errors until memory growth was enabled (blog
#: posts 'Tensorflow创建GPU环境', 2020-06-13, and '使用 GPU 加速 Tensorflow 神经网络训练';
#: https://www.tensorflow.org/guide/gpu#limiting_gpu_memory_growth).
SMALL_GPU_MIB = 4096


#: The pins tfgpu adds next to TensorFlow (``Pin``) live in compat/pins.toml (tfgpu.kb.knowledge.load_pins),
#: each with its evidence; ``nox -s recipes`` proves them by a real install (compat/verified.toml).


def nvidia_libpath_needed(kb: KnowledgeBase, v: Version) -> bool:
    """Do release ``v``'s wheels miss the CUDA libraries of their own nvidia-* wheels unless their lib directories
    are on LD_LIBRARY_PATH (compat/rules.toml `nvidia-wheels-need-library-path`: 2.16-2.17)?"""
    return kb.rule("nvidia-wheels-need-library-path").holds(v)


def nvidia_libpath_source(kb: KnowledgeBase) -> str:
    """Where that rule comes from (tensorflow/tensorflow#63362)."""
    rule = kb.rule("nvidia-wheels-need-library-path")
    return str(kb.sources("rules").get(rule.source, {}).get("url", ""))

#: Anaconda's Terms of Service cover its own channels (repo.anaconda.com's `defaults` = pkgs/main + pkgs/r,
#: and the `anaconda` channel on anaconda.org); community channels such as conda-forge are free to use.
ANACONDA_TOS_SOURCE = "https://anaconda.com/pricing/terms-of-service-faqs"
_ANACONDA_NAMES = frozenset({"defaults", "anaconda", "main", "r", "msys2"})
_ANACONDA_URL = re.compile(r"^https?://(repo\.anaconda\.com/|conda\.anaconda\.org/(anaconda|main|r|msys2)(/|$))")


# --------------------------------------------------------------------------- small pure helpers

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def check_name(name: str) -> str:
    """An environment name: safe as a directory name and as a conda `-n` value."""
    if not _NAME_RE.fullmatch(name) or ".." in name:
        msg = f"invalid environment name {name!r}"
        raise UsageError(msg, hint="use letters, digits, '.', '_' or '-', starting with a letter or digit, "
                                   "at most 64 characters, no '..'")
    return name


def _xy(text: str) -> str:
    if len(str(text)) > 64:  # a 5,000-digit number would not even convert to int
        raise InvalidVersion(str(text)[:20])
    v = Version(str(text))
    return f"{v.major}.{v.minor}"


def _join(os_name: str, *parts: str) -> str:
    if os_name == "windows":
        return "\\".join(p.rstrip("\\/") for p in parts)
    return posixpath.join(*parts)


def env_python(prefix: str, os_name: str, *, conda: bool) -> str:
    """The interpreter inside an environment (venv: bin/python or Scripts\\python.exe; conda: python.exe at the root)."""
    if os_name == "windows":
        return _join(os_name, prefix, "python.exe" if conda else "Scripts\\python.exe")
    return _join(os_name, prefix, "bin", "python")


def series_of_str(text: str) -> str:
    return _xy(text)


def pins_for(tf: Version) -> list[Pin]:
    """The pins of compat/pins.toml that apply to release ``tf``."""
    return [p for p in load_pins() if tf in p.tf]


def small_gpu(facts: Facts) -> bool:
    for gpu in facts.get("gpus") or []:
        mem = gpu.get("memory_mib") if isinstance(gpu, Mapping) else None
        if isinstance(mem, (int, float)) and 0 < mem <= SMALL_GPU_MIB:
            return True
    return False


def _split_specs(text: str, python: str, tf: str) -> list[str]:
    return [s.strip().format(python=python, tf=tf) for s in text.split(",") if s.strip()]


def _recipe_parts(packages: str) -> tuple[str, str]:
    conda_part, _, pip_part = packages.partition("; pip:")
    return conda_part.strip(), pip_part.strip()


def _interpreters(facts: Facts, tools: Mapping[str, str | None]) -> dict[str, str]:
    from tfgpu.plan.choose import interpreters

    return interpreters(facts, tools)


def _newest(candidates: Sequence[str]) -> str:
    return max(candidates, key=Version)


def _python_range(text: str) -> list[str]:
    """"3.7-3.10" -> ["3.7", ..., "3.10"]; free text ("2.7-3.9 depending on version") -> []."""
    m = re.fullmatch(r"\s*(\d+)\.(\d+)-(\d+)\.(\d+)\s*", text or "")
    if not m or m.group(1) != m.group(3):
        return []
    return [f"{m.group(1)}.{n}" for n in range(int(m.group(2)), int(m.group(4)) + 1)]


# --------------------------------------------------------------------------- activation scripts


def _posix_activation(lines: Sequence[str]) -> str:
    body = ["# written by tfgpu: environment variables this TensorFlow environment needs"]
    for line in lines:
        name, _, value = line.partition("=")
        body.append(f"export _TFGPU_OLD_{name}=\"${{{name}:-}}\"")
        body.append(f"export {name}={value}")
    return "\n".join(body) + "\n"


def _posix_deactivation(lines: Sequence[str]) -> str:
    body = ["# written by tfgpu: undo activate.d/tfgpu_env_vars.sh"]
    for line in lines:
        name = line.partition("=")[0]
        body.append(f"if [ -n \"${{_TFGPU_OLD_{name}:-}}\" ]; then export {name}=\"$_TFGPU_OLD_{name}\"; "
                    f"else unset {name}; fi")
        body.append(f"unset _TFGPU_OLD_{name}")
    return "\n".join(body) + "\n"


def _venv_nvidia_snippet(python: str, kb: KnowledgeBase) -> str:
    releases = kb.rule("nvidia-wheels-need-library-path").applies
    return (
        f"\n# added by tfgpu: TensorFlow {releases} does not find the CUDA libraries of its nvidia-* wheels\n"
        f"# unless they are on LD_LIBRARY_PATH ({nvidia_libpath_source(kb)})\n"
        f"for _tfgpu_d in \"$VIRTUAL_ENV\"/lib/python{python}/site-packages/nvidia/*/lib; do\n"
        "  [ -d \"$_tfgpu_d\" ] && LD_LIBRARY_PATH=\"$_tfgpu_d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\"\n"
        "done\n"
        "export LD_LIBRARY_PATH\n"
        "unset _tfgpu_d\n"
    )


def activation_lines(recipe: Any, facts: Facts, *, conda_like: bool, os_name: str) -> tuple[list[str], list[str]]:
    """The NAME=VALUE lines an environment's activation sets (recipe + small-GPU memory growth), and notes."""
    lines: list[str] = []
    notes: list[str] = []
    if conda_like and recipe is not None and recipe.backend == "conda+pip" and recipe.activation and os_name != "windows":
        lines.extend(recipe.activation)
        extra = str(recipe.raw.get("extra_fix", ""))
        if "XLA_FLAGS" in extra:
            lines.append("XLA_FLAGS=--xla_gpu_cuda_data_dir=$CONDA_PREFIX/lib/")
            notes.append("XLA_FLAGS points XLA at the environment's libdevice (pip.md's Ubuntu 22.04 fix); "
                         "ptxas may still need `cuda-nvcc` from the nvidia channel: " + extra)
    if small_gpu(facts):
        lines.append("TF_FORCE_GPU_ALLOW_GROWTH=true")
        notes.append(f"a GPU has <= {SMALL_GPU_MIB} MiB: TF_FORCE_GPU_ALLOW_GROWTH=true makes TensorFlow allocate "
                     "GPU memory as needed instead of mapping nearly all of it (cuDNN failures reported on 2 GB GPUs)")
    return lines, notes


def conda_activation_steps(lines: Sequence[str], prefix: str, os_name: str) -> list[Step]:
    """etc/conda/activate.d (and deactivate.d) scripts that set ``lines`` in a conda environment."""
    if not lines:
        return []
    if os_name != "windows":
        return [
            Step((), "activation script: conda runs etc/conda/activate.d/*.sh on `conda activate`",
                 kind="write-file", path=_join(os_name, prefix, "etc", "conda", "activate.d", "tfgpu_env_vars.sh"),
                 content=_posix_activation(lines)),
            Step((), "deactivation script: restores the variables on `conda deactivate`",
                 kind="write-file", path=_join(os_name, prefix, "etc", "conda", "deactivate.d", "tfgpu_env_vars.sh"),
                 content=_posix_deactivation(lines)),
        ]
    content = "".join(f"set \"{line.partition('=')[0]}={line.partition('=')[2]}\"\r\n" for line in lines)
    return [Step((), "activation script: conda runs etc\\conda\\activate.d\\*.bat on `conda activate`",
                 kind="write-file", path=_join(os_name, prefix, "etc", "conda", "activate.d", "tfgpu_env_vars.bat"),
                 content=content)]


def is_anaconda_channel(channel: str) -> bool:
    """A channel covered by Anaconda's Terms of Service (defaults, anaconda, repo.anaconda.com, ...)."""
    c = channel.strip().rstrip("/")
    return c in _ANACONDA_NAMES or bool(_ANACONDA_URL.match(c + "/"))


def anaconda_tos_note(kb: KnowledgeBase, v: Version | None, os_name: str, channels: Sequence[str], *,
                      recipe_id: str = "", recipe_channels: Sequence[str] = ()) -> str:
    """Pure: a note when ``channels`` include Anaconda's, naming the knowledge base's conda-forge alternative."""
    used = [c for c in channels if is_anaconda_channel(c)]
    if not used:
        return ""
    text = (f"{', '.join(used)}: Anaconda's channels are covered by Anaconda's Terms of Service (a paid licence "
            f"for organisations of 200 or more people; {ANACONDA_TOS_SOURCE}); conda-forge has no such terms")
    if "conda-forge" in recipe_channels:
        return text + f"; recipe {recipe_id} itself uses conda-forge: drop the Anaconda channel from --channel / the config"
    if v is None:
        return text + "; tfgpu cannot name a conda-forge alternative without knowing the TensorFlow version"
    alt = [r for r in kb.recipes_for(v, os_name) if r.gpu and "conda-forge" in r.channels and r.id != recipe_id]
    if alt:
        return text + f"; conda-forge alternative for TensorFlow {v}: recipe {alt[0].id} ({alt[0].backend})"
    cf = sorted({r.version for r in kb.conda_packages(None, None, os_name) if r.channel == "conda-forge"
                 and r.version.release[:2] == v.release[:2]})
    if cf:
        return text + (f"; conda-forge has TensorFlow {', '.join(str(x) for x in cf)} in this series "
                       f"(`tfgpu plan --tf {cf[-1]} --backend rattler`)")
    return text + f"; the knowledge base knows no conda-forge alternative for TensorFlow {v}"


# --------------------------------------------------------------------------- the planner


def _check_python_and_name(python: str | None, name: str | None) -> str | None:
    """--python as X.Y (refused when it is not a version) and --name checked; returns the X.Y."""
    if name is not None:
        check_name(name)
    if python is None:
        return None
    try:
        return _xy(python)
    except InvalidVersion:
        msg = f"--python {python!r} is not a Python version"
        raise UsageError(msg, hint="use X.Y, e.g. --python 3.11") from None


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
                   smoke_script: str, cache_dir: str, name: str | None = None) -> Plan:
    """The plan of `tfgpu plan|create --backend docker|podman|apptainer|container`: the runner and image
    :func:`choose_image` picks (what tfgpu.plan.choose.choose, and so the doctor, picks), and the runner's steps:
    pull the image, run the smoke script in it with the GPU. The target is judged as the doctor judges it
    (a series by its newest release that can work here). Pure: ``smoke_script`` and ``cache_dir`` are handed in.
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
    if tv is not None and tv.verdict != BLOCKED and len(tf.strip().split(".")) == 2:
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
        env_vars={"TF_FORCE_GPU_ALLOW_GROWTH": "true"}, notes=tuple(dict.fromkeys(notes)), recipe_id=image,
        sources=tuple(image_source_urls(kb, row)), env_python="python3",
        verdict=tv.verdict if (judged or machine_blocked) and tv is not None else "",
        blockers=tuple(blockers) if judged or machine_blocked else (),
        caveats=tuple(caveats) if judged or machine_blocked else ())


def plan_environment(
    kb: KnowledgeBase,
    facts: Facts,
    *,
    tf: str,
    backend: str = "auto",
    name: str | None = None,
    prefix: str | None = None,
    python: str | None = None,
    tools: Mapping[str, str | None] | None = None,
    channels: Sequence[str] = (),
    home: str = "~/.local/share/tfgpu",
    conda_envs_dir: str | None = None,
    index_url: str | None = None,
    find_links: Sequence[str] = (),
    offline: bool = False,
    engine_python: str | None = None,
    channels_source: str = "--channel",
    prefer: str | None = None,
    prefer_source: str = "config",
) -> Plan:
    """Plan an environment for TensorFlow ``tf`` (an exact release; resolve series/latest first).

    ``tools`` maps "uv", "mamba", "micromamba", "conda" and "pythonX.Y" to paths (None: absent);
    ``home`` is the tfgpu home (venvs go to home/envs/NAME); ``conda_envs_dir`` is where `conda -n`
    puts named environments. ``channels`` replace the recipe's channels (``channels_source`` says where
    they came from: --channel or the config file). ``prefer`` (the config file's ``[backends] prefer``)
    is tried first when ``backend`` is auto; when it cannot build the target, auto decides and the
    plan says why. Raises UsageError when no recipe fits.
    """
    tools = dict(tools or {})
    if backend not in BACKENDS:
        msg = f"unknown backend {backend!r}"
        raise UsageError(msg, hint=f"use one of: {', '.join(BACKENDS)}")
    if prefer and prefer != "auto" and prefer not in BACKENDS:
        msg = f"unknown preferred backend {prefer!r} ({prefer_source})"
        raise UsageError(msg, hint=f"use one of: {', '.join(BACKENDS)}")
    os_name = target_os(facts)
    python = _check_python_and_name(python, name)
    verdict = judge_for_plan(kb, facts, tf, backend=backend)
    v = kb.resolve_tf(tf, os=os_name)
    if verdict is not None and verdict.verdict != "blocked" and len(tf.strip().split(".")) == 2:
        v = Version(verdict.tf)  # a series: the newest release that works here, as the doctor says
    tfs = str(v)
    default_name = prefix is None and name is None
    if default_name:
        name = f"tf{tfs}"
    from tfgpu.plan.choose import Preferences, choose

    choice, prefer_note = choose(kb, facts, verdict if verdict is not None and verdict.tf == tfs else None, v,
                                 os_name, tools, Preferences(backend=backend, python=python, prefer=prefer,
                                                             prefer_source=prefer_source))
    notes: list[str] = [prefer_note] if prefer_note else []
    sources: list[str] = []
    interps = _interpreters(facts, tools)
    wheel_pythons = kb.pythons_for(v, os_name)

    recipe = choice.recipe
    limit = kb.python_limit_for(v, recipe.id) if recipe.backend == "pip" else None
    if limit is not None:  # a package the pip recipe pins has wheels for fewer Pythons (compat/pins.toml)
        wheel_pythons = [p for p in wheel_pythons if p in limit.python]
        notes.append(f"Python {', '.join(wheel_pythons)} only: {limit.why}")
        sources.append(pin_source_urls(limit))
    if recipe.backend == "conda" and len(tf.strip().split(".")) == 2:
        # a series on a conda-only recipe: the newest release the recipe's channel is known to carry
        cf = "conda-forge" in recipe.channels
        known = [r.version for r in kb.conda_packages(None, None, os_name)
                 if (r.channel == "conda-forge") == cf and _xy(str(r.version)) == _xy(tfs)]
        if known and v not in known:
            v = max(known)
            tfs = str(v)
            if default_name:
                name = f"tf{tfs}"
    sources.append(recipe.source)
    if getattr(recipe, "confidence", "sourced") != "sourced":
        notes.append(f"recipe {recipe.id} is {recipe.confidence}: {recipe.note}")

    # -- where -------------------------------------------------------------------------------
    conda_like = choice.backend in ("conda", "rattler")
    conda_named = False
    if prefix is None:
        assert name is not None
        if choice.backend == "conda" and conda_envs_dir:
            prefix = _join(os_name, conda_envs_dir, name)
            conda_named = True
        else:
            prefix = _join(os_name, home, "envs", name)
    py_in_env = env_python(prefix, os_name, conda=conda_like)

    # -- pip requirements --------------------------------------------------------------------
    pins = pins_for(v)
    rel = kb.gpu_release(v, os_name)
    dist = rel.dist if rel else kb.gpu_dist(v)
    conda_part, pip_part = _recipe_parts(recipe.packages)
    pip_reqs: list[str] = []
    if recipe.backend == "pip":
        install_as = kb.install_as_for(v, recipe.id)
        tf_pip = install_as.install if install_as else tfs
        if install_as:
            notes.append(f"installs {dist} {tf_pip} for {tfs}: {install_as.why}")
        pip_reqs.append(f"{dist}[and-cuda]=={tf_pip}" if "[and-cuda]" in recipe.packages else f"{dist}=={tf_pip}")
    elif recipe.backend == "conda+pip":
        for spec in _split_specs(pip_part, "", tfs):
            if spec.split("=")[0].split("<")[0].strip() == "tensorflow":
                spec = f"tensorflow=={tfs}"  # the recipe may say tensorflow==2.11.* or <2.11: the user chose one
            pip_reqs.append(spec)
    if pip_reqs:
        for p in pins:
            pip_reqs.append(p.requirement)
            notes.append(f"pin {p.requirement}: {p.why}" + (" (inferred)" if p.confidence != "sourced" else ""))
            sources.append(pin_source_urls(p))

    # -- python ------------------------------------------------------------------------------
    conda_specs: list[str] = []
    chans: tuple[str, ...] = ()
    if conda_like:
        if recipe.backend == "conda":
            rows = [r for r in kb.conda_packages(None, v, os_name) if r.channel in ("anaconda", "defaults")
                    or r.channel in recipe.channels]
            row_pythons = sorted({p for r in rows for p in r.python if
                                  ("conda-forge" in recipe.channels) == (r.channel == "conda-forge")}, key=Version)
            cands = row_pythons or wheel_pythons
            if not rows:
                recorded = sorted({str(r.version) for r in kb.conda_packages(None, None, os_name)
                                   if series_of_str(str(r.version)) == series_of_str(tfs)
                                   and (r.channel == "conda-forge") == ("conda-forge" in recipe.channels)}, key=Version)
                notes.append(f"tfgpu has no record of {tfs} on {', '.join(recipe.channels)}; the solver will say if it "
                             "is missing" + (f" (recorded for this series: {', '.join(recorded)})" if recorded else ""))
        elif choice.python_from_conda:
            cands = wheel_pythons
        else:
            rng = _python_range(recipe.python)
            cands = [p for p in wheel_pythons if not rng or p in rng] or wheel_pythons
        if python is not None:
            if cands and python not in cands:
                from tfgpu.plan.choose import python_range_text

                msg = (f"TensorFlow {tfs} supports Python {python_range_text(cands)} (recipe {recipe.id}); "
                       f"{python} is outside it")
                raise UsageError(msg, hint=f"use --python {cands[-1]}")
            py_ver = python
        else:
            if not cands:
                msg = f"no Python version is known for TensorFlow {tfs} with recipe {recipe.id}"
                raise UsageError(msg, hint="pass --python X.Y")
            py_ver = _newest(cands)
        if choice.python_from_conda:
            conda_specs = [f"python={py_ver}", "pip"]
            chans = ("conda-forge",)
        else:
            conda_specs = _split_specs(conda_part, py_ver, tfs)
            if recipe.backend == "conda+pip":
                conda_specs.append("pip")
            chans = recipe.channels
        base_python = ""
    else:
        py_ver = choice.python
        base_python = interps.get(py_ver) or f"python{py_ver}"
    if channels and conda_like:
        chans = tuple(channels)
        notes.append(f"channels from {channels_source}: {', '.join(chans)} "
                     f"(recipe: {', '.join(recipe.channels) or 'none'})")
    elif channels and channels_source == "--channel":
        notes.append("--channel is not used: this plan installs from PyPI only")
    tos = anaconda_tos_note(kb, v, os_name, chans, recipe_id=recipe.id, recipe_channels=recipe.channels)
    if tos:
        notes.append(tos)
        sources.append(ANACONDA_TOS_SOURCE)

    # -- steps: the chosen runner's (tfgpu.backends.runners) ---------------------------------------------
    from tfgpu.backends.runners import RECIPE_RUNNERS, PlannedBuild

    env_vars: dict[str, str] = {}
    steps = RECIPE_RUNNERS[choice.backend].steps(PlannedBuild(
        recipe=recipe, tf=v, os=os_name, prefix=prefix, conda_name=name if conda_named else None, tool=choice.tool,
        tools=tools, channels=tuple(chans), conda_specs=tuple(conda_specs), pip_requirements=tuple(pip_reqs),
        python=py_ver, base_python=base_python, env_python=py_in_env, facts=facts, kb=kb,
        engine_python=engine_python or sys.executable,
        driver_cuda=engine_driver_cuda(facts, kb) if choice.backend == "rattler" else None,
        index_url=index_url, find_links=tuple(find_links), offline=offline))

    # -- activation --------------------------------------------------------------------------
    act_lines, act_notes = activation_lines(recipe, facts, conda_like=conda_like, os_name=os_name)
    notes.extend(act_notes)
    for line in act_lines:
        k, _, val = line.partition("=")
        env_vars[k] = val
    nvidia_fix = (not conda_like and recipe.backend == "pip" and recipe.provides_cuda
                  and nvidia_libpath_needed(kb, v))
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
            notes.append(f"TensorFlow {tfs} needs its nvidia/*/lib directories on LD_LIBRARY_PATH "
                         f"({nvidia_libpath_source(kb)}); bin/activate sets it")
            sources.append(nvidia_libpath_source(kb))
        steps.append(Step((), "venvs have no activate.d: tfgpu appends the variables to bin/activate",
                          kind="append-file", path=_join(os_name, prefix, "bin", "activate"), content=content))
    if not conda_like and act_lines and os_name == "windows":
        content = "".join(f"set \"{line.partition('=')[0]}={line.partition('=')[2]}\"\r\n" for line in act_lines)
        steps.append(Step((), "venvs have no activate.d: tfgpu appends the variables to Scripts\\activate.bat",
                          kind="append-file", path=_join(os_name, prefix, "Scripts", "activate.bat"), content=content))

    if not recipe.provides_cuda:
        build = kb.build_for(v, os_name)
        if build is not None:
            notes.append(f"recipe {recipe.id} uses the system's CUDA {build.cuda} and cuDNN {build.cudnn} "
                         "(install them system-wide; TensorFlow's tested build configuration)")
    if choice.tool == "venv" and not conda_like:
        notes.append("uv is not installed: python -m venv and pip are slower (https://docs.astral.sh/uv/)")
    if recipe.note:
        notes.append(f"{recipe.id}: {recipe.note}")
    return Plan(
        tf=tfs, backend=choice.backend, backend_reason=choice.reason, prefix=prefix, name=name,
        python=py_ver, steps=tuple(steps), env_vars=env_vars, notes=tuple(dict.fromkeys(notes)),
        recipe_id=recipe.id, sources=tuple(dict.fromkeys(s for s in sources if s)), tool=choice.tool,
        os=os_name, channels=tuple(chans), conda_specs=tuple(conda_specs), pip_requirements=tuple(pip_reqs),
        env_python=py_in_env, conda_named=conda_named,
        verdict=verdict.verdict if verdict is not None and verdict.tf == tfs else "",
        blockers=_judged(verdict, tfs, "blockers", choice.backend, recipe.id),
        caveats=_judged(verdict, tfs, "caveats", choice.backend, recipe.id),
    )


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

def cpu_dist(kb: KnowledgeBase, v: Version, os_name: str, arch: str = "x86_64") -> str:
    """The PyPI project that installs TensorFlow ``v`` for the CPU only: tensorflow-cpu where compat/rules.toml
    `tensorflow-cpu-package` holds (x86_64 Linux and Windows from 2.1), else tensorflow (CPU-only up to 2.0; aarch64
    has no tensorflow-cpu wheel; on macOS, where tensorflow-cpu stops at 2.16.2, tensorflow is a CPU build as well).
    Neither pulls nvidia-* wheels without [and-cuda]."""
    return "tensorflow-cpu" if kb.rule("tensorflow-cpu-package").holds(v, os_name, arch) else "tensorflow"


def cpu_dist_source(kb: KnowledgeBase) -> str:
    """Where the tensorflow-cpu rule comes from (a URL)."""
    rule = kb.rule("tensorflow-cpu-package")
    return str(kb.sources("rules").get(rule.source, {}).get("url", ""))


def plan_cpu_environment(
    kb: KnowledgeBase, facts: Facts, *, tf: str, name: str | None = None, prefix: str | None = None,
    python: str | None = None, tools: Mapping[str, str | None] | None = None, home: str = "~/.local/share/tfgpu",
    index_url: str | None = None, find_links: Sequence[str] = (), offline: bool = False,
) -> Plan:
    """A CPU-only venv for TensorFlow ``tf`` (a release or a series): `tensorflow-cpu` or `tensorflow`, never
    [and-cuda] or nvidia-* wheels; nothing about the GPU is judged."""
    from tfgpu.backends import pip as pip_backend
    from tfgpu.plan.choose import PIP, Context, interpreters

    tools = dict(tools or {})
    os_name = target_os(facts)
    python = _check_python_and_name(python, name)
    try:
        v = kb.resolve_tf(tf, os=os_name)
    except UsageError:  # no GPU build for this OS (native Windows after 2.10, macOS): the CPU builds follow Linux's
        v = kb.resolve_tf(tf, os="linux")
        os_kb = "linux"
    else:
        os_kb = os_name
    tfs = str(v)
    if prefix is None:
        name = name or f"tf{tfs}-cpu"
        prefix = _join(os_name, home, "envs", name)
    ctx = Context(v=v, os=os_name, tools=tools, interpreters=interpreters(facts, tools),
                  wheel_pythons=tuple(kb.pythons_for(v, os_kb)), python=python, newest_python=kb.newest_python(os_kb))
    err = PIP.can_build(None, ctx)  # type: ignore[arg-type]  # the pip runner does not look at the recipe
    if err is not None:
        raise err
    py_ver = PIP.python_for(ctx)
    assert py_ver is not None
    arch = str((facts.get("platform") or {}).get("arch") or "x86_64")
    dist = cpu_dist(kb, v, os_name, arch)
    reqs = [f"{dist}=={tfs}"]
    notes: list[str] = []
    sources = [cpu_dist_source(kb)]
    for p in pins_for(v):
        reqs.append(p.requirement)
        notes.append(f"pin {p.requirement}: {p.why}" + (" (inferred)" if p.confidence != "sourced" else ""))
        sources.append(pin_source_urls(p))
    uv = tools.get("uv")
    base_python = ctx.interpreters.get(py_ver) or f"python{py_ver}"
    steps = (pip_backend.venv_step(base_python, prefix, uv=uv, python=py_ver),
             pip_backend.pip_install_step(
                 env_python(prefix, os_name, conda=False), reqs, uv=uv, index_url=index_url,
                 find_links=find_links, offline=offline,
                 why=f"install {reqs[0]} (CPU only: no CUDA, no nvidia-* wheels)"
                     + (f" with {len(reqs) - 1} pin(s)" if len(reqs) > 1 else "")))
    notes.append("CPU only (--cpu): TensorFlow will not use a GPU; the smoke test checks CPU ops")
    return Plan(
        tf=tfs, backend="pip", backend_reason="--cpu: a venv and pip; a CPU build needs no CUDA or conda",
        prefix=prefix, name=name, python=py_ver, steps=steps, notes=tuple(notes), recipe_id="cpu",
        sources=tuple(dict.fromkeys(s for s in sources if s)), tool="uv" if uv else "venv", os=os_name,
        pip_requirements=tuple(reqs), env_python=env_python(prefix, os_name, conda=False), verdict="ready",
        cpu=True,
    )


# --------------------------------------------------------------------------- from a lockfile

#: conda package names whose version is the environment's TensorFlow, best first.
_TF_PACKAGES = ("tensorflow", "tensorflow-gpu", "tensorflow-base", "tensorflow-cpu")


def _lock_tf(lock: Lock, pkgs: Sequence[LockedPackage]) -> str:
    if lock.meta("tfgpu_tf"):
        return lock.meta("tfgpu_tf")
    by_name = {p.name.lower().replace("_", "-"): p.version for p in pkgs}
    return next((by_name[n] for n in _TF_PACKAGES if n in by_name), "")


def _kb_version(kb: KnowledgeBase, text: str, os_name: str) -> Version | None:
    """The release as the knowledge base knows it, or None (a lock may hold a build tfgpu has no row for)."""
    if not text:
        return None
    try:
        v = Version(text)
        return v if kb.gpu_release(v, os_name) is not None or kb.build_for(v, os_name) is not None else None
    except Exception:  # an odd version string in a lockfile: plan without the knowledge base
        return None


def _lock_env_name(tfs: str, path: str) -> str:
    """tfVERSION, else the lockfile's name made safe (check_name's alphabet), else from-lock."""
    if tfs and _NAME_RE.fullmatch(f"tf{tfs}"):
        return f"tf{tfs}"
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", posixpath.basename(path).split(".")[0]).strip(".-_")[:64]
    return stem if stem and _NAME_RE.fullmatch(stem) and ".." not in stem else "from-lock"


_PIP_URL = re.compile(r"(?:https?|file)://[^\s#]+")


def _pip_hash_req(p: LockedPackage, lock_path: str) -> str:
    """A direct-URL requirement carrying the lock's sha256 as its ``#sha256=`` fragment, which pip checks
    against the download. A pip package without a sha256, without a URL (pip would take it from any
    index, unverified) or with a URL that is not a plain http(s)/file archive (a VCS URL builds code) is
    refused: every package of a lock is verified. A fragment already in the URL (``#egg=``, or a
    ``#sha256=`` of its own) is dropped, so only the lock's hash counts."""
    where = f"lockfile {lock_path}: pip package {p.name} {p.version}"
    sha256 = p.sha256 or ""
    if not re.fullmatch(r"[0-9a-fA-F]{64}", sha256):
        msg = f"{where} has no sha256: tfgpu installs only verified packages"
        raise InputError(msg, hint="regenerate the lock (conda-lock records a sha256 for every pip package)")
    url = (p.url or "").split("#", 1)[0]
    if not url:
        msg = f"{where} has no URL: pip would take it from whatever index it is set up with"
        raise InputError(msg, hint="regenerate the lock; a locked pip package names its wheel's URL")
    if not _PIP_URL.fullmatch(url):
        msg = f"{where}: {url[:80]!r} is not an http(s) or file URL of a package archive"
        raise InputError(msg, hint="regenerate the lock from an index you trust")
    return f"{p.name} @ {url}#sha256={sha256.lower()}"


def plan_from_lock(
    kb: KnowledgeBase,
    facts: Facts,
    lock: Lock,
    *,
    platform: str,
    name: str | None = None,
    prefix: str | None = None,
    tools: Mapping[str, str | None] | None = None,
    home: str = "~/.local/share/tfgpu",
    engine_python: str | None = None,
    index_url: str | None = None,
    find_links: Sequence[str] = (),
    offline: bool = False,
) -> Plan:
    """Plan exactly the environment a lockfile describes (read by ``tfgpu.backends.lockfiles.read_lock``), without solving.

    conda locks: ``python -m tfgpu.backends.rattler install-lock`` (the locked URLs and hashes for ``platform``),
    then the lock's pip packages (``--no-deps``, each checked against its recorded sha256), then the
    recipe's unlocked pip part if tfgpu recorded one, then the recipe's activation scripts.
    pip locks: a venv, then ``pip install --require-hashes --no-deps -r FILE``.
    Raises UsageError (exit 2) when the lock has nothing for ``platform`` or no interpreter fits.
    """
    tools = dict(tools or {})
    if name is not None:
        check_name(name)
    if lock.kind == "pip":
        return _plan_pip_lock(kb, facts, lock, name=name, prefix=prefix, tools=tools, home=home,
                              index_url=index_url, find_links=find_links, offline=offline)
    if platform not in lock.platforms:
        msg = f"the lockfile {lock.path} has no packages for {platform} (it locks {', '.join(lock.platforms) or 'nothing'})"
        raise UsageError(msg, hint=f"lock for it: tfgpu lock ... --platform {platform}, or pass --platform")
    from tfgpu.backends.lockfiles import PLATFORM_OS

    os_name = PLATFORM_OS.get(platform, target_os(facts))
    pkgs = [p for p in lock.packages if p.platform == platform]
    conda_pkgs = [p for p in pkgs if p.manager == "conda"]
    pip_pkgs = [p for p in pkgs if p.manager == "pip"]
    tfs = _lock_tf(lock, conda_pkgs + pip_pkgs)
    v = _kb_version(kb, tfs, os_name)
    py = next((p.version for p in conda_pkgs if p.name == "python"), "")
    py_ver = ".".join(py.split(".")[:2]) if py else ""
    if prefix is None:
        name = name or _lock_env_name(tfs, lock.path)
        prefix = _join(os_name, home, "envs", name)
    py_in_env = env_python(prefix, os_name, conda=True)
    notes: list[str] = []
    sources: list[str] = [lock.path]
    recipe_id = lock.meta(f"tfgpu_recipe_{platform}")
    recipe = None
    if recipe_id and v is not None:
        recipe = next((r for r in kb.recipes_for(v, os_name) if r.id == recipe_id), None)
    argv = [engine_python or sys.executable, "-m", "tfgpu.backends.rattler", "install-lock", "--prefix", prefix,
            "--lock", lock.path, "--platform", platform]
    if offline:
        argv.append("--offline")
    steps = [Step(tuple(argv), f"install exactly the {len(conda_pkgs)} conda packages {posixpath.basename(lock.path)} "
                               f"locks for {platform} (URLs and hashes; no solving) with tfgpu's embedded engine")]
    pip_reqs: list[str] = []
    if pip_pkgs:
        hashed = [_pip_hash_req(p, lock.path) for p in pip_pkgs]
        steps.append(Step((py_in_env, "-m", "pip", "install", "--disable-pip-version-check", "--no-deps", *hashed),
                          f"install the {len(pip_pkgs)} locked pip packages from their URLs, without resolving "
                          "(--no-deps); pip checks each download against the sha256 in the URL"))
        pip_reqs += hashed
        if offline:
            notes.append("--offline: the locked pip packages are fetched from their URLs; pip's cache may serve them")
    unlocked = lock.meta(f"tfgpu_pip_{platform}").split()
    if unlocked:
        reqs = [f"tensorflow=={tfs}" if r.split("=")[0].split("<")[0] == "tensorflow" and tfs else r for r in unlocked]
        if v is not None:
            for pin in pins_for(v):
                reqs.append(pin.requirement)
                notes.append(f"pin {pin.requirement}: {pin.why}" + (" (inferred)" if pin.confidence != "sourced" else ""))
                sources.append(pin_source_urls(pin))
        from tfgpu.backends import pip as pip_backend

        steps.append(pip_backend.pip_install_step(
            py_in_env, reqs, uv=None, index_url=index_url, find_links=find_links, offline=offline,
            why=f"install the recipe's pip part ({' '.join(unlocked)}): recorded in the lock but not locked, "
                "so pip resolves it now"))
        pip_reqs += reqs
        notes.append(f"the lock records the recipe's pip part ({' '.join(unlocked)}) without hashes; lock it "
                     "separately with `tfgpu lock --backend pip` to pin it too")
    act_lines, act_notes = activation_lines(recipe, facts, conda_like=True, os_name=os_name)
    notes.extend(act_notes)
    steps.extend(conda_activation_steps(act_lines, prefix, os_name))
    env_vars = {k: val for k, _, val in (line.partition("=") for line in act_lines)}
    chans = tuple(lock.channels)
    urls = sorted({p.url.rsplit("/", 2)[0] for p in conda_pkgs if p.url and is_anaconda_channel(p.url.rsplit("/", 2)[0])})
    tos = anaconda_tos_note(kb, v, os_name, tuple(c for c in chans if is_anaconda_channel(c)) or tuple(urls),
                            recipe_id=recipe_id)
    if tos:
        notes.append(tos)
        sources.append(ANACONDA_TOS_SOURCE)
    if not tfs:
        notes.append("the lock names no TensorFlow package; the environment is recorded without a version")
    elif v is None:
        notes.append(f"TensorFlow {tfs} is not in tfgpu's knowledge base: no verdict pre-check or recipe activation")
    if recipe_id and recipe is None and v is not None:
        notes.append(f"the lock names recipe {recipe_id}, which the knowledge base does not know for TensorFlow {tfs}")
    return Plan(
        tf=tfs or "unknown", backend="rattler", tool="rattler",
        backend_reason=f"--from-lock {lock.path}: exactly the locked packages for {platform}, no solving",
        prefix=prefix, name=name, python=py_ver, steps=tuple(steps), env_vars=env_vars,
        notes=tuple(dict.fromkeys(notes)), recipe_id=recipe_id or "from-lock",
        sources=tuple(dict.fromkeys(sources)), os=os_name, channels=chans,
        conda_specs=tuple(f"{p.name}={p.version}={p.build}" if p.build else f"{p.name}={p.version}" for p in conda_pkgs),
        pip_requirements=tuple(pip_reqs), env_python=py_in_env,
    )


def _plan_pip_lock(
    kb: KnowledgeBase, facts: Facts, lock: Lock, *, name: str | None, prefix: str | None,
    tools: Mapping[str, str | None], home: str, index_url: str | None, find_links: Sequence[str], offline: bool,
) -> Plan:
    os_name = target_os(facts)
    tfs = _lock_tf(lock, lock.packages)
    v = _kb_version(kb, tfs, os_name)
    interps = _interpreters(facts, tools)
    if lock.python:
        wanted = [lock.python]
    elif v is not None:
        wanted = list(kb.pythons_for(v, os_name))
    else:
        wanted = []
    have = [p for p in wanted if p in interps] if wanted else sorted(interps, key=Version)
    if not have:
        msg = (f"the pip lock {lock.path} needs Python {', '.join(wanted) or 'X.Y'} and no such interpreter was found"
               if wanted else "no Python interpreter was found for the pip lock")
        raise UsageError(msg, hint=f"install one (e.g. `uv python install {wanted[-1] if wanted else '3.11'}`)")
    py_ver = _newest(have)
    if prefix is None:
        name = name or _lock_env_name(tfs, lock.path)
        prefix = _join(os_name, home, "envs", name)
    py_in_env = env_python(prefix, os_name, conda=False)
    uv = tools.get("uv")
    from tfgpu.backends import pip as pip_backend

    steps = [pip_backend.venv_step(interps[py_ver], prefix, uv=uv, python=py_ver)]
    reqs = ["--require-hashes", "--no-deps", "-r", lock.path]
    steps.append(pip_backend.pip_install_step(
        py_in_env, reqs, uv=uv, index_url=index_url, find_links=find_links, offline=offline,
        why=f"install exactly the {len(lock.packages)} packages of {posixpath.basename(lock.path)}: every one pinned "
            "and checked against its hashes (--require-hashes), nothing resolved (--no-deps)"))
    notes: list[str] = []
    sources: list[str] = [lock.path]
    env_vars: dict[str, str] = {}
    has_nvidia = any(p.name.lower().startswith("nvidia-") for p in lock.packages)
    if v is not None and nvidia_libpath_needed(kb, v) and has_nvidia and os_name != "windows":
        steps.append(Step((), "venvs have no activate.d: tfgpu appends the variables to bin/activate",
                          kind="append-file", path=_join(os_name, prefix, "bin", "activate"),
                          content=_venv_nvidia_snippet(py_ver, kb)))
        env_vars["LD_LIBRARY_PATH"] = f"{prefix}/lib/python{py_ver}/site-packages/nvidia/*/lib (each directory, prepended)"
        notes.append(f"TensorFlow {tfs} needs its nvidia/*/lib directories on LD_LIBRARY_PATH "
                     f"({nvidia_libpath_source(kb)}); bin/activate sets it")
        sources.append(nvidia_libpath_source(kb))
    if not tfs:
        notes.append("the lock names no TensorFlow package; the environment is recorded without a version")
    return Plan(
        tf=tfs or "unknown", backend="pip", tool="uv" if uv else "venv",
        backend_reason=f"--from-lock {lock.path}: a hashed pip requirements file, installed into a new venv with "
                       f"{'uv' if uv else 'python -m venv and pip'}",
        prefix=prefix, name=name, python=py_ver, steps=tuple(steps), env_vars=env_vars,
        notes=tuple(dict.fromkeys(notes)), recipe_id="from-lock", sources=tuple(dict.fromkeys(sources)),
        os=os_name, pip_requirements=tuple(reqs), env_python=py_in_env,
    )


# --------------------------------------------------------------------------- renderings


def render_sh(plan: Plan, *, header: str = "") -> str:
    """A POSIX shell script a user can read and run by hand. Every value is quoted, comments included
    (a newline in a channel or a path must not start a command), and a heredoc's delimiter never
    occurs in what it wraps."""
    from tfgpu.core.process import quote
    from tfgpu.core.safety import comment_safe as c

    out = ["#!/bin/sh", c(f"# tfgpu plan: TensorFlow {plan.tf} with {plan.tool} ({plan.backend}), recipe {plan.recipe_id}")]
    if header:
        out.append(c(f"# {header}"))
    out.append(c(f"# backend: {plan.backend_reason}"))
    out.append(c(f"# environment: {plan.prefix}"))
    out.append("set -eu")
    for i, step in enumerate(plan.steps, 1):
        out.append("")
        out.append(c(f"# {i}. {step.why}"))
        if step.kind == "run":
            prefix = " ".join(f"{k}={quote([v])}" for k, v in step.env)
            out.append((prefix + " " if prefix else "") + quote(step.argv))
        else:
            assert step.path is not None
            op = ">>" if step.kind == "append-file" else ">"
            content = (step.content or "").rstrip("\n")
            eof = "TFGPU_EOF"
            while eof in content.splitlines():
                eof += "_"
            out.append(f"mkdir -p {quote([posixpath.dirname(step.path)])}")
            out.append(f"cat {op} {quote([step.path])} <<'{eof}'")
            out.append(content)
            out.append(eof)
    if plan.env_vars:
        out.append("")
        out.append(c("# activation sets: " + ", ".join(f"{k}={v}" for k, v in plan.env_vars.items())))
    for n in plan.notes:
        out.append(c(f"# note: {n}"))
    return "\n".join(out) + "\n"


def render_environment_yml(plan: Plan) -> str:
    """conda's environment.yml for the plan (`conda env create -f` on any machine; none is needed here). A pip
    plan becomes conda-forge's Python and pip with the same PyPI requirements."""
    import json

    from tfgpu.core.safety import comment_safe

    def q(s: str) -> str:  # a YAML double-quoted scalar is a JSON string: every character escaped
        return json.dumps(s)

    pip_only = not plan.conda_specs
    channels = ("conda-forge",) if pip_only else plan.channels
    specs = (f"python={plan.python}", "pip") if pip_only else plan.conda_specs
    out = [comment_safe(f"# tfgpu: TensorFlow {plan.tf}, recipe {plan.recipe_id}"
                        + (" (its PyPI packages in a conda-made Python)" if pip_only else "")),
           f"name: {q(plan.name or 'tf' + plan.tf)}", "channels:"]
    out += [f"  - {q(c)}" for c in channels]
    if channels:
        out.append("  - nodefaults" if "defaults" not in channels else "  # (defaults listed explicitly)")
    out.append("dependencies:")
    out += [f"  - {q(s)}" for s in specs]
    if plan.pip_requirements:
        out.append("  - pip:")
        out += [f"    - {q(r)}" for r in plan.pip_requirements]
    simple = {k: v for k, v in plan.env_vars.items() if "$" not in v and "(" not in v}
    if simple:
        out.append("variables:")
        out += [f"  {q(k)}: {q(v)}" for k, v in simple.items()]
    return "\n".join(out) + "\n"
