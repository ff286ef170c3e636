"""Output that fits (issue 29, item 5): no hard wrapping in a pipe or a file (COLUMNS honoured), wrapping at the
terminal's width never inside a command line, no reason cut with "…" in the doctor's table, and every
`tfgpu …` command that the doctor, explain and lint print for the casebook parses as tfgpu's CLI takes it."""

from __future__ import annotations

import io
import json
import re
import shlex
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

from tests import TESTS
from tests.casebook import load_cases
from tfgpu.backends.names import BACKENDS, CONTAINER_BACKENDS
from tfgpu.kb.versions import Target
from tfgpu.render import output

Cli = Callable[..., tuple[int, str, str]]
CASES = load_cases()
LOGS = sorted((TESTS / "data" / "logs").glob("*.log"))
LINTED = sorted(p for p in (TESTS / "data" / "lint").iterdir() if p.name != "SOURCES.md")
NO_GPU = {"schema": "tfgpu.facts/1", "platform": {"os": "linux", "arch": "x86_64", "glibc": "2.36"},
          "python": {"current": "3.11.4", "interpreters": [{"version": "3.11.4", "path": "/usr/bin/python3.11"}]},
          "gpus": [], "driver": {"version": None, "cuda": None},
          "cuda_toolkits": [{"version": "13.0", "path": "/usr/local/cuda-13.0"}]}


@pytest.fixture(autouse=True)
def _no_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)


def _facts(tmp_path: Path, facts: dict[str, Any]) -> str:
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(facts))
    return str(path)


# --------------------------------------------------------------------------- wrapping


def test_a_pipe_gets_whole_lines(cli: Cli, tmp_path: Path) -> None:
    """The doctor's report in a pipe: every blocker, its fix and the command in it on one line each."""
    facts = _facts(tmp_path, NO_GPU)
    _, human, _ = cli("doctor", "--facts", facts, "--tf", "2.2.0")
    _, doc, _ = cli("doctor", "--facts", facts, "--tf", "2.2.0", "--json")
    (target,) = json.loads(doc)["targets"]
    long_ones = [b for b in target["blockers"] if len(b["summary"]) > 100]
    assert long_ones
    lines = human.splitlines()
    for b in target["blockers"]:
        assert any(b["summary"].split("] ", 1)[-1] in line for line in lines), b["summary"]
        assert any(f"fix: {b['fix']}" in line for line in lines), b["fix"]


def test_columns_is_honoured_and_no_command_is_split(cli: Cli, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    facts = _facts(tmp_path, NO_GPU)
    _, doc, _ = cli("doctor", "--facts", facts, "--tf", "2.2.0", "--json")
    commands = {m for t in json.loads(doc)["targets"] for b in t["blockers"] if b.get("fix")
                for m in re.findall(r"tfgpu [^;,]*", b["fix"])}
    assert commands
    for width in (50, 72, 100):
        monkeypatch.setenv("COLUMNS", str(width))
        _, human, _ = cli("doctor", "--facts", facts, "--tf", "2.2.0")
        for line in human.splitlines():
            assert len(line) <= width or line.strip().startswith(tuple(commands)), (width, line)
        for cmd in commands:
            assert any(cmd.strip() in line for line in human.splitlines()), (width, cmd)


def test_the_wrapper_never_breaks_a_command() -> None:
    text = ("      fix: use the conda backend (brings CUDA 10.1 into the environment): tfgpu create --tf 2.2.0 "
            "--backend rattler; or `pip install tensorflow-cpu==2.2.0` for the CPU")
    for width in range(20, 120):
        offsets = output.wrap_offsets(text, width, 10)
        pieces = [text[a:b] for a, b in zip([0, *offsets], [*offsets, len(text)])]
        assert any("tfgpu create --tf 2.2.0 --backend rattler;" in p for p in pieces), (width, pieces)
        assert any("`pip install tensorflow-cpu==2.2.0`" in p for p in pieces), (width, pieces)
        for p in pieces:
            assert len(p.rstrip()) + 10 <= width or " " not in p.strip() or p.strip().startswith(("tfgpu", "`")) \
                or p is pieces[0], (width, pieces)
    assert output.wrap_offsets("use the conda backend here", 12) == [8, 14]  # prose: "conda" is no command


def test_on_a_terminal_lines_wrap_at_its_width(monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.text import Text

    monkeypatch.setenv("COLUMNS", "40")
    buf = io.StringIO()
    console = output.fitted_console(file=buf, style=False)
    assert console.width == 40
    output.print_wrapped(console, Text("  ✗ the Docker daemon is not running here; fix: tfgpu doctor --tf 2.15 "
                                       "--backend docker --json"))
    lines = buf.getvalue().splitlines()
    assert len(lines) > 1
    assert any(line.strip() == "tfgpu doctor --tf 2.15 --backend docker --json" for line in lines), lines
    monkeypatch.delenv("COLUMNS")
    assert output.text_width(io.StringIO()) is None  # a pipe or a file: no width, nothing wraps


def test_the_series_table_cuts_no_reason_in_a_pipe(cli: Cli) -> None:
    case = next(c for c in CASES if c.id == "dlc2465-colab-cuda122-tf210")
    _, human, _ = cli("doctor", "--facts", str(case.path))
    _, doc, _ = cli("doctor", "--facts", str(case.path), "--json")
    assert "…" not in human
    for t in json.loads(doc)["targets"]:
        why = t["blockers"][0]["summary"] if t["blockers"] else ""
        if why:
            assert why in human, why


# --------------------------------------------------------------------------- every printed command parses

def _root() -> Any:
    from tfgpu.cli.app import _register, app

    _register()
    return typer.main.get_command(app)


_STOP = re.compile(r"[;`'\"]|\s—\s")


def _arg_like(token: str) -> bool:
    """A positional argument as tfgpu's commands print them: a placeholder (NAME, REPORT...), a path, a file
    name or a version; a lowercase word is prose ("tfgpu doctor on the machine itself")."""
    return bool(re.fullmatch(r"[A-Z][A-Z0-9_.|-]*(\.\.\.|…)?|[\w.~-]*[/.][\w./~*-]*|\d[\w.]*", token))


def _command_tokens(cmd: Any, tokens: list[str]) -> list[str]:
    """The tokens after a command name that belong to the command: options (with their values), a group's
    subcommand, argument-like positionals; the first prose word ends it."""
    taken: list[str] = []
    i = 0
    while i < len(tokens):
        tok, last = tokens[i].rstrip(".,:)…"), tokens[i] != tokens[i].rstrip(".,:)…")
        if tok == "--":
            return taken + tokens[i:]
        if hasattr(cmd, "commands") and tok in cmd.commands:
            cmd = cmd.commands[tok]
        elif tok.startswith("-"):
            opt = next((p for p in cmd.params if tok.split("=")[0] in getattr(p, "opts", ())), None)
            if opt is not None and not getattr(opt, "is_flag", False) and "=" not in tok and not last \
                    and i + 1 < len(tokens):
                taken.append(tok)
                i += 1
                tok, last = tokens[i].rstrip(".,:)…"), tokens[i] != tokens[i].rstrip(".,:)…")
        elif not _arg_like(tok):
            break
        taken.append(tok)
        if last:
            break
        i += 1
    return taken


def tfgpu_commands(text: str) -> Iterator[str]:
    """Every `tfgpu …` command in ``text``: "tfgpu" then a command name (or anything, inside backquotes),
    to the end of the command: a ";", a quote, a sentence's end, a prose word ("tfgpu doctor on the machine
    itself" is the command `tfgpu doctor`; "tfgpu recommends 2.15" is prose)."""
    root = _root()
    for line in text.splitlines():
        for m in re.finditer(r"(?<![\w/.-])tfgpu (?=[a-z])", line):
            rest = line[m.end():]
            stop = _STOP.search(rest)
            words = (rest[:stop.start()] if stop else rest).split()
            quoted = line[:m.start()].endswith("`")
            name = words[0].rstrip(".,:)…") if words else ""
            if name not in root.commands and not quoted:
                continue
            if name not in root.commands:
                yield "tfgpu " + " ".join(words)
                continue
            yield " ".join(["tfgpu", name, *_command_tokens(root.commands[name], words[1:])])


def _placeholder(value: str) -> bool:
    return bool(re.fullmatch(r"[A-Z][A-Z0-9._|-]*(\.\.\.|…)?", value))


def check_parses(command: str) -> None:
    """`cmd` as tfgpu's CLI parses it (click's make_context: the command and its options exist, their values
    have the right type); --backend, --format and --tf values are also checked against what tfgpu takes."""
    from tfgpu.cli.app import _register, app

    _register()
    cmd: Any = typer.main.get_command(app)
    rest = shlex.split(command)[1:]
    name = "tfgpu"
    while hasattr(cmd, "commands") and rest and not rest[0].startswith("-"):  # the root group, fleet's group
        assert rest[0] in cmd.commands, f"no such command: {rest[0]}"
        name, cmd, rest = rest[0], cmd.commands[rest[0]], rest[1:]
    assert not hasattr(cmd, "commands"), f"{name} needs a subcommand"
    cmd.make_context(name, list(rest))  # click's parse: every option exists, every value has its type
    values = dict(zip(rest, rest[1:]))
    if "--backend" in values and not _placeholder(values["--backend"]):
        assert values["--backend"] in (*BACKENDS, *CONTAINER_BACKENDS), command
    if "--tf" in values and not _placeholder(values["--tf"]):
        Target.parse(values["--tf"])
    if "--format" in values:
        assert values["--format"] in ("sh", "environment.yml", "dockerfile", "apptainer"), command


def _outputs(cli: Cli, every: int) -> Iterator[tuple[str, str]]:
    """The doctor's report for every ``every``-th case (its target and backend), and for a few cases the
    series view, explain of every seed log and lint of every Dockerfile and compose file in tests/data/lint."""
    for case in CASES[::every]:
        argv = ["--facts", str(case.path), "--tf", case.tf]
        if case.backend != "auto":
            argv += ["--backend", case.backend]
        _, out, err = cli("doctor", *argv)
        yield f"doctor {case.id}", out + err
    for case in CASES[::max(every, 1) * 40]:
        _, out, err = cli("doctor", "--facts", str(case.path))
        yield f"doctor {case.id} (series)", out + err
        for log in LOGS:
            _, out, err = cli("explain", str(log), "--facts", str(case.path))
            yield f"explain {log.name} on {case.id}", out + err
        _, out, err = cli("lint", *map(str, LINTED), "--facts", str(case.path))
        yield f"lint on {case.id}", out + err


def _check_all(cli: Cli, every: int) -> None:
    seen: dict[str, str] = {}
    for where, text in _outputs(cli, every):
        for cmd in tfgpu_commands(text):
            seen.setdefault(cmd, where)
    assert len(seen) > 20, sorted(seen)
    bad = []
    for cmd, where in sorted(seen.items()):
        try:
            check_parses(cmd)
        except Exception as exc:  # a click UsageError, an unknown value, ...
            bad.append(f"{where}: {cmd!r}: {type(exc).__name__}: {' '.join(str(exc).split())[:160]}")
    assert not bad, "\n".join(bad)


def test_every_printed_tfgpu_command_parses(cli: Cli) -> None:
    """A third of the casebook (the whole of it: the slow test below)."""
    _check_all(cli, 3)


@pytest.mark.slow
def test_every_printed_tfgpu_command_parses_on_the_whole_casebook(cli: Cli) -> None:
    _check_all(cli, 1)


def test_the_extractor_and_the_parse_check_catch_bad_commands() -> None:
    assert list(tfgpu_commands("fix: tfgpu create --tf 2.2.0 --backend rattler; or tfgpu doctor --tf 2.2")) == [
        "tfgpu create --tf 2.2.0 --backend rattler", "tfgpu doctor --tf 2.2"]
    assert list(tfgpu_commands("run `tfgpu compat --tf 2.2` (details)")) == ["tfgpu compat --tf 2.2"]
    check_parses("tfgpu doctor --tf RELEASE")
    check_parses("tfgpu fleet merge REPORT.json")
    for bad in ("tfgpu compat --gpu 8.6", "tfgpu create --tf 2.2.0 --backend poetry", "tfgpu nosuch",
                "tfgpu plan --tf 2.x.y"):
        with pytest.raises(Exception):  # noqa: B017 - click's and tfgpu's own errors alike
            check_parses(bad)
