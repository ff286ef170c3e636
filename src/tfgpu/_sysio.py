"""Two OS-level helpers that the cache, the environment registry, the lockfile writer and the scans for
stranded directories share. No tfgpu imports: the doctor's start-up and the engine child load it cheaply."""

from __future__ import annotations

import os
from pathlib import Path


def replace_file(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Put ``data`` at ``path`` atomically: a new file beside it under an unpredictable name, created with
    O_EXCL | O_NOFOLLOW (a link or file planted there is never written through), renamed over ``path``.
    Nothing is left behind on failure. Raises OSError; callers say what failed in their own words."""
    tmp = path.with_name(f".{path.name}.{os.urandom(8).hex()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(tmp, flags, mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        tmp.replace(path)
    except BaseException:  # a full disk or Ctrl-C mid-write: remove the half-written file, then re-raise
        tmp.unlink(missing_ok=True)
        raise


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (this one always does; one we may not signal exists too)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: alive, another user's
        return True
    return True
