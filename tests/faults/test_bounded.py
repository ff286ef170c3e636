"""Issue 16, bounded work: a facts file with 120,000 GPUs is judged within 2 s (GPUs capped at 1,024 with
a note); a fake nvidia-smi whose background children hold stdout open costs no more than its timeout
and leaves no child behind (the whole process group is killed)."""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests import TESTS
from tfgpu.core import process as run
from tfgpu.facts.document import MAX_GPUS, load_facts_file

pytestmark = pytest.mark.safety

Cli = Callable[..., tuple[int, str, str]]
FACTS = TESTS / "data" / "facts" / "r740-4x-tesla-m60.json"


def _many_gpus(tmp_path: Path, n: int) -> Path:
    facts = json.loads(FACTS.read_text())
    gpu = facts["gpus"][0]
    facts["gpus"] = [dict(gpu, index=i, uuid=f"GPU-{i:08d}") for i in range(n)]
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(facts))
    return path


def test_gpus_in_a_facts_file_are_capped_with_a_note(tmp_path: Path) -> None:
    facts = load_facts_file(_many_gpus(tmp_path, MAX_GPUS + 5))
    assert len(facts["gpus"]) == MAX_GPUS
    assert facts["notes"][-1] == f"the facts file lists {MAX_GPUS + 5} GPUs; only the first {MAX_GPUS} are judged"


@pytest.mark.faults
def test_120000_gpus_are_judged_within_2_seconds(tmp_path: Path, cli: Cli) -> None:
    path = _many_gpus(tmp_path, 120_000)
    assert path.stat().st_size < 16 * 1024 * 1024
    for args in ((), ("--json",), ("--tf", "2.20")):
        took = []
        for _ in range(2):  # the better of two runs: the machine is shared
            start = time.monotonic()
            rc, _, err = cli("doctor", "--facts", str(path), *args)
            took.append(time.monotonic() - start)
            assert rc in (0, 1), err
        assert min(took) < 2.0, (args, took)


def _script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "nvidia-smi"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def _dies_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not _dead(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return _dead(pid)


def _dead(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


@pytest.mark.real_subprocess
def test_background_children_holding_stdout_neither_delay_nor_leak(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    smi = _script(tmp_path, f"sleep 30 &\necho $! > '{pidfile}'\necho 'NVIDIA-SMI 550.54.15'\nexit 0\n")
    start = time.monotonic()
    res = run.capture([smi], timeout=5)
    took = time.monotonic() - start
    assert res.ok
    assert "NVIDIA-SMI 550.54.15" in res.stdout
    assert took < 5  # bounded (it exits at once; the 30 s child no longer holds the pipes); the leak check below
    assert _dies_within(int(pidfile.read_text()), 2.0), "the background child of the probe leaked"


@pytest.mark.real_subprocess
def test_a_hung_probe_and_its_children_are_killed_at_the_deadline(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    smi = _script(tmp_path, f"sleep 30 &\necho $! > '{pidfile}'\necho partial\nsleep 30\n")
    start = time.monotonic()
    res = run.capture([smi], timeout=1.0)
    took = time.monotonic() - start
    assert res.timed_out
    assert took < 10  # the 1 s deadline, then the kill (a loaded machine is slow); never the 30 s of the children
    # SIGKILL to the group is delivered asynchronously: on a loaded machine the child may still be running for
    # a moment after capture() returned (this check alone failed 1 run in 3 under load 8)
    assert _dies_within(int(pidfile.read_text()), 2.0), "the background child of the hung probe survived"
