"""Every `tfgpu ...` command that `tfgpu explain` prints can be run as printed (issue 29, item 9: explain suggested
`tfgpu compat --gpu`, an option that does not exist). The commands are taken from what explain says about every
catalog sample and also-line, about every real log (with and without machine facts), and from its human output, then
parsed by the CLI's own parser (click), as `--help` would."""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from typing import Any

import pytest

from tests.conftest import DATA
from tfgpu.cli.app import _click_exceptions
from tfgpu.judge import explain as ex
from tfgpu.kb.parse import load_toml
from tfgpu.tools import explain as exread

LOGS = DATA / "logs"
#: Punctuation that ends a command inside a sentence ("... tfgpu compat --tf VERSION; e.g. ...").
_END = ".,;:)\"'`"


@cache
def tfgpu_commands() -> dict[str, Any]:
    """`tfgpu` subcommand name -> click command (groups such as fleet keep their subcommands)."""
    import typer.main

    from tfgpu.cli.app import _register, app

    _register()
    group = typer.main.get_command(app)
    return dict(group.commands)  # type: ignore[attr-defined]


def commands_in(text: str) -> Iterator[list[str]]:
    """Each `tfgpu NAME ...` in ``text`` as argv: the subcommand, then its options and their values, up to the first
    word that is neither (prose) or a word that ends the sentence."""
    words = text.split()
    for i, word in enumerate(words):
        if word.strip("`'\"(") != "tfgpu" or i + 1 >= len(words):
            continue
        name = words[i + 1].rstrip(_END)
        cmd = tfgpu_commands().get(name)
        if cmd is None:
            if re.fullmatch(r"[a-z]+", name) and words[i + 1][-1:] not in _END and name not in PROSE:
                yield [name]  # an unknown subcommand is an error too
            continue
        argv = [name]
        rest = words[i + 2:]
        if getattr(cmd, "commands", None) and rest and rest[0].rstrip(_END) in cmd.commands:
            argv.append(rest[0].rstrip(_END))
            cmd = cmd.commands[rest[0].rstrip(_END)]
            rest = rest[1:]
        if words[i + 1][-1:] in _END:
            rest = []
        yield argv + list(_options(cmd, rest))


#: Words after "tfgpu" that are prose, not a subcommand ("tfgpu never runs it", "tfgpu does not know").
PROSE = frozenset({"never", "does", "cannot", "is", "can", "will", "has", "sees", "shows", "knows", "to", "build", "choose",
                   "pin", "pins", "sets", "picks", "makes", "brings", "lists", "judges", "reads"})


def _options(cmd: Any, words: list[str]) -> Iterator[str]:
    takes_value = {o: not getattr(p, "is_flag", False) and not getattr(p, "count", False)
                   for p in cmd.params if getattr(p, "param_type_name", "") == "option" for o in p.opts}
    expect_value = False
    for word in words:
        token = word.rstrip(_END)
        ends = word != token
        if expect_value:
            yield token
            expect_value = False
        elif token.startswith("-"):
            yield token
            expect_value = takes_value.get(token.split("=")[0], False) and "=" not in token
        else:
            return
        if ends:
            return


def parse(argv: list[str]) -> str | None:
    """None when the CLI's parser accepts ``argv``, else its complaint."""
    cmd = tfgpu_commands().get(argv[0])
    if cmd is None:
        return f"no such command: tfgpu {argv[0]}"
    args = argv[1:]
    if getattr(cmd, "commands", None) and args and args[0] in cmd.commands:
        cmd, args = cmd.commands[args[0]], args[1:]
    errors = _click_exceptions()
    try:
        cmd.make_context(f"tfgpu {' '.join(argv[:1])}", list(args), resilient_parsing=False)
    except errors.UsageError as exc:
        return str(exc.format_message())
    return None


FACTS = [None, {"driver": {"version": "440.33.01", "cuda": "10.2"}, "gpus": [{"compute_capability": "3.0"}],
                "cuda_toolkits": [{"version": "10.1", "path": "/usr/local/cuda-10.1"}],
                "cudnn": [{"version": "7.6.5", "path": "/usr/include/cudnn.h"}], "platform": {"wsl": 2}}]


def explained_texts() -> Iterator[tuple[str, str]]:
    """(where, text) for everything explain says about the catalog's real lines and the real logs."""
    lines = []
    for row in load_toml("explain")["entries"]:
        lines.append((row["id"], row["sample"]))
        lines += [(row["id"], item if isinstance(item, str) else item[0]) for item in row.get("also", [])]
    for facts in FACTS:
        for where, line in lines:
            for f in ex.explain_lines([line], facts=facts):
                yield where, f"{f.meaning}\n{f.cause}\n{f.fix}"
        for path in sorted(LOGS.glob("*.log")):
            report = exread.explain_file(path, facts=facts)
            for f in report.findings:
                yield path.name, f"{f.meaning}\n{f.cause}\n{f.fix}"
            yield path.name, "\n".join(report.notes)


def test_the_parser_catches_what_issue_29_found() -> None:
    (argv,) = commands_in("Use a TensorFlow built for this GPU (tfgpu compat --gpu; e.g. 2.2)")
    assert argv == ["compat", "--gpu"]
    assert parse(argv)
    (argv,) = commands_in("pick an older build: tfgpu compat --driver. Then retry.")
    assert parse(argv)  # --driver needs its value
    (argv,) = commands_in("install it (tfgpu compat --tf VERSION; e.g. TF 1.14)")
    assert argv == ["compat", "--tf", "VERSION"]
    assert parse(argv) is None
    assert list(commands_in("tfgpu never runs it; tfgpu doctor shows the driver")) == [["doctor"]]


def test_every_command_explain_prints_parses() -> None:
    bad = {}
    seen = 0
    for where, text in explained_texts():
        for argv in commands_in(text):
            seen += 1
            problem = parse(argv)
            if problem:
                bad.setdefault(" ".join(["tfgpu", *argv]), (where, problem))
    assert seen > 100
    assert not bad, "\n".join(f"{cmd}: {problem} ({where})" for cmd, (where, problem) in sorted(bad.items()))


@pytest.mark.parametrize("name", sorted(p.name for p in LOGS.glob("*.log")))
def test_commands_in_the_human_output_parse(cli, name: str) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = cli("explain", str(LOGS / name), "--no-probe", "--verbose")
    assert code == 0
    for argv in commands_in(out):
        assert parse(argv) is None, " ".join(argv)
