"""The probe context: where the machine's files are (``root``), its environment, and the time budget."""

# Machine paths are strings re-based under ctx.root (they may be Windows paths); os.path keeps them text.
# ruff: noqa: PTH110, PTH113, PTH117, PTH118, PTH123, PTH206, PTH208
from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from tfgpu.core import process as run
from tfgpu.core.record import field, record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the doctor's probe child runs this)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

#: A probe file read never keeps more than this (a /proc file or header is small; a device is not).
MAX_READ = 1024 * 1024


@record
class Ctx:
    """Everything a probe may look at. ``root`` re-bases every absolute path a probe reads, so a test
    can point the probes at a ``tmp_path`` machine profile; ``env`` replaces ``os.environ``. Paths stay strings
    (``root`` may be given as a Path): the probe child never imports pathlib, whose import (with urllib.parse) was
    ~4 ms of its start, nor makes a Path object per file it looks at."""

    root: str | Path
    env: Mapping[str, str]
    timeout: float
    start: float = field(default_factory=time.monotonic)
    #: The probed machine's OS ("linux", "windows", "macos"; detect_facts sets it once detected): its path rules
    #: are the ones machine paths follow, whatever this host's are.
    os_name: str | None = None

    @property
    def native(self) -> bool:
        """True when probing the machine tfgpu runs on (root is /), so in-process facts apply."""
        return os.path.splitdrive(os.fspath(self.root))[1] in ("/", os.sep)

    @property
    def paths(self) -> Any:
        """The path rules of the probed machine, chosen by its OS and never by this host's: ``ntpath`` for
        Windows, ``posixpath`` otherwise (``os.path`` when native, which is the same). Machine paths are strings
        joined, split and named by these; :meth:`path` turns one into the file to read here."""
        if self.native:
            return os.path
        import ntpath
        import posixpath

        return ntpath if self.os_name == "windows" else posixpath

    @property
    def pathsep(self) -> str:
        """What separates the entries of the machine's PATH (``;`` on Windows)."""
        if self.native:
            return os.pathsep
        return ";" if self.os_name == "windows" else ":"

    def path(self, p: str | os.PathLike[str]) -> str:
        """A machine path (``/proc/version``) -> the file to read (``<root>/proc/version``)."""
        text = os.fspath(p)
        if self.native:
            return text
        root = os.fspath(self.root)
        if text == root or text.startswith(root + os.sep):
            return text  # already inside the profile tree (a PATH entry, a tmp path)
        rel = text.replace("\\", "/").replace(":", "", 1) if ":" in text[:3] else text
        return os.path.join(root, *[x for x in rel.split("/") if x not in ("", ".")])

    def unroot(self, p: str | os.PathLike[str]) -> str:
        """A file inside the profile tree -> the machine path it stands for (identity when native)."""
        text = os.fspath(p)
        if self.native:
            return text
        root = os.fspath(self.root)
        if text == root:
            return "/"
        if text.startswith(root + os.sep):
            parts = text[len(root) + 1:].split(os.sep)
            if self.os_name == "windows" and len(parts[0]) == 1 and parts[0].isalpha():
                return f"{parts[0]}:\\" + "\\".join(parts[1:])  # <root>/C/Windows -> C:\Windows (path's inverse)
            return "/" + "/".join(parts)
        return text

    def read(self, p: str | os.PathLike[str], limit: int = MAX_READ) -> str | None:
        """Text of a machine file, or None when absent/unreadable. Never raises."""
        try:
            with open(self.path(p), "rb") as fh:
                return fh.read(limit).decode("utf-8", "replace")
        except (OSError, ValueError):
            return None

    def head(self, p: str | os.PathLike[str], size: int = 4096) -> bytes | None:
        """The first ``size`` bytes of a regular machine file (an executable's header), or None. Never raises,
        never blocks: a FIFO or a device named like a program (opened without waiting for a writer) is not read."""
        try:
            fd = os.open(self.path(p), os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        except (OSError, ValueError):
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            return os.read(fd, size)
        except OSError:
            return None
        finally:
            os.close(fd)

    def exists(self, p: str | os.PathLike[str]) -> bool:
        try:
            return os.path.exists(self.path(p))
        except (OSError, ValueError):
            return False

    def listdir(self, p: str | os.PathLike[str]) -> list[str]:
        try:
            return sorted(os.listdir(self.path(p)))
        except (OSError, ValueError):
            return []

    def remaining(self) -> float:
        return max(0.05, self.timeout - (time.monotonic() - self.start))

    def expired(self) -> bool:
        """True once the probe budget is spent (detect_facts has stopped waiting for the probes)."""
        return time.monotonic() - self.start >= self.timeout

    def run(self, argv: Sequence[str]) -> run.Result:
        """Run a program through tfgpu's one subprocess seam, bounded by what is left of the budget.
        Past the deadline nothing starts: a probe thread that detect_facts stopped waiting for (a daemon
        thread, still alive) must not start programs after tfgpu, or a test, has moved on."""
        if self.expired():
            return run.Result(tuple(str(a) for a in argv), None, timed_out=True,
                              error=f"{argv[0]}: not started, the probe budget of {self.timeout:g} s ran out")
        if not self.native and argv and not os.path.isabs(argv[0]):
            found = self.which(str(argv[0]))  # the machine's PATH, by its rules (run.capture would use this host's)
            if found is None:
                return run.Result(tuple(str(a) for a in argv), None, error=f"{argv[0]}: not found")
            argv = [found, *argv[1:]]
        return run.capture(argv, timeout=round(self.remaining(), 2), env=self.env)

    def which(self, program: str) -> str | None:
        """The file to run for ``program``, found on the machine's PATH by the machine's rules: this host's
        when native; in a profile, PATH split by the machine's separator, each entry re-based under ``root``,
        and on Windows the PATHEXT extensions tried as Windows does (``nvidia-smi`` finds ``nvidia-smi.exe``)."""
        if self.native:
            return run.which(program, self.env)
        paths, windows = self.paths, self.os_name == "windows"
        exts = [""]
        if windows and not paths.splitext(program)[1]:
            exts = [e.lower() for e in (self.env.get("PATHEXT") or ".COM;.EXE;.BAT;.CMD").split(";") if e]
        for folder in dict.fromkeys((self.env.get("PATH") or "").split(self.pathsep)):
            if not folder:
                continue  # the current directory: never trusted
            for ext in exts:
                found = self.path(paths.join(folder, program + ext))
                if os.path.isfile(found) and (windows or os.access(found, os.X_OK)):
                    return found
        return None

    def home(self) -> str | None:
        return self.env.get("HOME") or self.env.get("USERPROFILE")


#: How long the probes' threads may all be on their current job before one more thread takes the next job.
STALL = 0.05


def run_concurrently(
    jobs: Mapping[str, Callable[[], Any]], timeout: float, *, stall: float = STALL,
) -> tuple[dict[str, Any], dict[str, float], dict[str, str]]:
    """Run named jobs, in order, in as few daemon threads as keep them moving; wait at most ``timeout`` seconds
    (plus a short grace for the jobs' own subprocess timeouts to report). Returns (results, timings, errors).

    One thread takes the jobs in turn; whenever no job has started or ended for ``stall`` seconds (a program
    that takes its time, a stuck read) another thread starts on the next job, so a job that hangs holds up only
    itself. Why not a thread per job: Python runs one thread at a time, and a dozen probes of a millisecond or two
    each spent more on switching between threads than on probing (tfgpu's own probes: 45 ms of CPU in a thread
    each, 33 ms in turn, and 5 ms later). A job still running or not started at the deadline is reported as timed
    out; none starts after it.

    Daemon threads rather than ThreadPoolExecutor: the executor's workers are joined at interpreter
    exit, so one hung native call (NVML, a stuck NFS read) would hang tfgpu on the way out.
    """
    results: dict[str, Any] = {}
    timings: dict[str, float] = {}
    errors: dict[str, str] = {}
    todo = list(jobs.items())
    moved = [time.monotonic()]  # when a job last started or ended
    cond = threading.Condition()

    def work() -> None:
        while True:
            with cond:
                if not todo:
                    return
                name, fn = todo.pop(0)
                moved[0] = time.monotonic()
            threading.current_thread().name = f"tfgpu-probe-{name}"
            t0 = time.monotonic()
            try:
                value, error = fn(), None
            except Exception as exc:  # a probe bug is reported, never raised (STYLE.md point 4)
                value, error = None, f"probe crashed: {type(exc).__name__}: {exc}"
            with cond:
                if error is None:
                    results[name] = value
                else:
                    errors[name] = error
                timings[name] = round(time.monotonic() - t0, 4)
                moved[0] = time.monotonic()
                if len(timings) == len(jobs):
                    cond.notify()  # the last one: every other wake-up would only cost a switch of threads

    def another() -> None:
        threading.Thread(target=work, name="tfgpu-probe", daemon=True).start()

    start = time.monotonic()
    end = start + timeout + 0.5
    with cond:
        another()
        while len(timings) < len(jobs):
            now = time.monotonic()
            if now >= end:
                break
            if todo and now - moved[0] >= stall:
                another()
                moved[0] = now
            cond.wait(min(end - now, stall) if todo else end - now)
        todo.clear()  # a thread still on its job starts no other
        for name in jobs:
            if name not in timings:
                errors[name] = f"timed out after {timeout:g} s"
                timings[name] = round(time.monotonic() - start, 4)
        return dict(results), dict(timings), dict(errors)
