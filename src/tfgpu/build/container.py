"""The container backend's effects: pull the image (progress shown), run the smoke test in it, record it.

The plan is decided in tfgpu.judge.containers (pure); this module only runs its steps through tfgpu.core.process (the one
subprocess seam) and writes the registry entry that `tfgpu envs` lists.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from tfgpu.build import registry
from tfgpu.core import process as run
from tfgpu.plan.model import Plan

if TYPE_CHECKING:
    from tfgpu.verify.runner import SmokeReport


def create_container(plan: Plan, *, name: str, facts: Mapping[str, Any] | None, timeout: float | None,
                     no_smoke: bool = False, allow_cpu: bool = False,
                     echo: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Pull, then smoke-test inside the image; record the image in the registry with the smoke result.
    Returns {"entry", "smoke", "log"}. A failed pull raises StepFailed (nothing is recorded)."""
    log = _log(name, echo)
    pull, smoke = plan.steps[0], plan.steps[1]
    run.run_step(pull.argv, log=log, timeout=timeout, on_line=echo)  # docker/podman print layer progress lines
    from tfgpu.judge.containers import gpu_args_of

    entry = registry.record(name=name, prefix=plan.prefix, backend=plan.backend, tool=plan.tool, tf=plan.tf,
                        python=plan.python, recipe=plan.recipe_id, env_python=plan.env_python,
                        gpu_args=gpu_args_of(smoke.argv))
    if no_smoke:
        return {"entry": entry, "smoke": None, "log": str(log.path)}
    report = smoke_in_image(smoke.argv, entry, facts=facts, timeout=timeout or 900, log=log, echo=echo)
    doc = report.to_json(allow_cpu=allow_cpu)
    passed = record_smoke(entry, report, allow_cpu=allow_cpu)
    return {"entry": entry, "smoke": doc, "passed": passed, "log": str(log.path)}


def _log(name: str, echo: Callable[[str], None] | None) -> run.StepLog:
    from tfgpu.build.execute import log_dir

    logs = log_dir()
    logs.mkdir(parents=True, exist_ok=True)
    return run.StepLog(logs / f"container-{name}-{time.strftime('%Y%m%d-%H%M%S')}.log", echo=echo)


def smoke_in_image(argv: tuple[str, ...], entry: Mapping[str, Any], *, facts: Mapping[str, Any] | None,
                   timeout: float, log: run.StepLog, echo: Callable[[str], None] | None = None) -> SmokeReport:
    """Run the smoke step (``argv``: tfgpu.backends.runners.ContainerRunner.smoke_argv) and read its report; the
    output goes to ``log``. The one smoke runner of `create --backend docker|...` and `smoke --name NAME`."""
    from tfgpu.verify.runner import build_report

    log.write(f"+ {run.shown(argv)}")
    if echo:
        echo(f"+ {run.shown(argv)}")
    result = run.capture(argv, timeout=timeout)
    for line in (result.stdout + "\n" + result.stderr).splitlines():
        log.write(line)
    return build_report(f"python3 in {entry.get('recipe') or entry.get('prefix')}", result, facts=facts)


def record_smoke(entry: Mapping[str, Any], report: SmokeReport, *, allow_cpu: bool) -> bool:
    """Write the smoke result into the image's registry entry (what `tfgpu envs` shows); True if it passed."""
    doc = report.to_json(allow_cpu=allow_cpu)
    passed = bool(report.passed(allow_cpu))
    registry.update_smoke(str(entry["prefix"]), {"passed": passed, "allow_cpu": allow_cpu, "mode": doc.get("mode"),
                                                 "summary": doc.get("summary")})
    return passed


def smoke_entry(entry: Mapping[str, Any], *, facts: Mapping[str, Any] | None, timeout: float, allow_cpu: bool,
                benchmark: bool = False, echo: Callable[[str], None] | None = None) -> SmokeReport:
    """`tfgpu smoke --name NAME` for an image tfgpu recorded: the smoke script in the image, run by the
    runtime that made it (its runner in tfgpu.backends.runners), as `create` ran it; the result goes into the registry."""
    from tfgpu.backends.runners import CONTAINER_RUNNERS
    from tfgpu.core.errors import UsageError
    from tfgpu.verify.runner import SCRIPT

    runner = CONTAINER_RUNNERS.get(str(entry.get("backend")))
    if runner is None:
        msg = f"{entry.get('name') or entry.get('prefix')!r} was made by {entry.get('backend')!r}, not a container runtime"
        raise UsageError(msg, hint="`tfgpu envs` lists what tfgpu made")
    from tfgpu.judge.containers import recorded_gpu_args

    argv = runner.smoke_argv(str(entry["prefix"]), str(SCRIPT), *(("--benchmark",) if benchmark else ()),
                             gpu_args=recorded_gpu_args(runner.name, entry.get("gpu_args")))
    report = smoke_in_image(argv, entry, facts=facts, timeout=timeout, log=_log(str(entry.get("name") or "image"), None),
                            echo=echo)
    record_smoke(entry, report, allow_cpu=allow_cpu)
    return report
