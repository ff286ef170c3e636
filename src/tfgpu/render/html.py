"""HTML for notebooks (Jupyter's ``_repr_html_``): the doctor, explain and smoke documents as small tables.

Pure, from the versioned JSON documents only, so the HTML says what `--json` says. Every value is escaped
(html.escape, quotes included): facts, logs and file names come from someone else, and a notebook renders
HTML as trusted. No links and no scripts are ever made from a value; styles are tfgpu's own, inline.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tfgpu.render.report import knowledge_note

#: The doctor's check marks and their colours (render.report's ✓ / ! / ✗ for a terminal).
_MARKS = {"pass": ("✓", "#1a7f37"), "warn": ("!", "#9a6700"), "fail": ("✗", "#cf222e"), "skip": ("-", "#6e7781"),
          "error": ("?", "#8250df")}
_VERDICT = {"ready": "#1a7f37", "caveats": "#9a6700", "blocked": "#cf222e"}
_SEVERITY = {"fatal": ("✗", "#cf222e"), "error": ("✗", "#cf222e"), "warning": ("!", "#9a6700"),
             "info": ("i", "#0969da"), "harmless": ("·", "#6e7781")}
_TABLE = 'style="border-collapse:collapse;text-align:left"'
_CELL = 'style="padding:2px 8px;vertical-align:top;text-align:left"'


def esc(value: Any) -> str:
    """Any value as HTML text: escaped, quotes included (None is an empty cell)."""
    return "" if value is None else html.escape(str(value), quote=True)


def _coloured(text: Any, colour: str, *, bold: bool = False) -> str:
    weight = ";font-weight:bold" if bold else ""
    return f'<span style="color:{colour}{weight}">{esc(text)}</span>'


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A table of cells that are already HTML (each made with :func:`esc` or :func:`_coloured`)."""
    head = "".join(f"<th {_CELL}>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td {_CELL}>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table {_TABLE}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _wrap(title: str, parts: Iterable[str]) -> str:
    return f'<div class="tfgpu-report"><p><b>{esc(title)}</b></p>{"".join(parts)}</div>'


def _p(text: Any, *, colour: str | None = None, code: bool = False) -> str:
    inner = f"<code>{esc(text)}</code>" if code else esc(text)
    return f'<p style="color:{colour}">{inner}</p>' if colour else f"<p>{inner}</p>"


def doctor_html(doc: Mapping[str, Any]) -> str:
    """The doctor's report: the machine, every check, the verdicts and the recommendation."""
    parts = []
    plat = (doc.get("facts") or {}).get("platform") or {}
    if plat:
        parts.append(_p("machine: " + " ".join(str(plat[k]) for k in ("os", "distro", "arch") if plat.get(k)),
                        colour="#6e7781"))
    if doc.get("overrides"):
        parts.append(_p("overrides active (not probed): " + ", ".join(map(str, doc["overrides"])), colour="#9a6700"))
    rows = []
    for c in doc.get("checks") or []:
        mark, colour = _MARKS.get(str(c.get("status")), ("?", "#6e7781"))
        detail = esc(c.get("summary"))
        if c.get("fix") and c.get("status") in ("warn", "fail", "error"):
            detail += f"<br><small>fix: <code>{esc(c['fix'])}</code></small>"
        rows.append((_coloured(mark, colour, bold=True), f"<code>{esc(c.get('id'))}</code>", detail))
    parts.append(_table(("", "check", "result"), rows))
    parts.append(_targets_html(doc.get("targets") or [], doc.get("no_gpu") or []))
    rec = doc.get("recommendation")
    if rec:
        if rec.get("why_not"):
            parts.append(_p(f"Not {rec.get('instead_of')}: {rec['why_not']}", colour="#cf222e"))
        what = "on the CPU" if rec.get("backend") == "cpu" else f"with the {rec.get('backend')} backend"
        parts.append(f"<p><b>Recommendation:</b> TensorFlow {esc(rec.get('tf'))} {esc(what)}</p>")
        parts.append(_p(rec.get("command"), code=True))
    else:
        parts.append(_p("Recommendation: none: no TensorFlow release can use a GPU here as the machine is.",
                        colour="#cf222e"))
    note = knowledge_note(doc)
    if note:
        parts.append(_p(f"note: {note}", colour="#9a6700"))
    return _wrap(f"tfgpu {doc.get('tfgpu_version')} doctor · knowledge base {doc.get('data_version')}", parts)


def _targets_html(targets: Sequence[Mapping[str, Any]], no_gpu: Sequence[Any]) -> str:
    if len(targets) == 1:
        t = targets[0]
        verdict = str(t.get("verdict"))
        via = f" via {t.get('backend')} ({t.get('recipe')})" if t.get("backend") and verdict != "blocked" else ""
        heading = f"TensorFlow {t.get('tf')}: {verdict.upper()}{via}"
        lines = [f"<p>{_coloured(heading, _VERDICT.get(verdict, '#000'), bold=True)}</p>"]
        items = [("✗", "#cf222e", b) for b in t.get("blockers") or []]
        items += [("!", "#9a6700", c) for c in t.get("caveats") or [] if not c.get("mitigated_by")]
        if items:
            lines.append("<ul>" + "".join(
                f"<li>{_coloured(mark, colour, bold=True)} {esc(f.get('summary'))}"
                + (f"<br><small>fix: <code>{esc(f['fix'])}</code></small>" if f.get("fix") else "") + "</li>"
                for mark, colour, f in items) + "</ul>")
        return "".join(lines)
    if targets and no_gpu:
        return (f"<p><b>No TensorFlow release can use a GPU here ({len(targets)} releases checked):</b></p><ul>"
                + "".join(f"<li>{_coloured('✗', '#cf222e', bold=True)} {esc(r)}</li>" for r in no_gpu) + "</ul>")
    rows = []
    for t in targets:
        verdict = str(t.get("verdict"))
        blockers, caveats = t.get("blockers") or [], [c for c in t.get("caveats") or [] if not c.get("mitigated_by")]
        why = blockers[0].get("summary") if blockers else caveats[0].get("summary") if caveats else ""
        rows.append((esc(t.get("tf")), _coloured(verdict, _VERDICT.get(verdict, "#000")), esc(t.get("backend")),
                     esc(why)))
    return "<p><b>TensorFlow releases on this machine</b> (newest of each series)</p>" + _table(
        ("release", "verdict", "backend", "why"), rows)


def findings_html(findings: Sequence[Mapping[str, Any]], notes: Sequence[Any] = ()) -> str:
    """explain's findings (the tfgpu.explain/1 ``findings``): each problem, its line, meaning, cause and fix;
    harmless lines counted in one sentence."""
    serious = [f for f in findings if f.get("severity") != "harmless"]
    parts = []
    if not serious:
        parts.append(_p("No known problem found in this log." if not findings else "No problem: only harmless lines."))
    else:
        rows = []
        for f in serious:
            mark, colour = _SEVERITY.get(str(f.get("severity")), ("?", "#6e7781"))
            times = f" (×{f['count']})" if int(f.get("count") or 1) > 1 else ""
            rows.append((_coloured(mark, colour, bold=True), esc(f.get("line")),
                         f"<code>{esc(f.get('id'))}</code>{esc(times)}<br>{esc(f.get('meaning'))}"
                         f"<br><small>line: <code>{esc(f.get('text'))}</code></small>",
                         f"{esc(f.get('cause'))}<br><small>fix: <code>{esc(f.get('fix'))}</code></small>"
                         f"<br><small>source: {esc(f.get('source'))}</small>"))
        parts.append(_table(("", "line", "problem", "cause and fix"), rows))
    harmless = [f for f in findings if f.get("severity") == "harmless"]
    if harmless:
        total = sum(int(f.get("count") or 1) for f in harmless)
        parts.append(_p(f"{total} harmless line(s): nothing to fix", colour="#6e7781"))
    parts += [_p(f"note: {n}", colour="#6e7781") for n in notes]
    return "".join(parts)


def explain_html(doc: Mapping[str, Any]) -> str:
    """`tfgpu explain`'s document (tfgpu.explain/1)."""
    name = (doc.get("input") or {}).get("name")
    return _wrap(f"tfgpu explain: {name}", [findings_html(doc.get("findings") or [], doc.get("notes") or [])])


def smoke_html(doc: Mapping[str, Any]) -> str:
    """`tfgpu smoke`'s document (tfgpu.smoke/1): the verdict, TensorFlow and its GPUs, each op, the log's findings."""
    tf = doc.get("tensorflow") or {}
    py = doc.get("python") or {}
    parts = [_p(f"TensorFlow {tf.get('version') or '-'}, Python {py.get('version') or '?'} ({py.get('executable')})")]
    devices = (doc.get("gpus") or {}).get("devices") or []
    parts.append(_p("GPUs TensorFlow sees: " + (", ".join(str(g.get("name")) for g in devices) or "none")))
    ops = doc.get("ops") or []
    if ops:
        rows = []
        for op in ops:
            status = str(op.get("status"))
            shown, colour = {"pass": ("✓ pass", "#1a7f37") if op.get("on_gpu") else ("! cpu", "#9a6700"),
                             "fail": ("✗ fail", "#cf222e")}.get(status, (f"- {status}", "#6e7781"))
            seconds = op.get("seconds")
            rows.append((esc(op.get("name")), _coloured(shown, colour), esc(op.get("device") or "-"),
                         esc(f"{seconds:.4g} s" if isinstance(seconds, (int, float)) else "-"),
                         esc(str(op.get("error") or op.get("reason") or "").split("\n")[0][:160])))
        parts.append(_table(("op", "result", "device", "time", "error / reason"), rows))
    if any(f.get("severity") != "harmless" for f in doc.get("findings") or []) or doc.get("notes"):
        parts.append("<p><b>What TensorFlow's log says:</b></p>" + findings_html(doc.get("findings") or [],
                                                                                 doc.get("notes") or []))
    colour = "#1a7f37" if doc.get("passed") else "#cf222e"
    parts.append(f"<p>{_coloured(doc.get('summary'), colour, bold=True)}</p>")
    return _wrap("tfgpu smoke", parts)
