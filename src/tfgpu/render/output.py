"""The one output layer: every command writes its human text through here, JSON and generated files too.

- Human text has every secret tfgpu recognises masked (tfgpu.core.termtext.mask_secrets), and no line of it
  starts a GitHub Actions workflow command (tfgpu.core.safety.workflow_safe; wrapped lines included).
- Human text is rich, built from (text, style) pieces and never parsed as markup, so a value from a facts
  file, a lockfile, a log or an option cannot style or redraw the terminal: every piece goes through
  tfgpu.core.safety.safe_console (tfgpu.core.termtext's rules).
- Styles only where they can be read: a terminal, no ``NO_COLOR`` (https://no-color.org), ``TERM`` not
  ``dumb``. Otherwise the text is plain, with no escape sequence at all.
- JSON documents and generated files (a shell script, environment.yml, a Dockerfile) are written plainly:
  they are data for another program, not rich markup.

rich is imported only when human text is printed: the doctor's ``--json`` path never loads it.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, TextIO, Union

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from rich.console import Console

#: A piece of a line: plain text, or (text, rich style name) such as ("READY", "bold green").
Piece = Union[str, "tuple[str, str]"]


def use_style(stream: TextIO | None = None, env: Mapping[str, str] | None = None) -> bool:
    """Whether text written to ``stream`` may carry styles: a terminal (or ``FORCE_COLOR`` set, as rich
    reads it, e.g. for CI logs that show colours), ``NO_COLOR`` unset or empty, ``TERM`` not ``dumb``.
    No rich import."""
    env = os.environ if env is None else env
    if env.get("NO_COLOR", "") != "" or env.get("TERM") == "dumb":
        return False
    if env.get("FORCE_COLOR", "") != "":
        return True
    stream = sys.stdout if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or stream-less file
        return False


def console(*, err: bool = False, file: TextIO | None = None, style: bool | None = None,
            width: int | None = None, soft_wrap: bool = True) -> Console:
    """A rich Console for human text: terminal-safe (tfgpu.core.safety.safe_console), styles only when
    :func:`use_style` says so (``style`` forces the answer, for tests and the doctor's callers), no
    highlighting of numbers or paths. Without ``file`` it writes to the current sys.stdout (or sys.stderr
    with ``err``), looked up at each print."""
    from tfgpu.core.safety import safe_console

    stream = file if file is not None else (sys.stderr if err else sys.stdout)
    styled = use_style(stream) if style is None else style
    kwargs: dict[str, Any] = {"highlight": False, "soft_wrap": soft_wrap, "emoji": False, "markup": False,
                              "force_terminal": styled, "no_color": not styled,
                              "color_system": "auto" if styled else None}
    if file is not None:
        kwargs["file"] = file
        # inside a Jupyter kernel rich would send the text to the notebook as display data instead of the file
        # (tfgpu.api.notebook renders into a StringIO there; tests/unit/api/test_kernel.py)
        kwargs["force_jupyter"] = False
    else:
        kwargs["stderr"] = err
    if width is not None:
        kwargs["width"] = width
    return safe_console(**kwargs)


#: The width a console lays tables out in where nothing wraps (a pipe, a file): no cell folds or is cut.
UNBOUNDED = 10_000


def text_width(stream: TextIO | None = None, env: Mapping[str, str] | None = None) -> int | None:
    """The width human text wraps at: ``COLUMNS`` when it is set (a positive number), else the terminal's own
    width when ``stream`` is a terminal; None for a pipe or a file: no wrapping at all there, so a command
    copied from a log or a CI page is whole."""
    import shutil

    env = os.environ if env is None else env
    cols = env.get("COLUMNS", "").strip()
    if cols.isdigit() and int(cols) > 0:
        return min(int(cols), UNBOUNDED)
    stream = sys.stdout if stream is None else stream
    try:
        if not stream.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    return shutil.get_terminal_size().columns


def fitted_console(*, err: bool = False, file: TextIO | None = None, style: bool | None = None) -> Console:
    """A console for reports (the doctor's, lint's, explain's): as :func:`console`, at :func:`text_width` (a
    pipe: unbounded), with nothing wrapped by rich; :func:`print_wrapped` wraps lines, never inside a
    command."""
    stream = file if file is not None else (sys.stderr if err else sys.stdout)
    return console(err=err, file=file, style=style, width=text_width(stream) or UNBOUNDED, soft_wrap=True)


def print_wrapped(out: Console, text: Any, *, indent: str | None = None) -> None:
    """Print a rich Text (or a string) on ``out``, wrapped at its width (nothing wrapped at :data:`UNBOUNDED`)
    by :func:`wrap_offsets`: never inside a command line. Continuation lines get ``indent`` (default: the
    line's own indentation and four spaces)."""
    from rich.text import Text

    text = text if isinstance(text, Text) else Text(str(text))
    plain = text.plain
    if out.width >= UNBOUNDED or len(plain) <= out.width or "\n" in plain:
        out.print(text, soft_wrap=True)
        return
    lead = plain[:len(plain) - len(plain.lstrip(" "))]
    indent = lead + "    " if indent is None else indent
    pieces = text.divide(wrap_offsets(plain, out.width, len(indent)))
    for i, piece in enumerate(pieces):
        piece.rstrip()
        out.print(piece if i == 0 else Text(indent) + piece, soft_wrap=True)


def print_table(out: Console, table: Any) -> None:
    """A rich table on ``out``; where nothing wraps (:data:`UNBOUNDED`) its lines lose the padding rich puts
    after the last column."""
    if out.width < UNBOUNDED:
        out.print(table)
        return
    with out.capture() as cap:
        out.print(table)
    out.file.write("".join(row.rstrip() + "\n" for row in cap.get().splitlines()))


def brief(text: str, limit: int = 240) -> str:
    """``text`` as far as a reader must act on it: its first clauses (up to a "; " or a sentence's end) that fit in
    ``limit`` characters, then " …"; the whole text where it fits (`--verbose` and the JSON keep it all)."""
    import re

    from tfgpu.core.errors import clip_words

    if len(text) <= limit:
        return text
    kept = ""
    for m in re.finditer(r"(?:; |\. )", text):
        if m.start() + 1 > limit:
            break
        kept = text[:m.start() + (1 if m.group() == ". " else 0)]
    return (kept + " …") if kept else clip_words(text, limit)


#: Words a command line starts with in tfgpu's fixes and hints (a docker/podman/apptainer word only with one
#: of its subcommands after it, so "the docker command" stays prose).
_COMMAND_WORDS = frozenset(("tfgpu", "sudo", "python", "python3", "pip", "pip3", "uv", "conda", "mamba",
                            "micromamba", "nvidia-smi", "nvidia-ctk", "apt-get", "dnf", "zypper", "systemctl",
                            "export", "ldconfig", "curl", "git", "nox"))
_CONTAINER_WORDS = frozenset(("docker", "podman", "apptainer", "singularity"))
_CONTAINER_SUBCOMMANDS = frozenset(("run", "pull", "info", "build", "exec", "version", "images", "compose"))
#: Prose words that end a command line run into a sentence.
_COMMAND_ENDS = frozenset(("or", "and", "then", "—", "instead", "to", "if", "when", "where", "which", "(or",
                           "(and", "as", "so", "because", "first", "after", "before", "else"))


#: Words after which a program's name starts a command ("fix: conda install ...", "or: pip ..."), where
#: elsewhere it is prose ("use the conda backend").
_COMMAND_LEADS = frozenset(("run", "then", "or", "and", "try", "e.g.", "(e.g.", "instead", "with:", "use:"))


def _starts_command(words: list[str], i: int) -> bool:
    import re

    w = words[i].lstrip("(\"'")
    if w in ("tfgpu", "sudo"):
        return True
    lead = i == 0 or words[i - 1].endswith((":", ";", ",")) or words[i - 1] in _COMMAND_LEADS \
        or words[i][0] in "(\"'"
    if not lead:
        return False
    if w in _COMMAND_WORDS or re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", w):
        return True
    return w in _CONTAINER_WORDS and i + 1 < len(words) and words[i + 1] in _CONTAINER_SUBCOMMANDS


def _units(plain: str) -> list[tuple[int, int]]:
    """``plain`` as (start, end) units that a line may break between: words, except that a backquoted span
    and a command line (from a command word to a ";", a "," or a prose word such as "or") are one unit."""
    import re

    spans = [(m.start(), m.end()) for m in re.finditer(r"\S+", plain)]
    words = [plain[a:b] for a, b in spans]
    units: list[tuple[int, int]] = []
    i = 0
    while i < len(words):
        j = i
        if words[i].startswith("`") and words[i].rstrip(".,;:)").count("`") % 2 == 1:
            while j + 1 < len(words) and "`" not in words[j + 1]:
                j += 1
            j = min(j + 1, len(words) - 1)
        elif _starts_command(words, i):
            while j + 1 < len(words) and not words[j].endswith((";", ",")) and words[j + 1] not in _COMMAND_ENDS \
                    and not words[j + 1].startswith("("):
                j += 1
        units.append((spans[i][0], spans[j][1]))
        i = j + 1
    return units


def wrap_offsets(plain: str, width: int, indent: int = 0) -> list[int]:
    """Where to break ``plain`` into lines of at most ``width`` characters (continuation lines start with
    ``indent`` spaces): between :func:`_units` only, so a command is never split; a unit longer than a line
    gets a line of its own and runs past the width."""
    offsets: list[int] = []
    start = 0
    room = width
    for a, b in _units(plain):
        if b - start > room and a > start and plain[start:a].strip():
            offsets.append(a)
            start, room = a, width - indent
    return offsets


def line(*pieces: Piece, one_line: bool = False) -> Any:
    """A rich Text from pieces; strings are literal text, never markup. With ``one_line`` a newline or tab
    inside a value is shown escaped (``\\n``) rather than obeyed."""
    from rich.text import Text

    # made safe here, not only by the console: rich would drop a carriage return or a BEL silently
    return Text.assemble(*((_safe(p[0], one_line), p[1]) if isinstance(p, tuple) else _safe(p, one_line)
                           for p in pieces))


def say(*pieces: Piece, err: bool = False, one_line: bool = False) -> None:
    """One line of human text (pieces as in :func:`line`) on stdout, or stderr with ``err``."""
    lines([pieces], err=err, one_line=one_line)


def lines(rows: Iterable[Sequence[Piece]], *, err: bool = False, one_line: bool = False) -> None:
    """Lines of human text, each a sequence of pieces (as in :func:`line`), on stdout (stderr with ``err``).

    Where no style may be shown (a pipe, NO_COLOR, TERM=dumb) the text is written as rich would write it
    unstyled (tests/unit/render/test_output.py checks that they agree), without importing rich: `tfgpu plan` in a
    script does not pay rich's start-up."""
    stream = sys.stderr if err else sys.stdout
    if use_style(stream):
        out = console(err=err)
        for row in rows:
            out.print(line(*row, one_line=one_line))
        return
    from tfgpu.core.safety import workflow_safe

    stream.write("".join(workflow_safe("".join(_safe(p[0] if isinstance(p, tuple) else p, one_line) for p in row)
                                       .expandtabs(8)) + "\n" for row in rows))


def _safe(text: str, one_line: bool) -> str:
    """Human text as shown: secrets masked (tfgpu.core.termtext.mask_secrets: a channel's or an index's
    password in a step's description, a note, a line of an installer's log), then terminal-safe."""
    from tfgpu.core.termtext import mask_secrets, terminal_safe

    return terminal_safe(mask_secrets(text), keep_newlines=not one_line)


def note(text: str) -> None:
    """A line for the user on stderr (progress, what tfgpu chose and why), kept out of stdout's data."""
    say(text, err=True)


def write_json(doc: object, *, ensure_ascii: bool = True) -> None:
    """A JSON document on stdout, as is: no markup, no styles, no wrapping. With ``ensure_ascii=False``
    non-ASCII text is written as it is where stdout can encode it; a document that holds what it cannot
    (a lone surrogate from someone's report, any non-ASCII under an ASCII locale) is written with JSON's
    \\u escapes instead: the same document, never a UnicodeEncodeError."""
    from tfgpu.core.jsontext import dumps_indented

    text = dumps_indented(doc, ensure_ascii=ensure_ascii)
    if not ensure_ascii:
        try:
            text.encode(getattr(sys.stdout, "encoding", None) or "utf-8")
        except (UnicodeEncodeError, LookupError):
            text = dumps_indented(doc)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def write_document(text: str) -> None:
    """A generated file (a shell script, environment.yml, a Dockerfile, a manifest) on stdout, as is.
    Its renderer has made every value safe for that format (tfgpu.core.safety.comment_safe and friends). A
    lone surrogate (an undecodable byte in a path from a facts file) has no bytes a script can hold: refused."""
    import re

    bad = re.search("[\ud800-\udfff]", text)
    if bad is not None:
        from tfgpu.core.errors import InputError

        line = text.count("\n", 0, bad.start()) + 1
        msg = (f"the generated file would hold a character that is not text (\\u{ord(bad.group(0)):04x}, line {line}): "
               "a value from a facts file or the registry is not valid UTF-8")
        raise InputError(msg, hint="fix that value (a path with an undecodable byte), or plan on this machine without --facts")
    sys.stdout.write(text)
    sys.stdout.flush()


def confirm(question: str, *, default: bool) -> bool:
    """Ask a yes/no question on the terminal (the caller has checked that there is one)."""
    from rich.prompt import Confirm

    try:
        return bool(Confirm.ask(line(question), default=default, console=console(err=True)))
    except EOFError:  # stdin closed mid-question: as Ctrl-C (typer.confirm's Abort), nothing was changed
        raise KeyboardInterrupt from None
