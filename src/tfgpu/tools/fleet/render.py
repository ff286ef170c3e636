"""Render a fleet document (tfgpu.fleet/1): the terminal matrix and the self-contained HTML page."""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from typing import Any, TextIO

MARKS = {"ready": "✓", "caveats": "!", "blocked": "✗", None: "·"}
STYLES = {"ready": "green", "caveats": "yellow", "blocked": "red", None: "dim"}
#: The terminal shows this many series columns at most; --json and --html have them all.
MAX_COLUMNS = 10
MAX_ROWS = 40


def _printable(text: Any) -> str:
    """Node names and facts come from other machines: no control or escape sequences reach the terminal."""
    return "".join(ch if ch.isprintable() else "?" for ch in str(text))


def _nodes_label(nodes: list[str], limit: int = 3) -> str:
    shown = ", ".join(_printable(n) for n in nodes[:limit])
    return shown + (f", … (+{len(nodes) - limit})" if len(nodes) > limit else "")


def columns(doc: Mapping[str, Any]) -> list[str]:
    """The series the terminal shows: those where groups differ, then the newest, then the common one."""
    series: list[str] = list(doc["series"])
    groups = doc["groups"]
    differ = [s for s in series if len({(g["verdicts"].get(s) or {}).get("verdict") for g in groups}) > 1]
    wanted = set(differ[:MAX_COLUMNS])
    common = (doc["common"].get("every_node") or {}).get("series")
    if common:
        wanted.add(common)
    for s in series:
        if len(wanted) >= MAX_COLUMNS:
            break
        wanted.add(s)
    return [s for s in series if s in wanted]


def render_human(doc: Mapping[str, Any], out: TextIO, *, color: bool | None = None) -> None:

    from rich.table import Table
    from rich.text import Text

    from tfgpu.render import output

    console = output.console(file=out, style=output.use_style(out) if color is None else color, width=120,
                             soft_wrap=False)
    console.print(Text(f"tfgpu {doc['tfgpu_version']} fleet · knowledge base {doc['data_version']} · "
                       f"{doc['nodes']} nodes, {len(doc['groups'])} machine groups", style="bold"))
    rj = doc["rejudged"]
    if rj["reports"]:
        sources = "; ".join(f"{n} × {_printable(v)}" for v, n in rj["from"].items())
        console.print(Text(f"re-judged from their facts with knowledge base {doc['data_version']}: "
                           f"{rj['reports']} reports ({sources})", style="yellow"))
    cols = columns(doc)
    table = Table(box=None, pad_edge=False, show_edge=False)
    table.add_column("group")
    table.add_column("nodes", justify="right")
    table.add_column("machine")
    for s in cols:
        table.add_column(s, justify="center")
    if doc.get("target"):
        table.add_column(f"--tf {_printable(doc['target']['tf'])}", justify="center")
    for g in doc["groups"][:MAX_ROWS]:
        m = g["machine"]
        machine = "; ".join(_printable(x) for x in (m.get("gpus") or "no GPU", f"driver {m.get('driver') or 'none'}",
                                                     m.get("os")) if x)
        row: list[Any] = [g["id"], str(g["count"]), machine]
        for s in cols:
            verdict = (g["verdicts"].get(s) or {}).get("verdict")
            row.append(Text(MARKS.get(verdict, "?"), style=STYLES.get(verdict, "")))
        if doc.get("target"):
            verdict = (g.get("target") or {}).get("verdict")
            row.append(Text(MARKS.get(verdict, "?"), style=STYLES.get(verdict, "")))
        table.add_row(*row)
    console.print()
    console.print(table)
    hidden = len(doc["groups"]) - MAX_ROWS
    more = f"; {hidden} more groups" if hidden > 0 else ""
    console.print(Text(f"✓ ready  ! caveats  ✗ blocked  · not judged; {len(cols)} of {len(doc['series'])} "
                       f"series shown{more} (all in --json and --html)", style="dim"))
    if doc["outliers"]:
        console.print(Text("\nOutliers (compared with the largest group, g1)", style="bold"))
        for o in doc["outliers"][:MAX_ROWS]:
            nodes = "node" if o["count"] == 1 else "nodes"
            console.print(Text(f"  {o['group']} ({o['count']} {nodes}: {_nodes_label(o['nodes'])})"))
            facts = [d for d in o["differs"] if not d["field"].startswith("tf ")]
            verdicts = [d for d in o["differs"] if d["field"].startswith("tf ")]
            for d in facts:
                console.print(Text(f"      {d['label']}: {_printable(d['value'])} "
                                   f"(g1: {_printable(d['largest_group'])})"))
            if verdicts:
                first = verdicts[0]
                line = f"      verdicts differ on {len(verdicts)} series, e.g. {first['label']}: {first['value']}"
                if first.get("why"):
                    line += f" — {_printable(first['why'])}"
                console.print(Text(line, style="dim"))
    common = doc["common"]
    console.print()
    for label, key in (("every node", "every_node"), ("the largest group", "largest_group")):
        c = common.get(key)
        text = (f"newest TensorFlow usable on {label}: {c['series']} ({', '.join(c['releases'])}, {c['verdict']})"
                if c else f"no TensorFlow series is usable on {label}")
        console.print(Text(text, style="bold" if key == "every_node" else ""))
    target = doc.get("target")
    if target:
        if target["ready_everywhere"]:
            console.print(Text(f"TensorFlow {_printable(target['tf'])}: usable on all {target['ready_nodes']} nodes",
                               style="green"))
        else:
            bad = target["not_ready_nodes"]
            console.print(Text(f"TensorFlow {_printable(target['tf'])}: NOT usable on {len(bad)} of {doc['nodes']} "
                               f"nodes: {_nodes_label(bad, 8)}", style="red"))
    for p in doc["problems"]:
        console.print(Text(f"skipped {_printable(p['source'])}: {_printable(p['reason'])}", style="red"))


# --------------------------------------------------------------------------- HTML

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.3em}table{border-collapse:collapse;margin:1em 0}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:center;white-space:nowrap}
td.m{text-align:left;white-space:normal;max-width:28em}
.ready{background:#c8f0c8}.caveats{background:#fff0b3}.blocked{background:#f6c1c1}.none{background:#eee}
tr.group{cursor:pointer}tr.group:hover td{outline:1px solid #888}
#detail{border:1px solid #999;padding:.5em 1em;margin-top:1em}
.node{cursor:pointer;text-decoration:underline;margin-right:.6em}
.filters button{margin-right:.4em}.filters button.on{font-weight:bold;border:2px solid #333}
.note{color:#666}
"""

_JS = """
const DOC = JSON.parse(document.getElementById('fleet-data').textContent);
function el(tag, attrs, text){const e=document.createElement(tag);
  for (const k in (attrs||{})) e.setAttribute(k, attrs[k]); if (text!==undefined) e.textContent=text; return e;}
function showGroup(id){
  const g = DOC.groups.find(x => x.id === id); const d = document.getElementById('detail'); d.replaceChildren();
  d.appendChild(el('h2', {}, id + ': ' + g.count + ' node(s)'));
  const m = g.machine; d.appendChild(el('p', {}, Object.keys(m).map(k => k + ': ' + m[k]).join(' · ')));
  const nodes = el('p'); g.nodes.forEach(n => { const s = el('span', {class:'node', 'data-node':n}, n);
    s.addEventListener('click', () => showNode(g, n)); nodes.appendChild(s); }); d.appendChild(nodes);
  d.appendChild(el('div', {id:'node-checks'}));
}
function showNode(g, n){
  const box = document.getElementById('node-checks'); box.replaceChildren();
  box.appendChild(el('h3', {}, 'checks of ' + n));
  const ul = el('ul'); if (!g.checks.length) ul.appendChild(el('li', {}, 'every check passed'));
  g.checks.forEach(c => { const li = el('li', {class:'check'}, '[' + c.status + '] ' + c.id + ': ' + c.summary +
      (c.fix ? ' — fix: ' + c.fix : '')); ul.appendChild(li); });
  box.appendChild(ul);
}
function filter(verdict){
  document.querySelectorAll('.filters button').forEach(b => b.classList.toggle('on', b.dataset.v === verdict));
  document.querySelectorAll('tr.group').forEach(tr => {
    tr.style.display = (verdict === 'all' || tr.dataset.verdicts.split(' ').includes(verdict)) ? '' : 'none'; });
}
document.querySelectorAll('tr.group').forEach(tr => tr.addEventListener('click', () => showGroup(tr.dataset.group)));
document.querySelectorAll('.filters button').forEach(b => b.addEventListener('click', () => filter(b.dataset.v)));
"""


def _drift_html(drift: Mapping[str, Any] | None) -> str:
    """The page's section on what changed since an earlier merge (tfgpu.tools.fleet.diff), escaped."""
    if drift is None:
        return ""
    e = html.escape
    rows = []
    for entry in drift["changed"]:
        for c in entry["changes"]:
            if c["field"] == "releases":
                value = " ".join([*(f"−{r}" for r in c["lost"]), *(f"+{r}" for r in c["gained"])])
                rows.append(f"<tr><td>{e(entry['node'])}</td><td>{e(c['label'])}</td><td class=\"m\" colspan=\"2\">"
                            f"{e(value)}</td></tr>")
            else:
                rows.append(f"<tr><td>{e(entry['node'])}</td><td>{e(c['label'])}</td><td>{e(str(c['old'] or 'none'))}"
                            f"</td><td>{e(str(c['new'] or 'none'))}</td></tr>")
    moved = "".join(f"<p>{e(label)}: {e(', '.join(drift[key][:200]))}</p>"
                    for key, label in (("added", "New nodes"), ("removed", "Nodes no longer reporting"))
                    if drift[key])
    table = (f"<table id=\"drift\"><thead><tr><th>node</th><th>what</th><th>before</th><th>now</th></tr></thead>"
             f"<tbody>{''.join(rows)}</tbody></table>" if rows else "")
    return (f"<h2>Changes since the last merge</h2><p class=\"note\">{len(drift['changed'])} node(s) changed, "
            f"{len(drift['added'])} added, {len(drift['removed'])} removed, {drift['unchanged']} unchanged "
            f"(knowledge base {e(str(drift['old']['data_version']))} → {e(str(drift['new']['data_version']))})</p>"
            f"{table}{moved}")


def render_html(doc: Mapping[str, Any], *, drift: Mapping[str, Any] | None = None) -> str:
    """One self-contained page: no external assets, every value escaped, the data as inert JSON; with
    ``drift`` (tfgpu.tools.fleet.diff) a section on what changed since an earlier merge."""
    e = html.escape
    series = doc["series"]
    head = "".join(f"<th>{e(s)}</th>" for s in series)
    if doc.get("target"):
        head += f"<th>--tf {e(str(doc['target']['tf']))}</th>"
    rows = []
    for g in doc["groups"]:
        m = g["machine"]
        machine = "; ".join(str(x) for x in (m.get("gpus") or "no GPU", f"driver {m.get('driver') or 'none'}",
                                             m.get("os")) if x)
        cells = []
        present = set()
        for s in series:
            c = g["verdicts"].get(s) or {}
            v = c.get("verdict")
            present.add(v or "none")
            title = f"{c.get('tf') or s}: {v or 'not judged'}" + (f" — {c['why']}" if c.get("why") else "")
            cells.append(f'<td class="{e(v or "none")}" title="{e(title)}">{e(MARKS.get(v, "?"))}</td>')
        if doc.get("target"):
            v = (g.get("target") or {}).get("verdict")
            cells.append(f'<td class="{e(v or "none")}">{e(MARKS.get(v, "?"))}</td>')
        rows.append(f'<tr class="group" data-group="{e(g["id"])}" data-verdicts="{e(" ".join(sorted(present)))}">'
                    f'<td>{e(g["id"])}</td><td>{g["count"]}</td><td class="m">{e(machine)}</td>{"".join(cells)}</tr>')
    common = doc["common"].get("every_node")
    common_text = (f"Newest TensorFlow usable on every node: {common['series']} ({', '.join(common['releases'])})"
                   if common else "No TensorFlow series is usable on every node.")
    problems = "".join(f"<li>{e(p['source'])}: {e(p['reason'])}</li>" for p in doc["problems"])
    # </script> and <!-- cannot end the data block: the JSON is escaped for an HTML script element.
    data = json.dumps(doc, ensure_ascii=True).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    buttons = "".join(f'<button type="button" data-v="{v}">{label}</button>'
                      for v, label in (("all", "all"), ("ready", "✓ ready"), ("caveats", "! caveats"),
                                       ("blocked", "✗ blocked")))
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>tfgpu fleet: {doc['nodes']} nodes</title><style>{_CSS}</style></head><body>"
        f"<h1>tfgpu fleet · {doc['nodes']} nodes · {len(doc['groups'])} machine groups</h1>"
        f"<p class=\"note\">tfgpu {e(doc['tfgpu_version'])}, knowledge base {e(doc['data_version'])}"
        + (f"; {doc['rejudged']['reports']} reports re-judged from their facts" if doc["rejudged"]["reports"] else "")
        + f"</p><p><b>{e(common_text)}</b></p>"
        f"<div class=\"filters\">Show groups with: {buttons}</div>"
        f"<table id=\"matrix\"><thead><tr><th>group</th><th>nodes</th><th>machine</th>{head}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
        "<p class=\"note\">Click a group for its nodes, then a node for its checks.</p>"
        "<div id=\"detail\"></div>"
        + _drift_html(drift)
        + (f"<h2>Skipped reports</h2><ul>{problems}</ul>" if problems else "")
        + f"<script type=\"application/json\" id=\"fleet-data\">{data}</script><script>{_JS}</script></body></html>\n"
    )
