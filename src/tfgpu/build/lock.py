"""The lock stage (`tfgpu lock`): what to lock -- the recipe the planner chooses for this machine
(tfgpu.plan.planner), for each platform -- and how: a conda recipe is solved by the embedded engine into
conda-lock's format (tfgpu.backends.lockfiles); a pip recipe becomes a Plan whose steps run ``uv pip compile
--generate-hashes``, executed by the step runner (tfgpu.build.execute) like the steps of `tfgpu create`."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfgpu.backends.lockfiles import (
    LOCK_PLATFORMS,
    PLATFORM_OS,
    Lock,
    LockedPackage,
    content_hash,
    package_from_record,
    write_atomic,
)
from tfgpu.backends.rattler import virtual
from tfgpu.backends.steps import Step
from tfgpu.core.errors import StepFailed, TfgpuError, UsageError
from tfgpu.core.record import field, record
from tfgpu.facts.document import as_facts
from tfgpu.kb.versions import Target
from tfgpu.plan.request import BuildRequest

if TYPE_CHECKING:
    from tfgpu.kb.knowledge import KnowledgeBase
    from tfgpu.plan.model import Plan


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
    """Pure: what to lock for ``platform``, chosen by the planner (tfgpu.plan.planner.plan_environment) from this
    machine's facts, so that ``tfgpu lock`` locks the recipe ``tfgpu plan`` and the doctor name.
    ``backend`` rattler/conda: a conda recipe; pip: a pip recipe; auto: whichever the planner takes."""
    from packaging.version import Version

    from tfgpu.plan.envspec import pins_for
    from tfgpu.plan.planner import plan_environment

    tools = dict(tools or {})
    tools["rattler"] = tools.get("rattler", "embedded") or "embedded"  # the lock is solved here, not run

    def planned(with_tools: Mapping[str, str | None]) -> Any:
        req = BuildRequest(tf=tf, backend="rattler" if backend == "conda" else backend, python=python,
                           channels=tuple(channels), prefer=prefer)
        return plan_environment(kb, as_facts(facts_for_platform(facts, platform)), req, tools=with_tools, home="~",
                                engine_python="python")

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


def cpu_lock_target(kb: KnowledgeBase, facts: Mapping[str, Any], tf: str, platform: str, *,
                    python: str | None = None) -> LockTarget:
    """Pure: what ``tfgpu lock --cpu`` locks for ``platform``: the CPU route's requirements as ``create --cpu``
    installs them (tfgpu.plan.cpu: tensorflow-cpu or tensorflow and the release's pins, never [and-cuda])."""
    from tfgpu.plan.cpu import plan_cpu_environment

    on = as_facts(facts_for_platform(facts, platform))
    req = BuildRequest(tf=tf, python=python, cpu=True)
    try:  # the Python this machine would build with, else any the wheels support: uv needs no interpreter
        plan = plan_cpu_environment(kb, on, req, tools={}, home="~")
    except UsageError:
        plan = plan_cpu_environment(kb, on, req, tools=_any_python(kb), home="~")
    return LockTarget("cpu", "pip", plan.tf, (), (), plan.pip_requirements, plan.python, None, tuple(plan.notes))


def judge_lock_target(kb: KnowledgeBase, facts: Mapping[str, Any], tf: str, backend: str, *, force: bool,
                      note: Callable[[str], None]) -> None:
    """The target judged on the machine the lock is for (this one, or the --facts file's), as ``create`` judges
    it: a blocked target is refused (NotReady, exit 1) with what works there instead, unless ``force``. A lock
    that ``create --from-lock`` would refuse there is never written quietly."""
    from tfgpu.build.pipeline import alternative, blocked_error
    from tfgpu.judge.target import judge_target

    verdict = judge_target(as_facts(facts), kb, tf, backend=backend)
    if verdict.verdict != "blocked":
        for c in verdict.caveats:
            note(f"# caveat: {c.summary}")
        return
    if force:
        note(f"# warning: TensorFlow {verdict.tf or tf} is blocked on the machine this lock is for; "
             "locking it anyway (--force)")
        return
    err = blocked_error(facts, verdict, tf)
    assert isinstance(err, TfgpuError)
    alt = alternative(facts, verdict, backend)
    command = ""
    if alt is not None:  # the lock of what works there, where lock can make it (not a container route)
        lockable = alt.backend in (None, "cpu", *LOCK_BACKENDS)
        command = alt.command.replace("tfgpu create ", "tfgpu lock ", 1) if lockable else alt.command
    err.hint = (f"instead: {command}; " if command else "") + (
        "--force locks it anyway; --facts FILE locks for the machine that FILE describes")
    raise err


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

    conda-lock's defaults for the platform (compat/conda.toml virtual_packages), ``__cuda`` = the CUDA the
    TensorFlow build uses (a lock is for machines whose driver supports it), then CONDA_OVERRIDE_CUDA /
    CONDA_OVERRIDE_GLIBC and ``--virtual-package`` as for ``create``.
    """

    base = virtual.default_virtual_packages(platform)
    if cuda and platform in ("linux-64", "linux-aarch64", "win-64"):
        base.append(virtual.VirtualPkg("__cuda", cuda))
    explicit_v = [virtual.parse_virtual_package(v) for v in explicit]
    return virtual.resolve_virtual_packages(base, driver_cuda=None, env=env, explicit=explicit_v)


def lock_conda(kb: KnowledgeBase, req: LockRequest, *, cache_dir: Path | None = None,
               env: Mapping[str, str] | None = None, timeout: float | None = None,
               echo: Callable[[str], None] | None = None) -> tuple[Lock, list[str]]:
    """Solve the recipe's conda packages for every platform with the embedded engine; returns the Lock
    and notes. Needs the channels (network) unless they are local. ``timeout`` bounds each platform's solve."""
    from tfgpu import __version__
    from tfgpu.backends import rattler as engine
    from tfgpu.kb.queries import data_version

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
        records = engine.solve(target.specs, channels, platform, vps, cache_dir=cache_dir, timeout=timeout)
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
            custom[f"tfgpu_pip_{platform}"] = lock_pip_part(target, platform, tools=req.tools, echo=echo)
            notes.append(f"{platform}: the recipe's pip part ({' '.join(target.pip)}) locked with hashes by uv")
    lock = Lock(platforms=tuple(req.platforms), channels=tuple(channels_used), packages=tuple(packages),
                content_hash=hashes, sources=(), custom_metadata=custom)
    return shareable(lock, notes), notes


def shareable(lock: Lock, notes: list[str]) -> Lock:
    """The lock as a file made to be committed and shared records it: channel and package URLs without
    credentials (``user:password@``, anaconda.org's ``/t/TOKEN``), and a note (in the file and in ``notes``)
    naming the channels that need them at install time."""
    from tfgpu.core.record import replace
    from tfgpu.core.termtext import without_credentials

    channels, private = [], []
    for c in lock.channels:
        clean, had = without_credentials(c)
        channels.append(clean)
        if had:
            private.append(clean)
    if not private:
        return lock
    note = (f"{', '.join(private)} needs credentials, which the lock does not record: give them when installing "
            "(tfgpu's engine reads rattler's authentication file, RATTLER_AUTH_FILE, and ~/.netrc)")
    notes.append(note)
    packages = tuple(replace(p, url=without_credentials(p.url)[0]) for p in lock.packages)
    return replace(lock, channels=tuple(dict.fromkeys(channels)), packages=packages,
                   custom_metadata={**lock.custom_metadata, "tfgpu_auth": note})


#: uv's --python-platform per conda platform (https://docs.astral.sh/uv/reference/cli/#uv-pip-compile).
UV_PLATFORMS = {"linux-64": "x86_64-manylinux_2_28", "linux-aarch64": "aarch64-manylinux_2_28",
                "win-64": "x86_64-pc-windows-msvc"}


#: Seconds uv may take to lock (`tfgpu lock --timeout` overrides it): resolving TensorFlow's tree is a minute or two.
PIP_LOCK_TIMEOUT = 900.0

#: The files of a pip lock plan, in its private working directory.
PIP_LOCK_INPUT = "requirements.in"
PIP_LOCK_OUTPUT = "requirements.lock.txt"


def plan_pip_lock(target: LockTarget, platform: str, *, uv: str, workdir: str,
                  index_url: str | None = None) -> Plan:
    """Pure: the Plan that locks a pip recipe for ``platform``: write its requirements into ``workdir``,
    then ``uv pip compile --generate-hashes`` them to ``workdir/requirements.lock.txt`` for the target's
    Python and platform (uv needs no interpreter of that version)."""
    from tfgpu.plan.model import Plan

    if platform not in UV_PLATFORMS:
        msg = f"tfgpu does not lock for platform {platform}"
        raise UsageError(msg, hint=f"use one of: {', '.join(UV_PLATFORMS)}")
    req_in, out = str(Path(workdir) / PIP_LOCK_INPUT), str(Path(workdir) / PIP_LOCK_OUTPUT)
    argv = [uv, "pip", "compile", "--generate-hashes", "--python-version", target.python,
            "--python-platform", UV_PLATFORMS[platform], "--no-header", "--quiet", req_in, "-o", out]
    if index_url:
        argv += ["--index-url", index_url]
    steps = (
        Step((), f"the recipe's requirements ({' '.join(target.pip)}), for uv", kind="write-file", path=req_in,
             content="".join(r + "\n" for r in target.pip)),
        Step(tuple(argv), f"resolve them for {platform}, Python {target.python}, pinning every package with the "
                          "sha256 of each of its files (--generate-hashes)"),
    )
    # a lock plan builds no environment: its "prefix" is the directory its files are written in
    return Plan(tf=target.tf, backend="pip", backend_reason=f"--backend pip: recipe {target.recipe}, locked with uv",
                prefix=workdir, name=None, python=target.python, steps=steps, notes=target.notes,
                recipe_id=target.recipe, tool="uv", os=PLATFORM_OS[platform], pip_requirements=target.pip)


def find_uv(tools: Mapping[str, str | None] | None = None) -> str | None:
    """The uv to lock with: the detected one, else on PATH, else beside tfgpu's interpreter (tfgpu's own
    environment without that environment on PATH), else where the uv package (a dependency) says it is."""
    import sys

    from tfgpu.core import process as run

    uv = (tools or {}).get("uv") or run.which("uv")
    if uv is None:
        beside = Path(sys.executable).parent / ("uv.exe" if os.name == "nt" else "uv")
        uv = str(beside) if beside.is_file() else None
    if uv is None:  # uv is a dependency of tfgpu: its package knows where pip put the binary (--user, a prefix)
        try:
            from uv import find_uv_bin

            uv = str(find_uv_bin())
        except (ImportError, FileNotFoundError):
            uv = None
    return uv


def lock_pip(kb: KnowledgeBase, tf: str, platform: str, out: Path, *, python: str | None = None,
             index_url: str | None = None, timeout: float | None = None, facts: Mapping[str, Any] | None = None,
             tools: Mapping[str, str | None] | None = None, target: LockTarget | None = None,
             echo: Callable[[str], None] | None = None) -> list[str]:
    """Lock a pip recipe to a ``--require-hashes`` requirements file: ``plan_pip_lock``'s steps run by the
    step runner (tfgpu.build.execute.run_plan_steps: ``+ cmd`` to ``echo``, a timeout, the full output in
    tfgpu's logs, a signal stops uv's process group) in a private temporary directory; the result is then
    written to ``out`` atomically with a header, so a failed or interrupted lock leaves ``out`` as it was.
    ``timeout``: seconds uv may take (None: :data:`PIP_LOCK_TIMEOUT`)."""
    if platform not in UV_PLATFORMS:
        msg = f"tfgpu does not lock for platform {platform}"
        raise UsageError(msg, hint=f"use one of: {', '.join(UV_PLATFORMS)}")
    if target is None:
        target = lock_target(kb, facts or {}, tf, platform, backend="pip", python=python, tools=tools)
    uv = find_uv(tools)
    if uv is None:  # uv is a dependency: only a broken installation gets here
        msg = "uv is not installed; it resolves pip locks with hashes"
        raise StepFailed(msg, hint="python3 -m pip install uv (a dependency of tfgpu), or use --backend rattler")
    body = compile_pip_lock(target, platform, uv=uv, index_url=index_url, timeout=timeout, echo=echo)
    header = (f"# Locked by tfgpu (recipe {target.recipe}) for {platform}, Python {target.python}.\n"
              f"# Install with: pip install --require-hashes --no-deps -r {out.name}\n")
    write_atomic(out, header + body)
    return [f"{platform}: recipe {target.recipe}: {' '.join(target.pip)} for Python {target.python}"]


def compile_pip_lock(target: LockTarget, platform: str, *, uv: str, index_url: str | None = None,
                     timeout: float | None = None, echo: Callable[[str], None] | None = None) -> str:
    """``uv pip compile --generate-hashes`` of the target's pip requirements for ``platform`` (``plan_pip_lock``'s
    steps, run by the step runner in a private temporary directory): the hashed requirements text uv wrote."""
    import tempfile

    from tfgpu.build.execute import run_plan_steps

    timeout = PIP_LOCK_TIMEOUT if timeout is None else timeout
    reqs = " ".join(target.pip)
    # a directory only this user can enter (mkdtemp: mode 0700): nothing planted there redirects a write
    with tempfile.TemporaryDirectory(prefix="tfgpu-lock-") as work:
        plan = plan_pip_lock(target, platform, uv=uv, workdir=work, index_url=index_url)
        try:
            run_plan_steps(plan, log_name=f"lock-{platform}", timeout=timeout, echo=echo)
        except StepFailed as exc:
            exc.message = f"uv pip compile failed for {reqs}: {exc.message}"
            exc.args = (exc.message,)
            exc.hint = f"locking needs the network to the package index; {exc.hint}" if exc.hint else \
                "locking needs the network to the package index"
            raise
        # uv names the input in "# via -r FILE" lines: the file's name, not the temporary directory's
        try:
            body = (Path(work) / PIP_LOCK_OUTPUT).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:  # uv said it succeeded but wrote no readable file
            msg = f"uv pip compile wrote no lock for {reqs}: {exc}"
            raise StepFailed(msg, hint="run it again; if it persists, report uv's version (uv --version)") from None
        return body.replace(plan.steps[0].path or PIP_LOCK_INPUT, PIP_LOCK_INPUT)


def lock_pip_part(target: LockTarget, platform: str, *, tools: Mapping[str, str | None],
                  timeout: float | None = None, echo: Callable[[str], None] | None = None) -> str:
    """A conda recipe's pip part (TensorFlow from PyPI beside conda's CUDA), locked with hashes by uv with
    create's pins, as ``custom_metadata.tfgpu_pip_PLATFORM`` records it: ``name==version --hash=sha256:...``
    for every package, which ``create --from-lock`` installs with ``--require-hashes --no-deps``."""
    from packaging.version import Version

    from tfgpu.backends.lockfiles import hashed_requirements
    from tfgpu.core.record import replace
    from tfgpu.plan.envspec import pins_for

    uv = find_uv(tools)
    if uv is None:
        msg = f"uv is not installed; it locks the recipe's pip part ({' '.join(target.pip)}) with hashes"
        raise StepFailed(msg, hint="pip install uv")
    pins = [p.requirement for p in pins_for(Version(target.tf)) if p.requirement not in target.pip]
    body = compile_pip_lock(replace(target, pip=(*target.pip, *pins)), platform, uv=uv, timeout=timeout, echo=echo)
    return " ".join(line for *_, line in hashed_requirements(body, f"uv's lock of the pip part for {platform}"))


# --------------------------------------------------------------------------- the stage as a library call

#: What --backend takes for `tfgpu lock`.
LOCK_BACKENDS = ("auto", "rattler", "conda", "pip")


@record
class LockOutcome:
    """What ``lock_environment`` did: the file written, the kind of lock and the notes to show."""

    path: Path
    backend: str  # pip | rattler | conda (auto resolved)
    notes: tuple[str, ...] = ()


def check_lock_backend(backend: str) -> None:
    if backend not in LOCK_BACKENDS:
        msg = f"unknown --backend {backend!r}"
        raise UsageError(msg, hint="use auto, rattler, conda or pip")


def lock_environment(
    req: BuildRequest, *, platforms: tuple[str, ...], output: Path | None, virtual_packages: tuple[str, ...],
    cache_dir: Path | None, force: bool, facts: Mapping[str, Any] | None = None,
    say: Callable[[str], None] | None = None, timeout: float | None = None,
) -> LockOutcome:
    """`tfgpu lock` as a library call: resolve the target (``latest`` included, as plan and create do), judge it
    on the machine the lock is for (blocked: refused unless ``force``; ``req.cpu``: the CPU route), choose
    what to lock (the recipe ``tfgpu plan`` chooses here, for --backend auto), lock it, write the file.
    ``say`` gets the progress lines (the backend auto took, channels from the config file, the step
    runner's ``+ cmd``). ``timeout`` bounds each platform's solve, or the uv run of a pip lock (default: no
    limit for a solve, 900 s for uv)."""
    from tfgpu.backends.config import load_config
    from tfgpu.backends.detect import detect_tools
    from tfgpu.backends.lockfiles import check_output, write_lockfile
    from tfgpu.kb.knowledge import load_kb
    from tfgpu.plan.planner import resolve_target

    def note(line: str) -> None:
        if say is not None:
            say(line)

    tf, backend, python, channels = str(req.tf), req.backend, req.python, req.channels
    check_lock_backend(backend)
    kb = load_kb()
    facts = dict(facts or {})
    config = load_config()
    tools = detect_tools(facts)
    pip_target = None
    if req.cpu:  # the CPU route: the doctor's recommendation where no GPU can be used; nothing to judge
        if backend not in ("auto", "pip"):
            msg = f"--cpu locks the CPU route's pip requirements, not --backend {backend}"
            raise UsageError(msg, hint="drop --backend (or pass --backend pip)")
        if Target.parse(tf).is_latest:
            tf = kb.series("linux")[0]  # the CPU builds follow the releases, not an OS's GPU builds
        pip_target = cpu_lock_target(kb, facts, tf, platforms[0], python=python)
        tf, backend = pip_target.tf, "pip"
        resolve_notes: list[str] = []
        note("# --cpu: recipe cpu (hashed pip requirements; no CUDA, no nvidia-* wheels)")
    else:
        tf, resolve_notes = resolve_target(kb, as_facts(facts), tf, backend=backend)
    if backend == "auto":  # the planner's choice for the first platform decides the kind of lock
        first = lock_target(kb, facts, tf, platforms[0], python=python, channels=channels, tools=tools,
                            prefer=config.prefer)
        backend = "pip" if first.kind == "pip" else "rattler"
        pip_target = first if first.kind == "pip" else None
        kind_text = "hashed pip requirements" if first.kind == "pip" else "conda-lock's format"
        note(f"# --backend auto: recipe {first.recipe} ({kind_text})")
    out = output or Path("requirements.lock.txt" if backend == "pip" else "conda-lock.yml")
    if (out.exists() or out.is_symlink()) and not force:
        msg = f"{out} already exists"
        raise UsageError(msg, hint="pass --force to overwrite it, or choose another file with -o")
    for n in resolve_notes:
        note(f"# {n}")
    check_output(out)  # before solving: a device node, a missing or read-only directory
    if not req.cpu:
        judge_lock_target(kb, facts, tf, req.backend, force=force, note=note)
    if backend == "pip":
        if len(platforms) != 1:
            msg = "--backend pip locks one platform per requirements file"
            raise UsageError(msg, hint="run tfgpu lock once per --platform with its own -o")
        notes = lock_pip(kb, tf, platforms[0], out, python=python, facts=facts, tools=tools, target=pip_target,
                         echo=say, timeout=timeout)
    else:
        if backend == "conda":
            # Handing the solve to an installed conda-lock is not implemented yet: the embedded engine
            # solves and writes the same format.
            note("# --backend conda: a conda recipe, solved with tfgpu's embedded engine (rattler) and "
                 "written in conda-lock's format; no conda, mamba or conda-lock is run")
        if not channels and config.channels:  # --channel beats the config file, which beats the recipe's channels
            channels = tuple(config.channels)
            note(f"# channels from {config.path}: {', '.join(channels)}")
        lock_req = LockRequest(tf=tf, platforms=platforms, channels=channels, python=python,
                               virtual_packages=virtual_packages, facts=facts, tools=tools, prefer=config.prefer)
        lock, notes = lock_conda(kb, lock_req, cache_dir=cache_dir, timeout=timeout, echo=say)
        write_lockfile(lock, out, force=force)
        counts = ", ".join(f"{p}: {len(lock.for_platform(p))}" for p in lock.platforms)
        notes.append(f"packages per platform: {counts}")
    return LockOutcome(path=out, backend=backend, notes=tuple(notes))
