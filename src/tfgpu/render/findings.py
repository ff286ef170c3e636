"""explain's findings for a person: a table, most important first, each with its cause, fix and source
(`tfgpu explain`, the smoke report's "What TensorFlow's log says", and `tfgpu.explain()`'s plain text)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from tfgpu.judge.explain import LogFinding


def render_findings(findings: Iterable[LogFinding], *, notes: Iterable[str] = (), title: str | None = None,
                    file: TextIO | None = None, style: bool | None = None) -> None:
    """A rich table of findings, most important first; harmless ones summarised in one line (on stdout, or
    ``file``; ``style`` forces styles on or off, as tfgpu.render.output.console takes it)."""
    from rich.table import Table

    from tfgpu.judge.explain import summarize_harmless
    from tfgpu.render import output

    items = list(findings)
    console = output.console(soft_wrap=False, file=file, style=style)
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
        console.print(table)
        for n, f in enumerate(serious, 1):
            console.print(output.line((f"{n}. {f.id}", "bold"), f" (line {f.line}: ", (f.text[:160], "dim"), ")"))
            console.print(output.line(f"   cause: {f.cause}"))
            console.print(output.line("   ", ("fix:", "green"), f" {f.fix}"))
            console.print(output.line((f"   source: {f.source}", "dim")))
    harmless = summarize_harmless(items)
    if harmless:
        console.print(output.line((harmless, "dim")))
    for note in notes:
        console.print(output.line((f"note: {note}", "dim")))
