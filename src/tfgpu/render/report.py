"""Render a doctor result: the versioned JSON document, the human report, CI annotations."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO, cast

from tfgpu import __version__
from tfgpu.judge.diagnose import DoctorResult
from tfgpu.judge.findings import BLOCKED, CAVEATS, ERROR, FAIL, PASS, READY, SKIP, WARN, chosen_blockers

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
        "targets": [_target_json(t, verified=result.target_requested is not None) for t in result.targets],
        "no_gpu": list(result.no_gpu),
        "recommendation": result.recommendation.to_json() if result.recommendation is not None else None,
    }


def _target_json(target: Any, *, verified: bool) -> dict[str, Any]:
    """A target's JSON; for `doctor --tf` each recipe also says whether a real install proved it
    (compat/verified.toml, written by `nox -s recipes`)."""
    doc: dict[str, Any] = target.to_json()
    if verified:
        from tfgpu.kb.queries import verified_status

        for b in doc.get("backends") or []:
            if b.get("recipe"):
                b["verified"] = verified_status(doc["tf"], b["recipe"], b["backend"])
        if doc.get("recipe") and doc.get("backend"):
            doc["verified"] = verified_status(doc["tf"], doc["recipe"], doc["backend"])
    return doc


# --------------------------------------------------------------------------- redaction

_HOME = re.compile(r"(/home/|/Users/|\\Users\\|/export/home/)([^/\\\s:;,'\"]+)")
#: What may surround a name that is a whole path component (or a whole value, or a URL's host).
_BEFORE = r"(?:(?<=[/\\@])|(?<=://)|^)"
_AFTER = r"(?=[/\\:]|$|[\s;,'\"])"


def redactor(user: str | None = None, host: str | None = None, home: str | None = None,
             others: tuple[tuple[str, str], ...] = ()) -> Any:
    """A function that removes user names, host names and token-like strings from a value.

    A user or host name is matched as a whole path component, a whole value or a URL's host, in any
    case: a user called `cuda` or `python` must not turn /usr/bin/python3 or CUDA 12.4 into something
    else (the report would judge another machine). The short host name goes too when the name is a
    fully qualified one."""
    try:
        import getpass

        user = user if user is not None else getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers)
        user = ""
    import socket

    from tfgpu.core.termtext import mask_secrets

    host = host if host is not None else socket.gethostname()
    home = home if home is not None else str(Path.home())
    names: list[tuple[re.Pattern[str], str]] = []

    def add(name: str, mark: str) -> None:
        # in any case as a whole path component, value or URL host (/home/Alice, C:\\Users\\ALICE)...
        names.append((re.compile(_BEFORE + re.escape(name) + _AFTER, re.IGNORECASE), mark))
        # ...and as a word of free text in its own case ("probed on gpu-box-17 by alice")
        names.append((re.compile(rf"(?<![A-Za-z0-9_-]){re.escape(name)}(?![A-Za-z0-9_-])"), mark))

    for name, mark in ((user, "<user>"), (host, "<host>"), *others):  # others: the names a facts file gives
        if name and len(name) > 1:
            add(name, mark)
            short = name.split(".", 1)[0]
            if mark == "<host>" and short != name and len(short) > 1:  # an FQDN: its short name is private too
                add(short, "<host>")

    def clean(text: str) -> str:
        if home and home not in ("/", "~") and len(home) > 1:
            # only where a path starts with it: /var/home/alice is not ~ with /var in front
            text = re.sub(r"(?<![^\s:;,'\"=(\[])" + re.escape(home) + r"(?=[/\\]|$|[\s:;,'\"])", "~", text)
        text = _HOME.sub(lambda m: m.group(1) + "<user>", text)
        text = mask_secrets(text, "<redacted>", keep_user=False)  # the one secrets mask
        for pattern, mark in names:
            text = pattern.sub(mark, text)
        return text

    return clean


#: Fields whose values are tfgpu's own vocabulary (an OS, a status, a schema id), never private: a user or
#: host called `linux` or `ready` must not change them.
_VOCABULARY = frozenset({"schema", "os", "arch", "status", "verdict", "backend", "tool", "id", "kind", "mode",
                         "severity", "confidence", "subdir", "method", "machine", "family", "manager", "recipe",
                         "tf", "version", "python", "cuda", "cudnn", "driver", "cc", "compute_capability"})


def names_in(doc: Any) -> tuple[tuple[str, str], ...]:
    """The user and host names a report's facts give (a facts file is another machine's): its host name and
    the user its container probe recorded, to be redacted as this machine's own are."""
    facts = doc.get("facts") if isinstance(doc, Mapping) else None
    facts = facts if isinstance(facts, Mapping) else doc if isinstance(doc, Mapping) else {}
    plat = facts.get("platform")
    containers = facts.get("containers")
    group = containers.get("docker_group") if isinstance(containers, Mapping) else None
    found = [(plat.get("hostname") if isinstance(plat, Mapping) else None, "<host>"),
             (group.get("user") if isinstance(group, Mapping) else None, "<user>")]
    return tuple((str(name), mark) for name, mark in found if isinstance(name, str) and name.strip())


def redact(obj: Any, clean: Any = None) -> Any:
    """Redact every string value inside a JSON-like value. Keys are never changed: they are the
    document's structure (a redacted report must judge the same machine as the original). Without
    ``clean``: this machine's names and those the document's own facts give (:func:`names_in`)."""
    clean = clean or redactor(others=names_in(obj))
    if isinstance(obj, str):
        return clean(obj)
    if isinstance(obj, dict):
        return {k: v if k in _VOCABULARY and isinstance(v, str) else redact(v, clean) for k, v in obj.items()}
    if isinstance(obj, list):
        return [redact(v, clean) for v in obj]
    return obj


# --------------------------------------------------------------------------- human report


def _group(check_id: str) -> str:
    for title, prefixes in GROUPS:
        if check_id.startswith(prefixes):
            return title
    return "Other"


def container_route_shown(doc: Mapping[str, Any]) -> bool:
    """Whether the human report shows the container route beside the other backends: only where it could run,
    an NVIDIA GPU and an installed container runtime (``--backend container|docker|podman|apptainer`` asks for
    it and judges it alone). Its findings stay in the JSON either way."""
    facts = doc.get("facts") or {}
    containers = facts.get("containers") if isinstance(facts.get("containers"), Mapping) else {}
    return bool(facts.get("gpus")) and bool((containers or {}).get("runtimes"))


def _without_containers(t: Mapping[str, Any]) -> dict[str, Any]:
    """A target as the report shows it where the container route does not belong: no container backend, no
    blocker tagged with it, unless the target's own backend is the container one."""
    if t.get("backend") == "container":
        return dict(t)
    kept = [b for b in t.get("backends") or [] if b.get("backend") != "container"]
    tags = tuple(f"[container: {b.get('recipe')}]" for b in t.get("backends") or [] if b.get("backend") == "container")
    blockers = [b for b in t.get("blockers") or [] if not (tags and str(b.get("summary", "")).startswith(tags))]
    return {**t, "backends": kept, "blockers": blockers}


def render_human(doc: Mapping[str, Any], out: TextIO, *, color: bool | None = None, verbose: bool = True) -> None:
    """The doctor's report for a person (tfgpu.render.output: styles only on a terminal without NO_COLOR;
    ``color`` forces the answer). On a terminal lines wrap at its width (COLUMNS wins), never inside a
    command; in a pipe or a file nothing wraps and no reason is cut. Without ``verbose`` (`tfgpu doctor`
    without --verbose) a target shows what to act on: its blockers, and its open caveats as far as they need
    acting on; the recipes' verification and the caveats a backend choice handles are left to --verbose."""
    from tfgpu.core.safety import terminal_safe_doc
    from tfgpu.render import output

    # facts come from this machine's tools or from a file: no escape sequence (CSI, OSC 8 links, a
    # window title) and no lone surrogate reaches the terminal raw
    doc = cast("Mapping[str, Any]", terminal_safe_doc(doc))
    styled = output.use_style(out) if color is None else color
    console = output.fitted_console(file=out, style=styled)
    _say = functools.partial(_print, console)
    facts = doc.get("facts", {})
    plat = facts.get("platform") or {}
    _say(f"tfgpu {doc['tfgpu_version']} doctor · knowledge base {doc['data_version']}", "bold")
    if plat:
        _say("machine: " + " ".join(str(x) for x in (plat.get("os"), plat.get("distro"), plat.get("arch")) if x), "dim")
    if doc.get("overrides"):
        _say("overrides active: " + ", ".join(doc["overrides"]), "yellow")
    env = doc.get("environment")
    if env:  # the installed TensorFlow's verdict opens the report (and replaces the old one-line check)
        from tfgpu.render.environment import environment_lines

        console.print()
        for text, style in environment_lines(env):
            _say(text, style)
    _render_checks(console, doc, skip_tf=bool(env))
    targets = doc.get("targets", [])
    if not container_route_shown(doc):
        targets = [_without_containers(t) for t in targets]
    if len(targets) == 1:
        _render_target(console, targets[0], verbose=verbose)
    elif targets and doc.get("no_gpu"):  # the machine blocks every release alike: say so once
        _say(f"\nNo TensorFlow release can use a GPU here ({len(targets)} releases checked):", "bold")
        for reason in doc["no_gpu"]:
            _say(f"  ✗ {reason}", "red")
    elif targets:
        _render_series(console, targets)
    _render_recommendation(console, doc.get("recommendation"))
    note = knowledge_note(doc)
    if note:  # once, at the end: old knowledge, or a TensorFlow here newer than it knows
        _print(console, f"\nnote: {note}", "yellow")


def _print(console: Any, text: str, style: str = "") -> None:
    """One line of the report, wrapped (tfgpu.render.output.print_wrapped: never inside a command)."""
    from rich.text import Text

    from tfgpu.render import output

    output.print_wrapped(console, Text(text, style=style))


def _render_checks(console: Any, doc: Mapping[str, Any], *, skip_tf: bool) -> None:
    from rich.text import Text

    from tfgpu.render import output

    current = None
    for check in doc["checks"]:
        if skip_tf and check["id"].startswith("tf."):
            continue
        group = _group(check["id"])
        if group != current:
            current = group
            _print(console, f"\n{group}", "bold")
        line = Text(f"  [{MARKS.get(check['status'], '?')}] ", style=STYLES.get(check["status"], ""))
        line.append(check["summary"])
        if check.get("source") and check["status"] != SKIP:
            line.append(f"  ({check['source']})", style="dim")
        output.print_wrapped(console, line, indent="      ")
        if check.get("evidence") and check["status"] in (WARN, FAIL, ERROR):
            _print(console, f"      evidence: {check['evidence']}", "dim")
        if check.get("fix") and check["status"] in (WARN, FAIL, ERROR):
            _print(console, f"      fix: {check['fix']}", "cyan")


def _render_target(console: Any, t: Mapping[str, Any], *, verbose: bool = True) -> None:
    """`doctor --tf X`: the target's verdict, its blockers and caveats with their fixes, the container route."""
    from tfgpu.render.output import brief

    _print(console, f"\nTensorFlow {t['tf']}: {t['verdict'].upper()}"
           + (f" via {t['backend']} ({t['recipe']})" if t.get("backend") and t["verdict"] != BLOCKED else ""),
           "bold " + STYLES.get(t["verdict"], ""))
    hidden = False  # a caveat left out or shortened: the report then says where the rest is
    for b in t.get("backends") or []:
        if b.get("verified") and verbose:
            _print(console, f"  recipe {b['recipe']} ({b['backend']}): {b['verified']['text']}",
                   "green" if b["verified"]["status"] == "verified" else "dim")
    shown, others = chosen_blockers(t)
    for b in shown:
        _print(console, f"  ✗ {b['summary']}", "red")
        if b.get("fix"):
            _print(console, f"      fix: {b['fix']}", "cyan")
    if others:
        _print(console, f"  {others}", "dim")
    for c in t["caveats"]:
        if c.get("mitigated_by") and not verbose:  # handled by the backend tfgpu takes: nothing to act on
            hidden = True
            continue
        summary = c["summary"] if verbose else brief(c["summary"])
        hidden = hidden or summary != c["summary"]
        _print(console, f"  ! {summary}", "dim" if c.get("mitigated_by") else "yellow")
        if c.get("mitigated_by"):
            _print(console, f"      handled: {c['mitigated_by']}", "dim")
        elif c.get("fix"):
            _print(console, f"      fix: {c['fix']}", "cyan")
    for b in t.get("backends") or []:
        if b.get("backend") != "container" or t.get("backend") == "container":
            continue
        where = f" with {b['runtime']}" if b.get("runtime") else ""
        _print(console, f"\n  Container route: {'ready' if b['viable'] else 'blocked'} "
               f"({b.get('image') or 'no image'}{where})", "bold " + ("green" if b["viable"] else "red"))
        for f in b["blockers"]:
            _print(console, f"  ✗ {f['summary']}", "red")
            if f.get("fix"):
                _print(console, f"      fix: {f['fix']}", "cyan")
        for f in b["caveats"]:
            _print(console, f"  ! {f['summary']}", "yellow")
    if hidden:
        _print(console, f"  every detail: tfgpu doctor --tf {t['tf']} --verbose (or --json)", "dim")


def _render_series(console: Any, targets: list[dict[str, Any]]) -> None:
    """The doctor without --tf: one row per series. In a pipe the table is as wide as its rows (no reason
    cut); on a terminal the reasons fold at its width."""
    from rich.table import Table
    from rich.text import Text

    from tfgpu.render import output

    _print(console, "\nTensorFlow releases on this machine (newest of each series)", "bold")
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    with_container = any(b.get("backend") == "container" for t in targets for b in t.get("backends") or [])
    for col in ("release", "verdict", "backend", *(("container",) if with_container else ()), "why"):
        table.add_column(col, overflow="fold")
    for t in targets:
        why = target_why(t)
        cells: list[Any] = [t["tf"], Text(t["verdict"], style=STYLES.get(t["verdict"], "")), t.get("backend") or ""]
        if with_container:
            cb = next((b for b in t.get("backends") or [] if b.get("backend") == "container"), None)
            cells.append(Text("ready" if cb and cb["viable"] else "blocked" if cb else "",
                              style="green" if cb and cb["viable"] else "red"))
        table.add_row(*cells, why)
    output.print_table(console, table)
    _print(console, "every reason and its fix: tfgpu doctor --tf RELEASE", "dim")


def target_why(t: Mapping[str, Any]) -> str:
    """Why a target is not simply ready: its first blocker, else its first caveat nothing handles ("" when
    ready). The series table, the CI log and the step summary say the same."""
    if t.get("blockers"):
        return str(t["blockers"][0].get("summary") or "")
    open_caveats = [c for c in t.get("caveats") or [] if not c.get("mitigated_by")]
    return str(open_caveats[0].get("summary") or "") if open_caveats else ""


def _render_recommendation(console: Any, rec: Mapping[str, Any] | None) -> None:
    console.print()
    if rec and rec.get("why_not"):
        _print(console, f"Not {rec['instead_of']}: {rec['why_not']}", "red")
    if rec and rec.get("backend") == "cpu":
        _print(console, f"Recommendation: TensorFlow {rec['tf']} on the CPU (no usable GPU here)", "bold green")
        _print(console, f"  {rec['command']}", "bold")
    elif rec:
        instead = f" instead of {rec['instead_of']}" if rec.get("instead_of") else ""
        _print(console, f"Recommendation{instead}: TensorFlow {rec['tf']} with the {rec['backend']} backend "
               f"({rec['verdict']})", "bold green")
        if rec.get("needs"):  # nothing installed here can build it yet
            _print(console, f"  first: {rec['needs']}", "yellow")
        _print(console, f"  {rec['command']}", "bold")
    else:
        _print(console, "Recommendation: none — no TensorFlow release can use a GPU here as the machine is; "
               "fix the ✗ items above first.", "bold red")
        _print(console, "  meanwhile, on the CPU: tfgpu create --tf latest --cpu", "dim")


def knowledge_note(doc: Mapping[str, Any]) -> str | None:
    """The document's one note about its knowledge (tfgpu.kb.freshness), or None."""
    knowledge = doc.get("knowledge")
    note = knowledge.get("note") if isinstance(knowledge, Mapping) else None
    return str(note) if note else None


def clip(text: str, limit: int) -> str:
    """``text`` cut at a word boundary to at most ``limit`` characters, with an ellipsis when cut."""
    from tfgpu.core.errors import clip_words

    return clip_words(text, limit)


# --------------------------------------------------------------------------- CI


def ci_annotations(doc: Mapping[str, Any]) -> list[str]:
    """GitHub Actions workflow commands: an error for each failing check and each blocker of a blocked
    `--tf` target, a warning for each warning check and each caveat of the target that nothing handles.
    Every value is escaped for a workflow command (its data and its title property)."""
    lines = []
    for c in doc["checks"]:
        if c["status"] in (FAIL, ERROR, WARN):
            level = "warning" if c["status"] == WARN else "error"
            lines.append(_annotation(level, f"tfgpu {c['id']}", c["summary"], c.get("fix")))
    targets = doc["targets"]
    if len(targets) == 1:
        t = targets[0]
        if t["verdict"] == BLOCKED:
            for b in t["blockers"]:
                lines.append(_annotation("error", f"tfgpu TensorFlow {t['tf']} blocked", b["summary"], b.get("fix")))
        for c in t.get("caveats") or []:
            if not c.get("mitigated_by"):
                lines.append(_annotation("warning", f"tfgpu TensorFlow {t['tf']} caveat", c["summary"], c.get("fix")))
    return lines


def _annotation(level: str, title: str, message: str, fix: str | None) -> str:
    text = str(message) + (f" — fix: {fix}" if fix else "")
    return f"::{level} title={_escape_property(title)}::{_escape(text)}"


def _escape(text: str) -> str:
    """A workflow command's data (actions/toolkit, command.ts escapeData)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    """A workflow command's property value, e.g. its title (actions/toolkit, command.ts escapeProperty)."""
    return _escape(text).replace(":", "%3A").replace(",", "%2C")


def step_summary(doc: Mapping[str, Any]) -> str:
    """A Markdown summary for $GITHUB_STEP_SUMMARY."""
    out = [f"## tfgpu doctor ({doc['tfgpu_version']}, knowledge base {doc['data_version']})", "",
           "| check | status | summary |", "|---|---|---|"]
    if doc.get("overrides"):
        out[1:1] = [f"**Overrides active (not probed):** {_md(', '.join(doc['overrides']))}", ""]
    for c in doc["checks"]:
        out.append(f"| `{c['id']}` | {MARKS.get(c['status'], '?')} {c['status']} | {_md(c['summary'])} |")
    out += ["", "| TensorFlow | verdict | backend | why |", "|---|---|---|---|"]
    for t in doc["targets"]:
        out.append(f"| {_md(str(t['tf']))} | {_md(str(t['verdict']))} | {_md(str(t.get('backend') or ''))} | "
                   f"{_md(target_why(t))} |")
    rec = doc.get("recommendation")
    out += ["", f"**Recommendation:** {_md_code(str(rec['command']))}" if rec else "**Recommendation:** none", ""]
    if rec and rec.get("needs"):
        out[-1:-1] = [f"first: {_md(str(rec['needs']))}"]
    note = knowledge_note(doc)
    if note:
        out += [f"**Note:** {_md(note)}", ""]
    return "\n".join(out)


def _md(text: str) -> str:
    """A value from the facts as plain text in a Markdown table cell: one line, no HTML (``<img src=...>``
    would load from anywhere), no Markdown link, image or code span (GitHub renders the job summary)."""
    import html
    import re

    text = html.escape(" ".join(text.splitlines()), quote=False)
    return re.sub(r"([\\`*_\[\]!|])", r"\\\1", text)


def _md_code(text: str) -> str:
    """A command as a Markdown code span: one line, fenced with more backquotes than it holds."""
    text = " ".join(text.splitlines())
    fence = "`" * (max((len(r) for r in re.findall(r"`+", text)), default=0) + 1)
    return f"{fence} {text} {fence}" if "`" in text else f"`{text}`"


def plain_log(doc: Mapping[str, Any]) -> str:
    from tfgpu.core.safety import comment_safe  # one line per check, whatever the facts' strings hold

    lines = [comment_safe(f"overrides active (not probed): {', '.join(doc['overrides'])}")] if doc.get("overrides") else []
    for c in doc["checks"]:
        lines.append(f"[{MARKS.get(c['status'], '?')}] {c['id']}: {comment_safe(str(c['summary']))}")
    for t in doc["targets"]:
        why = target_why(t)
        lines.append(comment_safe(f"TensorFlow {t['tf']}: {t['verdict']}" + (f" ({t['backend']})" if t.get("backend")
                                                                            else "") + (f": {why}" if why else "")))
    if doc.get("environment"):
        lines.append(comment_safe(f"environment: {doc['environment'].get('summary')}"))
    rec = doc.get("recommendation")
    lines.append(f"recommendation: {rec['command']}" if rec else "recommendation: none")
    if rec and rec.get("needs"):
        lines.append(comment_safe(f"first: {rec['needs']}"))
    note = knowledge_note(doc)
    if note:
        lines.append(comment_safe(f"note: {note}"))
    return "\n".join(lines) + "\n"


def write_step_summary(doc: Mapping[str, Any], env: Mapping[str, str]) -> None:
    path = env.get("GITHUB_STEP_SUMMARY")
    if path:
        # a lone surrogate in the facts ("\udcff" is valid JSON) is written escaped, never a crash
        with Path(path).open("a", encoding="utf-8", errors="backslashreplace") as fh:
            fh.write(step_summary(doc))
