"""A lockfile -> a Plan that installs exactly what it pins (conda-lock's format through the embedded engine, or
hashed pip requirements), without solving."""

from __future__ import annotations

import posixpath
import re
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from packaging.version import Version

from tfgpu.backends.steps import Step
from tfgpu.core.errors import UsageError
from tfgpu.core.tfnames import TF_CONDA_PACKAGES
from tfgpu.plan.choose import target_os
from tfgpu.plan.model import Plan
from tfgpu.plan.request import BuildRequest

if TYPE_CHECKING:
    from tfgpu.backends.lockfiles import Lock, LockedPackage
    from tfgpu.facts.document import Facts
    from tfgpu.kb.knowledge import KnowledgeBase
from tfgpu.plan.activation import (
    _venv_nvidia_snippet,
    activation_lines,
    conda_activation_steps,
    nvidia_libpath_needed,
    nvidia_libpath_source,
)
from tfgpu.plan.channels import ANACONDA_TOS_SOURCE, anaconda_tos_note, is_anaconda_channel
from tfgpu.plan.envspec import _NAME_RE, _interpreters, _join, _newest, check_name, env_python

#: conda package names whose version is the environment's TensorFlow, best first.


def _lock_tf(lock: Lock, pkgs: Sequence[LockedPackage]) -> str:
    if lock.meta("tfgpu_tf"):
        return lock.meta("tfgpu_tf")
    by_name = {p.name.lower().replace("_", "-"): p.version for p in pkgs}
    return next((by_name[n] for n in TF_CONDA_PACKAGES if n in by_name), "")


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


def _pip_part_file(prefix: str, os_name: str) -> str:
    """Where a conda lock's recorded pip part is written for pip to read (inside the new environment)."""
    return _join(os_name, prefix, "conda-meta", "tfgpu-pip-requirements.txt")


def _pip_part_steps(lock: Lock, platform: str, value: str, py_in_env: str, prefix: str, os_name: str, *,
                    index_url: str | None, find_links: Sequence[str], offline: bool) -> list[Step]:
    """The recipe's pip part that ``tfgpu lock`` locked with hashes into ``custom_metadata.tfgpu_pip_PLATFORM``:
    written as a requirements file and installed with ``--require-hashes --no-deps``. Every requirement is
    checked again here (the lock reader did once): pinned, hashed, no option, path or URL."""
    from tfgpu.backends import pip as pip_backend
    from tfgpu.backends.lockfiles import pip_part_requirements

    reqs = pip_part_requirements(value, f"lockfile {lock.path}: the pip part for {platform}")
    path = _pip_part_file(prefix, os_name)
    names = " ".join(r.split(" ", 1)[0] for r in reqs)
    return [
        Step((), f"the recipe's pip part as {posixpath.basename(lock.path)} locks it ({names})", kind="write-file",
             path=path, content="".join(f"{r}\n" for r in reqs)),
        pip_backend.pip_install_step(
            py_in_env, ["--require-hashes", "--no-deps", "-r", path], uv=None, index_url=index_url,
            find_links=find_links, offline=offline,
            why=f"install the recipe's {len(reqs)} locked pip packages: every one pinned and checked against its "
                "hashes (--require-hashes), nothing resolved (--no-deps)"),
    ]


def _conda_lock_install_steps(
    lock: Lock, platform: str, conda_pkgs: Sequence[LockedPackage], pip_pkgs: Sequence[LockedPackage],
    py_in_env: str, prefix: str, os_name: str, *, engine_python: str | None, index_url: str | None,
    find_links: Sequence[str], offline: bool,
) -> tuple[list[Step], list[str], list[str]]:
    """The steps that install a conda lock's packages for ``platform``: the locked conda packages (embedded
    engine), the locked pip packages, the recipe's pip part. Returns (steps, pip requirements, notes)."""
    notes: list[str] = []
    argv = [engine_python or sys.executable, "-m", "tfgpu.backends.rattler", "install-lock", "--prefix", prefix,
            "--lock", lock.path, "--platform", platform]
    if offline:
        argv.append("--offline")
    steps = [Step(tuple(argv), f"install exactly the {len(conda_pkgs)} conda packages {posixpath.basename(lock.path)} "
                               f"locks for {platform} (URLs and hashes; no solving) with tfgpu's embedded engine")]
    pip_reqs: list[str] = []
    if pip_pkgs:
        from tfgpu.backends.lockfiles import locked_pip_requirement

        hashed = [locked_pip_requirement(p, lock.path) for p in pip_pkgs]
        steps.append(Step((py_in_env, "-m", "pip", "install", "--disable-pip-version-check", "--no-deps",
                           "--require-hashes", *hashed),
                          f"install the {len(pip_pkgs)} locked pip packages from their URLs, without resolving "
                          "(--no-deps); pip checks each download against the sha256 in the URL"))
        pip_reqs += hashed
        if offline:
            notes.append("--offline: the locked pip packages are fetched from their URLs; pip's cache may serve them")
    pip_part = lock.meta(f"tfgpu_pip_{platform}")
    if pip_part:
        steps.extend(_pip_part_steps(lock, platform, pip_part, py_in_env, prefix, os_name, index_url=index_url,
                                     find_links=find_links, offline=offline))
        pip_reqs += ["--require-hashes", "--no-deps", "-r", _pip_part_file(prefix, os_name)]
    return steps, pip_reqs, notes


def _conda_lock_release_notes(tfs: str, v: Version | None, recipe_id: str, *, recipe_known: bool) -> list[str]:
    """What a conda lock's plan says about its TensorFlow release and recipe when the knowledge base lacks them."""
    notes: list[str] = []
    if not tfs:
        notes.append("the lock names no TensorFlow package; the environment is recorded without a version")
    elif v is None:
        notes.append(f"TensorFlow {tfs} is not in tfgpu's knowledge base: no verdict pre-check or recipe activation")
    if recipe_id and not recipe_known and v is not None:
        notes.append(f"the lock names recipe {recipe_id}, which the knowledge base does not know for TensorFlow {tfs}")
    return notes


def plan_from_lock(kb: KnowledgeBase, facts: Facts, lock: Lock, req: BuildRequest, *,
                   tools: Mapping[str, str | None] | None = None, home: str = "~/.local/share/tfgpu",
                   engine_python: str | None = None) -> Plan:
    """Plan exactly the environment a lockfile describes (read by ``tfgpu.backends.lockfiles.read_lock``), without solving.

    conda locks: ``python -m tfgpu.backends.rattler install-lock`` (the locked URLs and hashes for ``platform``),
    then the lock's pip packages (``--no-deps``, each checked against its recorded sha256), then the
    recipe's unlocked pip part if tfgpu recorded one, then the recipe's activation scripts.
    pip locks: a venv, then ``pip install --require-hashes --no-deps -r FILE``.
    Raises UsageError (exit 2) when the lock has nothing for ``req.platform`` or no interpreter fits.
    """
    platform, name, prefix = req.platform or "", req.name, req.prefix
    index_url, find_links, offline = req.index_url, req.find_links, req.offline
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
    sources: list[str] = [lock.path]
    recipe_id = lock.meta(f"tfgpu_recipe_{platform}")
    recipe = None
    if recipe_id and v is not None:
        recipe = next((r for r in kb.recipes_for(v, os_name) if r.id == recipe_id), None)
    steps, pip_reqs, notes = _conda_lock_install_steps(
        lock, platform, conda_pkgs, pip_pkgs, py_in_env, prefix, os_name, engine_python=engine_python,
        index_url=index_url, find_links=find_links, offline=offline)
    act_lines, act_notes = activation_lines(recipe, facts, conda_like=True, os_name=os_name)
    notes.extend(act_notes)
    steps.extend(conda_activation_steps(act_lines, prefix, os_name))
    env_vars = {k: val for k, _, val in (line.partition("=") for line in act_lines)}
    chans = tuple(lock.channels)
    urls = sorted({p.url.rsplit("/", 2)[0] for p in conda_pkgs if p.url and is_anaconda_channel(p.url.rsplit("/", 2)[0], kb)})
    tos = anaconda_tos_note(kb, v, os_name, tuple(c for c in chans if is_anaconda_channel(c, kb)) or tuple(urls),
                            recipe_id=recipe_id)
    if tos:
        notes.append(tos)
        sources.append(ANACONDA_TOS_SOURCE)
    notes.extend(_conda_lock_release_notes(tfs, v, recipe_id, recipe_known=recipe is not None))
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
    cpu = lock.is_cpu()
    if cpu:
        notes.append("CPU only (a lock of the CPU route): TensorFlow will not use a GPU; the smoke test checks CPU ops")
    return Plan(
        tf=tfs or "unknown", backend="pip", tool="uv" if uv else "venv",
        backend_reason=f"--from-lock {lock.path}: a hashed pip requirements file, installed into a new venv with "
                       f"{'uv' if uv else 'python -m venv and pip'}",
        prefix=prefix, name=name, python=py_ver, steps=tuple(steps), env_vars=env_vars,
        notes=tuple(dict.fromkeys(notes)), recipe_id="from-lock", sources=tuple(dict.fromkeys(sources)),
        os=os_name, pip_requirements=tuple(reqs), env_python=py_in_env, cpu=cpu,
    )
