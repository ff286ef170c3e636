"""`tfgpu plan`, `tfgpu create`, `tfgpu envs`, `tfgpu remove`: build and manage TensorFlow GPU environments."""

from __future__ import annotations

import sys
from typing import Any, Optional  # typer needs Optional at runtime on 3.9

import typer

from tfgpu.options import typer_option
from tfgpu.pipeline import build_lock_plan, build_plan, check_target  # shared with scripts/verify_recipes.py

_CHANNEL_HELP = ("conda channel name or URL (repeatable). Precedence: --channel, then `channels = [...]` in the "
                 "config file ($TFGPU_CONFIG, else ~/.config/tfgpu/config.toml), then the recipe's channels. "
                 "Anaconda's defaults/anaconda channels fall under Anaconda's Terms of Service; conda-forge does not.")
_TF_HELP = "A release (2.2.0), a series (2.2) or `latest`."
_FROM_LOCK_HELP = ("Build exactly what a lockfile pins, without solving: conda-lock's format (tfgpu lock) or a "
                   "--require-hashes requirements file (tfgpu lock --backend pip). Instead of --tf.")
_CPU_HELP = ("The CPU route: tensorflow-cpu (or tensorflow where the release has no -cpu build), never "
             "[and-cuda] or nvidia-* wheels; the smoke test checks CPU ops. For a machine without a usable GPU.")
_PLATFORM_HELP = "conda platform to install from the lock (default: this machine's, e.g. linux-64)."
_CONFIG_EPILOG = (
    "Config file: $TFGPU_CONFIG, else platformdirs' user config dir (~/.config/tfgpu/config.toml on Linux). "
    "Keys: channels = [\"conda-forge\"] (conda channels; --channel beats them, they beat the recipe's) and "
    "\\[backends] prefer = \"pip\" (tried first by --backend auto)."
)


def _facts(facts_file: str | None, driver: str | None = None, gpu_cc: str | None = None,
           os_name: str | None = None) -> dict[str, Any]:
    """The facts plan and create decide on: tfgpu.doctor.gather_facts, as for every command."""
    from tfgpu.doctor import gather_facts
    from tfgpu.options import overrides

    facts, _ = gather_facts(facts_file=facts_file, overrides=overrides(driver, gpu_cc, os_name))
    return facts


def _print_plan(plan: Any) -> None:
    """The plan as text. Plain writes with a few ANSI styles on a terminal (NO_COLOR honoured) rather
    than rich: importing rich for ten lines was ~45 ms of `tfgpu plan`."""
    import os

    from tfgpu.run import quote

    color = sys.stdout.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"

    def style(text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if color else text

    bold, dim, yellow = "1", "2", "33"
    lines = [f"{style(f'TensorFlow {plan.tf}', bold)} with {style(plan.tool, bold)} ({plan.backend}), "
             f"recipe {plan.recipe_id}",
             f"  why this backend: {plan.backend_reason}",
             f"  environment: {plan.prefix}  (Python {plan.python})"]
    for i, step in enumerate(plan.steps, 1):
        lines.append(f"  {i}. {step.why}")
        if step.kind == "run":
            env = " ".join(f"{k}={v}" for k, v in step.env)
            lines.append(f"     {style('$', dim)} {(env + ' ') if env else ''}{quote(step.argv)}")
        else:
            lines.append(f"     {style('append to' if step.kind == 'append-file' else 'write', dim)} {step.path or ''}")
    lines += [f"  activation sets {k}={v}" for k, v in plan.env_vars.items()]
    lines += [f"  {style('note', yellow)}: {n}" for n in plan.notes]
    if getattr(plan, "verdict", ""):
        red, green = "31", "32"
        colour = {"ready": green, "caveats": yellow, "blocked": red}.get(plan.verdict, bold)
        lines.append(f"  verdict here: {style(plan.verdict.upper(), colour)}" + (" (CPU only)" if plan.cpu else ""))
        lines += [f"  {style('✗', red)} {b.get('summary')}" + (f" (fix: {b['fix']})" if b.get("fix") else "")
                  for b in plan.blockers]
        lines += [f"  {style('!', yellow)} {c.get('summary')}" + (f" (handled: {c['mitigated_by']})" if c.get("mitigated_by") else "")
                  for c in plan.caveats]
    sys.stdout.write("\n".join(lines) + "\n")


def plan_cmd(
    tf: Optional[str] = typer.Option(None, "--tf", help=_TF_HELP),
    from_lock: Optional[str] = typer.Option(None, "--from-lock", metavar="FILE", help=_FROM_LOCK_HELP),
    platform: Optional[str] = typer.Option(None, "--platform", help=_PLATFORM_HELP),
    backend: str = typer_option("backend"),
    name: Optional[str] = typer.Option(None, "--name", "-n", help="Environment name."),
    prefix: Optional[str] = typer.Option(None, "--prefix", "-p", help="Environment directory."),
    python: Optional[str] = typer.Option(None, "--python", help="Python X.Y for the environment."),
    channel: Optional[list[str]] = typer.Option(None, "--channel", "-c", help=_CHANNEL_HELP),  # noqa: B008
    json_out: bool = typer.Option(False, "--json", help='A versioned "tfgpu.plan/1" JSON document.'),
    fmt: Optional[str] = typer.Option(None, "--format", help="sh or environment.yml"),
    facts_file: Optional[str] = typer_option("facts"),
    driver: Optional[str] = typer_option("driver"),
    gpu_cc: Optional[str] = typer_option("gpu_cc"),
    os_name: Optional[str] = typer_option("os"),
    find_links: Optional[list[str]] = typer.Option(None, "--find-links", help="Extra wheel directory/URL for pip (repeatable)."),  # noqa: B008
    index_url: Optional[str] = typer.Option(None, "--index-url", help="Package index for pip (env TFGPU_PIP_INDEX_URL)."),
    offline: bool = typer.Option(False, "--offline", help="pip/uv must not use the network; --from-lock: "
                                                           "the package cache only."),
    cpu: bool = typer.Option(False, "--cpu", help=_CPU_HELP),
    force: bool = typer.Option(False, "--force", help="Exit 0 for a target that is blocked here (create --force builds it)."),
) -> int:
    """Print exactly what `tfgpu create` would run: argv, environment variables and why. Changes nothing.
    Exit 1 when the target is blocked here (unless --force or --cpu), as `tfgpu create` would refuse it."""
    import json

    from tfgpu.errors import UsageError
    from tfgpu.plan import render_environment_yml, render_sh

    if fmt not in (None, "sh", "environment.yml"):
        msg = f"unknown --format {fmt!r}"
        raise UsageError(msg, hint="use --format sh or --format environment.yml (or --json)")
    if json_out and fmt:
        msg = "--json and --format are exclusive"
        raise UsageError(msg, hint="pass one of them")
    check_target(tf, from_lock, backend=backend, python=python, channels=channel)
    if from_lock is not None:
        from tfgpu.backends.lock import read_lock_info

        read_lock_info(from_lock)  # a bad lockfile is exit 2 before the machine is probed
        facts = _facts(facts_file, driver, gpu_cc, os_name)
        plan = build_lock_plan(from_lock=from_lock, name=name, prefix=prefix, platform=platform,
                               facts=facts, find_links=find_links or [], index_url=index_url, offline=offline)
    else:
        assert tf is not None
        facts = _facts(facts_file, driver, gpu_cc, os_name)
        plan = build_plan(tf=tf, backend=backend, name=name, prefix=prefix, python=python, channels=channel or [],
                          facts=facts, find_links=find_links or [], index_url=index_url,
                          offline=offline, cpu=cpu, for_another_machine=fmt is not None)
    if json_out:
        from tfgpu import __version__
        from tfgpu.compat import data_version

        doc = plan.to_json()
        doc["tfgpu_version"] = __version__
        doc["data_version"] = data_version()
        typer.echo(json.dumps(doc, indent=2))
    elif fmt == "sh":
        from tfgpu import __version__

        typer.echo(render_sh(plan, header=f"generated by tfgpu {__version__}"), nl=False)
    elif fmt == "environment.yml":
        typer.echo(render_environment_yml(plan), nl=False)
    else:
        _print_plan(plan)
    if plan.verdict == "blocked" and not (force or cpu):
        alt = _alternative(facts, plan)
        _err(f"tfgpu: TensorFlow {plan.tf} is blocked here (see ✗ above); `tfgpu create` would refuse it"
             + (f"\n  instead: {alt}" if alt else "") + "\n  --force builds it anyway; --cpu plans a CPU-only environment")
        return 1
    return 0


def _alternative(facts: dict[str, Any], plan: Any) -> str:
    """The command that works here instead of a blocked plan (the doctor's recommendation)."""
    try:
        from tfgpu.pipeline import alternative

        rec = alternative(facts, plan.tf)
    except Exception:
        return ""
    return str(rec["command"]) if rec else ""


def create_cmd(
    tf: Optional[str] = typer.Option(None, "--tf", help=_TF_HELP),
    from_lock: Optional[str] = typer.Option(None, "--from-lock", metavar="FILE", help=_FROM_LOCK_HELP),
    platform: Optional[str] = typer.Option(None, "--platform", help=_PLATFORM_HELP),
    backend: str = typer_option("backend"),
    name: Optional[str] = typer.Option(None, "--name", "-n", help="Environment name."),
    prefix: Optional[str] = typer.Option(None, "--prefix", "-p", help="Environment directory."),
    python: Optional[str] = typer.Option(None, "--python", help="Python X.Y for the environment."),
    channel: Optional[list[str]] = typer.Option(None, "--channel", "-c", help=_CHANNEL_HELP),  # noqa: B008
    dry_run: bool = typer.Option(False, "--dry-run", help="Judge and show the plan; change nothing."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    force: bool = typer.Option(False, "--force", help="Replace an existing environment; build despite a blocked verdict."),
    no_smoke: bool = typer.Option(False, "--no-smoke", help="Skip the smoke test."),
    allow_cpu: bool = typer.Option(False, "--allow-cpu", help="A CPU-only smoke result is a success."),
    cpu: bool = typer.Option(False, "--cpu", help=_CPU_HELP),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Seconds each step may take."),
    facts_file: Optional[str] = typer_option("facts"),
    driver: Optional[str] = typer_option("driver"),
    gpu_cc: Optional[str] = typer_option("gpu_cc"),
    os_name: Optional[str] = typer_option("os"),
    find_links: Optional[list[str]] = typer.Option(None, "--find-links", help="Extra wheel directory/URL for pip (repeatable)."),  # noqa: B008
    index_url: Optional[str] = typer.Option(None, "--index-url", help="Package index for pip (env TFGPU_PIP_INDEX_URL)."),
    offline: bool = typer.Option(False, "--offline", help="No network: pip/uv use only the given wheels; "
                                                           "--from-lock installs from the package cache only."),
) -> int:
    """Judge the target, show the plan, build the environment, then run the smoke test in it."""
    return run_create(
        tf=tf, backend=backend, name=name, prefix=prefix, python=python, channels=channel, dry_run=dry_run,
        yes=yes, force=force, no_smoke=no_smoke, allow_cpu=allow_cpu, timeout=timeout, facts_file=facts_file,
        find_links=find_links, index_url=index_url, offline=offline, from_lock=from_lock, platform=platform,
        driver=driver, gpu_cc=gpu_cc, os_name=os_name, cpu=cpu,
    )


def _err(text: str) -> None:
    sys.stderr.write(text + "\n")


def run_create(
    *, tf: str | None, backend: str = "auto", name: str | None = None, prefix: str | None = None,
    python: str | None = None, channels: list[str] | None = None, dry_run: bool = False, yes: bool = False,
    force: bool = False, no_smoke: bool = False, allow_cpu: bool = False, timeout: float | None = None,
    facts_file: str | None = None, find_links: list[str] | None = None, index_url: str | None = None,
    offline: bool = False, from_lock: str | None = None, platform: str | None = None,
    driver: str | None = None, gpu_cc: str | None = None, os_name: str | None = None, cpu: bool = False,
) -> int:
    """Parse, call tfgpu.pipeline.create_environment, render."""
    from tfgpu.pipeline import CreateRequest, create_environment, refuse_foreign_prefix

    check_target(tf, from_lock, backend=backend, python=python, channels=channels)
    if from_lock is not None:  # a bad lockfile is exit 2 before the machine is probed
        from tfgpu.backends.lock import read_lock_info

        read_lock_info(from_lock)
    refuse_foreign_prefix(prefix, force)  # a directory tfgpu did not make is refused before anything else
    request = CreateRequest(
        tf=tf, facts=_facts(facts_file, driver, gpu_cc, os_name), backend=backend, name=name, prefix=prefix,
        python=python, channels=tuple(channels or ()), dry_run=dry_run, force=force, no_smoke=no_smoke,
        allow_cpu=allow_cpu, timeout=timeout, find_links=tuple(find_links or ()), index_url=index_url,
        offline=offline, from_lock=from_lock, platform=platform, cpu=cpu)
    return create_environment(request, _CreateRenderer(yes=yes)).exit_code


class _CreateRenderer:
    """How `tfgpu create` shows the pipeline (tfgpu.pipeline.CreateEvents): rich progress on a terminal."""

    def __init__(self, *, yes: bool) -> None:
        self.yes = yes
        self.progress: Any = None
        self.task: Any = None
        self.console: Any = None

    def note(self, text: str) -> None:
        _err(text)

    def say(self, text: str) -> None:
        typer.echo(text)

    def planned(self, plan: Any) -> None:
        _print_plan(plan)

    def confirm(self, plan: Any, replacing: str | None) -> bool:
        from tfgpu.errors import UsageError

        if self.yes:
            return True
        if not sys.stdin.isatty():
            msg = "create needs confirmation and there is no terminal to ask on"
            raise UsageError(msg, hint="pass --yes")
        question = f"Replace {plan.prefix} ({replacing})?" if replacing else f"Create {plan.prefix}?"
        if not typer.confirm(question, default=not replacing):
            typer.echo("cancelled")
            return False
        return True

    def building(self, plan: Any) -> Any:
        from rich.console import Console
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.console = Console(stderr=True, highlight=False)
        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                                 console=self.console, transient=False, disable=not self.console.is_terminal)
        self.task = self.progress.add_task("starting", total=len(plan.steps))
        return self.progress

    def step(self, i: int, n: int, step: Any) -> None:
        self.progress.update(self.task, completed=i - 1, description=f"[{i}/{n}] {step.why[:90]}")
        if not self.console.is_terminal:
            _err(f"tfgpu: [{i}/{n}] {step.why}")

    def line(self, line: str) -> None:
        self.progress.update(self.task, description=f"{line.strip()[:100]}")

    def built(self, plan: Any) -> None:
        self.progress.update(self.task, completed=len(plan.steps), description="done")


def envs_cmd(json_out: bool = typer.Option(False, "--json", help="A JSON document.")) -> int:
    """List the environments tfgpu made, with their TensorFlow and last smoke result, and any directory a
    killed `tfgpu create` left behind (with the command that puts it right)."""
    import json

    from tfgpu import envs

    items = envs.load()
    stranded = envs.stranded()
    if json_out:
        typer.echo(json.dumps({"schema": envs.REGISTRY_SCHEMA, "envs": items, "stranded": [
            {"path": str(s.path), "prefix": str(s.prefix), "kind": s.kind, "pid": s.pid, "command": s.command()}
            for s in stranded]}, indent=2))
        return 0
    for s in stranded:
        what = "the previous environment of" if s.kind == "old" else "a half-made or half-deleted copy of"
        _err(f"tfgpu: warning: {s.path} is {what} {s.prefix}, left by a killed create (pid {s.pid}); "
             f"`tfgpu create --force` or `tfgpu remove` on it puts it right, or by hand: {s.command()}")
    if not items:
        typer.echo("no environments yet: `tfgpu create --tf latest`")
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table("name", "TensorFlow", "backend", "python", "smoke", "prefix")
    for e in items:
        smoke = e.get("smoke") or {}
        mark = "-" if not smoke else ("✓ " if smoke.get("passed") else "✗ ") + str(smoke.get("mode") or "")
        table.add_row(str(e.get("name") or ""), str(e.get("tf")), f"{e.get('tool')} ({e.get('backend')})",
                      str(e.get("python")), mark, str(e.get("prefix")))
    Console(highlight=False, soft_wrap=True).print(table)
    return 0


def remove_cmd(
    name: str = typer.Argument(..., help="Name (or prefix) of an environment tfgpu made."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
) -> int:
    """Delete an environment tfgpu made (only those in its registry)."""
    from tfgpu import envs
    from tfgpu.errors import UsageError

    entry = envs.find(name)
    if entry is None:
        msg = f"{name!r} is not an environment tfgpu made"
        raise UsageError(msg, hint="`tfgpu envs` lists them")
    if not yes:
        if not sys.stdin.isatty():
            msg = "remove needs confirmation and there is no terminal to ask on"
            raise UsageError(msg, hint="pass --yes")
        if not typer.confirm(f"Delete {entry['prefix']} (TensorFlow {entry.get('tf')})?", default=False):
            typer.echo("cancelled")
            return 1
    envs.remove(name)
    typer.echo(f"removed {entry['prefix']}")
    return 0


def register(app: typer.Typer) -> None:
    app.command("plan", epilog=_CONFIG_EPILOG)(plan_cmd)
    app.command("create", epilog=_CONFIG_EPILOG)(create_cmd)
    app.command("envs")(envs_cmd)
    app.command("remove")(remove_cmd)
