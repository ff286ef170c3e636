"""Locking: what `tfgpu lock` locks (the recipe the planner chooses for this machine, tfgpu.plan) and the
locking itself: conda recipes solved by the embedded engine into conda-lock's format (tfgpu.lockfile),
pip recipes resolved with hashes by ``uv pip compile``."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfgpu._record import field, record
from tfgpu.errors import StepFailed, UsageError
from tfgpu.facts import as_facts
from tfgpu.lockfile import (
    LOCK_PLATFORMS,
    PLATFORM_OS,
    Lock,
    LockedPackage,
    content_hash,
    package_from_record,
    write_atomic,
)

if TYPE_CHECKING:
    from tfgpu.knowledge import KnowledgeBase


@record
class LockTarget:
    """What a lock for one platform holds: the recipe ``tfgpu plan`` chooses, its conda specs and channels,
    its pip part (without the pins, which ``create --from-lock`` adds as create does) and Python."""

    recipe: str
    kind: str  # conda | pip
    tf: str
    channels: tuple[str, ...]
    specs: tuple[str, ...]
    pip: tuple[str, ...]
    python: str
    cuda: str | None  # the CUDA the TF build uses (for the __cuda the lock assumes)
    notes: tuple[str, ...] = ()


def _any_python(kb: KnowledgeBase) -> dict[str, str]:
    """Interpreters a pip lock may name: every Python some release has wheels for (compat/releases.toml); uv
    resolves for --python-version without running one."""
    from packaging.version import Version

    found = {p for r in kb.releases for p in (*r.linux_pythons, *r.windows_pythons)}
    return {f"python{x}": f"python{x}" for x in sorted(found, key=Version)}


def facts_for_platform(facts: Mapping[str, Any], platform: str) -> dict[str, Any]:
    """This machine's facts, on the OS a conda platform means (WSL2 stays WSL2 for linux-64)."""
    if platform not in LOCK_PLATFORMS:
        msg = f"tfgpu does not lock for platform {platform}"
        raise UsageError(msg, hint=f"use one of: {', '.join(LOCK_PLATFORMS)}")
    os_name = PLATFORM_OS[platform]
    out = dict(facts)
    plat = dict(out.get("platform") or {})
    if str(plat.get("os") or "linux") != os_name:
        plat.update({"os": os_name, "wsl": None})
    if platform == "linux-aarch64":
        plat["arch"] = "aarch64"
    elif plat.get("arch") in ("aarch64", "arm64"):
        plat["arch"] = "x86_64"
    out["platform"] = plat
    return out


def lock_target(kb: KnowledgeBase, facts: Mapping[str, Any], tf: str, platform: str, *, backend: str = "auto",
                python: str | None = None, channels: Sequence[str] = (), tools: Mapping[str, str | None] | None = None,
                prefer: str | None = None) -> LockTarget:
    """Pure: what to lock for ``platform``, chosen by the planner (tfgpu.plan.plan_environment) from this
    machine's facts, so that ``tfgpu lock`` locks the recipe ``tfgpu plan`` and the doctor name.
    ``backend`` rattler/conda: a conda recipe; pip: a pip recipe; auto: whichever the planner takes."""
    from packaging.version import Version

    from tfgpu.plan import pins_for, plan_environment

    tools = dict(tools or {})
    tools["rattler"] = tools.get("rattler", "embedded") or "embedded"  # the lock is solved here, not run

    def planned(with_tools: Mapping[str, str | None]) -> Any:
        return plan_environment(kb, as_facts(facts_for_platform(facts, platform)), tf=tf,
                                backend="rattler" if backend == "conda" else backend, python=python,
                                tools=with_tools, channels=channels, home="~", engine_python="python", prefer=prefer)

    try:  # the Python this machine would build with (create --from-lock then finds it) ...
        plan = planned(tools)
    except UsageError:
        if backend != "pip":
            raise
        plan = planned({**_any_python(kb), **tools})  # ... else any the wheels support: uv needs no interpreter
    v = Version(plan.tf)
    os_name = PLATFORM_OS[platform]
    kind = "pip" if plan.backend == "pip" else "conda"
    pins = {p.requirement for p in pins_for(v)}
    pip = tuple(r for r in plan.pip_requirements if r not in pins)
    cuda = None
    if kind == "conda":
        for r in kb.conda_packages(None, v, os_name):
            if r.cudatoolkit or r.cuda:
                cuda = r.cuda or r.cudatoolkit
                break
        build = kb.build_for(v, os_name)
        if cuda is None and build is not None:
            cuda = build.cuda
    return LockTarget(plan.recipe_id, kind, plan.tf, plan.channels, plan.conda_specs, pip if kind == "conda" else
                      plan.pip_requirements, plan.python, cuda, tuple(plan.notes))


# --------------------------------------------------------------------------- locking (effects)


@record
class LockRequest:
    """What ``tfgpu lock`` was asked for."""

    tf: str
    platforms: tuple[str, ...] = ("linux-64",)
    channels: tuple[str, ...] = ()  # empty: the recipe's
    python: str | None = None
    virtual_packages: tuple[str, ...] = ()  # NAME=VERSION[=BUILD], added to the platform defaults
    facts: Mapping[str, Any] = field(default_factory=dict)  # the machine the recipe is chosen for
    tools: Mapping[str, str | None] = field(default_factory=dict)
    prefer: str | None = None


def lock_virtual_packages(platform: str, cuda: str | None, explicit: Sequence[str],
                          env: Mapping[str, str]) -> tuple[list[Any], list[str]]:
    """The machine-independent virtual packages a lock for ``platform`` is solved with.

    conda-lock's defaults for the platform (engine.DEFAULT_VIRTUAL_PACKAGES), ``__cuda`` = the CUDA the
    TensorFlow build uses (a lock is for machines whose driver supports it), then CONDA_OVERRIDE_CUDA /
    CONDA_OVERRIDE_GLIBC and ``--virtual-package`` as for ``create``.
    """
    from tfgpu import engine

    base = engine.default_virtual_packages(platform)
    if cuda and platform in ("linux-64", "linux-aarch64", "win-64"):
        base.append(engine.VirtualPkg("__cuda", cuda))
    explicit_v = [engine.parse_virtual_package(v) for v in explicit]
    return engine.resolve_virtual_packages(base, driver_cuda=None, env=env, explicit=explicit_v)


def lock_conda(kb: KnowledgeBase, req: LockRequest, *, cache_dir: Path | None = None,
               env: Mapping[str, str] | None = None) -> tuple[Lock, list[str]]:
    """Solve the recipe's conda packages for every platform with the embedded engine; returns the Lock
    and notes. Needs the channels (network) unless they are local."""
    from tfgpu import __version__, engine
    from tfgpu.knowledge import data_version

    env = os.environ if env is None else env
    packages: list[LockedPackage] = []
    hashes: dict[str, str] = {}
    notes: list[str] = []
    custom: dict[str, str] = {"tfgpu_version": __version__, "tfgpu_data_version": data_version()}
    channels_used: list[str] = []
    for platform in req.platforms:
        target = lock_target(kb, req.facts, req.tf, platform, backend="rattler", python=req.python,
                             channels=req.channels, tools=req.tools, prefer=req.prefer)
        version = target.tf
        channels = list(target.channels)
        vps, vnotes = lock_virtual_packages(platform, target.cuda, req.virtual_packages, env)
        notes.extend(f"{platform}: {n}" for n in vnotes)
        notes.append(f"{platform}: recipe {target.recipe}: {' '.join(target.specs)} from {', '.join(channels)}"
                     f" with {' '.join(str(v) for v in vps)}")
        records = engine.solve(target.specs, channels, platform, vps, cache_dir=cache_dir)
        packages.extend(package_from_record(r, platform) for r in records)
        hashes[platform] = content_hash(channels=channels, specs=target.specs, platform=platform,
                                        virtual_packages=[str(v) for v in vps], pip=target.pip)
        for c in channels:
            if c not in channels_used:
                channels_used.append(c)
        custom["tfgpu_tf"] = str(version)
        custom[f"tfgpu_recipe_{platform}"] = target.recipe
        custom[f"tfgpu_specs_{platform}"] = " ".join(target.specs)
        custom[f"tfgpu_virtual_packages_{platform}"] = " ".join(str(v) for v in vps)
        if target.pip:
            custom[f"tfgpu_pip_{platform}"] = " ".join(target.pip)
            notes.append(f"{platform}: the recipe's pip part ({' '.join(target.pip)}) is not in this lock; "
                         "lock it with --backend pip")
    lock = Lock(platforms=list(req.platforms), channels=channels_used, packages=packages,
                content_hash=hashes, sources=[], custom_metadata=custom)
    return lock, notes


#: uv's --python-platform per conda platform (https://docs.astral.sh/uv/reference/cli/#uv-pip-compile).
UV_PLATFORMS = {"linux-64": "x86_64-manylinux_2_28", "linux-aarch64": "aarch64-manylinux_2_28",
                "win-64": "x86_64-pc-windows-msvc"}


def lock_pip(kb: KnowledgeBase, tf: str, platform: str, out: Path, *, python: str | None = None,
             index_url: str | None = None, timeout: float = 900, facts: Mapping[str, Any] | None = None,
             tools: Mapping[str, str | None] | None = None, target: LockTarget | None = None) -> list[str]:
    """Lock a pip recipe to a ``--require-hashes`` requirements file with ``uv pip compile``."""
    from tfgpu import run

    if platform not in UV_PLATFORMS:
        msg = f"tfgpu does not lock for platform {platform}"
        raise UsageError(msg, hint=f"use one of: {', '.join(UV_PLATFORMS)}")
    if target is None:
        target = lock_target(kb, facts or {}, tf, platform, backend="pip", python=python, tools=tools)
    recipe, reqs, python = target.recipe, list(target.pip), target.python
    uv = run.which("uv")
    if uv is None:  # installed into tfgpu's own environment (pip install uv) but that is not on PATH
        import sys

        beside = Path(sys.executable).parent / ("uv.exe" if os.name == "nt" else "uv")
        uv = str(beside) if beside.is_file() else None
    if uv is None:
        msg = "uv is not installed; it resolves pip locks with hashes"
        raise StepFailed(msg, hint="pip install uv, or use --backend rattler")
    import uuid

    # unpredictable names, created exclusively: a planted symlink must not redirect either write
    tmp = out.with_name(f".{out.name}.tfgpu-tmp-{uuid.uuid4().hex}")
    req_in = out.with_name(f".{out.name}.in-{uuid.uuid4().hex}")
    write_atomic(req_in, "".join(r + "\n" for r in reqs))
    argv = [uv, "pip", "compile", "--generate-hashes", "--python-version", python,
            "--python-platform", UV_PLATFORMS[platform], "--no-header", "--quiet", str(req_in), "-o", str(tmp)]
    if index_url:
        argv += ["--index-url", index_url]
    try:
        res = run.capture(argv, timeout=timeout)
        if not res.ok:
            msg = f"uv pip compile failed for {' '.join(reqs)}: {res.describe()}"
            raise StepFailed(msg, hint="locking needs the network to the package index")
        body = tmp.read_text(encoding="utf-8")
        header = (f"# Locked by tfgpu (recipe {recipe}) for {platform}, Python {python}.\n"
                  f"# Install with: pip install --require-hashes --no-deps -r {out.name}\n")
        write_atomic(out, header + body)
    finally:
        for p in (tmp, req_in):
            try:
                p.unlink()
            except FileNotFoundError:
                pass
    return [f"{platform}: recipe {recipe}: {' '.join(reqs)} for Python {python}"]
