"""`tfgpu envs` and `tfgpu remove`: list and delete the environments tfgpu made (its registry: tfgpu.build.registry)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from tfgpu.cli.options import typer_option


def _err(text: str) -> None:
    from tfgpu.render import output

    output.note(text)


def envs_cmd(json_out: bool = typer_option("json", help="Print the versioned JSON document (tfgpu.envs/1).")) -> int:
    """List the environments tfgpu made, with their TensorFlow and last smoke result, and any directory a
    killed `tfgpu create` left behind (with the command that puts it right)."""
    from tfgpu.backends.names import CONTAINER_BACKENDS
    from tfgpu.build import registry
    from tfgpu.render import output

    items = [dict(e, missing=e.get("backend") not in CONTAINER_BACKENDS and not Path(str(e.get("prefix"))).is_dir())
             for e in registry.load()]
    stranded = registry.stranded()
    if json_out:
        output.write_json({"schema": registry.REGISTRY_SCHEMA, "envs": items, "stranded": [
            {"path": str(s.path), "prefix": str(s.prefix), "kind": s.kind, "pid": s.pid, "command": s.command()}
            for s in stranded]})
        return 0
    for s in stranded:
        what = "the previous environment of" if s.kind == "old" else "a half-made or half-deleted copy of"
        _err(f"tfgpu: warning: {s.path} is {what} {s.prefix}, left by a killed create (pid {s.pid}); "
             f"`tfgpu create --force` or `tfgpu remove` on it puts it right, or by hand: {s.command()}")
    if not items:
        output.say("no environments yet: `tfgpu doctor` recommends one to create")
        return 0
    from rich.table import Table

    table = Table("name", "TensorFlow", "backend", "python", "smoke", "prefix")
    for e in items:
        smoke = e.get("smoke") or {}
        mark = "-" if not smoke else ("✓ " if smoke.get("passed") else "✗ ") + str(smoke.get("mode") or "")
        table.add_row(str(e.get("name") or ""), str(e.get("tf")), f"{e.get('tool')} ({e.get('backend')})",
                      str(e.get("python")), mark, str(e.get("prefix")) + ("  (missing: the directory is gone)"
                                                                           if e["missing"] else ""))
    output.console().print(table)
    gone = [str(e.get("name") or e.get("prefix")) for e in items if e["missing"]]
    if gone:
        _err(f"tfgpu: {len(gone)} environment(s) whose directory is gone; `tfgpu remove {gone[0]}` forgets "
             + ("it" if len(gone) == 1 else "one"))
    return 0


def remove_cmd(
    name: str = typer.Argument(..., metavar="NAME", help="The name (or directory) of an environment tfgpu made."),
    yes: bool = typer_option("yes"),
) -> int:
    """Delete an environment tfgpu made (only those in its registry)."""
    from tfgpu.build import registry
    from tfgpu.core.errors import UsageError
    from tfgpu.render import output

    entry = registry.find(name)
    if entry is None:
        msg = f"{name!r} is not an environment tfgpu made"
        raise UsageError(msg, hint="`tfgpu envs` lists them")
    from tfgpu.backends.names import CONTAINER_BACKENDS

    if entry.get("backend") not in CONTAINER_BACKENDS and not Path(str(entry["prefix"])).exists():
        registry.remove(name)  # nothing on disk to lose: no confirmation needed
        output.say(f"forgot the registry entry of {entry.get('name') or entry['prefix']}; nothing was on disk "
                   f"({entry['prefix']} was already gone)")
        return 0
    if not yes:
        if not sys.stdin.isatty():
            msg = "remove needs confirmation and there is no terminal to ask on"
            raise UsageError(msg, hint="pass --yes")
        if not output.confirm(f"Delete {entry['prefix']} (TensorFlow {entry.get('tf')})?", default=False):
            output.say("cancelled")
            return 1
    registry.remove(name)
    output.say(f"removed {entry['prefix']}")
    return 0


def register(app: typer.Typer) -> None:
    app.command("envs")(envs_cmd)
    app.command("remove")(remove_cmd)
