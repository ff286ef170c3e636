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
    from tfgpu.build.asides import stranded as find_stranded
    from tfgpu.render import output

    items = [dict(e, missing=e.get("backend") not in CONTAINER_BACKENDS and not _is_dir(str(e.get("prefix"))))
             for e in registry.load()]
    found = find_stranded()
    # an unfinished new environment at a prefix whose old one waits aside: restoring the old one (its command)
    # puts both right, so it is one thing to show
    restorable = {s.prefix for s in found if s.kind == "old" and not s.blocked}
    stranded = [s for s in found if not (s.path == s.prefix and s.prefix in restorable)]
    if json_out:
        output.write_json({"schema": registry.REGISTRY_SCHEMA, "envs": items, "stranded": [
            {"path": str(s.path), "prefix": str(s.prefix), "kind": s.kind, "pid": s.pid, "command": s.command()}
            for s in stranded]})
        return 0
    for s in stranded:
        fix = (f"{s.prefix} holds something tfgpu did not make: move it away first" if s.blocked
               else "`tfgpu create --force` or `tfgpu remove` on it puts it right")
        _err(f"tfgpu: warning: {s.path} is {s.describe()}, left by a killed tfgpu (pid {s.pid}); {fix}, "
             f"or by hand: {s.command()}")
    if not items:
        output.say("no environments yet: `tfgpu doctor` recommends one to create")
        return 0
    from rich.table import Table

    table = Table("name", "TensorFlow", "backend", "python", "smoke", "prefix")
    for e in items:
        mark = _smoke_mark(e.get("smoke"))
        table.add_row(str(e.get("name") or ""), str(e.get("tf")), f"{e.get('tool')} ({e.get('backend')})",
                      str(e.get("python")), mark, str(e.get("prefix")) + ("  (missing: the directory is gone)"
                                                                           if e["missing"] else ""))
    output.console().print(table)
    gone = [str(e.get("name") or e.get("prefix")) for e in items if e["missing"]]
    if gone:
        _err(f"tfgpu: {len(gone)} environment(s) whose directory is gone; `tfgpu remove {gone[0]}` forgets "
             + ("it" if len(gone) == 1 else "one"))
    return 0


def _is_dir(prefix: str) -> bool:
    try:
        return Path(prefix).is_dir()
    except (OSError, ValueError):  # a name longer than the filesystem allows, a NUL: not a directory here
        return False


def _smoke_mark(smoke: object) -> str:
    """The smoke column: ✓/✗ and the mode from the recorded result; a value of another shape (a hand edit, an
    older tfgpu) shown as it is."""
    if not smoke:
        return "-"
    if not isinstance(smoke, dict):
        from tfgpu.core.errors import clip_words

        return f"? {clip_words(str(smoke), 40)}"
    return ("✓ " if smoke.get("passed") is True else "✗ ") + str(smoke.get("mode") or "")


def remove_cmd(
    name: str = typer.Argument(..., metavar="NAME", help="The name (or directory) of an environment tfgpu made."),
    yes: bool = typer_option("yes"),
) -> int:
    """Delete an environment tfgpu made (only those in its registry), listing exactly what is deleted and
    asking first unless --yes."""
    from tfgpu.build.asides import remove_environment
    from tfgpu.core.errors import UsageError
    from tfgpu.render import output

    def confirm(entry: dict[str, object], paths: list[Path]) -> bool:
        listed = ", ".join(str(p) for p in paths)
        if yes:
            return True
        if not sys.stdin.isatty():
            msg = f"remove needs confirmation and there is no terminal to ask on (it would delete: {listed})"
            raise UsageError(msg, hint="pass --yes")
        _err(f"tfgpu: remove {entry.get('name') or entry['prefix']} (TensorFlow {entry.get('tf')}) deletes:")
        for p in paths:
            _err(f"  {p}")
        return output.confirm("Delete these?", default=False)

    done = remove_environment(name, confirm)
    if done.cancelled:
        output.say("cancelled")
        return 1
    what = done.entry.get("name") or done.entry["prefix"]
    if not done.deleted:
        output.say(f"forgot the registry entry of {what}; nothing was on disk ({done.entry['prefix']} was already gone)")
        return 0
    for p in done.deleted:
        output.say(f"removed {p}")
    return 0


def register(app: typer.Typer) -> None:
    app.command("envs")(envs_cmd)
    app.command("remove")(remove_cmd)
