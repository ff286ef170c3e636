"""Where the parsed knowledge base is kept between runs (a data-only JSON file per key, tfgpu.kb.cache), and the
sections of it that only some readers need: the glue between the loader and the cache file format."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from tfgpu import __version__
from tfgpu.kb.parse import KB_FILES, SECTION_FILES, compat_dir
from tfgpu.kb.specifiers import VersionSpec
from tfgpu.kb.versions import version

_T = TypeVar("_T")


def _cache_file() -> Path | None:
    """Where the parsed knowledge base is cached between runs, keyed by the data files' identity.

    Parsing ~200 kB of TOML costs ~0.1 s on every `tfgpu doctor`; reading the checked records back
    from plain JSON (tfgpu.kb.cache: data only, never pickle) costs a few ms. The key is tfgpu's version
    plus the size and modification time (ns) of every data file, of the modules whose classes are cached
    and of those that fill its indexes: stat calls, where hashing the contents meant reading them all and
    importing hashlib (~5 ms). TFGPU_CACHE_DIR overrides the directory;
    TFGPU_NO_CACHE=1 disables the cache."""
    import zlib

    from tfgpu.kb.cache import cache_dir

    folder = cache_dir()
    if folder is None:
        return None
    here = Path(__file__).resolve().parent.parent  # the tfgpu package
    parts = [__version__]
    # the modules whose classes are cached or whose code parses the tables, and those whose code fills the cached
    # indexes (their indexers and kb.derived values: tfgpu.judge.verdict, tfgpu.judge.gpu_rules,
    # tfgpu.judge.containers): a change to any of them is a new cache
    modules = ("core/record.py", "kb/cache.py", "kb/knowledge.py", "kb/parse.py", "kb/records.py", "kb/specifiers.py",
               "judge/verdict.py", "judge/release_checks.py", "judge/system.py", "judge/gpu_rules.py",
               "judge/containers.py")
    for path in (Path(__file__), *(here / m for m in modules),
                 *(compat_dir() / f"{name}.toml" for name in (*KB_FILES, *SECTION_FILES))):
        try:
            st = path.stat()
        except FileNotFoundError:  # an optional table that is absent: its absence is part of the key
            parts.append(f"{path}:absent")
            continue
        except OSError:
            return None
        parts.append(f"{path}:{st.st_size}:{st.st_mtime_ns}")
    key = "|".join(parts).encode()
    digest = f"{zlib.crc32(key):08x}{zlib.crc32(key[::-1]):08x}"
    return folder / f"kb-{digest}.json"


#: Installs that share a cache directory (a pipx install and a project venv, one home on NFS for several
#: machines) each have a cache of their own (its key covers the version, the data and the code), and they
#: must not evict each other (issue 32: two installs alternating cost 2.5x the CPU when each removed the
#: other's). A cache is removed only when it is stale for everyone: not among the KEEP_RECENT most recently
#: used, nor used in the last STALE_AFTER seconds (up to MAX_CACHES of those). Reading a cache marks it used
#: (its mtime), at most once per MARK_EVERY seconds.
KEEP_RECENT = 4
STALE_AFTER = 24 * 3600.0
MAX_CACHES = 16
MARK_EVERY = 3600.0


def _read_cache(cache: Path, classes: dict[str, type], *,
                fallback: Callable[[str], Any] | None = None) -> tuple[Any, bool]:
    """What the cache file holds (None when nothing usable) and whether it may be (re)written. ``fallback(name)``
    answers for a deferred field whose text is found unusable when it is first read (tfgpu.kb.cache.decode)."""
    from tfgpu.kb import cache as _kbcache

    try:
        data = _kbcache.decode(_kbcache.read(cache), classes, version, VersionSpec, fallback=fallback)
    except FileNotFoundError:
        pass
    except ValueError:  # valid JSON, not what tfgpu wrote
        _kbcache.note(f"ignored the corrupt cache {cache}; rebuilt it")
    except _kbcache.CacheRefused as exc:
        _kbcache.note(str(exc))
        return None, "not reading" not in str(exc)  # never write where reading is unsafe
    except OSError:
        pass  # unreadable: parse the TOML again
    else:
        _kbcache.mark_used(cache, unless_within=MARK_EVERY)
        return data, True
    return None, True


def _write_cache(cache: Path, obj: Any, classes: dict[str, type]) -> None:
    """Write the cache file, then remove the caches that are stale for every install (:data:`KEEP_RECENT`)."""
    from tfgpu.kb import cache as _kbcache

    try:
        _kbcache.write(cache, _kbcache.encode(obj, classes))
        _kbcache.remove_stale(cache.parent, keep=_caches_in_use(cache), pattern="kb-*.json")
        # the pickled caches of tfgpu before the data-only format (never read since): ours, and dead weight
        _kbcache.remove_stale(cache.parent, keep=(), pattern="kb-*.pickle")
    except (OSError, TypeError, _kbcache.CacheRefused):
        pass  # a read-only home is fine: the cache is an optimisation


def _caches_in_use(cache: Path) -> set[str]:
    """The keys of the caches beside ``cache`` to keep: its own, the :data:`KEEP_RECENT` most recently used
    and, of the :data:`MAX_CACHES` most recently used, those used in the last :data:`STALE_AFTER` seconds
    (a cache's last use is the newest mtime of its files: the cache and its sections)."""
    import time

    from tfgpu.kb import cache as _kbcache

    last_use: dict[str, float] = {}
    for path, st in _kbcache.cache_files(cache.parent, "kb-*.json"):
        key = path.name.split(".", 1)[0]
        last_use[key] = max(last_use.get(key, 0.0), st.st_mtime)
    now = time.time()
    ranked = sorted(last_use, key=last_use.__getitem__, reverse=True)
    keep = {cache.name.split(".", 1)[0], *ranked[:KEEP_RECENT]}
    return keep | {key for key in ranked[:MAX_CACHES] if now - last_use[key] < STALE_AFTER}


def _section_file(cache: Path, name: str) -> Path:
    return cache.with_name(cache.name.replace(".json", f".{name}.json"))


def _cached_section(name: str, kind: type, build: Callable[[], _T], classes: dict[str, type]) -> _T:
    """A section of the cache of its own (kb-<key>.NAME.json, read only by those who need it): its data when
    the file holds a ``kind``, else ``build()``, written there for the next run."""
    from tfgpu.kb import cache as _kbcache

    cache = _cache_file()
    usable = cache is not None
    if cache is not None:
        cache = _section_file(cache, name)
        data, usable = _read_cache(cache, classes)
        if isinstance(data, kind):
            return data  # type: ignore[return-value]
        if data is not None:
            _kbcache.note(f"ignored the corrupt cache {cache}; rebuilt it")
    data = build()
    if cache is not None and usable:
        _write_cache(cache, data, classes)
    return data
