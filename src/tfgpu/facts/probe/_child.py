"""Probe the machine in a forked child while the parent loads the knowledge base: two cores at once.

Why a child process and not a thread: both halves of `tfgpu doctor` are mostly Python bytecode
(importing modules, unpickling the tables, parsing probe outputs), so threads in one interpreter take
turns on the GIL. A fork started before anything else runs truly in parallel; the facts come back as
the same JSON document the probes return (it is JSON-serialisable by contract). Measured on 2 cores:
bench/results.md.

Only on Linux (WSL2 included), where fork is cheap and safe this early (no threads exist yet, no
native library is loaded); ``TFGPU_PROBE_FORK=0`` turns it off. Whatever goes wrong in the child
(a crash, a kill, a hang past the deadline, bad output) makes the parent probe in-process instead,
so the answer never depends on the fork.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

#: Extra seconds the parent waits beyond the probes' own timeout (imports, the grace of the probe threads).
DEADLINE_GRACE = 2.0


def fork_enabled(env: Mapping[str, str]) -> bool:
    """Fork where it is cheap and safe: Linux, and not turned off with TFGPU_PROBE_FORK=0."""
    setting = env.get("TFGPU_PROBE_FORK", "").strip().lower()
    if setting in ("0", "false", "no", "off"):
        return False
    return sys.platform.startswith("linux") and hasattr(os, "fork")


def start(work: Callable[[], Any], fallback: Callable[[str], Any], deadline: float) -> Callable[[], Any]:
    """Run ``work`` (returning JSON-serialisable data) in a forked child now; return a function that
    waits for its result. If the child does not deliver within ``deadline`` seconds of the start, or
    delivers nothing usable, that function returns ``fallback(why)`` (run in this process) instead, where
    ``why`` says what happened ("timed out after 2.5 s", "crashed: killed by signal 11", ...). Calling
    the returned function's ``cancel`` attribute stops the child without waiting; its ``ready`` attribute says,
    without waiting, whether the child has begun to deliver (collecting then waits for no probe)."""
    import time

    started = time.monotonic()
    parent = os.getpid()
    try:
        read_fd, write_fd = os.pipe()
    except OSError as exc:
        why = f"could not fork: {exc}"
        return _now(lambda: fallback(why))
    try:
        pid = os.fork()
    except OSError as exc:
        os.close(read_fd)
        os.close(write_fd)
        why = f"could not fork: {exc}"
        return _now(lambda: fallback(why))
    if pid == 0:  # pragma: no cover - the child; its result is checked by the parent's tests
        code = 70
        try:
            _die_with(parent)
            os.close(read_fd)
            import json

            data = json.dumps(work()).encode()
            view = memoryview(data)
            while view:
                view = view[os.write(write_fd, view):]
            code = 0
        finally:  # whatever happened (an error, SystemExit, Ctrl-C), a forked child never unwinds into the parent's
            os._exit(code)  # code: it exits here, 70 unless it delivered, and the parent then probes in-process
    os.close(write_fd)
    done = False

    def cancel() -> None:
        nonlocal done
        if not done:
            done = True
            _stop(pid, read_fd)

    def collect() -> Any:
        nonlocal done
        if done:
            return fallback("cancelled")
        done = True
        try:
            data = _read_until(read_fd, started + deadline)
        finally:
            os.close(read_fd)
        if data is None:  # past the deadline
            _reap(pid, kill=True)
            return fallback(f"timed out after {deadline:g} s")
        status = _reap(pid, kill=False)
        if status is not None:
            return fallback(f"crashed: {status}")
        import json

        try:
            return json.loads(data)
        except ValueError:
            return fallback("sent no usable result")

    collect.cancel = cancel  # type: ignore[attr-defined]
    collect.ready = lambda: done or _readable(read_fd)  # type: ignore[attr-defined]
    return collect


def _die_with(parent: int) -> None:  # pragma: no cover - runs in the child
    """The child ends with its parent, and the programs it runs with it: a SIGTERM, SIGHUP or SIGINT (the
    terminal's Ctrl-C, or the kernel's word that the parent died: PR_SET_PDEATHSIG, which covers a SIGKILL of
    the doctor) kills the process group of each probe program running (tfgpu.core.process.stop_children, a
    hung nvidia-smi included), then the child exits."""
    import signal

    def stop(signum: int, frame: object) -> None:
        from tfgpu.core.process import stop_children

        stop_children()
        os._exit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, stop)
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG (linux/prctl.h)
    except (OSError, AttributeError):  # not Linux's libc: the signals above still stop it
        pass
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(70)


def _now(fallback: Callable[[], Any]) -> Callable[[], Any]:
    def collect() -> Any:
        return fallback()

    collect.cancel = lambda: None  # type: ignore[attr-defined]
    collect.ready = lambda: True  # type: ignore[attr-defined]
    return collect


def _readable(fd: int) -> bool:
    """Whether the child has begun to send its result, or is gone (collecting would not wait for the probes)."""
    import select

    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    return bool(poller.poll(0))


def _read_until(fd: int, deadline: float) -> bytes | None:
    """Everything the child writes until it closes the pipe, or None past the deadline."""
    import select
    import time

    chunks: list[bytes] = []
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not poller.poll(int(left * 1000) + 1):
            if time.monotonic() >= deadline:
                return None
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _reap(pid: int, *, kill: bool) -> str | None:
    """Collect the child's exit status: None when it exited 0, else what happened. A child past its
    deadline is killed; one that cannot be reaped at once (stuck in the kernel) is left for the
    interpreter's exit."""
    import signal
    import time

    if kill:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            return "killed"
    until = time.monotonic() + 1.0
    while True:
        try:
            got, status = os.waitpid(pid, os.WNOHANG if kill else 0)
        except OSError as exc:
            return f"lost ({exc})"
        if got == pid:
            break
        if time.monotonic() >= until:  # a process stuck in the kernel ignores SIGKILL until it returns
            return "killed"
        time.sleep(0.01)
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
    return None if code == 0 else f"exited with {code}"


def _stop(pid: int, fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass
    _reap(pid, kill=True)
