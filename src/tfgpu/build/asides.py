"""What a killed or interrupted tfgpu leaves beside an environment, and `tfgpu remove`: both act only on what
the registry says tfgpu made.

A create records each directory in the registry's "asides" list before it makes it (the old environment moved
to ``.NAME.tfgpu-old-PID``, the partial new one at the prefix or moved to ``.NAME.tfgpu-partial-PID``, a
replaced or removed one being deleted); a remove records the environment it is deleting. When that process
is gone (SIGKILL, a crash, a signal during a delete) the next command that touches the prefix finds the
records (``stranded``) and finishes the job (``recover``). A folder that merely carries such a name, and
anything at the prefix that tfgpu cannot prove is its own, is never moved nor deleted.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tfgpu.build import registry
from tfgpu.core.errors import InputError, Interrupted, UsageError
from tfgpu.core.paths import envs_dir
from tfgpu.core.record import field, record
from tfgpu.core.sysio import pid_alive


@record
class Stranded:
    """A directory a killed tfgpu left beside (or at) a prefix, which the registry says tfgpu made."""

    path: Path
    prefix: Path
    kind: str  # "old" (the previous environment, to restore), "partial" or "trash" (to delete)
    pid: int
    env_id: str | None = None
    entry: dict[str, Any] | None = field(default=None, compare=False)  # "old": its registry entry
    blocked: bool = False  # "old": the prefix holds something tfgpu did not make, so it cannot be restored

    def command(self) -> str:
        """The exact shell command that puts things right by hand."""
        from tfgpu.core.process import quote

        if self.kind == "old":
            if self.blocked:  # never `rm -rf` what is at the prefix: mv -T refuses to replace a non-empty directory
                return quote(["mv", "-T", "--", str(self.path), str(self.prefix)])
            undo = f"{quote(['rm', '-rf', '--', str(self.prefix)])} && " if self.prefix.exists() else ""
            return undo + quote(["mv", "--", str(self.path), str(self.prefix)])
        return quote(["rm", "-rf", "--", str(self.path)])

    def describe(self) -> str:
        if self.kind == "old":
            return f"the previous environment of {self.prefix}"
        if self.path == self.prefix:
            return "an environment a killed create left unfinished"
        return f"a half-made or half-deleted copy of {self.prefix}"


def _ours(path: Path) -> bool:
    """A real directory (not a link) of this user: what a killed create of ours can have left. Anything
    else with such a name was put there by someone else, and restoring it would hand them the prefix."""
    try:
        st = path.lstat()
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and (not hasattr(os, "getuid") or st.st_uid == os.getuid())


def _gone(pid: int) -> bool:
    return pid != os.getpid() and not pid_alive(pid)


def _prefix_is_ours(prefix: Path, records: Sequence[dict[str, Any]]) -> bool:
    """What is at ``prefix`` is tfgpu's: a registered environment whose marker matches, or a new one whose
    marker matches a record of this prefix (a create was making it)."""
    if registry.created_by_tfgpu(prefix) is not None:
        return True
    marker = registry.read_marker(prefix) if not prefix.is_symlink() else None
    return marker is not None and any(a["path"] == str(prefix) and a.get("id") == marker for a in records)


def _empty_dir(path: Path) -> bool:
    try:
        return _ours(path) and not any(path.iterdir())
    except OSError:
        return False


def stranded(prefixes: list[Path] | None = None) -> list[Stranded]:
    """What killed tfgpu processes left at or beside ``prefixes`` (default: every one the registry names).

    Recorded directories (the registry's asides whose process is gone): a partial or trash one as it is, an
    old environment or a new one at the prefix only while its marker still says which it is. Also an old
    environment moved aside by a tfgpu that kept no records: ``.NAME.tfgpu-old-PID`` whose marker is the
    registered environment's own. Nothing else, whatever its name."""
    try:
        envs, records = registry.load(), registry.load_asides()
    except InputError:
        return []
    wanted = None if prefixes is None else {str(p) for p in prefixes}
    found: dict[Path, Stranded] = {}
    for rec in records:
        path, prefix = Path(rec["path"]), Path(rec["prefix"])
        if (wanted is not None and rec["prefix"] not in wanted) or not _gone(rec["pid"]) or not _ours(path):
            continue
        marker_needed = rec["kind"] == "old" or path == prefix
        if marker_needed and registry.read_marker(path) != rec.get("id"):
            continue
        entry = rec.get("entry") if isinstance(rec.get("entry"), dict) else None
        found[path] = Stranded(path, prefix, rec["kind"], rec["pid"], rec.get("id"), entry)
    for e in envs:
        if (wanted is None or e["prefix"] in wanted) and isinstance(e.get("id"), str):
            for item in _unrecorded_old(Path(e["prefix"]), e):
                found.setdefault(item.path, item)
    out = []
    for item in found.values():
        if item.kind == "old" and (item.prefix.exists() or item.prefix.is_symlink()):
            blocked = not _empty_dir(item.prefix) and not _prefix_is_ours(item.prefix, records)
            item = Stranded(item.path, item.prefix, item.kind, item.pid, item.env_id, item.entry, blocked)
        out.append(item)
    return sorted(out, key=lambda s: (str(s.prefix), registry.ASIDE_KINDS.index(s.kind), str(s.path)))


def _unrecorded_old(prefix: Path, entry: dict[str, Any]) -> list[Stranded]:
    head = f".{prefix.name}.tfgpu-old-"
    try:
        children = [c for c in prefix.parent.iterdir() if c.name.startswith(head)] if prefix.parent.is_dir() else []
    except OSError:
        return []
    out = []
    for child in children:
        pid_text = child.name[len(head):]
        if (pid_text.isdigit() and _gone(int(pid_text)) and _ours(child)
                and registry.read_marker(child) == entry["id"]):
            out.append(Stranded(child, prefix, "old", int(pid_text), entry["id"], entry))
    return out


def rmtree(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def free_own_name(path: Path) -> None:
    """``path`` carries this live process's PID, so nothing of ours is there: a link or file someone put at
    that name (to make the rename fail, or redirect it) is removed (the link, never what it points to)."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        path.unlink()


def delete_recorded(path: Path, prefix: Path, env_id: str | None) -> None:
    """Delete a directory tfgpu made: the prefix itself is first moved to ``.NAME.tfgpu-trash-PID`` (recorded),
    so a kill part-way leaves a recorded aside, never a half-deleted environment at the prefix."""
    if path == prefix:
        trash = prefix.with_name(f".{prefix.name}.tfgpu-trash-{os.getpid()}")
        free_own_name(trash)
        registry.note_aside(trash, prefix, "trash", env_id)
        prefix.rename(trash)
        registry.drop_asides(prefix)
        path = trash
    rmtree(path)
    registry.drop_asides(path)


def discard(path: Path) -> None:
    """Delete a replaced environment tfgpu moved aside: its record says "trash" first (one write), so a kill
    during the delete leaves a recorded copy to delete, never an "old" one to restore."""
    registry.settle(relabel={str(path): "trash"})
    rmtree(path)
    registry.drop_asides(path)


def recover(item: Stranded, log: Callable[[str], None] | None = None) -> str:
    """Put one stranded directory right: restore an old environment (with its registry entry), delete a
    partial or trash one. Each move is one rename recorded first, so a rerun after a crash part-way finishes
    the job. An old environment whose prefix holds something tfgpu did not make stays where it is."""
    say = log or (lambda _line: None)
    if item.kind != "old":
        delete_recorded(item.path, item.prefix, item.env_id)
        say(f"# removed {item.path} left by a killed tfgpu")
        return f"removed {item.path} ({item.describe()}, left by a killed tfgpu)"
    prefix = item.prefix
    if registry.read_marker(item.path) != item.env_id:  # changed since it was found: not provably ours now
        return f"left {item.path}: it is no longer the environment tfgpu moved aside"
    if _empty_dir(prefix):
        prefix.rmdir()
    there = prefix.exists() or prefix.is_symlink()
    if there and not _prefix_is_ours(prefix, registry.load_asides()):
        say(f"# left {item.path}: {prefix} holds something tfgpu did not make")
        return (f"the previous environment of {prefix} is at {item.path}; {prefix} holds something tfgpu did not "
                f"make, so both are left as they are (move yours away, then: {item.command()})")
    if there:  # the unfinished (or unproven) new environment: recorded, moved away, then deleted
        partial = prefix.with_name(f".{prefix.name}.tfgpu-partial-{os.getpid()}")
        free_own_name(partial)
        registry.note_aside(partial, prefix, "partial", registry.read_marker(prefix))
        prefix.rename(partial)
        item.path.rename(prefix)
        registry.settle(drop=(item.path, prefix), entry=item.entry)
        rmtree(partial)
        registry.drop_asides(partial)
    else:
        item.path.rename(prefix)
        registry.settle(drop=(item.path, prefix), entry=item.entry)
    say(f"# restored the previous environment {prefix} from {item.path}")
    return f"restored {prefix} (a killed create had left it in {item.path})"


def recover_all(prefix: Path, log: Callable[[str], None] | None = None) -> list[str]:
    """``recover`` each thing stranded at ``prefix``, looking again after each (a restore settles others)."""
    notes: list[str] = []
    seen: set[Path] = set()
    while True:
        item = next((s for s in stranded([prefix]) if s.path not in seen), None)
        if item is None:
            return notes
        seen.add(item.path)
        notes.append(recover(item, log))


# --------------------------------------------------------------------------- tfgpu remove


@record
class Removal:
    """What ``remove_environment`` did: the entry, the directories deleted, whether the user said no."""

    entry: dict[str, Any]
    deleted: tuple[Path, ...] = ()
    cancelled: bool = False


def remove_environment(name_or_prefix: str, confirm: Callable[[dict[str, Any], list[Path]], bool]) -> Removal:
    """Delete a registered environment's directory, what killed tfgpu processes left beside it (the registry's
    records), and its registry entry. ``confirm(entry, paths)`` is asked with exactly the directories to be
    deleted (not asked when there is none: forgetting an entry loses nothing). A signal during the delete
    leaves recorded asides that the next `tfgpu remove` finishes."""
    from tfgpu.backends.names import CONTAINER_BACKENDS
    from tfgpu.core import process

    entry = registry.find(name_or_prefix)
    if entry is None:
        msg = f"{name_or_prefix!r} is not an environment tfgpu made"
        raise UsageError(msg, hint="`tfgpu envs` lists them; tfgpu only removes what it created")
    if entry.get("backend") in CONTAINER_BACKENDS:
        return _forget_image(entry, confirm)
    prefix = Path(str(entry["prefix"]))
    with registry.prefix_lock(prefix):
        items = [s for s in stranded([prefix]) if not s.blocked]
        at_prefix = _check_removable(prefix, entry, items)
        targets = ([prefix] if at_prefix else []) + [s.path for s in items if s.path != prefix]
        if targets and not confirm(entry, targets):
            return Removal(entry, cancelled=True)
        with process.signal_guard() as guard:
            try:
                for s in items:
                    if s.path != prefix:
                        delete_recorded(s.path, prefix, s.env_id)
                if at_prefix:
                    delete_recorded(prefix, prefix, registry.read_marker(prefix))
            except KeyboardInterrupt:
                guard.disarm()
                msg = f"{process.signal_name(guard.signum)} while deleting {prefix}"
                raise Interrupted(msg, hint=f"`tfgpu remove {name_or_prefix}` again finishes it") from None
            guard.disarm()
            registry.settle(forget=str(prefix))
    return Removal(entry, tuple(targets))


def _check_removable(prefix: Path, entry: dict[str, Any], items: list[Stranded]) -> bool:
    """Whether the prefix itself is to be deleted: it holds the environment tfgpu made there (or one a killed
    create left unfinished). Refuses (UsageError) a link, anything that is not an environment, and an
    environment tfgpu did not make; False when nothing is there."""
    if prefix.is_symlink():
        msg = f"{prefix} is now a symlink (to {prefix.readlink()}); not deleting what it points to"
        raise UsageError(msg, hint=f"remove the link yourself (rm {prefix}); tfgpu forgets it with the next create")
    try:
        there = prefix.exists()
    except OSError as exc:  # a name longer than the filesystem allows, a directory we may not enter
        msg = f"cannot look at {clip(prefix)}: {exc.strerror or exc}"
        raise UsageError(msg, hint="edit or move tfgpu's registry (tfgpu envs --json shows it)") from None
    if not there or any(s.path == prefix for s in items):
        return there
    registry.check_prefix(prefix)
    if not registry.is_environment(prefix):
        msg = f"{prefix} does not look like an environment (no pyvenv.cfg or conda-meta/); not deleting it"
        raise UsageError(msg, hint="delete it by hand if you are sure")
    # an entry without an id (v0.1's format, or a line someone added to envs.json) is trusted only inside
    # tfgpu's own envs directory (envs/ itself as a link would make "inside" mean anywhere)
    if registry.created_by_tfgpu(prefix) is None and (entry.get("id") is not None or prefix.parent != envs_dir()
                                                      or envs_dir().is_symlink()):
        raise registry.not_created_error(prefix)
    return True


def clip(path: Path, limit: int = 120) -> str:
    text = str(path)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


def _forget_image(entry: dict[str, Any], confirm: Callable[[dict[str, Any], list[Path]], bool]) -> Removal:
    """Remove a container entry: forget it; an Apptainer .sif that tfgpu pulled into its images directory is
    deleted, a Docker/Podman image stays in the runtime's store (`docker rmi IMAGE` removes it)."""
    prefix = str(entry["prefix"])
    images = registry.home() / "images"
    sif = Path(prefix)
    doomed = (entry.get("backend") == "apptainer" and prefix.endswith(".sif") and sif.parent == images
              and sif.is_file() and not sif.is_symlink())
    if doomed and not confirm(entry, [sif]):
        return Removal(entry, cancelled=True)
    if doomed:
        sif.unlink()
    registry.settle(forget=prefix)
    return Removal(entry, (sif,) if doomed else ())
