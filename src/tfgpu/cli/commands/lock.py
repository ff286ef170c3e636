"""`tfgpu lock`: write a lockfile (conda-lock's format, or hashed pip requirements) for a TensorFlow release."""

from __future__ import annotations

from pathlib import Path
from typing import Any, List, Optional  # noqa: UP035 - typer needs typing.List on 3.9

import typer

from tfgpu.cli.options import overrides, typer_option

LOCK_BACKEND_HELP = (
    "The backend: auto (the recipe `tfgpu plan` chooses for this machine: a conda recipe gives conda-lock's format, "
    "a pip recipe hashed requirements), rattler or conda (a conda recipe, solved by tfgpu's embedded engine and "
    "written in conda-lock's format; no conda, mamba or conda-lock is run), or pip (--require-hashes requirements, "
    "with uv).")


def lock(
    tf: str = typer_option("tf", default=...),
    platform: Optional[List[str]] = typer_option(  # noqa: B008, UP006 - typer needs typing.List on 3.9
        "platform", help="Conda platform: to lock for (repeatable; default linux-64)."),
    output: Optional[Path] = typer_option(  # noqa: B008 - typer's idiom
        "output", help="The file to write: the lockfile (default conda-lock.yml; requirements.lock.txt for --backend "
                       "pip)."),
    channel: Optional[List[str]] = typer_option("channel"),  # noqa: B008, UP006
    backend: str = typer_option("backend", help=LOCK_BACKEND_HELP),
    python: Optional[str] = typer_option(
        "python", help="Python X.Y of the environment (default: the one plan would use, else the newest the wheels "
                       "allow)."),
    virtual_package: Optional[List[str]] = typer.Option(  # noqa: B008, UP006
        None, "--virtual-package", metavar="SPEC", help="Assume a virtual package, e.g. __cuda=12.4 (repeatable)."),
    cache_dir: Optional[Path] = typer.Option(  # noqa: B008
        None, "--cache-dir", metavar="DIR", help="The rattler cache directory."),
    force: bool = typer_option("force", help="Go ahead where tfgpu would stop: overwrite an existing lockfile; lock a "
                                             "target that is blocked on the machine the lock is for."),
    cpu: bool = typer_option("cpu", help="The CPU route (what `tfgpu create --cpu` installs): tensorflow-cpu or "
                                         "tensorflow and the release's pins as hashed pip requirements; never "
                                         "\\[and-cuda] or nvidia-* wheels. For a machine without a usable GPU."),
    facts_file: Optional[str] = typer_option("facts"),
    driver: Optional[str] = typer_option("driver"),
    gpu_cc: Optional[str] = typer_option("gpu_cc"),
    os_name: Optional[str] = typer_option("os"),
    timeout: Optional[float] = typer_option(
        "timeout", help="Give up after this many seconds: on each platform's solve, or on uv for --backend pip "
                        "(default: no limit for a solve, 900 for uv)."),
) -> int:
    """Lock a TensorFlow environment: exact URLs and hashes per platform (needs the network).

    The recipe is the one `tfgpu plan` and `tfgpu doctor` choose for this machine (or the --facts file). The target
    is judged there as `tfgpu create` judges it: exit 1 when it is blocked (unless --force); --cpu locks the CPU
    route."""
    from tfgpu.backends.rattler.virtual import parse_virtual_package
    from tfgpu.build.lock import check_lock_backend
    from tfgpu.core.timeouts import check_timeout
    from tfgpu.facts.gather import gather_facts

    check_lock_backend(backend)  # bad input is exit 2 before the machine is probed
    timeout = check_timeout(timeout)
    for vp in virtual_package or ():
        parse_virtual_package(vp)
    facts, _ = gather_facts(facts_file=facts_file, overrides=overrides(driver, gpu_cc, os_name))
    return run_lock(tf=tf, platforms=tuple(platform or ("linux-64",)), output=output,
                    channels=tuple(channel or ()), backend=backend, python=python,
                    virtual_packages=tuple(virtual_package or ()), cache_dir=cache_dir, force=force, facts=facts,
                    timeout=timeout, cpu=cpu)


def run_lock(
    *, tf: str, platforms: tuple[str, ...], output: Path | None, channels: tuple[str, ...], backend: str,
    python: str | None, virtual_packages: tuple[str, ...], cache_dir: Path | None, force: bool,
    facts: dict[str, Any] | None = None, timeout: float | None = None, cpu: bool = False,
) -> int:
    from tfgpu.build.lock import lock_environment
    from tfgpu.plan.request import BuildRequest
    from tfgpu.render import output as ui  # `output` is the lockfile option here

    req = BuildRequest(tf=tf, backend=backend, python=python, channels=channels, cpu=cpu)
    outcome = lock_environment(req, platforms=platforms, output=output, virtual_packages=virtual_packages,
                               cache_dir=cache_dir, force=force, facts=facts, say=ui.note, timeout=timeout)
    for n in outcome.notes:
        ui.say(f"# {n}")
    ui.say(f"wrote {outcome.path}")
    return 0


def register(app: typer.Typer) -> None:
    app.command("lock")(lock)
