"""The dynamic loader's search, simulated: which file a `dlopen(name)` from a given object would load.

Pure: the inputs are values read elsewhere (tfgpu.facts.environment reads them from the machine), so a
search is tested with plain values and temporary trees. The order is glibc's for dlopen (ld.so(8), "Rpath
token expansion" and the search order in dl-load.c `_dl_map_object`):

1. DT_RPATH of the calling object, only when it has no DT_RUNPATH (then the executable's DT_RPATH);
2. LD_LIBRARY_PATH;
3. DT_RUNPATH of the calling object (only the caller's: not its loaders', which is tensorflow#63362);
4. the ld.so.cache (/etc/ld.so.cache, what `ldconfig -p` prints);
5. the default directories (/lib, /usr/lib and their multiarch and lib64 variants).

`$ORIGIN` (and `${ORIGIN}`) is the directory of the object whose RPATH/RUNPATH names it. A name with a slash
is loaded as a path. Windows' order for LoadLibrary of a bare DLL name (TensorFlow's loader): the directories
given with os.add_dll_directory / AddDllDirectory, the application's directory, System32, the Windows
directory, then PATH.
"""

from __future__ import annotations

import posixpath
import re
import struct
from collections.abc import Iterable, Mapping, Sequence

from tfgpu.core.record import record

#: Where glibc looks last on x86_64/aarch64 Debian, Ubuntu, Fedora and Arch (its compiled-in system dirs).
DEFAULT_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
                "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib")

#: The library names a GPU verdict is about (a cache lists ~1000 libraries; the listing of a directory keeps these).
CUDA_LIB = re.compile(
    r"^(?:lib(?:cuda|cudart|cublas|cublasLt|cudnn\w*|cufft|curand|cusolver|cusparse|nccl|cupti|nvrtc|nvJitLink"
    r"|nvinfer\w*|nvidia-ml)\.so(?:\.[\d.]+)?|(?:cudart|cublas|cublasLt|cudnn\w*|cufft|curand|cusolver|cusparse"
    r"|cupti|nvrtc|nvinfer)64_\d+\.dll|nvcuda\.dll)$")


@record
class SearchDir:
    """One directory of a search, in order, and why the loader looks there."""

    path: str
    via: str  # "RPATH" | "LD_LIBRARY_PATH" | "RUNPATH" | "default" | "PATH" | "add_dll_directory" | ...


@record
class Resolution:
    """Where a name would be loaded from: the first file in the search, or none; and every other copy seen."""

    name: str
    path: str | None
    via: str | None  # the search step that found it ("ld.so.cache" for the cache)
    others: tuple[tuple[str, str], ...] = ()  # (path, via) of the copies later in the search


def expand_origin(entries: str | None, origin: str) -> list[str]:
    """A colon-separated RPATH/RUNPATH with `$ORIGIN` / `${ORIGIN}` replaced by ``origin``, normalised.
    Empty entries are dropped (glibc treats them as the current directory only for LD_LIBRARY_PATH)."""
    out = []
    for entry in (entries or "").split(":"):
        if not entry:
            continue
        entry = entry.replace("${ORIGIN}", origin).replace("$ORIGIN", origin)
        out.append(posixpath.normpath(entry))
    return out


def linux_search(*, caller: str, rpath: str | None, runpath: str | None, ld_library_path: str | None,
                 exe_rpath: str | None = None, exe: str | None = None) -> list[SearchDir]:
    """The directories a dlopen from the object at ``caller`` searches before the cache, in glibc's order.
    ``exe_rpath``: the DT_RPATH of the executable at ``exe`` (the interpreter), searched after the caller's own
    when the caller has no DT_RUNPATH ($ORIGIN there is the executable's directory)."""
    origin = posixpath.dirname(caller)
    dirs: list[SearchDir] = []
    if not runpath:
        dirs += [SearchDir(d, "RPATH") for d in expand_origin(rpath, origin)]
        dirs += [SearchDir(d, "RPATH of the executable")
                 for d in expand_origin(exe_rpath, posixpath.dirname(exe) if exe else origin)]
    dirs += [SearchDir(posixpath.normpath(d), "LD_LIBRARY_PATH") for d in (ld_library_path or "").split(":") if d]
    dirs += [SearchDir(d, "RUNPATH") for d in expand_origin(runpath, origin)]
    return dirs


def windows_search(*, dll_directories: Sequence[str], app_dir: str | None, system_root: str | None,
                   path: str | None) -> list[SearchDir]:
    """The directories LoadLibrary searches for a bare DLL name with the default flags TensorFlow uses."""
    dirs = [SearchDir(d, "add_dll_directory") for d in dll_directories]
    if app_dir:
        dirs.append(SearchDir(app_dir, "application directory"))
    if system_root:
        dirs += [SearchDir(system_root.rstrip("\\/") + "\\System32", "System32"),
                 SearchDir(system_root.rstrip("\\/"), "Windows directory")]
    dirs += [SearchDir(d, "PATH") for d in (path or "").split(";") if d]
    return dirs


def resolve(name: str, search: Sequence[SearchDir], listing: Mapping[str, Iterable[str]],
            cache: Sequence[tuple[str, str]] = (), defaults: Sequence[str] = DEFAULT_DIRS,
            *, windows: bool = False) -> Resolution:
    """Which file the loader picks for ``name``: the first directory of ``search`` whose ``listing`` holds it,
    else the first cache entry of that name (Linux), else a default directory. ``listing`` maps a directory
    to the names in it (a directory missing from it holds nothing we know of)."""
    def norm(p: str) -> str:
        return p.lower().rstrip("\\/") if windows else p

    names = {norm(d): {n.lower() if windows else n for n in files} for d, files in listing.items()}
    key = name.lower() if windows else name
    if "/" in name or (windows and "\\" in name):
        return Resolution(name, name, "path")
    hits: list[tuple[str, str]] = []
    seen: set[str] = set()

    def add(directory: str, via: str) -> None:
        d = norm(directory)
        if d in seen:
            return
        seen.add(d)
        if key in names.get(d, ()):
            hits.append(((directory.rstrip("\\") + "\\" + name) if windows else posixpath.join(directory, name), via))

    for s in search:
        add(s.path, s.via)
    if not windows:
        for cached, path in cache:
            if cached == name and path not in {h[0] for h in hits}:
                hits.append((path, "ld.so.cache"))
                break
        for d in defaults:
            add(d, "default directory")
    if not hits:
        return Resolution(name, None, None)
    return Resolution(name, hits[0][0], hits[0][1], tuple(hits[1:]))


# --------------------------------------------------------------------------- /etc/ld.so.cache

_NEW_MAGIC = b"glibc-ld.so.cache1.1"
_OLD_MAGIC = b"ld.so-1.7.0"


def parse_ld_so_cache(data: bytes, *, wanted: re.Pattern[str] | None = None) -> list[tuple[str, str]]:
    """(name, path) of every entry of an /etc/ld.so.cache image, in the cache's order (which is the loader's:
    it takes the first entry whose name matches and whose hardware capabilities fit). Both formats: the new
    one alone (glibc >= 2.32 default) or after the old one. Bad bytes give the entries read so far."""
    pos = data.find(_NEW_MAGIC)
    out: list[tuple[str, str]] = []
    if pos >= 0:
        if len(data) < pos + 48:
            return out
        nlibs, _strings = struct.unpack_from("<II", data, pos + 20)
        entries = pos + 48
        base = pos  # string offsets of the new format count from its header
        size = 24
        fmt = "<iII"
    elif data.startswith(_OLD_MAGIC):
        (nlibs,) = struct.unpack_from("<I", data, 12)
        entries = 16
        size = 12
        base = entries + nlibs * size
        fmt = "<iII"
    else:
        return out
    nlibs = min(nlibs, (len(data) - entries) // size)
    for i in range(nlibs):
        _flags, key, value = struct.unpack_from(fmt, data, entries + i * size)
        name, path = _cstr(data, base + key), _cstr(data, base + value)
        if name and path and (wanted is None or wanted.match(name)):
            out.append((name, path))
    return out


def _cstr(data: bytes, off: int) -> str:
    if off < 0 or off >= len(data):
        return ""
    end = data.find(b"\0", off, off + 4096)
    return data[off : end if end >= 0 else off].decode("utf-8", "replace")
