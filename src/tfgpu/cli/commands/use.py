"""`tfgpu run` and `tfgpu shell`: use an environment tfgpu made, with its activation variables."""

from __future__ import annotations

import os
from typing import Optional  # typer needs Optional at runtime on 3.9

import typer

from tfgpu.cli.options import typer_option

PREFIX_HELP = "The environment's directory (instead of NAME)."
_CONTEXT = {"allow_extra_args": True, "ignore_unknown_options": True}


def run_cmd(
    name: Optional[str] = typer.Argument(None, metavar="NAME", help="An environment tfgpu made (`tfgpu envs`)."),
    command: Optional[list[str]] = typer.Argument(None, metavar="-- CMD ...", help="The command to run in it."),  # noqa: B008
    prefix: Optional[str] = typer_option("prefix", help=PREFIX_HELP),
) -> int:
    """Run a command inside an environment tfgpu made, with its activation variables (conda's activate.d, the
    venv's activate additions such as LD_LIBRARY_PATH, TF_FORCE_GPU_ALLOW_GROWTH). Exit code: the command's.

    Example: tfgpu run tf2.21.0-cpu -- python -c 'import tensorflow as tf; print(tf.__version__)'
    """
    from tfgpu.build.userenv import command_for, find_entry
    from tfgpu.core import process as run
    from tfgpu.core.errors import UsageError

    cmd = list(command or [])
    if prefix is not None and name is not None:  # `run --prefix P -- python ...`: the first word is the command
        cmd, name = [name, *cmd], None
    if not cmd:
        msg = "no command to run"
        raise UsageError(msg, hint="tfgpu run NAME -- CMD ... (e.g. -- python train.py)")
    entry = find_entry(name, prefix)
    argv, env = command_for(entry, cmd)
    return run.run_foreground(argv, env=env)


def shell_cmd(
    name: Optional[str] = typer.Argument(None, metavar="NAME", help="An environment tfgpu made (`tfgpu envs`)."),
    prefix: Optional[str] = typer_option("prefix", help=PREFIX_HELP),
) -> int:
    """Open an interactive shell ($SHELL, else sh) inside an environment tfgpu made; `exit` leaves it. Your own
    start-up files (~/.bashrc, ~/.zshrc, fish's config) run first, the environment's activation after them, so
    a `pyenv init` or `conda init` there does not put another python in front; the prompt shows (NAME)."""
    from tfgpu.build.userenv import find_entry, open_shell
    from tfgpu.render import output

    entry = find_entry(name, prefix)
    output.note(f"tfgpu: a shell in {entry['prefix']}; `exit` leaves it")
    return open_shell(entry, os.environ.get("SHELL") or "sh")


def register(app: typer.Typer) -> None:
    app.command("run", context_settings=_CONTEXT)(run_cmd)
    app.command("shell")(shell_cmd)
