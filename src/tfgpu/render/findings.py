"""explain's findings for a person: a table, most important first, each with its cause, fix and source
(`tfgpu explain`, the smoke report's "What TensorFlow's log says", and `tfgpu.explain()`'s plain text)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from tfgpu.judge.explain import LogFinding


def render_findings(findings: Iterable[LogFinding], *, notes: Iterable[str] = (), title: str | None = None,
                    verbose: bool = False, again: str | None = None, file: TextIO | None = None,
                    style: bool | None = None) -> None:
    """A rich table of the problems, grouped (tfgpu.judge.explain_group), most important first; then per group the
    cause and the fix: the cause's first sentence, or with ``verbose`` the whole cause, every line and the source.
    Harmless lines are summarised in one line. ``again``: the log's path, for the hint that names --verbose. On
    stdout, or ``file``; ``style`` forces styles on or off, as tfgpu.render.output.console takes it."""
    from rich.table import Table

    from tfgpu.judge.explain import summarize_harmless
    from tfgpu.judge.explain_group import first_sentence, group_findings
    from tfgpu.render import output

    items = list(findings)
    # a terminal: its width, never inside a command; a pipe or a file: no wrapping, no cell cut
    console = output.fitted_console(file=file, style=style)
    groups = [g for g in group_findings(items) if not g.head.harmless]
    if title:
        output.print_wrapped(console, output.line((title, "bold")))
    if not groups:
        output.print_wrapped(console, output.line("No known problem found in this log." if not items
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
        output.print_table(console, table)
        hidden = False
        for n, g in enumerate(groups, 1):
            if not g.head.problem and not verbose:
                continue
            f = g.head
            cause = f.cause if verbose else first_sentence(f.cause)
            hidden = hidden or cause != f.cause or len(g.members) > 1 or bool(f.text)
            where = g.lines_text()
            output.print_wrapped(console, output.line((f"{n}. {f.id}", "bold"), f" ({'lines' if len(g.lines) > 1 else 'line'} {where})"))
            if verbose:
                for m in g.members:
                    output.print_wrapped(console, output.line("   ", (f"line {m.line}: {m.text[:160]}", "dim")))
            output.print_wrapped(console, output.line(f"   cause: {cause}"))
            output.print_wrapped(console, output.line("   ", ("fix:", "green"), f" {f.fix}"))
            if verbose:
                for source in dict.fromkeys(m.source for m in g.members):
                    output.print_wrapped(console, output.line((f"   source: {source}", "dim")))
        if hidden and not verbose:
            more = (f"tfgpu explain {again} --verbose" if again and " " not in again and not again.startswith("-")
                    else "--verbose")
            output.print_wrapped(console, output.line((f"each line, the whole cause and the sources: {more}", "dim")))
    harmless = summarize_harmless(items)
    if harmless:
        output.print_wrapped(console, output.line((harmless, "dim")))
    for note in notes:
        output.print_wrapped(console, output.line((f"note: {note}", "dim")))
