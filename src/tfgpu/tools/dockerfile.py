"""Dockerfiles as `tfgpu lint` reads them: instructions (continuations, heredoc-free), ARG/ENV substitution
bounded in size, build stages and their base images."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence

from tfgpu.core.record import record

_DIRECTIVE = re.compile(r"^#\s*(escape|syntax|check)\s*=\s*(\S+)\s*$", re.IGNORECASE)


INSTRUCTIONS = frozenset({"FROM", "RUN", "CMD", "LABEL", "MAINTAINER", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT",
                          "VOLUME", "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL"})


@record
class Instruction:
    cmd: str  # upper case, e.g. "RUN"; a line that is no instruction keeps its first word as written
    args: str  # the arguments, continuation lines joined with a space
    line: int  # 1-based line of the instruction's first line
    known: bool = True


def parse_dockerfile(text: str) -> list[Instruction]:
    """Instructions in order. Parser directives (``# escape=``` ``) are honoured only before the first
    instruction or comment, as BuildKit does; comment lines inside a continued instruction are dropped;
    a heredoc (``RUN <<EOF``) runs to its terminator."""
    lines = text.splitlines()
    escape = "\\"
    out: list[Instruction] = []
    i = 0
    directives_open = True
    while i < len(lines):
        raw = lines[i]
        stripped = raw.strip()
        if directives_open and (m := _DIRECTIVE.match(stripped)):
            if m.group(1).lower() == "escape" and m.group(2) in ("\\", "`"):
                escape = m.group(2)
            i += 1
            continue
        directives_open = False
        if not stripped or stripped.startswith("#"):
            i += 1
            continue
        start = i
        parts = [stripped]
        while parts[-1].endswith(escape) and i + 1 < len(lines):
            parts[-1] = parts[-1][:-1].rstrip()
            i += 1
            nxt = lines[i].strip()
            while nxt.startswith("#") and i + 1 < len(lines):  # comments inside a continued instruction
                i += 1
                nxt = lines[i].strip()
            parts.append(nxt)
        if parts[-1].endswith(escape):
            parts[-1] = parts[-1][:-1].rstrip()
        joined = " ".join(p for p in parts if p)
        word, _, args = joined.partition(" ")
        heredocs = re.findall(r"<<-?[\"']?([A-Za-z_][A-Za-z0-9_]*)[\"']?", args)
        for marker in heredocs:  # body lines up to the terminator belong to the instruction
            body = []
            while i + 1 < len(lines):
                i += 1
                if lines[i].strip() == marker:
                    break
                body.append(lines[i])
            args += "\n" + "\n".join(body)
        cmd = word.upper()
        out.append(Instruction(cmd if cmd in INSTRUCTIONS else word, args.strip(), start + 1, cmd in INSTRUCTIONS))
        i += 1
    return out


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?([-+])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


#: An ARG value after substitution is cut here: ARGs that repeat each other (ARG B=$A$A..., ARG C=$B$B...)
#: grow geometrically, and a 5 KB Dockerfile expanded to gigabytes. An image reference is at most 255.
MAX_SUBSTITUTED_CHARS = 64 * 1024


def substitute(text: str, values: Mapping[str, str]) -> str:
    """``${VAR}``, ``${VAR:-default}``, ``${VAR:+alt}`` and ``$VAR`` as Docker expands them in FROM/ENV; the
    result is cut at :data:`MAX_SUBSTITUTED_CHARS` (built piece by piece, never whole first)."""
    def repl(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(4)
        value = values.get(name, "")
        if m.group(2) == "-":
            return value or m.group(3) or ""
        if m.group(2) == "+":
            return m.group(3) or "" if value else ""
        return value
    pieces: list[str] = []
    size = pos = 0
    for m in _VAR.finditer(text):
        pieces += [text[pos:m.start()], repl(m)]
        size += m.start() - pos + len(pieces[-1])
        pos = m.end()
        if size > MAX_SUBSTITUTED_CHARS:
            return "".join(pieces)[:MAX_SUBSTITUTED_CHARS]
    pieces.append(text[pos:])
    return "".join(pieces)[:MAX_SUBSTITUTED_CHARS]


#: shlex builds each word a character at a time (quadratic in a word's length): past this many characters
#: a text is split on whitespace instead (a 900 KB RUN line took 13 s; real instructions are a few KB).
MAX_SHLEX_CHARS = 64 * 1024


def _words(text: str) -> list[str]:
    """Shell words of ``text`` (shlex), or its whitespace-separated words when it is unbalanced or huge."""
    if len(text) <= MAX_SHLEX_CHARS:
        try:
            return shlex.split(text, posix=True)
        except ValueError:
            pass
    return text.split()


def _key_values(args: str) -> dict[str, str]:
    """``ENV``/``ARG`` arguments: ``K=V K2="V 2"`` or the legacy ``K V`` form."""
    words = _words(args)
    if not words:
        return {}
    if "=" not in words[0]:
        return {words[0]: " ".join(words[1:])} if len(words) > 1 else {words[0]: ""}
    out = {}
    for w in words:
        k, sep, v = w.partition("=")
        if sep:
            out[k] = v
        else:
            out[k] = ""
    return out


def _exec_form(args: str) -> str:
    """``RUN ["pip", "install", "x"]`` (the exec form, a JSON array) as the words it runs; else as written."""
    import json

    if args.lstrip().startswith("["):
        try:
            words = json.loads(args)
        except (ValueError, RecursionError):  # not JSON, or nested deeper than the decoder goes: as written
            return args
        if isinstance(words, list) and all(isinstance(w, str) for w in words):
            return shlex.join(words)
    return args


@record
class Stage:
    image: str  # after ARG substitution
    name: str
    line: int
    env: dict[str, tuple[str, int]]  # ENV set in this stage: name -> (value, line)
    runs: tuple[tuple[str, int], ...]


def stages(instructions: Sequence[Instruction]) -> list[Stage]:
    """Build stages: each FROM's image (global ARG defaults substituted; a stage name as image refers to
    that stage's image), its ENV and its RUN lines."""
    global_args: dict[str, str] = {}
    out: list[Stage] = []
    names: dict[str, str] = {}
    for ins in instructions:
        if ins.cmd == "ARG" and not out:
            for k, v in _key_values(ins.args).items():
                global_args[k] = substitute(v, global_args)
        elif ins.cmd == "FROM":
            words = [w for w in ins.args.split() if not w.startswith("--")]
            image = substitute(words[0], global_args) if words else ""
            name = words[2] if len(words) >= 3 and words[1].lower() == "as" else ""
            image = names.get(image.lower(), image)
            if name:
                names[name.lower()] = image
            out.append(Stage(image, name, ins.line, {}, ()))
        elif out and ins.cmd == "ENV":
            for k, v in _key_values(ins.args).items():
                out[-1].env[k] = (v, ins.line)
        elif out and ins.cmd == "RUN":
            out[-1] = Stage(out[-1].image, out[-1].name, out[-1].line, out[-1].env,
                            (*out[-1].runs, (_exec_form(ins.args), ins.line)))
    return out
