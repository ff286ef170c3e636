"""Fault injection in `tfgpu create`: a full disk, an installer killed mid-way, Ctrl-C at every step, two
tfgpu processes on one environment. Each time the earlier state is intact and the message says what
happened. Real venvs and a real local wheel index, as in tests/e2e/test_create_real.py."""

from __future__ import annotations

import json
import os
import random
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import fake_venv_plan, isolate_installers
from tests.e2e.test_create_real import BASE_PY, HAVE_UV, facts, make_plan, needs_uv
from tests.fake_programs.wheels import build_fake_tensorflow, build_wheel
from tfgpu.backends.steps import Step
from tfgpu.build import registry
from tfgpu.build.execute import run_plan
from tfgpu.core import process as run
from tfgpu.core.errors import Interrupted, StepFailed
from tfgpu.core.record import replace

pytestmark = pytest.mark.real_subprocess
Cli = Callable[..., "tuple[int, str, str]"]



@pytest.fixture(autouse=True)
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    return isolate_installers(monkeypatch, tmp_path)




def _installer(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / "bin" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def _old_env(prefix: Path) -> Path:
    run_plan(fake_venv_plan(prefix))
    marker = prefix / "old-marker"
    marker.write_text("old")
    return marker


# --------------------------------------------------------------------------- the disk fills up


def test_installer_reporting_a_full_disk_keeps_the_old_environment(tmp_path: Path) -> None:
    prefix = tmp_path / "envs" / "tf"
    marker = _old_env(prefix)
    # pip's own wording when a write fails with ENOSPC (pip/_internal/commands/install.py,
    # create_os_error_message: "Could not install packages due to an OSError: [Errno 28] ...")
    pip = _installer(tmp_path, "pip", "echo 'Collecting tensorflow==2.20.0'\n"
                     "echo 'ERROR: Could not install packages due to an OSError: [Errno 28] No space left on device'\n"
                     "exit 1\n")
    with pytest.raises(StepFailed) as info:
        run_plan(fake_venv_plan(prefix, Step((pip, "install", "tensorflow==2.20.0"), "install")), force=True)
    err = info.value
    assert "No space left on device" in err.one_line()
    assert "previous environment" in err.one_line()
    assert "was kept" in err.one_line()
    assert "full log" in (err.hint or "")
    assert marker.read_text() == "old"
    assert sorted(p.name for p in prefix.parent.iterdir()) == ["tf"]  # nothing left aside


def test_write_step_on_a_full_disk_is_a_failed_step_not_a_crash(tmp_path: Path) -> None:
    # /dev/full: every write fails with ENOSPC, the kernel's own full disk
    prefix = tmp_path / "envs" / "tf"
    marker = _old_env(prefix)
    step = Step((), "activation", kind="append-file", path="/dev/full", content="export X=1\n")
    with pytest.raises(StepFailed, match="cannot write /dev/full: No space left on device") as info:
        run_plan(fake_venv_plan(prefix, step), force=True)
    assert "was kept" in info.value.one_line()
    assert marker.read_text() == "old"


def test_log_on_a_full_disk_does_not_kill_the_step(tmp_path: Path) -> None:
    log = run.StepLog(Path("/dev/full"))
    result = run.run_step([sys.executable, "-c", "print('hello')"], log=log, timeout=30)
    assert result.ok
    assert "hello" in log.tail
    assert log.error is not None
    assert "No space left on device" in log.error


def _tmpfs(where: Path, size: str) -> Iterator[Path]:
    where.mkdir(parents=True)
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                         capture_output=True, text=True, check=False)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {res.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("needs root and mount")
    yield from _tmpfs(tmp_path / "small", "4m")


@pytest.mark.faults
@needs_uv
def test_real_full_filesystem_during_install_keeps_the_old_environment(tmp_path: Path, small_fs: Path) -> None:
    """A 4 MB tmpfs: the venv fits, the old environment fits, a wheel with 8 MB of data does not."""
    wheels = tmp_path / "wheels"
    build_fake_tensorflow(wheels, "2.20.0")
    big = wheels / "big"
    build_wheel(big, "tensorflow", "2.20.0", {"tensorflow/__init__.py": b"",
                                              "tensorflow/blob.bin": random.Random(5).randbytes(8 << 20)},
                extras=("and-cuda",))
    prefix = small_fs / "tf"
    run_plan(make_plan(prefix, wheels, uv=True))
    marker = prefix / "old-marker"
    marker.write_text("old")
    with pytest.raises(StepFailed) as info:
        run_plan(make_plan(prefix, big, uv=True), force=True)
    text = info.value.one_line() + " ".join(getattr(info.value, "log_tail", []))
    assert "No space left on device" in text or "os error 28" in text
    assert "was kept" in info.value.one_line()
    assert marker.read_text() == "old"
    assert sorted(p.name for p in small_fs.iterdir()) == ["tf"]


# --------------------------------------------------------------------------- killed mid-way


def test_installer_killed_mid_way_is_named_and_cleaned_up(tmp_path: Path) -> None:
    prefix = tmp_path / "envs" / "tf"
    marker = _old_env(prefix)
    # what the OOM killer or `kill -9` does: the installer dies half-way, with no chance to clean up
    pip = _installer(tmp_path, "pip", f"echo 'Installing collected packages'\n"
                     f"mkdir -p '{prefix}/lib/half-installed'\nkill -KILL $$\n")
    with pytest.raises(StepFailed) as info:
        run_plan(fake_venv_plan(prefix, Step((pip, "install", "tensorflow"), "install")), force=True)
    line = info.value.one_line()
    assert "was killed by signal SIGKILL" in line
    assert "was kept" in line
    assert marker.read_text() == "old"
    assert not (prefix / "lib" / "half-installed").exists()
    assert registry.load()[0]["prefix"] == str(prefix.resolve())  # the registry still names the old one


# --------------------------------------------------------------------------- Ctrl-C at each step


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("wheels")
    build_fake_tensorflow(d, "2.20.0")
    return d


def _steps() -> list[int]:
    plan = make_plan(Path("/tmp/x"), Path("/tmp/w"), uv=HAVE_UV)
    return list(range(1, len(plan.steps) + 1))


@pytest.mark.faults
@needs_uv
@pytest.mark.parametrize("force", [False, True], ids=["new", "force-rebuild"])
@pytest.mark.parametrize("at", _steps())
def test_ctrl_c_at_each_step(tmp_path: Path, wheelhouse: Path, at: int, force: bool) -> None:
    prefix = tmp_path / "envs" / "tf"
    marker = None
    if force:
        run_plan(make_plan(prefix, wheelhouse, uv=True))
        marker = prefix / "old-marker"
        marker.write_text("old")
    entries = registry.load()
    plan = make_plan(prefix, wheelhouse, uv=True)

    def on_step(i: int, n: int, step: Step) -> None:
        if i == at:
            raise KeyboardInterrupt  # Ctrl-C as the step starts (the runner's own test covers mid-step)

    with pytest.raises(Interrupted) as info:
        run_plan(plan, force=force, on_step=on_step)
    assert f"the partial environment {prefix.resolve()} was removed" in info.value.one_line()
    assert info.value.exit_code == 130
    assert registry.load() == entries
    assert (sorted(p.name for p in prefix.parent.iterdir()) if prefix.parent.exists() else []) == \
        (["tf"] if force else [])
    if marker is not None:
        assert marker.read_text() == "old"


@needs_uv
def test_ctrl_c_during_the_real_install_step(tmp_path: Path, wheelhouse: Path) -> None:
    """SIGINT while uv is installing: forwarded to uv's process group, the partial venv is removed."""
    import signal
    import threading

    prefix = tmp_path / "envs" / "tf"
    plan = make_plan(prefix, wheelhouse, uv=True)
    slow = Step((sys.executable, "-c", "import time; print('installing', flush=True); time.sleep(30)"), "install")
    plan = replace(plan, steps=(plan.steps[0], slow, *plan.steps[1:]))

    def on_line(line: str) -> None:
        if line == "installing":
            threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()

    t0 = time.monotonic()
    with pytest.raises(Interrupted):
        run_plan(plan, on_line=on_line)
    assert time.monotonic() - t0 < 20
    assert not prefix.exists()


# --------------------------------------------------------------------------- two creators at once

_HOLDER = """
import sys
from pathlib import Path
from tfgpu.build.execute import run_plan
from tfgpu.plan.planner import Plan, Step
prefix = Path(sys.argv[1])
make = "import pathlib, sys; p = pathlib.Path(sys.argv[1]); p.mkdir(parents=True); (p / 'pyvenv.cfg').write_text('x')"
slow = "import pathlib, sys, time; print('holding', flush=True); time.sleep(float(sys.argv[2])); " \\
       "(pathlib.Path(sys.argv[1]) / 'first-was-here').write_text('1')"
plan = Plan(tf="2.20.0", backend="pip", backend_reason="t", prefix=str(prefix), name=None, python="3",
            steps=(Step((sys.executable, "-c", make, str(prefix)), "venv"),
                   Step((sys.executable, "-c", slow, str(prefix), sys.argv[2]), "slow install")),
            tool="venv", env_python=str(prefix / "bin" / "python"))
run_plan(plan, echo=print)
print("done", flush=True)
"""


def test_two_tfgpu_processes_creating_one_environment(tmp_path: Path, cli: Cli, wheelhouse: Path) -> None:
    prefix = (tmp_path / "envs" / "tf").resolve()
    first = subprocess.Popen([sys.executable, "-c", _HOLDER, str(prefix), "2.5"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, env=os.environ.copy())
    try:
        assert first.stdout is not None
        for line in first.stdout:
            if "holding" in line:
                break
        facts_file = tmp_path / "facts.json"
        facts_file.write_text(json.dumps(facts()))
        tools_path = f"{Path(BASE_PY).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        os.environ["PATH"], old_path = tools_path, os.environ.get("PATH", "")
        try:
            code, out, err = cli("create", "--tf", "2.20.0", "--backend", "pip", "--prefix", str(prefix),
                                 "--facts", str(facts_file), "--find-links", str(wheelhouse), "--offline",
                                 "--yes", "--force", "--no-smoke")
        finally:
            os.environ["PATH"] = old_path
        assert code == 1, (out, err)
        assert f"{prefix} is being created by tfgpu pid {first.pid}" in err
        assert "wait for it to finish" in err
        assert err.strip().splitlines()[-1].startswith("tfgpu: error: ")
        rest = first.communicate(timeout=60)[0]
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, rest
    assert "done" in rest
    # the first creator's environment is whole: the second touched nothing
    assert (prefix / "pyvenv.cfg").is_file()
    assert (prefix / "first-was-here").read_text() == "1"
    assert sorted(p.name for p in prefix.parent.iterdir()) == ["tf"]
