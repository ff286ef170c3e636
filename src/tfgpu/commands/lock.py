"""`tfgpu lock`: write a lockfile (conda-lock's format, or hashed pip requirements) for a TensorFlow release."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional  # noqa: UP035 - typer needs typing.List on 3.9

import typer


def lock(
    tf: str = typer.Option(..., "--tf", help="TensorFlow release (2.2.0) or series (2.2)."),
    platform: Optional[List[str]] = typer.Option(  # noqa: B008, UP006 - typer needs typing.List on 3.9
        None, "--platform", help="conda platform to lock for (repeatable; default linux-64)."),
    output: Optional[Path] = typer.Option(  # noqa: B008 - typer's idiom
        None, "-o", "--output",
        help="lockfile to write (default conda-lock.yml; requirements.lock.txt for --backend pip)."),
    channel: Optional[List[str]] = typer.Option(  # noqa: B008, UP006
        None, "--channel", "-c", help="channel instead of the recipe's (repeatable)."),
    backend: str = typer.Option(
        "rattler", "--backend",
        help="rattler (or conda): solve with the embedded engine and write conda-lock's format; "
             "pip: --require-hashes requirements with uv."),
    python: Optional[str] = typer.Option(None, "--python", help="Python X.Y (default: the newest the recipe allows)."),
    virtual_package: Optional[List[str]] = typer.Option(  # noqa: B008, UP006
        None, "--virtual-package", help="assume a virtual package, e.g. __cuda=12.4 (repeatable)."),
    cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help="rattler cache directory."),  # noqa: B008
    force: bool = typer.Option(False, "--force", help="overwrite an existing lockfile."),
) -> int:
    """Lock a TensorFlow GPU environment: exact URLs and hashes per platform (needs the network)."""
    return run_lock(tf=tf, platforms=tuple(platform or ("linux-64",)), output=output,
                    channels=tuple(channel or ()), backend=backend, python=python,
                    virtual_packages=tuple(virtual_package or ()), cache_dir=cache_dir, force=force)


def run_lock(
    *, tf: str, platforms: tuple[str, ...], output: Path | None, channels: tuple[str, ...], backend: str,
    python: str | None, virtual_packages: tuple[str, ...], cache_dir: Path | None, force: bool,
) -> int:
    from tfgpu.errors import UsageError

    if backend not in ("rattler", "conda", "pip"):
        msg = f"unknown --backend {backend!r}"
        raise UsageError(msg, hint="use rattler, conda or pip")
    out = output or Path("requirements.lock.txt" if backend == "pip" else "conda-lock.yml")
    if (out.exists() or out.is_symlink()) and not force:
        msg = f"{out} already exists"
        raise UsageError(msg, hint="pass --force to overwrite it, or choose another file with -o")
    from tfgpu import lockfile

    lockfile.check_output(out)  # before solving: a device node, a missing or read-only directory
    from tfgpu.compat import load_kb

    kb = load_kb()
    if backend == "pip":
        if len(platforms) != 1:
            msg = "--backend pip locks one platform per requirements file"
            raise UsageError(msg, hint="run tfgpu lock once per --platform with its own -o")
        notes = lockfile.lock_pip(kb, tf, platforms[0], out, python=python)
    else:
        if backend == "conda":
            # Handing the solve to an installed conda-lock is not implemented yet: the embedded engine
            # solves and writes the same format.
            typer.echo("# --backend conda: solving with the embedded engine (conda-lock's format)", err=True)
        if not channels:  # --channel beats the config file, which beats the recipe's channels
            from tfgpu.backends.config import load_config

            config = load_config()
            if config.channels:
                channels = tuple(config.channels)
                typer.echo(f"# channels from {config.path}: {', '.join(channels)}", err=True)
        req = lockfile.LockRequest(tf=tf, platforms=platforms, channels=channels, python=python,
                                   virtual_packages=virtual_packages)
        lock_, notes = lockfile.lock_conda(kb, req, cache_dir=cache_dir)
        lockfile.write_lockfile(lock_, out, force=force)
        counts = ", ".join(f"{p}: {len(lock_.for_platform(p))}" for p in lock_.platforms)
        notes.append(f"packages per platform: {counts}")
    for n in notes:
        typer.echo(f"# {n}")
    typer.echo(f"wrote {out}")
    return 0


def register(app: typer.Typer) -> None:
    app.command("lock")(lock)
