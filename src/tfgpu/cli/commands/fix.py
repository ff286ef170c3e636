"""`tfgpu fix`: repair the TensorFlow environment you are in (or the one named) in place -- the doctor's
environment verdict turned into a plan, shown, confirmed, run, then the smoke test in that environment."""

from __future__ import annotations

import sys
from typing import Any, Optional

import typer

from tfgpu.cli.options import typer_option
from tfgpu.core.errors import UsageError

FORMATS = ("human", "sh", "json")


def fix_cmd(
    python: Optional[str] = typer_option("python", help="Python X.Y of the environment: here, the interpreter (EXE) of "
                                                        "the environment to repair."),
    prefix: Optional[str] = typer_option("prefix", help="The environment's directory: the one to repair."),
    name: Optional[str] = typer_option("name", help="The environment's name: a tfgpu or conda environment to repair."),
    dry_run: bool = typer_option("dry_run"),
    yes: bool = typer_option("yes"),
    fmt: str = typer_option("format", default="human", help="Print the plan as a file format: human (the default), "
                                                             "sh (a script) or json."),
    undo: bool = typer.Option(False, "--undo", help="Restore the package list and files the last fix recorded."),
    break_system: bool = typer.Option(False, "--break-system-packages",
                                      help="Allow changing an externally managed Python (PEP 668), as pip's flag does."),
    timeout: Optional[float] = typer_option("timeout", help="Give up after this many seconds: on each step."),
) -> None:
    """Repair the active (or named) environment's TensorFlow in place: CUDA wheels, activation, pins."""
    raise typer.Exit(run_fix_command(python=python, prefix=prefix, name=name, dry_run=dry_run, yes=yes, fmt=fmt,
                                     undo=undo, break_system=break_system, timeout=timeout))


def run_fix_command(*, python: str | None, prefix: str | None, name: str | None, dry_run: bool, yes: bool, fmt: str,
                    undo: bool, break_system: bool, timeout: float | None) -> int:
    from tfgpu.backends.detect import detect_tools
    from tfgpu.build.envtarget import active_environment, named_environment
    from tfgpu.facts.gather import gather_facts
    from tfgpu.judge.environment import judge_environment
    from tfgpu.kb.knowledge import load_kb
    from tfgpu.kb.sonames import load_sonames
    from tfgpu.plan.envfix import plan_fix, plan_sh
    from tfgpu.render import output

    if fmt not in FORMATS:
        msg = f"--format {fmt!r} is not one of {', '.join(FORMATS)}"
        raise UsageError(msg)
    if len([x for x in (python, prefix, name) if x]) > 1:
        msg = "give only one of --python, --prefix and --name"
        raise UsageError(msg)
    target = named_environment(python=python, prefix=prefix, name=name) if (python or prefix or name) \
        else active_environment()
    facts, _ = gather_facts(environment=target)
    env = facts.get("environment")
    if not isinstance(env, dict):
        msg = f"cannot read the environment at {target['prefix']}"
        raise UsageError(msg)
    tools = detect_tools(facts)
    uv = tools.get("uv")
    if env.get("externally_managed") and not break_system and not dry_run:
        msg = f"{env['prefix']} is an externally managed Python (PEP 668): tfgpu does not change it"
        raise UsageError(msg, hint="use a venv (tfgpu create), or pass --break-system-packages as pip would need")
    if undo:
        return _undo(str(env["prefix"]), uv=uv, dry_run=dry_run, yes=yes, break_system=break_system, timeout=timeout)
    verdict = judge_environment(env, facts, load_kb(), load_sonames())
    conda = next((tools.get(t) for t in ("mamba", "micromamba", "conda") if tools.get(t)), None)
    plan = plan_fix(verdict, env, uv=uv, conda=conda, break_system=break_system)
    if fmt == "json":
        output.write_json({"environment": verdict, "plan": plan.to_json()})
    elif fmt == "sh":
        from tfgpu.render import output

        output.write_document(plan_sh(plan))
    else:
        from tfgpu.render.environment import environment_lines
        from tfgpu.render.plan import print_plan

        output.lines([((text, style),) for text, style in environment_lines({**verdict, "fix": None})],
                     one_line=True)
        print_plan(plan, verbose=True)
    if dry_run or fmt != "human" or not plan.steps:
        if not plan.steps and fmt == "human":
            output.note("nothing to repair in place" + (" (see the notes above)" if plan.notes else ""))
        return 0
    if not yes and not _confirm("Repair this environment?"):
        output.note("nothing changed")
        return 1
    return _run(plan, env, facts, uv=uv, timeout=timeout, break_system=break_system)


def _confirm(question: str) -> bool:
    from tfgpu.render import output

    if not sys.stdin.isatty():
        msg = "tfgpu fix changes an environment: confirm with --yes when there is no terminal to ask on"
        raise UsageError(msg, hint="tfgpu fix --dry-run shows the plan")
    return output.confirm(question, default=False)


def _run(plan: Any, env: dict[str, Any], facts: dict[str, Any], *, uv: str | None, timeout: float | None,
         break_system: bool) -> int:
    from tfgpu.build.envfix import run_fix
    from tfgpu.facts.gather import gather_facts
    from tfgpu.judge.environment import judge_environment
    from tfgpu.kb.knowledge import load_kb
    from tfgpu.kb.sonames import load_sonames
    from tfgpu.render import output
    from tfgpu.render.environment import environment_lines

    record = run_fix(plan, uv=uv, timeout=timeout, break_system=break_system, echo=output.note)
    output.note(f"recorded the environment before the fix: {record} (tfgpu fix --undo restores it)")
    after, _ = gather_facts(environment={"prefix": env["prefix"], "how": env.get("how"), "explicit": True})
    verdict = judge_environment(after["environment"], after, load_kb(), load_sonames())
    from tfgpu.verify.envprobe import import_check

    verdict["runtime"] = import_check(after["environment"], verdict)
    output.lines([((text, style),) for text, style in environment_lines(verdict)], one_line=True)
    left = [f for f in verdict["blockers"] if (f.get("repair") or {}).get("kind") != "none"]
    return 1 if left or (verdict["runtime"].get("import_error")) else 0


def _undo(prefix: str, *, uv: str | None, dry_run: bool, yes: bool, break_system: bool, timeout: float | None) -> int:
    from tfgpu.build.envfix import load_record, restore, undo_plan
    from tfgpu.render import output
    from tfgpu.render.plan import print_plan

    rec = load_record(prefix)
    plan = undo_plan(rec, uv=uv, break_system=break_system)
    print_plan(plan, verbose=True)
    if dry_run or not plan.steps:
        return 0
    if not yes and not _confirm("Restore this environment as recorded?"):
        return 1
    left = restore(rec, uv=uv, timeout=timeout, break_system=break_system, echo=output.note)
    if left:
        output.note("still different from the record: " + "; ".join(left))
        return 1
    output.note("the package list is exactly as recorded")
    return 0


def register(app: typer.Typer) -> None:
    app.command("fix")(fix_cmd)
