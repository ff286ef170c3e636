"""The probe context: where the machine's files are (``root``), its environment, and the time budget."""

# Machine paths are strings re-based under ctx.root (they may be Windows paths); os.path keeps them text.
# ruff: noqa: PTH208
from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath

from tfgpu.core import process as run
from tfgpu.core.record import field, record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the doctor's probe child runs this)
if TYPE_CHECKING:
    from typing import Any

#: A probe file read never keeps more than this (a /proc file or header is small; a device is not).
MAX_READ = 1024 * 1024


@record
class Ctx:
    """Everything a probe may look at. ``root`` re-bases every absolute path a probe reads, so a test
    can point the probes at a ``tmp_path`` machine profile; ``env`` replaces ``os.environ``."""

    root: Path
    env: Mapping[str, str]
    timeout: float
    start: float = field(default_factory=time.monotonic)

    @property
    def native(self) -> bool:
        """True when probing the machine tfgpu runs on (root is /), so in-process facts apply."""
        return str(self.root) == self.root.anchor

    def path(self, p: str | os.PathLike[str]) -> Path:
        """A machine path (``/proc/version``) -> the file to read (``<root>/proc/version``)."""
        text = os.fspath(p)
        if self.native:
            return Path(text)
        root = str(self.root)
        if text == root or text.startswith(root + os.sep):
            return Path(text)  # already inside the profile tree (a PATH entry, a tmp path)
        rel = PurePosixPath(text.replace("\\", "/").replace(":", "", 1) if ":" in text[:3] else text)
        parts = [x for x in rel.parts if x not in ("/", "")]
        return self.root.joinpath(*parts)

    def unroot(self, p: str | os.PathLike[str]) -> str:
        """A file inside the profile tree -> the machine path it stands for (identity when native)."""
        text = os.fspath(p)
        if self.native:
            return text
        root = str(self.root)
        if text == root:
            return "/"
        if text.startswith(root + os.sep):
            return "/" + text[len(root) + 1:].replace(os.sep, "/")
        return text

    def read(self, p: str | os.PathLike[str], limit: int = MAX_READ) -> str | None:
        """Text of a machine file, or None when absent/unreadable. Never raises."""
        try:
            with self.path(p).open("rb") as fh:
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
            return self.path(p).exists()
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
        return run.capture(argv, timeout=round(self.remaining(), 2), env=self.env)

    def which(self, program: str) -> str | None:
        return run.which(program, self.env)

    def home(self) -> str | None:
        return self.env.get("HOME") or self.env.get("USERPROFILE")


def run_concurrently(
    jobs: Mapping[str, Callable[[], Any]], timeout: float
) -> tuple[dict[str, Any], dict[str, float], dict[str, str]]:
    """Run named jobs in daemon threads; wait at most ``timeout`` seconds (plus a short grace for the
    jobs' own subprocess timeouts to report). Returns (results, timings, errors).

    Daemon threads rather than ThreadPoolExecutor: the executor's workers are joined at interpreter
    exit, so one hung native call (NVML, a stuck NFS read) would hang tfgpu on the way out.
    """
    results: dict[str, Any] = {}
    timings: dict[str, float] = {}
    errors: dict[str, str] = {}
    lock = threading.Lock()

    def work(name: str, fn: Callable[[], Any]) -> None:
        t0 = time.monotonic()
        try:
            value = fn()
            with lock:
                results[name] = value
        except Exception as exc:  # a probe bug is reported, never raised (STYLE.md point 4)
            with lock:
                errors[name] = f"probe crashed: {type(exc).__name__}: {exc}"
        finally:
            with lock:
                timings[name] = round(time.monotonic() - t0, 4)

    threads = {name: threading.Thread(target=work, args=(name, fn), name=f"tfgpu-probe-{name}", daemon=True)
               for name, fn in jobs.items()}
    start = time.monotonic()
    for t in threads.values():
        t.start()
    grace = 0.5
    for t in threads.values():
        t.join(max(0.0, start + timeout + grace - time.monotonic()))
    with lock:
        for name, t in threads.items():
            if t.is_alive() and name not in results:
                errors[name] = f"timed out after {timeout:g} s"
                timings[name] = round(time.monotonic() - start, 4)
        return dict(results), dict(timings), dict(errors)
