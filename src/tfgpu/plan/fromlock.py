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
from tfgpu.core.errors import InputError, UsageError
from tfgpu.core.tfnames import TF_CONDA_PACKAGES
from tfgpu.kb.queries import pin_source_urls
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
from tfgpu.plan.envspec import _NAME_RE, _interpreters, _join, _newest, check_name, env_python, pins_for

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
