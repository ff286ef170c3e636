"""Round four's red team (issue 28): the world its attacks need, made through tfgpu's own command line where
it can be: environments built by `tfgpu create` with a fake installer, `python -m tfgpu` in a real process,
and checks on processes. Nothing here imports tfgpu's modules, so the tests survive the stage packages."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests import TESTS

DATA = TESTS / "data"
#: A Dell R740 with 4 x Tesla M60 on driver 418.87 (tests/data/facts/SOURCES.md): TensorFlow 2.20 is blocked
#: there, 2.4 is ready.
M60 = DATA / "facts" / "r740-4x-tesla-m60.json"
#: A process id above Linux's largest pid_max: never a live process (a killed tfgpu's PID in an aside name).
DEAD_PID = 2**22 + 17

#: A stand-in for uv on PATH (written as a Python script): `uv venv ... PREFIX` makes a venv-shaped directory
#: whose bin/python fails (so a smoke test fails); `uv pip install` does what FAKE_UV_INSTALL says: "ok",
#: "hang:PIDFILE" (write its pid, then wait), or "print:TEXT" (print TEXT, fail).
FAKE_UV = '''\
import os, pathlib, sys, time
args = sys.argv[1:]
if args[:1] == ["venv"]:
    p = pathlib.Path(args[-1])
    (p / "bin").mkdir(parents=True, exist_ok=True)
    (p / "pyvenv.cfg").write_text("home = /usr/bin\\n")
    (p / "bin" / "activate").write_text('VIRTUAL_ENV=%s; PATH="$VIRTUAL_ENV/bin:$PATH"; export VIRTUAL_ENV PATH\\n' % p)
    py = p / "bin" / "python"
    py.write_text("#!/bin/sh\\nexit 1\\n")
    py.chmod(0o755)
    sys.exit(0)
mode = os.environ.get("FAKE_UV_INSTALL", "ok")
if mode.startswith("hang:"):
    pathlib.Path(mode[5:] + ".tmp").write_text(str(os.getpid()))
    os.replace(mode[5:] + ".tmp", mode[5:])
    time.sleep(300)
if mode.startswith("print:"):
    print(mode[6:], flush=True)
    sys.exit(2)
sys.exit(0)
'''


def m60_facts() -> dict[str, Any]:
    """The Tesla M60 server's facts, to edit into an attacker's file."""
    return dict(json.loads(M60.read_text()))


def write_facts(tmp_path: Path, facts: dict[str, Any], name: str = "facts.json") -> Path:
    """``facts`` as a facts file (what `--facts FILE` reads)."""
    path = tmp_path / name
    path.write_text(json.dumps(facts))
    return path


def write_script(path: Path, body: str, *, python: bool = False) -> Path:
    """An executable script at ``path`` (a Python one runs with this interpreter)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text((f"#!{sys.executable}\n" if python else "#!/bin/sh\n") + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def fake_uv_bin(tmp_path: Path) -> Path:
    """A directory holding the fake uv (put it first on PATH)."""
    bindir = tmp_path / "fake-bin"
    write_script(bindir / "uv", FAKE_UV, python=True)
    return bindir


def rtx3080_facts(tmp_path: Path) -> Path:
    """The RTX 3080 desktop of tests/conftest.py as a facts file: `create --tf 2.20.0 --backend pip` plans
    uv venv + uv pip install there."""
    from tests.conftest import RTX3080_FACTS

    path = tmp_path / "rtx3080-facts.json"
    path.write_text(json.dumps(RTX3080_FACTS))
    return path


def create_argv(tmp_path: Path, where: list[str], *more: str) -> list[str]:
    """`tfgpu create` of TensorFlow 2.20 with the pip route at ``where`` (["--name", N] or ["--prefix", P])."""
    return ["create", "--tf", "2.20.0", "--backend", "pip", *where, "--yes", "--facts",
            str(rtx3080_facts(tmp_path)), *more]


def env_with_fake_uv(tmp_path: Path, home: Path, **extra: str) -> dict[str, str]:
    """os.environ for a real `python -m tfgpu`: tfgpu's home, the fake uv first on PATH, installers isolated."""
    env = dict(os.environ)
    env.update(TFGPU_HOME=str(home), PATH=f"{fake_uv_bin(tmp_path)}{os.pathsep}{env.get('PATH', '')}",
               PIP_CONFIG_FILE=os.devnull, UV_NO_CONFIG="1", TFGPU_CONFIG=str(_empty_config(tmp_path)))
    env.update(extra)
    return env


def _empty_config(tmp_path: Path) -> Path:
    path = tmp_path / "empty-config.toml"
    path.write_text("")
    return path


def tfgpu(*argv: str, env: dict[str, str] | None = None, cwd: str | Path | None = None, timeout: float = 120,
          stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m tfgpu ARGV` in a real process, as a user runs it (stdout/stderr decoded, odd bytes escaped)."""
    return subprocess.run([sys.executable, "-m", "tfgpu", *argv], capture_output=True, encoding="utf-8",
                          errors="backslashreplace", env=env if env is not None else dict(os.environ), cwd=cwd,
                          timeout=timeout, input=stdin, check=False)


def make_env(tmp_path: Path, home: Path, name: str = "tf") -> Path:
    """An environment built by `tfgpu create --name NAME` (fake uv; no smoke test): marked and registered as
    tfgpu marks and registers what it made. Returns its prefix (HOME/envs/NAME)."""
    res = tfgpu(*create_argv(tmp_path, ["--name", name], "--no-smoke"), env=env_with_fake_uv(tmp_path, home))
    assert res.returncode == 0, res.stderr
    prefix = home / "envs" / name
    assert (prefix / "pyvenv.cfg").is_file(), res.stderr
    return prefix


def registry_entries(home: Path) -> list[dict[str, object]]:
    """What `tfgpu envs --json` lists."""
    res = tfgpu("envs", "--json", env={**os.environ, "TFGPU_HOME": str(home)})
    assert res.returncode == 0, res.stderr
    return list(json.loads(res.stdout)["envs"])


def users_folder(path: Path) -> Path:
    """A folder of the user's own (no venv, no marker) with a file worth keeping; returns that file."""
    path.mkdir(parents=True)
    keep = path / "thesis.tex"
    keep.write_text("years of work\n")
    return keep


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


def wait_for_file(path: Path, proc: subprocess.Popen[str] | None = None, within: float = 60) -> str:
    """The content of ``path`` once it exists (it is written atomically); fails if ``proc`` ends first."""
    deadline = time.monotonic() + within
    while not path.exists():
        if proc is not None and proc.poll() is not None:
            out = proc.communicate()[0] if proc.stdout else ""
            raise AssertionError(f"tfgpu ended (rc {proc.returncode}) before {path.name} appeared: {out}")
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)
    return path.read_text()


def dies_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


def kill_if_alive(*pids: int) -> None:
    """Clean-up of processes a test started (by id) that an attack left running."""
    import signal

    for pid in pids:
        if alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def python_with_pip(tmp_root: Path) -> str:
    """An interpreter whose ``-m pip`` is the real pip: this one's, or (a test runner's venv made by uv has no pip)
    a venv made from it with the pip wheel the standard library bundles (ensurepip: offline)."""
    probe = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, check=False, timeout=60)
    if probe.returncode == 0:
        return sys.executable
    venv = tmp_root / "pip-venv"
    made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True, check=False,
                          timeout=300)
    if made.returncode != 0:
        import pytest

        pytest.skip(f"no pip here and `python -m venv` could not bundle one: {made.stderr.strip()[-200:]}")
    return str(venv / ("Scripts" if sys.platform == "win32" else "bin") / "python")
