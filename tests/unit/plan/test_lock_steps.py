"""`tfgpu lock --backend pip` is a Plan run by the step runner (tfgpu.build.execute), like `tfgpu create`: the
steps are planned purely (tfgpu.build.lock.plan_pip_lock), uv runs with `+ cmd` echoed, a timeout, the full
output in tfgpu's logs, and a signal stops it; the lock is written only when uv succeeded.

uv is the fake in tests/fake_programs/fake_uv.py (replaying uv output recorded in tests/data/lock/) or
the real uv installed beside the test interpreter, offline against a local wheel of the fake TensorFlow."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path

import pytest

from tests import REPO, TESTS
from tests.conftest import LOCK_FACTS, RTX3080_FACTS, isolate_installers
from tfgpu.backends import lockfiles
from tfgpu.build.lock import LockTarget, lock_pip, plan_pip_lock
from tfgpu.core.errors import ExitCode, StepFailed, UsageError
from tfgpu.kb.knowledge import load_kb
from tfgpu.plan.fromlock import plan_from_lock
from tfgpu.plan.request import BuildRequest

Cli = Callable[..., tuple[int, str, str]]
FAKE_UV = TESTS / "fake_programs" / "fake_uv.py"
REAL_UV = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
KB = load_kb()
#: What lock_target chooses for TensorFlow 2.20.0 on linux-64 (tests/unit/build/test_lock.py checks the choice itself).
TARGET = LockTarget(recipe="pip-and-cuda", kind="pip", tf="2.20.0", channels=(), specs=(),
                    pip=("tensorflow[and-cuda]==2.20.0",), python="3.13", cuda=None)


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    return isolate_installers(monkeypatch, tmp_path)


@pytest.fixture
def tmp_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """tempfile's directory for this test, so a test can see what a lock left behind."""
    d = tmp_path / "tmp"
    d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    monkeypatch.setenv("TMPDIR", str(d))
    return d


def fake_uv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **env: str) -> tuple[str, Path]:
    """A `uv` on PATH that runs fake_uv.py; returns its path and its call log."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    uv = bindir / "uv"
    uv.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_UV}" "$@"\n')
    uv.chmod(0o755)
    log = tmp_path / "uv-calls.jsonl"
    monkeypatch.setenv("FAKE_UV_LOG", str(log))
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("PYTHONPATH", "/nowhere")  # the runner's step environment drops it
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return str(uv), log


def calls(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


# --------------------------------------------------------------------------- the plan (pure)


def test_a_pip_lock_plan_writes_the_requirements_then_runs_uv_pip_compile() -> None:
    plan = plan_pip_lock(TARGET, "linux-64", uv="/opt/uv", workdir="/w")
    write, compile_ = plan.steps
    assert (write.kind, write.path, write.content) == ("write-file", "/w/requirements.in", "tensorflow[and-cuda]==2.20.0\n")
    assert compile_.argv == ("/opt/uv", "pip", "compile", "--generate-hashes", "--python-version", "3.13",
                             "--python-platform", "x86_64-manylinux_2_28", "--no-header", "--quiet",
                             "/w/requirements.in", "-o", "/w/requirements.lock.txt")
    assert (plan.tool, plan.backend, plan.recipe_id, plan.tf, plan.os) == ("uv", "pip", "pip-and-cuda", "2.20.0", "linux")
    win = plan_pip_lock(TARGET, "win-64", uv="/opt/uv", workdir="/w", index_url="https://mirror.invalid/simple")
    assert win.steps[1].argv[7] == "x86_64-pc-windows-msvc"
    assert win.steps[1].argv[-2:] == ("--index-url", "https://mirror.invalid/simple")
    assert win.os == "windows"
    with pytest.raises(UsageError, match="does not lock for platform osx-arm64"):
        plan_pip_lock(TARGET, "osx-arm64", uv="/opt/uv", workdir="/w")


def test_a_pip_lock_plan_is_a_plan_document() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(resources.files("tfgpu").joinpath("core/schemas/plan.schema.json").read_text(encoding="utf-8"))
    doc = plan_pip_lock(TARGET, "linux-64", uv="/opt/uv", workdir="/w").to_json()
    jsonschema.Draft202012Validator(schema).validate(doc)
    assert [s["kind"] for s in doc["steps"]] == ["write-file", "run"]


# --------------------------------------------------------------------------- run by the step runner


@pytest.mark.real_subprocess
def test_lock_backend_pip_runs_uv_through_the_step_runner(cli: Cli, home: Path, tmp_dir: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    uv, log = fake_uv(tmp_path, monkeypatch)
    out = tmp_path / "requirements.lock.txt"
    code, stdout, err = cli("lock", "--facts", LOCK_FACTS, "--tf", "2.20.0", "--backend", "pip", "--force", "-o", str(out))
    assert code == 0, err
    (call,) = calls(log)
    argv = call["argv"]
    assert isinstance(argv, list)
    assert argv[:4] == ["pip", "compile", "--generate-hashes", "--python-version"]
    assert call["pythonpath"] is False  # the step runner's environment, as for create's installers
    assert f"+ {uv} pip compile --generate-hashes" in err  # echoed like create's steps
    assert f"wrote {out}" in stdout
    text = out.read_text()
    assert text.startswith("# Locked by tfgpu (recipe pip-and-cuda) for linux-64, Python ")
    assert "# via -r requirements.in\n" in text  # the input's name, not the temporary directory
    assert str(tmp_dir) not in text
    assert list(tmp_dir.iterdir()) == []  # the working directory is gone
    (logfile,) = (home / "logs").glob("lock-linux-64-*.log")
    logged = logfile.read_text()
    assert "+ write " in logged
    assert f"+ {uv} pip compile" in logged
    assert "= exit 0" in logged
    lock = lockfiles.read_lock(out)
    assert (lock.kind, [(p.name, p.version) for p in lock.packages]) == ("pip", [("tensorflow", "2.20.0")])


@pytest.mark.real_subprocess
def test_a_conda_recipes_pip_part_is_locked_with_hashes_and_read_back_through_the_same_check(
        home: Path, tmp_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 28: every pip requirement a lock carries is pinned and hashed, tfgpu's own included. A conda
    recipe's pip part (TensorFlow from PyPI beside conda's CUDA) is locked by uv with create's pins (here the
    recorded uv output), recorded as `name==version --hash=...`, and passes the reader's check unchanged."""
    from tfgpu.build.lock import lock_pip_part

    _uv, log = fake_uv(tmp_path, monkeypatch)
    target = LockTarget(recipe="conda-forge-cudatoolkit-pip-2.11", kind="conda", tf="2.11.1", channels=("conda-forge",),
                        specs=("python=3.10", "cudatoolkit=11.2"), pip=("tensorflow==2.11.1",), python="3.10", cuda="11.2")
    lines: list[str] = []
    value = lock_pip_part(target, "linux-64", tools={}, echo=lines.append)
    assert value == "tensorflow==2.20.0 --hash=sha256:2b20a9d7bccf10760f667c6842e2775d02e4e89869ffb521419f9fb21e695234"
    assert lockfiles.pip_part_requirements(value, "here") == [value]
    (call,) = calls(log)
    argv = call["argv"]
    assert isinstance(argv, list)
    assert argv[argv.index("--python-version") + 1] == "3.10"
    assert any(line.startswith("+ ") and "pip compile --generate-hashes" in line for line in lines)
    assert list(tmp_dir.iterdir()) == []


@pytest.mark.real_subprocess
def test_a_failing_uv_names_the_requirements_and_the_log_and_writes_nothing(
        home: Path, tmp_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_uv(tmp_path, monkeypatch, FAKE_UV_FAIL="1")
    out = tmp_path / "requirements.lock.txt"
    out.write_text("the previous lock\n")
    with pytest.raises(StepFailed) as info:
        lock_pip(KB, "2.20.0", "linux-64", out, target=TARGET)
    exc = info.value
    assert exc.message.startswith("uv pip compile failed for tensorflow[and-cuda]==2.20.0: ")
    assert "exited with 1: cause: Because there is no version of tensorflow[and-cuda]==2.20.0" in exc.message
    assert exc.hint is not None
    assert exc.hint.startswith("locking needs the network to the package index; full log: ")
    logfile = Path(exc.hint.split("full log: ")[1])
    assert "No solution found when resolving dependencies" in logfile.read_text()
    assert out.read_text() == "the previous lock\n"
    assert list(tmp_dir.iterdir()) == []


@pytest.mark.real_subprocess
def test_a_hanging_uv_is_stopped_by_the_timeout(home: Path, tmp_dir: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    _, log = fake_uv(tmp_path, monkeypatch, FAKE_UV_SLEEP="60")
    out = tmp_path / "requirements.lock.txt"
    start = time.monotonic()
    with pytest.raises(StepFailed, match=r"timed out after 1 s"):
        lock_pip(KB, "2.20.0", "linux-64", out, target=TARGET, timeout=1)
    assert time.monotonic() - start < 15
    (call,) = calls(log)
    with pytest.raises(ProcessLookupError):  # its process group was killed
        os.kill(int(str(call["pid"])), 0)
    assert not out.exists()
    assert list(tmp_dir.iterdir()) == []


@pytest.mark.real_subprocess
def test_lock_takes_timeout_from_the_command_line(cli: Cli, home: Path, tmp_dir: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # `tfgpu lock --timeout N` bounds uv as `--timeout` bounds create's steps (it had no such flag: uv got 900 s)
    fake_uv(tmp_path, monkeypatch, FAKE_UV_SLEEP="60")
    out = tmp_path / "requirements.lock.txt"
    start = time.monotonic()
    code, _, err = cli("lock", "--facts", LOCK_FACTS, "--tf", "2.20.0", "--backend", "pip", "-o", str(out),
                       "--timeout", "1", "--force")
    assert code == 1, err
    assert "timed out after 1 s" in err
    assert time.monotonic() - start < 15
    assert not out.exists()
    assert list(tmp_dir.iterdir()) == []
    code, _, err = cli("lock", "--facts", LOCK_FACTS, "--tf", "2.20.0", "--timeout", "-3")
    assert code == 2
    assert "--timeout -3 is not a number of seconds" in err


@pytest.mark.real_subprocess
def test_sigterm_stops_uv_and_leaves_no_lock(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real `tfgpu lock` process: SIGTERM while uv runs stops uv's process group, exits 130, writes no
    lock and leaves no temporary directory."""
    _, log = fake_uv(tmp_path, monkeypatch, FAKE_UV_SLEEP="60")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = tmp_path / "requirements.lock.txt"
    env = dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=str(REPO / "src"))
    proc = subprocess.Popen([sys.executable, "-m", "tfgpu", "lock", "--facts", LOCK_FACTS, "--tf", "2.20.0",
                             "--backend", "pip", "--force", "-o", str(out)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not calls(log) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert calls(log), "uv never started"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == ExitCode.INTERRUPTED, err
    assert "stopped by SIGTERM while running uv" in err
    with pytest.raises(ProcessLookupError):
        os.kill(int(str(calls(log)[0]["pid"])), 0)
    assert not out.exists()
    assert list(tmp.iterdir()) == []


# --------------------------------------------------------------------------- the real uv


@pytest.mark.real_subprocess
@pytest.mark.skipif(not Path(REAL_UV).exists(), reason="uv is not installed")
def test_real_uv_locks_through_the_step_runner_and_create_from_lock_plans_it(
        home: Path, tmp_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.fake_programs.wheels import build_fake_tensorflow

    wheel = build_fake_tensorflow(tmp_path / "wheels", "2.20.0")
    # offline, from the local wheel only; a short PATH keeps uv's interpreter discovery (pyenv shims) quick
    monkeypatch.setenv("UV_OFFLINE", "1")
    monkeypatch.setenv("UV_FIND_LINKS", str(wheel.parent))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    out = tmp_path / "requirements.lock.txt"
    lines: list[str] = []
    notes = lock_pip(KB, "2.20.0", "linux-64", out, target=TARGET, tools={"uv": REAL_UV}, echo=lines.append)
    assert notes == ["linux-64: recipe pip-and-cuda: tensorflow[and-cuda]==2.20.0 for Python 3.13"]
    assert lines[0].startswith(f"+ {REAL_UV} pip compile --generate-hashes")
    lock = lockfiles.read_lock(out)
    assert (lock.kind, lock.python) == ("pip", "3.13")
    (pkg,) = lock.packages
    assert (pkg.name, pkg.version, pkg.sha256) == ("tensorflow", "2.20.0", hashlib.sha256(wheel.read_bytes()).hexdigest())
    assert list(tmp_dir.iterdir()) == []
    facts = {"platform": {"os": "linux", "arch": "x86_64"},
             "python": {"interpreters": [{"version": "3.13.0", "path": "/usr/bin/python3.13"}]}}
    plan = plan_from_lock(KB, facts, lock, BuildRequest(platform=""), tools={"uv": "/usr/bin/uv"}, home="/h")
    assert plan.steps[1].argv[-4:] == ("--require-hashes", "--no-deps", "-r", str(out))


@pytest.mark.real_subprocess
def test_lock_latest_with_the_default_backend_locks_the_doctors_recommendation(
        cli: Cli, home: Path, tmp_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`tfgpu lock --tf latest` without --backend: the release and recipe the doctor recommends on this
    machine (a pip recipe here), locked by uv through the step runner."""
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(RTX3080_FACTS))
    code, out, err = cli("doctor", "--facts", str(path), "--json")
    rec = json.loads(out)["recommendation"]
    assert rec["recipe_id"].startswith("pip-")
    uv, log = fake_uv(tmp_path, monkeypatch)
    lock = tmp_path / "requirements.lock.txt"
    code, out, err = cli("lock", "--tf", "latest", "--facts", str(path), "-o", str(lock))
    assert code == 0, err
    assert f"# --backend auto: recipe {rec['recipe_id']} (hashed pip requirements)" in err
    assert f"+ {uv} pip compile" in err
    assert f"# linux-64: recipe {rec['recipe_id']}: tensorflow[and-cuda]=={rec['tf']} " in out
    assert lock.read_text().startswith(f"# Locked by tfgpu (recipe {rec['recipe_id']}) for linux-64, Python 3.11.")
    (call,) = calls(log)
    argv = call["argv"]
    assert isinstance(argv, list)
    assert argv[argv.index("--python-version") + 1] == "3.11"


@pytest.mark.real_subprocess
def test_a_uv_that_succeeds_without_writing_the_lock_is_a_failed_step(
        home: Path, tmp_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A uv that exits 0 without writing its -o file: a failed step (exit 1, one line), not a traceback."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "uv").write_text("#!/bin/sh\nexit 0\n")
    (bindir / "uv").chmod(0o755)
    with pytest.raises(StepFailed, match="uv pip compile wrote no lock for tensorflow"):
        lock_pip(KB, "2.20.0", "linux-64", tmp_path / "r.txt", target=TARGET, tools={"uv": str(bindir / "uv")})
    assert not (tmp_path / "r.txt").exists()
    assert list(tmp_dir.iterdir()) == []
