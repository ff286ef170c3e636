"""`tfgpu explain`: list the known problems in a TensorFlow / CUDA / NVIDIA log, most important first."""

from __future__ import annotations

from typing import Optional

import typer

from tfgpu.cli.options import overrides, typer_option
from tfgpu.facts.gather import machine_facts as machine_facts  # re-exported: smoke reads them the same way
from tfgpu.render.findings import render_findings


def explain(
    logfile: str = typer.Argument("-", metavar="[LOGFILE | -]", help="The log to read; - (default) reads stdin."),
    json_out: bool = typer_option("json", help="Print the versioned JSON document (tfgpu.explain/1)."),
    facts_file: Optional[str] = typer_option(
        "facts", help="Read the facts (or an earlier `tfgpu doctor --json` report) from this file instead of probing "
                      "this machine: those of the machine the log came from, to name its CUDA and cuDNN."),
    driver: Optional[str] = typer_option("driver"),
    gpu_cc: Optional[str] = typer_option("gpu_cc"),
    os_name: Optional[str] = typer_option("os"),
    no_probe: bool = typer_option("no_probe"),
    redact_out: bool = typer_option(
        "redact", help="Remove user names, the host name and tokens from the output (logs quote paths and environment)."),
    verbose: bool = typer_option(
        "verbose", help="Show everything: every line of each problem, its whole cause and the source of the knowledge."),
) -> int:
    """Explain the errors in a TensorFlow / CUDA / NVIDIA log: meaning, likely cause, fix."""
    return run_explain(logfile, json_out=json_out, facts_file=facts_file, probe=not no_probe, redact_out=redact_out,
                       overrides=overrides(driver, gpu_cc, os_name), verbose=verbose)


def run_explain(logfile: str, *, json_out: bool, facts_file: str | None = None, probe: bool = True,
                redact_out: bool = False, overrides: dict[str, str | None] | None = None, verbose: bool = False) -> int:
    import sys

    from tfgpu.core.errors import UsageError
    from tfgpu.core.record import replace
    from tfgpu.tools.explain import explain_file

    if logfile == "-" and sys.stdin is None:  # `tfgpu explain - <&-`
        msg = "no log given and standard input is closed"
        raise UsageError(msg, hint="tfgpu explain LOGFILE, or: python train.py 2>&1 | tfgpu explain -")
    if logfile == "-" and sys.stdin is not None and sys.stdin.isatty():
        msg = "no log given and standard input is a terminal"
        raise UsageError(msg, hint="tfgpu explain LOGFILE, or: python train.py 2>&1 | tfgpu explain -")
    facts, note = machine_facts(facts_file, probe=probe, overrides=overrides)
    report = explain_file(logfile, facts=facts)
    if note and any(not f.harmless for f in report.findings):
        report = replace(report, notes=(*report.notes, note))
    if redact_out:
        from tfgpu.render.report import redactor

        clean = redactor()
        report = replace(
            report,
            name=clean(report.name),
            notes=tuple(clean(n) for n in report.notes),
            findings=tuple(replace(f, text=clean(f.text), cause=clean(f.cause), fix=clean(f.fix),
                                          meaning=clean(f.meaning), key=clean(f.key)) for f in report.findings),
        )
    if json_out:
        from tfgpu.render import output

        output.write_json(report.to_json())
        return 0
    render_findings(report.findings, notes=report.notes, title=f"tfgpu explain: {report.name}", verbose=verbose,
                    again=None if logfile == "-" else report.name)
    return 0


def register(app: typer.Typer) -> None:
    app.command("explain")(explain)
