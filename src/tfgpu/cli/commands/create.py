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
from tfgpu.plan.request import BuildRequest
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
    dry_run: bool = typer_option("dry_run"),
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
    verbose: bool = typer_option("verbose"),
) -> int:
    """Judge the target, show the plan, build the environment, then run the smoke test in it."""
    from tfgpu.build.pipeline import (
        CreateRequest,
        check_container_target,
        create_environment,
        refuse_foreign_prefix,
    )
    from tfgpu.core.timeouts import check_timeout

    req = BuildRequest(tf=tf, backend=backend, name=name, prefix=prefix, python=python, channels=tuple(channel or ()),
                       find_links=tuple(find_links or ()), index_url=index_url, offline=offline, cpu=cpu,
                       from_lock=from_lock, platform=platform, image=image)
    container = backend in CONTAINER_BACKENDS
    if container:
        check_container_target(req, "create")
    else:
        check_target(req)
    timeout = check_timeout(timeout)
    if from_lock is not None and not container:  # a bad lockfile is exit 2 before the machine is probed
        from tfgpu.backends.lockfiles import read_lock

        read_lock(from_lock)
    if not container:
        refuse_foreign_prefix(prefix, force)  # a directory tfgpu did not make is refused before anything else
    request = CreateRequest(build=req, facts=_facts(facts_file, driver, gpu_cc, os_name), dry_run=dry_run,
                            force=force, no_smoke=no_smoke, allow_cpu=allow_cpu, timeout=timeout,
                            facts_from_file=facts_file is not None)
    return create_environment(request, _CreateRenderer(yes=yes, verbose=verbose)).exit_code


def _say(text: str) -> None:
    from tfgpu.render import output

    output.say(text)


def _err(text: str) -> None:
    from tfgpu.render import output

    output.note(text)


class _CreateRenderer:
    """How `tfgpu create` shows the pipeline (tfgpu.build.pipeline.CreateEvents): rich progress on a terminal."""

    def __init__(self, *, yes: bool, verbose: bool = False) -> None:
        self.yes = yes
        self.verbose = verbose
        self.progress: Any = None
        self.task: Any = None
        self.console: Any = None

    def note(self, text: str) -> None:
        _err(text)

    def say(self, text: str) -> None:
        _say(text)

    def planned(self, plan: Any) -> None:
        print_plan(plan, verbose=self.verbose)

    def confirm(self, plan: Any, replacing: str | None) -> bool:
        from tfgpu.core.errors import UsageError

        if self.yes:
            return True
        if not sys.stdin.isatty():
            msg = "create needs confirmation and there is no terminal to ask on"
            raise UsageError(msg, hint="pass --yes")
        if plan.backend in CONTAINER_BACKENDS:
            question = f"Pull {plan.recipe_id} and test it?"
        else:
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
