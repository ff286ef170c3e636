"""`tfgpu create`: judge the target, show the plan, build the environment, then smoke-test it. The command
parses and renders; the pipeline itself is tfgpu.build.pipeline.create_environment."""

from __future__ import annotations

import sys
from typing import Any, Optional  # typer needs Optional at runtime on 3.9

import typer

from tfgpu.backends.names import CONTAINER_BACKENDS
from tfgpu.build.pipeline import check_target
from tfgpu.cli.commands.plan import CONFIG_EPILOG, IMAGE_HELP, _facts
from tfgpu.cli.options import typer_option
from tfgpu.render.plan import print_plan


def create_cmd(
    tf: Optional[str] = typer_option("tf"),
    from_lock: Optional[str] = typer_option("from_lock"),
    platform: Optional[str] = typer_option("platform"),
    backend: str = typer_option("backend"),
    name: Optional[str] = typer_option("name"),
    prefix: Optional[str] = typer_option("prefix"),
    python: Optional[str] = typer_option("python"),
    channel: Optional[list[str]] = typer_option("channel"),  # noqa: B008 - typer's idiom
    dry_run: bool = typer.Option(False, "--dry-run", help="Judge and show the plan; change nothing."),
    yes: bool = typer_option("yes"),
    force: bool = typer_option(
        "force", help="Go ahead where tfgpu would stop: replace an existing environment; build despite a blocked verdict."),
    no_smoke: bool = typer.Option(False, "--no-smoke", help="Skip the smoke test."),
    allow_cpu: bool = typer_option("allow_cpu"),
    cpu: bool = typer_option("cpu"),
    timeout: Optional[float] = typer_option("timeout", help="Give up after this many seconds: on each step."),
    facts_file: Optional[str] = typer_option("facts"),
    driver: Optional[str] = typer_option("driver"),
    gpu_cc: Optional[str] = typer_option("gpu_cc"),
    os_name: Optional[str] = typer_option("os"),
    find_links: Optional[list[str]] = typer_option("find_links"),  # noqa: B008
    index_url: Optional[str] = typer_option("index_url"),
    offline: bool = typer_option("offline"),
    image: Optional[str] = typer_option("image", help=IMAGE_HELP),
) -> int:
    """Judge the target, show the plan, build the environment, then run the smoke test in it."""
    if backend in CONTAINER_BACKENDS:
        return _create_container(tf=tf, from_lock=from_lock, backend=backend, image=image, name=name,
                                 facts=_facts(facts_file, driver, gpu_cc, os_name), dry_run=dry_run, yes=yes,
                                 no_smoke=no_smoke, allow_cpu=allow_cpu, timeout=timeout)
    if image is not None:
        from tfgpu.core.errors import UsageError

        msg = "--image needs --backend docker|podman|apptainer|container"
        raise UsageError(msg)
    return run_create(
        tf=tf, backend=backend, name=name, prefix=prefix, python=python, channels=channel, dry_run=dry_run,
        yes=yes, force=force, no_smoke=no_smoke, allow_cpu=allow_cpu, timeout=timeout, facts_file=facts_file,
        find_links=find_links, index_url=index_url, offline=offline, from_lock=from_lock, platform=platform,
        driver=driver, gpu_cc=gpu_cc, os_name=os_name, cpu=cpu,
    )


def _create_container(*, tf: str | None, from_lock: str | None, backend: str, image: str | None, name: str | None,
                      facts: dict[str, Any], dry_run: bool, yes: bool, no_smoke: bool, allow_cpu: bool,
                      timeout: float | None) -> int:
    from tfgpu.build.container import run_container_create
    from tfgpu.core.errors import UsageError
    from tfgpu.core.timeouts import check_timeout

    if tf is None or from_lock is not None:
        msg = "a container backend needs --tf (and no --from-lock)"
        raise UsageError(msg, hint="e.g. tfgpu create --tf 2.15 --backend docker")

    def confirm(question: str) -> bool:
        if not sys.stdin.isatty():
            msg = "create needs confirmation and there is no terminal to ask on"
            raise UsageError(msg, hint="pass --yes")
        from tfgpu.render import output

        return output.confirm(question, default=True)

    return run_container_create(tf=tf, backend=backend, image=image, name=name, facts=facts,
                                dry_run=dry_run, yes=yes, no_smoke=no_smoke, allow_cpu=allow_cpu,
                                timeout=check_timeout(timeout), out=_say, err=_err, confirm=confirm,
                                show_plan=print_plan)


def _say(text: str) -> None:
    from tfgpu.render import output

    output.say(text)


def _err(text: str) -> None:
    from tfgpu.render import output

    output.note(text)


def run_create(
    *, tf: str | None, backend: str = "auto", name: str | None = None, prefix: str | None = None,
    python: str | None = None, channels: list[str] | None = None, dry_run: bool = False, yes: bool = False,
    force: bool = False, no_smoke: bool = False, allow_cpu: bool = False, timeout: float | None = None,
    facts_file: str | None = None, find_links: list[str] | None = None, index_url: str | None = None,
    offline: bool = False, from_lock: str | None = None, platform: str | None = None,
    driver: str | None = None, gpu_cc: str | None = None, os_name: str | None = None, cpu: bool = False,
) -> int:
    """Parse, call tfgpu.build.pipeline.create_environment, render."""
    from tfgpu.build.pipeline import CreateRequest, create_environment, refuse_foreign_prefix

    check_target(tf, from_lock, backend=backend, python=python, channels=channels)
    from tfgpu.core.timeouts import check_timeout

    timeout = check_timeout(timeout)
    if from_lock is not None:  # a bad lockfile is exit 2 before the machine is probed
        from tfgpu.backends.lockfiles import read_lock

        read_lock(from_lock)
    refuse_foreign_prefix(prefix, force)  # a directory tfgpu did not make is refused before anything else
    request = CreateRequest(
        tf=tf, facts=_facts(facts_file, driver, gpu_cc, os_name), backend=backend, name=name, prefix=prefix,
        python=python, channels=tuple(channels or ()), dry_run=dry_run, force=force, no_smoke=no_smoke,
        allow_cpu=allow_cpu, timeout=timeout, find_links=tuple(find_links or ()), index_url=index_url,
        offline=offline, from_lock=from_lock, platform=platform, facts_from_file=facts_file is not None, cpu=cpu)
    return create_environment(request, _CreateRenderer(yes=yes)).exit_code


class _CreateRenderer:
    """How `tfgpu create` shows the pipeline (tfgpu.build.pipeline.CreateEvents): rich progress on a terminal."""

    def __init__(self, *, yes: bool) -> None:
        self.yes = yes
        self.progress: Any = None
        self.task: Any = None
        self.console: Any = None

    def note(self, text: str) -> None:
        _err(text)

    def say(self, text: str) -> None:
        _say(text)

    def planned(self, plan: Any) -> None:
        print_plan(plan)

    def confirm(self, plan: Any, replacing: str | None) -> bool:
        from tfgpu.core.errors import UsageError

        if self.yes:
            return True
        if not sys.stdin.isatty():
            msg = "create needs confirmation and there is no terminal to ask on"
            raise UsageError(msg, hint="pass --yes")
        question = f"Replace {plan.prefix} ({replacing})?" if replacing else f"Create {plan.prefix}?"
        from tfgpu.render import output

        if not output.confirm(question, default=not replacing):
            output.say("cancelled")
            return False
        return True

    def building(self, plan: Any) -> Any:
        from tfgpu.render import output

        if not output.use_style(sys.stderr):  # no live progress in a pipe or a log: plain step lines, and no
            import contextlib  # rich.progress import (~127 M instructions, ~40 ms of every create in CI; issue 32)

            return contextlib.nullcontext()
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.console = output.console(err=True)
        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}", markup=False), TimeElapsedColumn(),
                                 console=self.console, transient=False, disable=not self.console.is_terminal)
        self.task = self.progress.add_task("starting", total=len(plan.steps))
        return self.progress

    def step(self, i: int, n: int, step: Any) -> None:
        if self.progress is not None:
            self.progress.update(self.task, completed=i - 1, description=f"[{i}/{n}] {step.why[:90]}")
        if self.console is None or not self.console.is_terminal:
            _err(f"tfgpu: [{i}/{n}] {step.why}")

    def line(self, line: str) -> None:
        if self.progress is not None:
            self.progress.update(self.task, description=f"{line.strip()[:100]}")

    def built(self, plan: Any) -> None:
        if self.progress is not None:
            self.progress.update(self.task, completed=len(plan.steps), description="done")


def register(app: typer.Typer) -> None:
    app.command("create", epilog=CONFIG_EPILOG)(create_cmd)
