"""`tfgpu plan`: print exactly what `tfgpu create` would run (argv, environment variables, why). Changes nothing.

The helpers every environment-building command shares (the facts, the plan's text) live here too."""

from __future__ import annotations

from typing import Any, Optional  # typer needs Optional at runtime on 3.9

import typer

from tfgpu.backends.names import CONTAINER_BACKENDS
from tfgpu.build.pipeline import (  # shared with scripts/verify_recipes.py
    build_container_plan,
    build_from_lock_plan,
    build_plan,
    check_container_target,
    check_target,
)
from tfgpu.cli.options import typer_option
from tfgpu.plan.request import BuildRequest
from tfgpu.render.plan import print_plan

IMAGE_HELP = ("The container image to use, instead of the one tfgpu chooses (--backend docker, podman, apptainer "
              "or container).")

CONFIG_EPILOG = (
    "Config file: $TFGPU_CONFIG, else platformdirs' user config dir (~/.config/tfgpu/config.toml on Linux). "
    "Keys: channels = [\"conda-forge\"] (conda channels; --channel beats them, they beat the recipe's) and "
    "\\[backends] prefer = \"pip\" (tried first by --backend auto)."
)


def _facts(facts_file: str | None, driver: str | None = None, gpu_cc: str | None = None,
           os_name: str | None = None) -> dict[str, Any]:
    """The facts plan and create decide on: tfgpu.facts.gather.gather_facts, as for every command."""
    from tfgpu.cli.options import overrides
    from tfgpu.facts.gather import gather_facts

    facts, _ = gather_facts(facts_file=facts_file, overrides=overrides(driver, gpu_cc, os_name))
    return facts


def plan_cmd(
    tf: Optional[str] = typer_option("tf"),
    from_lock: Optional[str] = typer_option("from_lock"),
    platform: Optional[str] = typer_option("platform"),
    backend: str = typer_option("backend"),
    name: Optional[str] = typer_option("name"),
    prefix: Optional[str] = typer_option("prefix"),
    python: Optional[str] = typer_option("python"),
    channel: Optional[list[str]] = typer_option("channel"),  # noqa: B008 - typer's idiom
    json_out: bool = typer_option("json", help="Print the versioned JSON document (tfgpu.plan/1)."),
    fmt: Optional[str] = typer_option("format", help="Print the plan as a file format: sh or environment.yml; for a "
                                                     "container backend also dockerfile or apptainer (a definition file)."),
    facts_file: Optional[str] = typer_option("facts"),
    driver: Optional[str] = typer_option("driver"),
    gpu_cc: Optional[str] = typer_option("gpu_cc"),
    os_name: Optional[str] = typer_option("os"),
    find_links: Optional[list[str]] = typer_option("find_links"),  # noqa: B008
    index_url: Optional[str] = typer_option("index_url"),
    offline: bool = typer_option("offline"),
    cpu: bool = typer_option("cpu"),
    force: bool = typer_option(
        "force", help="Go ahead where tfgpu would stop: exit 0 for a target that is blocked here (create --force "
                      "builds it)."),
    image: Optional[str] = typer_option("image", help=IMAGE_HELP),
    verbose: bool = typer_option("verbose"),
    requirements: Optional[str] = typer.Option(
        None, "--requirements", metavar="FILE",
        help="Also install this requirements.txt (--format dockerfile or apptainer)."),
) -> int:
    """Print exactly what `tfgpu create` would run: argv, environment variables and why. Changes nothing.
    Exit 1 when the target is blocked here (unless --force or --cpu), as `tfgpu create` would refuse it."""
    from tfgpu.core.errors import UsageError
    from tfgpu.render import output

    container = backend in CONTAINER_BACKENDS
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
    req = BuildRequest(tf=tf, backend=backend, name=name, prefix=prefix, python=python, channels=tuple(channel or ()),
                       find_links=tuple(find_links or ()), index_url=index_url, offline=offline, cpu=cpu,
                       from_lock=from_lock, platform=platform, image=image)
    if container:
        check_container_target(req, "plan")
        if fmt == "environment.yml":
            msg = "--format environment.yml is for conda environments"
            raise UsageError(msg, hint="use --format sh, dockerfile or apptainer with a container backend")
        facts = _facts(facts_file, driver, gpu_cc, os_name)
        plan = build_container_plan(req, facts, portable=fmt is not None)  # a file runs on another host
    check_target(req)
    if container:
        pass
    elif from_lock is not None:
        from tfgpu.backends.lockfiles import read_lock

        read_lock(from_lock)  # a bad lockfile is exit 2 before the machine is probed
        facts = _facts(facts_file, driver, gpu_cc, os_name)
        plan = build_from_lock_plan(req, facts)
    else:
        facts = _facts(facts_file, driver, gpu_cc, os_name)
        plan = build_plan(req, facts, for_another_machine=fmt is not None, facts_from_file=facts_file is not None)
    _write(plan, fmt=fmt, json_out=json_out, requirements=requirements, verbose=verbose)
    if plan.verdict == "blocked" and not (force or cpu):  # whatever the format: the same route, the same answer
        alt = _alternative(facts, tf or plan.tf, backend if tf is not None else
                           ("pip" if plan.backend == "pip" else "conda"))
        # the plan as text shows its ✗ items; a document (--json, --format) does not: name them here
        why = "see ✗ above" if not (json_out or fmt) else "; ".join(b.summary for b in plan.blockers[:2]) or "blocked"
        output.note(f"tfgpu: TensorFlow {plan.tf} is blocked here ({why}); `tfgpu create` would refuse it"
                    + (f"\n  instead: {alt}" if alt else "")
                    + "\n  --force builds it anyway; --cpu plans a CPU-only environment")
        return 1
    return 0


def _write(plan: Any, *, fmt: str | None, json_out: bool, requirements: str | None, verbose: bool) -> None:
    """The plan on stdout: its JSON document, a file format, or the plan as text."""
    from tfgpu.plan.formats import render_environment_yml, render_sh
    from tfgpu.render import output

    if json_out:
        from tfgpu import __version__
        from tfgpu.kb.queries import data_version

        doc = plan.to_json()
        doc["tfgpu_version"] = __version__
        doc["data_version"] = data_version()
        output.write_json(doc)
    elif fmt == "sh":
        from tfgpu import __version__

        output.write_document(render_sh(plan, header=f"generated by tfgpu {__version__}"))
    elif fmt == "environment.yml":
        output.write_document(render_environment_yml(plan))
    elif fmt in ("dockerfile", "apptainer"):
        from tfgpu.judge.containers import render_apptainer, render_dockerfile

        render = render_dockerfile if fmt == "dockerfile" else render_apptainer
        output.write_document(render(plan.recipe_id, tf=plan.tf, requirements=requirements))
    else:
        print_plan(plan, verbose=verbose)


def _alternative(facts: dict[str, Any], tf: str, backend: str) -> str:
    """The command that works here instead of a blocked plan: the one recommendation (tfgpu.plan.choose), as the
    doctor and `tfgpu create` print it for the same target."""
    from tfgpu.build.pipeline import alternative
    from tfgpu.core.errors import UsageError
    from tfgpu.facts.document import as_facts
    from tfgpu.judge.target import judge_target
    from tfgpu.kb.knowledge import load_kb

    try:
        verdict = judge_target(as_facts(facts), load_kb(), tf, backend=backend)
    except UsageError:
        return ""
    rec = alternative(facts, verdict, backend)
    return rec.command if rec else ""


def register(app: typer.Typer) -> None:
    app.command("plan", epilog=CONFIG_EPILOG)(plan_cmd)
