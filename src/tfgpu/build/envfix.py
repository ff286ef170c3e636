"""`tfgpu fix` acts: record what an environment holds before changing it, run the repair plan with the step
runner, and put the environment back (`tfgpu fix --undo`, and at once on a failure or Ctrl-C).

The record is the environment's package list (every distribution and its version, read from its *.dist-info)
and the text of each file the plan writes to; it lives in $TFGPU_HOME/fix/, one file per environment, written
before the first step runs. Undo removes what the record lacks, installs the exact versions it names (without
dependencies), and writes the recorded files back, then compares the package list with the record."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tfgpu.backends import pip as pip_backend
from tfgpu.backends.steps import Step
from tfgpu.build import registry
from tfgpu.build.execute import run_plan_steps
from tfgpu.core import process as run
from tfgpu.core.errors import Interrupted, TfgpuError, UsageError
from tfgpu.facts.environment import read_distributions, site_packages
from tfgpu.plan.model import Plan

RECORD_SCHEMA = "tfgpu.fix-record/1"


def record_path(prefix: str) -> Path:
    key = hashlib.sha256(str(Path(prefix).resolve()).encode()).hexdigest()[:16]
    return registry.home() / "fix" / f"{key}.json"


def packages(prefix: str) -> dict[str, str]:
    """name -> version of every distribution installed in the environment."""
    return read_distributions(site_packages(prefix))[0]


def take_record(plan: Plan) -> dict[str, Any]:
    """What the environment holds now, and the current text of every file the plan writes (None: absent)."""
    files: dict[str, str | None] = {}
    for step in plan.steps:
        if step.kind != "run" and step.path:
            p = Path(step.path)
            files[step.path] = p.read_text(encoding="utf-8") if p.is_file() else None
    return {"schema": RECORD_SCHEMA, "prefix": plan.prefix, "python": plan.env_python, "taken": time.time(),
            "packages": packages(plan.prefix), "files": files}


def save_record(rec: Mapping[str, Any]) -> Path:
    path = record_path(str(rec["prefix"]))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{time.time_ns()}.tmp")
    tmp.write_text(json.dumps(rec, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def load_record(prefix: str) -> dict[str, Any]:
    path = record_path(prefix)
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        msg = f"no record of a `tfgpu fix` of {prefix}"
        raise UsageError(msg, hint="`tfgpu fix --undo` restores only what a fix recorded before it changed anything") from None
    if not isinstance(rec, dict) or rec.get("schema") != RECORD_SCHEMA or not isinstance(rec.get("packages"), dict):
        msg = f"{path} is not a tfgpu fix record"
        raise UsageError(msg, hint="delete it; nothing can be restored from it")
    return rec


def undo_plan(rec: Mapping[str, Any], *, uv: str | None, break_system: bool = False) -> Plan:
    """The steps that bring the environment back to the record: pure given the record and the current list."""
    prefix, exe = str(rec["prefix"]), str(rec["python"])
    now = packages(prefix)
    want: Mapping[str, str] = rec["packages"]
    extra = ["--break-system-packages"] if break_system else []
    steps: list[Step] = []
    remove = sorted(n for n in now if n not in want)
    if remove:
        argv = (uv, "pip", "uninstall", "--python", exe, *extra, *remove) if uv else (
            exe, "-m", "pip", "uninstall", "-y", *extra, *remove)
        steps.append(Step(tuple(argv), f"remove what the fix added: {', '.join(remove)}"))
    back = sorted(f"{n}=={v}" for n, v in want.items() if now.get(n) != v)
    if back:
        steps.append(pip_backend.pip_install_step(exe, [*extra, "--no-deps", *back], uv=uv,
                                                  why=f"put back the recorded versions: {', '.join(back)}"))
    for path, text in (rec.get("files") or {}).items():
        if text is None:
            steps.append(Step(("rm", "-f", path), f"remove {path}, which the fix created"))
        else:
            steps.append(Step((), f"restore {path} as recorded", kind="write-file", path=path, content=text))
    return Plan(tf="", backend="pip", backend_reason=f"tfgpu fix --undo: restore {prefix} as recorded",
                prefix=prefix, name=None, python="", steps=tuple(steps), recipe_id="fix-undo",
                tool="uv" if uv else "pip", env_python=exe)


def run_fix(plan: Plan, *, uv: str | None, timeout: float | None = None, break_system: bool = False,
            echo: Callable[[str], None] | None = None) -> Path:
    """Record, then run the plan; on a failed step or a signal, restore the record before raising."""
    rec = take_record(plan)
    path = save_record(rec)
    # Between the run's signal guard and the restore's, a further signal is counted here, not acted on; the restore
    # itself runs shielded: a second Ctrl-C (or SIGTERM) cannot leave the environment half put back.
    with run.signal_guard() as outer:
        outer.disarm()
        try:
            run_plan_steps(plan, log_name="fix", timeout=timeout, echo=echo)
        except (TfgpuError, KeyboardInterrupt) as exc:
            restore(rec, uv=uv, timeout=timeout, break_system=break_system, echo=echo, shielded=True)
            if isinstance(exc, KeyboardInterrupt):
                msg = "interrupted; the environment was restored as recorded"
                raise Interrupted(msg) from None
            exc.hint = ((exc.hint + "; ") if exc.hint else "") + "the environment was restored as recorded"
            raise
    return path


def restore(rec: Mapping[str, Any], *, uv: str | None, timeout: float | None = None, break_system: bool = False,
            echo: Callable[[str], None] | None = None, shielded: bool = False) -> list[str]:
    """Undo: run the undo plan, then return the differences that remain (empty: exactly as recorded).
    ``shielded``: signals are counted, not acted on (the restore after an interrupted fix)."""
    plan = undo_plan(rec, uv=uv, break_system=break_system)
    if plan.steps:
        run_plan_steps(plan, log_name="fix-undo", timeout=timeout, echo=echo, shielded=shielded)
    now = packages(str(rec["prefix"]))
    want: Mapping[str, str] = rec["packages"]
    return sorted({f"{n}: {want.get(n)} -> {now.get(n)}" for n in set(now) | set(want) if now.get(n) != want.get(n)})
