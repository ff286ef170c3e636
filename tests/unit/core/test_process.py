"""The subprocess seam: argv only, bounded time and output, typed failures, Ctrl-C kills the tree."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tfgpu.core import process as run
from tfgpu.core.errors import Interrupted, ProgramNotFound, StepFailed

pytestmark = pytest.mark.real_subprocess


def script(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return path


def test_capture_missing_program_is_a_result_not_an_exception():
    res = run.capture(["tfgpu-no-such-program-xyz"], timeout=5)
    assert res.returncode is None
    assert res.error == "tfgpu-no-such-program-xyz: not found"
    assert not res.ok


def test_capture_output_and_exit_code(tmp_path):
    exe = script(tmp_path, "p", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)")
    res = run.capture([str(exe)], timeout=10)
    assert (res.returncode, res.stdout, res.stderr.strip()) == (3, "out\n", "err")
    assert "exited with 3" in res.describe()


def test_capture_hung_program_times_out_and_its_children_die(tmp_path):
    pidfile = tmp_path / "child.pid"
    exe = script(tmp_path, "hang", f"""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        open({str(pidfile)!r}, "w").write(str(child.pid))
        time.sleep(60)
    """)
    start = time.monotonic()
    res = run.capture([str(exe)], timeout=1.5)
    assert time.monotonic() - start < 10
    assert res.timed_out
    assert res.error == f"{exe}: timed out after 1.5 s"
    pid = int(pidfile.read_text())
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("grandchild survived the timeout")


def _watch_pidfd(monkeypatch: pytest.MonkeyPatch, pidfd: str) -> list[int]:
    """The pids whose pidfd is opened ("pidfd"); no os.pidfd_open ("no pidfd"); one failing as an old kernel's
    ("ENOSYS")."""
    opened: list[int] = []
    if pidfd == "pidfd":
        if not hasattr(os, "pidfd_open"):
            pytest.skip("no os.pidfd_open here")
        real = os.pidfd_open
        monkeypatch.setattr(os, "pidfd_open", lambda pid, *a: opened.append(pid) or real(pid, *a))
    elif pidfd == "no pidfd":
        monkeypatch.delattr(os, "pidfd_open", raising=False)
    else:
        def enosys(pid: int, *a: object) -> int:
            raise OSError(38, "Function not implemented")

        monkeypatch.setattr(os, "pidfd_open", enosys, raising=False)
    return opened


@pytest.mark.parametrize("pidfd", ["pidfd", "no pidfd", "ENOSYS"])
def test_capture_sees_the_exit_with_or_without_a_pidfd(tmp_path, monkeypatch, pidfd):
    # Linux: a pidfd wakes capture the moment the program exits (Popen.wait(timeout) polls with sleeps up to
    # 50 ms); without one (another OS, an old kernel) it waits as before. Exit codes and timeouts are the same.
    opened = _watch_pidfd(monkeypatch, pidfd)
    done = script(tmp_path, "done", "import sys; print('bye'); sys.exit(5)")
    res = run.capture([str(done)], timeout=10)
    assert (res.returncode, res.stdout, res.timed_out) == (5, "bye\n", False)
    assert len(opened) == (1 if pidfd == "pidfd" else 0)
    hang = script(tmp_path, "hang", "import time; time.sleep(30)")
    start = time.monotonic()
    res = run.capture([str(hang)], timeout=0.5)
    assert res.timed_out
    assert res.returncode is None
    assert time.monotonic() - start < 10


def test_capture_bounds_output(tmp_path, monkeypatch):
    monkeypatch.setattr(run, "MAX_CAPTURE_BYTES", 1000)
    exe = script(tmp_path, "spew", "import sys\nfor _ in range(10000): sys.stdout.write('x' * 100)\n")
    res = run.capture([str(exe)], timeout=20)
    assert res.returncode == 0
    assert res.truncated
    assert len(res.stdout) == 1000


def test_capture_non_utf8_output_is_replaced(tmp_path):
    exe = script(tmp_path, "bin", "import sys; sys.stdout.buffer.write(b'ok \\xff\\xfe end')")
    res = run.capture([str(exe)], timeout=10)
    assert res.stdout == "ok \ufffd\ufffd end"


def test_capture_not_executable_is_a_result(tmp_path):
    path = tmp_path / "noexec"
    path.write_text("#!/bin/sh\necho hi\n")
    res = run.capture([str(path)], timeout=5)
    assert res.returncode is None
    assert "cannot run" in (res.error or "")


def test_argv_is_never_given_to_a_shell(tmp_path):
    marker = tmp_path / "pwned"
    res = run.capture([sys.executable, "-c", "import sys; print(sys.argv[1])", f"; touch {marker}"], timeout=10)
    assert res.stdout.strip() == f"; touch {marker}"
    assert not marker.exists()


def test_run_step_logs_and_raises_with_hint(tmp_path):
    log = run.StepLog(tmp_path / "create.log")
    exe = script(tmp_path, "fail", "print('resolving'); print('ERROR: no matching distribution'); raise SystemExit(1)")
    with pytest.raises(StepFailed) as info:
        run.run_step([str(exe), "--flag"], log=log, timeout=20)
    assert "exited with 1: ERROR: no matching distribution" in info.value.message
    assert str(log.path) in (info.value.hint or "")
    text = log.path.read_text()
    assert f"+ {exe} --flag" in text
    assert "resolving" in text
    assert "= exit 1" in text
    assert list(log.tail)[-2] == "ERROR: no matching distribution"


def test_run_step_missing_program(tmp_path):
    with pytest.raises(ProgramNotFound, match="tfgpu-nope is not installed"):
        run.run_step(["tfgpu-nope"], log=run.StepLog(tmp_path / "l.log"))


def test_run_step_timeout(tmp_path):
    exe = script(tmp_path, "slow", "import time; time.sleep(30)")
    with pytest.raises(StepFailed, match="timed out after 1 s"):
        run.run_step([str(exe)], log=run.StepLog(tmp_path / "l.log"), timeout=1)


def test_run_step_ctrl_c_kills_the_child_and_raises_interrupted(tmp_path):
    exe = script(tmp_path, "slow", "import time; print('started', flush=True); time.sleep(30)")
    log = run.StepLog(tmp_path / "l.log")
    threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    start = time.monotonic()
    with pytest.raises(Interrupted):
        run.run_step([str(exe)], log=log, timeout=60)
    assert time.monotonic() - start < 15
    assert "! interrupted" in log.path.read_text()


def test_unit_tests_cannot_spawn(request):
    # This module is marked real_subprocess; tests/security/test_guard.py runs the guard itself.
    from tests.conftest import RealSubprocessBlocked

    assert issubclass(RealSubprocessBlocked, BaseException)
    assert not issubclass(RealSubprocessBlocked, Exception)  # no `except Exception` swallows it


def test_run_step_ctrl_c_lets_the_child_clean_up_first(tmp_path):
    done = tmp_path / "cleaned"
    exe = script(tmp_path, "tidy", f"""
        import signal, sys, time
        def bye(*_):
            open({str(done)!r}, "w").write("yes")
            sys.exit(130)
        signal.signal(signal.SIGINT, bye)
        print("started", flush=True)
        time.sleep(30)
    """)
    log = run.StepLog(tmp_path / "l.log")
    threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    with pytest.raises(Interrupted):
        run.run_step([str(exe)], log=log, timeout=60)
    assert done.read_text() == "yes"


@pytest.mark.parametrize("pidfd", ["pidfd", "no pidfd"])
def test_run_step_sees_the_exit_through_a_pidfd(tmp_path, monkeypatch, pidfd):
    # issue 32: each step of `create` waited in Popen.wait(timeout=0.2), which polls with sleeps up to 50 ms after
    # the installer exits; the step runner now waits as capture does, woken the moment the step exits
    opened = _watch_pidfd(monkeypatch, pidfd)
    done = script(tmp_path, "done", "print('installed')")
    log = run.StepLog(tmp_path / "step.log")
    res = run.run_step([str(done)], log=log, timeout=20)
    assert (res.returncode, res.stdout) == (0, "installed")
    assert len(opened) == (1 if pidfd == "pidfd" else 0)
    assert "= exit 0 after" in (tmp_path / "step.log").read_text()


def test_which_skips_the_current_directory_relative_and_world_writable_path_entries(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 28: a program planted in `.`, a relative PATH entry or a folder every user can write never
    resolves (shutil.which would take all three); an absolute folder of this user's still does."""
    for d in ("here", "rel", "shared", "mine"):
        prog = tmp_path / d / "tool"
        prog.parent.mkdir()
        prog.write_text("#!/bin/sh\n")
        prog.chmod(0o755)
    (tmp_path / "shared").chmod(0o777)
    (tmp_path / "shared").chmod(0o1777)  # sticky or not: anyone may add a program there
    monkeypatch.chdir(tmp_path / "here")
    env = {"PATH": os.pathsep.join([".", "", "../rel", str(tmp_path / "shared")])}
    assert run.which("tool", env) is None
    env["PATH"] += os.pathsep + str(tmp_path / "mine")
    assert run.which("tool", env) == str(tmp_path / "mine" / "tool")
