"""`tfgpu explain`: list the known problems in a TensorFlow / CUDA / NVIDIA log, most important first."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Optional

import typer

from tfgpu.cli.options import overrides, typer_option

if TYPE_CHECKING:
    from tfgpu.judge.explain import LogFinding


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
) -> int:
    """Explain the errors in a TensorFlow / CUDA / NVIDIA log: meaning, likely cause, fix."""
    return run_explain(logfile, json_out=json_out, facts_file=facts_file, probe=not no_probe, redact_out=redact_out,
                       overrides=overrides(driver, gpu_cc, os_name))


def machine_facts(facts_file: str | None, *, probe: bool, overrides: dict[str, str | None] | None = None,
                  ) -> tuple[dict[str, Any] | None, str | None]:
    """Facts for machine-specific causes: from --facts FILE, else probed here (never fatal), then the
    overrides (tfgpu.facts.gather.gather_facts, as for every command), and a note."""
    from tfgpu.facts.gather import gather_facts

    if facts_file:
        return gather_facts(facts_file=facts_file, overrides=overrides)[0], \
            f"machine-specific causes use the facts in {facts_file}"
    if not probe:
        return None, None
    try:
        facts, _ = gather_facts(overrides=overrides)
    except Exception as exc:  # a probe bug must not hide the log's explanation
        return None, f"this machine could not be probed ({type(exc).__name__}); causes are generic"
    return facts, "machine-specific causes describe THIS machine (--facts FILE for another one, --no-probe to turn off)"


def run_explain(logfile: str, *, json_out: bool, facts_file: str | None = None, probe: bool = True,
                redact_out: bool = False, overrides: dict[str, str | None] | None = None) -> int:
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
    render_findings(report.findings, notes=report.notes, title=f"tfgpu explain: {report.name}")
    return 0


def render_findings(findings: Iterable[LogFinding], *, notes: Iterable[str] = (), title: str | None = None) -> None:
    """A rich table of findings, most important first; harmless ones summarised in one line."""
    from rich.table import Table

    from tfgpu.render import output
    from tfgpu.tools.explain import summarize_harmless

    items = list(findings)
    console = output.fitted_console()  # a terminal: its width, never inside a command; a pipe: no wrapping
    serious = [f for f in items if not f.harmless]
    if title:
        console.print(output.line((title, "bold")))
    if not serious:
        console.print(output.line("No known problem found in this log." if not items
                                  else "No problem: only harmless lines."))
    else:
        table = Table(expand=False)
        table.add_column("#", justify="right", no_wrap=True)
        table.add_column("", no_wrap=True)
        table.add_column("line", justify="right", no_wrap=True)
        table.add_column("problem")
        marks = {"fatal": ("✗", "red"), "error": ("✗", "red"), "warning": ("!", "yellow"), "info": ("i", "blue")}
        for n, f in enumerate(serious, 1):
            times = f" (×{f.count})" if f.count > 1 else ""
            table.add_row(str(n), output.line(marks.get(f.severity, "?")), str(f.line),
                          output.line((f.id, "bold"), f"{times}: {f.meaning}"))
        output.print_table(console, table)
        for n, f in enumerate(serious, 1):
            output.print_wrapped(console, output.line((f"{n}. {f.id}", "bold"), f" (line {f.line}: ",
                                                      (f.text[:160], "dim"), ")"))
            output.print_wrapped(console, output.line(f"   cause: {f.cause}"))
            output.print_wrapped(console, output.line("   ", ("fix:", "green"), f" {f.fix}"))
            output.print_wrapped(console, output.line((f"   source: {f.source}", "dim")))
    harmless = summarize_harmless(items)
    if harmless:
        console.print(output.line((harmless, "dim")))
    for note in notes:
        console.print(output.line((f"note: {note}", "dim")))


def register(app: typer.Typer) -> None:
    app.command("explain")(explain)
