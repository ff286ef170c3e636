"""The knowledge base's cache file: plain JSON data (never pickle), read only when it is safe to trust.

A cache that executes code when it is read (pickle) gives whoever can write the cache directory (a shared
TFGPU_CACHE_DIR, a non-sticky shared directory) the victim's rights. This format is data only: JSON whose
lists carry a one-letter tag (tuple, list, frozenset, dict, Version, VersionSpec, record) and records of
an allow-list of classes (their fields by position, in the class's order), rebuilt without running any of
their code. And even data is only read from a regular file that is not a symlink, is owned by the current
user, and sits in a directory nobody else can write (or a sticky one, like /tmp). Files are written under unpredictable names with
O_CREAT | O_EXCL | O_NOFOLLOW, then renamed into place (issue 16, High 6).

A corrupt or foreign file is ignored (the caller rebuilds), and ``read`` says why in one line.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Mapping

__all__ = ["CacheRefused", "DeferredField", "cache_dir", "cache_files", "decode", "defer_fields", "encode", "mark_used", "read",
           "remove_stale", "write"]

#: Tags of the encoded form: every JSON list starts with one of them (decode spells them out, for speed). A
#: deferred field's value (_DEFER) is its own encoded form as JSON text, decoded when the field is first read.
_TUPLE, _LIST, _FSET, _DICT, _VERSION, _SPEC, _RECORD, _REF, _DEFER = "t", "l", "f", "d", "v", "s", "r", "@", "z"

#: Bigger than any knowledge base (~0.3 MB encoded): a larger file is not ours.
MAX_BYTES = 16 * 1024 * 1024


class CacheRefused(Exception):
    """The cache file cannot be used; the message names the file and why, in one line."""


def encode(obj: Any, classes: dict[str, type]) -> Any:
    """``obj`` as plain JSON data. Records (of ``classes`` only) keep their identity: a record met
    again is a reference to the first, as pickle kept it."""
    seen: dict[int, int] = {}
    keep: list[Any] = []  # ids stay unique while the objects live

    def enc(o: Any) -> Any:
        if o is None or isinstance(o, (bool, int, float, str)):
            return o
        t = type(o)
        if t is tuple:
            return [_TUPLE, *map(enc, o)]
        if t is list:
            return [_LIST, *map(enc, o)]
        if t in (frozenset, set):
            return [_FSET, *map(enc, sorted(o, key=repr))]
        if t is dict:
            flat: list[Any] = [_DICT]
            for k, v in o.items():
                flat += [enc(k), enc(v)]
            return flat
        name = t.__name__
        if name == "Version" and t.__module__.startswith("packaging"):
            return [_VERSION, str(o)]
        if name == "VersionSpec":
            return [_SPEC, str(o)]
        if classes.get(name) is t:
            ref = seen.get(id(o))
            if ref is not None:
                return [_REF, ref]
            seen[id(o)] = len(seen)
            keep.append(o)
            # the record's fields by position (the class's field order: the cache key covers the module that
            # defines it), then anything else in its __dict__ (a cached index) as name, value pairs; a deferred
            # field (defer_fields) is encoded on its own, as text: its records are its own, never shared
            state = vars(o)
            names = getattr(t, "__record_fields__", ())
            deferred = getattr(t, "__record_deferred__", ())
            flat = [_RECORD, name]
            for k in names:
                value = getattr(o, k)
                flat.append([_DEFER, json.dumps(encode(value, classes), separators=(",", ":"))] if k in deferred
                            else enc(value))
            for k, v in state.items():
                if k not in names and k != _PENDING:
                    flat += [k, enc(v)]
            return flat
        msg = f"cannot cache a {t.__module__}.{name}"
        raise TypeError(msg)

    return enc(obj)


def decode(data: Any, classes: dict[str, type], version: Callable[[str], Any], spec: Callable[[str], Any], *,
           fallback: Callable[[str], Any] | None = None) -> Any:
    """The inverse of ``encode``, for ``data`` as :func:`read` returns it (JSON without objects: a list is
    the only container it can hold); raises ValueError on anything it did not write. (Written for speed:
    it runs on every `tfgpu doctor`; equal versions and equal ranges are parsed once, and parsing them
    was half of the decoding; a value that is not a list is itself, without a call.) A deferred field is left
    as text until it is first read (:class:`DeferredField`); ``fallback(name)`` gives the field's value when that
    text turns out not to be what encode wrote (else the ValueError goes up then)."""
    records: list[Any] = []
    versions: dict[str, Any] = {}
    specs: dict[str, Any] = {}
    fields_of: dict[type, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    new = object.__new__

    def later(text: str) -> Any:
        return decode(_parse(text), classes, version, spec)

    def dec(o: Any) -> Any:
        if type(o) is not list:
            if o is None or type(o) in (str, int, float, bool):
                return o
            raise ValueError("not cache data")  # noqa: EM101 - internal, caught by read()
        tag = o[0]
        if tag == "t":
            return tuple([dec(x) if type(x) is list else x for x in o[1:]])
        if tag == "v":
            v = versions.get(o[1])
            if v is None:
                v = versions[o[1]] = version(o[1])
            return v
        if tag == "@":
            return records[o[1]]
        if tag == "r":
            cls = classes[o[1]]  # KeyError: a class outside the allow-list
            rec: Any = new(cls)
            records.append(rec)
            state = rec.__dict__
            known = fields_of.get(cls)
            if known is None:
                known = fields_of[cls] = (getattr(cls, "__record_fields__", ()),
                                          cls.__dict__.get("__record_deferred__", ()))
            names, deferred = known
            end = 2 + len(names)
            if len(o) < end or (len(o) - end) % 2:
                raise ValueError("not cache data")  # noqa: EM101
            for key, value in zip(names, o[2:end]):
                if deferred and key in deferred and type(value) is list and value[0] == "z":
                    if len(value) != 2 or type(value[1]) is not str:
                        raise ValueError("not cache data")  # noqa: EM101
                    pending = state.get(_PENDING)
                    if pending is None:
                        pending = state[_PENDING] = _Pending(later, fallback)
                    pending.texts[key] = value[1]
                    continue
                state[key] = dec(value) if type(value) is list else value
            for i in range(end, len(o) - 1, 2):
                key, value = o[i], o[i + 1]
                if type(key) is not str or key == _PENDING:
                    raise ValueError("not cache data")  # noqa: EM101
                state[key] = dec(value) if type(value) is list else value
            return rec
        if tag == "l":
            return [dec(x) if type(x) is list else x for x in o[1:]]
        if tag == "f":
            return frozenset([dec(x) if type(x) is list else x for x in o[1:]])
        if tag == "d":
            items = iter(o)
            next(items)
            return {dec(k) if type(k) is list else k: dec(v) if type(v) is list else v for k, v in zip(items, items)}
        if tag == "s":
            found = specs.get(o[1])
            if found is None:
                found = specs[o[1]] = spec(o[1])
            return found
        raise ValueError("not cache data")  # noqa: EM101

    try:
        return dec(data)
    except (IndexError, KeyError, TypeError, RecursionError, AttributeError) as exc:
        raise ValueError(type(exc).__name__) from None


#: Where a record decoded from a cache keeps its deferred fields' texts (in its __dict__) until they are read.
_PENDING = "__deferred__"


class _Pending:
    """A decoded record's deferred fields, as text, and how to decode one."""

    __slots__ = ("fallback", "load", "texts")

    def __init__(self, load: Callable[[str], Any], fallback: Callable[[str], Any] | None) -> None:
        self.texts: dict[str, str] = {}
        self.load = load
        self.fallback = fallback

    def take(self, name: str) -> Any:
        text = self.texts.pop(name)
        try:
            return self.load(text)
        except (ValueError, IndexError, KeyError, TypeError, RecursionError, AttributeError):
            if self.fallback is None:
                raise ValueError(name) from None
            return self.fallback(name)


class DeferredField:
    """A record field that a cache file keeps as text, decoded the first time it is read (then it is an attribute
    like any other: this is not consulted again). On a record not read from a cache every field is set, and this is
    never consulted at all."""

    __slots__ = ("default", "name")

    def __init__(self, name: str, default: Any) -> None:
        self.name = name
        self.default = default

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:  # the class's attribute: the field's default, as before
            if self.default is _NO_DEFAULT:
                raise AttributeError(self.name)
            return self.default
        state = obj.__dict__
        pending = state.get(_PENDING)
        if pending is None or self.name not in pending.texts:
            msg = f"{type(obj).__name__} has no field {self.name!r} set"
            raise AttributeError(msg)
        value = pending.take(self.name)
        state[self.name] = value
        if not pending.texts:
            del state[_PENDING]
        return value


_NO_DEFAULT: Any = object()


def defer_fields(cls: type, names: tuple[str, ...]) -> None:
    """Have a cache keep the fields ``names`` of the record class ``cls`` as text until each is first read: a
    reader that needs few of a big record's fields (the doctor and the knowledge base) decodes only those."""
    for name in names:
        if name not in getattr(cls, "__record_fields__", ()):
            msg = f"{cls.__name__} has no field {name!r}"
            raise TypeError(msg)
        setattr(cls, name, DeferredField(name, cls.__dict__.get(name, _NO_DEFAULT)))
    cls.__record_deferred__ = tuple(names)  # type: ignore[attr-defined]


def _parse(text: str) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_no_objects)
    except RecursionError:
        raise ValueError("not cache data") from None  # noqa: EM101


def cache_dir(env: Mapping[str, str] | None = None) -> Path | None:
    """Where tfgpu keeps its caches (the knowledge base's, the doctor's last facts): ``TFGPU_CACHE_DIR``, else the
    user cache directory; None when ``TFGPU_NO_CACHE`` turns caching off."""
    env = os.environ if env is None else env
    if env.get("TFGPU_NO_CACHE", "") not in ("", "0"):
        return None
    base = env.get("TFGPU_CACHE_DIR")
    if base:
        return Path(base)
    from tfgpu.core.sysio import user_dir  # platformdirs' answer, without its import on the doctor's path

    return user_dir("cache")


def _check_dir(path: Path) -> None:
    """The directory holding the cache must not be writable by anyone else (sticky ones excepted)."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) and os.name == "posix":
        st = path.stat()  # a symlinked cache directory is fine if where it leads is safe
    if os.name != "posix":  # pragma: no cover - Windows ACLs are not modes
        return
    if st.st_uid not in (os.getuid(), 0):
        msg = f"its directory {path} belongs to another user"
        raise CacheRefused(msg)
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
        msg = f"its directory {path} is writable by other users"
        raise CacheRefused(msg)


def read(path: Path, *, objects: bool = False) -> Any:
    """The data in the cache file ``path``; FileNotFoundError when there is none, CacheRefused when it
    is there but must not (or cannot) be used. ``objects``: plain JSON, objects too (a file whose data is
    all JSON can hold, written by :func:`write` as it is, not :func:`encode`d)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:  # ELOOP: the name is a symlink
        why = "it is a symlink" if path.is_symlink() else (exc.strerror or str(exc))
        msg = f"not reading the cache {path}: {why}"
        raise CacheRefused(msg) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            msg = f"not reading the cache {path}: not a regular file"
            raise CacheRefused(msg)
        if os.name == "posix" and st.st_uid != os.getuid():
            msg = f"not reading the cache {path}: it belongs to another user (uid {st.st_uid})"
            raise CacheRefused(msg)
        try:
            _check_dir(path.parent)
        except CacheRefused as exc:
            msg = f"not reading the cache {path}: {exc}"
            raise CacheRefused(msg) from None
        if st.st_size > MAX_BYTES:
            msg = f"ignored the corrupt cache {path} (too large); rebuilt it"
            raise CacheRefused(msg)
        with os.fdopen(fd, "rb") as fh:
            fd = -1
            raw = fh.read(MAX_BYTES + 1)
    finally:
        if fd >= 0:
            os.close(fd)
    try:
        return json.loads(raw) if objects else json.loads(raw, object_pairs_hook=_no_objects)
    except (ValueError, RecursionError):
        msg = f"ignored the corrupt cache {path}; rebuilt it"
        raise CacheRefused(msg) from None


def _no_objects(_pairs: Any) -> Any:
    """encode writes no JSON objects: a file that holds one is not a cache (and decode can then take every value
    that is not a list as it is)."""
    raise ValueError("not cache data")  # noqa: EM101 - internal, caught by read()


def write(path: Path, data: Any) -> None:
    """Write ``data`` to ``path`` atomically: a new file under an unpredictable name (O_EXCL,
    O_NOFOLLOW, mode 0600) renamed over ``path``. Raises OSError or CacheRefused."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    _check_dir(path.parent)
    from tfgpu.core.sysio import replace_file

    replace_file(path, json.dumps(data, separators=(",", ":")).encode(), mode=0o600)


def remove_stale(directory: Path, *, keep: str | Collection[str], pattern: str) -> list[Path]:
    """Remove the files matching ``pattern`` in ``directory`` whose key (the name up to its first dot: a cache
    and its sections share one) is not ``keep`` (or not one of them): cache files nothing will read again.
    Only regular files of the current user are removed, never a symlink nor another user's file; what cannot
    be removed stays. Returns the removed."""
    keep = {keep} if isinstance(keep, str) else set(keep)
    removed = []
    for path, _ in cache_files(directory, pattern):
        if path.name.split(".", 1)[0] in keep:
            continue
        try:
            path.unlink()
        except OSError:
            continue
        removed.append(path)
    return removed


def cache_files(directory: Path, pattern: str) -> list[tuple[Path, os.stat_result]]:
    """The files matching ``pattern`` in ``directory`` that are regular files of the current user (never a
    symlink nor another user's file), with their status (lstat)."""
    found = []
    for path in directory.glob(pattern):
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and not (os.name == "posix" and st.st_uid != os.getuid()):
            found.append((path, st))
    return found


def mark_used(path: Path, *, unless_within: float) -> None:
    """Set ``path``'s modification time to now (the cache was used), unless it was set less than
    ``unless_within`` seconds ago: a write per run would cost a shared or network home more than it tells."""
    import time

    try:
        if time.time() - path.stat().st_mtime > unless_within:
            os.utime(path)
    except OSError:
        pass  # a read-only cache directory: it is still read


def note(text: str) -> None:
    """The one-line note about a cache that was not used (its path comes from TFGPU_CACHE_DIR or XDG_CACHE_HOME:
    terminal-safe, as every line tfgpu prints)."""
    from tfgpu.core.termtext import terminal_safe

    try:
        sys.stderr.write(terminal_safe(f"tfgpu: note: {text}", keep_newlines=False) + "\n")
    except (OSError, ValueError):  # pragma: no cover - a closed stderr
        pass
