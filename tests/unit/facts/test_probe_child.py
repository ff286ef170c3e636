"""Probing in a forked child (tfgpu.facts.probe._child): the parent gets the child's answer, or its own.

The doctor forks only from the console script; these tests fork the test process itself, with work
functions that touch nothing outside it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tfgpu.facts.probe import _child

pytestmark = [
    pytest.mark.skipif(not hasattr(os, "fork") or not sys.platform.startswith("linux"),
                       reason="the doctor forks on Linux only"),
    # the test process may hold threads of earlier tests (Python >= 3.12 warns); the console script forks
    # before it starts any (checked by running it with -W error in tests/unit/cli/test_entry.py)
    pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning"),
]

PARENT = os.getpid()


def fallback(why: str) -> dict[str, object]:
    return {"from": "fallback", "pid": os.getpid(), "why": why}


def child_answer() -> dict[str, object]:
    return {"from": "child", "pid": os.getpid(), "nested": {"list": [1, 2.5, None, "x"]}}


def assert_gone(pid: int) -> None:
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # already reaped by the parent: no zombie left behind


def test_the_answer_comes_from_another_process():
    got = _child.start(child_answer, fallback, deadline=30)()
    assert got["from"] == "child"
    assert got["pid"] != PARENT
    assert got["nested"] == {"list": [1, 2.5, None, "x"]}
    assert_gone(got["pid"])


def test_a_large_answer_is_read_whole():
    big = {"rows": [f"row {i} " + "x" * 50 for i in range(20000)]}  # ~1.2 MB, far beyond a pipe's buffer
    got = _child.start(lambda: big, fallback, deadline=30)()
    assert got == big


def crash() -> dict[str, object]:
    msg = "probe bug"
    raise RuntimeError(msg)


def exit_at_once() -> dict[str, object]:
    os._exit(3)


def not_json() -> object:
    return {"set": {1, 2}}


def segfault() -> object:
    import faulthandler
    import signal

    faulthandler.disable()  # pytest's handler would print the test process's stack
    os.kill(os.getpid(), signal.SIGSEGV)  # what a native library's crash looks like
    time.sleep(10)


@pytest.mark.parametrize(("work", "why"), [
    (crash, "crashed: exited with 70"), (exit_at_once, "crashed: exited with 3"),
    (not_json, "crashed: exited with 70"), (segfault, "crashed: killed by signal 11"),
], ids=["raises", "exits 3", "not JSON", "segfault"])
def test_a_failing_child_means_the_parent_probes_itself(work, why):
    got = _child.start(work, fallback, deadline=30)()
    assert got == {"from": "fallback", "pid": PARENT, "why": why}


def test_a_child_past_its_deadline_is_killed_and_the_parent_probes_itself(tmp_path):
    pid_file = tmp_path / "pid"

    def hang() -> None:
        pid_file.write_text(str(os.getpid()))
        time.sleep(60)

    started = time.monotonic()
    got = _child.start(hang, fallback, deadline=0.5)()
    assert got == {"from": "fallback", "pid": PARENT, "why": "timed out after 0.5 s"}
    assert time.monotonic() - started < 5
    assert_gone(int(pid_file.read_text()))  # killed and reaped: no zombie left


def test_cancel_stops_the_child_without_waiting():
    collect = _child.start(lambda: time.sleep(60), fallback, deadline=60)
    started = time.monotonic()
    collect.cancel()  # type: ignore[attr-defined]
    assert time.monotonic() - started < 5
    assert collect() == {"from": "fallback", "pid": PARENT, "why": "cancelled"}


def test_ready_says_without_waiting_whether_the_answer_is_in(tmp_path):
    go = tmp_path / "go"

    def work() -> dict[str, object]:
        while not go.exists():
            time.sleep(0.01)
        return child_answer()

    collect = _child.start(work, fallback, deadline=30)
    started = time.monotonic()
    assert collect.ready() is False  # type: ignore[attr-defined]
    assert time.monotonic() - started < 1  # it did not wait
    go.write_text("")
    until = time.monotonic() + 20
    while not collect.ready() and time.monotonic() < until:  # type: ignore[attr-defined]
        time.sleep(0.01)
    assert collect.ready()  # type: ignore[attr-defined]
    assert collect()["from"] == "child"
    assert collect.ready()  # type: ignore[attr-defined]  # collected: nothing left to wait for


def test_the_in_process_answer_is_always_ready(monkeypatch):
    monkeypatch.setattr(_child.os, "pipe", lambda: (_ for _ in ()).throw(OSError(24, "Too many open files")))
    collect = _child.start(child_answer, fallback, deadline=30)
    assert collect.ready() is True  # type: ignore[attr-defined]
    assert collect()["from"] == "fallback"


@pytest.mark.parametrize(("value", "platform", "expected"), [
    ("", "linux", True), ("1", "linux", True), ("0", "linux", False), ("off", "linux", False),
    ("", "win32", False), ("", "darwin", False),
])
def test_fork_only_on_linux_unless_turned_off(monkeypatch, value, platform, expected):
    monkeypatch.setattr(_child.sys, "platform", platform)
    assert _child.fork_enabled({"TFGPU_PROBE_FORK": value}) is expected


@pytest.mark.real_subprocess
def test_the_doctor_says_the_same_with_and_without_the_fork(tmp_path):
    def doctor(fork: str) -> dict[str, object]:
        env = {**os.environ, "TFGPU_PROBE_FORK": fork, "TFGPU_CACHE_DIR": str(tmp_path)}
        proc = subprocess.run([sys.executable, "-m", "tfgpu", "doctor", "--json"], capture_output=True, text=True,
                              env=env, check=False, timeout=60)
        assert proc.returncode in (0, 1), proc.stderr
        doc = json.loads(proc.stdout)
        doc["facts"].pop("timings")
        return doc

    forked, here = doctor("1"), doctor("0")
    assert forked["facts"]["probe"].pop("process") == "a forked child"
    assert "process" not in here["facts"]["probe"]
    assert forked == here


def test_the_doctor_probes_itself_when_its_child_fails(monkeypatch):
    """start_facts(fork=True): a child that dies leaves the parent to probe in-process, with the same result."""
    import tfgpu.facts.probe
    from tfgpu.facts.gather import start_facts

    def detect_facts(**kwargs: object) -> dict[str, object]:
        if os.getpid() != PARENT:
            os._exit(9)  # the child dies before answering
        return {"schema": "tfgpu.facts/1", "probed_by": os.getpid(), "isolate_nvml": kwargs["isolate_nvml"],
                "probe": {}}

    monkeypatch.setattr(tfgpu.facts.probe, "detect_facts", detect_facts)
    monkeypatch.setenv("TFGPU_PROBE_FORK", "1")
    facts, active = start_facts(fork=True, timeout=5)()
    assert facts["probed_by"] == PARENT
    assert facts["isolate_nvml"] is True
    assert facts["probe"]["process"] == "this process (the probe child crashed: exited with 9)"
    assert active == []


def test_the_probe_child_is_given_the_probes_timeout_from_the_environment(monkeypatch):
    """TFGPU_PROBE_TIMEOUT (which overrides --timeout) bounds the probes in the child; the parent waited only the
    default 2 s (+ grace) for that child, gave up on a child still within its budget and probed all over again
    in-process (found timing the doctor under valgrind with TFGPU_PROBE_TIMEOUT=120: every probe ran twice)."""
    from tfgpu.facts.gather import start_facts

    deadlines: list[float] = []

    def start(work: object, fallback: object, deadline: float) -> object:
        deadlines.append(deadline)
        return lambda: {"probe": {}}

    monkeypatch.setattr(_child, "start", start)
    monkeypatch.setenv("TFGPU_PROBE_FORK", "1")
    monkeypatch.setenv("TFGPU_PROBE_TIMEOUT", "30")
    start_facts(fork=True)()
    start_facts(fork=True, timeout=5)()
    monkeypatch.delenv("TFGPU_PROBE_TIMEOUT")
    start_facts(fork=True, timeout=5)()
    start_facts(fork=True)()
    grace = _child.DEADLINE_GRACE
    assert deadlines == [30 + grace, 30 + grace, 5 + grace, 2 + grace]
