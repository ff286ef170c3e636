"""Read one Python environment as the loader and TensorFlow will see it: its distributions, TensorFlow's
build_info.py and wheel metadata, the links of TensorFlow's shared objects, the activation's variables, and
what each directory of the loader's search holds. Reads files only (no interpreter is started, no activation
script is run: they are parsed); never raises because something is absent.

The result is the facts document's ``environment`` section; tfgpu.judge.environment judges it with
tfgpu.facts.loader's search (pure), so a recorded environment (a casebook case) is judged the same way.
"""

# Machine paths are strings (they may be Windows paths); os.path keeps them text.
# ruff: noqa: PTH100, PTH111, PTH112, PTH113, PTH114, PTH118, PTH119, PTH120, PTH123, PTH207, PTH208
from __future__ import annotations

import glob
import os
import re

from tfgpu.core.tfnames import TF_BUILDS
from tfgpu.facts import loader

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing in the probe child
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

SCHEMA_NOTE = "read from the installed files; activation scripts parsed, not run"
#: TensorFlow's shared objects whose links matter: the dlopen caller and the Python extension.
_TF_OBJECTS = ("libtensorflow_framework.so*", "libtensorflow_cc.so*", "python/_pywrap_tensorflow_internal.so",
               "python/lib_pywrap_tensorflow_common.so")
_MAX_DIRS = 64  # a search longer than this is someone's LD_LIBRARY_PATH gone wrong: the rest is not listed


def norm_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def locate(*, python: str | None = None, prefix: str | None = None,
           env: Mapping[str, str] | None = None, own_prefix: str | None = None) -> tuple[str | None, str]:
    """(the environment's prefix, how it was chosen). The environment named (``python``: an interpreter,
    ``prefix``: a directory) or the active one: $VIRTUAL_ENV, $CONDA_PREFIX, else ``own_prefix`` (the
    interpreter tfgpu runs in). None when the named one does not exist."""
    env = os.environ if env is None else env
    if python:
        exe = os.path.abspath(os.path.expanduser(python))
        if not os.path.isfile(exe):
            return None, f"--python {python}"
        bindir = os.path.dirname(exe)
        root = os.path.dirname(bindir) if os.path.basename(bindir) in ("bin", "Scripts") else bindir
        if not (os.path.isfile(os.path.join(root, "pyvenv.cfg")) or os.path.isdir(os.path.join(root, "conda-meta"))):
            real = os.path.dirname(os.path.realpath(exe))
            root = os.path.dirname(real) if os.path.basename(real) in ("bin", "Scripts") else real
        return root, f"--python {python}"
    if prefix:
        p = os.path.abspath(os.path.expanduser(prefix))
        return (p if os.path.isdir(p) else None), f"--prefix {prefix}"
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        if env.get(var) and os.path.isdir(env[var]):
            return env[var], f"${var}"
    return own_prefix, "the interpreter tfgpu runs in"


def site_packages(prefix: str) -> list[str]:
    hits = sorted(glob.glob(os.path.join(glob.escape(prefix), "lib", "python*", "site-packages")))
    hits += [p for p in (os.path.join(prefix, "Lib", "site-packages"),) if os.path.isdir(p)]
    return [h for h in hits if os.path.isdir(h)]


def env_python(prefix: str) -> str | None:
    for cand in ("bin/python3", "bin/python", "python.exe", "Scripts/python.exe"):
        p = os.path.join(prefix, cand)
        if os.path.isfile(p):
            return p
    return None


def _headers(folder: str) -> dict[str, Any]:
    """Name, Version and Requires-Dist of a dist-info METADATA / egg-info PKG-INFO (headers only)."""
    out: dict[str, Any] = {"requires": []}
    for fname in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(folder, fname), encoding="utf-8", errors="replace") as fh:
                for _, line in zip(range(2000), fh):
                    if not line.strip():
                        break
                    key, _, value = line.partition(":")
                    if key in ("Name", "Version"):
                        out[key.lower()] = value.strip()
                    elif key == "Requires-Dist":
                        out["requires"].append(value.strip())
        except OSError:
            continue
        break
    return out


def read_distributions(sites: list[str]) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    """(name -> version of every distribution, the TensorFlow ones with their path and Requires-Dist)."""
    dists: dict[str, str] = {}
    tf: dict[str, dict[str, Any]] = {}
    for sp in sites:
        try:
            names = sorted(os.listdir(sp))
        except OSError:
            continue
        for folder in names:
            m = re.fullmatch(r"([A-Za-z0-9_.]+?)-(\d[^-]*?)(?:-py[\d.]+)?\.(dist-info|egg-info)", folder)
            if not m:
                continue
            name = norm_name(m.group(1))
            version = m.group(2)
            if name in TF_BUILDS or name in ("keras", "tf-keras", "numpy", "protobuf"):
                head = _headers(os.path.join(sp, folder))
                version = head.get("version") or version
                if name in TF_BUILDS:
                    tf.setdefault(name, {"distribution": name, "version": version, "path": os.path.join(sp, folder),
                                         "requires": head["requires"]})
            dists.setdefault(name, version)
    return dists, tf


_BUILD_INFO_KEYS = ("is_cuda_build", "is_rocm_build", "cuda_version", "cudnn_version", "cuda_version_number",
                    "cudnn_version_number", "cuda_compute_capabilities", "msvcp_dll_names", "cudart_dll_name",
                    "cudnn_dll_name", "nvcuda_dll_name")


def parse_build_info(text: str) -> dict[str, Any]:
    """tensorflow/python/platform/build_info.py's values, read as text (never executed): both the 2.x
    `build_info = collections.OrderedDict([('key', value), ...])` form and the 1.x `key = value` lines."""
    out: dict[str, Any] = {}
    for key in _BUILD_INFO_KEYS:
        m = (re.search(rf"\('{key}',\s*(\[[^\]]*\]|'[^']*'|True|False)\)", text)
             or re.search(rf"^{key}\s*=\s*(\[[^\]]*\]|'[^']*'|\"[^\"]*\"|True|False)", text, re.M))
        if not m:
            continue
        raw = m.group(1)
        if raw in ("True", "False"):
            out[key] = raw == "True"
        elif raw.startswith("["):
            out[key] = re.findall(r"'([^']*)'", raw)
        else:
            out[key] = raw[1:-1]
    return out


def read_objects(tf_dir: str) -> list[dict[str, Any]]:
    """DT_NEEDED / RPATH / RUNPATH / SONAME of TensorFlow's main shared objects (ELF; seeks, a few kB each)."""
    from tfgpu.facts.binscan import FormatError, read_links

    out = []
    for pattern in _TF_OBJECTS:
        for path in sorted(glob.glob(os.path.join(glob.escape(tf_dir), pattern))):
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            entry: dict[str, Any] = {"path": path}
            try:
                with open(path, "rb") as fh:
                    links = read_links(fh)
                entry.update(needed=list(links.needed), rpath=links.rpath, runpath=links.runpath, soname=links.soname)
            except (OSError, FormatError, ValueError) as exc:
                entry["error"] = str(exc)[:200]
            out.append(entry)
    return out


def parse_activation(text: str, values: dict[str, str], sites: list[str]) -> list[str]:
    """Apply the LD_LIBRARY_PATH / TF_FORCE_GPU_ALLOW_GROWTH / CUDNN_PATH assignments of an activation script
    (sh) to ``values``, statically: plain assignments with $VAR expansion, and tfgpu's own loop over the
    nvidia/*/lib directories. Returns what it could not follow (a command substitution elsewhere)."""
    skipped = []
    if "for _tfgpu_d in" in text and "nvidia/*/lib" in text:
        dirs = sorted(d for sp in sites for d in glob.glob(os.path.join(glob.escape(sp), "nvidia", "*", "lib")))
        for d in dirs:  # the loop prepends each directory in glob order: the last one ends up first
            old = values.get("LD_LIBRARY_PATH", "")
            values["LD_LIBRARY_PATH"] = d + (":" + old if old else "")
    for line in text.splitlines():
        m = re.match(r"^\s*(?:export\s+)?(LD_LIBRARY_PATH|TF_FORCE_GPU_ALLOW_GROWTH|CUDNN_PATH|TF_USE_LEGACY_KERAS)"
                     r"=(.*)$", line)
        if not m:
            continue
        key, raw = m.group(1), m.group(2).strip().strip("\"'")
        if key == "CUDNN_PATH" and "$(" in raw:  # pip.md's $(dirname $(python -c "import nvidia.cudnn...")): the wheel
            cudnn = next((os.path.join(sp, "nvidia", "cudnn") for sp in sites
                          if os.path.isdir(os.path.join(sp, "nvidia", "cudnn"))), None)
            if cudnn:
                values[key] = cudnn
            continue
        if "$(" in raw or "`" in raw:
            skipped.append(line.strip()[:200])
            continue
        values[key] = re.sub(r"\$\{?(\w+)\}?", lambda v: values.get(v.group(1), ""), raw).strip(":")
    return skipped


def read_activation(prefix: str, sites: list[str], shell: Mapping[str, str], *, active: bool) -> dict[str, Any]:
    """The variables the environment's activation sets, on top of the shell's own when it is not active yet."""
    values = {k: shell.get(k, "") for k in ("LD_LIBRARY_PATH", "TF_FORCE_GPU_ALLOW_GROWTH", "TF_USE_LEGACY_KERAS")}
    values["CONDA_PREFIX"] = prefix
    values["VIRTUAL_ENV"] = prefix
    scripts = sorted(glob.glob(os.path.join(glob.escape(prefix), "etc", "conda", "activate.d", "*.sh")))
    if os.path.isfile(os.path.join(prefix, "bin", "activate")):
        scripts.append(os.path.join(prefix, "bin", "activate"))
    read, skipped = [], []
    if not active:  # an active environment's activation already shaped the shell's values
        for script in scripts:
            try:
                with open(script, encoding="utf-8", errors="replace") as fh:
                    text = fh.read(1 << 20)
            except OSError:
                continue
            if "LD_LIBRARY_PATH" in text or "TF_" in text or "CUDNN_PATH" in text:
                read.append(script)
                skipped += parse_activation(text, values, sites)
    return {"LD_LIBRARY_PATH": values["LD_LIBRARY_PATH"] or None,
            "TF_FORCE_GPU_ALLOW_GROWTH": values["TF_FORCE_GPU_ALLOW_GROWTH"] or None,
            "TF_USE_LEGACY_KERAS": values["TF_USE_LEGACY_KERAS"] or None,
            "scripts": read, "not_followed": skipped, "active": active}


def _lib_versions(directory: str, names: list[str], sites: list[str]) -> dict[str, str]:
    """name -> version for the CUDA libraries of a directory: an nvidia-* wheel's version (its dist-info), the
    real file's name (libcudnn.so.8.9.7), cudnn_version.h beside it, a conda package."""
    out: dict[str, str] = {}
    parts = directory.replace("\\", "/").rstrip("/").split("/")
    if len(parts) >= 3 and parts[-3] == "nvidia":
        pkg = parts[-2]  # site-packages/nvidia/cudnn/lib
        sp = "/".join(parts[:-3])
        for folder in glob.glob(os.path.join(glob.escape(sp), f"nvidia_{pkg}_cu*.dist-info")):
            m = re.search(r"-(\d[\d.]*)\.dist-info$", folder)
            if m:
                for n in names:
                    out[n] = m.group(1)
    for n in names:
        if n in out:
            continue
        real = os.path.basename(os.path.realpath(os.path.join(directory, n)))
        if real.startswith(n + ".") and re.fullmatch(r"[\d.]+", real[len(n) + 1:]):
            out[n] = real.split(".so.", 1)[1]
    if any(n.startswith("libcudnn.so") for n in names):
        for hdr in ("cudnn_version.h", "cudnn.h"):
            path = os.path.join(os.path.dirname(directory), "include", hdr)
            try:
                with open(path, encoding="utf-8", errors="replace") as fh:
                    text = fh.read(1 << 16)
            except OSError:
                continue
            v = [re.search(rf"#define CUDNN_{k}\s+(\d+)", text) for k in ("MAJOR", "MINOR", "PATCHLEVEL")]
            if all(v):
                for n in names:
                    if n.startswith("libcudnn.so"):
                        out[n] = ".".join(x.group(1) for x in v if x)
                break
    return out


def list_dirs(dirs: list[str], sites: list[str]) -> tuple[dict[str, list[str]], dict[str, dict[str, str]]]:
    """The CUDA library names each directory holds, and their versions where a file says."""
    listing: dict[str, list[str]] = {}
    versions: dict[str, dict[str, str]] = {}
    for d in dirs[:_MAX_DIRS]:
        if d in listing:
            continue
        try:
            names = sorted(n for n in os.listdir(d) if loader.CUDA_LIB.match(n))
        except OSError:
            names = []
        listing[d] = names
        if names:
            found = _lib_versions(d, names, sites)
            if found:
                versions[d] = found
    return listing, versions


def probe_environment(prefix: str, *, how: str, shell_env: Mapping[str, str], explicit: bool = False,
                      ld_cache: bytes | None = None) -> dict[str, Any] | None:
    """The ``environment`` facts of the environment at ``prefix``; None when it has no TensorFlow and was not
    named (the doctor's report then stays as it was)."""
    sites = site_packages(prefix)
    dists, tf = read_distributions(sites)
    if not tf and not explicit:
        return None
    active = prefix in (shell_env.get("VIRTUAL_ENV"), shell_env.get("CONDA_PREFIX"))
    out: dict[str, Any] = {
        "prefix": prefix, "how": how, "python": env_python(prefix), "python_version": _python_version(prefix, sites),
        "kind": ("conda" if os.path.isdir(os.path.join(prefix, "conda-meta")) else
                 "venv" if os.path.isfile(os.path.join(prefix, "pyvenv.cfg")) else "system"),
        "externally_managed": _externally_managed(prefix),
        "site_packages": sites, "distributions": dists,
        "tensorflow": sorted(tf.values(), key=lambda e: str(e["distribution"])),
        "build_info": None, "objects": [], "note": SCHEMA_NOTE,
    }
    tf_dir = next((os.path.join(sp, "tensorflow") for sp in sites if os.path.isdir(os.path.join(sp, "tensorflow"))),
                  None)
    if tf_dir:
        try:
            with open(os.path.join(tf_dir, "python", "platform", "build_info.py"), encoding="utf-8") as fh:
                out["build_info"] = parse_build_info(fh.read(1 << 16))
        except OSError:
            pass
        out["objects"] = read_objects(tf_dir)
    out["activation"] = read_activation(prefix, sites, shell_env, active=active)
    if ld_cache is None:
        try:
            with open("/etc/ld.so.cache", "rb") as fh:
                ld_cache = fh.read(16 << 20)
        except OSError:
            ld_cache = b""
    out["ld_cache"] = [list(e) for e in loader.parse_ld_so_cache(ld_cache, wanted=loader.CUDA_LIB)]
    dirs = search_dirs(out, sites)
    out["dirs"], out["versions"] = list_dirs(dirs, sites)
    # a directory reached under several names (/usr/local/cuda -> cuda-13.0): its real path, to count it once
    out["real_dirs"] = {d: r for d in out["dirs"] if out["dirs"][d] and (r := os.path.realpath(d)) != d}
    return out


def search_dirs(doc: Mapping[str, Any], sites: list[str]) -> list[str]:
    """Every directory a verdict may look in: each object's RPATH/RUNPATH, LD_LIBRARY_PATH, the defaults, the
    environment's own library directories, and the CUDA toolkits' (to name what was found instead)."""
    dirs: list[str] = []
    for obj in doc.get("objects") or []:
        origin = os.path.dirname(obj["path"])
        dirs += loader.expand_origin(obj.get("rpath"), origin) + loader.expand_origin(obj.get("runpath"), origin)
    dirs += [d for d in ((doc.get("activation") or {}).get("LD_LIBRARY_PATH") or "").split(":") if d]
    dirs += list(loader.DEFAULT_DIRS)
    dirs += [os.path.dirname(p) for _, p in doc.get("ld_cache") or []]
    prefix = str(doc.get("prefix") or "")
    dirs += [os.path.join(prefix, "lib"), *sorted(d for sp in sites for d in glob.glob(os.path.join(glob.escape(sp), "nvidia", "*", "lib")))]
    dirs += sorted(glob.glob("/usr/local/cuda*/lib64")) + sorted(glob.glob("/usr/local/cuda*/targets/*/lib"))
    return list(dict.fromkeys(os.path.normpath(d) for d in dirs))


def _python_version(prefix: str, sites: list[str]) -> str | None:
    try:
        with open(os.path.join(prefix, "pyvenv.cfg"), encoding="utf-8") as fh:
            for line in fh:
                key, _, value = line.partition("=")
                if key.strip() in ("version", "version_info"):
                    return value.strip()
    except OSError:
        pass
    for meta in glob.glob(os.path.join(glob.escape(prefix), "conda-meta", "python-[0-9]*.json")):
        m = re.search(r"python-(\d+\.\d+\.\d+)-", os.path.basename(meta))
        if m:
            return m.group(1)
    for sp in sites:
        m = re.search(r"python(\d+\.\d+)", sp)
        if m:
            return m.group(1)
    return None


def _externally_managed(prefix: str) -> bool:
    """PEP 668: an EXTERNALLY-MANAGED file in the stdlib directory of a Python that is not a venv."""
    if os.path.isfile(os.path.join(prefix, "pyvenv.cfg")):
        return False
    return bool(glob.glob(os.path.join(glob.escape(prefix), "lib", "python*", "EXTERNALLY-MANAGED")))
