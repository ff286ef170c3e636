"""Issue 16, Medium: injection through values that reach a generated script or YAML, special files as
lock outputs, option lines in a pip lock, workflow commands in `doctor --ci`."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests import TESTS
from tests.conftest import LOCK_FACTS
from tfgpu.backends.steps import Step
from tfgpu.core import safety
from tfgpu.core.errors import InputError, NotReady, UsageError
from tfgpu.core.record import replace
from tfgpu.kb.knowledge import load_kb
from tfgpu.plan.formats import render_environment_yml, render_sh
from tfgpu.plan.planner import plan_environment
from tfgpu.plan.request import BuildRequest

pytestmark = pytest.mark.safety

Cli = Callable[..., tuple[int, str, str]]
FACTS = TESTS / "data" / "facts" / "r740-4x-tesla-m60.json"
TOOLS = {"uv": "/usr/bin/uv", "mamba": "/opt/mamba/bin/mamba", "micromamba": None, "conda": None}
NASTY = "conda-forge\ntouch /tmp/tfgpu-pwned\n"


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TFGPU_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TFGPU_CONFIG", str(tmp_path / "config.toml"))
    (tmp_path / "config.toml").write_text("")
    return tmp_path / "home"


def _facts() -> dict:  # type: ignore[type-arg]
    return json.loads(FACTS.read_text())


# --------------------------------------------------------------------------- plan --format sh / environment.yml


def test_newline_in_a_channel_option_is_refused(cli: Cli) -> None:
    rc, out, err = cli("plan", "--tf", "2.12.0", "--backend", "conda", "--channel", NASTY, "--format", "sh",
                       "--facts", str(FACTS))
    assert rc == 2, (out, err)
    assert "control characters" in err
    assert "touch" not in out


def test_newline_in_a_config_files_channel_is_refused(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(f"channels = {json.dumps([NASTY])}\n")
    rc, out, err = cli("plan", "--tf", "2.12.0", "--backend", "conda", "--format", "sh", "--facts", str(FACTS))
    assert rc == 2, (out, err)
    assert "control characters" in err


def test_newline_in_tfgpu_home_is_refused(cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TFGPU_HOME", str(tmp_path / "h\ntouch /tmp/tfgpu-pwned"))
    rc, out, err = cli("plan", "--tf", "2.20.0", "--format", "sh", "--facts", str(FACTS))
    assert rc == 2, (out, err)
    assert "TFGPU_HOME" in err


def _commands(script: str) -> list[str]:
    """The lines of ``script`` a shell would execute (not comments, not heredoc bodies)."""
    out, delim = [], None
    for line in script.splitlines():
        if delim is not None:
            if line == delim:
                delim = None
            continue
        if line.startswith("cat ") and "<<'" in line:
            delim = line.split("<<'", 1)[1].rstrip("'")
        if line.strip() and not line.lstrip().startswith("#"):
            out.append(line)
    return out


def test_every_value_in_the_sh_script_is_escaped_comments_included(tmp_path: Path) -> None:
    plan = plan_environment(load_kb(), _facts(), BuildRequest(tf="2.12.0", backend="conda"), tools=TOOLS, home="/h")
    clean = _commands(render_sh(plan))
    evil = replace(plan, backend_reason="x\ntouch /tmp/a", notes=("n\rtouch /tmp/b", "\x1b]8;;http://x\x07y"),
                   steps=(*plan.steps, Step((), "why\ntouch /tmp/c", kind="write-file", path=str(tmp_path / "f"),
                                            content="TFGPU_EOF\ntouch /tmp/d\n")))
    text = render_sh(evil, header="h\ntouch /tmp/e")
    assert "\x1b" not in text
    assert "\r" not in text
    assert _commands(text)[: len(clean)] == clean
    assert [c for c in _commands(text) if "touch" in c] == []
    # the shell agrees: run it with every command stubbed to print, and nothing but the plan runs
    res = subprocess.run(["sh", "-n", "-c", text], capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr


def test_environment_yml_quotes_every_scalar() -> None:
    plan = plan_environment(load_kb(), _facts(), BuildRequest(tf="2.12.0", backend="conda"), tools=TOOLS, home="/h")
    evil = replace(plan, channels=("conda-forge\n  - evil", "x: y", "#c", "- z"))
    doc = yaml.safe_load(render_environment_yml(evil))
    assert doc["channels"][:4] == ["conda-forge\n  - evil", "x: y", "#c", "- z"]
    assert all(isinstance(d, (str, dict)) for d in doc["dependencies"])


# --------------------------------------------------------------------------- lock -o


@pytest.mark.parametrize("target", ["/dev/null", "fifo", "dir"])
def test_lock_output_must_be_a_regular_file(cli: Cli, tmp_path: Path, target: str) -> None:
    if target == "fifo":
        path = tmp_path / "fifo"
        os.mkfifo(path)
    elif target == "dir":
        path = tmp_path / "d"
        path.mkdir()
    else:
        path = Path(target)
    before = path.lstat()
    rc, _, err = cli("lock", "--facts", LOCK_FACTS, "--tf", "2.2.0", "-o", str(path), "--force")
    assert rc == 2, err
    assert "not a regular file" in err
    assert path.lstat().st_mode == before.st_mode
    assert stat.S_ISCHR(path.lstat().st_mode) == (target == "/dev/null")


def test_lock_output_into_a_missing_directory_is_rc_2(cli: Cli, tmp_path: Path) -> None:
    rc, _, err = cli("lock", "--facts", LOCK_FACTS, "--tf", "2.2.0", "-o", str(tmp_path / "no" / "such" / "conda-lock.yml"))
    assert rc == 2, err
    assert "does not exist" in err


def test_lock_output_into_a_read_only_directory_is_rc_1(tmp_path: Path) -> None:
    from tfgpu.backends.lockfiles import check_output

    ro = Path("/proc/self")  # read-only to everyone, root included
    with pytest.raises(NotReady, match="not writable"):
        check_output(ro / "conda-lock.yml")
    with pytest.raises(UsageError, match="not a regular file"):
        check_output(Path("/dev/full"))


# --------------------------------------------------------------------------- the pip lock reader


@pytest.mark.parametrize("line", [
    "-r /etc/shadow",
    "--index-url https://evil.example/simple",
    "-e git+https://evil.example/x.git#egg=x",
    "--extra-index-url=https://evil.example/simple",
    "--trusted-host evil.example",
    "numpy==1.26.4 --hash=sha256:" + "a" * 64 + " --config-settings=x=y",
])
def test_pip_lock_refuses_option_lines(tmp_path: Path, line: str) -> None:
    from tfgpu.backends.lockfiles import read_lock

    lock = tmp_path / "requirements.lock.txt"
    lock.write_text(f"{line}\nnumpy==1.26.4 \\\n    --hash=sha256:{'b' * 64}\n")
    with pytest.raises(InputError, match="not a pinned requirement with hashes"):
        read_lock(lock)


# --------------------------------------------------------------------------- workflow commands and the terminal


@pytest.mark.parametrize("text", ["::error::x", "  ::stop-commands::tok", "a\n::add-mask::b", "##[error]x"])
def test_workflow_commands_are_escaped_on_every_line(text: str) -> None:
    out = safety.workflow_safe(text)
    for line in out.splitlines():
        assert not line.lstrip().startswith("::")
        assert "##[" not in line


def test_doctor_ci_escapes_workflow_commands_from_facts(cli: Cli, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    facts = _facts()
    facts["gpus"][0]["name"] = "GPU\n::stop-commands::pwn\n::error::owned"
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(facts))
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    rc, _out, err = cli("doctor", "--ci", "--facts", str(path))
    assert rc in (0, 1), err
    for line in err.splitlines():
        assert not line.lstrip().startswith(("::stop-commands", "::error::owned")), line


def test_terminal_safe_strips_csi_osc_and_osc8() -> None:
    text = "a\x1b[31mred\x1b[0m \x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\ \x1b]0;title\x07\x9b2J\rz\ud800"
    out = safety.terminal_safe(text)
    assert "\x1b" not in out
    assert "\x9b" not in out
    assert "\x07" not in out
    assert "\r" not in out
    assert "red" in out
    assert "link" in out
    out.encode("utf-8")  # lone surrogates do not reach the terminal either


def test_doctor_human_output_never_carries_escape_sequences_or_surrogates(cli: Cli, tmp_path: Path) -> None:
    facts = _facts()
    facts["gpus"][0]["name"] = "Tesla \x1b]8;;https://evil.example\x07M60\x1b]8;;\x07 \x1b[2J\x1b]0;title\x07\ud800"
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(facts))
    rc, out, err = cli("doctor", "--facts", str(path))
    assert rc in (0, 1), err
    assert "\x1b" not in out
    assert "Tesla M60" in out
    assert "\\ud800" in out


# --------------------------------------------------------------------------- create --facts


def test_create_with_a_facts_file_never_runs_programs_named_in_it(cli: Cli, tmp_path: Path) -> None:
    evil = tmp_path / "evil"
    facts = _facts()
    facts["python"] = {"interpreters": [{"version": v, "path": f"{evil}/python{v}"}
                                        for v in ("3.9", "3.10", "3.11", "3.12", "3.13")]}
    facts["conda"] = {"kind": "conda", "path": f"{evil}/conda", "version": "24.1.0"}
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(facts))
    for backend in ("pip", "conda"):
        rc, out, err = cli("create", "--tf", "2.20.0", "--backend", backend, "--prefix", str(tmp_path / "env"),
                           "--facts", str(path), "--dry-run", "--force")
        assert str(evil) not in out + err, (backend, out, err)
    # plan (which runs nothing) still shows the facts' machine as given
    rc, out, err = cli("plan", "--tf", "2.20.0", "--backend", "pip", "--facts", str(path), "--json", "--force")
    assert rc == 0, err


def test_explain_human_output_never_carries_escape_sequences_from_the_log(cli: Cli, tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text(
        "2020-09-11 08:30:55.744692: I tensorflow/stream_executor/platform/default/dso_loader.cc:53] Could not "
        "dlopen library 'libcudart.so.10.0'; dlerror: libcudart.so.10.0: cannot open \x1b]8;;https://evil.example"
        "\x07shared\x1b]8;;\x07 object file: No such file or directory \x1b[2J\x1b]0;title\x07\n")
    rc, out, err = cli("explain", "--no-probe", str(log))
    assert rc in (0, 1), err
    assert "dlopen" in out or "cudart" in out
    assert "\x1b" not in out + err
    assert "\x07" not in out + err
