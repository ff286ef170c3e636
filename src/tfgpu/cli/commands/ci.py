"""`tfgpu ci init`: write a CI job (GitHub Actions or GitLab CI) that installs tfgpu and runs `tfgpu doctor --ci`."""

from __future__ import annotations

from typing import Optional

import typer

from tfgpu.cli.options import typer_option

ci_app = typer.Typer(
    name="ci", no_args_is_help=True, add_completion=False,
    help="Continuous integration: write a job that runs the doctor on every push (tfgpu ci init).",
)


@ci_app.command("init")
def init(
    github: bool = typer.Option(False, "--github", help="Write a GitHub Actions workflow (the default)."),
    gitlab: bool = typer.Option(False, "--gitlab", help="Write a GitLab CI job."),
    tf: Optional[str] = typer_option("tf", help="TensorFlow: a release (2.2.0), a series (2.2) or `latest`: the job "
                                                "fails unless it is ready."),
    facts_file: Optional[str] = typer_option(
        "facts", help="Read the facts (or an earlier `tfgpu doctor --json` report) from this file instead of probing "
                      "this machine: the job then plans for the machine it describes, on any runner (a path in the "
                      "repository)."),
    output: Optional[str] = typer_option(
        "output", help="The file to write (default .github/workflows/tfgpu.yml or .gitlab-ci.yml; - for stdout)."),
    force: bool = typer_option("force", help="Go ahead where tfgpu would stop: replace an existing file."),
    python: str = typer_option("python", default="3.12",
                               help="Python X.Y of the environment: the job's (default 3.12)."),
    pip_spec: Optional[str] = typer.Option(
        None, "--pip-spec", metavar="SPEC",
        help="What the job installs tfgpu from (a pip requirement; default its repository until tfgpu is on PyPI)."),
) -> int:
    """Write a CI job that installs tfgpu and runs `tfgpu doctor --ci`.

    Without --facts it runs on a GPU runner and fails unless the GPU is usable (and --tf is ready there); with
    --facts it plans for the production machine that report describes, on any runner. An existing file is never
    replaced without --force."""
    from tfgpu.core.errors import UsageError
    from tfgpu.render import output as out
    from tfgpu.tools import ci
    from tfgpu.tools.fleet.engines import DEFAULT_PIP_SPEC

    if github and gitlab:
        msg = "give one of --github and --gitlab"
        raise UsageError(msg, hint="run tfgpu ci init twice to write both")
    kind = "gitlab" if gitlab else "github"
    if facts_file:
        _check_facts(facts_file)
    text = ci.WRITERS[kind](tf=tf, facts=facts_file, pip_spec=pip_spec or DEFAULT_PIP_SPEC, python=python)
    if output == "-":
        out.write_document(text)
        return 0
    path = output or ci.DEFAULT_PATHS[kind]
    _write_new(path, text, force=force, kind=kind)
    job = f"plans for the machine in {facts_file}" if facts_file else "needs a GPU runner (label gpu)"
    out.say(("wrote ", "bold"), f"{path}: a {'GitHub Actions' if kind == 'github' else 'GitLab CI'} job that installs "
            f"tfgpu and runs `tfgpu doctor --ci` ({job})")
    return 0


def _check_facts(path: str) -> None:
    """The facts file the job will read: a repository path (tfgpu.tools.ci), and readable as facts here already."""
    from tfgpu.facts.document import load_facts_file
    from tfgpu.tools.ci import check_facts_path

    check_facts_path(path)
    load_facts_file(path)


def _write_new(path: str, text: str, *, force: bool, kind: str) -> None:
    """Write ``text`` at ``path`` (its directories made), never over an existing file unless ``force``."""
    from pathlib import Path

    from tfgpu.core.errors import InputError, UsageError
    from tfgpu.core.sysio import replace_file

    target = Path(path)
    if (target.exists() or target.is_symlink()) and not force:
        hint = ("write it elsewhere and include it: -o ci/tfgpu.gitlab-ci.yml, then `include: {local: "
                "ci/tfgpu.gitlab-ci.yml}` in .gitlab-ci.yml" if kind == "gitlab" else "give another -o PATH")
        msg = f"{path} exists; not replacing it without --force"
        raise UsageError(msg, hint=hint)
    if target.is_dir():
        msg = f"{path} is a directory"
        raise UsageError(msg, hint="give a file name with -o")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        replace_file(target, text.encode("utf-8"), mode=0o644)
    except OSError as exc:
        msg = f"cannot write {path}: {exc.strerror or exc}"
        raise InputError(msg, hint="check the directory's permissions, or give another -o PATH") from None


def register(app: typer.Typer) -> None:
    app.add_typer(ci_app, name="ci")
