"""OS-level helpers that the cache, the environment registry, the writers of files (lockfiles, CI jobs, environment
specs) and the scans for stranded directories share. No tfgpu imports at module level: the doctor's start-up and
the engine child load it cheaply."""

from __future__ import annotations

import os
from pathlib import Path


def local_today() -> tuple[int, int, int]:
    """Today's (year, month, day) in local time, as ``datetime.date.today()`` says (importing datetime was ~1.5 ms
    of every `tfgpu doctor`)."""
    import time

    now = time.localtime()
    return now.tm_year, now.tm_mon, now.tm_mday


def replace_file(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Put ``data`` at ``path`` atomically: a new file beside it under an unpredictable name, created with
    O_EXCL | O_NOFOLLOW (a link or file planted there is never written through), renamed over ``path``.
    Nothing is left behind on failure. Raises OSError; callers say what failed in their own words."""
    tmp = path.with_name(f".{path.name}.{os.urandom(8).hex()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(tmp, flags, mode)
    written = False
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        tmp.replace(path)
        written = True
    finally:
        if not written:  # a full disk or Ctrl-C mid-write: the half-written file goes
            tmp.unlink(missing_ok=True)


def write_new_file(path: str, text: str, *, force: bool, hint: str = "give another -o PATH") -> None:
    """Write ``text`` at ``path`` (its directories made, atomically: :func:`replace_file`), never over an existing
    file unless ``force``; UsageError / InputError (exit 2) with ``hint`` or the fix otherwise."""
    from tfgpu.core.errors import InputError, UsageError

    target = Path(path)
    if (target.exists() or target.is_symlink()) and not force:
        msg = f"{path} exists; not replacing it without --force"
        raise UsageError(msg, hint=hint)
    if target.is_dir():
        msg = f"{path} is a directory"
        raise UsageError(msg, hint="give a file name with -o")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        replace_file(target, text.encode("utf-8"), mode=0o644)
    except OSError as exc:
        msg = f"cannot write {path}: {exc.strerror or exc}"
        raise InputError(msg, hint="check the directory's permissions, or give another -o PATH") from None


def read_text_file(path: str | Path, *, what: str, limit: int, noun: str, hint: str | None = None) -> str:
    """A UTF-8 file someone gave, read to at most ``limit`` bytes (a huge file, /dev/zero or a pipe must not fill
    the memory); InputError (exit 2) naming ``what`` (e.g. "facts file") and the problem, with ``hint`` where the
    file is missing or too large (``noun``: what such a file is, e.g. "a facts document")."""
    from tfgpu.core.errors import InputError

    try:
        with Path(path).open("rb") as fh:
            data = fh.read(limit + 1)
        text = data.decode("utf-8")
    except FileNotFoundError:
        msg = f"{what} {path} does not exist"
        raise InputError(msg, hint=hint) from None
    except UnicodeDecodeError:
        msg = f"{what} {path} is not UTF-8 text"
        raise InputError(msg) from None
    except OSError as exc:
        msg = f"cannot read {what} {path}: {exc.strerror or exc}"
        raise InputError(msg) from None
    if len(data) > limit:
        size = f"{limit // (1024 * 1024)} MB" if limit >= 1024 * 1024 else f"{limit // 1024} kB"
        msg = f"{what} {path} is larger than {size}: not {noun}"
        raise InputError(msg, hint=hint)
    return text


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


#: platformdirs' Linux answers (the XDG base directories), which tfgpu computes itself on Linux: importing
#: platformdirs costs ~6-25 ms (it pulls tempfile, shutil, random, bz2, lzma) on the doctor's start-up path.
_XDG = {"cache": ("XDG_CACHE_HOME", "~/.cache"), "config": ("XDG_CONFIG_HOME", "~/.config"),
        "data": ("XDG_DATA_HOME", "~/.local/share")}


def user_dir(kind: str, app: str = "tfgpu") -> Path:
    """The per-user ``kind`` directory ("cache", "config" or "data") of ``app``, as platformdirs says:
    the XDG base directory on Linux (an empty or blank variable means its default), else platformdirs."""
    import sys

    linux = sys.platform.startswith("linux")  # a variable: the other branch is tested where it runs
    if linux:
        var, default = _XDG[kind]
        base = os.environ.get(var, "").strip() or default
        return Path(base).expanduser() / app
    import platformdirs

    finder = {"cache": platformdirs.user_cache_dir, "config": platformdirs.user_config_dir,
              "data": platformdirs.user_data_dir}[kind]
    return Path(finder(app, appauthor=False))


def untrusted_why(path: Path) -> str:
    """Why a file that decides what tfgpu runs or installs (its registry, its config file) must not be
    trusted: writable by other users, another user's, or in a directory other users can write (no sticky
    bit); "" when it may be read. POSIX modes only (Windows ACLs are not modes)."""
    import stat

    if not hasattr(os, "getuid"):  # pragma: no cover - Windows
        return ""
    try:
        st, parent = path.stat(), path.absolute().parent.stat()
    except OSError:
        return ""
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "it is writable by other users"
    if st.st_uid not in (os.getuid(), 0):
        return f"it belongs to another user (uid {st.st_uid})"
    if parent.st_mode & stat.S_IWOTH and not parent.st_mode & stat.S_ISVTX:
        return f"its directory {path.absolute().parent} is writable by other users"
    return ""
