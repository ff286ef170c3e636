"""Red team, second round: a hostile world around the step runner and the readers. A step (uv in
`tfgpu lock --backend pip`, an installer in `create`) that floods its output, a log that is a device, a
lock written to a full disk. Each test names what happened before its fix ("before:"), or says it held."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import LOCK_FACTS, isolate_installers
from tfgpu.core import process as run
from tfgpu.core.errors import InputError, StepFailed

pytestmark = pytest.mark.safety

Cli = Callable[..., tuple[int, str, str]]


@pytest.fixture(autouse=True)
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    return isolate_installers(monkeypatch, tmp_path)


@pytest.fixture
def thread_errors(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Exceptions that escape a thread (they print a traceback on the user's terminal)."""
    seen: list[str] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: seen.append(repr(args.exc_value)))
    return seen


def _uv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    uv = bindir / "uv"
    uv.write_text("#!/bin/sh\n" + body)
    uv.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    return uv


@pytest.mark.real_subprocess
def test_fault_a_step_printing_one_endless_line_is_read_in_bounded_memory(
        tmp_path: Path, thread_errors: list[str]) -> None:
    # before: the runner read a step's output line by line with no bound: a uv or pip printing 400 MB
    # without a newline held ~2 GB (the line, its decoded copy, the tail of 200 lines), and when the reader
    # lagged it died with "ValueError: readline of closed file" printed as a thread traceback
    flood = "import sys; sys.stdout.write('A' * (48 << 20)); sys.stdout.flush(); sys.exit(2)"
    log = run.StepLog(tmp_path / "step.log")
    tracemalloc.start()
    try:
        with pytest.raises(StepFailed) as info:
            run.run_step([sys.executable, "-c", flood], log=log, timeout=60)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 24 * 1024 * 1024, peak
    assert "exited with 2" in info.value.one_line()
    assert len(info.value.one_line()) < 2000
    assert thread_errors == []


@pytest.mark.real_subprocess
def test_fault_a_step_still_shows_its_last_lines_after_a_long_one(tmp_path: Path) -> None:
    prog = "import sys; print('A' * (1 << 20)); print('ERROR: the real reason'); sys.exit(1)"
    log = run.StepLog(tmp_path / "step.log")
    with pytest.raises(StepFailed) as info:
        run.run_step([sys.executable, "-c", prog], log=log, timeout=60)
    assert "ERROR: the real reason" in info.value.one_line()
    assert "ERROR: the real reason" in (tmp_path / "step.log").read_text()


@pytest.mark.real_subprocess
def test_fault_uv_printing_escape_sequences_never_reaches_the_terminal_raw(
        cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # held: the failure line and the echoed command go through the output layer, which strips escapes
    _uv(tmp_path, monkeypatch,
        "printf 'error: \\033]0;TITLE\\007\\033[2J\\033]8;;http://evil.example/\\033\\\\link\\033]8;;\\033\\\\\\n'\n"
        "exit 2\n")
    rc, out, err = cli("lock", "--tf", "2.20.0", "--backend", "pip", "-o", str(tmp_path / "l.txt"),
                       "--facts", str(LOCK_FACTS), "--force")
    assert rc == 1, err
    assert "\x1b" not in out + err
    assert "\x07" not in out + err
    assert not (tmp_path / "l.txt").exists()


# --------------------------------------------------------------------------- logs that are devices


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_fault_explain_of_a_device_is_refused_at_once(tmp_path: Path, device: str) -> None:
    # before: `tfgpu explain` of /dev/zero (or a log path that is a symlink to it) read the endless device
    # for more than 5 minutes (the 512 MB pipe cap, at the pace of a NUL-only line); a log is a file or a pipe
    from tfgpu.tools.explain import explain_file

    if not Path(device).exists():
        pytest.skip(f"no {device}")
    link = tmp_path / "train.log"
    link.symlink_to(device)
    start = time.monotonic()
    with pytest.raises(InputError, match="not a log file"):
        explain_file(str(link), facts={})
    assert time.monotonic() - start < 2


def test_explain_still_reads_a_pipe(tmp_path: Path) -> None:
    from tfgpu.tools.explain import explain_file

    r, w = os.pipe()
    os.write(w, b"Could not load dynamic library 'libcudart.so.11.0'; dlerror: libcudart.so.11.0: cannot open\n")
    os.close(w)
    report = explain_file(f"/dev/fd/{r}", facts={})
    os.close(r)
    assert report.findings


# --------------------------------------------------------------------------- a full disk under the lock


@pytest.fixture
def full_fs(tmp_path: Path) -> Iterator[Path]:
    """A 64 KB tmpfs, filled (needs root and mount; skipped otherwise)."""
    if shutil.which("mount") is None or not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("needs root and mount")
    where = tmp_path / "full"
    where.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)],
                         capture_output=True, text=True, check=False)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {res.stderr.strip()}")
    try:
        (where / "old.lock.txt").write_text("# the previous lock\n")
        fd = os.open(where / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError:  # full
            pass
        finally:
            os.close(fd)
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.mark.faults
@pytest.mark.real_subprocess
def test_fault_pip_lock_onto_a_full_disk_keeps_the_old_lock(
        cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, full_fs: Path) -> None:
    # held: the lock is written beside the old one under a new name and renamed over it; ENOSPC is rc 1
    _uv(tmp_path, monkeypatch,
        'while [ $# -gt 0 ]; do [ "$1" = -o ] && out="$2"; shift; done\n'
        'printf "six==1.16.0 \\\\\\n    --hash=sha256:%064d\\n" 0 > "$out"\n')
    out = full_fs / "old.lock.txt"
    rc, _o, err = cli("lock", "--tf", "2.20.0", "--backend", "pip", "-o", str(out), "--force",
                      "--facts", str(LOCK_FACTS))
    assert rc == 1, err
    assert "No space left" in err
    assert out.read_text() == "# the previous lock\n"
    assert sorted(p.name for p in full_fs.iterdir()) == ["filler", "old.lock.txt"]


# --------------------------------------------------------------------------- create --force: the aside names


def _made(prefix: Path) -> Path:
    from tests.conftest import fake_venv_plan
    from tfgpu.build.execute import run_plan

    run_plan(fake_venv_plan(prefix))
    mine = prefix / "mine"
    mine.write_text("old env")
    return mine


@pytest.mark.real_subprocess
@pytest.mark.parametrize("kind", ["old", "trash"])
def test_fault_something_at_the_aside_name_never_costs_the_old_environment(tmp_path: Path, kind: str) -> None:
    # before: a link (or file) at .NAME.tfgpu-old-PID made the rename aside fail, and the clean-up then
    # treated the prefix as the partial new environment and deleted it: the old environment was gone
    # ("creating ... failed: Not a directory"). At -trash-PID the rename after success raised a raw
    # NotADirectoryError (rc 3) and left the old environment as "-old-", to be restored over the new one.
    from tests.conftest import fake_venv_plan
    from tfgpu.build.execute import run_plan

    prefix = tmp_path / "envs" / "tf"
    _made(prefix)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "theirs").write_text("x")
    planted = prefix.with_name(f".tf.tfgpu-{kind}-{os.getpid()}")
    planted.symlink_to(elsewhere)
    result = run_plan(fake_venv_plan(prefix), force=True)
    assert result.replaced
    # the link at the name a rename needs is removed (the link, never what it points to); since issue 28 a
    # replaced environment is deleted where it was set aside (its record relabelled), so nothing needs the
    # -trash- name and a link there is someone else's file, left alone
    left = ["tf"] if kind == "old" else sorted([planted.name, "tf"])
    assert sorted(p.name for p in prefix.parent.iterdir()) == left
    assert (elsewhere / "theirs").read_text() == "x"


@pytest.mark.real_subprocess
def test_fault_a_failed_rename_aside_keeps_the_old_environment_in_place(tmp_path: Path) -> None:
    # before: the same clean-up deleted the old environment whenever the rename aside itself failed
    from tests.conftest import fake_venv_plan
    from tfgpu.build.execute import run_plan

    prefix = tmp_path / "envs" / "tf"
    mine = _made(prefix)
    blocker = prefix.with_name(f".tf.tfgpu-old-{os.getpid()}")
    blocker.mkdir()
    (blocker / "not-empty").write_text("x")  # rename(2) onto a non-empty directory fails
    with pytest.raises(StepFailed, match="was kept"):
        run_plan(fake_venv_plan(prefix), force=True)
    assert mine.read_text() == "old env"


@pytest.mark.real_subprocess
def test_attack_newline_in_the_lock_output_name_never_becomes_an_option_line(
        cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # before: `lock --backend pip -o $'a\n--index-url=http://evil.example/simple\nb.txt'` wrote a file whose
    # header ("# Install with: pip install ... -r NAME") split into a line `--index-url=...`, which pip obeys
    # when the user follows that very header
    _uv(tmp_path, monkeypatch,
        'while [ $# -gt 0 ]; do [ "$1" = -o ] && out="$2"; shift; done\n'
        'printf "six==1.16.0 \\\\\\n    --hash=sha256:%064d\\n" 0 > "$out"\n')
    out = tmp_path / "a\n--index-url=http://evil.example/simple\nb.txt"
    rc, _o, err = cli("lock", "--tf", "2.20.0", "--backend", "pip", "-o", str(out), "--facts", str(LOCK_FACTS))
    assert rc == 2, err
    assert "control characters" in err
    assert not out.exists()


@pytest.mark.real_subprocess
def test_fault_a_probe_printing_100_mb_is_captured_in_bounded_memory(thread_errors: list[str]) -> None:
    # held: capture keeps MAX_CAPTURE_BYTES and drains the rest, so the program never blocks on its pipe
    flood = "import sys; [sys.stdout.write('x' * (1 << 20)) for _ in range(100)]; print('end')"
    tracemalloc.start()
    try:
        res = run.capture([sys.executable, "-c", flood], timeout=60)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert res.returncode == 0
    assert len(res.stdout) <= run.MAX_CAPTURE_BYTES
    assert peak < 3 * run.MAX_CAPTURE_BYTES + (8 << 20), peak
    assert thread_errors == []
