"""Red-team attacks on what tfgpu prints and parses: escape sequences from Dockerfiles and compose files
reaching the terminal, YAML nesting bombs, and the shared safe console every command prints through."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest
from rich.table import Table
from rich.text import Text

from tests import TESTS
from tests.security.test_inputs3 import Cli
from tests.unit.tools.test_lint import host
from tfgpu.core.errors import InputError
from tfgpu.core.safety import safe_console
from tfgpu.tools.compose import load_yaml_bounded

pytestmark = pytest.mark.safety

HOSTILE = "A\x1b]8;;https://evil.example\x07link\x1b]8;;\x07B\x1b[2J\x1b]0;title\x07C\x9b31mD\rE"


def _facts(tmp_path: Path) -> str:
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps(host("550.144.03", "12.4")))
    return str(facts)


def _printed(renderable: object) -> str:
    buf = io.StringIO()
    safe_console(file=buf, force_terminal=True, width=200).print(renderable)
    return buf.getvalue()


@pytest.mark.parametrize("renderable", ["str", "text", "table"])
def test_attack_safe_console_strips_escapes_from_every_renderable(renderable: str) -> None:
    if renderable == "str":
        obj: object = HOSTILE
    elif renderable == "text":
        obj = Text(HOSTILE, style="bold")
    else:
        obj = Table("col")
        obj.add_row(HOSTILE)
    out = _printed(obj)
    for raw in ("\x1b]", "\x1b[2J", "\x07", "\x9b", "\r"):
        assert raw not in out
    assert "A" in out  # text after an unterminated OSC (rich drops the BEL) is dropped with it: fail closed
    assert "\x1b[1m" in out or renderable != "text"  # rich's own styling still reaches a colour terminal


def test_attack_lint_dockerfile_escape_sequences_never_reach_the_terminal(cli: Cli, tmp_path: Path) -> None:
    # before: `tfgpu lint` printed the FROM line raw: an OSC 8 link and a screen clear reached the terminal
    df = tmp_path / "Dockerfile"
    df.write_text("FROM nvidia/cuda:12.0.0-\x1b]8;;http://evil\x07base\x1b[2J\nRUN pip install tensorflow==2.15.0\x1b[31m\n")
    rc, out, err = cli("lint", "--facts", _facts(tmp_path), str(df))
    assert rc in (0, 1), err
    assert "nvidia/cuda" in out
    assert "\x1b" not in out + err
    assert "\x07" not in out + err


def test_attack_lint_compose_service_names_with_escapes(cli: Cli, tmp_path: Path) -> None:
    compose = tmp_path / "compose.yml"
    compose.write_text('services:\n  "tf\\e[2Jx\\e]0;pwn\\a":\n    image: "tensorflow/tensorflow:2.15.0-gpu\\e[31m"\n')
    rc, out, err = cli("lint", "--facts", _facts(tmp_path), str(compose))
    assert rc in (0, 1), err
    assert "\x1b" not in out + err
    assert "\x07" not in out + err


def test_attack_yaml_nesting_bomb_is_refused_quickly(tmp_path: Path) -> None:
    # before: a 200 KB compose file of nested flow sequences ran for more than a minute
    text = "services: " + "[" * 100_000 + "]" * 100_000 + "\n"
    start = time.process_time()  # CPU time: other load on the machine does not count
    with pytest.raises(InputError, match="nested more than"):
        load_yaml_bounded(text)
    assert time.process_time() - start < 2


def test_attack_yaml_nesting_bomb_through_the_cli_is_rc_2(cli: Cli, tmp_path: Path) -> None:
    compose = tmp_path / "docker-compose.yml"
    compose.write_text("services:\n  x:\n    environment: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n")
    rc, _out, err = cli("lint", "--facts", _facts(tmp_path), str(compose))
    assert rc == 2
    assert len(err.strip().splitlines()) <= 2
    assert "Traceback" not in err


def test_attack_yaml_python_tags_never_construct_objects(tmp_path: Path) -> None:
    mark = tmp_path / "ran"
    with pytest.raises(InputError):
        load_yaml_bounded(f"services: !!python/object/apply:os.system ['touch {mark}']\n")
    assert not mark.exists()


def test_ordinary_compose_nesting_still_loads() -> None:
    doc = load_yaml_bounded("services:\n  x:\n    deploy:\n      resources:\n        reservations:\n"
                            "          devices:\n            - capabilities: [gpu]\n")
    assert doc["services"]["x"]["deploy"]["resources"]["reservations"]["devices"][0]["capabilities"] == ["gpu"]


@pytest.mark.parametrize("dockerfile", [
    "FROM nvidia/cuda:12.0.0-base\nRUN pip install " + "tensorflow" * 90_000 + "\n",
    "FROM nvidia/cuda:12.0.0-base\nENV " + 'a="' * 300_000 + "\n",
])
def test_attack_huge_dockerfile_instruction_is_linted_in_bounded_time(dockerfile: str) -> None:
    # before: shlex (quadratic in a word's length) spent 13 s / 6 s on these 900 KB instructions
    from tfgpu.kb.knowledge import load_kb
    from tfgpu.tools.lint import lint_text

    load_kb()
    start = time.process_time()  # CPU time: other load on the machine does not count
    lint_text(dockerfile, load_kb(), None)
    assert time.process_time() - start < 2


@pytest.mark.parametrize("argv", [("explain", "--no-probe", "{v}"), ("lint", "--facts", "{f}", "{v}"),
                                  ("create", "--from-lock", "{v}"), ("doctor", "--facts", "{v}")])
def test_attack_escape_sequences_in_a_file_name_never_reach_the_terminal_through_an_error(
        cli: Cli, tmp_path: Path, argv: tuple[str, ...]) -> None:
    # before: the one-line error quoted the path raw: an OSC title, a screen clear and a bidi override
    evil = str(tmp_path / "\x1b]0;pwn\x07\x1b[2Jx\u202e.log")
    facts = _facts(tmp_path)
    rc, out, err = cli(*(a.replace("{v}", evil).replace("{f}", facts) for a in argv))
    assert rc == 2, err
    for raw in ("\x1b", "\x07", "\u202e"):
        assert raw not in out + err
    assert "x" in err


def test_attack_plan_human_output_carries_no_escapes_from_the_facts_file(cli: Cli, tmp_path: Path) -> None:
    # before: a GPU name or conda path in a facts file reached `tfgpu plan`'s text raw (OSC, bidi)
    facts = json.loads((TESTS / "data" / "facts" / "r740-4x-tesla-m60.json").read_text())
    for g in facts["gpus"]:
        g["name"] = "Tesla\x1b]0;pwn\x07\x1b[2J M60\u202e"
    facts["conda"]["path"] = "/opt/\x1b]8;;http://evil\x07conda\u202e"
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(facts))
    rc, out, err = cli("plan", "--facts", str(path), "--tf", "2.11")
    assert rc in (0, 1), err
    assert "TensorFlow 2.11" in out
    for raw in ("\x1b", "\x07", "\u202e"):
        assert raw not in out + err
