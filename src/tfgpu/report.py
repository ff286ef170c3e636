"""Render a doctor result: the versioned JSON document, the human report, CI annotations."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from tfgpu import __version__
from tfgpu.verdict import BLOCKED, CAVEATS, ERROR, FAIL, PASS, READY, SKIP, WARN, DoctorResult

DOCTOR_SCHEMA = "tfgpu.doctor/1"

MARKS = {PASS: "✓", WARN: "!", FAIL: "✗", SKIP: "-", ERROR: "?"}
STYLES = {PASS: "green", WARN: "yellow", FAIL: "red", SKIP: "dim", ERROR: "magenta",
          READY: "green", CAVEATS: "yellow", BLOCKED: "red"}

GROUPS = (
    ("Platform", ("os.", "cpu.", "glibc.")),
    ("NVIDIA driver", ("driver.",)),
    ("GPUs", ("gpu.",)),
    ("CUDA", ("cuda.",)),
    ("cuDNN", ("cudnn.",)),
    ("Python", ("python.",)),
    ("Environment", ("env.",)),
    ("TensorFlow in this environment", ("tf.",)),
)


def doctor_document(facts: Mapping[str, Any], result: DoctorResult, *, data_version: str,
                    overrides: list[str] | None = None) -> dict[str, Any]:
    return {
        "schema": DOCTOR_SCHEMA,
        "tfgpu_version": __version__,
        "data_version": data_version,
        "facts": dict(facts),
        "overrides": list(overrides or []),
        "checks": [c.to_json() for c in result.checks],
        "targets": [t.to_json() for t in result.targets],
        "no_gpu": list(result.no_gpu),
        "recommendation": result.recommendation,
    }


# --------------------------------------------------------------------------- redaction

_TOKEN = re.compile(
    r"(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{20,}|"
    r"xox[abpr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|"
    r"eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}|"
    r"(?i:bearer\s+)[A-Za-z0-9._~+/-]{16,}=*|"
    r"(?<=://)[^/\s:@]+:[^/\s@]+(?=@)|"  # credentials in a URL (an index URL with user:password@)
    # KEY=value and KEY: value, also inside longer names (AWS_SECRET_ACCESS_KEY=..., HF_TOKEN=...)
    r"(?i:(?:token|secret|password|passwd|api[_-]?key|access[_-]?key)\w*\s*[=:]\s*)\S+)"
)
_HOME = re.compile(r"(/home/|/Users/|\\Users\\|/export/home/)([^/\\\s:;,'\"]+)")


def redactor(user: str | None = None, host: str | None = None, home: str | None = None) -> Any:
    """A function that removes user names, the host name and token-like strings from text."""
    try:
        import getpass

        user = user if user is not None else getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers)
        user = ""
    import socket

    host = host if host is not None else socket.gethostname()
    home = home if home is not None else str(Path.home())

    def clean(text: str) -> str:
        if home and home not in ("/", "~") and len(home) > 1:
            text = text.replace(home, "~")
        text = _HOME.sub(lambda m: m.group(1) + "<user>", text)
        text = _TOKEN.sub("<redacted>", text)
        if user and len(user) > 2:
            text = re.sub(rf"(?<![A-Za-z0-9]){re.escape(user)}(?![A-Za-z0-9])", "<user>", text)
        if host and len(host) > 2:
            text = re.sub(rf"(?<![A-Za-z0-9-]){re.escape(host)}(?![A-Za-z0-9-])", "<host>", text)
        return text

    return clean


def redact(obj: Any, clean: Any = None) -> Any:
    """Redact every string inside a JSON-like value."""
    clean = clean or redactor()
    if isinstance(obj, str):
        return clean(obj)
    if isinstance(obj, dict):
        return {clean(str(k)) if isinstance(k, str) else k: redact(v, clean) for k, v in obj.items()}
    if isinstance(obj, list):
        return [redact(v, clean) for v in obj]
    return obj


# --------------------------------------------------------------------------- human report


def _group(check_id: str) -> str:
    for title, prefixes in GROUPS:
        if check_id.startswith(prefixes):
            return title
    return "Other"


def render_human(doc: Mapping[str, Any], out: TextIO, *, color: bool | None = None) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(file=out, force_terminal=color, no_color=color is False, highlight=False,
                      width=max(100, Console(file=out).width if color else 100), soft_wrap=False)
    facts = doc.get("facts", {})
    plat = facts.get("platform") or {}
    console.print(Text(f"tfgpu {doc['tfgpu_version']} doctor · knowledge base {doc['data_version']}", style="bold"))
    if plat:
        where = " ".join(str(x) for x in (plat.get("os"), plat.get("distro"), plat.get("arch")) if x)
        console.print(Text(f"machine: {where}", style="dim"))
    if doc.get("overrides"):
        console.print(Text("overrides active: " + ", ".join(doc["overrides"]), style="yellow"))
    current = None
    for check in doc["checks"]:
        group = _group(check["id"])
        if group != current:
            current = group
            console.print(Text(f"\n{group}", style="bold"))
        mark = MARKS.get(check["status"], "?")
        line = Text(f"  [{mark}] ", style=STYLES.get(check["status"], ""))
        line.append(check["summary"])
        if check.get("source") and check["status"] != SKIP:
            line.append(f"  ({check['source']})", style="dim")
        console.print(line)
        if check.get("evidence") and check["status"] in (WARN, FAIL, ERROR):
            console.print(Text(f"      evidence: {check['evidence']}", style="dim"))
        if check.get("fix") and check["status"] in (WARN, FAIL, ERROR):
            console.print(Text(f"      fix: {check['fix']}", style="cyan"))
    targets = doc.get("targets", [])
    if len(targets) == 1:
        t = targets[0]
        console.print(Text(f"\nTensorFlow {t['tf']}: {t['verdict'].upper()}"
                           + (f" via {t['backend']} ({t['recipe']})" if t.get("backend") and t["verdict"] != BLOCKED else ""),
                           style="bold " + STYLES.get(t["verdict"], "")))
        shown, others = chosen_blockers(t)
        for b in shown:
            console.print(Text(f"  ✗ {b['summary']}", style="red"))
            if b.get("fix"):
                console.print(Text(f"      fix: {b['fix']}", style="cyan"))
        if others:
            console.print(Text(f"  {others}", style="dim"))
        for c in t["caveats"]:
            style = "dim" if c.get("mitigated_by") else "yellow"
            console.print(Text(f"  ! {c['summary']}", style=style))
            if c.get("mitigated_by"):
                console.print(Text(f"      handled: {c['mitigated_by']}", style="dim"))
            elif c.get("fix"):
                console.print(Text(f"      fix: {c['fix']}", style="cyan"))
    elif targets and doc.get("no_gpu"):  # the machine blocks every release alike: say so once
        console.print(Text(f"\nNo TensorFlow release can use a GPU here ({len(targets)} releases checked):", style="bold"))
        for reason in doc["no_gpu"]:
            console.print(Text(f"  ✗ {reason}", style="red"))
    elif targets:
        console.print(Text("\nTensorFlow releases on this machine (newest of each series)", style="bold"))
        table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
        for col in ("release", "verdict", "backend", "why"):
            table.add_column(col, overflow="fold")
        for t in targets:
            why = ""
            if t["blockers"]:
                why = t["blockers"][0]["summary"]
            else:
                open_caveats = [c for c in t["caveats"] if not c.get("mitigated_by")]
                if open_caveats:
                    why = open_caveats[0]["summary"]
            table.add_row(t["tf"], Text(t["verdict"], style=STYLES.get(t["verdict"], "")), t.get("backend") or "",
                          clip(why, 160))
        console.print(table)
        console.print(Text("every reason and its fix: tfgpu doctor --tf RELEASE", style="dim"))
    rec = doc.get("recommendation")
    console.print()
    if rec and rec.get("why_not"):
        console.print(Text(f"Not {rec['instead_of']}: {rec['why_not']}", style="red"))
    if rec and rec.get("backend") == "cpu":
        console.print(Text(f"Recommendation: TensorFlow {rec['tf']} on the CPU (no usable GPU here)", style="bold green"))
        console.print(Text(f"  {rec['command']}", style="bold"))
    elif rec:
        instead = f" instead of {rec['instead_of']}" if rec.get("instead_of") else ""
        console.print(Text(f"Recommendation{instead}: TensorFlow {rec['tf']} with the {rec['backend']} backend "
                           f"({rec['verdict']})", style="bold green"))
        console.print(Text(f"  {rec['command']}", style="bold"))
    else:
        console.print(Text("Recommendation: none — no TensorFlow release can use a GPU here as the machine is; "
                           "fix the ✗ items above first.", style="bold red"))


def chosen_blockers(target: Mapping[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """A blocked target's blockers as shown: the machine's own and those of the backend auto would take (the
    first judged), plus one line summarising the other backends (every blocker stays in the JSON)."""
    backends = [b for b in target.get("backends") or [] if b.get("blockers")]
    if len(backends) < 2:
        return list(target.get("blockers") or []), ""
    first, rest = backends[0], backends[1:]
    own = {str(b.get("summary")) for b in first["blockers"]}
    every_backend = {str(b.get("summary")) for x in backends for b in x["blockers"]}
    # the machine's blockers (no driver, ...) are in the target list without a "[backend: recipe]" tag
    shown = [b for b in target.get("blockers") or [] if not str(b.get("summary", "")).startswith("[")
             and str(b.get("summary")) not in every_backend]
    shown += [dict(b) for b in first["blockers"] if str(b.get("summary")) in own]
    n = sum(len(x["blockers"]) for x in rest)
    names = ", ".join(f"{x.get('backend')} ({x.get('recipe')})" for x in rest)
    return shown, f"also blocked: {names}, {n} blocker(s); every one: tfgpu doctor --tf {target.get('tf')} --json"


def clip(text: str, limit: int) -> str:
    """``text`` cut at a word boundary to at most ``limit`` characters, with an ellipsis when cut."""
    from tfgpu.errors import clip_words

    return clip_words(text, limit)


# --------------------------------------------------------------------------- CI


def ci_annotations(doc: Mapping[str, Any]) -> list[str]:
    """GitHub Actions workflow commands for failing and warning checks and blocked targets."""
    lines = []
    for c in doc["checks"]:
        if c["status"] in (FAIL, ERROR, WARN):
            level = "warning" if c["status"] == WARN else "error"
            msg = c["summary"] + (f" — fix: {c['fix']}" if c.get("fix") else "")
            lines.append(f"::{level} title=tfgpu {c['id']}::{_escape(msg)}")
    for t in doc["targets"]:
        if t["verdict"] == BLOCKED and len(doc["targets"]) == 1:
            for b in t["blockers"]:
                lines.append(f"::error title=tfgpu TensorFlow {t['tf']} blocked::{_escape(b['summary'] + ' — fix: ' + b['fix'])}")
    return lines


def _escape(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def step_summary(doc: Mapping[str, Any]) -> str:
    """A Markdown summary for $GITHUB_STEP_SUMMARY."""
    out = [f"## tfgpu doctor ({doc['tfgpu_version']}, knowledge base {doc['data_version']})", "",
           "| check | status | summary |", "|---|---|---|"]
    for c in doc["checks"]:
        out.append(f"| `{c['id']}` | {MARKS.get(c['status'], '?')} {c['status']} | {_md(c['summary'])} |")
    out += ["", "| TensorFlow | verdict | backend | why |", "|---|---|---|---|"]
    for t in doc["targets"]:
        why = t["blockers"][0]["summary"] if t["blockers"] else ""
        out.append(f"| {t['tf']} | {t['verdict']} | {t.get('backend') or ''} | {_md(why)} |")
    rec = doc.get("recommendation")
    out += ["", f"**Recommendation:** `{rec['command']}`" if rec else "**Recommendation:** none", ""]
    return "\n".join(out)


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def plain_log(doc: Mapping[str, Any]) -> str:
    lines = []
    for c in doc["checks"]:
        lines.append(f"[{MARKS.get(c['status'], '?')}] {c['id']}: {c['summary']}")
    for t in doc["targets"]:
        lines.append(f"TensorFlow {t['tf']}: {t['verdict']}" + (f" ({t['backend']})" if t.get("backend") else ""))
    rec = doc.get("recommendation")
    lines.append(f"recommendation: {rec['command']}" if rec else "recommendation: none")
    return "\n".join(lines) + "\n"


def write_step_summary(doc: Mapping[str, Any], env: Mapping[str, str]) -> None:
    path = env.get("GITHUB_STEP_SUMMARY")
    if path:
        with Path(path).open("a", encoding="utf-8") as fh:
            fh.write(step_summary(doc))
