"""`tfgpu lock`: write a lockfile (conda-lock's format, or hashed pip requirements) for a TensorFlow release."""

from __future__ import annotations

from pathlib import Path
from typing import Any, List, Optional  # noqa: UP035 - typer needs typing.List on 3.9

import typer

from tfgpu.facts import as_facts
from tfgpu.options import overrides, typer_option


def lock(
    tf: str = typer.Option(..., "--tf", help="A release (2.2.0), a series (2.2) or `latest`."),
    platform: Optional[List[str]] = typer.Option(  # noqa: B008, UP006 - typer needs typing.List on 3.9
        None, "--platform", help="conda platform to lock for (repeatable; default linux-64)."),
    output: Optional[Path] = typer.Option(  # noqa: B008 - typer's idiom
        None, "-o", "--output",
        help="lockfile to write (default conda-lock.yml; requirements.lock.txt for --backend pip)."),
    channel: Optional[List[str]] = typer.Option(  # noqa: B008, UP006
        None, "--channel", "-c", help="channel instead of the recipe's (repeatable)."),
    backend: str = typer_option(
        "backend",
        help="auto: the recipe `tfgpu plan` chooses for this machine (a conda recipe: conda-lock's format; "
             "a pip recipe: hashed requirements); rattler or conda: a conda recipe, solved with tfgpu's embedded "
             "engine (conda-lock's format); pip: --require-hashes requirements with uv."),
    python: Optional[str] = typer_option(
        "python", help="Python X.Y for the environment (default: the one plan would use, else the newest the wheels allow)."),
    virtual_package: Optional[List[str]] = typer.Option(  # noqa: B008, UP006
        None, "--virtual-package", help="assume a virtual package, e.g. __cuda=12.4 (repeatable)."),
    cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help="rattler cache directory."),  # noqa: B008
    force: bool = typer.Option(False, "--force", help="overwrite an existing lockfile."),
    facts_file: Optional[str] = typer_option("facts"),
    driver: Optional[str] = typer_option("driver"),
    gpu_cc: Optional[str] = typer_option("gpu_cc"),
    os_name: Optional[str] = typer_option("os"),
) -> int:
    """Lock a TensorFlow GPU environment: exact URLs and hashes per platform (needs the network).

    The recipe is the one `tfgpu plan` and `tfgpu doctor` choose for this machine (or the --facts file)."""
    from tfgpu.doctor import gather_facts
    from tfgpu.engine import parse_virtual_package
    from tfgpu.errors import UsageError

    if backend not in ("auto", "rattler", "conda", "pip"):  # bad input is exit 2 before the machine is probed
        msg = f"unknown --backend {backend!r}"
        raise UsageError(msg, hint="use auto, rattler, conda or pip")
    for vp in virtual_package or ():
        parse_virtual_package(vp)
    facts, _ = gather_facts(facts_file=facts_file, overrides=overrides(driver, gpu_cc, os_name))
    return run_lock(tf=tf, platforms=tuple(platform or ("linux-64",)), output=output,
                    channels=tuple(channel or ()), backend=backend, python=python,
                    virtual_packages=tuple(virtual_package or ()), cache_dir=cache_dir, force=force, facts=facts)


def run_lock(
    *, tf: str, platforms: tuple[str, ...], output: Path | None, channels: tuple[str, ...], backend: str,
    python: str | None, virtual_packages: tuple[str, ...], cache_dir: Path | None, force: bool,
    facts: dict[str, Any] | None = None,
) -> int:
    from tfgpu.errors import UsageError

    if backend not in ("auto", "rattler", "conda", "pip"):
        msg = f"unknown --backend {backend!r}"
        raise UsageError(msg, hint="use auto, rattler, conda or pip")
    from tfgpu import lock as locking
    from tfgpu import lockfiles
    from tfgpu import output as ui  # `output` is the lockfile option here
    from tfgpu.backends.config import load_config
    from tfgpu.backends.detect import detect_tools
    from tfgpu.knowledge import load_kb
    from tfgpu.plan import resolve_target

    kb = load_kb()
    facts = facts or {}
    config = load_config()
    tools = detect_tools(facts)
    tf, resolve_notes = resolve_target(kb, as_facts(facts), tf, backend=backend)
    pip_target = None
    if backend == "auto":  # the planner's choice for the first platform decides the kind of lock
        first = locking.lock_target(kb, facts, tf, platforms[0], python=python, channels=channels, tools=tools,
                                     prefer=config.prefer)
        backend = "pip" if first.kind == "pip" else "rattler"
        pip_target = first if first.kind == "pip" else None
        kind_text = "hashed pip requirements" if first.kind == "pip" else "conda-lock's format"
        ui.note(f"# --backend auto: recipe {first.recipe} ({kind_text})")
    out = output or Path("requirements.lock.txt" if backend == "pip" else "conda-lock.yml")
    if (out.exists() or out.is_symlink()) and not force:
        msg = f"{out} already exists"
        raise UsageError(msg, hint="pass --force to overwrite it, or choose another file with -o")
    for n in resolve_notes:
        ui.note(f"# {n}")
    lockfiles.check_output(out)  # before solving: a device node, a missing or read-only directory
    if backend == "pip":
        if len(platforms) != 1:
            msg = "--backend pip locks one platform per requirements file"
            raise UsageError(msg, hint="run tfgpu lock once per --platform with its own -o")
        notes = locking.lock_pip(kb, tf, platforms[0], out, python=python, facts=facts, tools=tools,
                                  target=pip_target, echo=ui.note)
    else:
        if backend == "conda":
            # Handing the solve to an installed conda-lock is not implemented yet: the embedded engine
            # solves and writes the same format.
            ui.note("# --backend conda: a conda recipe, solved with tfgpu's embedded engine (rattler) and "
                        "written in conda-lock's format; no conda, mamba or conda-lock is run")
        if not channels and config.channels:  # --channel beats the config file, which beats the recipe's channels
            channels = tuple(config.channels)
            ui.note(f"# channels from {config.path}: {', '.join(channels)}")
        req = locking.LockRequest(tf=tf, platforms=platforms, channels=channels, python=python,
                                   virtual_packages=virtual_packages, facts=facts, tools=tools,
                                   prefer=config.prefer)
        lock_, notes = locking.lock_conda(kb, req, cache_dir=cache_dir)
        lockfiles.write_lockfile(lock_, out, force=force)
        counts = ", ".join(f"{p}: {len(lock_.for_platform(p))}" for p in lock_.platforms)
        notes.append(f"packages per platform: {counts}")
    for n in notes:
        ui.say(f"# {n}")
    ui.say(f"wrote {out}")
    return 0


def register(app: typer.Typer) -> None:
    app.command("lock")(lock)
