"""Knowledge fetched by `tfgpu kb update`, kept under $TFGPU_HOME/kb, and which knowledge is in use: the newer
of the data bundled with tfgpu and the newest fetched bundle (compat_dir asks here).

Reading the store never raises: a store that is missing, unreadable, another user's or writable by others
is simply not used (the bundled data is). Writing happens in :func:`commit`, after the bundle was verified
and loaded by the knowledge base's own loader (tfgpu.tools.kbupdate). A fetched version is complete only once
its ``bundle.json`` exists: it is written last, so a half-written directory is never used.

No packaging, json or typing import at module level: compat_dir runs on the doctor's start-up path.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

#: A data version as compat/meta.toml spells it (YYYY.MM.DD, optionally .N for a second one that day).
DATA_VERSION = re.compile(r"[0-9]{4}\.[0-9]{2}\.[0-9]{2}(?:\.[0-9]{1,3})?")
_META_VERSION = re.compile(r'^data_version\s*=\s*"([^"\n]{1,40})"\s*$', re.MULTILINE)
_META_DATE = re.compile(r'^date\s*=\s*"([0-9]{4}-[0-9]{2}-[0-9]{2})"\s*$', re.MULTILINE)
#: Written last into a fetched version's directory: what was fetched, from where, with which hash.
RECORD = "bundle.json"
#: TFGPU_KB_DATA=bundled ignores fetched knowledge (to compare, or when a fetched table misleads).
ONLY_BUNDLED = "TFGPU_KB_DATA"
#: While `tfgpu kb update` has the loader check a staged bundle (tfgpu.tools.kbupdate), its directory; else None.
checking: Path | None = None


def version_key(text: str) -> tuple[int, ...] | None:
    """A data version as a tuple to compare ("2026.11.22" -> (2026, 11, 22)); None when it is not one."""
    return tuple(int(p) for p in text.split(".")) if DATA_VERSION.fullmatch(text) else None


def read_meta(directory: Path) -> tuple[str, str]:
    """(data_version, date) of compat/meta.toml in ``directory``, read without a TOML parser (the loader
    checks the whole file when it parses it); ("", "") when unreadable."""
    try:
        text = (directory / "meta.toml").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return "", ""
    found, date = _META_VERSION.search(text), _META_DATE.search(text)
    return (found.group(1) if found else ""), (date.group(1) if date else "")


def store_dir() -> Path:
    """Where fetched knowledge lives: $TFGPU_HOME/kb."""
    from tfgpu.core.paths import home

    return home() / "kb"


def _safe_dir(path: Path) -> bool:
    """A directory of the current user (or root) that nobody else can write, not a symlink."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode):
        return False
    if os.name != "posix":  # pragma: no cover - Windows ACLs are not modes
        return True
    return st.st_uid in (os.getuid(), 0) and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def fetched_versions(root: Path | None = None) -> list[tuple[tuple[int, ...], Path]]:
    """The complete fetched versions in the store, oldest first, each with its directory. Never raises."""
    try:
        root = store_dir() if root is None else root
        if not _safe_dir(root):
            return []
        found = []
        for entry in os.scandir(root):
            key = version_key(entry.name)
            path = Path(entry.path)
            if key is not None and _safe_dir(path) and (path / RECORD).is_file() \
                    and read_meta(path)[0] == entry.name:
                found.append((key, path))
    except Exception:
        return []
    return sorted(found)


def newer_than(bundled: Path, environ: Mapping[str, str] | None = None) -> Path | None:
    """The newest fetched knowledge when it is newer than the ``bundled`` data, else None (the hook of
    tfgpu.kb.knowledge.compat_dir)."""
    if checking is not None:
        return checking
    env = os.environ if environ is None else environ
    if env.get(ONLY_BUNDLED, "") == "bundled":
        return None
    fetched = fetched_versions()
    if not fetched:
        return None
    bundled_key = version_key(read_meta(bundled)[0]) or ()
    key, path = fetched[-1]
    return path if key > bundled_key else None


def record_of(directory: Path) -> dict[str, Any]:
    """The ``bundle.json`` of a fetched version ({} when absent or unreadable)."""
    import json

    try:
        data = json.loads((directory / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def commit(staged: Path, data_version: str, record: Mapping[str, Any]) -> Path:
    """Move a staged, verified version into place as ``store/<data_version>`` and write its record last.
    An older version already there stays (the newest wins); the same version is replaced."""
    import json
    import shutil

    from tfgpu.core.sysio import replace_file

    if version_key(data_version) is None:
        msg = f"not a data version: {data_version!r}"
        raise ValueError(msg)
    final = staged.parent / data_version
    if final.exists():
        shutil.rmtree(final)
    staged.rename(final)
    replace_file(final / RECORD, (json.dumps(dict(record), indent=2, sort_keys=True) + "\n").encode(), mode=0o644)
    return final


def stage_dir() -> Path:
    """A new private directory in the store to write a bundle's files into before they are checked."""
    root = store_dir()
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not _safe_dir(root):
        from tfgpu.core.errors import UsageError

        msg = f"{root} is another user's or writable by others; tfgpu does not keep knowledge there"
        raise UsageError(msg, hint="chmod go-w it, or set TFGPU_HOME to a directory of your own")
    path = root / f".staging-{os.urandom(6).hex()}"
    path.mkdir(mode=0o700)
    return path
