"""The one place that starts subprocesses: argv lists, timeouts, bounded output, log capture.

Two entry points share one spawner (``_spawn``), which the test-suite replaces:
- ``capture()`` for probes: never raises because a program is missing, hangs or crashes;
  the result says what happened.
- ``run_step()`` for plans: echoes ``+ cmd``, streams the output to a log file, raises typed
  errors on failure and keeps the last lines that matter.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence

from tfgpu.core.errors import Interrupted, ProgramNotFound, StepFailed, clip_words
from tfgpu.core.record import field, record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the doctor's probe child runs this)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import IO, Any

#: The spawner. Tests replace this (tests/conftest.py) so unit tests cannot touch the world.
_spawn: Callable[..., subprocess.Popen[bytes]] = subprocess.Popen

#: Probes never keep more than this much of a program's output (a broken tool may print forever).
MAX_CAPTURE_BYTES = 4 * 1024 * 1024


@record
class Result:
    """What a finished (or failed-to-start) program did."""

    argv: tuple[str, ...]
    returncode: int | None  # None: it did not start, or was killed on timeout
    stdout: str = ""
    stderr: str = ""
    duration: float = 0.0
    timed_out: bool = False
    error: str | None = None  # why it did not run or did not finish, in one line
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.error is None

    def describe(self) -> str:
        """One line: what happened, for a report."""
        if self.error:
            return self.error
        if self.returncode != 0:
            last = (self.stderr.strip() or self.stdout.strip()).splitlines()
            tail = f": {clip_words(last[-1], 200)}" if last else ""
            how = f"exited with {self.returncode}"
            if self.returncode is not None and self.returncode < 0:  # killed (the OOM killer, kill -9, a crash)
                try:
                    how = f"was killed by signal {signal.Signals(-self.returncode).name}"
                except ValueError:
                    how = f"was killed by signal {-self.returncode}"
            return f"{shown(self.argv)} {how}{tail}"
        return f"{shown(self.argv)} succeeded"


def _mask(line: str) -> str:
    from tfgpu.core.termtext import mask_secrets

    return mask_secrets(line)


def shown(argv: Sequence[str]) -> str:
    """:func:`quote` for a terminal, a CI log or tfgpu's log files: each argument masked before it is quoted
    (tfgpu.core.termtext.mask_secrets: ``--index-url https://user:TOKEN@host/simple`` shows ``user:****@``, as
    pip and uv print it, whatever quotes or ``@`` the password holds). Generated scripts (``plan --format sh``)
    keep the real text: they must run."""
    from tfgpu.core.termtext import (
        mask_secrets,  # its patterns compile on first use: not on the doctor's path
    )

    return quote([mask_secrets(a) for a in argv])


def quote(argv: Sequence[str]) -> str:
    """Shell-quoted rendering of an argv, for display only (never executed by a shell)."""
    if sys.platform == "win32":  # pragma: no cover - display only
        return subprocess.list2cmdline(list(argv))
    return shlex.join(argv)


def which(program: str, env: Mapping[str, str] | None = None) -> str | None:
    """Resolve a program the way the child will (PATH from ``env`` when given)."""
    if _absolute(program):
        return program if os.path.exists(program) else None  # noqa: PTH110 - a string, no pathlib in the probe child
    path = (env or os.environ).get("PATH")
    if sys.platform == "win32":  # pragma: no cover - PATHEXT and the current directory: shutil's rules
        import shutil

        return shutil.which(program, path=path)
    # POSIX: shutil.which's rule without importing shutil (and bz2, lzma) on the doctor's path; the current
    # directory (an empty entry, `.`), relative entries and folders every user can write are skipped
    # rather than trusted (trusted_dir): a program planted there would run as tfgpu's.
    if os.sep in program:
        return program if _executable(program) else None
    seen: set[str] = set()
    for folder in (path if path is not None else os.defpath).split(os.pathsep):
        if folder and folder not in seen and trusted_dir(folder):
            seen.add(folder)
            candidate = os.path.join(folder, program)  # noqa: PTH118 - a string for the caller
            if _executable(candidate):
                return candidate
    return None


def _absolute(program: str) -> bool:
    """``Path(program).is_absolute()`` without pathlib: on Windows a path needs its drive too."""
    if sys.platform == "win32":  # pragma: no cover - Windows
        return os.path.isabs(program) and bool(os.path.splitdrive(program)[0])  # noqa: PTH117
    return os.path.isabs(program)  # noqa: PTH117


def trusted_dir(folder: str) -> bool:
    """A PATH entry tfgpu may run programs from: an absolute path (not `.`, not relative to wherever tfgpu was
    started) to a folder that not every user can write (a world-writable folder, sticky or not, lets anyone
    add a program there). A folder that cannot be looked at has nothing to run."""
    if not os.path.isabs(folder):  # noqa: PTH117 - a string per PATH entry
        return False
    found = _TRUSTED.get(folder)
    if found is None:
        import stat

        try:
            found = not os.stat(folder).st_mode & stat.S_IWOTH  # noqa: PTH116 - a string per PATH entry
        except OSError:
            found = False
        _TRUSTED[folder] = found
    return found


#: trusted_dir's answers, per folder (the doctor asks for the same few PATH entries hundreds of times).
_TRUSTED: dict[str, bool] = {}


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)  # noqa: PTH113 - no Path objects per PATH entry


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _popen_kwargs() -> dict[str, Any]:
    if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
        return {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}
    return {"start_new_session": True}


class SignalGuard:
    """The signal model of a build: the first SIGINT, SIGTERM or SIGHUP raises KeyboardInterrupt (a dropped
    SSH session and a CI cancel are handled like Ctrl-C); later ones, and all of them once ``disarm``ed,
    are only counted, so cleanup and restore run to the end. ``hold`` defers a signal past a few
    statements that must happen together."""

    def __init__(self) -> None:
        self.count = 0
        self.armed = True
        self.signum: int | None = None
        self._held = 0
        self._pending = False

    def __call__(self, signum: int, frame: object) -> None:
        self.count += 1
        if self.signum is None:
            self.signum = signum
        if self.armed and self._held:
            self._pending = True
        elif self.armed:
            self.armed = False
            raise KeyboardInterrupt

    def disarm(self) -> None:
        self.armed = False

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        self._held += 1
        try:
            yield
        finally:
            self._held -= 1
        if self._pending and self.armed and not self._held:
            self._pending = False
            self.armed = False
            raise KeyboardInterrupt


#: The guard of the build in progress (run_step reads its count: a second signal ends the grace period).
_guard: SignalGuard | None = None
_GUARDED = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n))


@contextlib.contextmanager
def signal_guard() -> Iterator[SignalGuard]:
    """Install a SignalGuard for INT, TERM and HUP (main thread only; elsewhere it only counts)."""
    global _guard
    guard = SignalGuard()
    old: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in _GUARDED:
            old[sig] = signal.signal(sig, guard)
    previous, _guard = _guard, guard
    failed = True
    try:
        yield guard
        failed = False
    finally:
        _guard = previous
        for sig, handler in old.items():
            signal.signal(sig, handler)
    if not failed and guard.count:  # a signal after the build was committed: stop before anything else runs
        raise KeyboardInterrupt


def signal_name(signum: int | None) -> str:
    """How a build was stopped, for its message."""
    if signum is None or signum == getattr(signal, "SIGINT", None):
        return "interrupted"
    try:
        return f"stopped by {signal.Signals(signum).name}"
    except ValueError:
        return f"stopped by signal {signum}"


#: The watchdog: a tiny process holding the read end of a pipe whose write end only tfgpu has. When
#: tfgpu dies in any way (SIGKILL included) the pipe reads EOF and the installer's process group is
#: killed; a byte on the pipe means the step finished normally. (PR_SET_PDEATHSIG would reach the
#: installer only, not the programs it started.)
_WATCHDOG = ("import os,signal,sys\n"
             "signal.signal(signal.SIGINT,signal.SIG_IGN)\n"
             "signal.signal(signal.SIGHUP,signal.SIG_IGN)\n"
             "if not os.read(0,1):\n"
             " try: os.killpg(int(sys.argv[1]),signal.SIGKILL)\n"
             " except OSError: pass\n")


def _start_watchdog(pgid: int) -> tuple[int, subprocess.Popen[bytes]] | None:
    if sys.platform == "win32":  # pragma: no cover - a job object would do it there
        return None
    r, w = os.pipe()
    try:
        dog = _spawn([sys.executable, "-S", "-I", "-c", _WATCHDOG, str(pgid)], stdin=r,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        os.close(w)
        return None
    finally:
        os.close(r)
    return w, dog


def _stop_watchdog(dog: tuple[int, subprocess.Popen[bytes]] | None) -> None:
    if dog is None:
        return
    w, proc = dog
    try:
        os.write(w, b"x")
    except OSError:
        pass
    os.close(w)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover - it exits at once
        proc.kill()


def _wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """``proc.wait(timeout)``, woken the moment the program exits. With a timeout, Popen.wait polls with
    sleeps that double up to 50 ms, so a program that exits after 16 ms is seen after 31 ms: on the doctor's
    path (nvcc, ldconfig) that was most of a probe's time. On Linux a pidfd says when the process exits;
    elsewhere, or when one cannot be had, Popen.wait as before. Raises subprocess.TimeoutExpired."""
    pidfd_open = getattr(os, "pidfd_open", None)
    fd = None
    if pidfd_open is not None and proc.returncode is None:
        try:
            fd = pidfd_open(proc.pid)
        except OSError:  # an old kernel (ENOSYS), or the process is gone already
            fd = None
    if fd is not None:
        import select

        try:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            if not poller.poll(max(0, int(timeout * 1000)) + 1):  # readable once the process has exited
                raise subprocess.TimeoutExpired(proc.args, timeout)
        finally:
            os.close(fd)
    proc.wait(timeout=timeout)  # at once when the pidfd said it exited


def _kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """Kill a child and everything it started (it runs in its own session / group)."""
    try:
        if sys.platform != "win32":
            os.killpg(proc.pid, signal.SIGKILL)
        else:  # pragma: no cover - Windows only
            proc.kill()
    except (ProcessLookupError, PermissionError, OSError):
        pass


def _interrupt_tree(proc: subprocess.Popen[bytes], grace: float) -> None:
    """Forward Ctrl-C to the child's process group (it runs in its own session, so the terminal's
    SIGINT did not reach it), give it ``grace`` seconds to clean up after itself, then kill it. A
    further signal ends the grace period at once; nothing leaves here with the group alive."""
    seen = _guard.count if _guard is not None else 0
    try:
        if sys.platform != "win32":
            try:
                os.killpg(proc.pid, signal.SIGINT)
            except (ProcessLookupError, PermissionError, OSError):
                pass
            end = time.monotonic() + grace
            while time.monotonic() < end and (_guard is None or _guard.count <= seen):
                try:
                    proc.wait(timeout=0.1)
                    break
                except subprocess.TimeoutExpired:
                    pass
    finally:
        _kill_tree(proc)  # the group: a child that exited may have left programs running


#: Seconds a child gets to clean up after a forwarded Ctrl-C (the conda engine removes its partial prefix).
INTERRUPT_GRACE = 10.0


def _read_bounded(stream: IO[bytes], sink: bytearray, flags: list[bool]) -> None:
    while True:
        chunk = stream.read(65536)
        if not chunk:
            return
        room = MAX_CAPTURE_BYTES - len(sink)
        if room > 0:
            sink.extend(chunk[:room])
        if len(chunk) > room:
            flags[0] = True  # keep draining so the child never blocks on a full pipe


#: The programs capture() is running now (any thread): what stop_children() ends when tfgpu is stopped.
_LIVE: set[subprocess.Popen[bytes]] = set()


def stop_children() -> None:
    """Kill the process group of every program capture() is running (a forked probe child told to stop, or
    whose parent died): nothing tfgpu started outlives it."""
    for proc in list(_LIVE):
        _kill_tree(proc)


def capture(
    argv: Sequence[str],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    guard: bool = False,
) -> Result:
    """Run a program and capture its output. Never raises for a missing, hung or crashing program.

    The program runs in a session of its own; when tfgpu is stopped while it runs (Ctrl-C, or SIGTERM/SIGHUP
    turned into KeyboardInterrupt by a SignalGuard) its whole group is killed before the exception goes on.
    ``guard`` (a long run: the smoke test) adds the runner's watchdog, so that a SIGKILL of tfgpu kills the
    group too."""
    argv = tuple(str(a) for a in argv)
    start = time.monotonic()
    exe = which(argv[0], env)
    if exe is None:
        return Result(argv, None, error=f"{argv[0]}: not found")
    try:
        proc = _spawn(
            [exe, *argv[1:]],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            **_popen_kwargs(),
        )
    except OSError as exc:  # permission denied, exec format error, ...
        return Result(argv, None, error=f"{argv[0]}: cannot run: {exc.strerror or exc}")
    _LIVE.add(proc)
    dog = _start_watchdog(proc.pid) if guard else None
    collected = False
    try:
        result = _collect(proc, argv, timeout, start)
        collected = True
        return result
    finally:
        if not collected:  # the wait ended early (Ctrl-C, a signal, a bug): the program must not outlive it
            _kill_tree(proc)
        _LIVE.discard(proc)
        _stop_watchdog(dog)


def _collect(proc: subprocess.Popen[bytes], argv: tuple[str, ...], timeout: float, start: float) -> Result:
    out, err = bytearray(), bytearray()
    flags = [False]
    assert proc.stdout is not None
    assert proc.stderr is not None
    readers = [
        threading.Thread(target=_read_bounded, args=(proc.stdout, out, flags), daemon=True),
        threading.Thread(target=_read_bounded, args=(proc.stderr, err, flags), daemon=True),
    ]
    for t in readers:
        t.start()
    timed_out = False
    try:
        _wait_exit(proc, timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_tree(proc)
        proc.wait()
    # background children of the program (in its own session) would hold the pipes open and outlive it
    _kill_tree(proc)
    for t in readers:
        t.join(timeout=1.0)
    for s in (proc.stdout, proc.stderr):
        s.close()
    duration = time.monotonic() - start
    if timed_out:
        return Result(
            argv, None, _decode(bytes(out)), _decode(bytes(err)), duration, True,
            error=f"{argv[0]}: timed out after {timeout:g} s", truncated=flags[0],
        )
    return Result(argv, proc.returncode, _decode(bytes(out)), _decode(bytes(err)), duration,
                  truncated=flags[0])


@record(frozen=False)
class StepLog:
    """Where a plan's full output goes; keeps the last lines in memory for error messages."""

    path: Path
    echo: Callable[[str], None] | None = None
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=40))
    error: str | None = None  # why the log file could not be written (a full disk); the tail is still kept

    def write(self, line: str) -> None:
        from tfgpu.core.termtext import mask_secrets

        line = mask_secrets(line)  # an installer's output too: a URL with a password, a Bearer header
        self.tail.append(line)
        try:
            with self.path.open("a", encoding="utf-8", errors="replace") as fh:
                fh.write(line if line.endswith("\n") else line + "\n")
        except OSError as exc:  # a full disk must not kill the step (this runs in the output pump thread)
            self.error = self.error or f"cannot write the log {self.path}: {exc.strerror or exc}"


def run_step(
    argv: Sequence[str],
    *,
    log: StepLog,
    timeout: float | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    on_line: Callable[[str], None] | None = None,
) -> Result:
    """Run one step of a plan. Echo ``+ cmd``, stream output to the log, raise on failure.

    Ctrl-C kills the child's whole process group and raises :class:`Interrupted`.
    """
    argv = tuple(str(a) for a in argv)
    exe = which(argv[0], env)
    if exe is None:
        msg = f"{argv[0]} is not installed or not on PATH"
        raise ProgramNotFound(msg, hint=f"install {argv[0]}, or choose another backend with --backend")
    log.write(f"+ {shown(argv)}")
    if log.echo:
        log.echo(f"+ {shown(argv)}")
    start = time.monotonic()
    try:
        proc = _spawn(
            [exe, *argv[1:]],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            **_popen_kwargs(),
        )
    except OSError as exc:
        msg = f"{argv[0]}: cannot run: {exc.strerror or exc}"
        raise StepFailed(msg) from exc
    dog = None
    try:
        dog = _start_watchdog(proc.pid)
        return _follow_step(proc, argv, log=log, start=start, timeout=timeout, on_line=on_line)
    except (Exception, KeyboardInterrupt):  # an error, or Ctrl-C / a signal (raised as KeyboardInterrupt by
        # tfgpu's handlers): kill the step's group (it must not outlive us), re-raise
        _kill_tree(proc)
        raise
    finally:
        _stop_watchdog(dog)


#: A step's output line is kept (and logged) up to this many bytes: a program printing hundreds of MB
#: without a newline held gigabytes (the line, its decoded copy, the tail of lines kept for the error).
MAX_STEP_LINE_BYTES = 64 * 1024


def _follow_step(proc: subprocess.Popen[bytes], argv: tuple[str, ...], *, log: StepLog, start: float,
                 timeout: float | None, on_line: Callable[[str], None] | None) -> Result:
    assert proc.stdout is not None
    lines: deque[str] = deque(maxlen=200)
    deadline = None if timeout is None else start + timeout
    timed_out = False

    def pump() -> None:
        assert proc.stdout is not None
        rest = False  # inside a line already cut at MAX_STEP_LINE_BYTES: its remainder is dropped
        try:
            while raw := proc.stdout.readline(MAX_STEP_LINE_BYTES):
                whole = raw.endswith(b"\n")
                if rest:
                    rest = not whole
                    continue
                line = _decode(raw).rstrip("\r\n")
                if not whole and len(raw) >= MAX_STEP_LINE_BYTES:
                    rest, line = True, line + f" [line cut at {MAX_STEP_LINE_BYTES // 1024} KB]"
                line = _mask(line)
                lines.append(line)
                log.write(line)
                if on_line:
                    on_line(line)
        except (ValueError, OSError):  # the pipe was closed under the reader (the step is over): stop quietly
            return

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        while True:
            try:
                _wait_exit(proc, 0.2)  # woken at the step's exit (a pidfd), not by Popen.wait's polling sleeps
                break
            except subprocess.TimeoutExpired:
                if deadline is not None and time.monotonic() > deadline:
                    timed_out = True
                    _kill_tree(proc)
                    proc.wait()
                    break
        _kill_tree(proc)  # what the step left running in its group would hold the output pipe open
    except KeyboardInterrupt:
        _interrupt_tree(proc, INTERRUPT_GRACE)
        proc.wait()
        reader.join(timeout=2.0)
        log.write(f"! interrupted: {shown(argv)}")
        msg = f"interrupted while running {shown(argv)}"
        raise Interrupted(msg) from None
    reader.join(timeout=5.0)
    proc.stdout.close()
    result = Result(argv, None if timed_out else proc.returncode, "\n".join(lines), "",
                    time.monotonic() - start, timed_out,
                    error=f"{argv[0]}: timed out after {timeout:g} s" if timed_out else None)
    log.write(f"= exit {result.returncode} after {result.duration:.1f} s")
    if not result.ok:
        msg = result.describe()
        raise StepFailed(msg, hint=f"full log: {log.path}")
    return result


def run_foreground(argv: Sequence[str], *, env: Mapping[str, str], cwd: str | os.PathLike[str] | None = None) -> int:
    """Run a program in the foreground with the terminal (`tfgpu run`, `tfgpu shell`): its stdin, stdout and
    stderr are ours, Ctrl-C reaches it (it is in our process group) while tfgpu waits, and a SIGTERM or SIGHUP
    sent to tfgpu (a supervisor, Slurm's scancel, a dropped SSH session) is forwarded to it (:func:`_forwarder`)
    while tfgpu waits for it to end; returns its exit code (128 + N when signal N ended it, as shells say). A
    missing program is ProgramNotFound."""
    argv = tuple(str(a) for a in argv)
    exe = which(argv[0], env)
    if exe is None:
        msg = f"{argv[0]}: not found in the environment or on PATH"
        raise ProgramNotFound(msg, hint="install it into the environment (e.g. `tfgpu run NAME -- python -m pip "
                                        "install ...`) or give its full path")
    proc = _spawn([exe, *argv[1:]], env=dict(env), cwd=cwd)
    forward = _forwarder(proc)
    old = {sig: signal.signal(sig, forward) for sig in _FORWARDED}
    old[signal.SIGINT] = signal.signal(signal.SIGINT, signal.SIG_IGN)  # the child gets Ctrl-C and decides
    try:
        code = proc.wait()
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    return 128 - code if code < 0 else code


_FORWARDED = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n))


def _forwarder(proc: subprocess.Popen[bytes]) -> Callable[[int, object], None]:
    """A handler that passes a signal on to the foreground command: to the process group when tfgpu leads it
    (a shell's job, a supervisor's session: the command and what it started), else (tfgpu inside someone
    else's group, e.g. a script's) to the command alone. tfgpu itself gets a signal it sent its own group
    once more; that copy is not forwarded again."""
    own: dict[int, int] = {}

    def forward(signum: int, frame: object) -> None:
        if own.get(signum):
            own[signum] -= 1
            return
        try:
            if sys.platform != "win32" and os.getpgrp() == os.getpid():
                own[signum] = own.get(signum, 0) + 1
                os.killpg(os.getpid(), signum)
            else:
                proc.send_signal(signum)
        except (ProcessLookupError, PermissionError, OSError):
            pass

    return forward
