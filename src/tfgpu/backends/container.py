"""The container backend's effects: pull the image (progress shown), run the smoke test in it, record it.

The plan is decided in tfgpu.containers (pure); this module only runs its steps through tfgpu.run (the one
subprocess seam) and writes the registry entry that `tfgpu envs` lists.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from tfgpu import registry, run
from tfgpu.plan import Plan


def create_container(plan: Plan, *, name: str, facts: Mapping[str, Any] | None, timeout: float | None,
                     no_smoke: bool = False, allow_cpu: bool = False,
                     echo: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Pull, then smoke-test inside the image; record the image in the registry with the smoke result.
    Returns {"entry", "smoke", "log"}. A failed pull raises StepFailed (nothing is recorded)."""
    from tfgpu.execute import log_dir
    from tfgpu.smoke.runner import build_report

    logs = log_dir()
    logs.mkdir(parents=True, exist_ok=True)
    log = run.StepLog(logs / f"container-{name}-{time.strftime('%Y%m%d-%H%M%S')}.log", echo=echo)
    pull, smoke = plan.steps[0], plan.steps[1]
    run.run_step(pull.argv, log=log, timeout=timeout, on_line=echo)  # docker/podman print layer progress lines
    from tfgpu.containers import gpu_args_of

    entry = registry.record(name=name, prefix=plan.prefix, backend=plan.backend, tool=plan.tool, tf=plan.tf,
                        python=plan.python, recipe=plan.recipe_id, env_python=plan.env_python,
                        gpu_args=gpu_args_of(smoke.argv))
    if no_smoke:
        return {"entry": entry, "smoke": None, "log": str(log.path)}
    log.write(f"+ {run.quote(smoke.argv)}")
    if echo:
        echo(f"+ {run.quote(smoke.argv)}")
    result = run.capture(smoke.argv, timeout=timeout or 900)
    for line in (result.stdout + "\n" + result.stderr).splitlines():
        log.write(line)
    report = build_report(f"python3 in {plan.recipe_id}", result, facts=facts)
    doc = report.to_json(allow_cpu=allow_cpu)
    passed = bool(report.passed(allow_cpu))
    registry.update_smoke(plan.prefix, {"passed": passed, "allow_cpu": allow_cpu, "mode": doc.get("mode"),
                                    "summary": doc.get("summary")})
    return {"entry": entry, "smoke": doc, "passed": passed, "log": str(log.path)}


def run_container_create(*, tf: str, backend: str, image: str | None, name: str | None, facts: dict[str, Any],
                         dry_run: bool, yes: bool, no_smoke: bool, allow_cpu: bool, timeout: float | None,
                         out: Callable[[str], None], err: Callable[[str], None],
                         confirm: Callable[[str], bool] | None) -> int:
    """`tfgpu create --backend docker|podman|apptainer|container`: plan, confirm, pull, smoke, record."""
    from tfgpu.commands.plan import _print_plan
    from tfgpu.errors import NotReady
    from tfgpu.pipeline import build_container_plan
    from tfgpu.plan import check_name

    plan = build_container_plan(tf=tf, backend=backend, image=image, name=name, facts=facts)
    name = check_name(name or f"tf{plan.tf}-{plan.backend}")
    _print_plan(plan)
    if dry_run:
        out("dry run: nothing was changed")
        return 0
    if "blocked" in plan.backend_reason and not allow_cpu:
        msg = f"the container route is blocked on this machine: {'; '.join(plan.notes[:2])}"
        raise NotReady(msg, hint="fix the blockers above, or pass --allow-cpu to pull and test it anyway")
    if not yes and (confirm is None or not confirm(f"Pull {plan.recipe_id} and test it?")):
        out("cancelled")
        return 1
    done = create_container(plan, name=name, facts=facts, timeout=timeout, no_smoke=no_smoke, allow_cpu=allow_cpu,
                            echo=err)
    out(f"recorded {name}: {plan.recipe_id} ({plan.backend}); log: {done['log']}")
    if done["smoke"] is None:
        out("smoke test skipped (--no-smoke)")
        return 0
    out(f"smoke test: {done['smoke'].get('summary')}")
    for f in done["smoke"].get("findings") or []:
        if f.get("severity") in ("fatal", "error", "warning"):
            out(f"  - {f.get('meaning')}" + (f" (fix: {f.get('fix')})" if f.get("fix") else ""))
    return 0 if done["passed"] else 1
