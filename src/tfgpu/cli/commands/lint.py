"""`tfgpu lint`: the GPU problems of Dockerfiles and compose files, in the doctor's check format."""

from __future__ import annotations

from typing import Any, Optional

import typer

from tfgpu.cli.options import typer_option


def lint(
    files: list[str] = typer.Argument(  # noqa: B008
        ..., metavar="FILE...", help="Dockerfiles and compose files (told apart by content)."),
    json_out: bool = typer_option("json", help="Print the versioned JSON document (tfgpu.lint/1)."),
    facts_file: Optional[str] = typer_option(
        "facts", help="Read the facts (or an earlier `tfgpu doctor --json` report) from this file instead of probing "
                      "this machine: the host the files are judged against."),
    driver: Optional[str] = typer_option("driver"),
    gpu_cc: Optional[str] = typer_option("gpu_cc"),
    os_name: Optional[str] = typer_option("os"),
    strict: bool = typer_option("strict"),
) -> int:
    """Check Dockerfiles and compose files for GPU problems: base image CUDA vs the host driver, pip-installed
    TensorFlow vs the image, two CUDAs, LD_LIBRARY_PATH, hidden GPUs, services without a GPU reservation.

    Exit 0: no ✗ finding (! warnings allowed); 1: a ✗ finding, or with --strict a warning; 2: bad usage or a
    file that cannot be read."""
    from tfgpu.cli.options import overrides

    return run_lint(files, json_out=json_out, facts_file=facts_file, strict=strict,
                    overrides=overrides(driver, gpu_cc, os_name))


def run_lint(files: list[str], *, json_out: bool = False, facts_file: str | None = None, strict: bool = False,
             overrides: dict[str, str | None] | None = None) -> int:
    """The host comes from tfgpu.facts.gather.gather_facts, as for every command: probes or ``--facts``, then the
    ``--driver``/``--gpu-cc``/``--os`` overrides and TFGPU_* variables."""
    from tfgpu.facts.gather import gather_facts
    from tfgpu.kb.knowledge import load_kb
    from tfgpu.tools.lint import exit_code, lint_paths

    facts, _ = gather_facts(facts_file=facts_file, overrides=overrides)
    doc = lint_paths(files, load_kb(), facts)
    code = exit_code(doc, strict=strict)
    doc["exit_code"] = code
    if json_out:
        from tfgpu.render import output

        output.write_json(doc)
    else:
        render(doc)
    return code


def render(doc: dict[str, Any]) -> None:

    from rich.text import Text

    from tfgpu.render import output
    from tfgpu.render.report import MARKS, STYLES

    console = output.fitted_console()  # a terminal: its width, never inside a command; a pipe: no wrapping
    host = doc.get("host") or {}
    console.print(Text(f"host driver: {host.get('driver') or 'none known'}", style="dim"))
    for f in doc["files"]:
        console.print(Text(f"\n{f['path']} ({f['kind']})", style="bold"))
        for c in f["checks"]:
            line = Text(f"  [{MARKS.get(c['status'], '?')}] ", style=STYLES.get(c["status"], ""))
            line.append(c["summary"])
            output.print_wrapped(console, line, indent="      ")
            if c.get("evidence") and c["status"] != "pass":
                output.print_wrapped(console, Text(f"      evidence: {c['evidence']}", style="dim"))
            if c.get("fix") and c["status"] not in ("pass", "skip"):
                output.print_wrapped(console, Text(f"      fix: {c['fix']}", style="cyan"))


def register(app: typer.Typer) -> None:
    app.command("lint")(lint)
