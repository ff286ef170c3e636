"""The one output layer (tfgpu.render.output): rich for people, styles only where they can be read (a terminal,
no NO_COLOR, TERM not dumb), every value terminal-safe and never markup, JSON and generated files plain."""

from __future__ import annotations

import ast
import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import REPO
from tests.conftest import DATA
from tfgpu.cli.app import main
from tfgpu.render import output

SRC = REPO / "src" / "tfgpu"
FACTS = str(DATA / "facts" / "r740-4x-tesla-m60.json")
HOSTILE = "Tesla\x1b]0;pwn\x07\x1b[2J [bold red]M60[/bold red]\u202e"


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def run_on(stdout: io.StringIO, *argv: str) -> tuple[int, str, str]:
    err = Tty()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, stdout.getvalue(), err.getvalue()


@pytest.mark.parametrize(("tty", "env", "expected"), [
    (True, {}, True),
    (True, {"TERM": "xterm-256color"}, True),
    (True, {"NO_COLOR": "1"}, False),
    (True, {"NO_COLOR": ""}, True),  # no-color.org: set and not empty
    (True, {"TERM": "dumb"}, False),
    (False, {}, False),
    (False, {"FORCE_COLOR": "1"}, True),  # as rich reads it: CI logs that show colours
    (True, {"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),  # NO_COLOR wins
])
def test_styles_only_on_a_terminal_without_no_color(tty: bool, env: dict[str, str], expected: bool) -> None:
    assert output.use_style(Tty() if tty else io.StringIO(), env) is expected


@pytest.mark.parametrize("argv", [("plan", "--tf", "2.15"), ("doctor",), ("compat", "--tf", "2.15")])
def test_no_color_means_no_escape_sequence_on_a_terminal(monkeypatch: pytest.MonkeyPatch,
                                                        argv: tuple[str, ...]) -> None:
    # before: the doctor and compat passed no_color=False to rich on a terminal, which overrode NO_COLOR
    monkeypatch.setenv("NO_COLOR", "1")
    facts = ("--facts", FACTS) if argv[0] != "compat" else ()
    rc, out, err = run_on(Tty(), *argv, *facts)
    assert rc in (0, 1), err
    assert "TensorFlow" in out
    assert "\x1b" not in out + err


def test_a_terminal_gets_styles_and_a_pipe_gets_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    # --backend conda: with auto, which runner plan picks depends on this machine's tools (uv on PATH in a
    # nox venv, the interpreters installed), and these tests are about the output, not the choice
    _, styled, _ = run_on(Tty(), "plan", "--tf", "2.15", "--facts", FACTS, "--backend", "conda")
    _, plain, _ = run_on(io.StringIO(), "plan", "--tf", "2.15", "--facts", FACTS, "--backend", "conda")
    assert "\x1b[1m" in styled  # bold: the target line
    assert "\x1b" not in plain
    assert plain.splitlines()[0].startswith("TensorFlow 2.15.0 with ")


def test_values_are_neither_escapes_nor_markup_even_on_a_terminal(monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    facts = json.loads(Path(FACTS).read_text())
    facts["conda"]["path"] = "/opt/" + HOSTILE + "/conda"
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(facts))
    rc, out, err = run_on(Tty(), "plan", "--tf", "2.15", "--facts", str(path), "--backend", "conda")
    assert rc in (0, 1), err
    for raw in ("\x07", "\u202e", "\x1b]", "\x1b[2J", "\x1b[1;31m"):
        assert raw not in out + err
    assert "[bold red]M60[/bold red]" in out  # shown as written, not obeyed


def test_say_and_note_write_lines_to_the_current_streams() -> None:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        output.say("a [b]value[/b] ", ("READY", "green"))
        output.note("progress " + "x" * 300)
    assert out.getvalue() == "a [b]value[/b] READY\n"
    assert err.getvalue() == "progress " + "x" * 300 + "\n"  # soft wrap: a long note stays one line


def test_one_line_shows_a_newline_inside_a_value_escaped() -> None:
    assert output.line("a\nb", ("c\td", "bold"), one_line=True).plain == "a\\nbc\\td"


def test_json_is_written_plainly_even_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    rc, out, _ = run_on(Tty(), "plan", "--tf", "2.15", "--facts", FACTS, "--json", "--backend", "conda")
    assert rc in (0, 1)
    assert json.loads(out)["tf"] == "2.15.0"
    assert "\x1b" not in out


@pytest.mark.real_subprocess
@pytest.mark.parametrize("argv", [["plan", "--tf", "2.15", "--facts", FACTS, "--json"],
                                  ["plan", "--tf", "2.15", "--facts", FACTS]])
def test_json_and_unstyled_text_do_not_import_rich(tmp_path: Path, argv: list[str]) -> None:
    """The doctor's --json is checked in tests/unit/cli/test_entry.py; plan's JSON, and its text in a pipe, too."""
    # the doctor leaves with os._exit (no atexit hooks), plan with SystemExit: report on either way out
    probe = ("import atexit, os, sys\nleave = os._exit\n"
             "def modules():\n"
             "    sys.stderr.write('RICH %s\\n' % sorted(m for m in sys.modules if m.split('.')[0] == 'rich'))\n"
             "    sys.stderr.flush()\n"
             "def report(code):\n"
             "    modules(); leave(code)\n"
             "os._exit = report\natexit.register(modules)\n"
             f"sys.argv = ['tfgpu', *{argv!r}]\nfrom tfgpu.cli.entry import main; main()")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path,
                          check=False, timeout=60)
    assert "RICH []" in proc.stderr, proc.stderr[-2000:]


def _calls(path: Path) -> list[str]:
    """Every dotted call name in a module (typer.echo, sys.stdout.write, click.echo...)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            parts, f = [], node.func
            while isinstance(f, ast.Attribute):
                parts.append(f.attr)
                f = f.value
            parts.append(f.id if isinstance(f, ast.Name) else "<expr>")
            names.append(".".join(reversed(parts)))
    return names


def test_commands_write_only_through_the_output_layer() -> None:
    """No command prints past tfgpu.render.output: no typer/click echo, no raw stream writes, no print(), no
    hand-written escape sequence."""
    modules = [SRC / "cli" / "app.py", *sorted((SRC / "cli" / "commands").glob("*.py"))]
    banned = {"typer.echo", "typer.secho", "click.echo", "print", "sys.stdout.write", "sys.stderr.write",
              "typer.confirm", "safe_console"}
    found = {f"{m.name}: {c}" for m in modules for c in _calls(m) if c in banned}
    found |= {f"{m.name}: raw escape" for m in modules if "\\x1b[" in m.read_text(encoding="utf-8")}
    assert found == set()


_TEXT = st.text(alphabet=st.sampled_from([*"ab [/]:=é✓\t\n\r#", "\x1b", "\x07", "\x9b", "\u202e", "\x00", "\x7f"]),
                max_size=40)


@settings(max_examples=100, deadline=None)
@given(rows=st.lists(st.lists(st.one_of(_TEXT, st.tuples(_TEXT, st.sampled_from(["bold", "dim", "red"]))),
                              max_size=4), max_size=4),
       one_line=st.booleans())
def test_the_plain_path_writes_what_rich_writes_without_styles(rows: list[list[output.Piece]],
                                                               one_line: bool) -> None:
    """Where no style may be shown, tfgpu.render.output writes without importing rich: the same text rich would.
    Either way no line starts a GitHub Actions workflow command, however the pieces cut it (issue 28)."""
    plain = io.StringIO()
    with contextlib.redirect_stdout(plain):
        output.lines(rows, one_line=one_line)
    rich = io.StringIO()
    console = output.console(file=rich, style=False)
    for row in rows:
        console.print(output.line(*row, one_line=one_line))
    assert plain.getvalue() == rich.getvalue()
    assert [ln for ln in plain.getvalue().splitlines() if ln.lstrip().startswith("::") or "##[" in ln] == []


@pytest.mark.parametrize(("answer", "expected"), [("y\n", True), ("n\n", False), ("\n", False)])
def test_confirm_asks_on_stderr_with_the_question_made_safe(monkeypatch: pytest.MonkeyPatch, answer: str,
                                                            expected: bool) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(answer))
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        assert output.confirm("Delete /tmp/\x1b]0;pwn\x07x [bold]?", default=False) is expected
    assert out.getvalue() == ""
    assert "Delete /tmp/x [bold]?" in err.getvalue()
    assert "\x1b" not in err.getvalue()


def test_confirm_on_a_closed_stdin_is_an_interruption(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    with contextlib.redirect_stderr(io.StringIO()), pytest.raises(KeyboardInterrupt):
        output.confirm("Create it?", default=True)


def test_bracketed_text_in_a_table_is_shown_not_read_as_markup() -> None:
    # before: the doctor's table read each "why" as rich markup, so the "[pip: pip-and-cuda]" tag that
    # says which recipe is blocked vanished from every blocked row
    rc, out, err = run_on(io.StringIO(), "doctor", "--facts", FACTS)
    assert rc in (0, 1), err
    why = [ln for ln in out.splitlines() if ln.startswith("2.21.0 ")]
    assert why, out
    assert "[pip: pip-and-cuda]" in why[0]


def test_the_cache_note_quotes_its_path_terminal_safe(capsys: pytest.CaptureFixture[str]) -> None:
    # before: the note about a corrupt knowledge-base cache wrote its path (from TFGPU_CACHE_DIR) raw
    from tfgpu.kb import cache as _kbcache

    _kbcache.note("ignored the corrupt cache /tmp/\x1b]0;pwn\x07c\u202e\nx.json; rebuilt it")
    err = capsys.readouterr().err
    assert err == "tfgpu: note: ignored the corrupt cache /tmp/c\\u202e\\nx.json; rebuilt it\n"
