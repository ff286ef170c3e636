"""Run a Plan safely: lock, never touch an existing environment without --force, clean up on failure.

With --force the old environment is moved aside (renamed, same filesystem) before the new one is
built at the real prefix, and deleted only after the build succeeded; on failure the partial new
one is removed and the old one renamed back. Building elsewhere and renaming the *new* one in would
break it: venv scripts and conda's prefix-replaced files embed their absolute prefix.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from tfgpu.backends.steps import Step
from tfgpu.build import registry
from tfgpu.core import process as run
from tfgpu.core.errors import Interrupted, StepFailed, TfgpuError, UsageError
from tfgpu.core.record import record
from tfgpu.plan.model import Plan

#: Output lines worth showing when a step fails (the rest is in the log).
_INTERESTING = ("error", "Error", "ERROR", "failed", "Failed", "not found", "No matching", "conflict",
                "Could not", "Cannot", "cannot", "unsatisfiable", "Because", "hint", "×")


@record
class CreateResult:
    prefix: Path
    log_path: Path
    replaced: bool
    seconds: float
    replaced_what: str | None = None  # the registry's words for the environment --force replaced
    notes: tuple[str, ...] = ()  # stranded directories of a killed create, put right first


def log_dir() -> Path:
    return registry.home() / "logs"


def interesting_lines(lines: list[str], limit: int = 12) -> list[str]:
    picked = [ln for ln in lines if any(k in ln for k in _INTERESTING)]
    return (picked or lines)[-limit:]


prefix_lock = registry.prefix_lock  # where it lives now; `remove` takes it too


def _rmtree(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path, ignore_errors=False)


def _write(step: Step, log: run.StepLog) -> None:
    assert step.path is not None
    path = Path(step.path)
    mode = "a" if step.kind == "append-file" else "w"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open(mode, encoding="utf-8", newline="") as fh:
            fh.write(step.content or "")
    except OSError as exc:  # a full disk, a read-only filesystem: a failed step, not a crash
        msg = f"cannot write {path}: {exc.strerror or exc}"
        raise StepFailed(msg) from None
    log.write(f"+ {'append to' if mode == 'a' else 'write'} {path} ({len(step.content or '')} bytes)")


#: Variables that make a Python other than the environment's run (or load another tree of packages);
#: installers and the new environment's interpreter must not see them.
_PYTHON_LEAKS = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")


def _step_env(step: Step) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _PYTHON_LEAKS}
    env.update(dict(step.env))
    return env


def run_steps(
    steps: Sequence[Step],
    *,
    log: run.StepLog,
    timeout: float | None = None,
    on_step: Callable[[int, int, Step], None] | None = None,
    on_line: Callable[[str], None] | None = None,
) -> None:
    """The step runner: each step in order, a program (``run.run_step``: echo, resolve, timeout, full log,
    its process group stopped on a signal) or a file to write. Raises on the first failure; the caller
    decides what a failure undoes (``run_plan``: the environment; ``run_plan_steps``: nothing)."""
    total = len(steps)
    for i, step in enumerate(steps, 1):
        if on_step:
            on_step(i, total, step)
        if step.kind == "run":
            run.run_step(step.argv, log=log, timeout=timeout, env=_step_env(step), on_line=on_line)
        else:
            _write(step, log)


def run_plan_steps(
    plan: Plan,
    *,
    log_name: str,
    timeout: float | None = None,
    echo: Callable[[str], None] | None = None,
    on_step: Callable[[int, int, Step], None] | None = None,
    on_line: Callable[[str], None] | None = None,
) -> Path:
    """Run a plan that builds no environment (``tfgpu lock --backend pip``: ``uv pip compile``) with the
    step runner, under the signal model of ``run_plan``; returns the log's path.

    The full output goes to ``log_dir()/LOG_NAME-STAMP-PID.log``; a directory that cannot be made costs the
    log file, not the run (StepLog keeps the tail for the error). A failure or a signal raises StepFailed or
    Interrupted naming the log; what the steps wrote is the caller's to clean up.
    """
    logs = log_dir()
    try:
        logs.mkdir(parents=True, exist_ok=True)
    except OSError:
        pass  # StepLog records why the log cannot be written; the step still runs
    log_path = logs / f"{log_name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    log = run.StepLog(log_path, echo=echo)
    log.write(f"# tfgpu: TensorFlow {plan.tf}, {plan.tool} ({plan.backend}), recipe {plan.recipe_id}")
    with run.signal_guard() as guard:
        try:
            run_steps(plan.steps, log=log, timeout=timeout, on_step=on_step, on_line=on_line)
        except (KeyboardInterrupt, Interrupted):
            guard.disarm()
            msg = f"{run.signal_name(guard.signum)} while running {plan.tool}"
            raise Interrupted(msg, hint=f"full log: {log_path}") from None
        except TfgpuError as exc:
            guard.disarm()
            if str(log_path) not in (exc.hint or ""):
                exc.hint = f"full log: {log_path}" + (f"; {exc.hint}" if exc.hint else "")
            exc.log_tail = interesting_lines(list(log.tail))  # type: ignore[attr-defined]
            raise
        guard.disarm()
    return log_path


def run_plan(
    plan: Plan,
    *,
    force: bool = False,
    timeout: float | None = None,
    echo: Callable[[str], None] | None = None,
    on_step: Callable[[int, int, Step], None] | None = None,
    on_line: Callable[[str], None] | None = None,
) -> CreateResult:
    """Build the environment a plan describes. Raises UsageError/NotReady/StepFailed/Interrupted.

    Signals (docs/reliability.md): the first SIGINT, SIGTERM or SIGHUP stops the running
    step (its whole process group) and restores the previous state; later ones are counted, never obeyed,
    until that is done. A SIGKILL leaves the old environment in ``.NAME.tfgpu-old-PID``: the next command
    that touches environments restores it (``registry.stranded``), and the installer dies with tfgpu (the
    runner's watchdog).
    """
    prefix = registry.check_prefix(plan.prefix)
    registry.load()  # a corrupt registry is found before building, not after
    logs = log_dir()
    try:
        logs.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        msg = f"cannot write tfgpu's logs in {logs}: {exc.strerror or exc}"
        raise registry.NotReadyHome(msg, hint="free some space or set TFGPU_HOME to a writable directory") from None
    stamp = time.strftime("%Y%m%d-%H%M%S")
    log_path = logs / f"create-{plan.name or prefix.name}-{stamp}-{os.getpid()}.log"
    log = run.StepLog(log_path, echo=echo)
    log.write(f"# tfgpu create: TensorFlow {plan.tf}, {plan.tool} ({plan.backend}), recipe {plan.recipe_id}")
    log.write(f"# prefix: {prefix}")
    start = time.monotonic()
    with prefix_lock(prefix), run.signal_guard() as guard:
        notes = [registry.recover(item, log.write) for item in registry.stranded([prefix])]
        aside: Path | None = None
        replaced: str | None = None
        if prefix.exists() and any(prefix.iterdir()):
            if not force:
                msg = f"{prefix} already exists"
                raise UsageError(msg, hint="pass --force to replace it (the old one is kept until the new one "
                                           "works), or choose another --name/--prefix")
            old = registry.created_by_tfgpu(prefix)
            if old is None:
                raise registry.not_created_error(prefix)
            replaced = describe_entry(old)
        elif prefix.exists():
            prefix.rmdir()  # an empty directory: installers want to create it themselves
        env_id = registry.new_env_id()
        try:
            if replaced is not None:
                with guard.hold():  # the rename and knowing about it are one step for a signal
                    moved = prefix.with_name(f".{prefix.name}.tfgpu-old-{os.getpid()}")
                    _clear_own_name(moved)
                    prefix.rename(moved)
                    aside = moved
                log.write(f"# moved the old environment ({replaced}) aside to {aside}")
            run_steps(plan.steps, log=log, timeout=timeout, on_step=on_step, on_line=on_line)
            if not plan.conda_named and not registry.is_environment(prefix):
                msg = f"the steps finished but {prefix} is not an environment"
                raise StepFailed(msg, hint=f"full log: {log_path}")
            if prefix.is_dir():
                registry.write_marker(prefix, env_id)
            guard.disarm()  # committed: from here on a signal waits until the registry names the new one
        except BaseException as exc:
            guard.disarm()  # a second Ctrl-C / TERM / HUP must not interrupt the restore
            # the old environment could not be moved aside: it is still at the prefix, and stays there
            untouched = replaced is not None and aside is None
            if not untouched:
                _cleanup(prefix, aside, log)
            tail = interesting_lines(list(log.tail))
            if isinstance(exc, (KeyboardInterrupt, Interrupted)):
                what = run.signal_name(guard.signum)
                kept = f"; the previous environment at {prefix} was kept" if aside is not None else ""
                msg = f"{what}; the partial environment {prefix} was removed{kept}"
                new: TfgpuError = Interrupted(msg, hint=f"full log: {log_path}")
            elif isinstance(exc, TfgpuError):
                new = exc
                new.hint = f"full log: {log_path}" + (f"; {exc.hint}" if exc.hint and str(log_path) not in exc.hint else "")
                if aside is not None or untouched:
                    new.message += f" (the previous environment at {prefix} was kept)"
                    new.args = (new.message,)
            elif isinstance(exc, OSError):  # a full disk or a read-only filesystem outside any step
                kept = f" (the previous environment at {prefix} was kept)" if aside is not None or untouched else ""
                new = StepFailed(f"creating {prefix} failed: {exc.strerror or exc}{kept}", hint=f"full log: {log_path}")
            else:
                raise
            new.log_path = log_path  # type: ignore[attr-defined]
            new.log_tail = tail  # type: ignore[attr-defined]
            raise new from None
        registry.record(name=plan.name, prefix=str(prefix), backend=plan.backend, tool=plan.tool, tf=plan.tf,
                    python=plan.python, recipe=plan.recipe_id, env_python=plan.env_python, env_id=env_id)
        if aside is not None:
            # one rename marks it as replaced; a kill during the delete leaves a -trash- dir, never an -old-
            trash = aside.with_name(f".{prefix.name}.tfgpu-trash-{os.getpid()}")
            _clear_own_name(trash)
            aside.rename(trash)
            _rmtree(trash)
            log.write(f"# removed the old environment {aside}")
    return CreateResult(prefix, log_path, aside is not None, time.monotonic() - start, replaced_what=replaced,
                        notes=tuple(notes))


def _clear_own_name(path: Path) -> None:
    """``path`` carries this live process's PID, so nothing of ours is there: a link or file someone put at
    that name (to make the rename fail, or redirect it) is removed (the link, never what it points to)."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        path.unlink()


def describe_entry(entry: dict[str, object]) -> str:
    """A registry entry in a few words: what `--force` replaces."""
    name = f"{entry['name']}: " if entry.get("name") else ""
    return f"{name}TensorFlow {entry.get('tf')} ({entry.get('tool')}), created {entry.get('created')}"


def _cleanup(prefix: Path, aside: Path | None, log: run.StepLog) -> None:
    """Restore first, with two renames (the partial new environment out, the old one back), then delete
    the partial one. Idempotent: what a crash part-way leaves, `registry.stranded` finds and finishes."""
    from tfgpu.backends.detect import cleanup_after_failure

    partial: Path | None = None
    try:
        if prefix.exists() or prefix.is_symlink():
            partial = prefix.with_name(f".{prefix.name}.tfgpu-partial-{os.getpid()}")
            if partial.exists():
                _rmtree(partial)
            prefix.rename(partial)
        if aside is not None and aside.exists():
            aside.rename(prefix)
            log.write(f"# restored the previous environment to {prefix}")
        if partial is not None:
            _rmtree(partial)
            log.write(f"# removed the partial environment {prefix}")
        cleanup_after_failure(prefix, log.write)  # what a killed installer left beside the prefix
    except OSError as exc:  # pragma: no cover - e.g. a file held open on Windows
        log.write(f"! cleanup failed: {exc}")
        if aside is not None and aside.exists():
            log.write(f"! the previous environment is at {aside}")


def activation_env(plan: Plan, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment variables activation would set, made concrete (for the smoke test)."""
    env = dict(os.environ if base is None else base)
    if base is None:
        # the new environment is tested as it is, not with the caller's PYTHONPATH or ~/.local packages;
        # empty means unset to Python, and survives the smoke runner merging this over os.environ
        env.update(dict.fromkeys(_PYTHON_LEAKS, ""), PYTHONNOUSERSITE="1")
    prefix = plan.prefix
    libdirs: list[str] = []
    if plan.conda_specs:
        env["CONDA_PREFIX"] = prefix
        libdirs.append(str(Path(prefix) / "lib"))
    if "LD_LIBRARY_PATH" in plan.env_vars or "CUDNN_PATH" in plan.env_vars:
        site = Path(prefix) / "lib" / f"python{plan.python}" / "site-packages"
        libdirs = sorted(str(d) for d in site.glob("nvidia/*/lib")) + libdirs
    if libdirs and plan.os != "windows":
        old = env.get("LD_LIBRARY_PATH", "")
        env["LD_LIBRARY_PATH"] = os.pathsep.join(libdirs + ([old] if old else []))
    for key, value in plan.env_vars.items():
        if key in ("LD_LIBRARY_PATH", "CUDNN_PATH"):
            continue
        env[key] = value.replace("$CONDA_PREFIX", prefix)
    return env


