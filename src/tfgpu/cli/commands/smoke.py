"""`tfgpu smoke`: prove that TensorFlow in an environment really computes on the GPU."""

from __future__ import annotations

from typing import Any, Optional

import typer

from tfgpu.cli.options import overrides, typer_option
from tfgpu.render.smoke import render_report as render_report  # re-exported: its home was here


def smoke(
    prefix: Optional[str] = typer_option("prefix"),
    name: Optional[str] = typer_option("name", help="The environment's name: a conda environment, a tfgpu venv, or a "
                                                    "container image tfgpu recorded (run inside the image)."),
    python: Optional[str] = typer_option(
        "python", help="Python X.Y of the environment: the one to test (pythonX.Y on PATH), or an interpreter's path."),
    json_out: bool = typer_option("json", help="Print the versioned JSON document (tfgpu.smoke/1)."),
    benchmark: bool = typer.Option(False, "--benchmark", help="Also time the same matmul and conv on GPU and CPU."),
    allow_cpu: bool = typer_option(
        "allow_cpu", help="A CPU-only smoke result is a success (exit 0 on a host without a usable GPU)."),
    timeout: float = typer_option("timeout", default=600.0, min=1.0,
                                  help="Give up after this many seconds (default 600)."),
    no_probe: bool = typer_option("no_probe"),
    facts_file: Optional[str] = typer_option("facts"),
    driver: Optional[str] = typer_option("driver"),
    gpu_cc: Optional[str] = typer_option("gpu_cc"),
    os_name: Optional[str] = typer_option("os"),
) -> int:
    """Run matmul, Conv2D (forward+backward) and an XLA op on the GPU in the target environment.

    Exit 0 only if TensorFlow ran every op on the GPU (with --allow-cpu: also when no GPU is visible
    and the ops work on the CPU); 1 otherwise, with TensorFlow's log explained.
    """
    return run_smoke_command(prefix=prefix, name=name, python=python, json_out=json_out,
                             benchmark=benchmark, allow_cpu=allow_cpu, timeout=timeout, probe=not no_probe,
                             facts_file=facts_file, overrides=overrides(driver, gpu_cc, os_name))


def run_smoke_command(
    *,
    prefix: str | None = None,
    name: str | None = None,
    python: str | None = None,
    json_out: bool = False,
    benchmark: bool = False,
    allow_cpu: bool = False,
    timeout: float = 600.0,
    probe: bool = True,
    facts_file: str | None = None,
    overrides: dict[str, str | None] | None = None,
) -> int:
    from tfgpu.core.timeouts import check_timeout
    from tfgpu.render import output
    from tfgpu.verify.runner import resolve_python, run_smoke

    timeout = check_timeout(timeout) or 600.0
    image = _container_entry(name) if name is not None and prefix is None and python is None else None
    if image is not None:  # an image tfgpu recorded (create --backend docker|podman|apptainer): smoke it inside
        from tfgpu.build.container import smoke_entry

        if not json_out:
            output.note(f"tfgpu smoke: running the smoke test in {image.get('recipe')} with {image.get('backend')} "
                        f"(timeout {timeout:g} s) ...")
        facts = _this_machine(probe, facts_file, overrides, quiet=json_out)
        report = smoke_entry(image, facts=facts, timeout=timeout, allow_cpu=allow_cpu, benchmark=benchmark,
                             echo=None if json_out else output.note)
    else:
        if prefix is None and name is None and python is None:  # the environment tfgpu made last, and say which
            prefix, allow_cpu = _most_recent(allow_cpu, quiet=json_out)
        exe = resolve_python(prefix=prefix, name=name, python=python)
        if not json_out:
            output.note(f"tfgpu smoke: running the smoke test with {exe} (timeout {timeout:g} s) ...")
        facts = _this_machine(probe, facts_file, overrides, quiet=json_out)
        report = run_smoke(exe, timeout=timeout, benchmark=benchmark, facts=facts)
    if json_out:
        output.write_json(report.to_json(allow_cpu=allow_cpu))
    else:
        render_report(report, allow_cpu=allow_cpu)
    return 0 if report.passed(allow_cpu) else 1


def _this_machine(probe: bool, facts_file: str | None, overrides: dict[str, str | None] | None, *,
                  quiet: bool) -> dict[str, Any] | None:
    """The facts a smoke result is explained with: this machine as probed, because the smoke test runs
    TensorFlow here. An assumed driver, GPU or OS (--driver, --gpu-cc, --os, TFGPU_* variables) or another
    machine's --facts would be stated as this machine's ("driver 441.22 is installed" where none is): not
    used, and said so. None with --no-probe, or when the probe fails (the log is still explained)."""
    import os

    from tfgpu.facts.document import OVERRIDE_ENV, apply_overrides, load_facts_file
    from tfgpu.facts.gather import gather_facts
    from tfgpu.render import output

    given = {k: v for k, v in (overrides or {}).items() if v}
    apply_overrides({}, given)  # bad input is still exit 2, not used or not
    if facts_file:
        load_facts_file(facts_file)
    assumed = [f"--{k.replace('_', '-')} {v}" for k, v in given.items()]
    assumed += [f"--facts {facts_file}"] if facts_file else []
    assumed += [var for var in OVERRIDE_ENV.values() if os.environ.get(var)]
    if assumed and not quiet:
        output.note(f"tfgpu smoke: note: {', '.join(assumed)} not used: the smoke test runs TensorFlow on this "
                    "machine, so its result is explained with this machine's own facts")
    if not probe:
        return None
    try:
        return gather_facts(env_overrides=False)[0]
    except Exception:  # a probe bug must not hide the smoke result and TensorFlow's log
        return None


def _container_entry(name: str) -> dict[str, Any] | None:
    """The registry entry called ``name`` when it is a container image tfgpu recorded (None: anything else,
    which --name resolves among conda environments and tfgpu's venvs as before)."""
    from tfgpu.backends.names import CONTAINER_BACKENDS
    from tfgpu.build import registry

    entry = registry.find(name)
    return entry if entry is not None and entry.get("name") == name and entry.get("backend") in CONTAINER_BACKENDS \
        else None


def _most_recent(allow_cpu: bool, *, quiet: bool) -> tuple[str, bool]:
    """`tfgpu smoke` with no target: the environment tfgpu created last (a CPU-only one passes on the CPU)."""
    from tfgpu.build.userenv import most_recent
    from tfgpu.core.errors import UsageError

    entry = most_recent()
    if entry is None:
        msg = "no environment to test: tfgpu has made none here"
        raise UsageError(msg, hint="pick one with --name NAME, --prefix DIR or --python EXE, "
                                   "or make one: tfgpu create --tf 2.21 --cpu")
    if not quiet:
        from tfgpu.render import output

        output.note(f"tfgpu smoke: testing {entry.get('name') or entry['prefix']} ({entry['prefix']}), the environment "
                    "tfgpu created last; --name, --prefix or --python picks another")
    return str(entry["prefix"]), allow_cpu or entry.get("recipe") == "cpu"


def register(app: typer.Typer) -> None:
    app.command("smoke")(smoke)
