"""Issue 28 (safety, round four): signals leave a state the next command recognises and finishes, and no
program tfgpu started outlives it. Real signals to a real `python -m tfgpu` (started in a session of its own,
as a job control shell or a supervisor starts it); environments built by `tfgpu create` with a fake uv
(tests/security/helpers.py). Heavy: marked faults (`nox -s faults`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.security.helpers import (
    create_argv,
    dies_within,
    env_with_fake_uv,
    kill_if_alive,
    make_env,
    registry_entries,
    tfgpu,
    wait_for_file,
    write_script,
)

pytestmark = [pytest.mark.safety, pytest.mark.faults]


def _start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[str]:
    """`python -m tfgpu ARGV` in a new session, its output to ``log`` (a pipe could be held open by what it
    leaves behind)."""
    with log.open("w") as fh:
        return subprocess.Popen([sys.executable, "-m", "tfgpu", *argv], stdin=subprocess.DEVNULL, stdout=fh,
                                stderr=subprocess.STDOUT, env=env, start_new_session=True, text=True)


def _signal_ends_the_child(proc: subprocess.Popen[str], pidfile: Path, sig: int, what: str) -> None:
    """Once the child tfgpu started has written ``pidfile``, send ``sig`` to tfgpu; the child must end within
    5 s. The child is killed (by its pid) if it outlives the test."""
    pid = int(wait_for_file(pidfile, proc))
    try:
        proc.send_signal(sig)
        proc.wait(timeout=30)
        assert dies_within(pid, 5.0), f"{what} outlived tfgpu"
    finally:
        kill_if_alive(pid)


def _pid_writer(pidfile: Path) -> str:
    """sh that records its pid (atomically) and then becomes a long sleep: a command that runs until killed."""
    return f"echo $$ > '{pidfile}.tmp' && mv '{pidfile}.tmp' '{pidfile}' && exec sleep 300\n"


# --------------------------------------------------------------------------- Medium: remove's delete


def _big_env(tmp_path: Path, home: Path) -> tuple[Path, list[Path]]:
    """An environment tfgpu made, with 30,000 files (a TensorFlow environment has more): deleting it takes a
    while. Returns its prefix and the files tfgpu itself wrote there (its marker), found as what the
    installer did not write."""
    prefix = make_env(tmp_path, home)
    own = [p for p in prefix.iterdir() if p.name not in ("pyvenv.cfg", "bin")]
    assert own, "tfgpu wrote nothing of its own into the environment"
    for d in range(200):
        sub = prefix / "lib" / "python3.11" / "site-packages" / f"pkg{d:03d}"
        sub.mkdir(parents=True)
        for f in range(150):
            (sub / f"m{f:03d}.py").write_text("x = 1\n")
    return prefix, own


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_medium_signal_during_removes_delete_leaves_what_the_next_remove_finishes(tmp_path: Path, sig: int) -> None:
    """Medium. A SIGTERM (a CI cancel, `kill`) or SIGHUP (a dropped SSH session) arrives while `tfgpu remove`
    deletes the environment's files. Today the delete stops half-way: the environment stays listed, its
    marker or pyvenv.cfg is gone, and every later `remove` refuses it ("not created by tfgpu" / "does not
    look like an environment"): the user must find and delete it by hand. Instead the next `remove`
    recognises what the interrupted one left and finishes it: rc 0, nothing left on disk or in `tfgpu envs`."""
    home = tmp_path / "home"
    env = {**os.environ, "TFGPU_HOME": str(home)}
    prefix, own = _big_env(tmp_path, home)
    watched = [prefix / "pyvenv.cfg", *own]
    proc = _start(["remove", "tf", "--yes"], env, tmp_path / "remove.log")
    deadline = time.monotonic() + 60
    while all(p.exists() for p in watched) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.001)
    proc.send_signal(sig)
    proc.wait(timeout=60)
    siblings = [p for p in prefix.parent.iterdir() if p.name.startswith(".tf.")]
    if not prefix.exists() and not siblings:
        pytest.skip("the delete finished before the signal arrived (this machine deletes too fast to interrupt)")
    res = tfgpu("remove", "tf", "--yes", env=env)
    assert res.returncode == 0, res.stderr
    assert not prefix.exists()
    assert [p.name for p in prefix.parent.iterdir() if p.name.startswith(".tf.")] == []
    assert registry_entries(home) == []


# --------------------------------------------------------------------------- Low: tfgpu run


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_low_tfgpu_run_forwards_sigterm_and_sighup_to_its_command(tmp_path: Path, sig: int) -> None:
    """Low. `tfgpu run tf -- python train.py` under a supervisor (systemd, Slurm's scancel, a CI cancel, `kill`)
    that signals tfgpu's process. Today tfgpu dies of the signal and its command keeps running, never
    signalled (an orphan that holds the GPU). Instead tfgpu forwards SIGTERM/SIGHUP to its command's process
    group: the command ends within seconds."""
    home = tmp_path / "home"
    make_env(tmp_path, home)
    pidfile = tmp_path / "cmd.pid"
    proc = _start(["run", "tf", "--", "sh", "-c", _pid_writer(pidfile)], {**os.environ, "TFGPU_HOME": str(home)},
                  tmp_path / "run.log")
    _signal_ends_the_child(proc, pidfile, sig, "the command (never signalled)")


# --------------------------------------------------------------------------- Low: SIGKILL of a fresh create


def test_low_sigkill_of_a_fresh_create_leaves_a_state_the_next_create_recognises(tmp_path: Path) -> None:
    """Low. A fresh `tfgpu create` (no old environment) is SIGKILLed (the OOM killer, `kill -9`) while the
    installer runs. Today the half-made venv stays at the prefix: `tfgpu envs` does not show it (no entry, not
    an aside), and `create --force` refuses it as "not created by tfgpu", so only a manual `rm -rf` helps.
    Instead it is recognisable as tfgpu's unfinished work: `tfgpu envs` names it and the next `create --force`
    replaces it (rc 0)."""
    home = tmp_path / "home"
    pidfile = tmp_path / "uv.pid"
    proc = _start(create_argv(tmp_path, ["--name", "tf"], "--no-smoke"),
                  env_with_fake_uv(tmp_path, home, FAKE_UV_INSTALL=f"hang:{pidfile}"), tmp_path / "create.log")
    uv = int(wait_for_file(pidfile, proc))
    try:
        proc.kill()
        proc.wait(timeout=30)
        assert dies_within(uv, 10.0), "the installer outlived tfgpu (the watchdog)"
    finally:
        kill_if_alive(uv)
    prefix = home / "envs" / "tf"
    assert (prefix / "pyvenv.cfg").is_file()  # the half-made venv
    listed = tfgpu("envs", "--json", env={**os.environ, "TFGPU_HOME": str(home)})
    res = tfgpu(*create_argv(tmp_path, ["--name", "tf"], "--force", "--no-smoke"), env=env_with_fake_uv(tmp_path, home))
    assert res.returncode == 0, res.stderr
    assert str(prefix) in listed.stdout, "tfgpu envs does not show what the killed create left"


# --------------------------------------------------------------------------- new: tfgpu smoke, the doctor


@pytest.mark.parametrize("sig", [
    pytest.param(signal.SIGTERM, id="SIGTERM"),
    pytest.param(signal.SIGHUP, id="SIGHUP"),
    pytest.param(signal.SIGKILL, id="SIGKILL"),
])
def test_new_a_signal_to_tfgpu_smoke_ends_the_smoke_process(tmp_path: Path, sig: int) -> None:
    """New (R4-N7 SIGTERM/SIGHUP, R4-N8 SIGKILL). `tfgpu smoke` runs the environment's Python (TensorFlow,
    allocating the whole GPU) for up to 600 s. Today a SIGTERM or SIGHUP kills tfgpu and leaves that process
    running until it ends by itself; so does a SIGKILL (the runner's watchdog guards installer steps only).
    Instead the smoke process's group is stopped with tfgpu, as a create step's is: it ends within seconds."""
    pidfile = tmp_path / "smoke.pid"
    python = write_script(tmp_path / "env" / "bin" / "python", _pid_writer(pidfile))
    proc = _start(["smoke", "--python", str(python)], {**os.environ, "TFGPU_HOME": str(tmp_path / "home")},
                  tmp_path / "smoke.log")
    _signal_ends_the_child(proc, pidfile, sig, "the smoke process")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_new_a_signal_to_the_doctor_ends_a_hung_probe(tmp_path: Path, sig: int) -> None:
    """New (R4-N9). `tfgpu doctor` on a machine whose nvidia-smi hangs (a wedged driver), with a longer probe
    timeout (TFGPU_PROBE_TIMEOUT=30); the user gives up and stops it. Today tfgpu's forked probe process and
    the hung nvidia-smi stay behind until the timeout (with no timeout raised, 2 s). Instead the probes stop
    with the doctor: nvidia-smi ends within seconds."""
    pidfile = tmp_path / "smi.pid"
    bindir = tmp_path / "bin"
    write_script(bindir / "nvidia-smi", _pid_writer(pidfile))
    env = {**os.environ, "TFGPU_HOME": str(tmp_path / "home"), "TFGPU_PROBE_TIMEOUT": "30",
           "PATH": f"{bindir}{os.pathsep}/usr/bin{os.pathsep}/bin"}
    proc = _start(["doctor"], env, tmp_path / "doctor.log")
    try:
        _signal_ends_the_child(proc, pidfile, sig, "the hung nvidia-smi")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the doctor's forked probe process, left in its group
        except (ProcessLookupError, PermissionError):
            pass
