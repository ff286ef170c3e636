"""The registry of environments tfgpu made (a JSON file in the tfgpu home), and path safety checks."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import stat
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from tfgpu.core.errors import InputError, NotReady, UsageError, clip_words
from tfgpu.core.paths import envs_dir, home
from tfgpu.core.record import record as record_type
from tfgpu.core.sysio import pid_alive, replace_file
from tfgpu.plan.envspec import check_name

REGISTRY_SCHEMA = "tfgpu.envs/1"


class NotReadyHome(NotReady):
    """tfgpu's home cannot be written (read-only, full): the surroundings failed, exit 1."""

__all__ = [
    "check_name", "check_prefix", "created_by_tfgpu", "find", "home", "is_environment", "load", "read_marker",
    "record", "remove", "stranded", "update_smoke", "write_marker",
]

#: The file in every environment tfgpu made: its id, also kept in the registry. `create --force` and
#: `remove` only delete a directory whose marker matches its registry entry (never a user's own venv).
MARKER = ".tfgpu-env.json"
#: Names of the directories a create leaves beside its prefix while it works: the old environment moved
#: aside (`.NAME.tfgpu-old-PID`), the partial new one being thrown away (`.NAME.tfgpu-partial-PID`) and the
#: replaced one being deleted (`.NAME.tfgpu-trash-PID`). A PID that is gone means a killed create.
ASIDE_KINDS = ("old", "partial", "trash")


def registry_path() -> Path:
    return home() / "envs.json"


def is_environment(path: Path) -> bool:
    """A venv (pyvenv.cfg) or a conda environment (conda-meta/)."""
    return (path / "pyvenv.cfg").is_file() or (path / "conda-meta").is_dir()


def check_prefix(prefix: str | os.PathLike[str]) -> Path:
    """An environment prefix that is safe to create (or, with --force, to replace)."""
    if any(ord(c) < 32 or ord(c) == 127 for c in os.fspath(prefix)):
        # a newline in a prefix would start a new line in `tfgpu plan --format sh` and in logs
        msg = f"refusing the prefix {os.fspath(prefix)!r}: it contains control characters"
        raise UsageError(msg, hint="choose a directory name without newlines or tabs")
    try:
        raw = Path(prefix).expanduser()
    except RuntimeError:  # ~name of a user that does not exist
        msg = f"refusing the prefix {os.fspath(prefix)!r}: its home directory is unknown"
        raise UsageError(msg, hint="give an absolute path") from None
    if not raw.is_absolute():
        raw = Path.cwd() / raw
    try:
        return _check_resolved(raw.resolve())
    except OSError as exc:  # e.g. a name longer than the filesystem allows
        msg = f"cannot use {raw} as an environment prefix: {exc.strerror or exc}"
        raise UsageError(msg, hint="choose another --prefix") from None


def _check_resolved(p: Path) -> Path:
    if p == Path(p.anchor) or p == Path.home().resolve():
        msg = f"refusing to use {p} as an environment prefix"
        raise UsageError(msg, hint="choose a new directory, e.g. --prefix ~/envs/tf")
    if any(part in ("site-packages", "dist-packages") for part in p.parts):
        msg = f"{p} is inside a Python installation's site-packages"
        raise UsageError(msg, hint="choose a directory outside any environment")
    for parent in p.parents:
        if parent != Path(parent.anchor) and is_environment(parent):
            msg = f"{p} is inside another environment ({parent})"
            raise UsageError(msg, hint="choose a directory outside any environment")
    if p.exists() and not p.is_dir():
        msg = f"{p} exists and is not a directory"
        raise UsageError(msg, hint="choose another --prefix")
    return p


def load() -> list[dict[str, Any]]:
    path = registry_path()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as exc:
        msg = f"tfgpu's environment registry {path} is unreadable: {exc.strerror or exc}"
        raise InputError(msg, hint=f"move it aside (mv {path} {path}.bak); tfgpu starts a new one") from None
    _check_registry_owner(path)
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        msg = f"tfgpu's environment registry {path} is unreadable (corrupt): {clip_words(str(exc), 200)}"
        raise InputError(msg, hint=f"move it aside (mv {path} {path}.bak); tfgpu starts a new one") from None
    envs = data.get("envs") if isinstance(data, dict) else None
    return [e for e in envs if isinstance(e, dict)] if isinstance(envs, list) else []


def _check_registry_owner(path: Path) -> None:
    """The registry names programs and directories that `run`, `shell` and `remove` act on: one that
    another user can write (a shared TFGPU_HOME) is refused, as the knowledge-base cache is ignored."""
    if not hasattr(os, "getuid"):  # pragma: no cover - Windows
        return
    try:
        st, parent = path.lstat(), path.parent.stat()
    except OSError:
        return
    others = stat.S_IWGRP | stat.S_IWOTH
    why = ("it is writable by other users" if st.st_mode & others
           else f"it belongs to another user (uid {st.st_uid})" if st.st_uid not in (os.getuid(), 0)
           else f"its directory {path.parent} is writable by other users"
           if parent.st_mode & stat.S_IWOTH and not parent.st_mode & stat.S_ISVTX else "")
    if why:
        msg = f"tfgpu's environment registry {path} is not trusted: {why}"
        raise InputError(msg, hint=f"chmod go-w {path.parent} {path}, or set TFGPU_HOME to a directory of your own")


def open_lock_file(path: Path) -> IO[bytes]:
    """A lock file opened for reading and writing without following a symlink or opening anything but
    a regular file (created 0600 when missing): a link or FIFO planted at tfgpu's predictable lock
    names must not let tfgpu truncate, create or block on a file elsewhere. OSError otherwise."""
    import stat

    flags = (os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
             | getattr(os, "O_NONBLOCK", 0))
    fd = os.open(path, flags, 0o600)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "r+b")
    except (OSError, ValueError, KeyboardInterrupt):  # a refused file, fdopen failing, or Ctrl-C / a signal
        # before fdopen owns the descriptor: close it, re-raise
        os.close(fd)
        raise


@contextlib.contextmanager
def _registry_lock() -> Iterator[None]:
    """Serialise read-modify-write of the registry between tfgpu processes (an OS lock, released on death)."""
    path = registry_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fh: IO[bytes] = open_lock_file(path.parent / ".envs.lock")
    except OSError as exc:
        msg = f"cannot write tfgpu's home {path.parent}: {exc.strerror or exc}"
        raise NotReadyHome(msg, hint="set TFGPU_HOME to a writable directory") from None
    with fh:
        if os.name == "posix":
            import fcntl

            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        yield


def _save(envs: list[dict[str, Any]]) -> None:
    """Write the registry atomically: a new file under an unpredictable name (O_EXCL), then rename."""
    path = registry_path()
    data = (json.dumps({"schema": REGISTRY_SCHEMA, "envs": envs}, indent=2) + "\n").encode()
    try:
        replace_file(path, data)
    except OSError as exc:
        msg = f"cannot write tfgpu's environment registry {path}: {exc.strerror or exc}"
        raise NotReadyHome(msg, hint="free some space or set TFGPU_HOME to a writable directory") from None


def find(name_or_prefix: str) -> dict[str, Any] | None:
    for e in load():
        if e.get("name") == name_or_prefix or e.get("prefix") == name_or_prefix:
            return e
    return None


def record(*, name: str | None, prefix: str, backend: str, tool: str, tf: str, python: str,
           recipe: str, env_python: str, env_id: str | None = None,
           gpu_args: tuple[str, ...] = ()) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": name, "prefix": prefix, "backend": backend, "tool": tool, "tf": tf, "python": python,
        "recipe": recipe, "env_python": env_python,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "smoke": None,
    }
    if env_id is not None:
        entry["id"] = env_id
    if gpu_args:  # a container reached through Docker's CDI: `tfgpu run` gives it the same devices
        entry["gpu_args"] = list(gpu_args)
    with _registry_lock():
        envs = [e for e in load() if e.get("prefix") != prefix]
        envs.append(entry)
        _save(envs)
    return entry


def update_smoke(prefix: str, smoke: dict[str, Any] | None) -> None:
    with _registry_lock():
        envs = load()
        for e in envs:
            if e.get("prefix") == prefix:
                e["smoke"] = smoke
        _save(envs)


def new_env_id() -> str:
    return uuid.uuid4().hex


def write_marker(prefix: Path, env_id: str) -> None:
    """Mark ``prefix`` as made by tfgpu (the id is also kept in the registry)."""
    path = prefix / MARKER
    data = json.dumps({"tool": "tfgpu", "id": env_id}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(data)


def read_marker(prefix: Path) -> str | None:
    """The tfgpu id in ``prefix``'s marker, or None (no marker, a symlink, not tfgpu's format)."""
    path = prefix / MARKER
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > 4096:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if isinstance(data, dict) and data.get("tool") == "tfgpu" and isinstance(data.get("id"), str):
        return str(data["id"])
    return None


def created_by_tfgpu(prefix: Path) -> dict[str, Any] | None:
    """The registry entry of ``prefix`` when its marker matches it (tfgpu made this very directory)."""
    if prefix.is_symlink():
        return None
    env_id = read_marker(prefix)
    if env_id is None:
        return None
    for e in load():
        if e.get("prefix") == str(prefix) and e.get("id") == env_id:
            return e
    return None


def not_created_error(prefix: Path) -> UsageError:
    msg = f"{prefix} was not created by tfgpu; remove it yourself or choose another prefix"
    return UsageError(msg, hint="tfgpu only replaces or removes environments it made (`tfgpu envs` lists them)")


@record_type
class Stranded:
    """A directory a killed `tfgpu create` left beside a prefix."""

    path: Path
    prefix: Path
    kind: str  # "old" (the previous environment, to restore), "partial" or "trash" (to delete)
    pid: int

    def command(self) -> str:
        """The exact shell command that puts things right by hand."""
        from tfgpu.core.process import quote

        if self.kind == "old":
            undo = f"{quote(['rm', '-rf', '--', str(self.prefix)])} && " if self.prefix.exists() else ""
            return undo + quote(["mv", "--", str(self.path), str(self.prefix)])
        return quote(["rm", "-rf", "--", str(self.path)])


def stranded(prefixes: list[Path] | None = None) -> list[Stranded]:
    """Directories left beside ``prefixes`` (default: every registered prefix) by a create whose process is gone."""
    if prefixes is None:
        try:
            prefixes = [Path(str(e["prefix"])) for e in load() if e.get("prefix")]
        except InputError:
            prefixes = []
    found: list[Stranded] = []
    seen: set[Path] = set()
    for prefix in prefixes:
        parent = prefix.parent
        try:
            children = list(parent.iterdir()) if parent.is_dir() else []
        except OSError:
            continue
        for kind in ASIDE_KINDS:
            head = f".{prefix.name}.tfgpu-{kind}-"
            for child in children:
                # the engine's own partial installs carry a random tail: .NAME.tfgpu-partial-PID-XXXX
                pid_text = child.name[len(head):].split("-", 1)[0] if child.name.startswith(head) else ""
                if pid_text.isdigit() and child not in seen and _ours(child) and not pid_alive(int(pid_text)):
                    seen.add(child)
                    found.append(Stranded(child, prefix, kind, int(pid_text)))
    return sorted(found, key=lambda s: (str(s.prefix), ASIDE_KINDS.index(s.kind)))


def _ours(path: Path) -> bool:
    """A real directory (not a link) of this user: what a killed create of ours can have left. Anything
    else with such a name was put there by someone else, and restoring it would hand them the prefix."""
    try:
        st = path.lstat()
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and (not hasattr(os, "getuid") or st.st_uid == os.getuid())


def recover(item: Stranded, log: Any = None) -> str:
    """Put one stranded directory right: restore an old environment, delete a partial or replaced one.

    Idempotent: each move is one rename, and a rerun after a crash part-way finishes the job."""
    say = log or (lambda _line: None)
    if item.kind == "old":
        if item.prefix.exists() or item.prefix.is_symlink():
            partial = item.prefix.with_name(f".{item.prefix.name}.tfgpu-partial-{item.pid}")
            if partial.exists():
                _rmtree(partial)
            item.prefix.rename(partial)
            item.path.rename(item.prefix)
            _rmtree(partial)
        else:
            item.path.rename(item.prefix)
        say(f"# restored the previous environment {item.prefix} from {item.path}")
        return f"restored {item.prefix} (a killed create had left it in {item.path})"
    _rmtree(item.path)
    say(f"# removed {item.path} left by a killed create")
    return f"removed {item.path} (left by a killed create)"


def _rmtree(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


@contextlib.contextmanager
def prefix_lock(prefix: Path) -> Iterator[Path]:
    """Serialise tfgpu processes working on one prefix (create, remove): an OS file lock, released if the
    process dies."""
    import hashlib

    lock_dir = home() / "locks"
    path = lock_dir / (hashlib.sha256(str(prefix).encode()).hexdigest()[:16] + ".lock")
    try:
        lock_dir.mkdir(parents=True, exist_ok=True)
        fh = open_lock_file(path)
    except OSError as exc:  # a read-only or full tfgpu home, or something planted at the lock's name
        msg = f"cannot write tfgpu's lock {path}: {exc.strerror or exc}"
        raise NotReadyHome(msg, hint="free some space or set TFGPU_HOME to a writable directory") from None
    try:
        try:
            if sys.platform == "win32":  # pragma: no cover - Windows only
                import msvcrt

                fh.seek(0)
                msvcrt.locking(fh.fileno(), msvcrt.LK_NBLCK, 1)
            else:
                import fcntl

                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.seek(0)
            holder = fh.read(200).decode("utf-8", "replace").strip() or "another tfgpu process"
            msg = f"{prefix} is being created by {holder}"
            raise NotReady(msg, hint="wait for it to finish, or use another --name/--prefix") from None
        try:  # who holds it, for the message above; a full disk only loses that note, not the lock
            fh.seek(0)
            fh.truncate()
            fh.write(f"tfgpu pid {os.getpid()}".encode())
            fh.flush()
        except OSError:
            pass
        yield path
    finally:
        with contextlib.suppress(OSError):
            fh.close()


def remove(name_or_prefix: str) -> dict[str, Any]:
    """Delete a registered environment's directory and its registry entry."""
    entry = find(name_or_prefix)
    if entry is None:
        msg = f"{name_or_prefix!r} is not an environment tfgpu made"
        raise UsageError(msg, hint="`tfgpu envs` lists them; tfgpu only removes what it created")
    from tfgpu.backends.names import CONTAINER_BACKENDS

    if entry.get("backend") in CONTAINER_BACKENDS:
        return _forget_image(entry)
    prefix = Path(str(entry["prefix"]))
    with prefix_lock(prefix):
        for item in stranded([prefix]):
            recover(item)
        if prefix.is_symlink():
            msg = f"{prefix} is now a symlink (to {prefix.readlink()}); not deleting what it points to"
            raise UsageError(msg, hint=f"remove the link yourself (rm {prefix}); tfgpu forgets it with the next create")
        if prefix.exists():
            check_prefix(prefix)
            if not is_environment(prefix):
                msg = f"{prefix} does not look like an environment (no pyvenv.cfg or conda-meta/); not deleting it"
                raise UsageError(msg, hint="delete it by hand if you are sure")
            # an entry without an id (v0.1's format, or a line someone added to envs.json) is trusted only
            # inside tfgpu's own envs directory
            # (envs/ itself as a link would make "inside" mean anywhere)
            if created_by_tfgpu(prefix) is None and (entry.get("id") is not None or prefix.parent != envs_dir()
                                                     or envs_dir().is_symlink()):
                raise not_created_error(prefix)
            shutil.rmtree(prefix)
        with _registry_lock():
            _save([e for e in load() if e.get("prefix") != entry["prefix"]])
    return entry


def _forget_image(entry: dict[str, Any]) -> dict[str, Any]:
    """Remove a container entry: forget it; an Apptainer .sif that tfgpu pulled into its images directory is
    deleted, a Docker/Podman image stays in the runtime's store (`docker rmi IMAGE` removes it)."""
    prefix = str(entry["prefix"])
    images = home() / "images"
    if entry.get("backend") == "apptainer" and prefix.endswith(".sif"):
        sif = Path(prefix)
        if sif.parent == images and sif.is_file() and not sif.is_symlink():
            sif.unlink()
    with _registry_lock():
        _save([e for e in load() if e.get("prefix") != prefix])
    return entry
