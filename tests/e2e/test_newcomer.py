"""The newcomer's path (issue 18): a fresh clone, the README's commands, and every hint their output prints run
as a command on this machine (exit 0, or 1 = a documented "not ready" refusal) - never "No such option", never
"needs conda". Networked (installs tfgpu's dependencies into a fresh venv): `nox -s e2e`."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import REPO

ROOT = REPO
#: the README's own commands (its first lines and its command table) a newcomer types first
README_COMMANDS = ("tfgpu doctor", "tfgpu doctor --tf 2.2.0", "tfgpu doctor --json", "tfgpu compat --tf 2.2",
                   "tfgpu plan --tf 2.2.0", "tfgpu plan --tf 2.21 --cpu", "tfgpu envs", "tfgpu smoke")
HINT = re.compile(r"tfgpu (?:doctor|compat|plan|create|envs|smoke|run|shell|remove|explain|lock)\b[^`\n;)'\"]*")
NEVER = ("No such option", "needs conda", "needs mamba", "Traceback", "internal error")


def _command_part(text: str) -> str:
    """`tfgpu doctor --tf 2.2 recommends ...` -> `tfgpu doctor --tf 2.2`: the subcommand, its flags and their
    values; prose after them is not part of the command."""
    words = text.split()
    kept = words[:2]
    rest = words[2:]
    positional = words[1] in ("run", "shell", "remove", "explain")
    while rest:
        w = rest.pop(0)
        if w.startswith("-"):
            kept.append(w)
            if rest and not rest[0].startswith("-") and re.fullmatch(r"[\w.:/=-]+", rest[0]) and not rest[0].isalpha():
                kept.append(rest.pop(0))  # a flag's value (2.21, rattler is alphabetic: taken below)
            elif rest and w in ("--backend", "--format", "--name", "--os") and rest[0].isalpha():
                kept.append(rest.pop(0))
        elif positional and len(kept) == 2:
            kept.append(w)
        else:
            break
    return " ".join(kept)


def _hints(text: str) -> set[str]:
    out = set()
    for m in HINT.finditer(text):
        cmd = _command_part(m.group(0).strip().rstrip(".,:"))
        if cmd.split()[1] in ("create", "plan") and "--tf" not in cmd and "--from-lock" not in cmd:
            continue  # prose ("tfgpu create makes a separate one"), not a command
        cmd = re.sub(r"\b(RELEASE|VERSION|X\.Y)\b", "2.21", cmd)
        if re.search(r"\b(NAME|DIR|FILE|LOG|EXE|P|N)\b|\.\.\.|…", cmd):
            continue  # a template, not a command (the README's table; `tfgpu envs` lists the names)
        if cmd.startswith("tfgpu create"):
            cmd += " --dry-run"  # a hint to create is checked up to the build, nothing installed
        out.add(cmd)
    return out


@pytest.mark.e2e
@pytest.mark.real_subprocess
def test_readme_commands_and_every_hint_they_print_run_in_a_fresh_clone(tmp_path: Path) -> None:
    if not os.environ.get("TFGPU_E2E"):
        pytest.skip("set TFGPU_E2E=1 (nox -s e2e)")
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("needs uv")
    clone = tmp_path / "tfgpu"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    venv = tmp_path / "venv"
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    subprocess.run([uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"), str(clone)], check=True)
    env = dict(os.environ, TFGPU_HOME=str(tmp_path / "home"), PATH=f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
               NO_COLOR="1", COLUMNS="200")
    env.pop("TFGPU_CONFIG", None)

    def run(cmd: str) -> tuple[int, str]:
        res = subprocess.run(shlex.split(cmd), env=env, capture_output=True, text=True, cwd=tmp_path, timeout=300,
                             stdin=subprocess.DEVNULL)
        return res.returncode, res.stdout + res.stderr

    seen: dict[str, tuple[int, str]] = {}
    todo = list(README_COMMANDS)
    while todo:
        cmd = todo.pop(0)
        if cmd in seen:
            continue
        seen[cmd] = run(cmd)
        code, text = seen[cmd]
        for bad in NEVER:
            assert bad not in text, f"{cmd}: {bad!r} in:\n{text[-2000:]}"
        todo += sorted(_hints(text) - set(seen))
    for cmd, (code, text) in seen.items():
        documented = code in (0, 1) or (cmd == "tfgpu smoke" and code == 2 and "--name NAME" in text)
        assert documented, f"{cmd} exited {code}:\n{text[-2000:]}"
    assert any(c.startswith("tfgpu create --tf 2.21 --cpu") for c in seen)  # the doctor's hint was followed
