"""The registry of environments tfgpu made (a JSON file in the tfgpu home), and path safety checks."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import sys
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from tfgpu.core.errors import InputError, NotReady, UsageError, clip_words
from tfgpu.core.paths import home
from tfgpu.core.sysio import replace_file
from tfgpu.plan.envspec import check_name

REGISTRY_SCHEMA = "tfgpu.envs/1"


class NotReadyHome(NotReady):
    """tfgpu's home cannot be written (read-only, full): the surroundings failed, exit 1."""

__all__ = [
    "check_name", "check_prefix", "created_by_tfgpu", "drop_asides", "find", "home", "is_environment", "load",
    "load_asides", "note_aside", "read_marker", "record", "update_smoke", "write_marker",
]

#: The file in every environment tfgpu made: its id, also kept in the registry. `create --force` and
#: `remove` only delete a directory whose marker matches its registry entry (never a user's own venv).
MARKER = ".tfgpu-env.json"
#: Names of the directories a create leaves beside its prefix while it works: the old environment moved
#: aside (`.NAME.tfgpu-old-PID`), the partial new one being thrown away (`.NAME.tfgpu-partial-PID`) and the
#: replaced or removed one being deleted (`.NAME.tfgpu-trash-PID`). A PID that is gone means a killed create.
#: A name alone proves nothing (anyone can make such a folder): the registry's "asides" list records each
#: one before tfgpu makes it (tfgpu.build.asides acts only on what it lists).
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


def _load_doc() -> dict[str, Any]:
    """The registry file as a mapping ({} when there is none); InputError when it cannot be trusted or read."""
    path = registry_path()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        msg = f"tfgpu's environment registry {path} is unreadable: {exc.strerror or exc}"
        raise InputError(msg, hint=f"move it aside (mv {path} {path}.bak); tfgpu starts a new one") from None
    _check_registry_owner(path)
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        msg = f"tfgpu's environment registry {path} is unreadable (corrupt): {clip_words(str(exc), 200)}"
        raise InputError(msg, hint=f"move it aside (mv {path} {path}.bak); tfgpu starts a new one") from None
    return data if isinstance(data, dict) else {}


def load() -> list[dict[str, Any]]:
    """The registered environments: entries that are mappings with a string prefix (anything else in the file,
    an older tfgpu's or a hand edit, is skipped rather than trusted)."""
    envs = _load_doc().get("envs")
    return [e for e in envs if isinstance(e, dict) and isinstance(e.get("prefix"), str)] if isinstance(envs, list) else []


def load_asides() -> list[dict[str, Any]]:
    """The directories tfgpu recorded before making them beside (or at) a prefix, not yet settled: each
    ``{"path", "prefix", "kind", "pid", "id", "entry"}`` (``id``: the marker id of the environment inside;
    ``entry``: for an old environment moved aside, its registry entry, restored with it)."""
    out = _load_doc().get("asides")
    return [a for a in out if _aside_record(a)] if isinstance(out, list) else []


def _aside_record(a: object) -> bool:
    """A record tfgpu could have written: its path is the prefix itself or the one name tfgpu gives an aside
    of that kind and PID beside it (a hand-edited record cannot point tfgpu at any other directory)."""
    if not (isinstance(a, dict) and isinstance(a.get("path"), str) and isinstance(a.get("prefix"), str)
            and a.get("kind") in ASIDE_KINDS and type(a.get("pid")) is int):
        return False
    prefix = Path(a["prefix"])
    # a replaced environment being deleted keeps the name it was set aside under (its record relabelled)
    kinds = ("trash", "old") if a["kind"] == "trash" else (a["kind"],)
    return a["path"] == a["prefix"] or a["path"] in {
        str(prefix.with_name(f".{prefix.name}.tfgpu-{k}-{a['pid']}")) for k in kinds}


def note_aside(path: Path, prefix: Path, kind: str, env_id: str | None, entry: dict[str, Any] | None = None) -> None:
    """Record, before making it, that this process puts a directory at ``path`` (an aside of ``prefix``, or the
    prefix itself for a new environment): what a kill leaves there is then known to be tfgpu's."""
    rec: dict[str, Any] = {"path": str(path), "prefix": str(prefix), "kind": kind, "pid": os.getpid(), "id": env_id}
    if entry is not None:
        rec["entry"] = entry
    with _registry_lock():
        asides = [a for a in load_asides() if a["path"] != str(path)]
        _save(load(), [*asides, rec])


def drop_asides(*paths: Path) -> None:
    """Forget the records of ``paths`` (the directory is gone, restored or adopted)."""
    gone = {str(p) for p in paths}
    with _registry_lock():
        asides = load_asides()
        if any(a["path"] in gone for a in asides):
            _save(load(), [a for a in asides if a["path"] not in gone])


def settle(*, drop: Sequence[Path] = (), entry: dict[str, Any] | None = None, forget: str | None = None,
           relabel: Mapping[str, str] | None = None) -> None:
    """One atomic change of the registry: records of ``drop`` forgotten, ``entry`` registered (replacing the
    one at its prefix), the entry at prefix ``forget`` removed, records relabelled (path -> new kind)."""
    gone = {str(p) for p in drop}
    with _registry_lock():
        envs = load()
        if forget is not None:
            envs = [e for e in envs if e.get("prefix") != forget]
        if entry is not None:
            envs = [*(e for e in envs if e.get("prefix") != entry.get("prefix")), entry]
        asides = [dict(a, kind=(relabel or {}).get(a["path"], a["kind"])) for a in load_asides() if a["path"] not in gone]
        _save(envs, asides)


def _check_registry_owner(path: Path) -> None:
    """The registry names programs and directories that `run`, `shell` and `remove` act on: one that
    another user can write (a shared TFGPU_HOME) is refused, as the knowledge-base cache is ignored."""
    from tfgpu.core.sysio import untrusted_why

    why = untrusted_why(path) if not path.is_symlink() else "it is a symlink"
    if why:
        msg = f"tfgpu's environment registry {path} is not trusted: {why}"
        raise InputError(msg, hint=f"chmod go-w {path.parent} {path}, or set TFGPU_HOME to a directory of your own")


def open_lock_file(path: Path) -> IO[bytes]:
    """A lock file opened for reading and writing without following a symlink or opening anything but
    a regular file (created 0600 when missing): a link or FIFO planted at tfgpu's predictable lock
    names must not let tfgpu truncate, create or block on a file elsewhere. OSError otherwise."""

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


def _save(envs: list[dict[str, Any]], asides: list[dict[str, Any]] | None = None) -> None:
    """Write the registry atomically: a new file under an unpredictable name (O_EXCL), then rename. ``asides``
    None keeps the recorded ones."""
    path = registry_path()
    asides = load_asides() if asides is None else asides
    doc: dict[str, Any] = {"schema": REGISTRY_SCHEMA, "envs": envs}
    if asides:
        doc["asides"] = asides
    data = (json.dumps(doc, indent=2) + "\n").encode()
    try:
        replace_file(path, data)
    except OSError as exc:
        msg = f"cannot write tfgpu's environment registry {path}: {exc.strerror or exc}"
        raise NotReadyHome(msg, hint="free some space or set TFGPU_HOME to a writable directory") from None


def find(name_or_prefix: str) -> dict[str, Any] | None:
    """The entry named ``name_or_prefix`` (or at that prefix); InputError when its prefix is not a path this
    machine can use (envs.json is a file: edited by hand, restored from a backup, written by an older tfgpu)."""
    for e in load():
        if e.get("name") == name_or_prefix or e.get("prefix") == name_or_prefix:
            check_entry_prefix(e)
            return e
    return None


#: POSIX's smallest limits the kernel enforces here (Linux: PATH_MAX 4096, NAME_MAX 255 bytes).
_PATH_MAX, _NAME_MAX = 4096, 255


def check_entry_prefix(entry: dict[str, Any]) -> None:
    """A registry entry's prefix is an absolute path without control characters that the filesystem accepts
    (no name over 255 bytes, at most 4096 in all); container entries name an image, not a path."""
    from tfgpu.backends.names import CONTAINER_BACKENDS

    prefix = str(entry.get("prefix"))
    if entry.get("backend") in CONTAINER_BACKENDS:
        return
    try:
        encoded = os.fsencode(prefix)
    except UnicodeEncodeError:
        encoded = b"\x00"
    why = ("it holds control characters or characters no file name can hold"
           if b"\x00" in encoded or any(ord(c) < 32 or ord(c) == 127 for c in prefix)
           else "it is not an absolute path" if not Path(prefix).is_absolute()
           else f"it is {len(encoded)} bytes long (at most {_PATH_MAX})" if len(encoded) > _PATH_MAX
           else f"a name in it is longer than {_NAME_MAX} bytes" if any(len(p) > _NAME_MAX for p in encoded.split(b"/"))
           else "")
    if why:
        name = entry.get("name") or "an entry"
        msg = f"tfgpu's registry {registry_path()}: {clip_words(str(name), 60)}'s prefix {clip_words(prefix, 80)!r} is unusable: {why}"
        raise InputError(msg, hint=f"fix or delete that entry in {registry_path()} (tfgpu envs --json shows it)")


def record(*, name: str | None, prefix: str, backend: str, tool: str, tf: str, python: str,
           recipe: str, env_python: str, env_id: str | None = None,
           gpu_args: tuple[str, ...] = (), settled: Sequence[Path] = ()) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": name, "prefix": prefix, "backend": backend, "tool": tool, "tf": tf, "python": python,
        "recipe": recipe, "env_python": env_python,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "smoke": None,
    }
    if env_id is not None:
        entry["id"] = env_id
    if gpu_args:  # a container reached through Docker's CDI: `tfgpu run` gives it the same devices
        entry["gpu_args"] = list(gpu_args)
    settle(entry=entry, drop=settled)  # ``settled``: the records of what the new entry now accounts for
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
