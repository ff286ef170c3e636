"""Package archives a lockfile pins: fetched into a private store and verified against their sha256 before
anything is linked."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfgpu.backends.rattler.requirement import (
    available as available,  # re-exported: engine.available() is the API
)
from tfgpu.core.errors import StepFailed

if TYPE_CHECKING:
    pass


#: Archives are read and hashed in pieces of this size.
_CHUNK = 1 << 20


def _hash_file(path: Path, algo: str) -> str:
    import hashlib

    h = hashlib.new(algo)
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def _expected_hash(rec: Any) -> tuple[str, str]:
    """(algorithm, hex digest) the lock gives for a record: its sha256. An md5 alone is refused like no
    hash at all: md5 collisions are cheap to make, so it cannot tell the locked archive from another."""
    if rec.sha256:
        return "sha256", rec.sha256.hex()
    msg = (f"the lock gives no sha256 for {rec.file_name}"
           + (" (only an md5, which collisions defeat)" if rec.md5 else "")
           + "; tfgpu installs only verified packages")
    raise StepFailed(msg, hint="regenerate the lock: tfgpu lock --tf VERSION --force")


def _fetch(url: str, dest: Path, *, offline: bool) -> None:
    """Copy a package archive from a file:// path or download it over http(s) into ``dest``."""
    from urllib.parse import unquote, urlparse

    parsed = urlparse(url)
    if parsed.scheme == "file":
        import stat
        from urllib.request import url2pathname

        src = Path(url2pathname(unquote(parsed.path)))
        # non-blocking open, then regular files only: a FIFO, /dev/zero or /dev/stdin named by a lock
        # would hang the install or fill the disk before any hash could be checked
        fd = os.open(src, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as fin:
            if not stat.S_ISREG(os.fstat(fin.fileno()).st_mode):
                msg = f"{url} is not a regular file: a package archive is one"
                raise StepFailed(msg, hint="check the lock's URLs")
            with dest.open("wb") as fout:
                shutil.copyfileobj(fin, fout, _CHUNK)
        return
    if parsed.scheme not in ("http", "https"):
        msg = f"{url}: tfgpu fetches packages over file://, http:// and https:// only"
        raise StepFailed(msg)
    if offline:
        msg = f"--offline: {Path(parsed.path).name} is not in the package cache"
        raise StepFailed(msg, hint="run once without --offline (with the network) to fill the cache")
    import urllib.request

    with urllib.request.urlopen(url, timeout=120) as resp, dest.open("wb") as fout:  # http(s) only, checked above
        shutil.copyfileobj(resp, fout, _CHUNK)


def _private_store(store: Path) -> None:
    """Make ``store`` (mode 0700) or check that it is a real directory of this user that nobody else can
    write, in a parent nobody else can rename it in: an archive is checked here and extracted from
    here later, and whoever could write in between could swap it for one the lock never named."""
    import stat

    store.mkdir(parents=True, exist_ok=True, mode=0o700)
    uid = os.geteuid() if hasattr(os, "geteuid") else None
    for path, own in ((store, True), (store.parent, False)):
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode) and own:
            msg = f"the package store {store} is a symlink: tfgpu keeps verified packages only in a real directory"
        elif not stat.S_ISDIR(st.st_mode) or (own and uid is not None and st.st_uid != uid):
            msg = f"the package store {path} is not a directory of yours"
        elif st.st_mode & 0o022 and not (not own and st.st_mode & stat.S_ISVTX):
            msg = (f"others can write {path}: a package could be swapped between tfgpu's hash check and "
                   "its installation")
        else:
            continue
        raise StepFailed(msg, hint="use a package cache of your own (RATTLER_CACHE_DIR or --cache-dir), "
                                   f"or fix its permissions (chmod go-w {path})")


def verify_archives(records: Sequence[Any], store: Path, *, offline: bool = False) -> list[Any]:
    """Each record's archive, fetched (whatever the URL scheme) and checked against the lock's hash,
    as a record pointing at the verified copy in ``store`` (file://). A copy already in the store is
    hashed again before it is used. Raises StepFailed naming the package on any mismatch."""
    _private_store(store)
    out = []
    missing: list[str] = []
    for rec in records:
        algo, want = _expected_hash(rec)
        name = Path(str(rec.file_name)).name
        kept = store / f"{want}-{name}"
        if kept.is_file() and not kept.is_symlink() and _hash_file(kept, algo) == want:
            pass
        else:
            tmp = store / f".{name}.{uuid.uuid4().hex}.part"
            try:
                try:
                    _fetch(str(rec.url), tmp, offline=offline)
                except StepFailed:
                    if offline:
                        missing.append(name)
                        continue
                    raise
                except OSError as exc:
                    if offline:
                        missing.append(name)
                        continue
                    msg = f"cannot fetch {rec.url}: {exc.strerror or exc}"
                    raise StepFailed(msg, hint="check the lock's URLs, or that the channel is reachable") from None
                got = _hash_file(tmp, algo)
                if got != want:
                    msg = (f"{name} from {rec.url} has {algo} {got}, but the lock says {want}: refusing to install "
                           "a package that is not the one locked")
                    raise StepFailed(msg, hint="the package or the lock was changed; regenerate the lock from a "
                                               "channel you trust")
                tmp.replace(kept)
            finally:
                tmp.unlink(missing_ok=True)
        rec.url = kept.as_uri()
        out.append(rec)
    if missing:
        msg = f"--offline: {len(missing)} package(s) not in the package cache {store}: " + ", ".join(
            missing[:5]) + (" ..." if len(missing) > 5 else "")
        raise StepFailed(msg, hint="run once without --offline (with the network) to fill the cache")
    return out
