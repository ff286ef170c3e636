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
    verbose: bool = typer.Option(False, "--verbose", "-v",
                                 help="Show every line of each problem, its whole cause and the source of the knowledge."),
) -> int:
    """Explain the errors in a TensorFlow / CUDA / NVIDIA log: meaning, likely cause, fix."""
    return run_explain(logfile, json_out=json_out, facts_file=facts_file, probe=not no_probe, redact_out=redact_out,
                       overrides=overrides(driver, gpu_cc, os_name), verbose=verbose)


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


def render_findings(findings: Iterable[LogFinding], *, notes: Iterable[str] = (), title: str | None = None,
                    verbose: bool = False, again: str | None = None) -> None:
    """A rich table of the problems, grouped (tfgpu.judge.explain_group), most important first; then per group the
    cause and the fix: the cause's first sentence, or with ``verbose`` the whole cause, every line and the source.
    Harmless lines are summarised in one line. ``again``: the log's path, for the hint that names --verbose."""
    from rich.table import Table

    from tfgpu.judge.explain_group import first_sentence, group_findings
    from tfgpu.render import output
    from tfgpu.tools.explain import summarize_harmless

    items = list(findings)
    console = output.console(soft_wrap=False)
    groups = [g for g in group_findings(items) if not g.head.harmless]
    if title:
        console.print(output.line((title, "bold")))
    if not groups:
        console.print(output.line("No known problem found in this log." if not items
                                  else "No problem: only harmless lines."))
    else:
        table = Table(expand=False)
        table.add_column("#", justify="right", no_wrap=True)
        table.add_column("", no_wrap=True)
        table.add_column("line", justify="right")
        table.add_column("problem")
        marks = {"fatal": ("✗", "red"), "error": ("✗", "red"), "warning": ("!", "yellow"), "info": ("i", "blue")}
        for n, g in enumerate(groups, 1):
            times = f" (×{g.count})" if g.count > 1 else ""
            more = f" +{len(g.members) - 1}" if len(g.members) > 1 and g.head.problem else ""
            table.add_row(str(n), output.line(marks.get(g.head.severity, "?")), g.lines_text(),
                          output.line((g.head.id + more, "bold"), f"{times}: {g.meaning}"))
        console.print(table)
        hidden = False
        for n, g in enumerate(groups, 1):
            if not g.head.problem and not verbose:
                continue
            f = g.head
            cause = f.cause if verbose else first_sentence(f.cause)
            hidden = hidden or cause != f.cause or len(g.members) > 1 or bool(f.text)
            where = g.lines_text()
            console.print(output.line((f"{n}. {f.id}", "bold"), f" ({'lines' if len(g.lines) > 1 else 'line'} {where})"))
            if verbose:
                for m in g.members:
                    console.print(output.line("   ", (f"line {m.line}: {m.text[:160]}", "dim")))
            console.print(output.line(f"   cause: {cause}"))
            console.print(output.line("   ", ("fix:", "green"), f" {f.fix}"))
            if verbose:
                for source in dict.fromkeys(m.source for m in g.members):
                    console.print(output.line((f"   source: {source}", "dim")))
        if hidden and not verbose:
            more = (f"tfgpu explain {again} --verbose" if again and " " not in again and not again.startswith("-")
                    else "--verbose")
            console.print(output.line((f"each line, the whole cause and the sources: {more}", "dim")))
    harmless = summarize_harmless(items)
    if harmless:
        console.print(output.line((harmless, "dim")))
    for note in notes:
        console.print(output.line((f"note: {note}", "dim")))


def register(app: typer.Typer) -> None:
    app.command("explain")(explain)
