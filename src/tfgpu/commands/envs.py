"""`tfgpu plan`, `tfgpu create`, `tfgpu envs`, `tfgpu remove`: build and manage TensorFlow GPU environments."""

from __future__ import annotations

import sys
from typing import Any, Optional  # typer needs Optional at runtime on 3.9

import typer

_BACKEND_HELP = ("auto, pip (uv or python -m venv), conda (mamba/micromamba/conda) or rattler (embedded engine); "
                 "or a GPU container image: docker, podman, apptainer, or container (whichever is set up). "
                 "auto tries the config file's \\[backends] prefer first.")
#: tfgpu.choose.CONTAINER_BACKENDS, spelled out so that importing this module stays cheap (a test keeps them equal)
_CONTAINER_BACKENDS = ("container", "docker", "podman", "apptainer")
_IMAGE_HELP = "--backend docker|podman|apptainer|container: the image to use instead of the one tfgpu chooses."
_CHANNEL_HELP = ("conda channel name or URL (repeatable). Precedence: --channel, then `channels = [...]` in the "
                 "config file ($TFGPU_CONFIG, else ~/.config/tfgpu/config.toml), then the recipe's channels. "
                 "Anaconda's defaults/anaconda channels fall under Anaconda's Terms of Service; conda-forge does not.")
_TF_HELP = "A release (2.2.0), a series (2.2) or `latest`."
_FROM_LOCK_HELP = ("Build exactly what a lockfile pins, without solving: conda-lock's format (tfgpu lock) or a "
                   "--require-hashes requirements file (tfgpu lock --backend pip). Instead of --tf.")
_PLATFORM_HELP = "conda platform to install from the lock (default: this machine's, e.g. linux-64)."
_CONFIG_EPILOG = (
    "Config file: $TFGPU_CONFIG, else platformdirs' user config dir (~/.config/tfgpu/config.toml on Linux). "
    "Keys: channels = [\"conda-forge\"] (conda channels; --channel beats them, they beat the recipe's) and "
    "\\[backends] prefer = \"pip\" (tried first by --backend auto)."
)


def _facts(facts_file: str | None) -> dict[str, Any]:
    import os

    if facts_file is not None:
        from tfgpu.facts import load_facts_file

        facts: dict[str, Any] = load_facts_file(facts_file)
    else:
        from tfgpu.probe import detect_facts

        facts = detect_facts()
    try:
        from tfgpu.facts import apply_overrides, overrides_from_env

        facts, _ = apply_overrides(facts, overrides_from_env(os.environ))
    except ImportError:  # pragma: no cover - older facts module
        pass
    return facts


def _resolve_latest(facts: dict[str, Any], kb: Any, notes: list[str]) -> str:
    try:
        from tfgpu.verdict import recommend
    except ImportError:
        from tfgpu.plan import target_os

        notes.append("the verdict engine is not available: `latest` is the newest GPU series in the knowledge base")
        return str(kb.series(target_os(facts))[0])
    rec = recommend(facts, kb)
    if rec is None:
        from tfgpu.errors import NotReady

        msg = "no TensorFlow release is ready to use a GPU on this machine"
        raise NotReady(msg, hint="run `tfgpu doctor` to see why, or name a release with --tf")
    notes.append(f"latest: TensorFlow {rec['tf']} is the newest release the verdict engine calls {rec.get('verdict', 'ready')}")
    return str(rec["tf"])


def build_plan(
    *, tf: str, backend: str, name: str | None, prefix: str | None, python: str | None,
    channels: list[str], facts: dict[str, Any], find_links: list[str], index_url: str | None, offline: bool,
) -> Any:
    """Read the config file and detect the installed tools (effects), then plan (pure)."""
    import os

    from tfgpu.backends.base import detect_conda_envs_dir, detect_tools
    from tfgpu.backends.config import load_config
    from tfgpu.compat import load_kb
    from tfgpu.envs import check_prefix, home
    from tfgpu.plan import CONDA_TOOLS, plan_environment

    kb = load_kb()
    config = load_config()
    notes: list[str] = []
    channels_source = "--channel"
    if not channels and config.channels:
        channels, channels_source = list(config.channels), config.source
    from tfgpu.safety import check_text

    for value, what in [*((c, "the channel") for c in channels), *((f, "--find-links") for f in find_links),
                        (index_url or "", "--index-url"), (os.environ.get("TFGPU_PIP_INDEX_URL", ""),
                                                           "TFGPU_PIP_INDEX_URL")]:
        check_text(value, what)
    if tf == "latest":
        tf = _resolve_latest(facts, kb, notes)
    if name is not None and prefix is not None:
        from tfgpu.errors import UsageError

        msg = "--name and --prefix are exclusive"
        raise UsageError(msg, hint="pass one of them")
    if prefix is not None:
        prefix = str(check_prefix(prefix))
    tools = detect_tools(facts)
    envs_dir = None
    if backend in ("auto", "conda") and prefix is None:
        tool = next((t for t in CONDA_TOOLS if tools.get(t)), None)
        if tool:
            envs_dir = detect_conda_envs_dir(tool, str(tools[tool]))
    index_url = index_url or os.environ.get("TFGPU_PIP_INDEX_URL") or None
    plan = plan_environment(
        kb, facts, tf=tf, backend=backend, name=name, prefix=prefix, python=python, tools=tools,
        channels=channels, home=str(home()), conda_envs_dir=envs_dir, index_url=index_url,
        find_links=find_links, offline=offline, engine_python=sys.executable,
        channels_source=channels_source, prefer=config.prefer, prefer_source=config.source,
    )
    if notes:
        from tfgpu._record import replace

        plan = replace(plan, notes=tuple(notes) + plan.notes)
    return plan


def build_lock_plan(
    *, from_lock: str, name: str | None, prefix: str | None, platform: str | None, facts: dict[str, Any],
    find_links: list[str], index_url: str | None, offline: bool,
) -> Any:
    """Read and validate the lockfile and detect tools (effects), then plan exactly its packages (pure)."""
    import os

    from tfgpu.backends.base import detect_tools
    from tfgpu.backends.lock import read_lock_info
    from tfgpu.compat import load_kb
    from tfgpu.envs import check_prefix, home
    from tfgpu.errors import UsageError
    from tfgpu.plan import plan_from_lock

    if name is not None and prefix is not None:
        msg = "--name and --prefix are exclusive"
        raise UsageError(msg, hint="pass one of them")
    lock = read_lock_info(from_lock)
    if prefix is not None:
        prefix = str(check_prefix(prefix))
    if platform is None and lock.kind == "conda":
        from tfgpu.engine import current_platform

        platform = current_platform()
    index_url = index_url or os.environ.get("TFGPU_PIP_INDEX_URL") or None
    return plan_from_lock(
        load_kb(), facts, lock, platform=platform or "", name=name, prefix=prefix, tools=detect_tools(facts),
        home=str(home()), engine_python=sys.executable, index_url=index_url, find_links=find_links, offline=offline,
    )


def _check_target(tf: str | None, from_lock: str | None, *, backend: str, python: str | None,
                  channels: list[str] | None) -> None:
    from tfgpu.errors import UsageError

    if (tf is None) == (from_lock is None):
        msg = "pass --tf VERSION or --from-lock FILE" if tf is None else "--tf and --from-lock are exclusive"
        raise UsageError(msg, hint="--tf plans a new environment; --from-lock rebuilds a locked one")
    if from_lock is not None:
        given = [o for o, bad in (("--backend", backend != "auto"), ("--python", python is not None),
                                  ("--channel", bool(channels))) if bad]
        if given:
            msg = f"{', '.join(given)} cannot be used with --from-lock"
            raise UsageError(msg, hint="the lockfile fixes the packages, their channels and Python")


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
    sys.stdout.write("\n".join(lines) + "\n")


def plan_cmd(
    tf: Optional[str] = typer.Option(None, "--tf", help=_TF_HELP),
    from_lock: Optional[str] = typer.Option(None, "--from-lock", metavar="FILE", help=_FROM_LOCK_HELP),
    platform: Optional[str] = typer.Option(None, "--platform", help=_PLATFORM_HELP),
    backend: str = typer.Option("auto", "--backend", help=_BACKEND_HELP),
    name: Optional[str] = typer.Option(None, "--name", "-n", help="Environment name."),
    prefix: Optional[str] = typer.Option(None, "--prefix", "-p", help="Environment directory."),
    python: Optional[str] = typer.Option(None, "--python", help="Python X.Y for the environment."),
    channel: Optional[list[str]] = typer.Option(None, "--channel", "-c", help=_CHANNEL_HELP),  # noqa: B008
    json_out: bool = typer.Option(False, "--json", help='A versioned "tfgpu.plan/1" JSON document.'),
    fmt: Optional[str] = typer.Option(None, "--format", help="sh or environment.yml; for a container backend also "
                                                             "dockerfile or apptainer (a definition file)"),
    facts_file: Optional[str] = typer.Option(None, "--facts", metavar="PATH", help="Read facts from a file."),
    find_links: Optional[list[str]] = typer.Option(None, "--find-links", help="Extra wheel directory/URL for pip (repeatable)."),  # noqa: B008
    index_url: Optional[str] = typer.Option(None, "--index-url", help="Package index for pip (env TFGPU_PIP_INDEX_URL)."),
    offline: bool = typer.Option(False, "--offline", help="pip/uv must not use the network; --from-lock: "
                                                           "the package cache only."),
    image: Optional[str] = typer.Option(None, "--image", metavar="REF", help=_IMAGE_HELP),
    requirements: Optional[str] = typer.Option(None, "--requirements", metavar="FILE",
                                               help="--format dockerfile|apptainer: install this requirements.txt too."),
) -> int:
    """Print exactly what `tfgpu create` would run: argv, environment variables and why. Changes nothing."""
    import json

    from tfgpu.errors import UsageError
    from tfgpu.plan import render_environment_yml, render_sh

    container = backend in _CONTAINER_BACKENDS
    formats = (None, "sh", "environment.yml", *(("dockerfile", "apptainer") if container else ()))
    if fmt not in formats:
        msg = f"unknown --format {fmt!r}" + ("" if container or fmt not in ("dockerfile", "apptainer")
                                             else " without a container backend")
        raise UsageError(msg, hint="use --format sh or --format environment.yml (or --json); dockerfile and "
                                   "apptainer need --backend docker|podman|apptainer|container")
    if json_out and fmt:
        msg = "--json and --format are exclusive"
        raise UsageError(msg, hint="pass one of them")
    if (image or requirements) and not container:
        msg = "--image and --requirements need --backend docker|podman|apptainer|container"
        raise UsageError(msg)
    if container:
        if tf is None or from_lock is not None:
            msg = "a container backend needs --tf (and no --from-lock)"
            raise UsageError(msg, hint="e.g. tfgpu plan --tf 2.15 --backend docker")
        plan = build_container_plan(tf=tf, backend=backend, image=image, name=name, facts=_facts(facts_file))
        if fmt in ("dockerfile", "apptainer"):
            from tfgpu.containers import render_apptainer, render_dockerfile

            render = render_dockerfile if fmt == "dockerfile" else render_apptainer
            typer.echo(render(plan.recipe_id, tf=plan.tf, requirements=requirements), nl=False)
            return 0
        if fmt == "environment.yml":
            msg = "--format environment.yml is for conda environments"
            raise UsageError(msg, hint="use --format sh, dockerfile or apptainer with a container backend")
    _check_target(tf, from_lock, backend=backend, python=python, channels=channel)
    if container:
        pass
    elif from_lock is not None:
        from tfgpu.backends.lock import read_lock_info

        read_lock_info(from_lock)  # a bad lockfile is exit 2 before the machine is probed
        plan = build_lock_plan(from_lock=from_lock, name=name, prefix=prefix, platform=platform,
                               facts=_facts(facts_file), find_links=find_links or [], index_url=index_url,
                               offline=offline)
    else:
        assert tf is not None
        plan = build_plan(tf=tf, backend=backend, name=name, prefix=prefix, python=python, channels=channel or [],
                          facts=_facts(facts_file), find_links=find_links or [], index_url=index_url, offline=offline)
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
    return 0


def create_cmd(
    tf: Optional[str] = typer.Option(None, "--tf", help=_TF_HELP),
    from_lock: Optional[str] = typer.Option(None, "--from-lock", metavar="FILE", help=_FROM_LOCK_HELP),
    platform: Optional[str] = typer.Option(None, "--platform", help=_PLATFORM_HELP),
    backend: str = typer.Option("auto", "--backend", help=_BACKEND_HELP),
    name: Optional[str] = typer.Option(None, "--name", "-n", help="Environment name."),
    prefix: Optional[str] = typer.Option(None, "--prefix", "-p", help="Environment directory."),
    python: Optional[str] = typer.Option(None, "--python", help="Python X.Y for the environment."),
    channel: Optional[list[str]] = typer.Option(None, "--channel", "-c", help=_CHANNEL_HELP),  # noqa: B008
    dry_run: bool = typer.Option(False, "--dry-run", help="Judge and show the plan; change nothing."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    force: bool = typer.Option(False, "--force", help="Replace an existing environment; build despite a blocked verdict."),
    no_smoke: bool = typer.Option(False, "--no-smoke", help="Skip the smoke test."),
    allow_cpu: bool = typer.Option(False, "--allow-cpu", help="A CPU-only smoke result is a success."),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Seconds each step may take."),
    facts_file: Optional[str] = typer.Option(None, "--facts", metavar="PATH", help="Read facts from a file."),
    find_links: Optional[list[str]] = typer.Option(None, "--find-links", help="Extra wheel directory/URL for pip (repeatable)."),  # noqa: B008
    index_url: Optional[str] = typer.Option(None, "--index-url", help="Package index for pip (env TFGPU_PIP_INDEX_URL)."),
    offline: bool = typer.Option(False, "--offline", help="No network: pip/uv use only the given wheels; "
                                                           "--from-lock installs from the package cache only."),
    image: Optional[str] = typer.Option(None, "--image", metavar="REF", help=_IMAGE_HELP),
) -> int:
    """Judge the target, show the plan, build the environment, then run the smoke test in it."""
    if backend in _CONTAINER_BACKENDS:
        return _create_container(tf=tf, from_lock=from_lock, backend=backend, image=image, name=name,
                                 facts_file=facts_file, dry_run=dry_run, yes=yes, no_smoke=no_smoke,
                                 allow_cpu=allow_cpu, timeout=timeout)
    if image is not None:
        from tfgpu.errors import UsageError

        msg = "--image needs --backend docker|podman|apptainer|container"
        raise UsageError(msg)
    return run_create(
        tf=tf, backend=backend, name=name, prefix=prefix, python=python, channels=channel, dry_run=dry_run,
        yes=yes, force=force, no_smoke=no_smoke, allow_cpu=allow_cpu, timeout=timeout, facts_file=facts_file,
        find_links=find_links, index_url=index_url, offline=offline, from_lock=from_lock, platform=platform,
    )


def _create_container(*, tf: str | None, from_lock: str | None, backend: str, image: str | None, name: str | None,
                      facts_file: str | None, dry_run: bool, yes: bool, no_smoke: bool, allow_cpu: bool,
                      timeout: float | None) -> int:
    from tfgpu.backends.container import run_container_create
    from tfgpu.errors import UsageError
    from tfgpu.safety import check_timeout

    if tf is None or from_lock is not None:
        msg = "a container backend needs --tf (and no --from-lock)"
        raise UsageError(msg, hint="e.g. tfgpu create --tf 2.15 --backend docker")

    def confirm(question: str) -> bool:
        if not sys.stdin.isatty():
            msg = "create needs confirmation and there is no terminal to ask on"
            raise UsageError(msg, hint="pass --yes")
        return bool(typer.confirm(question, default=True))

    return run_container_create(tf=tf, backend=backend, image=image, name=name, facts=_facts(facts_file),
                                dry_run=dry_run, yes=yes, no_smoke=no_smoke, allow_cpu=allow_cpu,
                                timeout=check_timeout(timeout), out=typer.echo, err=_err, confirm=confirm)


def build_container_plan(*, tf: str, backend: str, image: str | None, name: str | None, facts: dict[str, Any]) -> Any:
    """The container plan (tfgpu.containers.plan_container) with this installation's smoke script and the
    image cache directory (effects: where they are)."""
    from tfgpu.compat import load_kb
    from tfgpu.containers import plan_container
    from tfgpu.envs import home
    from tfgpu.smoke.runner import SCRIPT

    return plan_container(load_kb(), facts, tf, backend=backend, image_ref=image, smoke_script=str(SCRIPT),
                          cache_dir=str(home() / "images"), name=name)


def without_programs(facts: dict[str, Any]) -> dict[str, Any]:
    """Facts with the paths of programs removed (interpreters, conda): what is kept is their versions
    and kinds, which this machine's PATH then resolves (`pythonX.Y`, `conda`)."""
    out = dict(facts)
    py = facts.get("python")
    if isinstance(py, dict):
        out["python"] = {**py, "interpreters": [
            {k: v for k, v in it.items() if k != "path"} for it in py.get("interpreters") or [] if isinstance(it, dict)]}
        out["python"].pop("executable", None)
    conda = facts.get("conda")
    if isinstance(conda, dict):
        out["conda"] = {k: v for k, v in conda.items() if k not in ("path", "root", "exe")}
    return out


def _err(text: str) -> None:
    sys.stderr.write(text + "\n")


def run_create(
    *, tf: str | None, backend: str = "auto", name: str | None = None, prefix: str | None = None,
    python: str | None = None, channels: list[str] | None = None, dry_run: bool = False, yes: bool = False,
    force: bool = False, no_smoke: bool = False, allow_cpu: bool = False, timeout: float | None = None,
    facts_file: str | None = None, find_links: list[str] | None = None, index_url: str | None = None,
    offline: bool = False, from_lock: str | None = None, platform: str | None = None,
) -> int:
    from tfgpu.errors import NotReady, TfgpuError, UsageError

    _check_target(tf, from_lock, backend=backend, python=python, channels=channels)
    from tfgpu.safety import check_timeout

    timeout = check_timeout(timeout)
    if from_lock is not None:  # a bad lockfile is exit 2 before the machine is probed
        from tfgpu.backends.lock import read_lock_info

        read_lock_info(from_lock)
    if prefix is not None and force:  # a directory tfgpu did not make is refused before anything else
        from tfgpu.envs import check_prefix

        _what_force_replaces(str(check_prefix(prefix)), force)
    facts = _facts(facts_file)
    # facts from a file describe someone else's machine: judge with them, but never run a program
    # (an interpreter, a conda) whose path came from the file
    build_facts = facts if facts_file is None else without_programs(facts)
    lock_plan: Any = None
    if from_lock is not None:  # validate the lockfile first: a bad one is exit 2 before anything else
        lock_plan = build_lock_plan(from_lock=from_lock, name=name, prefix=prefix, platform=platform, facts=build_facts,
                                    find_links=find_links or [], index_url=index_url, offline=offline)
        tf = lock_plan.tf
    assert tf is not None
    # 1. judge
    verdict: dict[str, Any] | None = None
    try:
        from tfgpu.compat import load_kb
        from tfgpu.verdict import judge_target
    except ImportError:
        _err("tfgpu: note: the verdict engine is not available; skipping the pre-check")
    else:
        try:
            # a lock fixes the backend: judge the conda (rattler) or pip route it takes
            verdict = judge_target(facts, load_kb(), tf, backend=lock_plan.backend if lock_plan is not None else backend)
        except UsageError:
            if lock_plan is None:
                raise
            _err(f"tfgpu: note: TensorFlow {tf} from the lock is not in the knowledge base; no pre-check")
    if verdict is not None and verdict.get("verdict") == "blocked":
        reasons = "; ".join(f"{b.get('summary')}" + (f" (fix: {b['fix']})" if b.get("fix") else "")
                            for b in verdict.get("blockers") or [])
        if not (force or allow_cpu):
            msg = f"TensorFlow {verdict.get('tf', tf)} is blocked on this machine: {reasons or 'see tfgpu doctor'}"
            raise NotReady(msg, hint="fix the blockers, pass --allow-cpu to build a CPU-only environment, "
                                     "or --force to build it anyway")
        why = "--force" if force else "--allow-cpu: the smoke test will accept a CPU-only result"
        _err(f"tfgpu: warning: TensorFlow will not use a GPU here ({reasons}); building anyway ({why})")
    if verdict is not None and verdict.get("tf") and tf == "latest":
        tf = str(verdict["tf"])
    if lock_plan is not None:
        plan = lock_plan
    else:
        plan = build_plan(tf=tf, backend=backend, name=name, prefix=prefix, python=python, channels=channels or [],
                          facts=build_facts, find_links=find_links or [], index_url=index_url, offline=offline)
    _print_plan(plan)
    for c in (verdict or {}).get("caveats") or []:
        _err(f"tfgpu: caveat: {c.get('summary') if isinstance(c, dict) else c}")
    if dry_run:
        typer.echo("dry run: nothing was changed")
        return 0
    replacing = _what_force_replaces(plan.prefix, force)
    if replacing:
        _err(f"tfgpu: --force replaces {plan.prefix} ({replacing}); it is kept until the new one works")
    if not yes:
        if not sys.stdin.isatty():
            msg = "create needs confirmation and there is no terminal to ask on"
            raise UsageError(msg, hint="pass --yes")
        question = f"Replace {plan.prefix} ({replacing})?" if replacing else f"Create {plan.prefix}?"
        if not typer.confirm(question, default=not replacing):
            typer.echo("cancelled")
            return 1

    # 2. build
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from tfgpu.create import run_plan

    con = Console(stderr=True, highlight=False)
    try:
        with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                      console=con, transient=False, disable=not con.is_terminal) as progress:
            task = progress.add_task("starting", total=len(plan.steps))

            def on_step(i: int, n: int, step: Any) -> None:
                progress.update(task, completed=i - 1, description=f"[{i}/{n}] {step.why[:90]}")
                if not con.is_terminal:
                    _err(f"tfgpu: [{i}/{n}] {step.why}")

            def on_line(line: str) -> None:
                progress.update(task, description=f"{line.strip()[:100]}")

            result = run_plan(plan, force=force, timeout=timeout, on_step=on_step, on_line=on_line)
            progress.update(task, completed=len(plan.steps), description="done")
    except TfgpuError as exc:
        tail = getattr(exc, "log_tail", None)
        if tail:
            _err("tfgpu: last lines of the log:")
            for line in tail:
                _err(f"  | {line}")
        raise
    for note in result.notes:
        _err(f"tfgpu: note: {note}")
    replaced = f"; replaced {result.replaced_what}" if result.replaced_what else ""
    typer.echo(f"created {result.prefix} in {result.seconds:.0f} s{replaced} (log: {result.log_path})")

    # 3. smoke
    if no_smoke:
        typer.echo("smoke test skipped (--no-smoke)")
        return 0
    from tfgpu import envs
    from tfgpu.create import activation_env
    from tfgpu.smoke.runner import run_smoke

    report = run_smoke(plan.env_python, timeout=timeout or 600, env=activation_env(plan), facts=facts)
    passed = bool(report.passed(allow_cpu))
    doc = report.to_json(allow_cpu=allow_cpu)
    envs.update_smoke(str(result.prefix), {"passed": passed, "allow_cpu": allow_cpu, "mode": doc.get("mode"),
                                           "summary": doc.get("summary")})
    typer.echo(f"smoke test: {doc.get('summary')}")
    for f in doc.get("findings") or []:
        if f.get("severity") in ("fatal", "error", "warning"):
            typer.echo(f"  - {f.get('meaning')}" + (f" (fix: {f.get('fix')})" if f.get("fix") else ""))
    if passed:
        return 0
    if doc.get("mode") == "cpu" and not allow_cpu:
        _err("tfgpu: the environment works but TensorFlow used no GPU here; pass --allow-cpu to accept that")
    return 1


def _what_force_replaces(prefix: str, force: bool) -> str | None:
    """What `create --force` would replace at ``prefix`` (None: nothing there); refuses, before any
    prompt, a directory tfgpu did not make."""
    from pathlib import Path

    from tfgpu import envs
    from tfgpu.create import describe_entry

    path = Path(prefix)
    try:
        occupied = path.is_dir() and any(path.iterdir())
    except OSError:
        return None
    if not (force and occupied):
        return None
    with envs.prefix_lock(path):  # another tfgpu building it is "being created", not "not tfgpu's"
        entry = envs.created_by_tfgpu(path)
        if entry is None and not envs.stranded([path]):
            raise envs.not_created_error(path)
    return describe_entry(entry) if entry is not None else "the environment a killed create left"


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
