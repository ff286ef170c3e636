"""Issue 16, High 2 and 3: real signals on a real `create --force` (a driver process running run_plan with
a fake installer script). A double Ctrl-C, SIGTERM and SIGHUP restore the old environment and kill the
installer's whole process group; after a SIGKILL the installer dies with tfgpu (the watchdog) and the
stranded old environment is shown by `tfgpu envs` and restored by the next create or remove."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import MAKE_VENV, fake_venv_plan, isolate_installers
from tfgpu.build import registry
from tfgpu.build.asides import stranded
from tfgpu.build.execute import run_plan

pytestmark = [pytest.mark.safety, pytest.mark.real_subprocess, pytest.mark.faults]


DRIVER = """
import sys
from pathlib import Path
from tfgpu.build.execute import run_plan
from tfgpu.core.errors import TfgpuError
from tfgpu.plan.planner import Plan, Step
prefix, installer, make = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
plan = Plan(tf="2.20.0", backend="pip", backend_reason="test", prefix=str(prefix), name=None, python="3",
            steps=(Step((sys.executable, "-c", make, str(prefix)), "make the venv"), Step((installer,), "install")),
            tool="venv", env_python=str(prefix / "bin" / "python"))
try:
    try:
        run_plan(plan, force=True)
    except TfgpuError as exc:
        print("ERROR", exc.one_line(), flush=True)
        sys.exit(int(exc.exit_code))
    print("OK", flush=True)
except KeyboardInterrupt:  # a signal of the burst that arrives after the restore (as tfgpu's CLI does)
    sys.exit(130)
"""


@pytest.fixture(autouse=True)
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    return isolate_installers(monkeypatch, tmp_path)




def _installer(tmp_path: Path, *, trap_int: bool) -> tuple[str, Path]:
    """A fake installer: half-installs, starts a background child, records both pids, then hangs. With
    ``trap_int`` it spends 30 s "cleaning up" after a SIGINT, so a second signal lands during cleanup."""
    pids = tmp_path / "pids"
    script = tmp_path / "bin" / "installer"
    script.parent.mkdir(parents=True, exist_ok=True)
    trap = "trap 'sleep 30' INT\n" if trap_int else ""
    script.write_text(f"#!/bin/sh\n{trap}mkdir -p \"$0.d\"\nsleep 300 &\necho \"$$ $!\" > '{pids}.tmp'\n"
                      f"mv '{pids}.tmp' '{pids}'\necho installing\nsleep 300\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script), pids


def _start(tmp_path: Path, prefix: Path, installer: str, pids: Path) -> tuple[subprocess.Popen[str], list[int]]:
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(prefix), installer, MAKE_VENV],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=os.environ.copy())
    deadline = time.monotonic() + 30
    while not pids.exists():
        assert driver.poll() is None, driver.communicate()[0]
        assert time.monotonic() < deadline, "the fake installer never started"
        time.sleep(0.05)
    return driver, [int(x) for x in pids.read_text().split()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purposes
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _wait_dead(pids: list[int], within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in pids if _alive(p)], "the installer or its child outlived tfgpu"


def _old_env(prefix: Path) -> Path:
    run_plan(fake_venv_plan(prefix))
    marker = prefix / "old-marker"
    marker.write_text("old")
    return marker


def _siblings(prefix: Path) -> list[str]:
    return sorted(p.name for p in prefix.parent.iterdir())


@pytest.mark.parametrize(("signals", "word"), [
    ([signal.SIGINT, signal.SIGINT], "interrupted"),
    ([signal.SIGINT] * 6, "interrupted"),
    ([signal.SIGTERM], "stopped by SIGTERM"),
    ([signal.SIGHUP], "stopped by SIGHUP"),
    ([signal.SIGTERM, signal.SIGINT, signal.SIGHUP], "stopped by SIGTERM"),
], ids=["double-ctrl-c", "ctrl-c-burst", "sigterm", "sighup", "term-int-hup"])
def test_signals_during_force_restore_the_old_environment(tmp_path: Path, signals: list[int], word: str) -> None:
    prefix = tmp_path / "envs" / "tf"
    marker = _old_env(prefix)
    # with several signals the installer "cleans up" slowly, so the later ones land during cleanup
    installer, pidfile = _installer(tmp_path, trap_int=len(signals) > 1)
    driver, pids = _start(tmp_path, prefix, installer, pidfile)
    for sig in signals:
        driver.send_signal(sig)
        time.sleep(0.15)
    out, _ = driver.communicate(timeout=60)
    # 130, or killed by one of the burst's last SIGINTs after the restore was done (a shell shows 130 too)
    assert driver.returncode in (130, -signal.SIGINT), out
    assert word in out
    assert "was kept" in out
    assert marker.read_text() == "old"
    assert _siblings(prefix) == ["tf"]  # no .tf.tfgpu-old-PID, no partial
    _wait_dead(pids, within=2.0)
    assert registry.created_by_tfgpu(prefix.resolve()) is not None  # the old one is still tfgpu's, replaceable


def test_sigkill_strands_nothing_for_long(tmp_path: Path, cli: Any) -> None:
    prefix = (tmp_path / "envs" / "tf").resolve()
    marker = _old_env(prefix)
    installer, pidfile = _installer(tmp_path, trap_int=False)
    driver, pids = _start(tmp_path, prefix, installer, pidfile)
    driver.kill()
    driver.communicate(timeout=30)
    _wait_dead(pids, within=5.0)  # the watchdog killed the installer's group
    aside = prefix.with_name(f".tf.tfgpu-old-{driver.pid}")
    assert aside.is_dir()
    assert (aside / "old-marker").read_text() == "old"
    # tfgpu envs shows it with the exact command
    rc, out, err = cli("envs", "--json")
    assert rc == 0
    (item,) = json.loads(out)["stranded"]
    assert item["path"] == str(aside)
    assert item["kind"] == "old"
    assert item["command"] == f"rm -rf -- {prefix} && mv -- {aside} {prefix}"
    rc, out, err = cli("envs")
    assert str(aside) in err
    # the next create on that prefix restores it first, then replaces it as asked
    result = run_plan(fake_venv_plan(prefix), force=True)
    assert any("restored" in n for n in result.notes)
    assert result.replaced
    assert "TensorFlow 2.20.0" in (result.replaced_what or "")
    assert _siblings(prefix) == ["tf"]
    assert not marker.exists()  # replaced, as asked


def test_sigkill_then_remove_restores_then_removes(tmp_path: Path, cli: Any) -> None:
    prefix = (tmp_path / "envs" / "tf").resolve()
    _old_env(prefix)
    installer, pidfile = _installer(tmp_path, trap_int=False)
    driver, pids = _start(tmp_path, prefix, installer, pidfile)
    driver.kill()
    driver.communicate(timeout=30)
    _wait_dead(pids, within=5.0)
    rc, _out, err = cli("remove", str(prefix), "--yes")
    assert rc == 0, err
    assert _siblings(prefix) == []


def test_stranded_trash_and_partial_are_removed_by_the_next_create(tmp_path: Path) -> None:
    prefix = (tmp_path / "envs" / "tf").resolve()
    marker = _old_env(prefix)
    dead = subprocess.Popen([sys.executable, "-c", "import os, sys; from pathlib import Path\n"
                             "from tfgpu.build import registry\n"
                             "p = Path(sys.argv[1])\n"
                             "for kind in ('trash', 'partial'):\n"
                             "    d = p.with_name(f'.tf.tfgpu-{kind}-{os.getpid()}')\n"
                             "    registry.note_aside(d, p, kind, None)\n"
                             "    d.mkdir()\n"
                             "    (d / 'x').write_text('x')\n", str(prefix)])
    dead.wait()  # a tfgpu killed while it deleted them: it had recorded both first
    found = stranded([prefix])
    assert sorted(s.kind for s in found) == ["partial", "trash"]
    run_plan(fake_venv_plan(prefix), force=True)
    assert _siblings(prefix) == ["tf"]
    assert not marker.exists()
    assert registry.load_asides() == []


def test_a_folder_named_like_an_aside_without_a_record_is_left_alone(tmp_path: Path) -> None:
    prefix = (tmp_path / "envs" / "tf").resolve()
    _old_env(prefix)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    theirs = prefix.with_name(f".tf.tfgpu-trash-{dead.pid}")
    theirs.mkdir()
    (theirs / "x").write_text("x")
    assert stranded([prefix]) == []
    run_plan(fake_venv_plan(prefix), force=True)
    assert (theirs / "x").read_text() == "x"
